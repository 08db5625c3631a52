//! Program files held open from the check to the launch, and kept open for the next
//! launches of the same program while its path still names the same, unchanged file.
//!
//! A launch runs the file opened when its request was checked (`/proc/self/fd/N` in the
//! child), whatever happens to the path in between. Opening, inspecting and naming a
//! program for each launch is most of what a guard costs beyond its shell, so a run
//! keeps each program it launched open ([`Programs`]): the next check of the same path
//! looks it up by name once (`statx`) and reuses the open file when the path leads to
//! that very inode (held open, so its number cannot be reused) through the same mount,
//! and its mode, owner, size and times are as they were; anything else (the path
//! replaced, the file written, its mode or owner changed, a mount put over it) opens it
//! again. What runs is what the path named at the check, as before.

use crate::bindings::process as wit;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The most programs a run keeps open; past it, each launch of another program opens
/// and names it for itself, as the first launch of a program does.
pub(crate) const HELD_PROGRAMS: usize = 64;

/// A program file held open.
pub(crate) struct Pinned {
    fd: rustix::fd::OwnedFd,
    /// Where it is, after symlinks, when it was opened.
    pub(super) resolved: String,
    /// A `#!` script: its interpreter opens it again by name, so it runs by name.
    pub(super) script: bool,
    /// What the file was when it was opened: a later look by name that finds the same
    /// reuses it (never, where it could not be told).
    identity: Option<Identity>,
    /// The name it runs by (see [`ExecNames`]), removed with it.
    link: Option<PathBuf>,
}

impl Pinned {
    /// The path the child executes: the link that names it, or its descriptor.
    pub(super) fn exec_path(&self) -> PathBuf {
        match &self.link {
            Some(link) => link.clone(),
            None => self.fd_path(),
        }
    }

    /// Its descriptor's path, `/proc/self/fd/N`, which names it as `N` in `ps`.
    pub(super) fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/self/fd/{}",
            rustix::fd::AsRawFd::as_raw_fd(&self.fd)
        ))
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // Before the descriptor closes (the fields drop after this): while it is open no
        // other program can be opened as the same number and named in the same slot.
        if let Some(link) = &self.link {
            let _ = std::fs::remove_file(link);
        }
    }
}

/// The file's mount, device and inode, and the attributes any change to it (content,
/// mode, owner, links) moves: mode, owner, group, size, modification and change times.
/// The mount tells a bind mount (`noexec`, say) put over the path since, which shows the
/// same device and inode (kernels before 5.8 give no mount: 0).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Identity([u64; 12]);

impl Identity {
    /// What `path` leads to now.
    fn of_path(path: &str) -> Option<Identity> {
        Identity::of(rustix::fs::statx(
            rustix::fs::CWD,
            path,
            rustix::fs::AtFlags::empty(),
            rustix::fs::StatxFlags::BASIC_STATS | rustix::fs::StatxFlags::MNT_ID,
        ))
    }

    /// What the open file `fd` is.
    fn of_file(fd: &rustix::fd::OwnedFd) -> Option<Identity> {
        Identity::of(rustix::fs::statx(
            fd,
            c"",
            rustix::fs::AtFlags::EMPTY_PATH,
            rustix::fs::StatxFlags::BASIC_STATS | rustix::fs::StatxFlags::MNT_ID,
        ))
    }

    fn of(found: rustix::io::Result<rustix::fs::Statx>) -> Option<Identity> {
        let stat = found.ok()?;
        let mount = if stat.stx_mask & rustix::fs::StatxFlags::MNT_ID.bits() != 0 {
            stat.stx_mnt_id
        } else {
            0
        };
        Some(Identity([
            mount,
            u64::from(stat.stx_dev_major),
            u64::from(stat.stx_dev_minor),
            stat.stx_ino,
            u64::from(stat.stx_mode),
            u64::from(stat.stx_uid),
            u64::from(stat.stx_gid),
            stat.stx_size,
            stat.stx_mtime.tv_sec as u64,
            u64::from(stat.stx_mtime.tv_nsec),
            stat.stx_ctime.tv_sec as u64,
            u64::from(stat.stx_ctime.tv_nsec),
        ]))
    }
}

/// The programs a run has opened, and the names they run by.
pub(crate) struct Programs {
    /// Dropped first: each held program removes its name before the directory goes.
    held: Mutex<HashMap<String, Arc<Pinned>>>,
    names: Option<ExecNames>,
}

impl Programs {
    /// Programs that run under their own names (a private directory of links), or by
    /// their descriptors' numbers where the directory cannot be made.
    pub(crate) fn new() -> Programs {
        Programs {
            held: Mutex::new(HashMap::new()),
            names: ExecNames::create(),
        }
    }

    /// Programs that run by their descriptors' numbers.
    #[cfg(test)]
    pub(crate) fn unnamed() -> Programs {
        Programs {
            held: Mutex::new(HashMap::new()),
            names: None,
        }
    }

