//! Type schemas: the one model for resource types, whether a provider declared them
//! through WIT or (later) a manifest declared them in the language.

use crate::Value;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The data type of one value of an attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataType {
    Any,
    Boolean,
    Integer,
    Float,
    String,
    Enum(Vec<String>),
    Array(Box<DataType>),
    Hash(Box<DataType>),
    OneOf(Vec<DataType>),
    /// A type declared by name elsewhere.
    Named(String),
}

impl DataType {
    /// Whether `value` has this data type; the error says what was expected and found.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        let value = value.unwrap_sensitive();
        let matches = match (self, value) {
            (DataType::Any, _) => true,
            (DataType::Boolean, Value::Boolean(_))
            | (DataType::Integer, Value::Integer(_))
            | (DataType::Float, Value::Float(_))
            | (DataType::String, Value::String(_)) => true,
            (DataType::Enum(cases), Value::String(s)) => {
                if cases.contains(s) {
                    true
                } else {
                    return Err(format!("expects {self}, got '{s}'"));
                }
            }
            (DataType::Array(of), Value::Array(items)) => {
                for (idx, item) in items.iter().enumerate() {
                    of.check(item)
                        .map_err(|message| format!("element {idx} {message}"))?;
                }
                true
            }
            (DataType::Hash(of), Value::Hash(entries)) => {
                for (key, item) in entries {
                    of.check(item)
                        .map_err(|message| format!("key '{key}' {message}"))?;
                }
                true
            }
            (DataType::OneOf(options), value) => {
                options.iter().any(|option| option.check(value).is_ok())
            }
            (DataType::Named(name), _) => {
                return Err(format!(
                    "expects a `{name}`, a type that no manifest or provider declares"
                ));
            }
            _ => false,
        };
        if matches {
            Ok(())
        } else {
            Err(format!("expects {self}, got {}", value.type_name()))
        }
    }
}

impl DataType {
    /// Whether `value` has the shape of this data type, as a value a provider observed
    /// on the machine may: like [`DataType::check`], except that a string is always
    /// allowed (an enumeration observed as a value the type may not declare, a `file`
    /// found to be a `directory`; Puppet's sentinels, `notrun`, `absent`), and a declared
    /// type takes any value (its checks are for what manifests declare).
    pub fn check_observed(&self, value: &Value) -> Result<(), String> {
        match (self, value.unwrap_sensitive()) {
            (_, Value::String(_) | Value::Undef) | (DataType::Named(_), _) => Ok(()),
            (DataType::Array(of), Value::Array(items)) => {
                for (idx, item) in items.iter().enumerate() {
                    of.check_observed(item)
                        .map_err(|message| format!("element {idx} {message}"))?;
                }
                Ok(())
            }
            (DataType::Hash(of), Value::Hash(entries)) => {
                for (key, item) in entries {
                    of.check_observed(item)
                        .map_err(|message| format!("key '{key}' {message}"))?;
                }
                Ok(())
            }
            (DataType::OneOf(options), value)
                if options
                    .iter()
                    .any(|option| option.check_observed(value).is_ok()) =>
            {
                Ok(())
            }
            (data_type, value) => data_type.check(value),
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Any => f.write_str("Any"),
            DataType::Boolean => f.write_str("Boolean"),
            DataType::Integer => f.write_str("Integer"),
            DataType::Float => f.write_str("Float"),
            DataType::String => f.write_str("String"),
            DataType::Enum(cases) => {
                let cases: Vec<String> = cases.iter().map(|case| format!("'{case}'")).collect();
                write!(f, "Enum[{}]", cases.join(", "))
            }
            DataType::Array(of) => write!(f, "Array[{of}]"),
            DataType::Hash(of) => write!(f, "Hash[String, {of}]"),
            DataType::OneOf(options) => {
                let options: Vec<String> = options.iter().map(ToString::to_string).collect();
                write!(f, "Variant[{}]", options.join(", "))
            }
            DataType::Named(name) => f.write_str(name),
        }
    }
}

/// What an attribute is, in the terms of Puppet's resource API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    Property,
    Parameter,
    Namevar,
    ReadOnly,
    InitOnly,
}

/// Whether an attribute's value is a path the provider must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathAccess {
    None,
    Read,
    /// Read (by a program that runs as root, say) where no one else can swap it: every
    /// directory on the way is writable by root alone.
    ReadPrivate,
    ReadWrite,
}

