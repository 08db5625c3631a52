//! Planning and applying a `file` resource: what it takes to make the path (and, with
//! `recurse`, everything beneath it) what the resource says, as a list of [`Action`]s.
//!
//! Nothing here writes through a symbolic link: links are listed and compared as links,
//! a link at the managed path is replaced only by `ensure => link` (or a source tree's
//! link), and the host refuses to follow any link another user could have placed.

use crate::action::Action;
use crate::walk::Walk;
use std::borrow::Cow;
use wconverge_file_core::{
    check_path, desired_mode, file_plan, file_state_of, kind_name, record_metadata, same_principal,
};
use wconverge_sdk::metadata::{self, FileKind, FileStat};
use wconverge_sdk::{Change, Error, Resource, Result, State, Value, digest, log};

/// Problems with a `file` resource beyond what `wconverge-file-core` checks.
pub(crate) fn validate(resource: &Resource) -> Vec<String> {
    let mut problems = Vec::new();
    let ensure = resource.get_str("ensure");
    let has = |name: &str| resource.get(name).is_some();
    if let Some(source) = resource.get_str("source") {
        if source.starts_with("puppet:") {
            problems.push(format!(
                "source `{source}`: a `puppet:///modules/...` source is found in the module \
                 path when the catalog is applied (`wconverge apply --modulepath DIRS`); give \
                 it, or the file's absolute path on this machine"
            ));
        } else if let Some(path) = source.strip_prefix("file://") {
            problems.push(format!(
                "source `{source}`: write the path without `file://`, as `{path}`"
            ));
        } else if let Err(problem) = check_path(source.trim_end_matches('/')) {
            problems.push(format!("source: {problem}"));
        }
        if has("content") {
            problems.push("set `content` or `source`, not both".to_owned());
        }
    }
    match ensure {
        Some("link") if !has("target") => {
            problems.push("ensure => link needs `target`, the path the link points to".to_owned())
        }
        Some("link") | None => {}
        Some(other) if has("target") => problems.push(format!(
            "`target` is for links; with ensure => {other} leave it out (or use ensure => link)"
        )),
        _ => {}
    }
    if has("target") && (has("content") || has("source")) {
        problems.push("a link has a `target`, not `content` or `source`".to_owned());
    }
    if matches!(ensure, Some("directory" | "absent")) && has("content") {
        problems.push(format!(
            "`content` is for regular files; with ensure => {} leave it out",
            ensure.unwrap_or_default()
        ));
    }
    if resource.get_str("checksum") == Some("mtime") && has("content") {
        problems.push(
            "checksum => mtime compares the times of a `source` and the file; with \
             `content` use sha256"
                .to_owned(),
        );
    }
    if let Some(limit) = resource.get("recurselimit").and_then(Value::as_integer)
        && limit < 0
    {
        problems.push(format!("recurselimit {limit} is negative"));
    }
    problems
}

/// What is at the path now.
pub(crate) fn current_state(resource: &Resource) -> Result<State> {
    let path = resource.require_str("path")?;
    match metadata::stat(path)? {
        Some(stat) if stat.kind == FileKind::Symlink => {
            let target = std::fs::read_link(path)
                .map_err(|error| Error::new(format!("cannot read the link `{path}`: {error}")))?;
            Ok(State::new()
                .with("ensure", "link")
                .with("target", target.to_string_lossy().into_owned()))
        }
        Some(stat) if stat.kind == FileKind::Directory => {
            let mut state = State::new().with("ensure", "directory");
            record_metadata(resource, &mut state, &stat);
            Ok(state)
        }
        Some(stat) => file_state_of(&regular_view(resource, Some(stat.kind)), path, Some(stat)),
        None => Ok(State::new().with("ensure", "absent")),
    }
}

pub(crate) fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
    let actions = actions(resource, current)?;
    Ok(actions
        .iter()
        .flat_map(|action| action.changes(resource))
        .collect())
}

