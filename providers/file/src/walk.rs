//! `recurse`: a walk over a managed directory and its source, listing what makes the
//! tree what the resource says (entries another resource manages are left to it).

use crate::action::Action;
use crate::tree::{copy_actions, force, metadata_action, replace, special};
use std::collections::BTreeMap;
use wconverge_sdk::metadata::{self, FileKind, FileStat};
use wconverge_sdk::{Error, Resource, Result, Value, log};

/// The most entries one recursive resource manages.
const MAX_ENTRIES: usize = 100_000;

/// How deep recursion goes when `recurselimit` does not say.
const MAX_DEPTH: i64 = 64;

/// An entry of a source directory, as `links` says to take it.
enum SourceEntry {
    Directory,
    File,
    Link(String),
}

/// A recursive walk over a managed directory and its source.
pub(crate) struct Walk<'r> {
    resource: &'r Resource,
    pub(crate) actions: Vec<Action>,
    /// Paths other resources manage beneath this one, sorted.
    managed: Vec<String>,
    entries: usize,
    limit: i64,
    top: String,
}

impl<'r> Walk<'r> {
    pub(crate) fn new(resource: &'r Resource, path: &str) -> Self {
        let managed = resource
            .context("managed")
            .and_then(Value::as_array)
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        let limit = resource
            .get("recurselimit")
            .and_then(Value::as_integer)
            .unwrap_or(MAX_DEPTH)
            .min(MAX_DEPTH);
        Walk {
            resource,
            actions: Vec::new(),
            managed,
            entries: 0,
            limit,
            top: path.to_owned(),
        }
    }

    /// Whether another resource manages `path` itself.
    fn managed(&self, path: &str) -> bool {
        self.managed
            .binary_search_by(|managed| managed.as_str().cmp(path))
            .is_ok()
    }

    /// Whether another resource manages `path` or something beneath it (then it is
    /// never purged).
    fn protected(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        self.managed(path)
            || self
                .managed
                .iter()
                .any(|managed| managed.starts_with(&prefix))
    }

