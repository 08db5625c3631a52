//! The provider of Puppet's `ssh_authorized_key` type: one key of a user's
//! `authorized_keys`, the file replaced atomically at each change, owned by the user,
//! mode 0600, with `wconverge-file-core`'s rules: never written through a link, never
//! changed in place when another user could have put it there (the user owns the
//! directory), a temporary file that is the user's and private from its creation.

mod grammar;
mod purge;

use grammar::{KEY_TYPES, Line, key_problem, name_problem, option_problem, split_options};
use wconverge_file_core::{read_entries, replace_entry, write_atomically};
use wconverge_sdk::metadata;
use wconverge_sdk::shown;
use wconverge_sdk::{
    Attribute, Change, DataType, PathAccess, Provider, ProviderInfo, Resource, Result, State,
    TypeSchema, Value, export_provider,
};

struct SshKeys;

fn schema() -> TypeSchema {
    TypeSchema::new(
        "ssh_authorized_key",
        "A public key in a user's authorized_keys, found by its name (the key's comment).",
    )
    .attribute(Attribute::new("name", DataType::String, "The key's name: its comment.").namevar())
    .attribute(Attribute::ensure_present("Whether the key is there."))
    .attribute(Attribute::new(
        "key",
        DataType::String,
        "The public key, base64, without its type and comment.",
    ))
    .attribute(Attribute::new(
        "type",
        DataType::enumeration(KEY_TYPES),
        "The key's type.",
    ))
    .attribute(
        Attribute::new(
            "user",
            DataType::String,
            "Whose key it is: the file's owner.",
        )
        .required()
        .refers_to("user"),
    )
    .attribute(
        Attribute::new(
            "target",
            DataType::String,
            "The authorized_keys file; `~USER/.ssh/authorized_keys` when not set. Its \
             directory must exist. Each line is checked before it is written against \
             sshd's authorized_keys grammar: options sshd knows with values that cannot \
             move where the options end, a key of its type, a name kept byte for byte.",
        )
        .parameter()
        .default_in_home("user", "/.ssh/authorized_keys")
        .path_access(PathAccess::ReadWrite),
    )
    .attribute(
        Attribute::new(
            "options",
            DataType::String,
            "Options before the key (`from=\"10.0.0.0/8\"`, `no-pty`), each an option sshd \
             knows, `name` or `name=\"value\"`; in a value, a quote is written `\\\"`.",
        )
        .many(),
    )
    .attribute(
        Attribute::new(
            "comment",
            DataType::String,
            "The name the line of this key carries, as observed.",
        )
        .read_only(),
    )
    .attribute(
        Attribute::new(
            "others",
            DataType::Integer,
            "Other lines carrying this key or this name, as observed (removed when applied).",
        )
        .read_only(),
    )
}

fn options(resource: &Resource) -> Vec<String> {
    resource.get_strings("options").unwrap_or_default()
}

fn line(resource: &Resource) -> Result<String> {
    let mut line = String::new();
    let options = options(resource);
    if !options.is_empty() {
        line.push_str(&options.join(","));
        line.push(' ');
    }
    line.push_str(&format!(
        "{} {} {}",
        resource.require_str("type")?,
        resource.require_str("key")?,
        resource.require_str("name")?
    ));
    Ok(line)
}

