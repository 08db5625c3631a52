//! Conversions between the SDK's types and the WIT types, and the entry points the
//! export macro calls.

use crate::wit::wconverge::plugin::types as wit;
use crate::{
    Attribute, Behaviour, Change, DataType, Diff, PathAccess, Provider, ProviderInfo, Resource,
    RunContext, State, TypeSchema, Value,
};

/// Values nest at most this deep; deeper input from the host is refused rather than
/// risking the guest's stack.
const MAX_DEPTH: usize = 512;

pub(crate) fn value_to_wit(value: &Value) -> wit::Value {
    value_into_wit(value.clone())
}

/// The value as WIT nodes, its strings moved rather than copied (a state goes to the
/// host this way, for every resource a batch checks).
pub(crate) fn value_into_wit(value: Value) -> wit::Value {
    let mut nodes = Vec::new();
    push_value(value, &mut nodes);
    wit::Value { nodes }
}

fn push_value(value: Value, nodes: &mut Vec<wit::ValueNode>) -> u32 {
    let idx = nodes.len();
    nodes.push(wit::ValueNode::Undef);
    let node = match value {
        Value::Undef => wit::ValueNode::Undef,
        Value::Boolean(b) => wit::ValueNode::Boolean(b),
        Value::Integer(i) => wit::ValueNode::Integer(i),
        Value::Float(f) => wit::ValueNode::Float(f),
        Value::String(s) => wit::ValueNode::String(s),
        Value::Array(items) => wit::ValueNode::Array(
            items
                .into_iter()
                .map(|item| push_value(item, nodes))
                .collect(),
        ),
        Value::Hash(entries) => wit::ValueNode::Hash(
            entries
                .into_iter()
                .map(|(key, value)| wit::HashEntry {
                    key,
                    value: push_value(value, nodes),
                })
                .collect(),
        ),
        Value::Sensitive(inner) => wit::ValueNode::Sensitive(push_value(*inner, nodes)),
    };
    nodes[idx] = node;
    u32::try_from(idx).expect("a value has fewer than 2^32 nodes")
}

/// A value from the host, its strings moved out of the nodes rather than copied.
pub(crate) fn value_from_wit(value: wit::Value) -> Result<Value, String> {
    let mut nodes = value.nodes;
    if nodes.is_empty() {
        return Err("a value from the host has no nodes".to_owned());
    }
    node_to_value(&mut nodes, 0, 0)
}

fn node_to_value(nodes: &mut [wit::ValueNode], idx: usize, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "a value from the host nests deeper than {MAX_DEPTH}"
        ));
    }
    let child = |nodes: &mut [wit::ValueNode], child_idx: u32| -> Result<Value, String> {
        let child_idx = child_idx as usize;
        if child_idx <= idx || child_idx >= nodes.len() {
            return Err(format!(
                "a value from the host refers to node {child_idx} from node {idx}"
            ));
        }
        node_to_value(nodes, child_idx, depth + 1)
    };
    // Each node is its parent's alone (the host builds a tree): taken, not copied.
    Ok(
        match std::mem::replace(&mut nodes[idx], wit::ValueNode::Undef) {
            wit::ValueNode::Undef => Value::Undef,
            wit::ValueNode::Boolean(b) => Value::Boolean(b),
            wit::ValueNode::Integer(i) => Value::Integer(i),
            wit::ValueNode::Float(f) => Value::Float(f),
            wit::ValueNode::String(s) => Value::String(s),
            wit::ValueNode::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|item| child(nodes, item))
                    .collect::<Result<_, _>>()?,
            ),
            wit::ValueNode::Hash(entries) => Value::Hash(
                entries
                    .into_iter()
                    .map(|entry| Ok((entry.key, child(nodes, entry.value)?)))
                    .collect::<Result<_, String>>()?,
            ),
            wit::ValueNode::Sensitive(inner) => Value::Sensitive(Box::new(child(nodes, inner)?)),
        },
    )
}

fn data_type_to_wit(data_type: &DataType) -> wit::DataType {
    let mut nodes = Vec::new();
    push_type(data_type, &mut nodes);
    wit::DataType { nodes }
}

fn push_type(data_type: &DataType, nodes: &mut Vec<wit::TypeNode>) -> u32 {
    let idx = nodes.len();
    nodes.push(wit::TypeNode::Any);
    let node = match data_type {
        DataType::Any => wit::TypeNode::Any,
        DataType::Boolean => wit::TypeNode::Boolean,
        DataType::Integer => wit::TypeNode::Integer,
        DataType::Float => wit::TypeNode::Float,
        DataType::String => wit::TypeNode::String,
        DataType::Enum(cases) => wit::TypeNode::Enumeration(cases.clone()),
        DataType::Array(of) => wit::TypeNode::Array(push_type(of, nodes)),
        DataType::Hash(of) => wit::TypeNode::Hash(push_type(of, nodes)),
        DataType::OneOf(options) => wit::TypeNode::OneOf(
            options
                .iter()
                .map(|option| push_type(option, nodes))
                .collect(),
        ),
        DataType::Named(name) => wit::TypeNode::Named(name.clone()),
    };
    nodes[idx] = node;
    u32::try_from(idx).expect("a data type has fewer than 2^32 nodes")
}

