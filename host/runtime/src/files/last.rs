//! How WASI reads the last component of a path that a change acts on, as wasmtime-wasi
//! (through cap-std) reads it, so a plugin written for WASI gets WASI's answers from
//! wconverge's own descriptor walk.
//!
//! - A path that ends in `/` or `/.` names a directory: everything is followed, the last
//!   link too (never out of the start), and the change acts on `.` in it. A link to a
//!   directory outside the grant is an escape (`not-permitted`), not the link itself.
//! - `rename`, `symlink` and `create-directory` ignore trailing slashes first; `rename`
//!   then puts one back on its old name, so the kernel refuses a link or file there
//!   (`not-directory`), as it does for wasmtime, and `symlink` on its new name, so the
//!   kernel answers `no-entry` where nothing is and `exist` where something is.
//! - `open-at` of a path that ends in `/` opens only a directory, following the last
//!   link (never out of the start); it creates nothing there (`is-directory`).
//! - With `symlink-follow` (`set-times`), the whole path is followed.

use super::*;

/// How the last component of a path is read for a change.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Last {
    /// As it is (`link`, `unlink`, `remove-directory`, `set-times` without following).
    AsWritten,
    /// Trailing slashes ignored (`create-directory`, `rename`'s new name).
    SlashesIgnored,
    /// Trailing slashes ignored, then one put back on the name (`rename`'s old name,
    /// `symlink`'s new one).
    SlashKept,
    /// Every link followed, the last one too (`set-times` with `symlink-follow`).
    Followed,
}

impl View<'_> {
    /// A symbolic link to `contents` at `path` beneath the directory `fd`. Unlike
    /// wasmtime-wasi's, an absolute target is allowed: a link is data here, and nothing
    /// of wconverge follows it unless `walk::link_trust` and the policy allow (an
    /// absolute link is an escape for every resolution beneath a grant).
    pub(super) fn symlink(
        &mut self,
        fd: &Resource<Descriptor>,
        contents: &str,
        path: &str,
        target: &Path,
    ) -> FsResult<()> {
        let dir = self.directory(fd)?;
        if dir.perms.write_not_permitted() {
            return Err(AsyncErrorCode::NotPermitted.into());
        }
        // The kernel judges a trailing slash on the new name (`no-entry` where nothing is,
        // `exist` where something is), after the walk: the name is never followed. But a
        // file there is `not-directory`, as WASI answers.
        let found = self.last_component("symlink", &dir, fd, path, target, Last::SlashKept)?;
        if let Some(name) = found.name.as_encoded_bytes().strip_suffix(b"/")
            && let Ok(stat) = rustix::fs::statat(
                found.parent(&*dir.dir),
                name,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            && !matches!(
                FileType::from_raw_mode(stat.st_mode),
                FileType::Directory | FileType::Symlink
            )
        {
            return Err(AsyncErrorCode::NotDirectory.into());
        }
        rustix::fs::symlinkat(contents, found.parent(&*dir.dir), &found.name)
            .map_err(std::io::Error::from)?;
        Ok(())
    }

    /// The directory that holds the entry a change at `path` acts on, and its name,
    /// read by `rule`.
    pub(super) fn last_component(
        &mut self,
        operation: &'static str,
        dir: &Dir,
        fd: &Resource<Descriptor>,
        path: &str,
        target: &Path,
        rule: Last,
    ) -> FsResult<crate::walk::Beneath> {
        let had_slash = path.len() > 1 && path.ends_with('/');
        let path = match rule {
            Last::SlashesIgnored | Last::SlashKept => {
                let stripped = path.trim_end_matches('/');
                if stripped.is_empty() { path } else { stripped }
            }
            Last::AsWritten | Last::Followed => path,
        };
        if rule == Last::Followed {
            return self.beneath(operation, dir, fd, (path, target, true));
        }
        let names_directory = path.ends_with('/') || path.ends_with("/.");
        if !names_directory {
            let mut found = self.beneath(operation, dir, fd, (path, target, false))?;
            if rule == Last::SlashKept && had_slash {
                found.name.push("/");
            }
            return Ok(found);
        }
        // The directory itself, followed to (never out of the start): the change acts on
        // `.` there, which the system refuses as it refuses it for wasmtime.
        let mut directory = path;
        while let Some(shorter) = directory
            .strip_suffix("/.")
            .or_else(|| directory.strip_suffix('/'))
        {
            directory = shorter;
        }
        let directory = if directory.is_empty() { "." } else { directory };
        let found = self.beneath(operation, dir, fd, (directory, target, true))?;
        let opened = rustix::fs::openat(
            found.parent(&*dir.dir),
            &found.name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        Ok(crate::walk::Beneath {
            parent: Some(opened),
            name: std::ffi::OsString::from("."),
            entry: None,
        })
    }
}
