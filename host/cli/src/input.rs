//! Reading what the operator hands wconverge (manifests, catalogs, policies, fact
//! files): only regular files, never more than a cap. A FIFO, a device or `/dev/zero`
//! given as a manifest is refused at once, naming what it is, instead of blocking the
//! run or being read until memory runs out.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest manifest file.
pub(crate) const MANIFEST_BYTES: u64 = 64 << 20;
/// The largest catalog (a catalog of the 200,000 resources a compile may declare).
pub(crate) const CATALOG_BYTES: u64 = 512 << 20;
/// The largest policy file.
pub(crate) const POLICY_BYTES: u64 = 4 << 20;
/// The largest file of facts.
pub(crate) const FACTS_BYTES: u64 = 64 << 20;

/// The text of the file at `path`, which must be a regular file of at most `cap` bytes
/// holding UTF-8; `what` names it in errors (`manifest`, `catalog`...).
pub(crate) fn read_text(path: &Path, what: &str, cap: u64) -> Result<String, String> {
    let shown = path.display();
    // Non-blocking, so that opening a FIFO with no writer returns at once; no
    // controlling terminal is taken from a device.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(open_flags())
        .open(path)
        .map_err(|error| format!("cannot read the {what} `{shown}`: {error}"))?;
    let metadata = file
        .metadata()
        .map_err(|error| format!("cannot read the {what} `{shown}`: {error}"))?;
    if !metadata.is_file() {
        return Err(format!(
            "the {what} `{shown}` is {}; a {what} is read only from a regular file",
            kind(&metadata)
        ));
    }
    if metadata.len() > cap {
        return Err(format!(
            "the {what} `{shown}` has {} bytes; a {what} may have at most {cap} ({} MiB)",
            metadata.len(),
            cap >> 20
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read the {what} `{shown}`: {error}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!(
            "the {what} `{shown}` grew past {cap} bytes ({} MiB) while it was read",
            cap >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|error| {
        format!(
            "the {what} `{shown}` is not UTF-8 text (byte {} is not)",
            error.utf8_error().valid_up_to()
        )
    })
}

fn open_flags() -> i32 {
    i32::try_from((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits()).unwrap_or(0)
}

/// What a file that is not a regular file is, in words.
fn kind(metadata: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("site.wcv");
        std::fs::write(&path, "notify { 'hi': }\n").expect("file");
        assert_eq!(
            read_text(&path, "manifest", 100).as_deref(),
            Ok("notify { 'hi': }\n")
        );
        let error = read_text(&path, "manifest", 4).expect_err("too long");
        assert!(
            error.contains("has 17 bytes; a manifest may have at most 4"),
            "{error}"
        );
        let error = read_text(Path::new("/dev/zero"), "manifest", 100).expect_err("device");
        assert!(
            error.ends_with("is a character device; a manifest is read only from a regular file"),
            "{error}"
        );
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
        let error = read_text(&fifo, "catalog", 100).expect_err("fifo");
        assert!(error.contains("is a FIFO"), "{error}");
    }
}
