//! `user { purge_ssh_keys => true }`, as Puppet does it: the keys of the user's
//! authorized_keys that no `ssh_authorized_key` of the catalog manages are removed.
//! wconverge generates one `purge_ssh_keys` resource per such user when it applies a
//! catalog (`keep`: the names of the keys the catalog manages for the user), ordered
//! after the user and its keys.

use crate::{parse, write_keys};
use wconverge_file_core::read_entries;
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
            "The names of the keys the catalog manages for the user.",
        )
        .many()
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "unmanaged",
            DataType::String,
            "The names of the keys no resource manages, as observed.",
        )
        .many()
        .read_only(),
    )
}

fn unmanaged(resource: &Resource, text: &str) -> Vec<String> {
    let keep = resource.get_strings("keep").unwrap_or_default();
    text.lines()
        .filter_map(parse)
        .map(|(_, _, _, comment)| comment)
        .filter(|comment| !keep.contains(comment))
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
    let remove = unmanaged(resource, &text);
    let mut content: String = text
        .lines()
        .filter(|line| parse(line).is_none_or(|(_, _, _, comment)| !remove.contains(&comment)))
        .collect::<Vec<_>>()
        .join("\n");
    if !content.is_empty() {
        content.push('\n');
    }
    write_keys(target, resource.require_str("user")?, &content)
}
