//! What the `file` and `template` plugins share: the `file` type's schema and its
//! convergence (a regular file, its content, mode and ownership), and the diff of a
//! content change. A library of the guest workspace, not a plugin: each plugin that uses
//! it links its own copy.
//!
//! Content is replaced atomically: a temporary file is created exclusively in the same
//! directory, given its final mode and owner before any content is written, filled,
//! synced, renamed over the target, and the directory is synced. The provider never
//! writes through a symbolic link: a link at the managed path is an error (the host
//! already refuses links in parent directories that neither root nor wconverge's user
//! owns, before the plugin sees anything).

mod diff;
pub mod mode;
pub mod validate_cmd;

use wconverge_sdk::metadata::{self, FileKind, FileStat};
use wconverge_sdk::{
    Attribute, Change, DataType, Error, PathAccess, Resource, Result, State, TypeSchema, Value,
    digest, log,
};

/// A file of another size than its content is hashed, for the report, up to this size;
/// beyond it, its size is what the report shows (`{size}N`).
const HASHED_WHEN_DIFFERENT: u64 = 16 << 20;

/// Mode of a new file whose resource does not set `mode`.
pub const DEFAULT_MODE: u32 = 0o644;

/// Mode of a new directory whose resource does not set `mode`.
pub const DEFAULT_DIRECTORY_MODE: u32 = 0o755;

/// The mode the resource asks for on a file (or directory) whose mode is `current`
/// (`None`: one about to be made), if it sets one that parses.
pub fn desired_mode(resource: &Resource, current: Option<u32>, directory: bool) -> Option<u32> {
    let mode = mode::Mode::parse(resource.get_str("mode")?).ok()?;
    let base = current.unwrap_or(if directory {
        DEFAULT_DIRECTORY_MODE
    } else {
        DEFAULT_MODE
    });
    Some(mode.apply(base, directory))
}

/// Puppet's `show_diff`, for `file` and `template`.
fn show_diff() -> Attribute {
    Attribute::new(
        "show_diff",
        DataType::Boolean,
        "Show a unified diff of a content change, when the new content is not sensitive \
         and the current file is world-readable text of at most 256 KiB in a directory \
         others may enter. `false` shows only the digests.",
    )
    .default(true)
    .parameter()
}

pub fn file_schema() -> TypeSchema {
    TypeSchema::new(
        "file",
        "A regular file: whether it exists, its content, mode, owner and group.",
    )
    .attribute(
        Attribute::new("path", DataType::String, "Absolute path of the file.")
            .namevar()
            .path_access(PathAccess::ReadWrite),
    )
    .attribute(
        Attribute::new(
            "ensure",
            DataType::enumeration(["file", "present", "absent"]),
            "`file`: a regular file with the declared content; `present`: a \
                     regular file, any content unless `content` is set; `absent`: no file.",
        )
        .default("file"),
    )
    .attribute(Attribute::new(
        "content",
        DataType::String,
        "The whole content. Left alone when not set.",
    ))
    .with_file_attributes()
}

/// The attributes every type that writes a file has after its content: `mode`,
/// `owner`, `group`, `backup` and `show_diff`.
pub trait FileAttributes {
    fn with_file_attributes(self) -> Self;
}

