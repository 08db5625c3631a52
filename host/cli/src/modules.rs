//! `puppet:///modules/NAME/PATH` sources of `file` resources, as `puppet apply` resolves
//! them: the file (or directory) `NAME/files/PATH` of the first directory of the module
//! path (`--modulepath`, directories separated by `:`) that has it. Resolved when a
//! catalog is applied (or validated), not when it is compiled, so a catalog compiled on
//! one machine finds the module files of the machine that applies it.

use std::path::{Component, Path, PathBuf};
use wconverge_catalog::DiagnosticCode;
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

/// The module path: `--modulepath` when given; else, as Puppet's environments have it,
/// the `modulepath` of the environment's `environment.conf` (relative to the
/// environment, `$basemodulepath` left out), or `modules/` next to the main manifest
/// and at the environment's root. The environment is the main manifest's directory, or
/// its parent when that directory is `manifests/` (a control repository's
/// `manifests/site.pp`).
pub(crate) fn module_path(given: Option<&str>, main_manifest: Option<&Path>) -> Vec<PathBuf> {
    // Relative to the working directory, written out (`modules/m/files/x`, never
    // `$PWD/./modules/...`, which a source refuses).
    module_path_as_given(given, main_manifest)
        .into_iter()
        .map(|dir| std::path::absolute(&dir).unwrap_or(dir))
        .collect()
}

fn module_path_as_given(given: Option<&str>, main_manifest: Option<&Path>) -> Vec<PathBuf> {
    if given.is_some() {
        return parse(given);
    }
    let Some(main) = main_manifest else {
        return Vec::new();
    };
    let dir = manifest_dir(main);
    let root = environment_root(main);
    let conf = root.join("environment.conf");
    if let Some(Ok(text)) =
        crate::input::read_text_if_any(&conf, "environment.conf", crate::input::POLICY_BYTES)
    {
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            if key.trim() == "modulepath" {
                return value
                    .trim()
                    .split(':')
                    .filter(|dir| !dir.is_empty() && !dir.starts_with('$'))
                    .map(|dir| root.join(dir))
                    .collect();
            }
        }
    }
    let mut dirs = vec![dir.join("modules")];
    if root != dir {
        dirs.push(root.join("modules"));
    }
    dirs.retain(|dir| dir.is_dir());
    dirs
}