/// One attribute of a type (a feature, in the words of Puppet's types ARM: an `attr`, or a `has`
/// reference to another declared type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributeSchema {
    pub name: String,
    pub doc: String,
    pub data_type: DataType,
    pub min: u32,
    /// `None`: unbound.
    pub max: Option<u32>,
    pub default: Option<Value>,
    pub behaviour: Behaviour,
    pub sensitive: bool,
    pub unsettable: bool,
    pub path_access: PathAccess,
    /// Checks in the manifest language, each a block (`{ ... }`, with `$it` and the
    /// attribute's own name bound to the value), a lambda (`|$x| { ... }`) or an
    /// expression; evaluated by the host for each value.
    pub checks: Vec<String>,
    /// A `has` reference: `Some(true)` when the referenced object is contained (the
    /// default), `Some(false)` when it is only referred to; `None` for an `attr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<bool>,
    /// A computed feature: the lambda's source, evaluated with every other feature
    /// bound; never set by a user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
    /// Left out of serializations (true for a derived feature unless said otherwise).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transient: bool,
    /// The type of the resources its values name (a file's `owner` names a `user`),
    /// which a resource requires when the catalog declares them (Puppet's autorequire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refers_to: Option<String>,
    /// When unset: the home of the user another attribute names, then a suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_default: Option<HomeDefault>,
}

/// A default below a user's home directory (`~USER/.ssh/authorized_keys`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HomeDefault {
    /// The attribute that names the user.
    pub user_attribute: String,
    /// What follows the home directory: `/.ssh/authorized_keys`.
    pub suffix: String,
}

impl HomeDefault {
    /// The default for a user whose home is `home`.
    pub fn below(&self, home: &str) -> String {
        format!("{}{}", home.trim_end_matches('/'), self.suffix)
    }
}

impl AttributeSchema {
    /// A single optional value of `data_type`, a property, no checks: the defaults of
    /// Puppet's types ARM (`[0..1]`).
    pub fn new(name: &str, data_type: DataType) -> AttributeSchema {
        AttributeSchema {
            name: name.to_owned(),
            doc: String::new(),
            data_type,
            min: 0,
            max: Some(1),
            default: None,
            behaviour: Behaviour::Property,
            sensitive: false,
            unsettable: false,
            path_access: PathAccess::None,
            checks: Vec::new(),
            containment: None,
            derived: None,
            transient: false,
            refers_to: None,
            home_default: None,
        }
    }

    /// Whether `value` fits the data type and multiplicity. With a maximum above one, a
    /// single value counts as one and an array as its elements.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        if self.max == Some(1) || self.max == Some(0) {
            return self.data_type.check(value);
        }
        let count = match value.unwrap_sensitive() {
            Value::Array(items) if !matches!(self.data_type, DataType::Array(_)) => {
                for (idx, item) in items.iter().enumerate() {
                    self.data_type
                        .check(item)
                        .map_err(|message| format!("element {idx} {message}"))?;
                }
                items.len()
            }
            single => {
                self.data_type.check(single)?;
                1
            }
        };
        if count < self.min as usize {
            return Err(format!("expects at least {} values, got {count}", self.min));
        }
        if let Some(max) = self.max
            && count > max as usize
        {
            return Err(format!("expects at most {max} values, got {count}"));
        }
        Ok(())
    }

    pub fn required(&self) -> bool {
        self.min > 0
    }

    /// The multiplicity as Puppet's types ARM writes it: `[0..1]`, `[1..*]`.
    pub fn multiplicity(&self) -> String {
        match self.max {
            Some(max) => format!("[{}..{max}]", self.min),
            None => format!("[{}..*]", self.min),
        }
    }
}

/// A rule over several attributes, in the manifest language: every attribute is a
/// variable; `false` fails with the title (or "Illegal invariant"), a string is the
/// message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invariant {
    pub title: Option<String>,
    pub source: String,
}

/// A type: a resource type a provider declares, or a data type a manifest declares with
/// `type Name { ... }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeSchema {
    pub name: String,
    pub doc: String,
    /// Its own and, for a declared type, its ancestors' (ancestors' first).
    pub attributes: Vec<AttributeSchema>,
    pub invariants: Vec<Invariant>,
    pub refreshable: bool,
    /// What the host passes its resources besides their attributes.
    pub context: Vec<RunContext>,
    /// The state of its resources is read many at once (Puppet's prefetch).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batch_state: bool,
    /// Which of its resources may be applied while others run (`apply --jobs`).
    #[serde(default, skip_serializing_if = "Concurrency::is_one_at_a_time")]
    pub concurrency: Concurrency,
    /// Files whose changes may mean its resources drifted, beyond their path attributes
    /// (`{name}` is a resource's value of its attribute `name`): what a watching agent
    /// also watches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watches: Vec<String>,
    /// The type it inherits from (declared types only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// An abstract declared type cannot be instantiated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_abstract: bool,
    /// Where a declared type was written (`site.wcv:3`); `None` for a provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// Which resources of a type may be applied at the same time as others (`apply --jobs`):