fn attribute_schema_to_wit(attribute: &Attribute) -> wit::AttributeSchema {
    wit::AttributeSchema {
        name: attribute.name.clone(),
        doc: attribute.doc.clone(),
        data_type: data_type_to_wit(&attribute.data_type),
        min: attribute.min,
        max: attribute.max,
        default: attribute.default.as_ref().map(value_to_wit),
        behaviour: match attribute.behaviour {
            Behaviour::Property => wit::Behaviour::Property,
            Behaviour::Parameter => wit::Behaviour::Parameter,
            Behaviour::Namevar => wit::Behaviour::Namevar,
            Behaviour::ReadOnly => wit::Behaviour::ReadOnly,
            Behaviour::InitOnly => wit::Behaviour::InitOnly,
        },
        sensitive: attribute.sensitive,
        unsettable: attribute.unsettable,
        path_access: match attribute.path_access {
            PathAccess::None => wit::PathAccess::None,
            PathAccess::Read => wit::PathAccess::Read,
            PathAccess::ReadPrivate => wit::PathAccess::ReadPrivate,
            PathAccess::ReadWrite => wit::PathAccess::ReadWrite,
        },
        checks: attribute.checks.clone(),
        refers_to: attribute.refers_to.clone(),
        home_default: attribute
            .home_default
            .as_ref()
            .map(|(user_attribute, suffix)| wit::HomeDefault {
                user_attribute: user_attribute.clone(),
                suffix: suffix.clone(),
            }),
    }
}

fn type_schema_to_wit(schema: &TypeSchema) -> wit::TypeSchema {
    wit::TypeSchema {
        name: schema.name.clone(),
        doc: schema.doc.clone(),
        attributes: schema
            .attributes
            .iter()
            .map(attribute_schema_to_wit)
            .collect(),
        invariants: schema
            .invariants
            .iter()
            .map(|(title, source)| wit::Invariant {
                title: title.clone(),
                source: source.clone(),
            })
            .collect(),
        refreshable: schema.refreshable,
        batch_state: schema.batch_state,
        watches: schema.watches.clone(),
        concurrency: match schema.concurrency {
            crate::schema::Concurrency::OneAtATime => wit::Concurrency::OneAtATime,
            crate::schema::Concurrency::PerPath => wit::Concurrency::PerPath,
            crate::schema::Concurrency::Any => wit::Concurrency::Any,
        },
        context: schema
            .context
            .iter()
            .map(|wanted| match wanted {
                RunContext::NodeAttributes => wit::RunContext::NodeAttributes,
                RunContext::Facts => wit::RunContext::Facts,
                RunContext::ManagedBeneath => wit::RunContext::ManagedBeneath,
            })
            .collect(),
    }
}

fn provider_info_to_wit(info: &ProviderInfo) -> wit::ProviderInfo {
    wit::ProviderInfo {
        name: info.name.clone(),
        version: info.version.clone(),
        types: info.types.iter().map(type_schema_to_wit).collect(),
        requires: info.requires.clone(),
    }
}

/// Attributes from the host, checked (for the interpreter SDK).
pub fn attributes_from_wit(
    attributes: Vec<wit::Attribute>,
) -> Result<Vec<(String, Value)>, String> {
    attributes
        .into_iter()
        .map(|attribute| Ok((attribute.name, value_from_wit(attribute.value)?)))
        .collect()
}

fn attributes_to_wit(attributes: Vec<(String, Value)>) -> Vec<wit::Attribute> {
    attributes
        .into_iter()
        .map(|(name, value)| wit::Attribute {
            value: value_into_wit(value),
            name,
        })
        .collect()
}

fn resource_from_wit(resource: wit::Resource) -> Result<Resource, String> {
    Ok(Resource::from_parts(
        resource.type_name,
        resource.title,
        attributes_from_wit(resource.attributes)?,
        attributes_from_wit(resource.context)?,
    ))
}

fn change_to_wit(change: &Change) -> wit::Change {
    wit::Change {
        attribute: change.attribute.clone(),
        current: change.current.as_ref().map(value_to_wit),
        desired: change.desired.as_ref().map(value_to_wit),
        message: change.message.clone(),
        diff: change.diff.as_ref().map(|diff| match diff {
            Diff::Unified(text) => wit::Diff::Unified(text.clone()),
            Diff::BeforeAfter { before, after } => wit::Diff::BeforeAfter(wit::BeforeAfter {
                before: before.clone(),
                after: after.clone(),
            }),
        }),
    }
}