impl FileAttributes for TypeSchema {
    fn with_file_attributes(self) -> Self {
        self.attribute(Attribute::new(
            "mode",
            DataType::String,
            "Permission bits in octal, like '0644'. New files get 0644 when not set; \
             existing files keep theirs.",
        ))
        .attribute(
            Attribute::new(
                "owner",
                DataType::String,
                "Owner, a user name or numeric id. Left alone when not set.",
            )
            .refers_to("user"),
        )
        .attribute(
            Attribute::new(
                "group",
                DataType::String,
                "Group, a group name or numeric id. Left alone when not set.",
            )
            .refers_to("group"),
        )
        .attribute(
            Attribute::new(
                "backup",
                DataType::OneOf(vec![DataType::Boolean, DataType::String]),
                "A suffix such as '.bak': before the file is replaced or removed, its \
                 previous version is kept next to it under that suffix. `false` keeps \
                 nothing.",
            )
            .default(false)
            .parameter(),
        )
        .attribute(show_diff())
        .attribute(
            Attribute::new(
                "validate_cmd",
                DataType::String,
                "A command that checks new content before it replaces the file, such as \
                 '/usr/sbin/visudo -cf %': `%` (see `validate_replacement`) is the path of \
                 the new content, in a temporary file beside the real one. Split into \
                 words as a shell would and run without a shell (the program an absolute \
                 path, granted in the plugin's `programs`); killed after 120 s. Unless it \
                 exits 0, the file is left as it was and the resource fails with the \
                 command's output.",
            )
            .parameter(),
        )
        .attribute(
            Attribute::new(
                "validate_replacement",
                DataType::String,
                "What `validate_cmd` writes for the new content's path. Default: `%`.",
            )
            .parameter(),
        )
    }
}

pub fn validate_file(resource: &Resource) -> Vec<String> {
    let mut problems = Vec::new();
    match resource.get_str("path") {
        Some(path) => {
            if let Err(problem) = check_path(path) {
                problems.push(problem);
            }
        }
        None => problems.push("`path` must be a string".to_owned()),
    }
    if let Some(mode) = resource.get_str("mode")
        && let Err(problem) = mode::Mode::parse(mode)
    {
        problems.push(problem);
    }
    if let Some(suffix) = resource.get_str("backup")
        && (suffix.is_empty() || suffix.contains('/'))
    {
        problems.push(format!(
            "backup suffix `{suffix}` must be a non-empty file name suffix like '.bak'"
        ));
    }
    if resource.get_bool("backup") == Some(true) {
        problems.push("backup => true names no suffix; write a suffix like '.bak'".to_owned());
    }
    problems.extend(validate_cmd::check(resource));
    problems
}

pub fn file_current_state(resource: &Resource) -> Result<State> {
    let path = resource.require_str("path")?;
    file_state_of(resource, path, metadata::stat(path)?)
}

/// The state of the file at `path`, whose metadata (`stat`) the caller has read.
pub fn file_state_of(resource: &Resource, path: &str, stat: Option<FileStat>) -> Result<State> {
    let Some(stat) = stat else {
        return Ok(State::new().with("ensure", "absent"));
    };
    let mut state = State::new().with("ensure", kind_name(stat.kind));
    if stat.kind == FileKind::File {
        if let Some(content) = resource.get_str("content") {
            // A file of another size differs; it is hashed all the same, so a change
            // reads digest to digest, unless it is huge (or sparse): reading it would
            // cost its whole length.
            if stat.size != content.len() as u64 && stat.size > HASHED_WHEN_DIFFERENT {
                state.set("content", format!("{{size}}{}", stat.size));
            } else {
                // A file the host will not let it read (one another user could have put
                // there) is not compared: it is replaced with the declared content.
                // Hashed by the host: the content never streams through WASI.
                match metadata::sha256(path) {
                    Ok(Some(digest)) => state.set("content", digest),
                    // Gone since the look above.
                    Ok(None) => return Ok(State::new().with("ensure", "absent")),
                    Err(error) => {
                        log::warning(&format!(
                            "cannot read `{path}` to compare it ({error}); it is replaced \
                             with the declared content"
                        ));
                        state.set("content", "{unread}");
                    }
                }
            }
        }
        record_metadata(resource, &mut state, &stat);
    }
    Ok(state)
}

