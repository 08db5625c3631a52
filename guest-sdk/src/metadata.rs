//! Ownership and permission bits, which WASI does not expose: the host reads and sets
//! them for paths inside the directories granted to the call, never following a
//! symbolic link. Compiled for the machine's own target (unit tests), the functions act
//! on the machine directly.

use crate::{Error, Result};

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else: a socket, a device, a FIFO.
    Other,
}

/// Metadata of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// What it is.
    pub kind: FileKind,
    /// Permission bits, e.g. `0o644`.
    pub mode: u32,
    /// Owner's user id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Owner's name, when the user database knows the uid.
    pub owner: Option<String>,
    /// Group's name, when the group database knows the gid.
    pub group: Option<String>,
    /// Size in bytes.
    pub size: u64,
}

/// Metadata of `path` itself; `None` when nothing is there.
///
/// ```no_run
/// if let Some(stat) = wconverge_sdk::metadata::stat("/etc/motd")? {
///     println!("{:o}", stat.mode);
/// }
/// # Ok::<(), wconverge_sdk::Error>(())
/// ```
pub fn stat(path: &str) -> Result<Option<FileStat>> {
    imp::stat(path).map_err(Error::from)
}

/// The digest of the regular file at `path`, as [`crate::digest::sha256`] writes it
/// (`{sha256}3a7b…`), computed by the host without streaming the content through WASI;
/// `None` when nothing is there. A symbolic link at `path` is not followed (an error),
/// and the host refuses what it would refuse to open (a FIFO, a device, a file another
/// user could have moved in).
///
/// ```no_run
/// let digest = wconverge_sdk::metadata::sha256("/etc/motd")?;
/// # Ok::<(), wconverge_sdk::Error>(())
/// ```
pub fn sha256(path: &str) -> Result<Option<String>> {
    imp::sha256(path).map_err(Error::from)
}

/// Sets the permission bits of `path` (a direct child of a read-write grant).
pub fn set_mode(path: &str, mode: u32) -> Result<()> {
    imp::set_mode(path, mode).map_err(Error::from)
}

/// Sets the owner and/or group of `path` (names or numeric ids).
pub fn set_owner(path: &str, owner: Option<&str>, group: Option<&str>) -> Result<()> {
    imp::set_owner(path, owner, group).map_err(Error::from)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::{FileKind, FileStat};
    use crate::wit::wconverge::plugin::file_metadata as wit;

    pub(super) fn stat(path: &str) -> Result<Option<FileStat>, String> {
        Ok(wit::stat(path)?.map(|stat| FileStat {
            kind: match stat.kind {
                wit::FileKind::File => FileKind::File,
                wit::FileKind::Directory => FileKind::Directory,
                wit::FileKind::Symlink => FileKind::Symlink,
                wit::FileKind::Other => FileKind::Other,
            },
            mode: stat.mode,
            uid: stat.uid,
            gid: stat.gid,
            owner: stat.owner,
            group: stat.group,
            size: stat.size,
        }))
    }

    pub(super) fn sha256(path: &str) -> Result<Option<String>, String> {
        Ok(wit::sha256(path)?.map(|hex| format!("{{sha256}}{hex}")))
    }

    pub(super) fn set_mode(path: &str, mode: u32) -> Result<(), String> {
        wit::set_mode(path, mode)
    }

    pub(super) fn set_owner(
        path: &str,
        owner: Option<&str>,
        group: Option<&str>,
    ) -> Result<(), String> {
        wit::set_owner(path, owner, group)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{FileKind, FileStat};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    pub(super) fn stat(path: &str) -> Result<Option<FileStat>, String> {
        let metadata = match std::fs::symlink_metadata(path) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("cannot stat `{path}`: {error}")),
        };
        let file_type = metadata.file_type();
        let kind = if file_type.is_symlink() {
            FileKind::Symlink
        } else if file_type.is_dir() {
            FileKind::Directory
        } else if file_type.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        };
        Ok(Some(FileStat {
            kind,
            mode: metadata.mode() & 0o7777,
            uid: metadata.uid(),
            gid: metadata.gid(),
            owner: name_of(metadata.uid(), "/etc/passwd"),
            group: name_of(metadata.gid(), "/etc/group"),
            size: metadata.len(),
        }))
    }

    pub(super) fn sha256(path: &str) -> Result<Option<String>, String> {
        match std::fs::symlink_metadata(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("cannot stat `{path}`: {error}")),
            Ok(metadata) if !metadata.file_type().is_file() => {
                return Err(format!("`{path}` is not a regular file"));
            }
            Ok(_) => {}
        }
        std::fs::File::open(path)
            .and_then(crate::digest::sha256_reader)
            .map(Some)
            .map_err(|error| format!("cannot read `{path}`: {error}"))
    }

    pub(super) fn set_mode(path: &str, mode: u32) -> Result<(), String> {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|error| format!("cannot set the mode of `{path}`: {error}"))
    }

    pub(super) fn set_owner(
        path: &str,
        owner: Option<&str>,
        group: Option<&str>,
    ) -> Result<(), String> {
        let uid = owner.map(|owner| id_of(owner, "/etc/passwd")).transpose()?;
        let gid = group.map(|group| id_of(group, "/etc/group")).transpose()?;
        std::os::unix::fs::lchown(path, uid, gid)
            .map_err(|error| format!("cannot change the owner of `{path}`: {error}"))
    }

    /// Looks an id up in a passwd-format file (`name:x:id:...`).
    fn name_of(id: u32, database: &str) -> Option<String> {
        let text = std::fs::read_to_string(database).ok()?;
        text.lines().find_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let found = fields.nth(1)?.parse::<u32>().ok()?;
            (found == id).then(|| name.to_owned())
        })
    }

    fn id_of(name: &str, database: &str) -> Result<u32, String> {
        if let Ok(id) = name.parse::<u32>() {
            return Ok(id);
        }
        let text = std::fs::read_to_string(database)
            .map_err(|error| format!("cannot read `{database}`: {error}"))?;
        text.lines()
            .find_map(|line| {
                let mut fields = line.split(':');
                (fields.next()? == name).then(|| fields.nth(1)?.parse::<u32>().ok())?
            })
            .ok_or_else(|| format!("`{name}` is not in `{database}`"))
    }
}
