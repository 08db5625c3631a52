//! Puppet's `user`: created with `useradd` (system or not, uid, primary group, home,
//! whether to make it), then each other attribute set with `usermod` (one option a
//! launch), a password hash with `chpasswd -e` on standard input (never on a command
//! line, where every local user could read it), removed with `userdel`.

use crate::{db, is_name, list, run};
use std::collections::HashMap;
use wconverge_sdk::{
    Attribute, Change, DataType, Error, Resource, Result, State, TypeSchema, Value,
};

const USERADD: &str = "/usr/sbin/useradd";
const USERMOD: &str = "/usr/sbin/usermod";
const USERDEL: &str = "/usr/sbin/userdel";
const CHPASSWD: &str = "/usr/sbin/chpasswd";

pub(crate) fn schema() -> TypeSchema {
    TypeSchema::new(
        "user",
        "A user account: whether it exists, its ids, groups, home, shell, comment, \
         password hash and expiry.",
    )
    .batch_state()
    // What useradd, usermod and userdel (and `passwd`, `chsh`...) rewrite.
    .watches("/etc/passwd")
    .watches("/etc/shadow")
    .watches("/etc/group")
    .attribute(Attribute::new("name", DataType::String, "The user's name.").namevar())
    .attribute(Attribute::ensure_present("Whether the user exists."))
    .attribute(Attribute::new(
        "uid",
        DataType::Integer,
        "Its numeric id; chosen by useradd when not set.",
    ))
    .attribute(
        Attribute::new(
            "gid",
            DataType::OneOf(vec![DataType::Integer, DataType::String]),
            "Its primary group, a name or a gid; a group of its own name when not set.",
        )
        .refers_to("group"),
    )
    .attribute(
        Attribute::new(
            "groups",
            DataType::String,
            "Its supplementary groups. Left alone when not set.",
        )
        .many()
        .refers_to("group"),
    )
    .attribute(
        Attribute::new(
            "membership",
            DataType::enumeration(["minimum", "inclusive"]),
            "`minimum` (the default): the user is added to `groups` and stays in others; \
             `inclusive`: `groups` is the whole list.",
        )
        .parameter(),
    )
    .attribute(Attribute::new(
        "home",
        DataType::String,
        "Its home directory (absolute); `/home/NAME` for a new user when not set.",
    ))
    .attribute(
        Attribute::new(
            "managehome",
            DataType::Boolean,
            "Make the home directory when the user is created (with the skeleton), move it \
             when `home` changes, remove it with the user. Default: false.",
        )
        .parameter(),
    )
    .attribute(Attribute::new(
        "shell",
        DataType::String,
        "Its login shell.",
    ))
    .attribute(Attribute::new(
        "comment",
        DataType::String,
        "Its description (GECOS field).",
    ))
    .attribute(
        Attribute::new(
            "system",
            DataType::Boolean,
            "Create it as a system user (a uid below 1000, no aging). Default: false.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "password",
            DataType::String,
            "Its password hash, as /etc/shadow holds it (`$y$...`, `$6$...`); never \
             printed, diffed or logged.",
        )
        .sensitive(),
    )
    .attribute(Attribute::new(
        "expiry",
        DataType::String,
        "The day the account expires, `YYYY-MM-DD`, or `absent` for never.",
    ))
    .attribute(
        Attribute::new(
            "purge_ssh_keys",
            DataType::Boolean,
            "`true`: the keys of ~/.ssh/authorized_keys that no `ssh_authorized_key` of \
             the catalog manages are removed (by a `purge_ssh_keys` resource wconverge \
             adds when it applies the catalog).",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "primary_group",
            DataType::String,
            "The name of its primary group, as observed.",
        )
        .read_only(),
    )
}

