//! The catalog: the resources a run converges, their relationships and where they were
//! declared, as one serializable document (**API boundary**: the JSON format is
//! documented in `docs/catalog-format.md` and versioned by `format_version`).
//!
//! This crate knows nothing of plugins, wasmtime or the file system: it parses and
//! prints text that others read and write.
#![warn(clippy::disallowed_methods)]

mod code;
mod diagnostic_code;
mod export;
mod lazy;
mod reference;
mod schema;
mod split;
mod value;

pub use code::{Code, LazyUse, NODE_BLOCK};
pub use diagnostic_code::DiagnosticCode;
pub use export::{Collected, Export, ExportQuery, MATCH_KEY_FORMAT, match_key};
pub use lazy::{LAZY_KEY, Lazy};
pub use reference::{ResourceRef, display_type_name};
pub use schema::{
    AttributeSchema, Behaviour, Concurrency, DataType, HomeDefault, Invariant, PathAccess,
    RunContext, TypeSchema,
};
pub use value::{MAX_DEPTH, Value};

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;
use std::fmt;

/// The catalog format this crate reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// Metaparameters the catalog reserves: a type may not declare an attribute so named.
pub const METAPARAMETERS: &[&str] = &[
    "require",
    "before",
    "notify",
    "subscribe",
    "tag",
    "noop",
    "only_if",
    "not_if",
    "guard_interpreter",
    "requires",
    "provider",
];

/// A compiled catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Always [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The node the catalog was compiled for, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub resources: Vec<Resource>,
    /// Relationships declared apart from resources (chaining arrows in manifests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<Edge>,
    /// The node attributes as the compile phase left them; lazy values read them, and
    /// `node_block` resources write them, during the run.
    #[serde(default, skip_serializing_if = "NodeAttributes::is_empty")]
    pub node_attributes: NodeAttributes,
    /// The data types the manifests declared (`type Name { ... }`), each with its
    /// ancestors' features folded in: the host checks attribute values typed by them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<TypeSchema>,
}

/// Node attributes (Chef's, as Facebook's "Compile Time vs Run Time" uses them): two
/// layers of nested hashes. A read sees both
/// merged, `override` winning over `default` key by key; within one layer the last
/// writer wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAttributes {
    #[serde(default = "empty_hash", skip_serializing_if = "is_empty_hash")]
    pub default: Value,
    #[serde(
        default = "empty_hash",
        rename = "override",
        skip_serializing_if = "is_empty_hash"
    )]
    pub override_: Value,
}

fn empty_hash() -> Value {
    Value::Hash(Vec::new())
}

fn is_empty_hash(value: &Value) -> bool {
    matches!(value, Value::Hash(entries) if entries.is_empty())
}

impl Default for NodeAttributes {
    fn default() -> Self {
        NodeAttributes {
            default: empty_hash(),
            override_: empty_hash(),
        }
    }
}

impl NodeAttributes {
    pub fn is_empty(&self) -> bool {
        is_empty_hash(&self.default) && is_empty_hash(&self.override_)
    }

    /// Both layers merged, key by key, `override` winning: what a read sees.
    pub fn merged(&self) -> Value {
        self.get(&[])
    }

    /// The merged value at `path` (the whole hash for an empty path); `undef` where a
    /// key is missing, however deep. Only the value at `path` is copied.
    pub fn get(&self, path: &[String]) -> Value {
        // An override that replaced a hash on the way with something else hides what the
        // default layer has below it.
        for depth in 0..path.len() {
            if let Some(value) = lookup(&self.override_, &path[..depth])
                && !matches!(value, Value::Hash(_) | Value::Undef)
            {
                return Value::Undef;
            }
        }
        merge(lookup(&self.default, path), lookup(&self.override_, path))
    }

    /// Sets `path` (at least one key) in one layer, creating the hashes on the way;
    /// `Err(depth)` when `path[..depth]` holds something other than a hash.
    pub fn set(&mut self, layer: NodeLayer, path: &[String], value: Value) -> Result<(), usize> {
        let root = match layer {
            NodeLayer::Default => &mut self.default,
            NodeLayer::Override => &mut self.override_,
        };
        set_in(root, path, value, 0)
    }

    /// Whether the `override` layer holds a value at `path`.
    pub fn overridden(&self, path: &[String]) -> bool {
        lookup(&self.override_, path).is_some_and(|value| *value != Value::Undef)
    }
}

