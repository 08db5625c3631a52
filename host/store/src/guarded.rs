//! Files of settings and secrets, read as root may read them: opened once, without
//! following a link and without blocking (a FIFO in the file's place is refused, not
//! waited on), checked by the descriptor, and read within a cap.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// What a file must be besides a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Anything (a certificate).
    Public,
    /// Settings that decide what root does (a config file): owned by root or this
    /// user, and no one else may change it.
    Settings,
    /// A secret (a password, a key): owned by root or this user, one name, and no one
    /// else may read it.
    Secret,
}

/// The file at `path`, at most `cap` bytes, if it is what `guard` asks. A refusal is an
/// [`std::io::ErrorKind::InvalidData`] error saying why and what to do, without the
/// path (the caller names it).
pub fn read_guarded(path: &Path, guard: Guard, cap: u64) -> std::io::Result<Vec<u8>> {
    let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidData, message);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(
            (rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::NONBLOCK
                | rustix::fs::OFlags::NOCTTY)
                .bits() as i32,
        )
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Err(invalid("it is not a regular file".to_owned()));
    }
    let what = if guard == Guard::Secret {
        "it holds a secret and "
    } else {
        "it "
    };
    let me = rustix::process::geteuid().as_raw();
    if guard != Guard::Public && metadata.uid() != me && metadata.uid() != 0 {
        return Err(invalid(format!(
            "{what}belongs to user {}, neither root nor the user running wconverge",
            metadata.uid()
        )));
    }
    let mode = metadata.mode() & 0o7777;
    match guard {
        Guard::Secret if metadata.nlink() != 1 => {
            return Err(invalid(format!(
                "{what}has {} names (hard links): give it one",
                metadata.nlink()
            )));
        }
        Guard::Secret if mode & 0o077 != 0 => {
            return Err(invalid(format!(
                "{what}others may read it (mode {mode:04o}): `chmod 600` it"
            )));
        }
        Guard::Settings if mode & 0o022 != 0 => {
            return Err(invalid(format!(
                "others may change it (mode {mode:04o}): `chmod go-w` it"
            )));
        }
        _ => {}
    }
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(invalid(format!("it is larger than {cap} bytes")));
    }
    Ok(bytes)
}