pub(crate) fn validate(resource: &Resource) -> Vec<String> {
    let mut problems = Vec::new();
    let name = resource.get_str("name").unwrap_or_default();
    if !is_name(name) {
        problems.push(format!(
            "`{name}` is not a user name the shadow utilities take (lowercase letters, \
             digits, `_`, `-` and `.`, starting with a letter or `_`)"
        ));
    }
    if let Some(gid) = resource.get_str("gid")
        && !is_name(gid)
    {
        problems.push(format!("gid `{gid}` is neither a number nor a group name"));
    }
    for group in list(resource, "groups").unwrap_or_default() {
        if !is_name(&group) {
            problems.push(format!("group `{group}` is not a group name"));
        }
    }
    for attribute in ["home", "shell"] {
        if let Some(path) = resource.get_str(attribute)
            && (!path.starts_with('/') || path.contains(':') || path.contains('\n'))
        {
            problems.push(format!(
                "{attribute} `{path}` must be an absolute path without `:`"
            ));
        }
    }
    if let Some(comment) = resource.get_str("comment")
        && (comment.contains(':') || comment.contains('\n') || comment.starts_with('-'))
    {
        problems.push(format!(
            "comment `{comment}` may not hold `:` or a newline, nor start with `-`"
        ));
    }
    if let Some(expiry) = resource.get_str("expiry")
        && expiry != "absent"
        && !is_date(expiry)
    {
        problems.push(format!(
            "expiry `{expiry}` is neither `absent` nor a date like '2027-12-31'"
        ));
    }
    if let Some(password) = resource.get_str("password")
        && (password.contains(':') || password.contains('\n') || password.is_empty())
    {
        problems.push(
            "password must be a hash as /etc/shadow holds it (no `:`, no newline)".to_owned(),
        );
    }
    if let Some(uid) = resource.get("uid").and_then(Value::as_integer)
        && !(0..=i64::from(u32::MAX - 1)).contains(&uid)
    {
        problems.push(format!("uid {uid} is out of range"));
    }
    if resource.get_bool("purge_ssh_keys") == Some(true) {
        problems.push(
            "purge_ssh_keys => true reached the provider: wconverge turns it into a \
             `purge_ssh_keys` resource when it applies a catalog"
                .to_owned(),
        );
    }
    problems
}

fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(index, b)| index == 4 || index == 7 || b.is_ascii_digit())
}

pub(crate) fn states(resources: &[Resource]) -> Result<Vec<Result<State>>> {
    let users = db::passwd()?;
    let groups = db::groups()?;
    let names_by_gid: HashMap<i64, &str> = groups
        .iter()
        .map(|(name, group)| (group.gid, name.as_str()))
        .collect();
    // /etc/shadow only when something asks for what only it holds.
    let shadow = if resources
        .iter()
        .any(|resource| resource.get("password").is_some() || resource.get("expiry").is_some())
    {
        Some(db::shadow()?)
    } else {
        None
    };
    Ok(resources
        .iter()
        .map(|resource| {
            let name = resource.require_str("name")?;
            let Some(user) = users.get(name) else {
                return Ok(State::new().with("ensure", "absent"));
            };
            let mut member_of: Vec<&str> = groups
                .iter()
                .filter(|(_, group)| group.members.iter().any(|member| member == name))
                .map(|(group, _)| group.as_str())
                .collect();
            member_of.sort_unstable();
            let mut state = State::new()
                .with("ensure", "present")
                .with("uid", user.uid)
                .with("gid", user.gid)
                .with(
                    "groups",
                    Value::Array(member_of.into_iter().map(Value::from).collect()),
                )
                .with("home", user.home.as_str())
                .with("shell", user.shell.as_str())
                .with("comment", user.comment.as_str());
            if let Some(group) = names_by_gid.get(&user.gid) {
                state.set("primary_group", *group);
            }
            if let Some(entry) = shadow.as_ref().and_then(|shadow| shadow.get(name)) {
                if resource.get("password").is_some() {
                    state.set(
                        "password",
                        Value::Sensitive(Box::new(entry.hash.as_str().into())),
                    );
                }
                state.set(
                    "expiry",
                    entry
                        .expiry
                        .map_or_else(|| "absent".to_owned(), db::date_of),
                );
            }
            Ok(state)
        })
        .collect())
}

