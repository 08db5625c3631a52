//! Reading a file someone hands wconverge by name (a manifest, a policy, a component):
//! opened once, without blocking and without taking a controlling terminal, then looked
//! at and read through that descriptor, only if it is a regular file, never past a cap.
//! A FIFO, a device or `/dev/zero` is refused at once, naming what it is.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// It could not be opened or read.
    Io(std::io::Error),
    /// It is not a regular file: what it is, in words ("a FIFO").
    NotRegular(&'static str),
    /// It has this many bytes, more than the cap.
    TooLarge(u64),
    /// It grew past the cap while it was read.
    Grew,
}

/// The bytes of the regular file at `path`, at most `cap` of them.
pub fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(flags.bits()).unwrap_or(0))
        .open(path)
        .map_err(ReadError::Io)?;
    let stat = rustix::fs::fstat(&file).map_err(|errno| ReadError::Io(errno.into()))?;
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    if kind != rustix::fs::FileType::RegularFile {
        return Err(ReadError::NotRegular(crate::walk::kind_name(kind)));
    }
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if size > cap {
        return Err(ReadError::TooLarge(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::Grew);
    }
    Ok(bytes)
}