pub fn file_plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
    let path = resource.require_str("path")?;
    let ensure = resource.get_str("ensure").unwrap_or("file");
    let current_kind = current.get_str("ensure").unwrap_or("absent");
    if ensure == "absent" {
        return match current_kind {
            "absent" => Ok(vec![]),
            "directory" => Err(Error::new(format!(
                "`{path}` is a directory; the file type does not remove directories"
            ))),
            kind => Ok(vec![Change::new(
                "ensure",
                Some(kind.into()),
                Some("absent".into()),
                "removed",
            )]),
        };
    }
    match current_kind {
        "absent" => {
            let mut message = "created".to_owned();
            match resource.get("content") {
                // Not even a digest of a secret goes into the report.
                Some(content) if content.is_sensitive() => {
                    message.push_str(" with sensitive content");
                }
                Some(content) => message.push_str(&format!(
                    " with content {}",
                    digest::sha256(content.as_str().unwrap_or_default().as_bytes())
                )),
                None => {}
            }
            let mode = desired_mode(resource, None, false).unwrap_or(DEFAULT_MODE);
            message.push_str(&format!(", mode {}", format_mode(mode)));
            Ok(vec![Change::new(
                "ensure",
                Some("absent".into()),
                Some(ensure.into()),
                message,
            )])
        }
        "file" => Ok(metadata_and_content_changes(resource, current)),
        "link" => Err(Error::new(format!(
            "`{path}` is a symbolic link; wconverge does not write through links: \
                 remove it, or manage a file at the path it points to"
        ))),
        "directory" => Err(Error::new(format!(
            "`{path}` is a directory; remove it or manage a file at another path"
        ))),
        other => Err(Error::new(format!(
            "`{path}` is a {other}, not a regular file; remove it first"
        ))),
    }
}

pub fn file_apply(resource: &Resource, changes: &[Change]) -> Result<()> {
    let path = resource.require_str("path")?;
    let ensure = resource.get_str("ensure").unwrap_or("file");
    let backup = resource.get_str("backup");
    // Look again rather than trusting the plan: something may have appeared at the
    // path since, and a link must never be written through.
    let existing = metadata::stat(path)?;
    if ensure == "absent" {
        return match existing {
            None => Ok(()),
            Some(stat) if stat.kind == FileKind::Directory => Err(Error::new(format!(
                "`{path}` is a directory; the file type does not remove directories"
            ))),
            Some(stat) => remove(path, stat.kind, backup),
        };
    }
    if let Some(stat) = &existing
        && stat.kind != FileKind::File
    {
        return Err(Error::new(format!(
            "`{path}` became a {} after it was inspected; nothing was written",
            kind_name(stat.kind)
        )));
    }
    let rewrite = existing.is_none()
        || changes
            .iter()
            .any(|change| change.attribute == "content" || change.attribute == "ensure");
    if rewrite {
        let content = match resource.get_str("content") {
            Some(content) => content.as_bytes().to_vec(),
            // `present` without content, and a file appeared since the plan: any
            // content will do, so it keeps its own (it is not copied: whatever is at the
            // path now could be another file's link).
            None if existing.is_some() => return set_metadata(resource, path, existing.as_ref()),
            None => Vec::new(),
        };
        write_atomically(resource, path, &content, existing.as_ref())
    } else {
        match set_metadata(resource, path, existing.as_ref()) {
            // The host changes no file in place that another user could have put there
            // (or that has other links there): with its content known, it is replaced.
            Err(error) if error.message().contains("in place") => {
                match resource.get_str("content") {
                    Some(content) => {
                        log::warning(&format!(
                            "{}; replacing it with the declared content",
                            error.message()
                        ));
                        write_atomically(resource, path, content.as_bytes(), existing.as_ref())
                    }
                    None => Err(error),
                }
            }
            other => other,
        }
    }
}

/// The text of a file of entries (a hosts file, an authorized_keys), empty when it does
/// not exist. Anything but a regular file is refused, never read through: a link in a
/// directory another user owns could point anywhere.
pub fn read_entries(path: &str) -> Result<String> {
    if let Some(stat) = metadata::stat(path)?
        && stat.kind != FileKind::File
    {
        return Err(Error::new(format!(
            "`{path}` is not a regular file (a link, say, which its directory's owner could \
             have put there); wconverge does not read or write through it: remove it"
        )));
    }
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(error) => Err(Error::new(format!("cannot read `{path}`: {error}"))),
    }
}

