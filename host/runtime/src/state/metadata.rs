//! The `file-metadata` import: a file's status and content digest beneath the call's
//! grants, and changes of its mode and owner. Every path is resolved by descriptor
//! beneath its grant; a refusal is recorded in the audit trail.

use super::PluginState;
use crate::Phase;
use crate::bindings::file_metadata;
use crate::grants::Grant;
use crate::policy::Access;
use crate::process::PrincipalError;
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::sync::Arc;

/// How much of a file the host reads at a time to hash it (`file-metadata.sha256`),
/// checking the call's limits between reads.
const SHA256_CHUNK: usize = 64 * 1024;

/// Files smaller than this are read into a buffer on the stack.
const SHA256_SMALL: usize = 8 * 1024;

/// Why a `file-metadata` call failed. The plugin receives it as its text (the WIT's
/// error is a string); the kind says whether the host refused (and recorded it) or the
/// machine said no.
#[derive(Debug)]
pub(crate) enum MetadataError {
    /// Refused: the reason, as the audit trail recorded it (or, when the trail cannot be
    /// written, why nothing more is allowed).
    Refused(String),
    /// The path leads out of the directories granted (through a link).
    Escapes { path: String },
    /// The directory granted to the call itself: `sha256` has no content to read there,
    /// and a change may touch only what lies beneath it.
    GrantedDirectory { path: String, changing: bool },
    /// A symbolic link, which is never followed.
    Symlink { path: String },
    /// A directory, which has no content to hash.
    Directory { path: String },
    /// A mode with bits above 07777.
    ModeBits(u32),
    /// An owner or group id of -1, which `chown` reads as "leave it".
    NotAnId(String),
    /// An owner or group the databases do not know, or could not be asked about.
    Principal(PrincipalError),
    /// Hashing the file went past the call's limits.
    PastLimits { path: String },
    /// The system refused: `doing` is `open`, `stat`, `read`, `set the mode of` or
    /// `change the owner of`.
    System {
        doing: &'static str,
        path: String,
        error: std::io::Error,
    },
}

impl std::fmt::Display for MetadataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetadataError::Refused(reason) => f.write_str(reason),
            MetadataError::Escapes { path } => {
                write!(f, "`{path}` leads out of the directories granted")
            }
            MetadataError::GrantedDirectory {
                path,
                changing: false,
            } => write!(f, "`{path}` is a directory granted to this call"),
            MetadataError::GrantedDirectory {
                path,
                changing: true,
            } => write!(
                f,
                "`{path}` is a directory granted to this call; only what lies beneath it may \
                 be changed"
            ),
            MetadataError::Symlink { path } => {
                write!(f, "`{path}` is a symlink; it is never followed")
            }
            MetadataError::Directory { path } => write!(f, "`{path}` is a directory"),
            MetadataError::ModeBits(mode) => write!(f, "mode {mode:o} has bits above 07777"),
            MetadataError::NotAnId(text) => write!(f, "`{text}` is not an id"),
            MetadataError::Principal(error) => error.fmt(f),
            MetadataError::PastLimits { path } => {
                write!(f, "reading `{path}` to hash it went past the call's limits")
            }
            MetadataError::System { doing, path, error } => {
                write!(f, "cannot {doing} `{path}`: {error}")
            }
        }
    }
}

impl std::error::Error for MetadataError {}

impl From<PrincipalError> for MetadataError {
    fn from(error: PrincipalError) -> MetadataError {
        MetadataError::Principal(error)
    }
}

/// A failed system call of `doing` on `path`.
fn system(doing: &'static str, path: &str) -> impl FnOnce(rustix::io::Errno) -> MetadataError {
    move |errno| MetadataError::System {
        doing,
        path: path.to_owned(),
        error: errno.into(),
    }
}

impl PluginState {
    /// Records a refusal in the audit trail; the error the plugin gets.
    fn refusal(&self, operation: &'static str, path: &str, reason: String) -> MetadataError {
        MetadataError::Refused(self.refused(operation, path, reason))
    }

