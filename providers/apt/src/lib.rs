//! The `apt` provider of `package` (Debian and its family): `dpkg-query` reads the
//! package database once for every package of a run, `apt-cache policy` the versions
//! `latest` would install, and `apt-get` installs, removes and purges, one named package
//! per launch, with no option the manifest chooses. The policy's argument patterns for
//! `apt-get` check that again.

use wconverge_package_core::{
    INSTALL_OPTIONS, SYSTEM_PATH, Wanted, database, failed, options, plan, schema, state_of,
    validate,
};
use wconverge_sdk::process::Command;
use wconverge_sdk::{
    Change, Error, Provider, ProviderInfo, Resource, Result, State, export_provider,
};

const APT_GET: &str = "/usr/bin/apt-get";
const APT_CACHE: &str = "/usr/bin/apt-cache";

struct Apt;

impl Provider for Apt {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("apt", env!("CARGO_PKG_VERSION"))
            .requires("os.family == 'debian'")
            .with_type(schema(
                "Provider `apt`: installs from the configured repositories with apt-get.",
                false,
            ))
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = validate(resource);
        if resource.get("source").is_some() {
            problems.push(
                "the apt provider installs from the repositories; `source` names a .deb for \
                 `provider => dpkg`"
                    .to_owned(),
            );
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
        let latest: Vec<&str> = resources
            .iter()
            .filter(|resource| matches!(Wanted::of(resource), Ok(Wanted::Latest)))
            .filter_map(|resource| resource.get_str("name"))
            .collect();
        let candidates = if latest.is_empty() {
            Ok(Default::default())
        } else {
            candidates(&latest)
        };
        resources
            .iter()
            .map(|resource| {
                let name = resource.require_str("name")?;
                let mut state = state_of(name, &database);
                if matches!(Wanted::of(resource), Ok(Wanted::Latest)) {
                    match &candidates {
                        Ok(candidates) => {
                            if let Some(candidate) = candidates.get(name) {
                                state.set("available", candidate.as_str());
                            }
                        }
                        Err(error) => return Err(error.clone()),
                    }
                }
                Ok(state)
            })
            .collect()
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        plan(resource, current, current.get_str("available"))
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let name = resource.require_str("name")?;
        let wanted = Wanted::of(resource)?;
        if !matches!(wanted, Wanted::Absent | Wanted::Purged) {
            // apt-get takes a name no package has as a pattern (`ng.` installs every
            // package it matches) or an action (`name+`): install only a package the
            // repositories know by that very name.
            let bare = name.split(':').next().unwrap_or(name);
            if !candidates(&[name])?.contains_key(bare) && !candidates(&[name])?.contains_key(name)
            {
                return Err(Error::new(format!(
                    "no package named `{name}` is available from the repositories (is the \
                     name right, and the package lists up to date?)"
                )));
            }
        }
        match wanted {
            Wanted::Present | Wanted::Latest => install(resource, name, &[]),
            Wanted::Version(version) => install(
                resource,
                &format!("{name}={version}"),
                &["--allow-downgrades"],
            ),
            Wanted::Absent => apt_get(&["remove", "-y", "-q", "--", name]),
            Wanted::Purged => apt_get(&["purge", "-y", "-q", "--", name]),
        }
    }

    fn refresh(resource: &Resource) -> Result<()> {
        if resource.get_bool("reinstall_on_refresh") != Some(true) {
            return Ok(());
        }
        let name = resource.require_str("name")?;
        match Wanted::of(resource)? {
            Wanted::Absent | Wanted::Purged => Ok(()),
            _ => install(resource, name, &["--reinstall"]),
        }
    }
}

export_provider!(Apt);

/// `apt-get install` of one package (`name` or `name=version`), keeping configuration
/// files the administrator changed, as Puppet's apt provider does.
fn install(resource: &Resource, spec: &str, extra: &[&str]) -> Result<()> {
    let mut args = vec![
        "install",
        "-y",
        "-q",
        "-o",
        "DPkg::Options::=--force-confold",
    ];
    let options = options(resource);
    for option in INSTALL_OPTIONS {
        if options.iter().any(|given| given == option) {
            args.push(option);
        }
    }
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", spec]);
    apt_get(&args)
}

fn apt_get(args: &[&str]) -> Result<()> {
    let output = Command::new(APT_GET)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .env("PATH", SYSTEM_PATH)
        .run()?;
    if output.success() {
        Ok(())
    } else {
        Err(failed(&format!("apt-get {}", args.join(" ")), &output))
    }
}

/// The version `apt-get install` would install of each name, from one `apt-cache
/// policy`; a name without one (`Candidate: (none)`) is left out.
fn candidates(names: &[&str]) -> Result<std::collections::HashMap<String, String>> {
    let output = Command::new(APT_CACHE)
        .arg("policy")
        .arg("--")
        .args(names)
        .run()?;
    if !output.success() {
        return Err(failed("apt-cache policy", &output));
    }
    Ok(parse_policy(&String::from_utf8_lossy(&output.stdout)))
}

fn parse_policy(text: &str) -> std::collections::HashMap<String, String> {
    let mut candidates = std::collections::HashMap::new();
    let mut current: Option<&str> = None;
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            current = Some(line.trim_end_matches(':'));
        } else if let (Some(name), Some(candidate)) =
            (current, line.trim().strip_prefix("Candidate: "))
            && candidate != "(none)"
        {
            candidates.insert(name.to_owned(), candidate.to_owned());
        }
    }
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_read_from_apt_cache_policy() {
        let text = "nginx:\n  Installed: (none)\n  Candidate: 1.22.1-9\n  Version table:\n     \
                    1.22.1-9 500\nghost:\n  Installed: (none)\n  Candidate: (none)\n";
        let candidates = parse_policy(text);
        assert_eq!(
            candidates.get("nginx").map(String::as_str),
            Some("1.22.1-9")
        );
        assert!(!candidates.contains_key("ghost"));
    }
}