/// `text` with the lines `ours` recognizes replaced by `line` (at the place of the first
/// of them, or at the end), or removed when `line` is `None`; other lines stay as they
/// are.
pub fn replace_entry(text: &str, ours: impl Fn(&str) -> bool, line: Option<String>) -> String {
    let mut lines: Vec<&str> = Vec::new();
    let mut placed = false;
    for existing in text.lines() {
        if !ours(existing) {
            lines.push(existing);
        } else if let Some(line) = line.as_deref().filter(|_| !placed) {
            lines.push(line);
            placed = true;
        }
    }
    if let Some(line) = line.as_deref().filter(|_| !placed) {
        lines.push(line);
    }
    let mut content = lines.join("\n");
    if !content.is_empty() {
        content.push('\n');
    }
    content
}

/// A path the file type can manage: absolute, normalized, not a directory name.
pub fn check_path(path: &str) -> std::result::Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!(
            "path `{path}` is not absolute; file paths must start with `/`"
        ));
    }
    if path == "/" || path.ends_with('/') {
        return Err(format!("path `{path}` names a directory, not a file"));
    }
    if path
        .split('/')
        .any(|component| component == ".." || component == ".")
    {
        return Err(format!(
            "path `{path}` contains `.` or `..`; write the path without them"
        ));
    }
    if path.contains("//") {
        return Err(format!("path `{path}` contains an empty component (`//`)"));
    }
    Ok(())
}

pub fn parse_mode(mode: &str) -> Option<u32> {
    if mode.is_empty() || mode.len() > 5 || !mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    u32::from_str_radix(mode, 8)
        .ok()
        .filter(|mode| *mode <= 0o7777)
}

pub fn format_mode(mode: u32) -> String {
    format!("{mode:04o}")
}

pub fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
        FileKind::Symlink => "link",
        FileKind::Other => "special file",
    }
}

/// Records the metadata of the file that `resource` manages, as Puppet retrieves a
/// resource's properties: the owner and the group only when the resource sets them (a
/// no-op then passes four values fewer a file between the plugin and the host); the
/// mode always, since whether a content's diff may be shown depends on it.
pub fn record_metadata(resource: &Resource, state: &mut State, stat: &FileStat) {
    state.set("mode", format_mode(stat.mode));
    if resource.get("owner").is_some() {
        state.set(
            "owner",
            stat.owner.clone().unwrap_or_else(|| stat.uid.to_string()),
        );
        state.set("owner_id", i64::from(stat.uid));
    }
    if resource.get("group").is_some() {
        state.set(
            "group",
            stat.group.clone().unwrap_or_else(|| stat.gid.to_string()),
        );
        state.set("group_id", i64::from(stat.gid));
    }
}

/// Whether `desired` (a name or numeric id) names the observed owner or group.
pub fn same_principal(desired: &str, current_name: Option<&str>, current_id: Option<i64>) -> bool {
    match desired.parse::<i64>() {
        Ok(id) => current_id == Some(id),
        Err(_) => current_name == Some(desired),
    }
}