    /// Records an allowed change of file metadata; an error if the trail cannot take it.
    fn changed(&self, operation: &'static str, path: &str) -> Result<(), MetadataError> {
        let Some(trail) = self.shared.trail() else {
            return Ok(());
        };
        if let Some(why) = trail.broken() {
            return Err(self.refusal(operation, path, why.to_string()));
        }
        if trail.logs_allowed() {
            trail
                .record(self.event(operation, path.to_owned()))
                .map_err(|why| MetadataError::Refused(why.to_string()))?;
        }
        Ok(())
    }

    /// The grant containing `path`, and the rest of the path below it. The path must be
    /// absolute and normal: no `.`, `..` or empty component ever leads above a grant.
    fn locate<'a>(&self, path: &'a str) -> Result<(&Arc<Grant>, &'a str), MetadataError> {
        if !crate::walk::normal_absolute(path) {
            return Err(self.refusal(
                "file-metadata",
                path,
                format!("`{path}` is not an absolute path without `.`, `..` and empty components"),
            ));
        }
        self.grants
            .iter()
            .filter_map(|grant| {
                let guest = grant.guest.as_str();
                let rest = if path == guest {
                    Some("")
                } else if guest == "/" {
                    path.strip_prefix('/')
                } else {
                    path.strip_prefix(guest)
                        .and_then(|rest| rest.strip_prefix('/'))
                };
                rest.map(|rest| (grant, rest))
            })
            .max_by_key(|(grant, _)| grant.guest.len())
            .ok_or_else(|| {
                self.refusal(
                    "file-metadata",
                    path,
                    format!(
                        "`{path}` is outside the directories granted to this call ({})",
                        crate::files::granted(&self.grants, self.phase)
                    ),
                )
            })
    }

    /// Refuses to read what is not a regular file (a FIFO, a device) for a plugin.
    fn not_regular(&self, path: &str, kind: FileType) -> MetadataError {
        self.refusal(
            "file-metadata",
            path,
            format!(
                "`{path}` is {}; wconverge reads only regular files for plugins",
                crate::walk::kind_name(kind)
            ),
        )
    }

    /// The grant and the path below it of an entry beneath a writable grant (never the
    /// grant's directory itself).
    fn locate_writable<'a>(&self, path: &'a str) -> Result<(Arc<Grant>, &'a str), MetadataError> {
        let (grant, rest) = self.locate(path)?;
        if self.phase != Phase::Change || grant.access != Access::ReadWrite {
            return Err(self.refusal(
                "file-metadata",
                path,
                format!("`{path}` is read-only in this call"),
            ));
        }
        if rest.is_empty() {
            return Err(MetadataError::GrantedDirectory {
                path: path.to_owned(),
                changing: true,
            });
        }
        Ok((Arc::clone(grant), rest))
    }

    /// The entry at `rest` beneath `grant`, resolved by descriptor (links followed only
    /// where `walk::link_trust` allows, the entry itself never), opened as an `O_PATH`
    /// handle for a change of its metadata, with whether others can write its directory.
    fn entry(
        &self,
        operation: &'static str,
        grant: &Grant,
        rest: &str,
        path: &str,
    ) -> Result<(OwnedFd, bool), MetadataError> {
        let found = match crate::walk::beneath(&grant.fd, rest, false, &grant.canonical) {
            Ok(found) => found,
            Err(crate::walk::BeneathError::Escape) => {
                return Err(self.refusal(
                    operation,
                    path,
                    format!("`{path}` leads out of the directories granted"),
                ));
            }
            Err(crate::walk::BeneathError::Untrusted(why)) => {
                return Err(self.refusal(operation, path, why.to_string()));
            }
            Err(crate::walk::BeneathError::Errno(errno)) => {
                return Err(system("open", path)(errno));
            }
        };
        let parent = found.parent(&grant.fd);
        let parent_stat = rustix::fs::fstat(parent).map_err(system("stat", path))?;
        let made = |stat: &rustix::fs::Stat| self.paths.made(stat);
        let fd = match open_entry(parent, &parent_stat, (&found.name, path), &made) {
            Ok(Ok(fd)) => fd,
            Ok(Err(why)) => return Err(self.refusal(operation, path, why)),
            // The trail records the entry that could not be opened too: the change it
            // was for is not made.
            Err(error) => {
                self.refused(operation, path, error.to_string());
                return Err(error);
            }
        };
        Ok((
            fd,
            crate::walk::shared(parent_stat.st_uid, parent_stat.st_mode),
        ))
    }

    /// The open descriptor of the file the plugin created exclusively at `path` (`rest`
    /// beneath `grant`), if it still holds it.
    fn created_file(&self, grant: &Grant, rest: &str) -> Option<Arc<std::fs::File>> {
        let rep = self.paths.created(&grant.canonical.join(rest))?;
        let resource =
            wasmtime::component::Resource::<wasmtime_wasi::filesystem::Descriptor>::new_borrow(rep);
        match self.table.get(&resource).ok()? {
            wasmtime_wasi::filesystem::Descriptor::File(file) => Some(Arc::clone(&file.file)),
            wasmtime_wasi::filesystem::Descriptor::Dir(_) => None,
        }
    }

    fn stat_of(&mut self, path: String) -> Result<Option<file_metadata::FileStat>, MetadataError> {
        let (grant, rest) = self.locate(&path)?;
        let stat = if rest.is_empty() {
            rustix::fs::fstat(&grant.fd)
        } else {
            // The parent resolved beneath the grant by descriptor, following only the
            // links `walk::link_trust` allows; the entry itself is not followed.
            match crate::walk::beneath(&grant.fd, rest, false, &grant.canonical) {
                Ok(found) => rustix::fs::statat(
                    found.parent(&grant.fd),
                    found.name.as_os_str(),
                    AtFlags::SYMLINK_NOFOLLOW,
                ),
                Err(crate::walk::BeneathError::Errno(errno)) => Err(errno),
                Err(crate::walk::BeneathError::Escape) => {
                    return Err(MetadataError::Escapes { path });
                }
                Err(crate::walk::BeneathError::Untrusted(why)) => {
                    return Err(self.refusal("file-metadata", &path, why.to_string()));
                }
            }
        };
        let stat = match stat {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Ok(None),
            Err(error) => return Err(system("stat", &path)(error)),
        };
        let kind = FileType::from_raw_mode(stat.st_mode);
        let found = file_metadata::FileStat {
            kind: kind_of(kind),
            mode: stat.st_mode & 0o7777,
            uid: stat.st_uid,
            gid: stat.st_gid,
            owner: self.shared.user(stat.st_uid),
            group: self.shared.group(stat.st_gid),
            size: u64::try_from(stat.st_size).unwrap_or(0),
        };
        self.looked.entry = Some((path, kind));
        Ok(Some(found))
    }

    fn sha256_of(&mut self, path: String) -> Result<Option<String>, MetadataError> {
        use sha2::Digest;
        use std::io::Read;
        let (grant, rest) = self.locate(&path)?;
        if rest.is_empty() {
            return Err(MetadataError::GrantedDirectory {
                path,
                changing: false,
            });
        }
        // Resolved as `open-at` resolves it: by descriptor beneath the grant, links on
        // the way followed only where `walk::link_trust` allows, the entry itself never.
        let found = match crate::walk::beneath(&grant.fd, rest, false, &grant.canonical) {
            Ok(found) => found,
            Err(crate::walk::BeneathError::Errno(
                rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR,
            )) => return Ok(None),
            Err(crate::walk::BeneathError::Errno(errno)) => {
                return Err(system("open", &path)(errno));
            }
            Err(crate::walk::BeneathError::Escape) => {
                return Err(MetadataError::Escapes { path });
            }
            Err(crate::walk::BeneathError::Untrusted(why)) => {
                return Err(self.refusal("file-metadata", &path, why.to_string()));
            }
        };
        let parent = found.parent(&grant.fd);
        let shown = std::path::Path::new(&path);
        // A special file is refused before it is opened: opening a device can do things.
        // A `stat` of the same path earlier in this call (the usual order: metadata,
        // then content when the size matches) already told what it is.
        let looked = match &self.looked.entry {
            Some((looked, kind)) if *looked == path => Some(*kind),
            _ => None,
        };
        let seen = match (looked, found.entry) {
            (Some(kind), _) => Ok(kind),
            (None, Some(stat)) => Ok(FileType::from_raw_mode(stat.st_mode)),
            (None, None) => {
                rustix::fs::statat(parent, found.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|stat| FileType::from_raw_mode(stat.st_mode))
            }
        };
        let kind = match seen {
            Ok(kind) => kind,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(error) => return Err(system("stat", &path)(error)),
        };
        match kind {
            FileType::RegularFile => {}
            FileType::Symlink => return Err(MetadataError::Symlink { path }),
            FileType::Directory => return Err(MetadataError::Directory { path }),
            kind => return Err(self.not_regular(&path, kind)),
        }
        let file = match rustix::fs::openat(
            parent,
            found.name.as_os_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(file) => file,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(error) => return Err(system("open", &path)(error)),
        };
        let stat = rustix::fs::fstat(&file).map_err(system("stat", &path))?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if kind != FileType::RegularFile {
            // Swapped in after the look above.
            return Err(self.not_regular(&path, kind));
        }
        // The granted directory's status is looked at once a call; a directory beneath
        // it each time.
        let grant_key = Arc::as_ptr(grant) as usize;
        let parent_stat = match self.looked.grant_dir {
            Some((key, stat)) if key == grant_key && found.parent.is_none() => stat,
            _ => {
                let stat = rustix::fs::fstat(parent).map_err(system("stat", &path))?;
                if found.parent.is_none() {
                    self.looked.grant_dir = Some((grant_key, stat));
                }
                stat
            }
        };
        if let Some(reason) = crate::files::moved_in(&parent_stat, &stat, shown) {
            return Err(self.refusal("file-metadata", &path, reason));
        }
        let mut file = std::fs::File::from(file);
        let mut hasher = sha2::Sha256::new();
        // Most managed files are small: a buffer on the stack, touched already, for them;
        // a bigger one only for a bigger file.
        let size = usize::try_from(stat.st_size).unwrap_or(SHA256_CHUNK);
        let mut small = [0u8; SHA256_SMALL];
        let mut large = Vec::new();
        let buffer: &mut [u8] = if size < SHA256_SMALL {
            &mut small
        } else {
            large.resize(SHA256_CHUNK, 0u8);
            &mut large
        };
        let mut hashed = 0usize;
        loop {
            // The call's limits hold while the host reads for it: a huge file ends in an
            // error at the time limit, not in a call that never returns.
            if hashed >= SHA256_CHUNK && self.stop_reason().is_some() {
                return Err(MetadataError::PastLimits { path });
            }
            let read = match file.read(buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    return Err(MetadataError::System {
                        doing: "read",
                        path,
                        error,
                    });
                }
            };
            hasher.update(&buffer[..read]);
            hashed = hashed.saturating_add(read);
            // A small file read whole in one go, to exactly the size its descriptor
            // reported, with room to spare in the buffer: that was its end (a regular
            // file reads short only there), so no read is made to find it.
            if hashed == size && size < buffer.len() {
                break;
            }
        }
        Ok(Some(crate::digest::hex(&hasher.finalize())))
    }

    fn set_mode_of(&mut self, path: String, mode: u32) -> Result<(), MetadataError> {
        if mode > 0o7777 {
            return Err(MetadataError::ModeBits(mode));
        }
        let (grant, rest) = self.locate_writable(&path)?;
        let mode = Mode::from_raw_mode(mode);
        let failed = system("set the mode of", &path);
        // A file the plugin created: through its own descriptor, never by name (another
        // user who may write the directory could have put anything under that name).
        if let Some(file) = self.created_file(&grant, rest) {
            self.changed("set-mode", &path)?;
            return rustix::fs::fchmod(&*file, mode).map_err(failed);
        }
        let (fd, shared) = self.entry("set-mode", &grant, rest, &path)?;
        if shared && mode.bits() & 0o6000 != 0 {
            return Err(self.refusal(
                "set-mode",
                &path,
                format!(
                    "`{path}` is in a directory other users can write, where it could have been \
                     swapped for their file: wconverge sets set-user-ID and set-group-ID bits \
                     only on a file it writes, or in a directory only root can write"
                ),
            ));
        }
        self.changed("set-mode", &path)?;
        // chmod through the O_PATH handle's /proc entry changes exactly the inode that
        // was opened without following links (fchmod does not take O_PATH handles).
        rustix::fs::chmod(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(), mode)
            .map_err(failed)
    }

    fn set_owner_of(
        &mut self,
        path: String,
        owner: Option<String>,
        group: Option<String>,
    ) -> Result<(), MetadataError> {
        let (grant, rest) = self.locate_writable(&path)?;
        // A numeric id need not be in the databases; u32::MAX is -1, which chown reads
        // as "leave unchanged".
        let id = |text: &str,
                  lookup: &dyn Fn(&str) -> Result<u32, PrincipalError>|
         -> Result<u32, MetadataError> {
            match text.parse::<u32>() {
                Ok(u32::MAX) => Err(MetadataError::NotAnId(text.to_owned())),
                Ok(id) => Ok(id),
                Err(_) => Ok(lookup(text)?),
            }
        };
        let uid = owner
            .as_deref()
            .map(|owner| {
                id(owner, &|name| {
                    crate::process::lookup_user(name).map(|user| user.uid.as_raw())
                })
            })
            .transpose()?;
        let gid = group
            .as_deref()
            .map(|group| {
                id(group, &|name| {
                    crate::process::lookup_group(name).map(|entry| entry.gid.as_raw())
                })
            })
            .transpose()?;
        let uid = uid.map(rustix::fs::Uid::from_raw);
        let gid = gid.map(rustix::fs::Gid::from_raw);
        let failed = system("change the owner of", &path);
        if let Some(file) = self.created_file(&grant, rest) {
            self.changed("set-owner", &path)?;
            return rustix::fs::fchown(&*file, uid, gid).map_err(failed);
        }
        let (fd, _) = self.entry("set-owner", &grant, rest, &path)?;
        self.changed("set-owner", &path)?;
        // Changing the owner clears set-user-ID and set-group-ID bits (for root too,
        // since Linux 2.2.13), so a provider that sets the mode first and the owner
        // second never leaves a set-ID file of the wrong owner.
        rustix::fs::chownat(&fd, "", uid, gid, AtFlags::EMPTY_PATH).map_err(failed)
    }
}

