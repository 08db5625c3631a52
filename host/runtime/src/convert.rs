//! Conversions between WIT values and the host's types. Everything a plugin returns is
//! checked here before the host uses it: node indices, nesting, sizes, names.

use crate::bindings::types as wit;
use wconverge_catalog::{MAX_DEPTH, TypeSchema, Value};
use wconverge_engine::{Change, PreparedResource};

/// Most nodes one value from a plugin may have.
const MAX_NODES: usize = 1 << 20;
/// Most bytes of strings one value from a plugin may carry.
const MAX_STRING_BYTES: usize = 64 << 20;
/// Most changes one plan may have.
const MAX_CHANGES: usize = 10_000;
/// Longest message kept from a plugin; longer ones are cut.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024;

pub(crate) fn value_to_wit(value: &Value) -> wit::Value {
    let mut nodes = Vec::new();
    push_value(value, &mut nodes);
    wit::Value { nodes }
}

fn push_value(value: &Value, nodes: &mut Vec<wit::ValueNode>) -> u32 {
    let idx = nodes.len();
    nodes.push(wit::ValueNode::Undef);
    let node = match value {
        Value::Undef => wit::ValueNode::Undef,
        Value::Boolean(b) => wit::ValueNode::Boolean(*b),
        Value::Integer(i) => wit::ValueNode::Integer(*i),
        Value::Float(f) => wit::ValueNode::Float(*f),
        Value::String(s) => wit::ValueNode::String(s.clone()),
        Value::Array(items) => {
            wit::ValueNode::Array(items.iter().map(|item| push_value(item, nodes)).collect())
        }
        Value::Hash(entries) => wit::ValueNode::Hash(
            entries
                .iter()
                .map(|(key, value)| wit::HashEntry {
                    key: key.clone(),
                    value: push_value(value, nodes),
                })
                .collect(),
        ),
        Value::Sensitive(inner) => wit::ValueNode::Sensitive(push_value(inner, nodes)),
    };
    nodes[idx] = node;
    u32::try_from(idx).expect("catalog values have fewer than 2^32 nodes")
}

/// How a value a plugin returned is not a well-formed tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Malformed {
    Empty,
    TooManyNodes(usize),
    TooDeep,
    /// A node refers to one that is not after it in the list.
    Reference {
        from: usize,
        to: usize,
    },
    ReferredTwice(usize),
    /// A node no other refers to.
    Orphan(usize),
    TooManyStringBytes,
    DuplicateKey(String),
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Empty => f.write_str("a value has no nodes"),
            Malformed::TooManyNodes(count) => {
                write!(f, "a value has {count} nodes, more than {MAX_NODES}")
            }
            Malformed::TooDeep => write!(f, "a value nests deeper than {MAX_DEPTH} levels"),
            Malformed::Reference { from, to } => {
                write!(f, "node {from} of a value refers to node {to}")
            }
            Malformed::ReferredTwice(node) => {
                write!(f, "node {node} of a value is referred to twice")
            }
            Malformed::Orphan(node) => write!(f, "node {node} of a value is not part of its tree"),
            Malformed::TooManyStringBytes => write!(
                f,
                "a value carries more than {MAX_STRING_BYTES} bytes of strings"
            ),
            Malformed::DuplicateKey(key) => {
                write!(f, "a hash in a value has the key `{key}` twice")
            }
        }
    }
}

/// How what a provider returned for a resource (its state, its plan) breaks the plugin
/// contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Breach {
    /// The state has more attributes than any type has.
    StateSize(usize),
    /// A value of the state is malformed.
    State {
        attribute: String,
        malformed: Malformed,
    },
    /// A value of a change is malformed.
    Change {
        attribute: String,
        malformed: Malformed,
    },
    /// A value its own schema does not allow (`why`, in the schema's words).
    Invalid {
        attribute: String,
        why: String,
    },
    TooManyChanges(usize),
    /// A change of an attribute the type does not declare.
    Undeclared {
        attribute: String,
        type_name: String,
    },
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Breach::StateSize(count) => write!(f, "the state has {count} attributes"),
            Breach::State {
                attribute,
                malformed,
            } => write!(f, "state attribute `{attribute}`: {malformed}"),
            Breach::Change {
                attribute,
                malformed,
            } => write!(f, "change of `{attribute}`: {malformed}"),
            Breach::Invalid { attribute, why } => write!(
                f,
                "plugin returned invalid value for `{attribute}`: its schema {why}"
            ),
            Breach::TooManyChanges(count) => {
                write!(f, "the plan has {count} changes, more than {MAX_CHANGES}")
            }
            Breach::Undeclared {
                attribute,
                type_name,
            } => write!(
                f,
                "a change names attribute `{attribute}`, which type `{type_name}` does not \
                 declare"
            ),
        }
    }
}