fn metadata_and_content_changes(resource: &Resource, current: &State) -> Vec<Change> {
    let mut changes = Vec::new();
    if let Some(content) = resource.get_str("content") {
        let desired = digest::sha256(content.as_bytes());
        let observed = current.get_str("content").unwrap_or_default();
        if desired != observed {
            let message = format!("content changed '{observed}' to '{desired}'");
            let secret = resource.get("content").is_some_and(Value::is_sensitive);
            // Only what anyone on the machine may read anyway: the current file must be
            // world-readable (a private file may hold what a sensitive value put there)...
            let public = current
                .get_str("mode")
                .and_then(parse_mode)
                .is_some_and(|mode| mode & 0o004 != 0)
                && resource.get_str("path").is_some_and(|path| {
                    // ... in a directory others may enter (the plugin sees no further up).
                    let (dir, _) = split_path(path);
                    metadata::stat(dir)
                        .ok()
                        .flatten()
                        .is_some_and(|stat| stat.mode & 0o001 != 0)
                });
            let mut change = Change::new(
                "content",
                Some(observed.into()),
                Some(desired.clone().into()),
                message,
            );
            if !secret
                && public
                && resource.get_bool("show_diff") != Some(false)
                && let Some(path) = resource.get_str("path")
                && let Some(diff) = diff::unified(path, content)
            {
                change = change.with_diff(wconverge_sdk::Diff::Unified(diff));
            }
            changes.push(change);
        }
    }
    let current_mode = current.get_str("mode").and_then(parse_mode);
    if let Some(mode) = desired_mode(resource, current_mode, false) {
        let desired = format_mode(mode);
        let observed = current.get_str("mode").unwrap_or_default();
        if desired != observed {
            changes.push(Change::new(
                "mode",
                Some(observed.into()),
                Some(desired.clone().into()),
                format!("mode changed '{observed}' to '{desired}'"),
            ));
        }
    }
    for (attribute, id_key) in [("owner", "owner_id"), ("group", "group_id")] {
        if let Some(desired) = resource.get_str(attribute) {
            let observed = current.get_str(attribute);
            let observed_id = current.get(id_key).and_then(Value::as_integer);
            if !same_principal(desired, observed, observed_id) {
                let observed = observed.unwrap_or_default();
                changes.push(Change::new(
                    attribute,
                    Some(observed.into()),
                    Some(desired.into()),
                    format!("{attribute} changed '{observed}' to '{desired}'"),
                ));
            }
        }
    }
    changes
}

pub fn split_path(path: &str) -> (&str, &str) {
    let slash = path.rfind('/').expect("validated paths are absolute");
    let dir = if slash == 0 { "/" } else { &path[..slash] };
    (dir, &path[slash + 1..])
}

pub fn backup_path(path: &str, suffix: &str) -> String {
    format!("{path}{suffix}")
}

fn remove(path: &str, kind: FileKind, backup: Option<&str>) -> Result<()> {
    match backup {
        // Renaming keeps the old inode whole: the backup is the file as it was.
        Some(suffix) if kind == FileKind::File => {
            std::fs::rename(path, backup_path(path, suffix))
                .map_err(|error| Error::new(format!("cannot back up `{path}`: {error}")))?;
        }
        _ => std::fs::remove_file(path)
            .map_err(|error| Error::new(format!("cannot remove `{path}`: {error}")))?,
    }
    sync_dir(split_path(path).0)
}

/// Owner first, then mode: changing the owner clears set-user-ID and set-group-ID bits,
/// so the other order would never converge a set-ID file. (In a directory other users
/// can write, the host refuses set-ID bits on a file it did not create, which they
/// could have swapped in.)
pub fn set_metadata(resource: &Resource, path: &str, existing: Option<&FileStat>) -> Result<()> {
    let owner = resource.get_str("owner");
    let group = resource.get_str("group");
    if owner.is_some() || group.is_some() {
        metadata::set_owner(path, owner, group)?;
    }
    let directory = existing.is_some_and(|stat| stat.kind == FileKind::Directory);
    if let Some(mode) = desired_mode(resource, existing.map(|stat| stat.mode), directory) {
        metadata::set_mode(path, mode)?;
    }
    Ok(())
}

/// A name no one else will pick: `.motd.wcv-<random>` next to `motd`.
pub fn temporary_path(dir: &str, name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let dir = if dir == "/" { "" } else { dir };
    format!("{dir}/.{name}.wcv-{random:016x}")
}

pub fn write_atomically(
    resource: &Resource,
    path: &str,
    content: &[u8],
    existing: Option<&FileStat>,
) -> Result<()> {
    write_atomically_from(resource, path, &mut &content[..], existing)
}

