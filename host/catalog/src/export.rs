//! Exported resources (`@@type { ... }`) as a store keeps them, and the query of an
//! exported-resource collector (`<<| query |>>`) in a form a database can evaluate.
//!
//! A collector's `==` compares like the language's `==` (strings without regard to
//! case, `1 == 1.0`), and matches an array attribute when any of its members is equal.
//! Each value an export can be matched on is reduced to a *match key*, a string that is
//! equal exactly when the language's `==` holds; a store keeps one row per attribute
//! and key, so a query is a few indexed lookups whatever the number of exports.

use crate::{Attributes, SourceLocation, Value};
use serde::{Deserialize, Serialize};

/// A resource a node exported: what a collector on another node realizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Export {
    /// Lowercase type name: `file`, `nagios_host`, or a defined type's name.
    #[serde(rename = "type")]
    pub type_name: String,
    pub title: String,
    /// Its tags where it was declared (its type, its classes, `tag`), which a
    /// collector's `tag == ...` matches.
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub attributes: Attributes,
    /// Where the exporting node's manifest declared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceLocation>,
}

/// An export with the node that exported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    pub node: String,
    pub export: Export,
}

/// A collector's query, its values evaluated.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportQuery {
    /// No query: every export of the type.
    All,
    And(Box<ExportQuery>, Box<ExportQuery>),
    Or(Box<ExportQuery>, Box<ExportQuery>),
    /// `attribute == value` (`equal`) or `attribute != value`. `title` is the title and
    /// `tag` any of the tags.
    Compare {
        attribute: String,
        equal: bool,
        value: Value,
    },
}

impl ExportQuery {
    /// Whether `export` matches, evaluated here: what a store's query must agree with.
    pub fn matches(&self, export: &Export) -> bool {
        match self {
            ExportQuery::All => true,
            ExportQuery::And(a, b) => a.matches(export) && b.matches(export),
            ExportQuery::Or(a, b) => a.matches(export) || b.matches(export),
            ExportQuery::Compare {
                attribute,
                equal,
                value,
            } => {
                let found = match match_key(value) {
                    Some(wanted) => export
                        .match_keys()
                        .iter()
                        .any(|(name, key)| name == attribute && *key == wanted),
                    None => false,
                };
                found == *equal
            }
        }
    }

    /// How many comparisons it makes: a store refuses a query past a limit.
    pub fn comparisons(&self) -> usize {
        match self {
            ExportQuery::All => 0,
            ExportQuery::And(a, b) | ExportQuery::Or(a, b) => a.comparisons() + b.comparisons(),
            ExportQuery::Compare { .. } => 1,
        }
    }
}

impl Export {
    /// Every (attribute, match key) a query can find it by: its title (`title`), each
    /// tag (`tag`), and each attribute's value, or each member of an array value.
    pub fn match_keys(&self) -> Vec<(String, String)> {
        let mut keys = Vec::with_capacity(2 + self.tags.len() + self.attributes.0.len());
        if let Some(key) = match_key(&Value::String(self.title.clone())) {
            keys.push(("title".to_owned(), key));
        }
        for tag in &self.tags {
            if let Some(key) = match_key(&Value::String(tag.clone())) {
                keys.push(("tag".to_owned(), key));
            }
        }
        for (name, value) in &self.attributes.0 {
            if name == "title" || name == "tag" {
                continue;
            }
            match value {
                Value::Array(items) => {
                    for item in items {
                        if let Some(key) = match_key(item) {
                            keys.push((name.clone(), key));
                        }
                    }
                }
                other => {
                    if let Some(key) = match_key(other) {
                        keys.push((name.clone(), key));
                    }
                }
            }
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// The version of [`match_key`]'s format: a store re-indexes exports written with
/// another.
pub const MATCH_KEY_FORMAT: u32 = 1;

/// The match key of a value: equal for two values exactly when the language's `==`
/// holds between them. `None` for `undef` and NaN, which nothing equals, and for a
/// sensitive value, which is never indexed (a query cannot find a secret). Arrays and
/// hashes get a key from their members' keys, in order (hash keys sorted), so that
/// equal collections match too; every string in a key is prefixed with its length, so
/// no two different values share one.
pub fn match_key(value: &Value) -> Option<String> {
    let mut key = String::new();
    write_key(value, &mut key).then_some(key)
}

fn write_key(value: &Value, key: &mut String) -> bool {
    use std::fmt::Write;
    match value {
        Value::Undef | Value::Sensitive(_) => return false,
        Value::Boolean(flag) => key.push_str(if *flag { "b:true" } else { "b:false" }),
        Value::Integer(number) => {
            let _ = write!(key, "n:{number}");
        }
        Value::Float(number) if number.is_nan() => return false,
        Value::Float(number) => {
            // `1 == 1.0`: a float with an integral value has the integer's key.
            if number.fract() == 0.0 && number.abs() < 9.2e18 {
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "integral and within i64's range"
                )]
                let _ = write!(key, "n:{}", *number as i64);
            } else {
                let _ = write!(key, "n:{number:?}");
            }
        }
        Value::String(text) => write_text(&text.to_lowercase(), key),
        Value::Array(items) => {
            let _ = write!(key, "a{}[", items.len());
            for item in items {
                if !write_key(item, key) {
                    key.push('u');
                }
                key.push(',');
            }
            key.push(']');
        }
        Value::Hash(entries) => {
            let mut sorted: Vec<(String, &Value)> = entries
                .iter()
                .map(|(name, value)| (name.to_lowercase(), value))
                .collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let _ = write!(key, "h{}{{", sorted.len());
            for (name, value) in sorted {
                write_text(&name, key);
                key.push('=');
                if !write_key(value, key) {
                    key.push('u');
                }
                key.push(',');
            }
            key.push('}');
        }
    }
    true
}

/// A string as `s<bytes>:<text>`.
fn write_text(text: &str, key: &mut String) {
    use std::fmt::Write;
    let _ = write!(key, "s{}:{text}", text.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(title: &str, tags: &[&str], attributes: Vec<(&str, Value)>) -> Export {
        Export {
            type_name: "file".to_owned(),
            title: title.to_owned(),
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            attributes: Attributes(
                attributes
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value))
                    .collect(),
            ),
            source: None,
        }
    }