fn manifest_dir(main: &Path) -> PathBuf {
    // Where it is, not how it was named: `site.wcv` given in `manifests/` is in the
    // control repository's `manifests/`.
    let main = std::path::absolute(main).unwrap_or_else(|_| main.to_path_buf());
    match main.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The environment of a main manifest: its directory, or that directory's parent when
/// it is `manifests/`. Its `hiera.yaml` is the environment's Hiera layer.
pub(crate) fn environment_root(main: &Path) -> PathBuf {
    let dir = manifest_dir(main);
    if dir.file_name().is_some_and(|name| name == "manifests") {
        dir.parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    } else {
        dir
    }
}

/// Puppet's autoloader over a module path, for the compiler: a module is a directory
/// of the module path (the first that has it wins), its classes and defined types are
/// in its `manifests/` (`NAME/manifests/init.wcv` or `init.pp` is class `NAME`,
/// `NAME/manifests/a/b.wcv` or `b.pp` is `NAME::a::b`, the `.wcv` read when both
/// exist), its functions in `functions/`, its type
/// aliases in `types/`
/// (`NAME/types/a.pp` is `Name::A`), its templates in `templates/`, and its Hiera data
/// beside its `hiera.yaml`.
pub(crate) struct ModuleLoader {
    modules: std::collections::BTreeMap<String, PathBuf>,
    /// The environment's directory, where its `hiera.yaml` is.
    environment: Option<PathBuf>,
    /// The environment's `hiera.yaml`, read once (whether facts are needed asks too).
    environment_hiera: std::sync::OnceLock<Option<Result<wconverge_lang::HieraFile, String>>>,
}

impl ModuleLoader {
    pub(crate) fn new(modulepath: &[PathBuf], environment: Option<PathBuf>) -> ModuleLoader {
        let mut modules = std::collections::BTreeMap::new();
        for dir in modulepath {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten().take(MAX_MODULES) {
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if is_module_name(&name) && entry.path().is_dir() {
                    modules.entry(name).or_insert_with(|| entry.path());
                }
            }
        }
        ModuleLoader {
            modules,
            environment,
            environment_hiera: std::sync::OnceLock::new(),
        }
    }

    /// The directory of a Hiera layer: the environment's, or a module's.
    fn layer_dir(&self, module: Option<&str>) -> Option<&PathBuf> {
        match module {
            None => self.environment.as_ref(),
            Some(module) => self.modules.get(module),
        }
    }
}

/// Reads and parses one of Hiera's files: `None` when it does not exist.
fn hiera_file(
    path: &Path,
    format: wconverge_lang::DataFormat,
) -> Option<Result<wconverge_lang::HieraFile, String>> {
    let shown = path.display().to_string();
    Some(
        crate::input::read_text_if_any(path, "data file", crate::data::MAX_DATA_BYTES)?
            .and_then(|text| {
                match format {
                    wconverge_lang::DataFormat::Yaml => crate::data::parse_yaml(&text),
                    wconverge_lang::DataFormat::Json => crate::data::parse_json(&text),
                }
                .map_err(|error| format!("`{shown}` is not valid: {error}"))
            })
            .map(|value| wconverge_lang::HieraFile { name: shown, value }),
    )
}

/// A directory of the module path is read for at most this many modules.
const MAX_MODULES: usize = 100_000;

fn is_module_name(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

impl wconverge_lang::Loader for ModuleLoader {
    fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    fn template(&self, module: &str, path: &str) -> Option<Result<wconverge_lang::Source, String>> {
        let dir = self.modules.get(module)?;
        if !Path::new(path)
            .components()
            .all(|component| matches!(component, Component::Normal(_)))
        {
            return Some(Err(format!(
                "the template path `{path}` leaves the module's templates (`.`, `..` or absolute)"
            )));
        }
        let file = dir.join("templates").join(path);
        Some(
            crate::input::read_text_if_any(&file, "template", crate::input::MANIFEST_BYTES)?
                .map(|text| wconverge_lang::Source::new(file.display().to_string(), text)),
        )
    }

    fn hiera_config(
        &self,
        module: Option<&str>,
    ) -> Option<Result<wconverge_lang::HieraFile, String>> {
        let read =
            |dir: &PathBuf| hiera_file(&dir.join("hiera.yaml"), wconverge_lang::DataFormat::Yaml);
        match module {
            None => self
                .environment_hiera
                .get_or_init(|| self.environment.as_ref().and_then(read))
                .clone(),
            Some(_) => read(self.layer_dir(module)?),
        }
    }

    fn hiera_data(
        &self,
        module: Option<&str>,
        path: &str,
        format: wconverge_lang::DataFormat,
    ) -> Option<Result<wconverge_lang::HieraFile, String>> {
        // A path made from facts stays inside the layer: no `..`, nothing absolute.
        let relative = Path::new(path);
        if !relative
            .components()
            .all(|component| matches!(component, Component::Normal(_) | Component::CurDir))
        {
            return Some(Err(format!(
                "the Hiera path `{path}` leaves its data directory (`..` or absolute); \
                 check the hierarchy and the facts it interpolates"
            )));
        }
        hiera_file(&self.layer_dir(module)?.join(relative), format)
    }

    fn has_module(&self, module: &str) -> bool {
        self.modules.contains_key(module)
    }

    fn manifest(&self, name: &str) -> Option<Result<wconverge_lang::Source, String>> {
        let mut segments = name.split("::");
        let dir = self.modules.get(segments.next()?)?;
        let rest: Vec<&str> = segments.collect();
        if !rest.iter().all(|segment| is_module_name(segment)) {
            return None;
        }
        // A class or defined type is in the module's `manifests/` (the module's own
        // in `init.pp`), a function (`ntp::servers()`) in its `functions/`, a type
        // alias (`type Ntp::Servers = ...`) in its `types/`: the first that exists,
        // each opened once.
        let kinds: &[&str] = if rest.is_empty() {
            &["manifests"]
        } else {
            &["manifests", "functions", "types"]
        };
        // In each, `NAME.wcv` before `NAME.pp`: a module may be written in either, and
        // when both are there the `.wcv` is the one read.
        kinds.iter().find_map(|kind| {
            let mut path = dir.join(kind);
            if rest.is_empty() {
                path.push("init");
            } else {
                rest.iter().for_each(|segment| path.push(segment));
            }
            ["wcv", "pp"].iter().find_map(|extension| {
                let path = path.with_extension(extension);
                let read = crate::input::read_text_if_any(
                    &path,
                    "manifest",
                    crate::input::MANIFEST_BYTES,
                )?;
                Some(read.map(|text| wconverge_lang::Source::new(path.display().to_string(), text)))
            })
        })
    }
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
                problems.push(
                    Problem::of(resource, DiagnosticCode::ModuleSource, message).with_help(help),
                );
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
