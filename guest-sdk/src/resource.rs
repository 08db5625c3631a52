//! Resources, observed state and changes.

use crate::{Error, Result, Value};

/// A resource as the provider sees it: the host has filled in defaults, and the namevar
/// is always set.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The type, as manifests write it (`file`).
    pub type_name: String,
    /// The title (`/etc/motd`).
    pub title: String,
    attributes: Vec<(String, Value)>,
    context: Vec<(String, Value)>,
}

impl Resource {
    /// A resource with no attributes; add them with [`Resource::with`] (for tests).
    ///
    /// ```no_run
    /// # use wconverge_sdk::Resource;
    /// let motd = Resource::new("file", "/etc/motd")
    ///     .with("path", "/etc/motd")
    ///     .with("content", "hello\n");
    /// ```
    pub fn new(type_name: &str, title: &str) -> Self {
        Resource {
            type_name: type_name.to_owned(),
            title: title.to_owned(),
            attributes: Vec::new(),
            context: Vec::new(),
        }
    }

    /// The resource with the context entry `name` (`node`, `facts`) set (for tests).
    pub fn with_context(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.context.retain(|(existing, _)| existing != name);
        self.context.push((name.to_owned(), value.into()));
        self
    }

    /// What the host passed of the run, as the type's schema asked
    /// ([`crate::TypeSchema::context`]): `node` (the node's attributes, merged) and
    /// `facts`. Absent in `validate`.
    pub fn context(&self, name: &str) -> Option<&Value> {
        find(&self.context, name)
    }

    /// The resource with `name` set to `value`.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.attributes.retain(|(existing, _)| existing != name);
        self.attributes.push((name.to_owned(), value.into()));
        self
    }

    pub(crate) fn from_parts(
        type_name: String,
        title: String,
        attributes: Vec<(String, Value)>,
        context: Vec<(String, Value)>,
    ) -> Self {
        Resource {
            type_name,
            title,
            attributes,
            context,
        }
    }

    /// The attribute's value, if set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        find(&self.attributes, name)
    }

    /// The attribute's string value, if set and a string.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Value::as_str)
    }

    /// The attribute's boolean value, if set and a boolean.
    pub fn get_bool(&self, name: &str) -> Option<bool> {
        self.get(name).and_then(Value::as_bool)
    }

    /// The strings of an attribute that takes one value or many (`groups => 'adm'` or
    /// `groups => ['adm', 'web']`); `None` when it is not set. Values that are not
    /// strings are left out.
    pub fn get_strings(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(strings)
    }

    /// The attribute's string value, or an error naming it.
    pub fn require_str(&self, name: &str) -> Result<&str> {
        self.get_str(name).ok_or_else(|| {
            Error::new(format!(
                "{}[{}]: attribute `{name}` must be a string",
                self.type_name, self.title
            ))
        })
    }

    /// Every attribute, in order.
    pub fn attributes(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.attributes
            .iter()
            .map(|(name, value)| (name.as_str(), value))
    }
}

fn find<'a>(attributes: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|(existing, _)| existing == name)
        .map(|(_, value)| value)
}

/// What a provider observed: attribute values as they are on the machine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct State {
    attributes: Vec<(String, Value)>,
}

impl State {
    /// An empty state.
    pub fn new() -> Self {
        State::default()
    }

    /// The state with `name` set to `value`.
    ///
    /// ```no_run
    /// # use wconverge_sdk::State;
    /// let state = State::new().with("ensure", "absent");
    /// ```
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.set(name, value);
        self
    }

    /// Sets `name` to `value`.
    pub fn set(&mut self, name: &str, value: impl Into<Value>) {
        self.attributes.retain(|(existing, _)| existing != name);
        self.attributes.push((name.to_owned(), value.into()));
    }

    /// The observed value, if any.
    pub fn get(&self, name: &str) -> Option<&Value> {
        find(&self.attributes, name)
    }

    /// The observed string value, if any.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Value::as_str)
    }

    /// The strings of an observed attribute that holds one value or many.
    pub fn get_strings(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(strings)
    }

    pub(crate) fn into_parts(self) -> Vec<(String, Value)> {
        self.attributes
    }

    pub(crate) fn from_parts(attributes: Vec<(String, Value)>) -> Self {
        State { attributes }
    }
}

/// One change a provider would make.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The attribute that changes (declared by the type).
    pub attribute: String,
    /// The value observed now.
    pub current: Option<Value>,
    /// The value it converges to.
    pub desired: Option<Value>,
    /// What happens, in words (`created with mode 0644`).
    pub message: String,
    /// The difference itself, as data (`apply --show-diff` prints it; the host leaves
    /// it out for a sensitive attribute). Set with [`Change::with_diff`].
    pub diff: Option<Diff>,
}

/// How a change differs, beyond its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diff {
    /// A unified diff of a text: `---` and `+++` headers, then `@@` hunks.
    Unified(String),
    /// A value before and after, as text, when a unified diff would say no more.
    BeforeAfter {
        /// The value now.
        before: String,
        /// The value after the change.
        after: String,
    },
}

impl Change {
    /// A change of `attribute` from `current` to `desired`.
    ///
    /// ```no_run
    /// # use wconverge_sdk::Change;
    /// let change = Change::new("mode", Some("0600".into()), Some("0644".into()), "mode changed");
    /// ```
    pub fn new(
        attribute: &str,
        current: Option<Value>,
        desired: Option<Value>,
        message: impl Into<String>,
    ) -> Self {
        Change {
            attribute: attribute.to_owned(),
            current,
            desired,
            message: message.into(),
            diff: None,
        }
    }

    /// The change with its difference as data: a unified diff of a file's content,
    /// say. Never give one for a sensitive attribute's value (the host drops it).
    ///
    /// ```no_run
    /// # use wconverge_sdk::{Change, Diff};
    /// let change = Change::new("content", None, None, "content changed")
    ///     .with_diff(Diff::Unified("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new\n".into()));
    /// ```
    pub fn with_diff(mut self, diff: Diff) -> Self {
        self.diff = Some(diff);
        self
    }

    /// `ensure` from `absent` to `present`: the thing is created.
    pub fn created(message: impl Into<String>) -> Self {
        Change::new(
            "ensure",
            Some("absent".into()),
            Some("present".into()),
            message,
        )
    }

    /// `ensure` from `present` to `absent`: the thing is removed.
    pub fn removed(message: impl Into<String>) -> Self {
        Change::new(
            "ensure",
            Some("present".into()),
            Some("absent".into()),
            message,
        )
    }
}

/// The strings of a value that is one string or an array of them.
fn strings(value: &Value) -> Vec<String> {
    value
        .as_list()
        .into_iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}