/// Replaces `path` with what `content` reads, atomically, with the resource's owner,
/// group and mode (the existing file's where the resource sets none) set before the
/// first byte is written.
pub fn write_atomically_from(
    resource: &Resource,
    path: &str,
    content: &mut dyn std::io::Read,
    existing: Option<&FileStat>,
) -> Result<()> {
    let (dir, name) = split_path(path);
    let (temporary, mut file) = create_temporary(dir, name)?;
    let result = fill_and_rename(resource, path, &temporary, &mut file, content, existing);
    if result.is_err() {
        // Leave nothing half-written behind.
        drop(file);
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

fn create_temporary(dir: &str, name: &str) -> Result<(String, std::fs::File)> {
    let mut last_error = None;
    for _ in 0..8 {
        let temporary = temporary_path(dir, name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
        {
            Ok(file) => return Ok((temporary, file)),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                last_error = Some(error);
            }
            Err(error) => {
                return Err(Error::new(format!(
                    "cannot create a temporary file in `{dir}`: {error}"
                )));
            }
        }
    }
    Err(Error::new(format!(
        "cannot create a temporary file in `{dir}`: {}",
        last_error.map_or_else(String::new, |error| error.to_string())
    )))
}

fn fill_and_rename(
    resource: &Resource,
    path: &str,
    temporary: &str,
    file: &mut std::fs::File,
    content: &mut dyn std::io::Read,
    existing: Option<&FileStat>,
) -> Result<()> {
    // Final owner and mode first, so the content is never readable by anyone the final
    // file would not allow. The host sets them through the descriptor of the file this
    // plugin created, never by name; the owner comes first, since changing it clears
    // set-ID bits.
    let owner = resource
        .get_str("owner")
        .map(str::to_owned)
        .or(existing.map(|stat| stat.uid.to_string()));
    let group = resource
        .get_str("group")
        .map(str::to_owned)
        .or(existing.map(|stat| stat.gid.to_string()));
    if owner.is_some() || group.is_some() {
        metadata::set_owner(temporary, owner.as_deref(), group.as_deref())?;
    }
    let mode = desired_mode(resource, existing.map(|stat| stat.mode), false)
        .or(existing.map(|stat| stat.mode))
        .unwrap_or(DEFAULT_MODE);
    metadata::set_mode(temporary, mode)?;
    std::io::copy(content, file)
        .and_then(|_| file.sync_all())
        .map_err(|error| Error::new(format!("cannot write `{temporary}`: {error}")))?;
    validate_cmd::run(resource, path, temporary)?;
    if let (Some(suffix), Some(_)) = (resource.get_str("backup"), existing) {
        let backup = backup_path(path, suffix);
        match std::fs::remove_file(&backup) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(Error::new(format!(
                    "cannot replace the backup `{backup}`: {error}"
                )));
            }
        }
        std::fs::hard_link(path, &backup)
            .map_err(|error| Error::new(format!("cannot back up `{path}`: {error}")))?;
        log::info(&format!("kept the previous content as `{backup}`"));
    }
    // The content is durable (synced above) before the rename makes it the file's: a
    // crash leaves the old file or the new one. The directory is not synced here: the
    // host syncs each directory a run changed once, at its end, rather than once per
    // file.
    std::fs::rename(temporary, path)
        .map_err(|error| Error::new(format!("cannot rename `{temporary}` to `{path}`: {error}")))
}

