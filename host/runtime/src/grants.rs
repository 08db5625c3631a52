//! Directory grants: what part of the file system one call of a plugin sees.
//!
//! A resource's path attributes (declared with a `path-access` in its type's schema)
//! say what it needs: the directory holding a path it writes, or the nearest existing
//! directory above a path it reads. Each needed directory is resolved once, component
//! by component from directory descriptors (`walk`: links followed only when root or
//! wconverge's user owns them), checked against the policy by where that walk ended,
//! and the descriptor the walk ended with is what the plugin gets (through
//! `/proc/self/fd`), so nothing swapped in after the check is ever reached. The plugin
//! sees it mounted at the path the resource wrote.

use crate::policy::{Access, PluginPolicy};
use crate::walk::{Ancestors, WalkError, open_directory, walk};
use rustix::fd::{AsRawFd, OwnedFd};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use wconverge_catalog::{PathAccess, TypeSchema};
use wconverge_engine::{Prepared, PreparedResource};

/// One directory granted to a call.
#[derive(Debug)]
pub(crate) struct Grant {
    /// Where the plugin sees it: the path as the resource wrote it.
    pub(crate) guest: String,
    /// Where it really is.
    pub(crate) canonical: PathBuf,
    pub(crate) access: Access,
    /// The directory, opened when it was checked.
    pub(crate) fd: OwnedFd,
}

impl Grant {
    /// A path that reopens exactly the checked directory.
    pub(crate) fn reopen_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }
}

/// The directories a call of a resource gets.
#[derive(Debug, Clone, Default)]
pub(crate) struct Granted {
    pub(crate) grants: Vec<Arc<Grant>>,
    /// A directory the resource writes in does not exist yet, and was left out: what
    /// it would write there is absent (only while the resource is inspected).
    pub(crate) absent: bool,
}

/// Why a grant could not be made.
#[derive(Debug)]
pub(crate) enum GrantError {
    /// The policy refuses it.
    Denied(String),
    /// The resource cannot be handled as it stands.
    Unusable(String),
    /// The directory does not exist (yet: a resource before this one may create it).
    Missing(String),
}

/// A grant's plugin, directory, access and whether its ancestors must be private.
type GrantKey = (String, String, Access, bool);

/// Directories opened in this run, shared by every call of the same plugin that needs
/// them. Keyed by plugin too: a grant is checked against one plugin's policy and is
/// never handed to another.
#[derive(Default)]
pub(crate) struct GrantCache {
    opened: Mutex<HashMap<GrantKey, Arc<Grant>>>,
}

/// What the resource needs: each directory once, with the widest access asked for.
/// Grants are checked with this access whatever the phase, so a write the policy
/// refuses is reported when the resource is planned (and in a noop run), not only when
/// it would be applied; calls that only inspect see the directories read-only.
/// One directory a call needs: where, with what access, and whether every directory on
/// the way must be writable by root alone.
pub(crate) type Needed = (String, Access, bool);

pub(crate) fn needed(
    resource: &PreparedResource,
    schema: &TypeSchema,
) -> Result<Vec<Needed>, GrantError> {
    let mut needed: Vec<Needed> = Vec::new();
    for (attribute, path) in resource.paths(schema) {
        if !is_normal_absolute(path) {
            return Err(GrantError::Unusable(format!(
                "attribute `{}` must be an absolute path without `.` or `..`, not `{path}`",
                attribute.name
            )));
        }
        let (dir, access, private) = match attribute.path_access {
            PathAccess::ReadWrite => {
                let dir = parent(path).ok_or_else(|| {
                    GrantError::Unusable(format!("`{path}` has no parent directory"))
                })?;
                (dir, Access::ReadWrite, false)
            }
            PathAccess::Read => (nearest_existing(path), Access::Read, false),
            PathAccess::ReadPrivate => (nearest_existing(path), Access::Read, true),
            PathAccess::None => continue,
        };
        match needed.iter_mut().find(|(existing, _, _)| *existing == dir) {
            Some((_, existing, was_private)) => {
                *existing = (*existing).max(access);
                *was_private |= private;
            }
            None => needed.push((dir, access, private)),
        }
    }
    needed.sort();
    Ok(needed)
}

/// Refuses a path the resource would write that its plugin's policy does not name,
/// where the policy names the files (`files`) its resources may write.
pub(crate) fn named_files(
    policy: &PluginPolicy,
    resource: &PreparedResource,
    schema: &TypeSchema,
) -> Result<(), GrantError> {
    if policy.files.is_empty() {
        return Ok(());
    }
    for (attribute, path) in resource.paths(schema) {
        if attribute.path_access == PathAccess::ReadWrite
            && !policy.files.iter().any(|file| file.as_os_str() == path)
        {
            return Err(GrantError::Denied(format!(
                "the policy lets plugin `{}` write only {} (`files`), not `{path}` (attribute \
                 `{}`); add the file to `files` of [plugins.{}] if it must",
                policy.name,
                policy
                    .files
                    .iter()
                    .map(|file| format!("`{}`", file.display()))
                    .collect::<Vec<_>>()
                    .join(", "),
                attribute.name,
                policy.name
            )));
        }
    }
    Ok(())
}