/// Looks again (the machine may have changed since the plan) and acts.
pub(crate) fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
    let current = current_state(resource)?;
    for action in actions(resource, &current)? {
        action.apply(resource)?;
    }
    Ok(())
}

/// The resource as `wconverge-file-core` should see it: without `content` where an
/// existing file's content is not to be compared (`replace => false`, `checksum =>
/// none`).
fn regular_view(resource: &Resource, existing: Option<FileKind>) -> Cow<'_, Resource> {
    let keep_content = existing != Some(FileKind::File)
        || (replace(resource) && resource.get_str("checksum") != Some("none"));
    if keep_content {
        Cow::Borrowed(resource)
    } else {
        Cow::Owned(resource.clone().with("content", Value::Undef))
    }
}

pub(crate) fn replace(resource: &Resource) -> bool {
    resource.get_bool("replace") != Some(false)
}

pub(crate) fn force(resource: &Resource) -> bool {
    resource.get_bool("force") == Some(true)
}

pub(crate) fn recurse(resource: &Resource) -> bool {
    resource.get_bool("recurse") == Some(true)
        || matches!(resource.get_str("recurse"), Some("true" | "remote"))
}

/// What the resource makes of its path: `ensure`, or when it is not set, `link` for a
/// `target`, what `source` is, else `file`.
fn effective_ensure(resource: &Resource) -> Result<&str> {
    if let Some(ensure) = resource.get_str("ensure") {
        return Ok(ensure);
    }
    if resource.get("target").is_some() {
        return Ok("link");
    }
    if let Some(source) = resource.get_str("source") {
        let stat = std::fs::metadata(source)
            .map_err(|error| Error::new(format!("cannot read source `{source}`: {error}")))?;
        return Ok(if stat.is_dir() { "directory" } else { "file" });
    }
    Ok("file")
}

