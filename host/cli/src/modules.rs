//! `puppet:///modules/NAME/PATH` sources of `file` resources, as `puppet apply` resolves
//! them: the file (or directory) `NAME/files/PATH` of the first directory of the module
//! path (`--modulepath`, directories separated by `:`) that has it. Resolved when a
//! catalog is applied (or validated), not when it is compiled, so a catalog compiled on
//! one machine finds the module files of the machine that applies it.

use std::path::{Component, Path, PathBuf};
use wconverge_catalog::{Catalog, Problem, Value};

const PREFIX: &str = "puppet:///modules/";

/// The directories of a `--modulepath` value.
pub(crate) fn parse(modulepath: Option<&str>) -> Vec<PathBuf> {
    modulepath
        .unwrap_or_default()
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// Replaces every `puppet:///modules/...` source of a `file` resource by the path it
/// names in the module path; every one that names nothing there is a problem.
pub(crate) fn resolve_sources(catalog: &mut Catalog, modulepath: &[PathBuf]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for resource in &mut catalog.resources {
        if resource.type_name != "file" {
            continue;
        }
        let Some(Value::String(source)) = resource.attributes.get("source").cloned() else {
            continue;
        };
        if !source.starts_with("puppet:") {
            continue;
        }
        match find(&source, modulepath) {
            Ok(path) => {
                for (name, value) in &mut resource.attributes.0 {
                    if name == "source" {
                        *value = Value::String(path.display().to_string());
                    }
                }
            }
            Err((message, help)) => {
                problems.push(Problem::of(resource, message).with_help(help));
                // Said once: the provider is not asked about a source it cannot reach.
                resource.attributes.0.retain(|(name, _)| name != "source");
            }
        }
    }
    problems
}

/// The path `source` names in the module path, or why it names none (and what to do).
fn find(source: &str, modulepath: &[PathBuf]) -> Result<PathBuf, (String, String)> {
    let refused = |why: &str| {
        (
            format!("source `{source}` {why}"),
            "write it `puppet:///modules/NAME/PATH`, for the file PATH in the `files` \
             directory of module NAME"
                .to_owned(),
        )
    };
    let Some(rest) = source.strip_prefix(PREFIX) else {
        return Err(refused(
            "names a file server; wconverge reads only `puppet:///modules/...` from the \
             module path",
        ));
    };
    let Some((module, path)) = rest.split_once('/') else {
        return Err(refused("names no file of the module"));
    };
    let module_name_ok = module
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase())
        && module
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    let path_ok = !path.is_empty()
        && Path::new(path)
            .components()
            .all(|component| matches!(component, Component::Normal(_)));
    if !module_name_ok || !path_ok {
        return Err(refused(
            "is not a module name followed by a path without `.` and `..`",
        ));
    }
    if modulepath.is_empty() {
        return Err((
            format!("source `{source}` names a module file, and there is no module path"),
            "give the directories that hold the modules with `--modulepath DIR[:DIR...]`"
                .to_owned(),
        ));
    }
    let path = path.trim_end_matches('/');
    modulepath
        .iter()
        .map(|dir| dir.join(module).join("files").join(path))
        .find(|candidate| std::fs::symlink_metadata(candidate).is_ok())
        .map(|found| {
            if found.is_absolute() {
                found
            } else {
                std::env::current_dir()
                    .map(|cwd| cwd.join(&found))
                    .unwrap_or(found)
            }
        })
        .ok_or_else(|| {
            let dirs: Vec<String> = modulepath
                .iter()
                .map(|dir| dir.display().to_string())
                .collect();
            (
                format!(
                    "source `{source}`: no directory of the module path holds \
                     `{module}/files/{path}` (module path: {})",
                    dirs.join(":")
                ),
                "check the module's name and the file's path in its `files` directory".to_owned(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_sources_resolve_in_the_first_directory_that_has_them() {
        let temp = tempfile::tempdir().expect("temp");
        let first = temp.path().join("site");
        let second = temp.path().join("vendor");
        std::fs::create_dir_all(second.join("nginx/files/conf.d")).expect("dirs");
        std::fs::write(second.join("nginx/files/nginx.conf"), "x").expect("file");
        std::fs::create_dir_all(first.join("nginx/files")).expect("dirs");
        let path = vec![first.clone(), second.clone()];
        assert_eq!(
            find("puppet:///modules/nginx/nginx.conf", &path),
            Ok(second.join("nginx/files/nginx.conf"))
        );
        assert_eq!(
            find("puppet:///modules/nginx/conf.d/", &path),
            Ok(second.join("nginx/files/conf.d"))
        );
        for bad in [
            "puppet://server/modules/nginx/x",
            "puppet:///modules/nginx",
            "puppet:///modules/nginx/../../etc/shadow",
            "puppet:///modules/Nginx/x",
        ] {
            assert!(find(bad, &path).is_err(), "{bad}");
        }
        let (message, help) = find("puppet:///modules/nginx/missing", &path).expect_err("missing");
        assert!(message.contains("nginx/files/missing"), "{message}");
        assert!(help.contains("check"), "{help}");
        assert!(find("puppet:///modules/nginx/nginx.conf", &[]).is_err());
    }
}