fn text(value: Option<&Value>) -> String {
    match value.map(Value::unwrap_sensitive) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Integer(number)) => number.to_string(),
        _ => String::new(),
    }
}

/// The supplementary groups `wanted` and `found`, as `minimum` or `inclusive` compare
/// them: those to add and those to drop.
fn group_difference(resource: &Resource, found: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let wanted = list(resource, "groups")?;
    let missing: Vec<String> = wanted
        .iter()
        .filter(|group| !found.contains(group))
        .cloned()
        .collect();
    let extra: Vec<String> = if resource.get_str("membership") == Some("inclusive") {
        found
            .iter()
            .filter(|group| !wanted.contains(group))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    (!missing.is_empty() || !extra.is_empty()).then_some((missing, extra))
}

pub(crate) fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
    let exists = current.get_str("ensure") == Some("present");
    if resource.get_str("ensure") == Some("absent") {
        return Ok(if exists {
            let home = if resource.get_bool("managehome") == Some(true) {
                " with its home directory"
            } else {
                ""
            };
            vec![Change::removed(format!("removed{home}"))]
        } else {
            Vec::new()
        });
    }
    let mut changes = Vec::new();
    if !exists {
        changes.push(Change::created("created"));
    } else {
        for attribute in ["uid", "home", "shell", "comment", "expiry"] {
            let Some(wanted) = resource.get(attribute) else {
                continue;
            };
            let (wanted, found) = (text(Some(wanted)), text(current.get(attribute)));
            if wanted != found {
                changes.push(Change::new(
                    attribute,
                    Some(found.clone().into()),
                    Some(if attribute == "uid" {
                        Value::Integer(wanted.parse().unwrap_or_default())
                    } else {
                        wanted.clone().into()
                    }),
                    format!("{attribute} changed '{found}' to '{wanted}'"),
                ));
            }
        }
        if let Some(wanted) = resource.get("gid") {
            let wanted = text(Some(wanted));
            let by_id = text(current.get("gid"));
            let by_name = current.get_str("primary_group").unwrap_or_default();
            if wanted != by_id && wanted != by_name {
                changes.push(Change::new(
                    "gid",
                    None,
                    None,
                    format!("primary group changed '{by_name}' to '{wanted}'"),
                ));
            }
        }
    }
    let found: Vec<String> = current.get_strings("groups").unwrap_or_default();
    if let Some((missing, extra)) = group_difference(resource, &found) {
        let mut message = "groups".to_owned();
        if !missing.is_empty() {
            message.push_str(&format!(" added: {}", missing.join(", ")));
        }
        if !extra.is_empty() {
            message.push_str(&format!(" removed: {}", extra.join(", ")));
        }
        changes.push(Change::new("groups", None, None, message));
    }
    if resource.get("password").is_some()
        && (!exists || text(resource.get("password")) != text(current.get("password")))
    {
        // Not even a digest of the hash goes into the report.
        changes.push(Change::new("password", None, None, "password changed"));
    }
    if !exists && let Some(expiry) = resource.get_str("expiry") {
        changes.push(Change::new(
            "expiry",
            None,
            None,
            format!("expiry set to {expiry}"),
        ));
    }
    for attribute in ["shell", "comment"] {
        if !exists && let Some(value) = resource.get_str(attribute) {
            changes.push(Change::new(
                attribute,
                None,
                None,
                format!("{attribute} set to '{value}'"),
            ));
        }
    }
    Ok(changes)
}