impl Provider for SshKeys {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("sshkeys", env!("CARGO_PKG_VERSION"))
            .with_type(schema())
            .with_type(purge::schema())
    }

    fn validate(resource: &Resource) -> Vec<String> {
        if resource.type_name == "purge_ssh_keys" {
            return Vec::new();
        }
        let mut problems = Vec::new();
        problems.extend(name_problem(resource.get_str("name").unwrap_or_default()));
        if resource.get_str("ensure") != Some("absent") {
            match (resource.get_str("type"), resource.get_str("key")) {
                (Some(key_type), Some(key)) => problems.extend(key_problem(key_type, key)),
                _ => problems
                    .push("a key needs `key` and `type` (ssh-ed25519, ssh-rsa...)".to_owned()),
            }
        } else if let Some(key) = resource.get_str("key")
            && grammar::decode_base64(key).is_none()
        {
            problems.push(format!("key `{}` is not base64", shown(key)));
        }
        problems.extend(
            options(resource)
                .iter()
                .filter_map(|option| option_problem(option)),
        );
        if let Some(target) = resource.get_str("target")
            && !target.ends_with("/authorized_keys")
            && !target.ends_with("/authorized_keys2")
        {
            problems.push(format!(
                "target `{target}` must be an authorized_keys file (ending in \
                 `/authorized_keys`)"
            ));
        }
        let user = resource.get_str("user").unwrap_or_default();
        if user.is_empty() || user.starts_with('-') || user.contains([':', '/', ' ']) {
            problems.push(format!("`{user}` is not a user name"));
        }
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        if resource.type_name == "purge_ssh_keys" {
            return purge::current_state(resource);
        }
        let text = read_entries(resource.require_str("target")?)?;
        let holders: Vec<Line> = text
            .lines()
            .filter(|line| holds(resource, line))
            .filter_map(grammar::parse)
            .collect();
        let wanted = wanted_identity(resource);
        // The line that is the key: the one with its key, else (a key being replaced)
        // the first with its name.
        let Some(found) = holders
            .iter()
            .find(|line| wanted.is_some() && line.identity() == wanted)
            .or(holders.first())
        else {
            return Ok(State::new().with("ensure", "absent"));
        };
        let mut state = State::new()
            .with("ensure", "present")
            .with("key", found.key.as_str())
            .with("type", found.key_type.as_str())
            .with("comment", found.comment.as_str())
            .with("others", (holders.len() - 1) as i64);
        if !found.options.is_empty() {
            state.set(
                "options",
                Value::Array(
                    split_options(&found.options)
                        .into_iter()
                        .map(Value::from)
                        .collect(),
                ),
            );
        }
        Ok(state)
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        if resource.type_name == "purge_ssh_keys" {
            return purge::plan(resource, current);
        }
        let exists = current.get_str("ensure") == Some("present");
        let target = resource.require_str("target")?;
        if resource.get_str("ensure") == Some("absent") {
            return Ok(if exists {
                vec![Change::removed(format!("removed from {target}"))]
            } else {
                Vec::new()
            });
        }
        if !exists {
            return Ok(vec![Change::created(format!("added to {target}"))]);
        }
        let found = (
            current.get_str("type").unwrap_or_default(),
            current.get_str("key").unwrap_or_default(),
        );
        let wanted = (resource.require_str("type")?, resource.require_str("key")?);
        let found_options: Vec<String> = current.get_strings("options").unwrap_or_default();
        let mut changes = Vec::new();
        if found != wanted {
            changes.push(Change::new("key", None, None, "key replaced"));
        }
        let name = resource.require_str("name")?;
        let comment = current.get_str("comment").unwrap_or_default();
        if comment != name {
            changes.push(Change::new(
                "comment",
                None,
                None,
                format!(
                    "the line of this key was named '{}'; named '{name}'",
                    shown(comment)
                ),
            ));
        }
        if resource.get("options").is_some() && found_options != options(resource) {
            changes.push(Change::new(
                "options",
                None,
                None,
                format!(
                    "options changed '{}' to '{}'",
                    shown(&found_options.join(",")),
                    options(resource).join(",")
                ),
            ));
        }
        let others = current
            .get("others")
            .and_then(Value::as_integer)
            .unwrap_or(0);
        if others > 0 {
            changes.push(Change::new(
                "others",
                None,
                None,
                format!(
                    "removed {others} other line(s) of {target} carrying this key or the \
                     name '{name}'"
                ),
            ));
        }
        Ok(changes)
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        if resource.type_name == "purge_ssh_keys" {
            return purge::apply(resource);
        }
        let target = resource.require_str("target")?;
        let text = read_entries(target)?;
        let present = resource.get_str("ensure") != Some("absent");
        let line = if present { Some(line(resource)?) } else { None };
        let content = replace_entry(&text, |existing| holds(resource, existing), line);
        write_keys(target, resource.require_str("user")?, &content)
    }
}

/// The decoded key the resource declares.
fn wanted_identity(resource: &Resource) -> Option<Vec<u8>> {
    resource.get_str("key").and_then(grammar::decode_base64)
}

/// Whether `line` is the resource's or claims to be: it carries the resource's key
/// (whatever its name: sshd takes the options of the first line with the key), or its
/// name (the line of a key being replaced, or one that poses as it). There is one such
/// line once the resource is applied.
fn holds(resource: &Resource, line: &str) -> bool {
    let Some(parsed) = grammar::parse(line) else {
        return false;
    };
    let wanted = wanted_identity(resource);
    resource.get_str("name") == Some(parsed.comment.as_str())
        || (wanted.is_some() && parsed.identity() == wanted)
}

/// Replaces `target` with `content`, atomically, as the user's file with mode 0600.
pub(crate) fn write_keys(target: &str, user: &str, content: &str) -> Result<()> {
    let existing = metadata::stat(target)?;
    let as_file = Resource::new("file", target)
        .with("path", target)
        .with("owner", user)
        .with("mode", "0600");
    write_atomically(&as_file, target, content.as_bytes(), existing.as_ref())
}

export_provider!(SshKeys);
