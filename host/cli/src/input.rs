//! Reading what the operator hands wconverge (manifests, catalogs, policies, fact
//! files): only regular files, never more than a cap. A FIFO, a device or `/dev/zero`
//! given as a manifest is refused at once, naming what it is, instead of blocking the
//! run or being read until memory runs out.

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
    let read = wconverge_runtime::read_regular(path, cap);
    read_text_of(read, &path.display().to_string(), what, cap)
}

/// As [`read_text`], `None` when there is nothing at `path`: the file is opened once,
/// and whether it exists is what that open says (never a look by name first).
pub(crate) fn read_text_if_any(
    path: &Path,
    what: &str,
    cap: u64,
) -> Option<Result<String, String>> {
    let shown = path.display();
    let bytes = match wconverge_runtime::read_regular(path, cap) {
        Err(wconverge_runtime::ReadError::Io(error))
            if error.kind() == std::io::ErrorKind::NotFound =>
        {
            return None;
        }
        read => read,
    };
    Some(read_text_of(bytes, &shown.to_string(), what, cap))
}

fn read_text_of(
    bytes: Result<Vec<u8>, wconverge_runtime::ReadError>,
    shown: &str,
    what: &str,
    cap: u64,
) -> Result<String, String> {
    let bytes = bytes.map_err(|error| match error {
        wconverge_runtime::ReadError::Io(error) => {
            format!("cannot read the {what} `{shown}`: {error}")
        }
        wconverge_runtime::ReadError::NotRegular(kind) => {
            format!("the {what} `{shown}` is {kind}; a {what} is read only from a regular file")
        }
        wconverge_runtime::ReadError::TooLarge(bytes) => format!(
            "the {what} `{shown}` has {bytes} bytes; a {what} may have at most {cap} ({} MiB)",
            cap >> 20
        ),
        wconverge_runtime::ReadError::Grew => format!(
            "the {what} `{shown}` grew past {cap} bytes ({} MiB) while it was read",
            cap >> 20
        ),
    })?;
    String::from_utf8(bytes).map_err(|error| {
        format!(
            "the {what} `{shown}` is not UTF-8 text (byte {} is not)",
            error.utf8_error().valid_up_to()
        )
    })
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