/// what its provider declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Concurrency {
    /// One resource of the type and provider at a time (one package manager at a time).
    #[default]
    OneAtATime,
    /// Any number, but never two whose namevar paths are the same or one beneath the
    /// other.
    PerPath,
    /// Any number at once; but a resource whose `serial` attribute is `true` runs
    /// alone, after everything before it in the graph's order.
    Any,
}

impl Concurrency {
    /// What a type that says nothing gets.
    pub fn is_one_at_a_time(&self) -> bool {
        *self == Concurrency::OneAtATime
    }
}

/// Data of the run a type's resources receive besides their attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunContext {
    /// The node's attributes, merged, as the context entry `node`.
    NodeAttributes,
    /// The machine's facts, as the context entry `facts`.
    Facts,
    /// The paths other resources write beneath this resource's path, sorted, as the
    /// context entry `managed`.
    ManagedBeneath,
}

impl RunContext {
    /// The name of its entry in a resource's context.
    pub fn entry(self) -> &'static str {
        match self {
            RunContext::NodeAttributes => "node",
            RunContext::Facts => "facts",
            RunContext::ManagedBeneath => "managed",
        }
    }
}

impl TypeSchema {
    /// A type with no attributes, invariants or run context yet.
    pub fn new(name: &str, doc: &str) -> TypeSchema {
        TypeSchema {
            name: name.to_owned(),
            doc: doc.to_owned(),
            attributes: Vec::new(),
            invariants: Vec::new(),
            refreshable: false,
            context: Vec::new(),
            batch_state: false,
            watches: Vec::new(),
            concurrency: Concurrency::OneAtATime,
            parent: None,
            is_abstract: false,
            origin: None,
        }
    }

    pub fn attribute(&self, name: &str) -> Option<&AttributeSchema> {
        self.attributes
            .iter()
            .find(|attribute| attribute.name == name)
    }

    pub fn namevar(&self) -> Option<&AttributeSchema> {
        self.attributes
            .iter()
            .find(|attribute| attribute.behaviour == Behaviour::Namevar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(data_type: DataType, min: u32, max: Option<u32>) -> AttributeSchema {
        AttributeSchema {
            min,
            max,
            ..AttributeSchema::new("x", data_type)
        }
    }

    #[test]
    fn data_types_check_values_puppet_style() {
        let ensure = DataType::Enum(vec!["file".to_owned(), "absent".to_owned()]);
        assert_eq!(ensure.check(&"file".into()), Ok(()));
        assert_eq!(
            ensure.check(&"dir".into()),
            Err("expects Enum['file', 'absent'], got 'dir'".to_owned())
        );
        assert_eq!(
            DataType::String.check(&Value::Integer(1)),
            Err("expects String, got Integer".to_owned())
        );
        let command = DataType::OneOf(vec![
            DataType::String,
            DataType::Array(Box::new(DataType::String)),
        ]);
        assert_eq!(
            command.check(&Value::Array(vec!["/bin/true".into()])),
            Ok(())
        );
        assert_eq!(
            command.check(&Value::Array(vec![Value::Integer(1)])),
            Err("expects Variant[String, Array[String]], got Array".to_owned())
        );
        assert_eq!(
            DataType::String.check(&Value::Sensitive(Box::new("s".into()))),
            Ok(())
        );
    }

    #[test]
    fn multiplicity_accepts_a_single_value_or_an_array() {
        let returns = attribute(DataType::Integer, 0, None);
        assert_eq!(returns.check(&Value::Integer(0)), Ok(()));
        assert_eq!(
            returns.check(&Value::Array(vec![Value::Integer(0), Value::Integer(2)])),
            Ok(())
        );
        assert_eq!(
            returns.check(&Value::Array(vec!["a".into()])),
            Err("element 0 expects Integer, got String".to_owned())
        );
        let pair = attribute(DataType::Integer, 2, Some(2));
        assert_eq!(
            pair.check(&Value::Integer(1)),
            Err("expects at least 2 values, got 1".to_owned())
        );
        assert_eq!(pair.multiplicity(), "[2..2]");
    }
}