fn kind_of(file_type: FileType) -> file_metadata::FileKind {
    match file_type {
        FileType::RegularFile => file_metadata::FileKind::File,
        FileType::Directory => file_metadata::FileKind::Directory,
        FileType::Symlink => file_metadata::FileKind::Symlink,
        _ => file_metadata::FileKind::Other,
    }
}

/// Opens the entry `name` of the directory `parent` as an `O_PATH` handle on the entry
/// itself, for a change of its metadata, and refuses (the inner error, the reason)
/// anything but a regular file or a directory (never a symlink), a file another user
/// could have moved in, and a file with other hard links in a directory other users can
/// write (the other link could be any file of the machine).
fn open_entry(
    parent: rustix::fd::BorrowedFd<'_>,
    parent_stat: &rustix::fs::Stat,
    (name, path): (&std::ffi::OsStr, &str),
    made: &dyn Fn(&rustix::fs::Stat) -> bool,
) -> Result<Result<OwnedFd, String>, MetadataError> {
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(system("open", path))?;
    let stat = rustix::fs::fstat(&fd).map_err(system("stat", path))?;
    let shown = std::path::Path::new(path);
    // A directory this instance made is its own, whoever may write its parent.
    if !made(&stat)
        && let Some(reason) = crate::files::moved_in(parent_stat, &stat, shown)
    {
        return Ok(Err(reason));
    }
    Ok(match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => match crate::files::other_links(parent_stat, &stat, shown) {
            Some(reason) => Err(reason),
            None => Ok(fd),
        },
        FileType::Directory => Ok(fd),
        FileType::Symlink => Err(format!("`{path}` is a symlink; it is never followed")),
        kind => Err(format!(
            "`{path}` is {}; wconverge changes only regular files and directories",
            crate::walk::kind_name(kind)
        )),
    })
}

