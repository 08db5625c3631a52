//! Attribute values and their JSON encoding.
//!
//! JSON's own types map one to one: `null` is `undef`, numbers without a fraction or
//! exponent are integers, others floats. What JSON cannot say is written as an object
//! with a single reserved key:
//!
//! - `{"__sensitive": V}`: `V`, redacted in every output;
//! - `{"__hash": [["key", V], ...]}`: a hash, used when a key starts with `__`;
//! - `{"__lazy": {...}}`: a lazy value (see [`crate::Lazy`]), which is the hash with that
//!   one key.
//!
//! Every other key starting with `__` is reserved and refused, so a newer catalog is
//! never misread by an older wconverge.

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Values nest at most this deep, in the JSON and everywhere else.
pub const MAX_DEPTH: usize = 128;

/// A value of an attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Undef,
    Boolean(bool),
    Integer(i64),
    Float(f64),
    String(String),
    Array(Vec<Value>),
    /// A hash with string keys, in the order they were written.
    Hash(Vec<(String, Value)>),
    /// A value that never appears in any output.
    Sensitive(Box<Value>),
}

impl Value {
    /// The value without its sensitive wrapper(s).
    pub fn unwrap_sensitive(&self) -> &Value {
        match self {
            Value::Sensitive(inner) => inner.unwrap_sensitive(),
            other => other,
        }
    }

    pub fn is_sensitive(&self) -> bool {
        matches!(self, Value::Sensitive(_))
    }

    pub fn as_str(&self) -> Option<&str> {
        match self.unwrap_sensitive() {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.unwrap_sensitive() {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    /// The name of the value's data type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Undef => "Undef",
            Value::Boolean(_) => "Boolean",
            Value::Integer(_) => "Integer",
            Value::Float(_) => "Float",
            Value::String(_) => "String",
            Value::Array(_) => "Array",
            Value::Hash(_) => "Hash",
            Value::Sensitive(_) => "Sensitive",
        }
    }

    /// Every string inside sensitive parts of this value (or all of it when `sensitive`),
    /// for redaction.
    pub fn collect_secrets(&self, sensitive: bool, out: &mut Vec<String>) {
        match self {
            Value::String(s) if sensitive && !s.is_empty() => {
                out.push(s.clone());
                // `NAME=value` (an environment entry): the value travels alone, in the
                // program's environment and in whatever it prints.
                if let Some((name, value)) = s.split_once('=')
                    && !value.is_empty()
                    && !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    out.push(value.to_owned());
                }
            }
            Value::Integer(i) if sensitive => out.push(i.to_string()),
            Value::Float(f) if sensitive => out.push(f.to_string()),
            Value::Array(items) => items
                .iter()
                .for_each(|item| item.collect_secrets(sensitive, out)),
            Value::Hash(entries) => entries
                .iter()
                .for_each(|(_, value)| value.collect_secrets(sensitive, out)),
            Value::Sensitive(inner) => inner.collect_secrets(true, out),
            _ => {}
        }
    }

    /// A one-line rendering for reports: strings quoted Puppet-style, sensitive parts
    /// shown as `[redacted]`.
    pub fn display(&self) -> String {
        let mut out = String::new();
        self.write_display(&mut out);
        out
    }

    fn write_display(&self, out: &mut String) {
        match self {
            Value::Undef => out.push_str("undef"),
            Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Integer(i) => out.push_str(&i.to_string()),
            Value::Float(f) => out.push_str(&format!("{f:?}")),
            Value::String(s) => {
                out.push('\'');
                out.push_str(&s.replace('\\', "\\\\").replace('\'', "\\'"));
                out.push('\'');
            }
            Value::Array(items) => {
                out.push('[');
                for (idx, item) in items.iter().enumerate() {
                    if idx > 0 {
                        out.push_str(", ");
                    }
                    item.write_display(out);
                }
                out.push(']');
            }
            Value::Hash(entries) => {
                out.push('{');
                for (idx, (key, value)) in entries.iter().enumerate() {
                    if idx > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&format!("'{key}' => "));
                    value.write_display(out);
                }
                out.push('}');
            }
            Value::Sensitive(_) => out.push_str("[redacted]"),
        }
    }

    /// How deeply the value nests (a scalar is 1).
    pub fn depth(&self) -> usize {
        match self {
            Value::Array(items) => 1 + items.iter().map(Value::depth).max().unwrap_or(0),
            Value::Hash(entries) => {
                1 + entries
                    .iter()
                    .map(|(_, value)| value.depth())
                    .max()
                    .unwrap_or(0)
            }
            Value::Sensitive(inner) => 1 + inner.depth(),
            _ => 1,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Boolean(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Integer(i)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Undef => serializer.serialize_unit(),
            Value::Boolean(b) => serializer.serialize_bool(*b),
            Value::Integer(i) => serializer.serialize_i64(*i),
            Value::Float(f) => serializer.serialize_f64(*f),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Hash(entries) if entries.len() == 1 && entries[0].0 == crate::LAZY_KEY => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(crate::LAZY_KEY, &entries[0].1)?;
                map.end()
            }
            Value::Hash(entries) if entries.iter().any(|(key, _)| key.starts_with("__")) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("__hash", &HashEntries(entries))?;
                map.end()
            }
            Value::Hash(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            Value::Sensitive(inner) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("__sensitive", inner)?;
                map.end()
            }
        }
    }
}