fn is_normal_absolute(path: &str) -> bool {
    path.starts_with('/')
        && !path.contains("//")
        && !Path::new(path)
            .components()
            .any(|component| matches!(component, Component::CurDir | Component::ParentDir))
}

fn parent(path: &str) -> Option<String> {
    let trimmed = path.trim_end_matches('/');
    let slash = trimmed.rfind('/')?;
    if trimmed.is_empty() {
        return None;
    }
    Some(if slash == 0 {
        "/".to_owned()
    } else {
        trimmed[..slash].to_owned()
    })
}

/// The path itself if it is an existing directory, else its nearest existing ancestor.
pub(crate) fn nearest_existing(path: &str) -> String {
    let mut candidate = PathBuf::from(path);
    loop {
        if candidate.is_dir() {
            return candidate.to_string_lossy().into_owned();
        }
        if !candidate.pop() {
            return "/".to_owned();
        }
    }
}

impl GrantCache {
    /// Forgets the directories opened: the next run opens them anew.
    pub(crate) fn clear(&self) {
        self.opened.lock().expect("grant cache lock").clear();
    }

    /// The grant for `dir` with `access`, checked against the policy and opened.
    pub(crate) fn grant(
        &self,
        policy: &PluginPolicy,
        policy_roots: &[(PathBuf, Access)],
        dir: &str,
        access: Access,
        private: bool,
    ) -> Result<Arc<Grant>, GrantError> {
        let key = (policy.name.clone(), dir.to_owned(), access, private);
        if let Some(grant) = self.opened.lock().expect("grant cache lock").get(&key) {
            return Ok(Arc::clone(grant));
        }
        let grant = Arc::new(open_grant(policy, policy_roots, dir, access, private)?);
        self.opened
            .lock()
            .expect("grant cache lock")
            .insert(key, Arc::clone(&grant));
        Ok(grant)
    }
}

fn open_grant(
    policy: &PluginPolicy,
    policy_roots: &[(PathBuf, Access)],
    dir: &str,
    access: Access,
    private: bool,
) -> Result<Grant, GrantError> {
    let plugin = &policy.name;
    // One walk, by descriptor: the directory it ends at is both what the policy is
    // checked against and what the plugin gets.
    let ancestors = if private {
        Ancestors::Private
    } else {
        Ancestors::Any
    };
    let walked = walk(Path::new(dir), ancestors).map_err(|error| match error {
        WalkError::Missing(_) => GrantError::Missing(format!(
            "directory `{dir}` does not exist; create it first (for example with a resource \
             ordered before this one)"
        )),
        WalkError::ForeignLink { .. } | WalkError::MovableLink { .. } => {
            GrantError::Denied(error.to_string())
        }
        WalkError::SharedAncestor { .. } => GrantError::Denied(format!(
            "{error}, so what is in `{dir}` could be swapped before a program running as root \
             reads it; keep it in a directory only root can write"
        )),
        error => GrantError::Unusable(format!("cannot use `{dir}`: {error}")),
    })?;
    let canonical = walked.canonical.clone();
    let allowed = policy_roots
        .iter()
        .any(|(root, granted)| canonical.starts_with(root) && *granted >= access);
    if !allowed {
        let via = if canonical.as_path() == Path::new(dir) {
            String::new()
        } else {
            format!(" (`{dir}` resolves to it)")
        };
        return Err(GrantError::Denied(not_granted(
            plugin, &canonical, access, &via,
        )));
    }
    let fd = open_directory(&walked).map_err(|error| {
        GrantError::Unusable(format!("cannot open `{}`: {error}", canonical.display()))
    })?;
    Ok(Grant {
        guest: dir.to_owned(),
        canonical,
        access,
        fd,
    })
}

/// Refuses `access` to `dir` (as `via` reached it), naming the policy line to add.
fn not_granted(plugin: &str, dir: &Path, access: Access, via: &str) -> String {
    format!(
        "the policy grants plugin `{plugin}` no {access} access to `{dir}`{via}; add \
         `{{ path = \"{dir}\", access = \"{access}\" }}` to `directories` of \
         [plugins.{plugin}] in the policy",
        access = access.as_str(),
        dir = dir.display()
    )
}

