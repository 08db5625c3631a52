//! A catalog ready to run: each resource as its provider will see it
//! ([`PreparedResource`]), and the whole with its schemas and graph ([`Prepared`]).
//! What `validate` makes, and what the run, the scheduler and the checks read.

use crate::graph::Graph;
use crate::guard::Guard;
use crate::redact::Secrets;
use crate::schemas::Schemas;
use wconverge_catalog::{
    Code, Lazy, NodeAttributes, ResourceRef, SourceLocation, TypeSchema, Value,
};

/// The provider of the types built into the engine (`node_block`).
pub const ENGINE: &str = "wconverge";

/// A resource ready for its provider: undef attributes removed, defaults filled in,
/// the namevar set.
#[derive(Debug, Clone)]
pub struct PreparedResource {
    pub reference: ResourceRef,
    pub type_name: String,
    /// The plugin that implements it, by its name in the policy.
    pub provider: String,
    pub title: String,
    /// In schema order for declared attributes.
    pub attributes: Vec<(String, Value)>,
    pub source: Option<SourceLocation>,
    /// For a resource collected from another node's exports: that node.
    pub exported_by: Option<String>,
    pub noop: bool,
    /// Its guards, in evaluation order.
    pub guards: Vec<Guard>,
    /// Its `requires` resource program.
    pub requirement: Option<wconverge_requires::Program>,
    /// Attributes whose values are lazy, resolved during the run just before the
    /// provider sees the resource; they are not in `attributes` until then.
    pub lazy: Vec<(String, Lazy)>,
    /// What its type's schema asks for of the run (`node`, `facts`), filled in just
    /// before the provider sees the resource.
    pub context: Vec<(String, Value)>,
    /// Whether its lazy values or block guards read `$facts` (from their syntax trees).
    pub reads_facts: bool,
    pub(crate) secrets: Secrets,
}

impl PreparedResource {
    /// Its sensitive strings, which nothing about it may show.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// Attributes whose changes are shown only as `[redacted]`: those the schema marks
    /// sensitive and those whose value in the catalog is sensitive, whole or in part.
    pub fn sensitive_attributes(&self) -> Vec<&str> {
        fn holds_sensitive(value: &Value) -> bool {
            match value {
                Value::Sensitive(_) => true,
                Value::Array(items) => items.iter().any(holds_sensitive),
                Value::Hash(entries) => entries.iter().any(|(_, value)| holds_sensitive(value)),
                _ => false,
            }
        }
        self.attributes
            .iter()
            .filter(|(_, value)| holds_sensitive(value))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// Its secrets and what its provider read of its sensitive attributes on the
    /// machine (`observed`: a secret being rotated away is still a secret), to be
    /// scrubbed from whatever the provider says about it, whatever the text.
    pub fn secrets_with_observed(&self, observed: &crate::State) -> Secrets {
        let sensitive = self.sensitive_attributes();
        let mut read = Vec::new();
        for (name, value) in observed {
            if sensitive.contains(&name.as_str()) {
                value.collect_secrets(true, &mut read);
            }
        }
        let mut secrets = self.secrets.clone();
        secrets.extend(read);
        secrets
    }

    /// Each path its schema's path attributes (`path-access`) name, with the attribute:
    /// one for a string, each string of an array.
    pub fn paths<'a>(
        &'a self,
        schema: &'a wconverge_catalog::TypeSchema,
    ) -> Vec<(&'a wconverge_catalog::AttributeSchema, &'a str)> {
        let mut paths = Vec::new();
        for attribute in &schema.attributes {
            if attribute.path_access == wconverge_catalog::PathAccess::None {
                continue;
            }
            let Some(value) = self.get(&attribute.name) else {
                continue;
            };
            match value.unwrap_sensitive() {
                Value::Array(items) => paths.extend(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|path| (attribute, path)),
                ),
                other => paths.extend(other.as_str().map(|path| (attribute, path))),
            }
        }
        paths
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|(existing, _)| existing == name)
            .map(|(_, value)| value)
    }
}

/// A validated catalog: resources with their schemas, in a graph ready to run.
#[derive(Debug)]
pub struct Prepared {
    pub node: Option<String>,
    /// The node attributes as the compile phase left them.
    pub node_attributes: NodeAttributes,
    pub resources: Vec<PreparedResource>,
    /// The schemas in use, by type, then by provider.
    pub schemas: Schemas,
    /// The types the manifests declared.
    pub types: Vec<TypeSchema>,
    pub graph: Graph,
    /// The paths resources write (namevars that are `read-write` paths), sorted.
    pub written_paths: Vec<String>,
    /// What runs the code the catalog carries (lazy values, checks of types).
    pub code: &'static dyn Code,
}

impl Prepared {
    /// The schema a resource was validated against: its provider's.
    pub fn schema(&self, resource: &PreparedResource) -> Option<&TypeSchema> {
        schema_of(&self.schemas, resource)
    }

    /// The paths other resources write beneath `path`, sorted.
    pub fn written_beneath(&self, path: &str) -> Vec<String> {
        // Those that start with `path` are together, in order; of them, those where a
        // `/` comes next are beneath it (no string is made to say so: most paths of a
        // run have nothing beneath them, and each asks).
        let path = path.trim_end_matches('/');
        let start = self
            .written_paths
            .partition_point(|written| written.as_str() < path);
        self.written_paths[start..]
            .iter()
            .take_while(|written| written.starts_with(path))
            .filter(|written| written.as_bytes().get(path.len()) == Some(&b'/'))
            .cloned()
            .collect()
    }
}

pub(crate) fn schema_of<'s>(
    schemas: &'s Schemas,
    resource: &PreparedResource,
) -> Option<&'s TypeSchema> {
    schemas.get(&resource.type_name, &resource.provider)
}