fn actions(resource: &Resource, current: &State) -> Result<Vec<Action>> {
    let path = resource.require_str("path")?;
    let ensure = effective_ensure(resource)?;
    // What current-state saw; the full metadata is read again only where it is needed
    // (a plain file is converged from what current-state saw, one host call the less
    // per file of a no-op run).
    let kind = match current.get_str("ensure") {
        None | Some("absent") => None,
        Some("file") => Some(FileKind::File),
        Some("directory") => Some(FileKind::Directory),
        Some("link") => Some(FileKind::Symlink),
        Some(_) => Some(FileKind::Other),
    };
    match ensure {
        "absent" => match kind {
            None => Ok(Vec::new()),
            Some(FileKind::Directory) => {
                // As Puppet's: a directory goes only with `force`, empty or not.
                if !force(resource) {
                    return Err(Error::new(format!(
                        "`{path}` is a directory; set `force => true` to remove it with \
                         everything in it"
                    )));
                }
                Ok(vec![Action::Remove {
                    path: path.to_owned(),
                    kind: FileKind::Directory,
                    purged: false,
                    top: true,
                }])
            }
            Some(_) => Ok(vec![Action::Regular {
                resource: resource.clone(),
                changes: file_plan(resource, current)?,
            }]),
        },
        "link" => {
            let target = resource.require_str("target")?;
            let mut actions = Vec::new();
            let current_target = match kind {
                Some(FileKind::Symlink) => current.get_str("target").map(str::to_owned),
                Some(FileKind::Directory) => {
                    replace_directory(resource, path, "a link", &mut actions)?;
                    None
                }
                Some(FileKind::Other) => return Err(special(path, kind)),
                _ => None,
            };
            if current_target.as_deref() != Some(target)
                && (current_target.is_none() || replace(resource))
                && (kind != Some(FileKind::File) || replace(resource))
            {
                actions.push(Action::Link {
                    path: path.to_owned(),
                    target: target.to_owned(),
                    current: current_target,
                    top: true,
                });
            }
            Ok(actions)
        }
        "directory" => {
            let mut actions = Vec::new();
            let source = match resource.get_str("source") {
                Some(source) => {
                    let stat = std::fs::metadata(source).map_err(|error| {
                        Error::new(format!("cannot read source `{source}`: {error}"))
                    })?;
                    if !stat.is_dir() {
                        return Err(Error::new(format!(
                            "source `{source}` is not a directory; a directory is copied from \
                             a directory (or set ensure => file)"
                        )));
                    }
                    Some(source.trim_end_matches('/').to_owned())
                }
                None => None,
            };
            let existing = metadata::stat(path)?;
            let exists = match &existing {
                None => false,
                Some(stat) if stat.kind == FileKind::Directory => {
                    actions.extend(metadata_action(resource, path, stat, true));
                    true
                }
                Some(stat) if stat.kind == FileKind::File => {
                    // Puppet replaces a file by a directory without `force`.
                    actions.push(Action::Remove {
                        path: path.to_owned(),
                        kind: FileKind::File,
                        purged: false,
                        top: true,
                    });
                    false
                }
                Some(stat) if stat.kind == FileKind::Symlink => {
                    return Err(Error::new(format!(
                        "`{path}` is a symbolic link; a link at the managed path is managed \
                         only with ensure => link: remove it, or declare the link"
                    )));
                }
                Some(stat) => return Err(special(path, Some(stat.kind))),
            };
            if !exists {
                actions.push(Action::MakeDirectory {
                    path: path.to_owned(),
                    top: true,
                });
            }
            if recurse(resource) {
                let mut walk = Walk::new(resource, path);
                walk.directory(path, source.as_deref(), exists, 1)?;
                actions.append(&mut walk.actions);
            }
            Ok(actions)
        }
        // `file` and `present`.
        _ => {
            let mut actions = Vec::new();
            let mut kind = kind;
            match kind {
                Some(FileKind::Directory) if ensure == "present" => {
                    if let Some(stat) = metadata::stat(path)? {
                        actions.extend(metadata_action(resource, path, &stat, true));
                    }
                    return Ok(actions);
                }
                Some(FileKind::Directory) => {
                    replace_directory(resource, path, "a file", &mut actions)?;
                    kind = None;
                }
                Some(FileKind::Symlink) if ensure == "present" => return Ok(actions),
                Some(FileKind::Symlink) => {
                    return Err(Error::new(format!(
                        "`{path}` is a symbolic link; wconverge does not write through links: \
                         remove it, manage a file at the path it points to, or declare \
                         ensure => link"
                    )));
                }
                _ => {}
            }
            if let Some(source) = resource.get_str("source") {
                let stat = std::fs::metadata(source).map_err(|error| {
                    Error::new(format!("cannot read source `{source}`: {error}"))
                })?;
                if stat.is_dir() {
                    return Err(Error::new(format!(
                        "source `{source}` is a directory; set ensure => directory (and \
                         recurse => true to copy what it holds)"
                    )));
                }
                if kind == Some(FileKind::Other) {
                    return Err(special(path, kind));
                }
                let existing = match kind {
                    Some(_) => metadata::stat(path)?,
                    None => None,
                };
                actions.extend(copy_actions(
                    resource,
                    path,
                    source,
                    existing.as_ref(),
                    true,
                )?);
                return Ok(actions);
            }
            let view = regular_view(resource, kind);
            let current = if kind.is_none() {
                State::new().with("ensure", "absent")
            } else {
                current.clone()
            };
            let changes = file_plan(&view, &current)?;
            if !changes.is_empty() {
                actions.push(Action::Regular {
                    resource: view.into_owned(),
                    changes,
                });
            }
            Ok(actions)
        }
    }
}

/// A directory at the managed path goes, with `force`, before `what` takes its place.
fn replace_directory(
    resource: &Resource,
    path: &str,
    what: &str,
    actions: &mut Vec<Action>,
) -> Result<()> {
    if !force(resource) {
        return Err(Error::new(format!(
            "`{path}` is a directory; set `force => true` to replace it (and everything in \
             it) by {what}"
        )));
    }
    actions.push(Action::Remove {
        path: path.to_owned(),
        kind: FileKind::Directory,
        purged: false,
        top: true,
    });
    Ok(())
}