/// The two precedences of node attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeLayer {
    Default,
    Override,
}

fn lookup<'v>(root: &'v Value, path: &[String]) -> Option<&'v Value> {
    let mut current = root;
    for key in path {
        let Value::Hash(entries) = current else {
            return None;
        };
        current = entries
            .iter()
            .find(|(existing, _)| existing == key)
            .map(|(_, value)| value)?;
    }
    Some(current)
}

fn merge(default: Option<&Value>, override_: Option<&Value>) -> Value {
    match (default, override_) {
        (Some(Value::Hash(base)), Some(Value::Hash(over))) => {
            // Keys are found through an index: a merge is linear in the sizes of both.
            let mut merged = base.clone();
            let mut index: HashMap<String, usize> = merged
                .iter()
                .enumerate()
                .map(|(at, (key, _))| (key.clone(), at))
                .collect();
            for (key, value) in over {
                match index.get(key) {
                    Some(&at) => merged[at].1 = merge(Some(&merged[at].1), Some(value)),
                    None => {
                        index.insert(key.clone(), merged.len());
                        merged.push((key.clone(), value.clone()));
                    }
                }
            }
            Value::Hash(merged)
        }
        (_, Some(over)) if *over != Value::Undef => over.clone(),
        (Some(base), _) => base.clone(),
        _ => Value::Undef,
    }
}

fn set_in(node: &mut Value, path: &[String], value: Value, depth: usize) -> Result<(), usize> {
    let Some((key, rest)) = path.split_first() else {
        *node = value;
        return Ok(());
    };
    if *node == Value::Undef {
        *node = Value::Hash(Vec::new());
    }
    let Value::Hash(entries) = node else {
        return Err(depth);
    };
    let at = match entries.iter().position(|(existing, _)| existing == key) {
        Some(at) => at,
        None => {
            entries.push((key.clone(), Value::Undef));
            entries.len() - 1
        }
    };
    set_in(&mut entries[at].1, rest, value, depth + 1)
}

/// One resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// Lowercase type name: `file`, `exec`.
    #[serde(rename = "type")]
    pub type_name: String,
    pub title: String,
    #[serde(default)]
    pub attributes: Attributes,
    /// Boxed: a catalog holds many resources, and the metaparameters are most of a
    /// resource's size (a compile of 50,000 resources builds them all beside the
    /// compiler's own).
    #[serde(default, skip_serializing_if = "Metaparams::is_empty")]
    pub metaparams: Box<Metaparams>,
    /// Where the resource was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceLocation>,
    /// For a resource collected from another node's exports: that node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exported_by: Option<String>,
}

impl Resource {
    pub fn reference(&self) -> ResourceRef {
        ResourceRef::new(&self.type_name, &self.title)
    }
}

/// Metaparameters: attributes every resource has, whatever its type.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metaparams {
    /// Resources applied before this one.
    #[serde(default, deserialize_with = "one_or_many_refs")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub require: Vec<ResourceRef>,
    /// Resources applied after this one.
    #[serde(default, deserialize_with = "one_or_many_refs")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<ResourceRef>,
    /// Resources applied after this one and refreshed when it changes.
    #[serde(default, deserialize_with = "one_or_many_refs")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<ResourceRef>,
    /// Resources applied before this one, which refresh it when they change.
    #[serde(default, deserialize_with = "one_or_many_refs")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscribe: Vec<ResourceRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Report what would change without changing it, whatever the run's mode.
    #[serde(default, skip_serializing_if = "is_false")]
    pub noop: bool,
    /// Guards: the resource is applied only if this holds (Chef's `only_if`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_if: Option<Value>,
    /// Guards: the resource is skipped if this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_if: Option<Value>,
    /// The interpreter plugin that evaluates string guards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_interpreter: Option<String>,
    /// A resource program over facts that must hold (PlainBox's `requires`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<String>,
    /// The plugin that implements the resource, by its name in the policy; without it,
    /// the first of the type's providers that is suitable on the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Metaparams {
    pub fn is_empty(&self) -> bool {
        *self == Metaparams::default()
    }
}

/// A file and line (and column, when known) in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceLocation {
    pub file: String,
    pub line: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(column) => write!(f, "{}:{}:{column}", self.file, self.line),
            None => write!(f, "{}:{}", self.file, self.line),
        }
    }
}

