//! Puppet's `group`: `groupadd`, `groupmod -g`, `groupdel`, and its members with
//! `gpasswd` (all of them with `auth_membership`, Puppet's default; else only those
//! missing are added).

use crate::{db, is_name, list, run};
use wconverge_sdk::{
    Attribute, Change, DataType, Error, Resource, Result, State, TypeSchema, Value,
};

const GROUPADD: &str = "/usr/sbin/groupadd";
const GROUPMOD: &str = "/usr/sbin/groupmod";
const GROUPDEL: &str = "/usr/sbin/groupdel";
const GPASSWD: &str = "/usr/bin/gpasswd";

pub(crate) fn schema() -> TypeSchema {
    TypeSchema::new(
        "group",
        "A group of users: whether it exists, its gid and members.",
    )
    .batch_state()
    .watches("/etc/group")
    .watches("/etc/gshadow")
    .attribute(Attribute::new("name", DataType::String, "The group's name.").namevar())
    .attribute(Attribute::ensure_present("Whether the group exists."))
    .attribute(Attribute::new(
        "gid",
        DataType::Integer,
        "Its numeric id; chosen by groupadd when not set.",
    ))
    .attribute(
        Attribute::new(
            "members",
            DataType::String,
            "Its members (user names). Left alone when not set.",
        )
        .many(),
    )
    .attribute(
        Attribute::new(
            "auth_membership",
            DataType::Boolean,
            "`true` (the default): `members` is the whole list, others are removed; \
                 `false`: those listed are added, others stay.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "system",
            DataType::Boolean,
            "Create it as a system group (a gid below 1000). Default: false.",
        )
        .parameter(),
    )
}

pub(crate) fn validate(resource: &Resource) -> Vec<String> {
    let mut problems = Vec::new();
    let name = resource.get_str("name").unwrap_or_default();
    if !is_name(name) {
        problems.push(format!(
            "`{name}` is not a group name the shadow utilities take (lowercase letters, \
             digits, `_`, `-` and `.`, starting with a letter or `_`)"
        ));
    }
    for member in list(resource, "members").unwrap_or_default() {
        if !is_name(&member) {
            problems.push(format!("member `{member}` is not a user name"));
        }
    }
    if let Some(gid) = resource.get("gid").and_then(Value::as_integer)
        && !(0..=i64::from(u32::MAX - 1)).contains(&gid)
    {
        problems.push(format!("gid {gid} is out of range"));
    }
    problems
}

pub(crate) fn states(resources: &[Resource]) -> Result<Vec<Result<State>>> {
    let groups = db::groups()?;
    Ok(resources
        .iter()
        .map(|resource| {
            let name = resource.require_str("name")?;
            Ok(match groups.get(name) {
                None => State::new().with("ensure", "absent"),
                Some(group) => State::new()
                    .with("ensure", "present")
                    .with("gid", group.gid)
                    .with(
                        "members",
                        Value::Array(group.members.iter().map(|m| m.as_str().into()).collect()),
                    ),
            })
        })
        .collect())
}

/// Puppet's default: the members listed are added, others stay.
fn inclusive(resource: &Resource) -> bool {
    resource.get_bool("auth_membership") == Some(true)
}

pub(crate) fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
    let name = resource.require_str("name")?;
    let exists = current.get_str("ensure") == Some("present");
    let mut changes = Vec::new();
    if resource.get_str("ensure") == Some("absent") {
        if exists {
            changes.push(Change::removed("removed"));
        }
        return Ok(changes);
    }
    if !exists {
        let gid = resource
            .get("gid")
            .and_then(Value::as_integer)
            .map_or_else(String::new, |gid| format!(" with gid {gid}"));
        changes.push(Change::created(format!("created{gid}")));
    } else if let Some(gid) = resource.get("gid").and_then(Value::as_integer)
        && current.get("gid").and_then(Value::as_integer) != Some(gid)
    {
        let old = current.get("gid").and_then(Value::as_integer).unwrap_or(-1);
        changes.push(Change::new(
            "gid",
            Some(old.into()),
            Some(gid.into()),
            format!("gid changed {old} to {gid}"),
        ));
    }
    if let Some(wanted) = list(resource, "members") {
        let found: Vec<String> = current.get_strings("members").unwrap_or_default();
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|member| !found.contains(member))
            .collect();
        let extra: Vec<&String> = found
            .iter()
            .filter(|member| !wanted.contains(member))
            .collect();
        if !missing.is_empty() || (inclusive(resource) && !extra.is_empty()) {
            let mut message = format!("members of `{name}`");
            if !missing.is_empty() {
                message.push_str(&format!(" added: {}", join(&missing)));
            }
            if inclusive(resource) && !extra.is_empty() {
                message.push_str(&format!(" removed: {}", join(&extra)));
            }
            changes.push(Change::new("members", None, None, message));
        }
    }
    Ok(changes)
}

fn join(names: &[&String]) -> String {
    names
        .iter()
        .map(|name| name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn apply(resource: &Resource, changes: &[Change]) -> Result<()> {
    let name = resource.require_str("name")?;
    for change in changes {
        match change.attribute.as_str() {
            "ensure" if resource.get_str("ensure") == Some("absent") => {
                run(GROUPDEL, &["--", name], None)?;
            }
            "ensure" => {
                let gid = resource
                    .get("gid")
                    .and_then(Value::as_integer)
                    .map(|gid| gid.to_string());
                let mut args = Vec::new();
                if resource.get_bool("system") == Some(true) {
                    args.push("-r");
                }
                if let Some(gid) = &gid {
                    args.extend(["-g", gid.as_str()]);
                }
                args.extend(["--", name]);
                run(GROUPADD, &args, None)?;
            }
            "gid" => {
                let gid = resource
                    .get("gid")
                    .and_then(Value::as_integer)
                    .unwrap_or_default()
                    .to_string();
                run(GROUPMOD, &["-g", &gid, "--", name], None)?;
            }
            "members" => {
                let wanted = list(resource, "members").unwrap_or_default();
                if inclusive(resource) {
                    run(GPASSWD, &["-M", &wanted.join(","), "--", name], None)?;
                } else {
                    let found = db::groups()?
                        .remove(name)
                        .map(|group| group.members)
                        .unwrap_or_default();
                    for member in wanted.iter().filter(|member| !found.contains(member)) {
                        run(GPASSWD, &["-a", member, "--", name], None)?;
                    }
                }
            }
            other => {
                return Err(Error::new(format!(
                    "no change of `{other}` is planned for a group"
                )));
            }
        }
    }
    Ok(())
}
