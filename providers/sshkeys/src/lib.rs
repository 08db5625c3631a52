//! The provider of Puppet's `ssh_authorized_key` type: one key of a user's
//! `authorized_keys`, the file replaced atomically at each change, owned by the user,
//! mode 0600, with `wconverge-file-core`'s rules: never written through a link, never
//! changed in place when another user could have put it there (the user owns the
//! directory), a temporary file that is the user's and private from its creation.

mod purge;

use wconverge_file_core::{read_entries, replace_entry, write_atomically};
use wconverge_sdk::metadata;
use wconverge_sdk::{
    Attribute, Change, DataType, PathAccess, Provider, ProviderInfo, Resource, Result, State,
    TypeSchema, Value, export_provider,
};

const KEY_TYPES: [&str; 8] = [
    "ssh-rsa",
    "ssh-dss",
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

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
             directory must exist.",
        )
        .parameter()
        .default_in_home("user", "/.ssh/authorized_keys")
        .path_access(PathAccess::ReadWrite),
    )
    .attribute(
        Attribute::new(
            "options",
            DataType::String,
            "Options before the key (`from=\"10.0.0.0/8\"`, `no-pty`).",
        )
        .many(),
    )
}

/// An option of authorized_keys: `name`, or `name="value"` (sshd's grammar, without the
/// escapes), so that no option can add a key or another option.
fn is_option(option: &str) -> bool {
    let (name, value) = match option.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (option, None),
    };
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && value.is_none_or(|value| {
            value.len() >= 2
                && value.starts_with('"')
                && value.ends_with('"')
                && !value[1..value.len() - 1].contains(['"', '\n', '\r'])
        })
}

/// The options of a line, split at the commas outside quotes.
fn split_options(options: &str) -> Vec<String> {
    let mut split = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in options.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            ',' if !quoted => split.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        split.push(current);
    }
    split
}

fn options(resource: &Resource) -> Vec<String> {
    resource.get_strings("options").unwrap_or_default()
}

/// A line's options, type, key and comment, if it holds a key.
pub(crate) fn parse(line: &str) -> Option<(String, String, String, String)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let at = fields.iter().position(|field| KEY_TYPES.contains(field))?;
    let key = fields.get(at + 1)?;
    Some((
        fields[..at].join(" "),
        fields[at].to_owned(),
        (*key).to_owned(),
        fields[at + 2..].join(" "),
    ))
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
        let name = resource.get_str("name").unwrap_or_default();
        if name.is_empty() || name.contains(['\n', '\r']) {
            problems.push("a key's name is one line of text".to_owned());
        }
        if resource.get_str("ensure") != Some("absent") {
            match resource.get_str("key") {
                Some(key)
                    if !key.is_empty()
                        && key
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)) => {}
                Some(key) => problems.push(format!("key `{key}` is not base64")),
                None => problems.push("a key needs `key` and `type`".to_owned()),
            }
            if resource.get("type").is_none() {
                problems.push("a key needs a `type` (ssh-ed25519, ssh-rsa...)".to_owned());
            }
        }
        for option in options(resource) {
            if !is_option(&option) {
                problems.push(format!(
                    "option `{option}` is neither `name` nor `name=\"value\"` (letters, digits \
                     and `-` in the name; no `\"` or line break in the value)"
                ));
            }
        }
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
        let name = resource.require_str("name")?;
        let text = read_entries(resource.require_str("target")?)?;
        Ok(
            match text
                .lines()
                .filter_map(parse)
                .find(|(_, _, _, comment)| comment == name)
            {
                None => State::new().with("ensure", "absent"),
                Some((options, key_type, key, _)) => {
                    let mut state = State::new()
                        .with("ensure", "present")
                        .with("key", key)
                        .with("type", key_type);
                    if !options.is_empty() {
                        state.set(
                            "options",
                            Value::Array(
                                split_options(&options)
                                    .into_iter()
                                    .map(Value::from)
                                    .collect(),
                            ),
                        );
                    }
                    state
                }
            },
        )
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
        if resource.get("options").is_some() && found_options != options(resource) {
            changes.push(Change::new(
                "options",
                None,
                None,
                format!(
                    "options changed '{}' to '{}'",
                    found_options.join(","),
                    options(resource).join(",")
                ),
            ));
        }
        Ok(changes)
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        if resource.type_name == "purge_ssh_keys" {
            return purge::apply(resource);
        }
        let name = resource.require_str("name")?;
        let target = resource.require_str("target")?;
        let text = read_entries(target)?;
        let present = resource.get_str("ensure") != Some("absent");
        let line = if present { Some(line(resource)?) } else { None };
        let content = replace_entry(
            &text,
            |existing| parse(existing).is_some_and(|(_, _, _, comment)| comment == name),
            line,
        );
        write_keys(target, resource.require_str("user")?, &content)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines_parse_with_options() {
        assert_eq!(
            parse("from=\"10.0.0.0/8\",no-pty ssh-ed25519 AAAAC3Nz deploy@ci"),
            Some((
                "from=\"10.0.0.0/8\",no-pty".to_owned(),
                "ssh-ed25519".to_owned(),
                "AAAAC3Nz".to_owned(),
                "deploy@ci".to_owned()
            ))
        );
        assert_eq!(parse("# a comment"), None);
    }

    #[test]
    fn options_follow_sshds_grammar_and_split_outside_quotes() {
        assert!(is_option("no-pty"));
        assert!(is_option("from=\"10.0.0.0/8,192.168.0.0/16\""));
        assert!(!is_option("no-pty ssh-rsa AAAA evil"));
        assert!(!is_option("command=\"x\" y"));
        assert!(!is_option("from=10.0.0.1"));
        assert_eq!(
            split_options("from=\"a,b\",no-pty"),
            vec!["from=\"a,b\"", "no-pty"]
        );
    }
}