pub fn sync_dir(dir: &str) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| Error::new(format!("cannot sync directory `{dir}`: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> Resource {
        Resource::new("file", path).with("path", path)
    }

    #[test]
    fn modes_parse_in_octal_and_print_with_four_digits() {
        assert_eq!(parse_mode("0644"), Some(0o644));
        assert_eq!(parse_mode("755"), Some(0o755));
        assert_eq!(parse_mode("04755"), Some(0o4755));
        assert_eq!(parse_mode("0888"), None);
        assert_eq!(parse_mode("rw-r--r--"), None);
        assert_eq!(parse_mode("17777"), None);
        assert_eq!(format_mode(0o644), "0644");
    }

    #[test]
    fn relative_and_dotted_paths_are_invalid() {
        assert!(validate_file(&file("/etc/motd")).is_empty());
        assert_eq!(
            validate_file(&file("etc/motd")),
            vec!["path `etc/motd` is not absolute; file paths must start with `/`"]
        );
        assert_eq!(validate_file(&file("/etc/../motd")).len(), 1);
        assert_eq!(validate_file(&file("/etc/")).len(), 1);
    }

    #[test]
    fn a_bad_mode_and_a_bad_backup_are_both_reported() {
        let resource = file("/etc/motd").with("mode", "0999").with("backup", "a/b");
        assert_eq!(validate_file(&resource).len(), 2);
    }

    #[test]
    fn plan_for_a_missing_file_creates_it_with_its_digest_and_mode() {
        let resource = file("/srv/x").with("content", "hi\n");
        let changes = file_plan(&resource, &State::new().with("ensure", "absent")).expect("plan");
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].attribute, "ensure");
        assert!(
            changes[0]
                .message
                .starts_with("created with content {sha256}")
        );
        assert!(changes[0].message.ends_with("mode 0644"));
    }

    #[test]
    fn the_state_holds_the_owner_and_group_only_of_a_file_that_manages_them() {
        let stat = FileStat {
            kind: FileKind::File,
            mode: 0o640,
            uid: 0,
            gid: 42,
            owner: Some("root".to_owned()),
            group: None,
            size: 3,
        };
        let mut plain = State::new();
        record_metadata(&file("/srv/x"), &mut plain, &stat);
        assert_eq!(plain.get_str("mode"), Some("0640"));
        for unmanaged in ["owner", "owner_id", "group", "group_id"] {
            assert!(plain.get(unmanaged).is_none(), "{unmanaged}");
        }
        let mut owned = State::new();
        let managed = file("/srv/x").with("owner", "root").with("group", "42");
        record_metadata(&managed, &mut owned, &stat);
        assert_eq!(owned.get_str("owner"), Some("root"));
        assert_eq!(owned.get("owner_id").and_then(Value::as_integer), Some(0));
        // A gid the group database does not know is shown as the number.
        assert_eq!(owned.get_str("group"), Some("42"));
        assert_eq!(owned.get("group_id").and_then(Value::as_integer), Some(42));
        assert!(
            file_plan(&managed, &owned.with("ensure", "file"))
                .expect("plan")
                .is_empty()
        );
    }

    #[test]
    fn plan_compares_owner_by_name_or_by_id() {
        let current = State::new()
            .with("ensure", "file")
            .with("owner", "root")
            .with("owner_id", 0i64);
        let by_id = file("/srv/x").with("owner", "0");
        assert!(file_plan(&by_id, &current).expect("plan").is_empty());
        let by_name = file("/srv/x").with("owner", "daemon");
        assert_eq!(file_plan(&by_name, &current).expect("plan").len(), 1);
    }

    #[test]
    fn plan_refuses_a_symlink() {
        let error = file_plan(&file("/srv/x"), &State::new().with("ensure", "link"))
            .expect_err("links are refused");
        assert!(error.message().contains("symbolic link"), "{error}");
    }

    #[test]
    fn native_apply_writes_atomically_and_keeps_a_backup() {
        let dir = std::env::temp_dir().join(format!("wcv-file-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("motd");
        let path = path.to_str().expect("utf-8 temp path");
        std::fs::write(path, "old\n").expect("seed file");
        let resource = file(path)
            .with("content", "new\n")
            .with("mode", "0600")
            .with("backup", ".bak");
        let current = file_current_state(&resource).expect("state");
        let changes = file_plan(&resource, &current).expect("plan");
        assert_eq!(
            changes
                .iter()
                .map(|c| c.attribute.as_str())
                .collect::<Vec<_>>(),
            vec!["content", "mode"]
        );
        file_apply(&resource, &changes).expect("apply");
        assert_eq!(std::fs::read_to_string(path).expect("read"), "new\n");
        assert_eq!(
            std::fs::read_to_string(format!("{path}.bak")).expect("backup"),
            "old\n"
        );
        let after = file_current_state(&resource).expect("state");
        assert!(file_plan(&resource, &after).expect("plan").is_empty());
        let leftovers = std::fs::read_dir(&dir)
            .expect("list")
            .filter(|entry| {
                entry
                    .as_ref()
                    .map(|entry| entry.file_name().to_string_lossy().contains(".wcv-"))
                    .unwrap_or(false)
            })
            .count();
        assert_eq!(leftovers, 0, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