pub(crate) fn apply(resource: &Resource, changes: &[Change]) -> Result<()> {
    let name = resource.require_str("name")?;
    let managehome = resource.get_bool("managehome") == Some(true);
    for change in changes {
        match change.attribute.as_str() {
            "ensure" if resource.get_str("ensure") == Some("absent") => {
                let mut args = Vec::new();
                if managehome {
                    args.push("-r");
                }
                args.extend(["--", name]);
                run(USERDEL, &args, None)?;
            }
            "ensure" => {
                let uid = resource
                    .get("uid")
                    .and_then(Value::as_integer)
                    .map(|uid| uid.to_string());
                let gid = resource.get("gid").map(|gid| text(Some(gid)));
                let home = resource
                    .get_str("home")
                    .map_or_else(|| format!("/home/{name}"), str::to_owned);
                let mut args = Vec::new();
                if resource.get_bool("system") == Some(true) {
                    args.push("-r");
                }
                if let Some(uid) = &uid {
                    args.extend(["-u", uid.as_str()]);
                }
                if let Some(gid) = &gid {
                    args.extend(["-g", gid.as_str()]);
                }
                args.extend(["-d", home.as_str(), if managehome { "-m" } else { "-M" }]);
                args.extend(["--", name]);
                run(USERADD, &args, None)?;
            }
            "uid" => usermod(name, "-u", &text(resource.get("uid")))?,
            "gid" => usermod(name, "-g", &text(resource.get("gid")))?,
            "home" => {
                let home = text(resource.get("home"));
                if managehome {
                    run(USERMOD, &["-d", &home, "-m", "--", name], None)?;
                } else {
                    usermod(name, "-d", &home)?;
                }
            }
            "shell" => usermod(name, "-s", &text(resource.get("shell")))?,
            "comment" => usermod(name, "-c", &text(resource.get("comment")))?,
            "expiry" => {
                let expiry = text(resource.get("expiry"));
                // An empty date clears it.
                usermod(name, "-e", if expiry == "absent" { "" } else { &expiry })?;
            }
            "groups" => {
                let wanted = list(resource, "groups").unwrap_or_default().join(",");
                if resource.get_str("membership") == Some("inclusive") {
                    usermod(name, "-G", &wanted)?;
                } else {
                    run(USERMOD, &["-a", "-G", &wanted, "--", name], None)?;
                }
            }
            "password" => {
                let hash = text(resource.get("password"));
                run(
                    CHPASSWD,
                    &["-e"],
                    Some(format!("{name}:{hash}\n").into_bytes()),
                )?;
            }
            other => {
                return Err(Error::new(format!(
                    "no change of `{other}` is planned for a user"
                )));
            }
        }
    }
    Ok(())
}

fn usermod(name: &str, option: &str, value: &str) -> Result<()> {
    run(USERMOD, &[option, value, "--", name], None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> Resource {
        Resource::new("user", name).with("name", name)
    }

    #[test]
    fn values_that_could_become_options_or_break_the_files_are_refused() {
        assert!(validate(&user("web")).is_empty());
        assert_eq!(validate(&user("-oops")).len(), 1);
        assert_eq!(validate(&user("web").with("comment", "-x")).len(), 1);
        assert_eq!(validate(&user("web").with("comment", "a:b")).len(), 1);
        assert_eq!(validate(&user("web").with("home", "srv")).len(), 1);
        assert_eq!(validate(&user("web").with("expiry", "2027-13")).len(), 1);
        assert!(validate(&user("web").with("expiry", "2027-12-31")).is_empty());
    }

    #[test]
    fn minimum_membership_only_adds() {
        let found = vec!["adm".to_owned(), "web".to_owned()];
        let wanted = user("u").with("groups", Value::Array(vec!["web".into(), "www".into()]));
        assert_eq!(
            group_difference(&wanted, &found),
            Some((vec!["www".to_owned()], vec![]))
        );
        let inclusive = wanted.clone().with("membership", "inclusive");
        assert_eq!(
            group_difference(&inclusive, &found),
            Some((vec!["www".to_owned()], vec!["adm".to_owned()]))
        );
        let same = user("u").with("groups", "web");
        assert_eq!(group_difference(&same, &found), None);
    }

    #[test]
    fn a_password_change_says_nothing_of_the_hash() {
        let current = State::new()
            .with("ensure", "present")
            .with("password", Value::Sensitive(Box::new("$6$old".into())));
        let resource = user("u").with("password", Value::Sensitive(Box::new("$6$new".into())));
        let changes = plan(&resource, &current).expect("plan");
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].message, "password changed");
        assert!(changes[0].current.is_none() && changes[0].desired.is_none());
    }
}
