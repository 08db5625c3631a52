//! The `dpkg` provider of `package`: a local `.deb` (`source`) installed with `dpkg -i`,
//! removed with `dpkg -r`, purged with `dpkg -P`; the package database read once for
//! every package of a run, and each source's name and version with `dpkg-deb`.

use wconverge_package_core::{
    SYSTEM_PATH, Wanted, database, failed, plan, schema, state_of, validate,
};
use wconverge_sdk::metadata;
use wconverge_sdk::process::Command;
use wconverge_sdk::{
    Change, Error, Provider, ProviderInfo, Resource, Result, State, export_provider,
};

const DPKG: &str = "/usr/bin/dpkg";
const DPKG_DEB: &str = "/usr/bin/dpkg-deb";

struct Dpkg;

impl Provider for Dpkg {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("dpkg", env!("CARGO_PKG_VERSION"))
            .requires("os.family == 'debian'")
            .with_type(schema(
                "Provider `dpkg`: installs the `.deb` file `source` names with dpkg.",
                true,
            ))
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = validate(resource);
        let removing = matches!(Wanted::of(resource), Ok(Wanted::Absent | Wanted::Purged));
        match resource.get_str("source") {
            Some(source) if !source.starts_with('/') => problems.push(format!(
                "source `{source}` is not an absolute path; give the .deb file's full path"
            )),
            Some(_) => {}
            None if removing => {}
            None => problems.push(
                "the dpkg provider installs from `source`, a .deb file; set it (or use the \
                 apt provider)"
                    .to_owned(),
            ),
        }
        if resource.get("install_options").is_some() {
            problems.push("the dpkg provider takes no `install_options`".to_owned());
        }
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        wconverge_sdk::state_from_batch::<Self>(resource)
    }

    fn current_states(resources: &[Resource]) -> Vec<Result<State>> {
        let database = match database() {
            Ok(database) => database,
            Err(error) => return resources.iter().map(|_| Err(error.clone())).collect(),
        };
        resources
            .iter()
            .map(|resource| {
                let name = resource.require_str("name")?;
                let mut state = state_of(name, &database);
                if let Some(source) = resource.get_str("source")
                    && !matches!(Wanted::of(resource), Ok(Wanted::Absent | Wanted::Purged))
                {
                    trusted_source(source)?;
                    let (package, version) = source_of(source)?;
                    if package != name.split(':').next().unwrap_or(name) {
                        return Err(Error::new(format!(
                            "source `{source}` holds package `{package}`, not `{name}`"
                        )));
                    }
                    state.set("available", version);
                }
                Ok(state)
            })
            .collect()
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        let available = current.get_str("available");
        if let (Ok(Wanted::Version(version)), Some(available)) = (Wanted::of(resource), available)
            && version != available
        {
            return Err(Error::new(format!(
                "source `{}` holds version {available}, not {version}",
                resource.get_str("source").unwrap_or_default()
            )));
        }
        plan(resource, current, available)
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let name = resource.require_str("name")?;
        match Wanted::of(resource)? {
            Wanted::Absent => dpkg(&["-r", "--", name]),
            Wanted::Purged => dpkg(&["-P", "--", name]),
            _ => dpkg(&[
                "--force-confold",
                "-i",
                "--",
                resource.require_str("source")?,
            ]),
        }
    }

    fn refresh(resource: &Resource) -> Result<()> {
        if resource.get_bool("reinstall_on_refresh") != Some(true) {
            return Ok(());
        }
        match Wanted::of(resource)? {
            Wanted::Absent | Wanted::Purged => Ok(()),
            _ => dpkg(&[
                "--force-confold",
                "-i",
                "--",
                resource.require_str("source")?,
            ]),
        }
    }
}

export_provider!(Dpkg);

fn dpkg(args: &[&str]) -> Result<()> {
    let output = Command::new(DPKG)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .env("PATH", SYSTEM_PATH)
        .run()?;
    if output.success() {
        Ok(())
    } else {
        Err(failed(&format!("dpkg {}", args.join(" ")), &output))
    }
}

/// A package's maintainer scripts run as root, and dpkg reads the file by its name: it
/// must be root's, writable by root alone, in a directory only root can write (the host
/// checked the directories above when it granted this one).
fn trusted_source(source: &str) -> Result<()> {
    let stat = metadata::stat(source)?
        .ok_or_else(|| Error::new(format!("source `{source}` does not exist")))?;
    let dir = source
        .rsplit_once('/')
        .map_or("/", |(dir, _)| if dir.is_empty() { "/" } else { dir });
    let dir_stat =
        metadata::stat(dir)?.ok_or_else(|| Error::new(format!("`{dir}` does not exist")))?;
    let private = |uid: u32, mode: u32| uid == 0 && mode & 0o022 == 0;
    if stat.kind != metadata::FileKind::File
        || !private(stat.uid, stat.mode)
        || !(private(dir_stat.uid, dir_stat.mode)
            || (dir_stat.uid == 0 && dir_stat.mode & 0o1000 != 0))
    {
        return Err(Error::new(format!(
            "source `{source}` must be a regular file of root's that only root can write, \
             in a directory only root can write: its maintainer scripts run as root, and \
             whoever can change it before dpkg reads it chooses them"
        )));
    }
    Ok(())
}

/// The package name and version a `.deb` file holds.
fn source_of(source: &str) -> Result<(String, String)> {
    let output = Command::new(DPKG_DEB)
        .args(["-f", "--", source, "Package", "Version"])
        .run()?;
    if !output.success() {
        return Err(failed(&format!("dpkg-deb -f {source}"), &output));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let field = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key))
            .map(|value| value.trim().to_owned())
            .ok_or_else(|| {
                Error::new(format!(
                    "`{source}` has no `{}` field",
                    key.trim_end_matches(": ")
                ))
            })
    };
    Ok((field("Package: ")?, field("Version: ")?))
}
