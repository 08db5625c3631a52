//! Attribute values as plain Rust data.

/// A value of an attribute: what a manifest wrote, or what a provider observed.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Not set.
    Undef,
    /// `true` or `false`.
    Boolean(bool),
    /// A 64-bit signed integer.
    Integer(i64),
    /// A 64-bit float.
    Float(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// A hash with string keys, in the order they were written.
    Hash(Vec<(String, Value)>),
    /// A value that must never appear in logs, reports or diffs. The accessors below see
    /// through it, so a provider uses a sensitive string like any other.
    Sensitive(Box<Value>),
}

impl Value {
    /// The value without its [`Value::Sensitive`] wrapper, if any.
    ///
    /// ```no_run
    /// # use wconverge_sdk::Value;
    /// let secret = Value::Sensitive(Box::new("hunter2".into()));
    /// assert_eq!(secret.unwrap_sensitive().as_str(), Some("hunter2"));
    /// ```
    pub fn unwrap_sensitive(&self) -> &Value {
        match self {
            Value::Sensitive(inner) => inner.unwrap_sensitive(),
            other => other,
        }
    }

    /// Whether the value is marked sensitive.
    pub fn is_sensitive(&self) -> bool {
        matches!(self, Value::Sensitive(_))
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self.unwrap_sensitive() {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self.unwrap_sensitive() {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_integer(&self) -> Option<i64> {
        match self.unwrap_sensitive() {
            Value::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self.unwrap_sensitive() {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The entries, if this is a hash.
    pub fn as_hash(&self) -> Option<&[(String, Value)]> {
        match self.unwrap_sensitive() {
            Value::Hash(entries) => Some(entries),
            _ => None,
        }
    }

    /// The value as a list: the elements of an array, or the value itself (how
    /// attributes with a multiplicity above one accept a single value).
    pub fn as_list(&self) -> Vec<&Value> {
        match self.unwrap_sensitive() {
            Value::Array(items) => items.iter().collect(),
            Value::Undef => Vec::new(),
            other => vec![other],
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

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Self {
        Value::Array(items.into_iter().map(Into::into).collect())
    }
}
