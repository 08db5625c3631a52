//! The steps a `file` resource's plan is made of: how each is reported and applied.

use wconverge_file_core::{
    DEFAULT_DIRECTORY_MODE, DEFAULT_MODE, desired_mode, file_apply, format_mode, kind_name,
    split_path, sync_dir, temporary_path, write_atomically_from,
};
use wconverge_sdk::metadata::{self, FileKind, FileStat};
use wconverge_sdk::{Change, Error, Resource, Result, Value};

/// One step towards the resource's state.
#[derive(Debug)]
pub(crate) enum Action {
    /// The managed path as a regular file, as `wconverge-file-core` converges it.
    Regular {
        resource: Resource,
        changes: Vec<Change>,
    },
    MakeDirectory {
        path: String,
        top: bool,
    },
    /// A copy of the regular file `source` at `path`.
    Copy {
        path: String,
        source: String,
        existing: Option<FileStat>,
        digest: String,
        top: bool,
    },
    Link {
        path: String,
        target: String,
        current: Option<String>,
        top: bool,
    },
    Remove {
        path: String,
        kind: FileKind,
        purged: bool,
        top: bool,
    },
    Metadata {
        path: String,
        stat: FileStat,
        mode: Option<u32>,
        owner: Option<String>,
        group: Option<String>,
        top: bool,
    },
}

impl Action {
    /// How the report shows it.
    pub(crate) fn changes(&self, resource: &Resource) -> Vec<Change> {
        let prefix = |path: &str, top: bool| {
            if top {
                String::new()
            } else {
                format!("`{path}` ")
            }
        };
        let values = |top: bool, current: Option<Value>, desired: Value| {
            if top {
                (current, Some(desired))
            } else {
                (None, None)
            }
        };
        match self {
            Action::Regular { changes, .. } => changes.clone(),
            Action::MakeDirectory { path, top } => {
                let mode = desired_mode(resource, None, true).unwrap_or(DEFAULT_DIRECTORY_MODE);
                let (current, desired) = values(*top, Some("absent".into()), "directory".into());
                vec![Change::new(
                    "ensure",
                    current,
                    desired,
                    format!(
                        "{}created directory, mode {}",
                        prefix(path, *top),
                        format_mode(mode)
                    ),
                )]
            }
            Action::Copy {
                path,
                source,
                existing,
                digest,
                top,
            } => {
                let message = match existing {
                    None => {
                        let mode = desired_mode(resource, None, false).unwrap_or(DEFAULT_MODE);
                        format!(
                            "{}created with content {digest} from `{source}`, mode {}",
                            prefix(path, *top),
                            format_mode(mode)
                        )
                    }
                    Some(_) => format!(
                        "{}content replaced by that of `{source}`, {digest}",
                        prefix(path, *top)
                    ),
                };
                let (attribute, current) = match existing {
                    None => ("ensure", Some("absent".into())),
                    Some(_) => ("content", None),
                };
                let desired = if existing.is_none() {
                    "file".into()
                } else {
                    digest.clone().into()
                };
                let (current, desired) = values(*top, current, desired);
                vec![Change::new(attribute, current, desired, message)]
            }
            Action::Link {
                path,
                target,
                current,
                top,
            } => {
                let message = match current {
                    Some(old) => {
                        format!("{}target changed '{old}' to '{target}'", prefix(path, *top))
                    }
                    None => format!("{}created link to `{target}`", prefix(path, *top)),
                };
                let (current, desired) = values(
                    *top,
                    current.clone().map(Value::from),
                    target.clone().into(),
                );
                vec![Change::new("target", current, desired, message)]
            }
            Action::Remove {
                path,
                kind,
                purged,
                top,
            } => {
                let what = match kind {
                    FileKind::Directory => "directory (with everything in it)",
                    FileKind::File => "file",
                    FileKind::Symlink => "link",
                    FileKind::Other => "special file",
                };
                let why = if *purged {
                    " (purged: not in the source and not managed)"
                } else {
                    ""
                };
                let (current, desired) =
                    values(*top, Some(kind_name(*kind).into()), "absent".into());
                vec![Change::new(
                    "ensure",
                    current,
                    desired,
                    format!("{}removed {what}{why}", prefix(path, *top)),
                )]
            }
            Action::Metadata {
                path,
                stat,
                mode,
                owner,
                group,
                top,
            } => {
                let mut changes = Vec::new();
                if let Some(mode) = mode {
                    let (old, new) = (format_mode(stat.mode), format_mode(*mode));
                    let (current, desired) =
                        values(*top, Some(old.clone().into()), new.clone().into());
                    changes.push(Change::new(
                        "mode",
                        current,
                        desired,
                        format!("{}mode changed '{old}' to '{new}'", prefix(path, *top)),
                    ));
                }
                for (attribute, wanted, name, id) in [
                    ("owner", owner, &stat.owner, stat.uid),
                    ("group", group, &stat.group, stat.gid),
                ] {
                    if let Some(wanted) = wanted {
                        let old = name.clone().unwrap_or_else(|| id.to_string());
                        let (current, desired) =
                            values(*top, Some(old.clone().into()), wanted.clone().into());
                        changes.push(Change::new(
                            attribute,
                            current,
                            desired,
                            format!(
                                "{}{attribute} changed '{old}' to '{wanted}'",
                                prefix(path, *top)
                            ),
                        ));
                    }
                }
                changes
            }
        }
    }