    /// The file `program` names now, open: the one held since an earlier launch when
    /// the path still leads to it unchanged, else opened (and held, up to
    /// [`HELD_PROGRAMS`]). Refuses anything but an executable regular file.
    pub(crate) fn pin(&self, program: &str) -> Result<Arc<Pinned>, wit::LaunchError> {
        let now = Identity::of_path(program);
        {
            let mut held = self.held.lock().expect("no pin panics while holding it");
            if let (Some(now), Some(pinned)) = (now, held.get(program))
                && pinned.identity == Some(now)
            {
                return Ok(Arc::clone(pinned));
            }
            // Another file, a changed one, or none: whatever was held goes.
            held.remove(program);
        }
        // Opened without the lock: a slow file system holds up this launch alone.
        let pinned = Arc::new(pin(program, self.names.as_ref())?);
        let mut held = self.held.lock().expect("no pin panics while holding it");
        if held.len() < HELD_PROGRAMS || held.contains_key(program) {
            // The latest opened is kept (another thread may have opened it meanwhile).
            held.insert(program.to_owned(), Arc::clone(&pinned));
        }
        Ok(pinned)
    }

    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.lock().expect("pins").len()
    }

    #[cfg(test)]
    pub(crate) fn names_dir(&self) -> Option<&Path> {
        self.names.as_ref().map(|names| names.dir.as_path())
    }
}

/// Names for pinned programs: a private directory (mode 0711, this process's own) of
/// symlinks `N/NAME -> /proc/self/fd/N`. Running a pinned program through such a link
/// runs exactly the file descriptor N holds, and gives the process its own name in `ps`,
/// `top` and the kernel's audit log (the kernel names a process after the last component
/// of the path it was started by, which for `/proc/self/fd/N` would be `N`).
struct ExecNames {
    dir: PathBuf,
}

impl ExecNames {
    /// A new directory under the temporary directory; `None` if it cannot be made (a
    /// pinned program then runs as `/proc/self/fd/N`, named `N`).
    fn create() -> Option<ExecNames> {
        use std::os::unix::fs::PermissionsExt;
        let template = std::env::temp_dir().join("wconverge-exec-XXXXXX");
        let dir = nix::unistd::mkdtemp(&template).ok()?;
        let names = ExecNames { dir };
        std::fs::set_permissions(&names.dir, std::fs::Permissions::from_mode(0o711)).ok()?;
        Some(names)
    }

    /// A link named like `program` to the file `fd` holds.
    fn link(&self, fd: i32, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let name = Path::new(program).file_name()?;
        let slot = self.dir.join(fd.to_string());
        match std::fs::DirBuilder::new().mode(0o711).create(&slot) {
            Ok(()) => {
                std::fs::set_permissions(&slot, std::fs::Permissions::from_mode(0o711)).ok()?;
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        let path = slot.join(name);
        // A link left by an earlier program with the same descriptor and name (one that
        // was not held removes its own when it is done; this is for one that could not).
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(format!("/proc/self/fd/{fd}"), &path).ok()?;
        Some(path)
    }
}

impl Drop for ExecNames {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Opens `program`, so a launch runs this very file, and names it in `names`; refuses
/// anything but an executable regular file.
fn pin(program: &str, names: Option<&ExecNames>) -> Result<Pinned, wit::LaunchError> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::open(program, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(
        |error| {
            if error == rustix::io::Errno::NOENT {
                wit::LaunchError::NotFound(format!("cannot launch `{program}`: it does not exist"))
            } else {
                wit::LaunchError::Failed(format!("cannot launch `{program}`: {error}"))
            }
        },
    )?;
    let stat = rustix::fs::fstat(&fd)
        .map_err(|error| wit::LaunchError::Failed(format!("cannot launch `{program}`: {error}")))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || stat.st_mode & 0o111 == 0 {
        return Err(wit::LaunchError::Failed(format!(
            "cannot launch `{program}`: it is not an executable file"
        )));
    }
    // Before anything is read of it: a change after this is a change the next look sees.
    let identity = Identity::of_file(&fd);
    let raw = rustix::fd::AsRawFd::as_raw_fd(&fd);
    let proc_path = format!("/proc/self/fd/{raw}");
    let resolved = std::fs::read_link(&proc_path)
        .map_or_else(|_| program.to_owned(), |path| path.display().to_string());
    // A file that cannot be read cannot be a script: its interpreter could not read it.
    let script = std::fs::File::open(&proc_path)
        .and_then(|mut file| {
            let mut magic = [0u8; 2];
            file.read_exact(&mut magic).map(|()| magic == *b"#!")
        })
        .unwrap_or(false);
    // A script runs by name: it needs none.
    let link = names
        .filter(|_| !script)
        .and_then(|names| names.link(raw, program));
    Ok(Pinned {
        fd,
        resolved,
        script,
        identity,
        link,
    })
}