    fn compare(attribute: &str, equal: bool, value: Value) -> ExportQuery {
        ExportQuery::Compare {
            attribute: attribute.to_owned(),
            equal,
            value,
        }
    }

    #[test]
    fn keys_are_equal_exactly_when_the_language_says_equal() {
        let key = |value: Value| match_key(&value);
        assert_eq!(
            key(Value::String("Web".into())),
            key(Value::String("wEB".into()))
        );
        assert_eq!(key(Value::Integer(1)), key(Value::Float(1.0)));
        assert_ne!(key(Value::Integer(1)), key(Value::String("1".into())));
        assert_ne!(key(Value::Float(1.5)), key(Value::Integer(1)));
        assert_ne!(key(Value::Boolean(true)), key(Value::String("true".into())));
        assert_eq!(key(Value::Undef), None);
        assert_eq!(
            key(Value::Sensitive(Box::new(Value::String("x".into())))),
            None
        );
        assert_eq!(key(Value::Float(f64::NAN)), None);
        assert_eq!(
            key(Value::Integer(1 << 60)),
            key(Value::Float((1u64 << 60) as f64))
        );
        assert_ne!(
            key(Value::Array(vec![Value::String("a".into()), Value::Undef])),
            key(Value::Array(vec![Value::String("a".into())]))
        );
        // No separator inside a string makes two values one.
        assert_ne!(
            key(Value::Array(vec![Value::String("a,s1:b".into())])),
            key(Value::Array(vec![
                Value::String("a".into()),
                Value::String("b".into())
            ]))
        );
    }

    #[test]
    fn queries_match_titles_tags_and_members_of_arrays() {
        let backend = export(
            "/etc/lb/web1",
            &["file", "backend", "profile::web"],
            vec![
                ("ensure", Value::String("present".into())),
                (
                    "groups",
                    Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
                ),
                ("port", Value::Integer(8080)),
            ],
        );
        assert!(compare("tag", true, Value::String("Backend".into())).matches(&backend));
        assert!(compare("title", true, Value::String("/etc/lb/web1".into())).matches(&backend));
        assert!(compare("groups", true, Value::String("b".into())).matches(&backend));
        assert!(compare("port", true, Value::Float(8080.0)).matches(&backend));
        assert!(!compare("port", true, Value::String("8080".into())).matches(&backend));
        assert!(compare("missing", false, Value::String("x".into())).matches(&backend));
        assert!(!compare("ensure", false, Value::String("present".into())).matches(&backend));
        let both = ExportQuery::And(
            Box::new(compare("tag", true, Value::String("backend".into()))),
            Box::new(ExportQuery::Or(
                Box::new(compare("port", true, Value::Integer(1))),
                Box::new(compare("ensure", true, Value::String("PRESENT".into()))),
            )),
        );
        assert!(both.matches(&backend));
        assert_eq!(both.comparisons(), 3);
        assert!(ExportQuery::All.matches(&backend));
    }
}