pub(crate) fn special(path: &str, kind: Option<FileKind>) -> Error {
    Error::new(format!(
        "`{path}` is a {}, not a file, directory or link; remove it first",
        kind.map_or("special file", kind_name)
    ))
}

/// The owner, group and mode the resource sets that `stat` does not have.
pub(crate) fn metadata_action(
    resource: &Resource,
    path: &str,
    stat: &FileStat,
    top: bool,
) -> Option<Action> {
    let directory = stat.kind == FileKind::Directory;
    let mode = desired_mode(resource, Some(stat.mode), directory).filter(|mode| *mode != stat.mode);
    let differs = |attribute: &str, name: &Option<String>, id: u32| {
        resource
            .get_str(attribute)
            .filter(|wanted| !same_principal(wanted, name.as_deref(), Some(i64::from(id))))
            .map(str::to_owned)
    };
    let owner = differs("owner", &stat.owner, stat.uid);
    let group = differs("group", &stat.group, stat.gid);
    (mode.is_some() || owner.is_some() || group.is_some()).then(|| Action::Metadata {
        path: path.to_owned(),
        stat: stat.clone(),
        mode,
        owner,
        group,
        top,
    })
}

/// What copying the regular file `source` to `path` takes: nothing, a copy, or only its
/// owner, group and mode.
pub(crate) fn copy_actions(
    resource: &Resource,
    path: &str,
    source: &str,
    existing: Option<&FileStat>,
    top: bool,
) -> Result<Vec<Action>> {
    let copy = match existing {
        Some(stat) if stat.kind == FileKind::File => {
            replace(resource)
                && match resource.get_str("checksum") {
                    Some("none") => false,
                    Some("mtime") => newer(source, path)?,
                    _ => differs(source, path, stat)?,
                }
        }
        _ => true,
    };
    if !copy {
        return Ok(existing
            .and_then(|stat| metadata_action(resource, path, stat, top))
            .into_iter()
            .collect());
    }
    let digest = std::fs::File::open(source)
        .and_then(digest::sha256_reader)
        .map_err(|error| Error::new(format!("cannot read source `{source}`: {error}")))?;
    Ok(vec![Action::Copy {
        path: path.to_owned(),
        source: source.to_owned(),
        existing: existing.filter(|stat| stat.kind == FileKind::File).cloned(),
        digest,
        top,
    }])
}

/// Whether the regular file at `path` has other content than `source`. A file that
/// cannot be read (one the host will not let it read) differs: it is replaced.
fn differs(source: &str, path: &str, stat: &FileStat) -> Result<bool> {
    let source_size = std::fs::metadata(source)
        .map_err(|error| Error::new(format!("cannot read source `{source}`: {error}")))?
        .len();
    if source_size != stat.size {
        return Ok(true);
    }
    let wanted = std::fs::File::open(source)
        .and_then(digest::sha256_reader)
        .map_err(|error| Error::new(format!("cannot read source `{source}`: {error}")))?;
    match metadata::sha256(path) {
        Ok(found) => Ok(found.as_ref() != Some(&wanted)),
        Err(error) => {
            log::warning(&format!(
                "cannot read `{path}` to compare it ({error}); it is replaced by a copy of \
                 `{source}`"
            ));
            Ok(true)
        }
    }
}