/// A value from a plugin, checked: a tree rooted at node 0 in which every node but the
/// root is referred to once, by a node before it.
pub(crate) fn value_from_wit(value: &wit::Value) -> Result<Value, Malformed> {
    let nodes = &value.nodes;
    if nodes.is_empty() {
        return Err(Malformed::Empty);
    }
    if nodes.len() > MAX_NODES {
        return Err(Malformed::TooManyNodes(nodes.len()));
    }
    let mut string_bytes = 0usize;
    // Most values are one node (a string, a number): no list of the nodes seen for them.
    if nodes.len() == 1 {
        return build_value(nodes, 0, 1, &mut [false], &mut string_bytes);
    }
    let mut referenced = vec![false; nodes.len()];
    let value = build_value(nodes, 0, 1, &mut referenced, &mut string_bytes)?;
    if let Some(orphan) = referenced.iter().skip(1).position(|seen| !seen) {
        return Err(Malformed::Orphan(orphan + 1));
    }
    Ok(value)
}

fn build_value(
    nodes: &[wit::ValueNode],
    idx: usize,
    depth: usize,
    referenced: &mut [bool],
    string_bytes: &mut usize,
) -> Result<Value, Malformed> {
    if depth > MAX_DEPTH {
        return Err(Malformed::TooDeep);
    }
    let child = |child_idx: u32, referenced: &mut [bool], string_bytes: &mut usize| {
        let child_idx = child_idx as usize;
        if child_idx <= idx || child_idx >= nodes.len() {
            return Err(Malformed::Reference {
                from: idx,
                to: child_idx,
            });
        }
        if std::mem::replace(&mut referenced[child_idx], true) {
            return Err(Malformed::ReferredTwice(child_idx));
        }
        build_value(nodes, child_idx, depth + 1, referenced, string_bytes)
    };
    let count_bytes = |len: usize, string_bytes: &mut usize| {
        *string_bytes += len;
        if *string_bytes > MAX_STRING_BYTES {
            Err(Malformed::TooManyStringBytes)
        } else {
            Ok(())
        }
    };
    Ok(match &nodes[idx] {
        wit::ValueNode::Undef => Value::Undef,
        wit::ValueNode::Boolean(b) => Value::Boolean(*b),
        wit::ValueNode::Integer(i) => Value::Integer(*i),
        wit::ValueNode::Float(f) => Value::Float(*f),
        wit::ValueNode::String(s) => {
            count_bytes(s.len(), string_bytes)?;
            Value::String(s.clone())
        }
        wit::ValueNode::Array(items) => {
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                values.push(child(*item, referenced, string_bytes)?);
            }
            Value::Array(values)
        }
        wit::ValueNode::Hash(entries) => {
            let mut values: Vec<(String, Value)> = Vec::with_capacity(entries.len());
            for entry in entries {
                count_bytes(entry.key.len(), string_bytes)?;
                if values.iter().any(|(key, _)| *key == entry.key) {
                    return Err(Malformed::DuplicateKey(entry.key.clone()));
                }
                values.push((
                    entry.key.clone(),
                    child(entry.value, referenced, string_bytes)?,
                ));
            }
            Value::Hash(values)
        }
        wit::ValueNode::Sensitive(inner) => {
            Value::Sensitive(Box::new(child(*inner, referenced, string_bytes)?))
        }
    })
}

/// About how many bytes a resource takes in a guest's memory once lowered: its strings,
/// and a node for each value. Batches are cut by it, to stay well within a plugin's
/// memory limit whatever the resources hold.
pub(crate) fn lowered_bytes(resource: &PreparedResource) -> usize {
    fn value_bytes(value: &Value) -> usize {
        NODE_BYTES
            + match value {
                Value::String(text) => text.len(),
                Value::Array(items) => items.iter().map(value_bytes).sum(),
                Value::Hash(entries) => entries
                    .iter()
                    .map(|(key, value)| key.len() + value_bytes(value))
                    .sum(),
                Value::Sensitive(inner) => value_bytes(inner),
                Value::Undef | Value::Boolean(_) | Value::Integer(_) | Value::Float(_) => 0,
            }
    }
    const NODE_BYTES: usize = 32;
    resource.type_name.len()
        + resource.title.len()
        + resource
            .attributes
            .iter()
            .chain(&resource.context)
            .map(|(name, value)| name.len() + value_bytes(value))
            .sum::<usize>()
}