/// An ordering relationship declared apart from the resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    #[serde(with = "ref_string")]
    pub source: ResourceRef,
    #[serde(with = "ref_string")]
    pub target: ResourceRef,
    pub kind: EdgeKind,
    /// Where the relationship was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<SourceLocation>,
}

/// `before` orders (`->`); `notify` orders and refreshes (`~>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    Before,
    Notify,
}

/// Attribute values in declaration order; a JSON object in the catalog.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attributes(pub Vec<(String, Value)>);

impl Attributes {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(existing, _)| existing == name)
            .map(|(_, value)| value)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(name, value)| (name.as_str(), value))
    }

    pub fn set(&mut self, name: &str, value: Value) {
        match self.0.iter_mut().find(|(existing, _)| existing == name) {
            Some((_, existing)) => *existing = value,
            None => self.0.push((name.to_owned(), value)),
        }
    }
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AttributesVisitor;
        impl<'de> Visitor<'de> for AttributesVisitor {
            type Value = Attributes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of attribute values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Attributes, A::Error> {
                let mut attributes: Vec<(String, Value)> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    if attributes.iter().any(|(existing, _)| *existing == name) {
                        return Err(de::Error::custom(format!(
                            "attribute `{name}` is set twice"
                        )));
                    }
                    let value = map.next_value()?;
                    attributes.push((name, value));
                }
                Ok(Attributes(attributes))
            }
        }
        deserializer.deserialize_map(AttributesVisitor)
    }
}

fn one_or_many_refs<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ResourceRef>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    let texts = match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(text) => vec![text],
        OneOrMany::Many(texts) => texts,
    };
    texts
        .iter()
        .map(|text| ResourceRef::parse(text).map_err(de::Error::custom))
        .collect()
}

impl Serialize for ResourceRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

mod ref_string {
    use super::ResourceRef;
    use serde::{Deserialize, Deserializer, Serializer, de};

    pub(super) fn serialize<S: Serializer>(
        reference: &ResourceRef,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(reference)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ResourceRef, D::Error> {
        let text = String::deserialize(deserializer)?;
        ResourceRef::parse(&text).map_err(de::Error::custom)
    }
}

/// Something wrong with a catalog or a resource, with where it was declared and what to
/// do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What kind of problem it is, from the registry (`docs/diagnostics.md`).
    pub code: DiagnosticCode,
    pub resource: Option<ResourceRef>,
    pub location: Option<SourceLocation>,
    pub message: String,
    pub help: Option<String>,
}

impl Problem {
    pub fn new(code: DiagnosticCode, message: impl Into<String>) -> Self {
        Problem {
            code,
            resource: None,
            location: None,
            message: message.into(),
            help: None,
        }
    }

