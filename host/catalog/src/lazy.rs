//! Lazy values (`lazy { expr }`): an expression of the manifest language kept unevaluated
//! in the catalog, with the variables it reads, and evaluated by the host during the run.
//!
//! In JSON a lazy value is `{"__lazy": {"expression": "...", "variables": {...},
//! "file": "...", "line": N, "column": N}}`; as a [`Value`] it is that hash.

use crate::{SourceLocation, Value};

/// The key that marks a hash as a lazy value.
pub const LAZY_KEY: &str = "__lazy";

/// A lazy value.
#[derive(Debug, Clone, PartialEq)]
pub struct Lazy {
    /// The expression's source text.
    pub expression: String,
    /// The variables it reads, with their values where it was written.
    pub variables: Vec<(String, Value)>,
    /// Where it was written.
    pub location: SourceLocation,
}

impl Lazy {
    /// `value` as a lazy value: `None` when it is no lazy value, an error when it is a
    /// malformed one.
    pub fn from_value(value: &Value) -> Option<Result<Lazy, String>> {
        let Value::Hash(entries) = value else {
            return None;
        };
        let [(key, body)] = entries.as_slice() else {
            return None;
        };
        if key != LAZY_KEY {
            return None;
        }
        Some(Self::from_body(body))
    }

    fn from_body(body: &Value) -> Result<Lazy, String> {
        let Value::Hash(fields) = body else {
            return Err(format!("`{LAZY_KEY}` must be an object"));
        };
        let field = |name: &str| {
            fields
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value)
        };
        if let Some((key, _)) = fields.iter().find(|(key, _)| {
            !["expression", "variables", "file", "line", "column"].contains(&key.as_str())
        }) {
            return Err(format!("a lazy value has no field `{key}`"));
        }
        let expression = match field("expression") {
            Some(Value::String(text)) => text.clone(),
            _ => return Err("a lazy value needs `expression`, a string".to_owned()),
        };
        let variables = match field("variables") {
            None => Vec::new(),
            Some(Value::Hash(variables)) => variables.clone(),
            Some(_) => return Err("a lazy value's `variables` must be an object".to_owned()),
        };
        let number = |name: &str| match field(name) {
            Some(Value::Integer(n)) => u32::try_from(*n).ok(),
            _ => None,
        };
        let location = SourceLocation {
            file: match field("file") {
                Some(Value::String(file)) => file.clone(),
                _ => "catalog".to_owned(),
            },
            line: number("line").unwrap_or(0),
            column: number("column"),
        };
        Ok(Lazy {
            expression,
            variables,
            location,
        })
    }

    /// The lazy value as a catalog value.
    pub fn to_value(&self) -> Value {
        let mut fields = vec![
            (
                "expression".to_owned(),
                Value::String(self.expression.clone()),
            ),
            ("variables".to_owned(), Value::Hash(self.variables.clone())),
            ("file".to_owned(), Value::String(self.location.file.clone())),
            (
                "line".to_owned(),
                Value::Integer(i64::from(self.location.line)),
            ),
        ];
        if let Some(column) = self.location.column {
            fields.push(("column".to_owned(), Value::Integer(i64::from(column))));
        }
        Value::Hash(vec![(LAZY_KEY.to_owned(), Value::Hash(fields))])
    }

    /// Whether `value` is or contains a lazy value.
    pub fn within(value: &Value) -> bool {
        if Lazy::from_value(value).is_some() {
            return true;
        }
        match value {
            Value::Array(items) => items.iter().any(Lazy::within),
            Value::Hash(entries) => entries.iter().any(|(_, value)| Lazy::within(value)),
            Value::Sensitive(inner) => Lazy::within(inner),
            _ => false,
        }
    }

    /// How reports show it: `lazy { $x == 1 }`.
    pub fn shown(&self) -> String {
        format!("lazy {{ {} }}", self.expression.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lazy_value_round_trips_through_json() {
        let lazy = Lazy {
            expression: "$port > 1024".to_owned(),
            variables: vec![("port".to_owned(), Value::Integer(8080))],
            location: SourceLocation {
                file: "site.wcv".to_owned(),
                line: 3,
                column: Some(14),
            },
        };
        let json = serde_json::to_string(&lazy.to_value()).expect("json");
        assert_eq!(
            json,
            r#"{"__lazy":{"expression":"$port > 1024","variables":{"port":8080},"file":"site.wcv","line":3,"column":14}}"#
        );
        let back: Value = serde_json::from_str(&json).expect("value");
        assert_eq!(Lazy::from_value(&back), Some(Ok(lazy)));
        assert!(Lazy::within(&Value::Array(vec![back])));
        let other = Value::Hash(vec![("__lazy".to_owned(), Value::Integer(1))]);
        assert_eq!(
            Lazy::from_value(&other),
            Some(Err("`__lazy` must be an object".to_owned()))
        );
    }
}