/// Many resources, as one call takes them.
pub(crate) fn resources_to_wit(resources: &[&PreparedResource]) -> Vec<wit::Resource> {
    resources
        .iter()
        .map(|resource| resource_to_wit(resource))
        .collect()
}

pub(crate) fn resource_to_wit(resource: &PreparedResource) -> wit::Resource {
    wit::Resource {
        type_name: resource.type_name.clone(),
        title: resource.title.clone(),
        attributes: resource
            .attributes
            .iter()
            .map(|(name, value)| wit::Attribute {
                name: name.clone(),
                value: value_to_wit(value),
            })
            .collect(),
        context: resource
            .context
            .iter()
            .map(|(name, value)| wit::Attribute {
                name: name.clone(),
                value: value_to_wit(value),
            })
            .collect(),
    }
}

/// What identifies the input of a `validate` call: the sha256 of the plugin's entry in
/// the policy and of the resources exactly as they are lowered (type, title, attributes
/// and context, every value with its kind), each part delimited by its length.
pub(crate) fn fingerprint(policy_text: &str, resources: &[&PreparedResource]) -> String {
    use sha2::Digest;
    // Encoded into one buffer and hashed at once: the digest of the same bytes, without
    // a call into the hasher for each small part.
    fn text(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    fn value(out: &mut Vec<u8>, of: &Value) {
        match of {
            Value::Undef => out.push(0),
            Value::Boolean(b) => out.extend_from_slice(&[1, u8::from(*b)]),
            Value::Integer(i) => {
                out.push(2);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(f) => {
                out.push(3);
                out.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Value::String(s) => {
                out.push(4);
                text(out, s);
            }
            Value::Array(items) => {
                out.push(5);
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for item in items {
                    value(out, item);
                }
            }
            Value::Hash(entries) => {
                out.push(6);
                out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
                for (key, item) in entries {
                    text(out, key);
                    value(out, item);
                }
            }
            Value::Sensitive(inner) => {
                out.push(7);
                value(out, inner);
            }
        }
    }
    fn attributes(out: &mut Vec<u8>, attributes: &[(String, Value)]) {
        out.extend_from_slice(&(attributes.len() as u64).to_le_bytes());
        for (name, item) in attributes {
            text(out, name);
            value(out, item);
        }
    }
    let mut out = Vec::with_capacity(policy_text.len() + 256 * resources.len());
    text(&mut out, policy_text);
    out.extend_from_slice(&(resources.len() as u64).to_le_bytes());
    for resource in resources {
        text(&mut out, &resource.type_name);
        text(&mut out, &resource.title);
        attributes(&mut out, &resource.attributes);
        attributes(&mut out, &resource.context);
    }
    crate::digest::hex(&sha2::Sha256::digest(&out))
}

/// A state the host holds (read in a batch) as the provider takes it back.
pub(crate) fn attributes_to_wit(state: &[(String, Value)]) -> Vec<wit::Attribute> {
    state
        .iter()
        .map(|(name, value)| wit::Attribute {
            name: name.clone(),
            value: value_to_wit(value),
        })
        .collect()
}

/// A state a provider returned, as values, checked as [`check_state`] checks it: one
/// conversion for both (the names moved, not copied).
pub(crate) fn state_from_wit(
    state: Vec<wit::Attribute>,
    schema: &TypeSchema,
) -> Result<Vec<(String, Value)>, Breach> {
    state_size(&state)?;
    state
        .into_iter()
        .map(|attribute| {
            let value = state_value(&attribute, schema)?;
            Ok((attribute.name, value))
        })
        .collect()
}

/// Checks the state `current-state` returned, which goes back to `plan` as it is: each
/// value well formed, and of the data type the schema gives it when it names one of the
/// type's attributes (observed values: an enumeration takes any string).
pub(crate) fn check_state(state: &[wit::Attribute], schema: &TypeSchema) -> Result<(), Breach> {
    state_size(state)?;
    for attribute in state {
        state_value(attribute, schema)?;
    }
    Ok(())
}

/// The most attributes a state may have.
const MAX_STATE: usize = 4096;

fn state_size(state: &[wit::Attribute]) -> Result<(), Breach> {
    if state.len() > MAX_STATE {
        return Err(Breach::StateSize(state.len()));
    }
    Ok(())
}

/// One attribute of a state as a value: well formed, and of its declared data type.
fn state_value(attribute: &wit::Attribute, schema: &TypeSchema) -> Result<Value, Breach> {
    let value = value_from_wit(&attribute.value).map_err(|malformed| Breach::State {
        attribute: attribute.name.clone(),
        malformed,
    })?;
    if let Some(declared) = schema.attribute(&attribute.name) {
        observed(declared, &value).map_err(|why| invalid_value(&attribute.name, why))?;
    }
    Ok(value)
}

/// Whether a value a provider observed fits `attribute` (see
/// [`DataType::check_observed`]), counting an array as its elements when the attribute
/// takes several values.
fn observed(attribute: &wconverge_catalog::AttributeSchema, value: &Value) -> Result<(), String> {
    match value.unwrap_sensitive() {
        Value::Array(items)
            if attribute.max != Some(1)
                && !matches!(attribute.data_type, wconverge_catalog::DataType::Array(_)) =>
        {
            for (idx, item) in items.iter().enumerate() {
                attribute
                    .data_type
                    .check_observed(item)
                    .map_err(|message| format!("element {idx} {message}"))?;
            }
            Ok(())
        }
        single => attribute.data_type.check_observed(single),
    }
}

/// The error of a value a plugin returned that its own schema does not allow.
fn invalid_value(attribute: &str, why: String) -> Breach {
    Breach::Invalid {
        attribute: attribute.to_owned(),
        why,
    }
}

/// The changes of a plan, their messages passed through `said` (which scrubs the
/// resource's secrets and cuts them to size).
pub(crate) fn changes_from_wit(
    changes: &[wit::Change],
    schema: &TypeSchema,
    said: &dyn Fn(&str) -> String,
) -> Result<Vec<Change>, Breach> {
    if changes.len() > MAX_CHANGES {
        return Err(Breach::TooManyChanges(changes.len()));
    }
    changes
        .iter()
        .map(|change| {
            if schema.attribute(&change.attribute).is_none() {
                return Err(Breach::Undeclared {
                    attribute: change.attribute.clone(),
                    type_name: schema.name.clone(),
                });
            }
            let value = |value: &Option<wit::Value>| {
                value
                    .as_ref()
                    .map(value_from_wit)
                    .transpose()
                    .map_err(|malformed| Breach::Change {
                        attribute: change.attribute.clone(),
                        malformed,
                    })
            };
            let current = value(&change.current)?;
            let desired = value(&change.desired)?;
            let declared = schema.attribute(&change.attribute);
            // What it found may be any value of the attribute's shape; what it will make
            // must be one the type allows.
            if let (Some(declared), Some(current)) = (declared, &current) {
                observed(declared, current).map_err(|why| invalid_value(&change.attribute, why))?;
            }
            if let (Some(declared), Some(desired)) = (declared, &desired)
                && !matches!(declared.data_type, wconverge_catalog::DataType::Named(_))
                && !matches!(desired.unwrap_sensitive(), Value::Undef)
            {
                declared
                    .check(desired)
                    .map_err(|why| invalid_value(&change.attribute, why))?;
            }
            Ok(Change {
                attribute: change.attribute.clone(),
                current,
                desired,
                message: said(&change.message),
                diff: change.diff.as_ref().map(|diff| match diff {
                    wit::Diff::Unified(text) => wconverge_engine::Diff::Unified(cut_diff(text)),
                    wit::Diff::BeforeAfter(values) => wconverge_engine::Diff::BeforeAfter {
                        before: cut_diff(&values.before),
                        after: cut_diff(&values.after),
                    },
                }),
            })
        })
        .collect()
}

pub(crate) fn change_to_wit(change: &Change) -> wit::Change {
    wit::Change {
        attribute: change.attribute.clone(),
        current: change.current.as_ref().map(value_to_wit),
        desired: change.desired.as_ref().map(value_to_wit),
        message: change.message.clone(),
        diff: change.diff.as_ref().map(|diff| match diff {
            wconverge_engine::Diff::Unified(text) => wit::Diff::Unified(text.clone()),
            wconverge_engine::Diff::BeforeAfter { before, after } => {
                wit::Diff::BeforeAfter(wit::BeforeAfter {
                    before: before.clone(),
                    after: after.clone(),
                })
            }
        }),
    }
}

/// A diff from a plugin is at most this large; the rest is cut, saying so.
pub(crate) const MAX_DIFF_BYTES: usize = 256 << 10;

/// A plugin's diff text, cut to [`MAX_DIFF_BYTES`] on a character boundary.
fn cut_diff(text: &str) -> String {
    if text.len() <= MAX_DIFF_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_DIFF_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n... (the diff is cut at {} KiB)",
        &text[..end],
        MAX_DIFF_BYTES >> 10
    )
}

/// A message from a plugin, cut to [`MAX_MESSAGE_BYTES`] on a character boundary.
pub(crate) fn truncate(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_owned();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut at {MAX_MESSAGE_BYTES} bytes]", &message[..end])
}

/// A guard's script as the interpreter's `scripts.run` takes it.
pub(crate) fn script_to_wit(
    script: &wconverge_engine::GuardScript,
    timeout: std::time::Duration,
) -> crate::bindings::interpreter::scripts::Script {
    use crate::bindings::interpreter::scripts;
    scripts::Script {
        type_name: script.interpreter.clone(),
        code: script.code.clone(),
        sensitive: script.sensitive,
        purpose: scripts::Purpose::Guard,
        cwd: script.cwd.clone(),
        environment: script.environment.clone(),
        user: script.user.clone(),
        group: script.group.clone(),
        umask: script.umask,
        path: script.path.clone(),
        architecture: script.architecture.clone(),
        timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        options: script
            .options
            .iter()
            .map(|(name, value)| crate::bindings::types::Attribute {
                name: name.clone(),
                value: value_to_wit(value),
            })
            .collect(),
        os: std::env::consts::OS.to_owned(),
    }
}

/// What a script did, from the interpreter.
pub(crate) fn output_from_wit(
    output: crate::bindings::process::Output,
    timeout: std::time::Duration,
) -> wconverge_engine::ScriptOutput {
    use crate::bindings::process::ExitStatus;
    use wconverge_engine::ScriptStatus;
    wconverge_engine::ScriptOutput {
        status: match output.status {
            ExitStatus::Exited(code) => ScriptStatus::Exited(code),
            ExitStatus::Signaled(signal) => ScriptStatus::Signaled(signal),
            ExitStatus::TimedOut => ScriptStatus::TimedOut,
        },
        stdout: output.stdout,
        stderr: output.stderr,
        timeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(nodes: Vec<wit::ValueNode>) -> wit::Value {
        wit::Value { nodes }
    }

    #[test]
    fn values_round_trip() {
        let value = Value::Hash(vec![
            (
                "a".to_owned(),
                Value::Array(vec![1i64.into(), Value::Undef]),
            ),
            ("s".to_owned(), Value::Sensitive(Box::new("x".into()))),
        ]);
        assert_eq!(value_from_wit(&value_to_wit(&value)), Ok(value));
    }

    #[test]
    fn malformed_trees_are_refused() {
        use wit::ValueNode as N;
        for (value, malformed, said) in [
            (vec![], Malformed::Empty, "a value has no nodes"),
            (
                vec![N::Array(vec![0])],
                Malformed::Reference { from: 0, to: 0 },
                "node 0 of a value refers to node 0",
            ),
            (
                vec![N::Array(vec![5])],
                Malformed::Reference { from: 0, to: 5 },
                "node 0 of a value refers to node 5",
            ),
            (
                vec![N::Array(vec![1, 1]), N::Undef],
                Malformed::ReferredTwice(1),
                "node 1 of a value is referred to twice",
            ),
            (
                vec![N::Undef, N::Undef],
                Malformed::Orphan(1),
                "node 1 of a value is not part of its tree",
            ),
        ] {
            assert_eq!(value_from_wit(&nodes(value)), Err(malformed.clone()));
            assert_eq!(malformed.to_string(), said);
        }
    }

    #[test]
    fn a_deep_value_is_refused_without_overflowing() {
        use wit::ValueNode as N;
        let mut chain: Vec<N> = (1..10_000u32).map(|next| N::Array(vec![next])).collect();
        chain.push(N::Undef);
        let error = value_from_wit(&nodes(chain)).expect_err("too deep");
        assert_eq!(error, Malformed::TooDeep);
        assert_eq!(
            error.to_string(),
            format!("a value nests deeper than {MAX_DEPTH} levels")
        );
    }
}