impl PluginState {
    /// Whether a read of `path` is recorded for a replay (see `replay`). A read made
    /// when no call is recorded (while the instance is made, say), or of a path longer
    /// than a replay keeps, marks the instance: what it read is not recorded.
    fn recording(&mut self, path: &str) -> bool {
        let recording = self.reads.is_some() && path.len() <= crate::replay::MAX_PATH;
        if !recording {
            self.unrecorded = true;
        }
        recording
    }

    /// Records a read; past what a replay keeps, the reads are dropped and the instance
    /// marked.
    fn recorded(&mut self, record: impl FnOnce(&mut crate::replay::Reads) -> bool) {
        if let Some(reads) = &mut self.reads
            && !record(reads)
        {
            self.reads = None;
            self.unrecorded = true;
        }
    }
}

/// The import as the plugin sees it: each error as its text.
impl file_metadata::Host for PluginState {
    fn stat(&mut self, path: String) -> Result<Option<file_metadata::FileStat>, String> {
        let recorded = self.recording(&path).then(|| path.clone());
        let answer = self.stat_of(path).map_err(|error| error.to_string());
        if let Some(path) = recorded {
            self.recorded(|reads| reads.stat(&path, &answer));
        }
        answer
    }

    fn sha256(&mut self, path: String) -> Result<Option<String>, String> {
        let recorded = self.recording(&path).then(|| path.clone());
        let answer = self.sha256_of(path).map_err(|error| error.to_string());
        if let Some(path) = recorded {
            self.recorded(|reads| reads.sha256(&path, &answer));
        }
        answer
    }