    /// Converges the entries of the directory `dest` (which `exists` or is about to be
    /// made) at `depth`, from `source` when there is one.
    pub(crate) fn directory(
        &mut self,
        dest: &str,
        source: Option<&str>,
        exists: bool,
        depth: i64,
    ) -> Result<()> {
        if depth > self.limit {
            return Ok(());
        }
        let found = if exists {
            self.list(dest)?
        } else {
            BTreeMap::new()
        };
        let wanted = match source {
            Some(source) => self.list_source(source)?,
            None => BTreeMap::new(),
        };
        let mut names: Vec<&String> = found.keys().chain(wanted.keys()).collect();
        names.sort();
        names.dedup();
        let remote = self.resource.get_str("recurse") == Some("remote");
        let purge = self.resource.get_bool("purge") == Some(true);
        for name in names {
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                return Err(Error::new(format!(
                    "`{}` holds more than {MAX_ENTRIES} entries, the most one recursive file \
                     resource manages; set `recurselimit`, or split it into several resources",
                    self.top
                )));
            }
            let path = format!("{dest}/{name}");
            if self.managed(&path) {
                continue;
            }
            let child_source = source.map(|source| format!("{source}/{name}"));
            match (wanted.get(name), found.get(name)) {
                (None, Some(stat)) => {
                    if purge && !self.protected(&path) {
                        if stat.kind == FileKind::Directory && !force(self.resource) {
                            log::notice(&format!(
                                "not purging the directory `{path}`: set `force => true` to \
                                 purge directories"
                            ));
                        } else {
                            self.actions.push(Action::Remove {
                                path,
                                kind: stat.kind,
                                purged: true,
                                top: false,
                            });
                        }
                        continue;
                    }
                    if remote {
                        continue;
                    }
                    self.existing(&path, stat, depth)?;
                }
                (Some(SourceEntry::Directory), found) => {
                    let exists = match found {
                        Some(stat) if stat.kind == FileKind::Directory => {
                            self.actions
                                .extend(metadata_action(self.resource, &path, stat, false));
                            true
                        }
                        Some(stat) => {
                            self.replace(&path, stat)?;
                            false
                        }
                        None => false,
                    };
                    if !exists {
                        self.actions.push(Action::MakeDirectory {
                            path: path.clone(),
                            top: false,
                        });
                    }
                    self.directory(&path, child_source.as_deref(), exists, depth + 1)?;
                }
                (Some(SourceEntry::File), found) => {
                    let existing = match found {
                        Some(stat) if stat.kind == FileKind::File => Some(stat),
                        Some(stat) => {
                            self.replace(&path, stat)?;
                            None
                        }
                        None => None,
                    };
                    let source = child_source.as_deref().unwrap_or_default();
                    let mut actions = copy_actions(self.resource, &path, source, existing, false)?;
                    self.actions.append(&mut actions);
                }
                (Some(SourceEntry::Link(target)), found) => {
                    let current = match found {
                        Some(stat) if stat.kind == FileKind::Symlink => Some(
                            std::fs::read_link(&path)
                                .map_err(|error| {
                                    Error::new(format!("cannot read the link `{path}`: {error}"))
                                })?
                                .to_string_lossy()
                                .into_owned(),
                        ),
                        Some(stat) if stat.kind == FileKind::Directory => {
                            self.replace(&path, stat)?;
                            None
                        }
                        Some(stat) if stat.kind == FileKind::Other => {
                            return Err(special(&path, Some(stat.kind)));
                        }
                        _ => None,
                    };
                    let keep = current.is_some() && !replace(self.resource);
                    if current.as_deref() != Some(target.as_str()) && !keep {
                        self.actions.push(Action::Link {
                            path,
                            target: target.clone(),
                            current,
                            top: false,
                        });
                    }
                }
                (None, None) => {}
            }
        }
        Ok(())
    }

    /// An entry that only the managed directory has: its owner, group and mode, and for
    /// a directory, what it holds.
    fn existing(&mut self, path: &str, stat: &FileStat, depth: i64) -> Result<()> {
        match stat.kind {
            FileKind::Directory => {
                self.actions
                    .extend(metadata_action(self.resource, path, stat, false));
                self.directory(path, None, true, depth + 1)
            }
            FileKind::File => {
                self.actions
                    .extend(metadata_action(self.resource, path, stat, false));
                Ok(())
            }
            // Links are not followed and have no mode of their own; special files are
            // left alone.
            FileKind::Symlink | FileKind::Other => Ok(()),
        }
    }

    /// Something of another kind is where the source has a directory, file or link: a
    /// directory goes only with `force`.
    fn replace(&mut self, path: &str, stat: &FileStat) -> Result<()> {
        if stat.kind == FileKind::Directory && self.protected(path) {
            return Err(Error::new(format!(
                "`{path}` is a directory where the source has none, and other resources \
                 manage what is in it; it is not replaced"
            )));
        }
        match stat.kind {
            FileKind::Directory if !force(self.resource) => Err(Error::new(format!(
                "`{path}` is a directory where the source has none; set `force => true` to \
                 replace it"
            ))),
            FileKind::Other => Err(special(path, Some(stat.kind))),
            kind => {
                self.actions.push(Action::Remove {
                    path: path.to_owned(),
                    kind,
                    purged: false,
                    top: false,
                });
                Ok(())
            }
        }
    }

    fn list(&self, dir: &str) -> Result<BTreeMap<String, FileStat>> {
        let mut found = BTreeMap::new();
        for name in names(dir)? {
            let path = format!("{dir}/{name}");
            if let Some(stat) = metadata::stat(&path)? {
                found.insert(name, stat);
            }
        }
        Ok(found)
    }

    fn list_source(&self, dir: &str) -> Result<BTreeMap<String, SourceEntry>> {
        let links = self.resource.get_str("links").unwrap_or("manage");
        let mut wanted = BTreeMap::new();
        for name in names(dir)? {
            let path = format!("{dir}/{name}");
            let cannot =
                |error: std::io::Error| Error::new(format!("cannot read `{path}`: {error}"));
            let stat = std::fs::symlink_metadata(&path).map_err(cannot)?;
            let entry = if stat.file_type().is_symlink() {
                match links {
                    "ignore" => continue,
                    "follow" => {
                        let stat = std::fs::metadata(&path).map_err(cannot)?;
                        if stat.is_dir() {
                            SourceEntry::Directory
                        } else {
                            SourceEntry::File
                        }
                    }
                    _ => SourceEntry::Link(
                        std::fs::read_link(&path)
                            .map_err(cannot)?
                            .to_string_lossy()
                            .into_owned(),
                    ),
                }
            } else if stat.is_dir() {
                SourceEntry::Directory
            } else if stat.is_file() {
                SourceEntry::File
            } else {
                log::warning(&format!(
                    "`{path}` in the source is neither a file, a directory nor a link; it is \
                     not copied"
                ));
                continue;
            };
            wanted.insert(name, entry);
        }
        Ok(wanted)
    }
}

/// The names in a directory, which must be UTF-8.
fn names(dir: &str) -> Result<Vec<String>> {
    let cannot = |error: std::io::Error| Error::new(format!("cannot list `{dir}`: {error}"));
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(cannot)? {
        let name = entry.map_err(cannot)?.file_name();
        match name.into_string() {
            Ok(name) => names.push(name),
            Err(name) => {
                return Err(Error::new(format!(
                    "`{dir}` holds a name that is not UTF-8 ({}); wconverge manages only \
                     UTF-8 names",
                    name.to_string_lossy()
                )));
            }
        }
    }
    Ok(names)
}