fn change_from_wit(change: wit::Change) -> Result<Change, String> {
    Ok(Change {
        attribute: change.attribute,
        current: change.current.map(value_from_wit).transpose()?,
        desired: change.desired.map(value_from_wit).transpose()?,
        message: change.message,
        diff: change.diff.map(|diff| match diff {
            wit::Diff::Unified(text) => Diff::Unified(text),
            wit::Diff::BeforeAfter(values) => Diff::BeforeAfter {
                before: values.before,
                after: values.after,
            },
        }),
    })
}

/// Entry point of the `describe` export.
pub fn describe<P: Provider>() -> wit::ProviderInfo {
    provider_info_to_wit(&P::describe())
}

/// Entry point of the `validate` export: each resource's problems, in order.
pub fn validate<P: Provider>(resources: Vec<wit::Resource>) -> Vec<Vec<String>> {
    resources
        .into_iter()
        .map(|resource| match resource_from_wit(resource) {
            Ok(resource) => P::validate(&resource),
            Err(message) => vec![message],
        })
        .collect()
}

/// Entry point of the `current-state` export.
pub fn current_state<P: Provider>(resource: wit::Resource) -> Result<Vec<wit::Attribute>, String> {
    let resource = resource_from_wit(resource)?;
    let state = P::current_state(&resource).map_err(|error| error.0)?;
    Ok(attributes_to_wit(state.into_parts()))
}

/// Entry point of the `check` export: the states of all the resources from one
/// [`Provider::current_states`], then each one's [`Provider::plan`].
pub fn check<P: Provider>(resources: Vec<wit::Resource>) -> Vec<Result<wit::Checked, String>> {
    let mut converted = Vec::with_capacity(resources.len());
    let mut errors = Vec::new();
    for (index, resource) in resources.into_iter().enumerate() {
        match resource_from_wit(resource) {
            Ok(resource) => converted.push(resource),
            Err(message) => errors.push((index, message)),
        }
    }
    if !errors.is_empty() {
        // The batch is not read: the host then asks each resource on its own, and the
        // one that does not convert says why.
        let mut results: Vec<Result<wit::Checked, String>> = (0..converted.len() + errors.len())
            .map(|_| Err("another resource of the batch was malformed".to_owned()))
            .collect();
        for (index, message) in errors {
            results[index] = Err(message);
        }
        return results;
    }
    let states = P::current_states(&converted);
    if states.len() != converted.len() {
        let message = format!(
            "`current_states` returned {} states for {} resources",
            states.len(),
            converted.len()
        );
        return converted.iter().map(|_| Err(message.clone())).collect();
    }
    converted
        .iter()
        .zip(states)
        .map(|(resource, state)| {
            let state = state.map_err(|error| error.0)?;
            let changes = P::plan(resource, &state).map_err(|error| error.0)?;
            Ok(wit::Checked {
                changes: changes.iter().map(change_to_wit).collect(),
                current: attributes_to_wit(state.into_parts()),
            })
        })
        .collect()
}

/// Entry point of the `plan` export.
pub fn plan<P: Provider>(
    resource: wit::Resource,
    current: Vec<wit::Attribute>,
) -> Result<Vec<wit::Change>, String> {
    let resource = resource_from_wit(resource)?;
    let current = State::from_parts(attributes_from_wit(current)?);
    let changes = P::plan(&resource, &current).map_err(|error| error.0)?;
    Ok(changes.iter().map(change_to_wit).collect())
}

/// Entry point of the `apply` export.
pub fn apply<P: Provider>(
    resource: wit::Resource,
    changes: Vec<wit::Change>,
) -> Result<(), String> {
    let resource = resource_from_wit(resource)?;
    let changes = changes
        .into_iter()
        .map(change_from_wit)
        .collect::<Result<Vec<_>, _>>()?;
    P::apply(&resource, &changes).map_err(|error| error.0)
}

/// Entry point of the `refresh` export.
pub fn refresh<P: Provider>(resource: wit::Resource) -> Result<(), String> {
    let resource = resource_from_wit(resource)?;
    P::refresh(&resource).map_err(|error| error.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_values_survive_the_round_trip() {
        let value = Value::Hash(vec![
            (
                "list".to_owned(),
                Value::Array(vec![1i64.into(), "two".into(), Value::Undef]),
            ),
            (
                "secret".to_owned(),
                Value::Sensitive(Box::new("hunter2".into())),
            ),
            ("empty".to_owned(), Value::Hash(vec![])),
        ]);
        let wit = value_to_wit(&value);
        assert_eq!(wit.nodes.len(), 8);
        assert_eq!(value_from_wit(wit), Ok(value));
    }

    #[test]
    fn a_child_index_pointing_backwards_is_refused() {
        let wit = wit::Value {
            nodes: vec![wit::ValueNode::Array(vec![0])],
        };
        assert_eq!(
            value_from_wit(wit),
            Err("a value from the host refers to node 0 from node 0".to_owned())
        );
    }
}