    fn set_mode(&mut self, path: String, mode: u32) -> Result<(), String> {
        self.unrecorded = true;
        self.set_mode_of(path, mode)
            .map_err(|error| error.to_string())
    }

    fn set_owner(
        &mut self,
        path: String,
        owner: Option<String>,
        group: Option<String>,
    ) -> Result<(), String> {
        self.unrecorded = true;
        self.set_owner_of(path, owner, group)
            .map_err(|error| error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_reads_as_the_plugin_gets_it() {
        let path = "/srv/app/a.conf".to_owned();
        for (error, text) in [
            (
                MetadataError::Escapes { path: path.clone() },
                "`/srv/app/a.conf` leads out of the directories granted",
            ),
            (
                MetadataError::GrantedDirectory {
                    path: "/srv/app".to_owned(),
                    changing: true,
                },
                "`/srv/app` is a directory granted to this call; only what lies beneath it \
                 may be changed",
            ),
            (
                MetadataError::ModeBits(0o17777),
                "mode 17777 has bits above 07777",
            ),
            (
                MetadataError::NotAnId("4294967295".to_owned()),
                "`4294967295` is not an id",
            ),
            (
                system("stat", &path)(rustix::io::Errno::ACCESS),
                "cannot stat `/srv/app/a.conf`: Permission denied (os error 13)",
            ),
            (
                PrincipalError::Unknown {
                    kind: "user",
                    name: "nosuchuser".to_owned(),
                }
                .into(),
                "user `nosuchuser` does not exist",
            ),
        ] {
            assert_eq!(error.to_string(), text);
        }
    }
}