/// Whether `source` was modified after `path`.
fn newer(source: &str, path: &str) -> Result<bool> {
    let modified = |file: &str| {
        std::fs::symlink_metadata(file)
            .and_then(|stat| stat.modified())
            .map_err(|error| Error::new(format!("cannot read the time of `{file}`: {error}")))
    };
    Ok(modified(source)? > modified(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> Resource {
        Resource::new("file", path).with("path", path)
    }

    #[test]
    fn links_need_a_target_and_targets_need_links() {
        assert!(validate(&file("/a").with("ensure", "link")).len() == 1);
        assert!(validate(&file("/a").with("ensure", "link").with("target", "/b")).is_empty());
        assert!(validate(&file("/a").with("target", "/b")).is_empty());
        assert_eq!(
            validate(&file("/a").with("ensure", "file").with("target", "/b")).len(),
            1
        );
    }

    #[test]
    fn puppet_urls_and_relative_sources_are_refused_with_what_to_write() {
        let problems = validate(&file("/a").with("source", "puppet:///modules/nginx/x.conf"));
        assert!(problems[0].contains("absolute path"), "{problems:?}");
        let problems = validate(&file("/a").with("source", "file:///srv/x"));
        assert!(problems[0].contains("as `/srv/x`"), "{problems:?}");
        assert_eq!(validate(&file("/a").with("source", "srv/x")).len(), 1);
        assert_eq!(
            validate(&file("/a").with("source", "/srv/x").with("content", "x")).len(),
            1
        );
    }

    #[test]
    fn content_is_for_files_and_mtime_for_sources() {
        assert_eq!(
            validate(&file("/a").with("ensure", "directory").with("content", "x")).len(),
            1
        );
        assert_eq!(
            validate(&file("/a").with("checksum", "mtime").with("content", "x")).len(),
            1
        );
    }

    fn temp_dir(name: &str) -> String {
        let dir = std::env::temp_dir().join(format!("wcv-tree-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir.to_str().expect("utf-8").to_owned()
    }

    fn converge(resource: &Resource) -> Vec<Change> {
        let current = current_state(resource).expect("state");
        let changes = plan(resource, &current).expect("plan");
        apply(resource, &changes).expect("apply");
        let again = plan(resource, &current_state(resource).expect("state")).expect("plan");
        assert!(again.is_empty(), "a second run changes nothing: {again:?}");
        changes
    }

    #[test]
    fn native_a_source_tree_is_copied_linked_and_purged() {
        let root = temp_dir("tree");
        let source = format!("{root}/source");
        std::fs::create_dir_all(format!("{source}/sub")).expect("source");
        std::fs::write(format!("{source}/a.txt"), "a\n").expect("a");
        std::fs::write(format!("{source}/sub/b.txt"), "b\n").expect("b");
        std::os::unix::fs::symlink("a.txt", format!("{source}/link")).expect("link");
        let dest = format!("{root}/dest");
        std::fs::create_dir_all(format!("{dest}/old")).expect("dest");
        std::fs::write(format!("{dest}/stale"), "x").expect("stale");
        std::fs::write(format!("{dest}/kept"), "x").expect("kept");
        let resource = file(&dest)
            .with("ensure", "directory")
            .with("source", source.as_str())
            .with("recurse", true)
            .with("purge", true)
            .with("force", true)
            .with("mode", "u=rwX,go=rX")
            .with_context("managed", Value::Array(vec![format!("{dest}/kept").into()]));
        let changes = converge(&resource);
        assert!(changes.len() >= 5, "{changes:?}");
        assert_eq!(
            std::fs::read_to_string(format!("{dest}/sub/b.txt")).expect("b"),
            "b\n"
        );
        assert_eq!(
            std::fs::read_link(format!("{dest}/link")).expect("link"),
            std::path::Path::new("a.txt")
        );
        assert!(!std::path::Path::new(&format!("{dest}/stale")).exists());
        assert!(!std::path::Path::new(&format!("{dest}/old")).exists());
        assert!(
            std::path::Path::new(&format!("{dest}/kept")).exists(),
            "managed elsewhere"
        );
        std::fs::remove_dir_all(&root).expect("cleanup");
    }

    #[test]
    fn native_links_are_made_and_retargeted() {
        let root = temp_dir("link");
        let path = format!("{root}/current");
        let first = file(&path)
            .with("ensure", "link")
            .with("target", "/srv/one");
        converge(&first);
        let second = file(&path)
            .with("ensure", "link")
            .with("target", "/srv/two");
        let changes = converge(&second);
        assert_eq!(
            changes[0].message,
            "target changed '/srv/one' to '/srv/two'"
        );
        std::fs::remove_dir_all(&root).expect("cleanup");
    }
}
