//! The `useradd` provider of Puppet's `user` and `group` types (the shadow utilities:
//! `useradd`, `usermod`, `userdel`, `groupadd`, `groupmod`, `groupdel`, `gpasswd`,
//! `chpasswd`). The databases are read through `getent`, once for every resource of a
//! run (`/etc/shadow` only when a resource manages a password or an expiry date). Each
//! launch sets one thing, with every value the manifest gives as an operand after its
//! option, and the policy's argument patterns check each launch again.

mod db;
mod group;
mod user;

use wconverge_sdk::{
    Change, Error, Provider, ProviderInfo, Resource, Result, State, export_provider,
};

struct Useradd;

impl Provider for Useradd {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("useradd", env!("CARGO_PKG_VERSION"))
            .requires("os.family == 'debian'")
            .with_type(user::schema())
            .with_type(group::schema())
    }

    fn validate(resource: &Resource) -> Vec<String> {
        match resource.type_name.as_str() {
            "user" => user::validate(resource),
            _ => group::validate(resource),
        }
    }

    fn current_state(resource: &Resource) -> Result<State> {
        wconverge_sdk::state_from_batch::<Self>(resource)
    }

    fn current_states(resources: &[Resource]) -> Vec<Result<State>> {
        let states = match resources.first().map(|first| first.type_name.as_str()) {
            Some("user") => user::states(resources),
            Some(_) => group::states(resources),
            None => Ok(Vec::new()),
        };
        match states {
            Ok(states) => states,
            Err(error) => resources.iter().map(|_| Err(error.clone())).collect(),
        }
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        match resource.type_name.as_str() {
            "user" => user::plan(resource, current),
            _ => group::plan(resource, current),
        }
    }

    fn apply(resource: &Resource, changes: &[Change]) -> Result<()> {
        match resource.type_name.as_str() {
            "user" => user::apply(resource, changes),
            _ => group::apply(resource, changes),
        }
    }
}

export_provider!(Useradd);

/// Runs one of the shadow utilities; an error carries what it said.
pub(crate) fn run(program: &str, args: &[&str], stdin: Option<Vec<u8>>) -> Result<()> {
    let mut command = wconverge_sdk::process::Command::new(program)
        .args(args)
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    if let Some(stdin) = stdin {
        command = command.stdin(stdin);
    }
    let output = command.run()?;
    if output.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(Error::new(format!(
        "{program} failed ({:?}): {}",
        output.status,
        said.trim()
    )))
}

/// A user or group name as the shadow utilities take it (Debian's `NAME_REGEX`, loosely):
/// it never starts with `-`, and has no `:`, `,`, space or control character.
pub(crate) fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.".contains(&b))
        && !name.ends_with('-')
}

/// The values of an attribute that takes one or many.
pub(crate) fn list(resource: &Resource, name: &str) -> Option<Vec<String>> {
    resource.get(name).map(|value| {
        value
            .as_list()
            .into_iter()
            .filter_map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .or_else(|| item.as_integer().map(|n| n.to_string()))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_start_with_a_dash() {
        for good in ["www-data", "_apt", "web1", "a.b"] {
            assert!(is_name(good), "{good}");
        }
        for bad in ["-oops", "Web", "a:b", "a b", "", "a,b", "x-"] {
            assert!(!is_name(bad), "{bad}");
        }
    }
}