impl crate::Runtime {
    /// The directories and files the resources would need that their plugins' policies
    /// do not grant, found before the run (`wconverge validate`): each directory that
    /// exists is walked as its grant would be; one that does not exist yet (a resource
    /// before may create it) is checked where its nearest existing ancestor really is.
    /// One entry per resource refused, with why.
    pub fn ungranted<'p>(&self, prepared: &'p Prepared) -> Vec<(&'p PreparedResource, String)> {
        let mut seen: HashMap<GrantKey, Option<String>> = HashMap::new();
        let mut refused = Vec::new();
        for resource in &prepared.resources {
            let (Ok(plugin), Some(schema)) =
                (self.plugin(&resource.provider), prepared.schema(resource))
            else {
                continue;
            };
            if let Err(GrantError::Denied(why)) = named_files(&plugin.policy, resource, schema) {
                refused.push((resource, why));
                continue;
            }
            let Ok(needed) = needed(resource, schema) else {
                continue;
            };
            let roots = self.roots(&plugin);
            let why = needed.into_iter().find_map(|(dir, access, private)| {
                let key = (plugin.policy.name.clone(), dir, access, private);
                seen.entry(key)
                    .or_insert_with_key(|(_, dir, access, private)| {
                        precheck(&plugin.policy, &roots, dir, *access, *private)
                    })
                    .clone()
            });
            if let Some(why) = why {
                refused.push((resource, why));
            }
        }
        refused
    }
}

/// Why the policy would refuse `access` to `dir`, if it would.
fn precheck(
    policy: &PluginPolicy,
    roots: &[(PathBuf, Access)],
    dir: &str,
    access: Access,
    private: bool,
) -> Option<String> {
    match open_grant(policy, roots, dir, access, private) {
        Err(GrantError::Denied(why)) => Some(why),
        Err(GrantError::Missing(_)) => {
            let ancestor = nearest_existing(dir);
            let rest = Path::new(dir).strip_prefix(&ancestor).ok()?;
            let walked = walk(Path::new(&ancestor), Ancestors::Any).ok()?;
            let canonical = walked.canonical.join(rest);
            let allowed = roots
                .iter()
                .any(|(root, granted)| canonical.starts_with(root) && *granted >= access);
            let via = if canonical.as_path() == Path::new(dir) {
                String::new()
            } else {
                format!(" (`{dir}` resolves to it)")
            };
            (!allowed).then(|| not_granted(&policy.name, &canonical, access, &via))
        }
        Ok(_) | Err(GrantError::Unusable(_)) => None,
    }
}

/// The policy's directories as they really are, for comparing with resolved paths,
/// each walked as a grant is. A directory that does not exist yet keeps its written
/// form; one reached through a link another user owns grants nothing (that user could
/// point it at any directory of the machine).
pub(crate) fn policy_roots(policy: &PluginPolicy) -> Vec<(PathBuf, Access)> {
    policy
        .directories
        .iter()
        .filter_map(|grant| match walk(&grant.path, Ancestors::Any) {
            Ok(walked) => Some((walked.canonical, grant.access)),
            Err(WalkError::Missing(_)) => Some((grant.path.clone(), grant.access)),
            Err(error) => {
                tracing::warn!(
                    "plugin `{}`: the policy's directory `{}` grants nothing in this run: \
                     {error}",
                    policy.name,
                    grant.path.display()
                );
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_and_normal_paths() {
        assert_eq!(parent("/srv/app/app.conf").as_deref(), Some("/srv/app"));
        assert_eq!(parent("/motd").as_deref(), Some("/"));
        assert_eq!(parent("/"), None);
        assert!(is_normal_absolute("/srv/app"));
        assert!(!is_normal_absolute("srv/app"));
        assert!(!is_normal_absolute("/srv/../etc"));
        assert!(!is_normal_absolute("/srv//app"));
    }

    #[test]
    fn a_grant_checked_for_one_plugin_is_not_handed_to_another() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_str().expect("utf-8").to_owned();
        let policy = crate::policy::Policy::parse(
            &format!(
                "[plugins.trusted]\nsource = \"builtin\"\ndirectories = [{{ path = \"{path}\", access = \"read-write\" }}]\n\
                 [plugins.other]\nsource = \"builtin\"\n"
            ),
            "test",
            None,
        )
        .expect("policy");
        let cache = GrantCache::default();
        let trusted = policy.plugin("trusted").expect("trusted");
        let other = policy.plugin("other").expect("other");
        let granted = cache.grant(
            trusted,
            &policy_roots(trusted),
            &path,
            Access::ReadWrite,
            false,
        );
        assert!(granted.is_ok());
        let refused = cache.grant(other, &policy_roots(other), &path, Access::ReadWrite, false);
        assert!(matches!(refused, Err(GrantError::Denied(_))), "{refused:?}");
    }

    #[test]
    fn the_nearest_existing_directory_is_found() {
        let dir = std::env::temp_dir();
        let missing = dir.join("wcv-missing-a/b/c");
        assert_eq!(
            nearest_existing(missing.to_str().expect("utf-8")),
            dir.to_string_lossy()
        );
    }
}
