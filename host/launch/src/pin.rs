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

use crate::Error;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The most programs a run keeps open; past it, each launch of another program opens
/// and names it for itself, as the first launch of a program does.
pub const HELD_PROGRAMS: usize = 64;

/// A program file held open.
pub struct Pinned {
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
    /// Opened by a walk that found no one but root able to change the file or the way
    /// to it (see [`open_trusted`]); a launch that needs that never reuses one opened
    /// without.
    walked: bool,
}

impl Pinned {
    /// The path the child executes: the link that names it, or its descriptor.
    /// Where it is, after symlinks, when it was opened.
    pub fn resolved(&self) -> &str {
        &self.resolved
    }

    /// Whether it is a `#!` script, which its interpreter opens again by name.
    pub fn script(&self) -> bool {
        self.script
    }

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
pub struct Programs {
    /// Dropped first: each held program removes its name before the directory goes.
    held: Mutex<HashMap<String, Arc<Pinned>>>,
    names: Option<ExecNames>,
}

impl Default for Programs {
    fn default() -> Programs {
        Programs::new()
    }
}

impl Programs {
    /// Programs that run under their own names (a private directory of links), or by
    /// their descriptors' numbers where the directory cannot be made.
    pub fn new() -> Programs {
        Programs {
            held: Mutex::new(HashMap::new()),
            names: ExecNames::create(),
        }
    }

    /// Programs that run by their descriptors' numbers.
    pub fn unnamed() -> Programs {
        Programs {
            held: Mutex::new(HashMap::new()),
            names: None,
        }
    }

    /// The file `program` names now, open: the one held since an earlier launch when
    /// the path still leads to it unchanged, else opened (and held, up to
    /// [`HELD_PROGRAMS`]). Refuses anything but an executable regular file.
    ///
    /// As root, the program is opened by a walk from `/` that refuses it when someone
    /// other than root could change the file or a directory or link on the way to it
    /// (they could swap in any program), unless the policy trusts it by name
    /// (`others_may_write`).
    pub fn pin(&self, program: &str, others_may_write: bool) -> Result<Arc<Pinned>, Error> {
        let walk = !others_may_write && rustix::process::geteuid().is_root();
        let now = Identity::of_path(program);
        {
            let mut held = self.held.lock().expect("no pin panics while holding it");
            if let (Some(now), Some(pinned)) = (now, held.get(program))
                && pinned.identity == Some(now)
                && (pinned.walked || !walk)
            {
                return Ok(Arc::clone(pinned));
            }
            // Another file, a changed one, or none: whatever was held goes.
            held.remove(program);
        }
        // Opened without the lock: a slow file system holds up this launch alone.
        let pinned = Arc::new(pin(program, self.names.as_ref(), walk)?);
        let mut held = self.held.lock().expect("no pin panics while holding it");
        if held.len() < HELD_PROGRAMS || held.contains_key(program) {
            // The latest opened is kept (another thread may have opened it meanwhile).
            held.insert(program.to_owned(), Arc::clone(&pinned));
        }
        Ok(pinned)
    }

    /// How many programs are held open.
    pub fn held(&self) -> usize {
        self.held.lock().expect("pins").len()
    }