    pub(crate) fn apply(self, resource: &Resource) -> Result<()> {
        match self {
            Action::Regular { resource, changes } => file_apply(&resource, &changes),
            Action::MakeDirectory { path, .. } => {
                std::fs::create_dir(&path).map_err(|error| {
                    Error::new(format!("cannot create the directory `{path}`: {error}"))
                })?;
                // Owner first: changing it clears set-ID bits.
                let owner = resource.get_str("owner");
                let group = resource.get_str("group");
                if owner.is_some() || group.is_some() {
                    metadata::set_owner(&path, owner, group)?;
                }
                let mode = desired_mode(resource, None, true).unwrap_or(DEFAULT_DIRECTORY_MODE);
                metadata::set_mode(&path, mode)?;
                sync_dir(split_path(&path).0)
            }
            Action::Copy {
                path,
                source,
                existing,
                ..
            } => {
                let mut file = std::fs::File::open(&source).map_err(|error| {
                    Error::new(format!("cannot read source `{source}`: {error}"))
                })?;
                write_atomically_from(resource, &path, &mut file, existing.as_ref())
            }
            Action::Link { path, target, .. } => {
                let (dir, name) = split_path(&path);
                let temporary = temporary_path(dir, name);
                #[expect(
                    deprecated,
                    reason = "std::os::wasi::fs::symlink_path is unstable; soft_link is the stable way on WASI"
                )]
                let made = std::fs::soft_link(&target, &temporary);
                made.map_err(|error| {
                    Error::new(format!("cannot create a link in `{dir}`: {error}"))
                })?;
                if let Err(error) = std::fs::rename(&temporary, &path) {
                    let _ = std::fs::remove_file(&temporary);
                    return Err(Error::new(format!(
                        "cannot rename `{temporary}` to `{path}`: {error}"
                    )));
                }
                sync_dir(dir)
            }
            Action::Remove { path, kind, .. } => {
                let removed = if kind == FileKind::Directory {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                removed.map_err(|error| Error::new(format!("cannot remove `{path}`: {error}")))?;
                sync_dir(split_path(&path).0)
            }
            Action::Metadata {
                path,
                owner,
                group,
                mode,
                ..
            } => {
                if owner.is_some() || group.is_some() {
                    metadata::set_owner(&path, owner.as_deref(), group.as_deref())?;
                }
                if let Some(mode) = mode {
                    metadata::set_mode(&path, mode)?;
                }
                Ok(())
            }
        }
    }
}
