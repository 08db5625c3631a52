//! `user { purge_ssh_keys => true }`: the keys of the user's authorized_keys that no
//! `ssh_authorized_key` of the catalog manages are removed. wconverge generates one
//! `purge_ssh_keys` resource per such user when it applies a catalog (`keep`: the keys
//! the catalog manages for the user), ordered after the user and its keys.
//!
//! Keys are told apart by what they are, the decoded key, never by their names: a line
//! whose key is not managed goes whatever its comment says, and so does any line sshd
//! might read as a key that wconverge cannot (only blank lines and `#` comments stay).

use crate::grammar::{decode_base64, is_blank_or_comment, parse};
use crate::write_keys;
use wconverge_file_core::read_entries;
use wconverge_sdk::shown;
use wconverge_sdk::{
    Attribute, Change, DataType, PathAccess, Resource, Result, State, TypeSchema, Value,
};

pub(crate) fn schema() -> TypeSchema {
    TypeSchema::new(
        "purge_ssh_keys",
        "The keys of a user's authorized_keys that the catalog does not manage, removed \
         (what `user { purge_ssh_keys => true }` becomes).",
    )
    .attribute(
        Attribute::new("user", DataType::String, "Whose keys.")
            .namevar()
            .refers_to("user"),
    )
    .attribute(
        Attribute::new(
            "target",
            DataType::String,
            "The authorized_keys file; `~USER/.ssh/authorized_keys` when not set.",
        )
        .parameter()
        .default_in_home("user", "/.ssh/authorized_keys")
        .path_access(PathAccess::ReadWrite),
    )
    .attribute(
        Attribute::new(
            "keep",
            DataType::String,
            "The keys (base64) the catalog manages for the user.",
        )
        .many()
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "unmanaged",
            DataType::String,
            "The keys no resource manages, as observed: their names, or their lines when \
             they hold no key wconverge can read.",
        )
        .many()
        .read_only(),
    )
}

/// Whether `line` stays: a blank line, a comment, or a key the catalog manages.
fn kept(keep: &[Vec<u8>], line: &str) -> bool {
    is_blank_or_comment(line)
        || parse(line)
            .and_then(|parsed| parsed.identity())
            .is_some_and(|identity| keep.contains(&identity))
}

fn keep(resource: &Resource) -> Vec<Vec<u8>> {
    resource
        .get_strings("keep")
        .unwrap_or_default()
        .iter()
        .filter_map(|key| decode_base64(key))
        .collect()
}

/// How the lines that go are named in the report: their names, escaped.
fn unmanaged(resource: &Resource, text: &str) -> Vec<String> {
    let keep = keep(resource);
    text.lines()
        .filter(|line| !kept(&keep, line))
        .map(|line| match parse(line) {
            Some(parsed) if !parsed.comment.is_empty() => shown(&parsed.comment),
            Some(parsed) => format!("a {} key without a name", shown(&parsed.key_type)),
            None => format!(
                "the line `{}`",
                shown(&line.chars().take(60).collect::<String>())
            ),
        })
        .collect()
}

pub(crate) fn current_state(resource: &Resource) -> Result<State> {
    let text = read_entries(resource.require_str("target")?)?;
    Ok(State::new().with(
        "unmanaged",
        Value::Array(
            unmanaged(resource, &text)
                .into_iter()
                .map(Value::from)
                .collect(),
        ),
    ))
}

pub(crate) fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
    let found = current.get_strings("unmanaged").unwrap_or_default();
    Ok(if found.is_empty() {
        Vec::new()
    } else {
        vec![Change::new(
            "unmanaged",
            None,
            None,
            format!(
                "removed from {}: the keys no resource manages ({})",
                resource.require_str("target")?,
                found.join(", ")
            ),
        )]
    })
}

pub(crate) fn apply(resource: &Resource) -> Result<()> {
    let target = resource.require_str("target")?;
    let text = read_entries(target)?;
    let keep = keep(resource);
    let mut content: String = text
        .lines()
        .filter(|line| kept(&keep, line))
        .collect::<Vec<_>>()
        .join("\n");
    if !content.is_empty() {
        content.push('\n');
    }
    write_keys(target, resource.require_str("user")?, &content)
}