    /// The directory of the links programs run by, if there is one.
    pub fn names_dir(&self) -> Option<&Path> {
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
fn pin(program: &str, names: Option<&ExecNames>, walk: bool) -> Result<Pinned, Error> {
    use rustix::fs::{FileType, Mode, OFlags};
    let opened = if walk {
        open_trusted(program)
    } else {
        rustix::fs::open(program, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
            .map_err(Untrusted::Errno)
    };
    let fd = opened.map_err(|error| match error {
        Untrusted::Errno(rustix::io::Errno::NOENT) => {
            Error::NotFound(format!("cannot launch `{program}`: it does not exist"))
        }
        Untrusted::Errno(error) => Error::Failed(format!("cannot launch `{program}`: {error}")),
        Untrusted::Writable(why) => Error::Refused(format!(
            "`{program}` is not launched as root: {why}, so whoever can write it can swap in \
             any program; make it root's alone, or trust it by name with \
             `others_may_write = true` on its entry in `programs` of the plugin's policy"
        )),
        Untrusted::Loop => Error::Failed(format!(
            "cannot launch `{program}`: more than {MAX_LINKS} symbolic links on the way"
        )),
    })?;
    let stat = rustix::fs::fstat(&fd)
        .map_err(|error| Error::Failed(format!("cannot launch `{program}`: {error}")))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || stat.st_mode & 0o111 == 0 {
        return Err(Error::Failed(format!(
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
        walked: walk,
    })
}

/// The most symbolic links a walk follows (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Why [`open_trusted`] did not open a program.
enum Untrusted {
    Errno(rustix::io::Errno),
    /// Someone other than root can change what the path leads to: who, and where.
    Writable(String),
    Loop,
}

/// Opens `program` (`O_PATH`) by a walk from `/`, one component at a time from the
/// descriptor of the directory before it, so that what is checked is what is opened:
/// every directory on the way, and the file, must be root's and writable by no one
/// else; a sticky directory others may write (`/tmp`) only if the entry taken from it
/// is root's (no one else can replace it there). Links are followed the same way from
/// the directory that holds them.
fn open_trusted(program: &str) -> Result<rustix::fd::OwnedFd, Untrusted> {
    use crate::walk::judged;
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let open_dir = |dir: &rustix::fd::OwnedFd, name: &str| {
        rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let root = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(Untrusted::Errno)?;
    let writable_by_others = |fd: &rustix::fd::OwnedFd, shown: &str| -> Result<bool, Untrusted> {
        let stat = rustix::fs::fstat(fd).map_err(Untrusted::Errno)?;
        if let Some(why) = judged(&stat, true) {
            return Err(Untrusted::Writable(format!("`{shown}` {why}")));
        }
        // Sticky and writable by others: what is taken from it must be root's.
        Ok(stat.st_mode & 0o1000 != 0 && stat.st_mode & 0o022 != 0)
    };
    // The directories walked so far, `/` first; what is shown in messages.
    let mut dirs = vec![(root, "/".to_owned())];
    let mut sticky = writable_by_others(&dirs[0].0, "/")?;
    let mut pending: std::collections::VecDeque<String> = program
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        match name.as_str() {
            "." => continue,
            ".." => {
                if dirs.len() > 1 {
                    dirs.pop();
                }
                let (dir, shown) = dirs.last().expect("`/` stays");
                sticky = writable_by_others(dir, shown)?;
                continue;
            }
            _ => {}
        }
        let (dir, shown_dir) = dirs.last().expect("`/` stays");
        let shown = if shown_dir == "/" {
            format!("/{name}")
        } else {
            format!("{shown_dir}/{name}")
        };
        let stat = rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(Untrusted::Errno)?;
        if sticky && stat.st_uid != 0 {
            return Err(Untrusted::Writable(format!(
                "`{shown}` belongs to uid {} in a directory everyone may write",
                stat.st_uid
            )));
        }
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(Untrusted::Loop);
                }
                let target = rustix::fs::readlinkat(dir, name.as_str(), Vec::new())
                    .map_err(Untrusted::Errno)?;
                let target = target.to_string_lossy().into_owned();
                if target.starts_with('/') {
                    dirs.truncate(1);
                    sticky = writable_by_others(&dirs[0].0, "/")?;
                }
                for component in target.split('/').filter(|c| !c.is_empty()).rev() {
                    pending.push_front(component.to_owned());
                }
            }
            FileType::Directory if !pending.is_empty() => {
                let opened = open_dir(dir, &name).map_err(Untrusted::Errno)?;
                sticky = writable_by_others(&opened, &shown)?;
                dirs.push((opened, shown));
            }
            _ if pending.is_empty() => {
                let file = rustix::fs::openat(
                    dir,
                    name.as_str(),
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(Untrusted::Errno)?;
                let opened = rustix::fs::fstat(&file).map_err(Untrusted::Errno)?;
                // The file opened is the one looked at.
                if (opened.st_dev, opened.st_ino) != (stat.st_dev, stat.st_ino) {
                    return Err(Untrusted::Writable(format!(
                        "`{shown}` changed while opened"
                    )));
                }
                if let Some(why) = judged(&opened, false) {
                    return Err(Untrusted::Writable(format!("`{shown}` {why}")));
                }
                return Ok(file);
            }
            _ => return Err(Untrusted::Errno(rustix::io::Errno::NOTDIR)),
        }
    }
    // The path ended at a directory (or `/`).
    Err(Untrusted::Errno(rustix::io::Errno::ISDIR))
}