    pub fn of(resource: &Resource, code: DiagnosticCode, message: impl Into<String>) -> Self {
        Problem {
            code,
            resource: Some(resource.reference()),
            location: resource.source.clone(),
            message: message.into(),
            help: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl Problem {
    /// The problem without its help: `error[wcv::CODE]: LOCATION: RESOURCE: MESSAGE`.
    pub fn headline(&self) -> String {
        let mut text = format!("error[{}]: ", self.code);
        if let Some(location) = &self.location {
            text.push_str(&format!("{location}: "));
        }
        if let Some(resource) = &self.resource {
            text.push_str(&format!("{resource}: "));
        }
        text.push_str(&self.message);
        text
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Why a catalog could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{message} (line {line}, column {column})")]
    Syntax {
        message: String,
        line: usize,
        column: usize,
    },
    #[error("the catalog is invalid:\n{}", render(.0))]
    Invalid(Vec<Problem>),
}

fn render(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|problem| format!("  {problem}"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Catalog {
            format_version: FORMAT_VERSION,
            node: None,
            resources: Vec::new(),
            edges: Vec::new(),
            node_attributes: NodeAttributes::default(),
            types: Vec::new(),
        }
    }

    /// Parses and checks a catalog: the format version, type names, titles and
    /// uniqueness. Schema checks are the engine's, which knows the types.
    pub fn from_json(text: &str) -> Result<Catalog> {
        let parsed = match split::parse_in_two(text) {
            Some(catalog) => Ok(catalog),
            None => serde_json::from_str(text),
        };
        let catalog: Catalog = parsed.map_err(|error| Error::Syntax {
            message: error
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_owned(),
            line: error.line(),
            column: error.column(),
        })?;
        let problems = catalog.check();
        if problems.is_empty() {
            Ok(catalog)
        } else {
            Err(Error::Invalid(problems))
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a catalog always serializes")
    }

    /// Problems visible without type schemas.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        if self.format_version != FORMAT_VERSION {
            problems.push(
                Problem::new(
                    DiagnosticCode::Catalog,
                    format!(
                        "catalog format version {} is not supported; this wconverge reads version \
                     {FORMAT_VERSION}",
                        self.format_version
                    ),
                )
                .with_help("compile the catalog with the same wconverge version that applies it"),
            );
            return problems;
        }
        for (layer, value) in [
            ("default", &self.node_attributes.default),
            ("override", &self.node_attributes.override_),
        ] {
            if !matches!(value, Value::Hash(_)) {
                problems.push(Problem::new(
                    DiagnosticCode::Catalog,
                    format!("`node_attributes.{layer}` must be an object"),
                ));
            } else if Lazy::within(value) {
                problems.push(Problem::new(
                    DiagnosticCode::Catalog,
                    format!(
                        "`node_attributes.{layer}` holds a lazy value; node attributes hold plain \
                     values"
                    ),
                ));
            }
        }
        // By type and title; a type in capitals (reported) by its lowercase name, as its
        // reference would have it.
        let mut seen: HashMap<(std::borrow::Cow<'_, str>, &str), &Resource> =
            HashMap::with_capacity(self.resources.len());
        // Each type name is checked once, however many resources have it.
        let mut type_names: HashMap<&str, Result<(), String>> = HashMap::new();
        for resource in &self.resources {
            let checked = type_names
                .entry(resource.type_name.as_str())
                .or_insert_with(|| {
                    ResourceRef::parse(&format!("{}[x]", resource.type_name)).map(|_| ())
                });
            if let Err(message) = checked {
                problems.push(Problem::of(
                    resource,
                    DiagnosticCode::Catalog,
                    message.clone(),
                ));
                continue;
            }
            let lowercase = !resource
                .type_name
                .bytes()
                .any(|byte| byte.is_ascii_uppercase());
            if !lowercase {
                problems.push(
                    Problem::of(
                        resource,
                        DiagnosticCode::Catalog,
                        format!("type `{}` is not lowercase", resource.type_name),
                    )
                    .with_help("write types in lowercase in the catalog: `file`, not `File`"),
                );
            }
            if resource.title.is_empty() {
                problems.push(Problem::of(
                    resource,
                    DiagnosticCode::Catalog,
                    "the title is empty",
                ));
            }
            let reference = (
                if lowercase {
                    std::borrow::Cow::Borrowed(resource.type_name.as_str())
                } else {
                    std::borrow::Cow::Owned(resource.type_name.to_ascii_lowercase())
                },
                resource.title.as_str(),
            );
            if let Some(first) = seen.get(&reference) {
                let first_at = first
                    .source
                    .as_ref()
                    .map_or_else(|| "earlier".to_owned(), |location| format!("at {location}"));
                problems.push(
                    Problem::of(
                        resource,
                        DiagnosticCode::DuplicateTitle,
                        format!("declared twice; first declared {first_at}"),
                    )
                    .with_help("rename one of them, or merge the two declarations"),
                );
            } else {
                seen.insert(reference, resource);
            }
            for (name, _) in resource.attributes.iter() {
                if METAPARAMETERS.contains(&name) {
                    problems.push(
                        Problem::of(
                            resource,
                            DiagnosticCode::Catalog,
                            format!("`{name}` is a metaparameter, not an attribute"),
                        )
                        .with_help(format!("move `{name}` into the resource's `metaparams`")),
                    );
                }
            }
        }
        problems
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_attributes_merge_key_by_key_and_create_hashes_on_write() {
        let path = |keys: &[&str]| keys.iter().map(|key| (*key).to_owned()).collect::<Vec<_>>();
        let mut node = NodeAttributes::default();
        node.set(
            NodeLayer::Override,
            &path(&["swap", "enabled"]),
            Value::Boolean(true),
        )
        .expect("set");
        node.set(
            NodeLayer::Default,
            &path(&["swap", "enabled"]),
            Value::Boolean(false),
        )
        .expect("set");
        node.set(
            NodeLayer::Default,
            &path(&["swap", "size"]),
            Value::Integer(1024),
        )
        .expect("set");
        assert_eq!(
            node.get(&path(&["swap"])),
            Value::Hash(vec![
                ("enabled".to_owned(), Value::Boolean(true)),
                ("size".to_owned(), Value::Integer(1024)),
            ])
        );
        assert_eq!(node.get(&path(&["swap", "size", "deeper"])), Value::Undef);
        assert_eq!(node.get(&path(&["none", "at", "all"])), Value::Undef);
        assert!(node.overridden(&path(&["swap", "enabled"])));
        assert!(!node.overridden(&path(&["swap", "size"])));
        // An override that replaced a hash hides the default layer below it.
        node.set(NodeLayer::Default, &path(&["a", "b"]), Value::Integer(1))
            .expect("set");
        node.set(
            NodeLayer::Override,
            &path(&["a"]),
            Value::String("str".into()),
        )
        .expect("set");
        assert_eq!(node.get(&path(&["a", "b"])), Value::Undef);
        assert_eq!(node.get(&path(&["a"])), Value::String("str".into()));
        // A value in the way of a deeper write is reported with its depth.
        assert_eq!(
            node.set(
                NodeLayer::Default,
                &path(&["swap", "size", "unit"]),
                Value::Undef
            ),
            Err(2)
        );
    }

    #[test]
    fn a_catalog_round_trips_through_json() {
        let text = r#"{
  "format_version": 1,
  "resources": [
    {
      "type": "file",
      "title": "/tmp/a",
      "attributes": { "content": "hi", "mode": "0644" },
      "metaparams": { "require": "Exec[setup]", "tags": ["demo"] },
      "source": { "file": "site.wcv", "line": 3 }
    },
    { "type": "exec", "title": "setup", "attributes": { "command": ["/bin/true"] } }
  ],
  "edges": [ { "source": "Exec[setup]", "target": "File[/tmp/a]", "kind": "notify" } ]
}"#;
        let catalog = Catalog::from_json(text).expect("valid catalog");
        assert_eq!(
            catalog.resources[0].metaparams.require,
            vec![ResourceRef::new("exec", "setup")]
        );
        assert_eq!(
            catalog.resources[0].attributes.get("mode"),
            Some(&Value::from("0644"))
        );
        let again = Catalog::from_json(&catalog.to_json()).expect("round trip");
        assert_eq!(again, catalog);
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let error = Catalog::from_json("{\n  \"format_version\": 1,\n  \"resources\": [,]\n}")
            .expect_err("bad json");
        assert!(matches!(error, Error::Syntax { line: 3, .. }), "{error}");
    }

    #[test]
    fn unknown_fields_and_metaparameters_are_refused() {
        let error = Catalog::from_json(
            r#"{"format_version": 1, "resources": [{"type": "file", "title": "/a", "metaparams": {"stage": "main"}}]}"#,
        )
        .expect_err("unknown metaparameter");
        assert!(
            error.to_string().contains("unknown field `stage`"),
            "{error}"
        );
    }

    #[test]
    fn duplicates_and_bad_versions_are_problems() {
        let error = Catalog::from_json(
            r#"{"format_version": 1, "resources": [
                {"type": "file", "title": "/a", "source": {"file": "a.wcv", "line": 1}},
                {"type": "file", "title": "/a", "source": {"file": "a.wcv", "line": 7}}]}"#,
        )
        .expect_err("duplicate");
        assert_eq!(
            error.to_string(),
            "the catalog is invalid:\n  error[wcv::duplicate-title]: a.wcv:7: File[/a]: declared \
             twice; first declared at a.wcv:1\n  help: rename one of them, or merge the two \
             declarations"
        );
        // A type in capitals is the same type: its resource is a duplicate too. A bad
        // type name is reported for each resource that has it.
        let error = Catalog::from_json(
            r#"{"format_version": 1, "resources": [
                {"type": "file", "title": "/b"},
                {"type": "File", "title": "/b"},
                {"type": "bad type", "title": "/c"},
                {"type": "bad type", "title": "/d"}]}"#,
        )
        .expect_err("problems");
        let text = error.to_string();
        assert!(text.contains("type `File` is not lowercase"), "{text}");
        assert_eq!(text.matches("declared twice").count(), 1, "{text}");
        assert_eq!(text.matches("is not a type name").count(), 2, "{text}");
        let error =
            Catalog::from_json(r#"{"format_version": 9, "resources": []}"#).expect_err("version");
        assert!(
            error.to_string().contains("version 9 is not supported"),
            "{error}"
        );
    }
}