struct HashEntries<'a>(&'a [(String, Value)]);

impl Serialize for HashEntries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for (key, value) in self.0 {
            seq.serialize_element(&(key, value))?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = deserializer.deserialize_any(ValueVisitor)?;
        // serde_json already refuses nesting deeper than 128 levels of JSON; this bounds
        // the value tree whatever the input format.
        if value.depth() > MAX_DEPTH {
            return Err(de::Error::custom(format!(
                "value nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(value)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value (null, boolean, number, string, array or object)")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Undef)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Undef)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Boolean(b))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Integer(i))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        i64::try_from(u)
            .map(Value::Integer)
            .map_err(|_| E::custom(format!("integer {u} is larger than 2^63-1")))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Float(f))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries: Vec<(String, Value)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if let Some(tag) = key.strip_prefix("__") {
                if !entries.is_empty() {
                    return Err(de::Error::custom(format!(
                        "key `{key}` is reserved; a hash whose keys start with `__` is \
                         written as {{\"__hash\": [[key, value], ...]}}"
                    )));
                }
                let value = match tag {
                    "sensitive" => Value::Sensitive(Box::new(map.next_value()?)),
                    "hash" => Value::Hash(map.next_value::<Vec<(String, Value)>>()?),
                    "lazy" => Value::Hash(vec![(key.clone(), map.next_value()?)]),
                    _ => {
                        return Err(de::Error::custom(format!(
                            "unknown tagged value `{key}`; the tags are `__sensitive`, \
                             `__hash` and `__lazy`"
                        )));
                    }
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a `{key}` object has exactly one key, found `{extra}` too"
                    )));
                }
                return Ok(value);
            }
            if entries.iter().any(|(existing, _)| *existing == key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Value::Hash(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: &str, expected: Value) {
        let value: Value = serde_json::from_str(json).expect("valid value");
        assert_eq!(value, expected);
        let back = serde_json::to_string(&value).expect("serializes");
        let again: Value = serde_json::from_str(&back).expect("round trip");
        assert_eq!(again, expected);
    }

    fn check_err(json: &str, expected: &str) {
        let error = serde_json::from_str::<Value>(json).expect_err("invalid value");
        assert!(
            error.to_string().contains(expected),
            "`{error}` does not contain `{expected}`"
        );
    }

    #[test]
    fn json_types_map_to_values() {
        check("null", Value::Undef);
        check("1", Value::Integer(1));
        check("-7", Value::Integer(-7));
        check("1.0", Value::Float(1.0));
        check("\"x\"", "x".into());
        check(
            r#"{"b": 1, "a": [true]}"#,
            Value::Hash(vec![
                ("b".to_owned(), Value::Integer(1)),
                ("a".to_owned(), Value::Array(vec![true.into()])),
            ]),
        );
    }

    #[test]
    fn tagged_objects_carry_what_json_cannot() {
        check(
            r#"{"__sensitive": "hunter2"}"#,
            Value::Sensitive(Box::new("hunter2".into())),
        );
        check(
            r#"{"__hash": [["__x", 1]]}"#,
            Value::Hash(vec![("__x".to_owned(), Value::Integer(1))]),
        );
        check(
            r#"{"__lazy": {"expression": "1"}}"#,
            Value::Hash(vec![(
                "__lazy".to_owned(),
                Value::Hash(vec![("expression".to_owned(), "1".into())]),
            )]),
        );
    }

    #[test]
    fn reserved_and_duplicate_keys_are_refused() {
        check_err(r#"{"__later": 1}"#, "unknown tagged value `__later`");
        check_err(
            r#"{"a": 1, "__sensitive": 2}"#,
            "key `__sensitive` is reserved",
        );
        check_err(r#"{"__sensitive": 1, "b": 2}"#, "exactly one key");
        check_err(r#"{"a": 1, "a": 2}"#, "duplicate key `a`");
        check_err("18446744073709551615", "larger than 2^63-1");
    }

    #[test]
    fn display_redacts_sensitive_parts() {
        let value = Value::Array(vec![
            "it's".into(),
            Value::Sensitive(Box::new("hunter2".into())),
        ]);
        assert_eq!(value.display(), r"['it\'s', [redacted]]");
        let mut secrets = Vec::new();
        value.collect_secrets(false, &mut secrets);
        assert_eq!(secrets, vec!["hunter2".to_owned()]);
    }
}
