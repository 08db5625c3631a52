//! The type schemas a plugin describes, checked into the host's `TypeSchema`: names,
//! data types, defaults, and what a type asks of the run. A schema that is refused
//! says what is wrong with it, and the plugin is not loaded.

use crate::bindings::types as wit;
use crate::convert::{Malformed, value_from_wit};
use wconverge_catalog::{
    AttributeSchema, Behaviour, DataType, Invariant, METAPARAMETERS, PathAccess, RunContext,
    TypeSchema,
};

/// How a type's schema from `describe` is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaError {
    /// Its name is not a lowercase identifier (or several, joined by `::`).
    TypeName(String),
    /// One of its attributes is refused.
    Attribute {
        type_name: String,
        attribute: String,
        problem: AttributeProblem,
    },
    /// It has not exactly one namevar.
    Namevars { type_name: String, count: usize },
    /// It asks for the paths managed beneath its resources without a read-write namevar.
    ManagedBeneath(String),
    /// It applies its resources at once per path without a read-write namevar.
    PerPath(String),
    /// A file it asks to be watched is not one (`why`).
    Watch {
        type_name: String,
        watch: String,
        why: String,
    },
}

/// Why an attribute of a schema is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttributeProblem {
    NotIdentifier,
    Metaparameter,
    DeclaredTwice,
    DataType(DataTypeProblem),
    MaxBelowMin,
    /// Its default is not a well-formed value.
    Default(Malformed),
    /// Its default is not one of its own values (`why`, in the schema's words).
    DefaultRefused(String),
    RefersTo(String),
    HomeDefault {
        user_attribute: String,
        suffix: String,
    },
}

/// How a data type in a schema is not a well-formed tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DataTypeProblem {
    Nodes(usize),
    TooDeep,
    Reference { from: usize, to: usize },
    NoCases,
    NoOptions,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaError::TypeName(name) => {
                write!(f, "type name `{name}` is not a lowercase identifier")
            }
            SchemaError::Attribute {
                type_name,
                attribute,
                problem,
            } => write!(f, "type `{type_name}`, attribute `{attribute}`: {problem}"),
            SchemaError::Namevars { type_name, count } => write!(
                f,
                "type `{type_name}` declares {count} namevars; a type has exactly one"
            ),
            SchemaError::ManagedBeneath(type_name) => write!(
                f,
                "type `{type_name}` asks for the paths managed beneath its resources, but its \
                 namevar is not a `read-write` path"
            ),
            SchemaError::PerPath(type_name) => write!(
                f,
                "type `{type_name}` may apply its resources at once per path, but its namevar \
                 is not a `read-write` path"
            ),
            SchemaError::Watch {
                type_name,
                watch,
                why,
            } => write!(f, "type `{type_name}` asks to watch `{watch}`: {why}"),
        }
    }
}

impl std::fmt::Display for AttributeProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttributeProblem::NotIdentifier => f.write_str("not a lowercase identifier"),
            AttributeProblem::Metaparameter => f.write_str("the name is a metaparameter"),
            AttributeProblem::DeclaredTwice => f.write_str("declared twice"),
            AttributeProblem::DataType(problem) => problem.fmt(f),
            AttributeProblem::MaxBelowMin => f.write_str("`max` is below `min`"),
            AttributeProblem::Default(malformed) => malformed.fmt(f),
            AttributeProblem::DefaultRefused(why) => write!(f, "the default {why}"),
            AttributeProblem::RefersTo(referred) => write!(
                f,
                "`refers-to` must name a resource type in lowercase, like `user`, not \
                 `{referred}`"
            ),
            AttributeProblem::HomeDefault {
                user_attribute,
                suffix,
            } => write!(
                f,
                "`home-default` needs an attribute name and a suffix like \
                 `/.ssh/authorized_keys`, not `{user_attribute}` and `{suffix}`"
            ),
        }
    }
}

impl std::fmt::Display for DataTypeProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataTypeProblem::Nodes(count) => write!(f, "a data type has {count} nodes"),
            DataTypeProblem::TooDeep => f.write_str("a data type nests deeper than 32 levels"),
            DataTypeProblem::Reference { from, to } => {
                write!(f, "node {from} of a data type refers to node {to}")
            }
            DataTypeProblem::NoCases => f.write_str("an enumeration has no cases"),
            DataTypeProblem::NoOptions => f.write_str("a one-of data type has no options"),
        }
    }
}

fn data_type_from_wit(data_type: &wit::DataType) -> Result<DataType, DataTypeProblem> {
    let nodes = &data_type.nodes;
    if nodes.is_empty() || nodes.len() > 4096 {
        return Err(DataTypeProblem::Nodes(nodes.len()));
    }
    build_type(nodes, 0, 1)
}

fn build_type(
    nodes: &[wit::TypeNode],
    idx: usize,
    depth: usize,
) -> Result<DataType, DataTypeProblem> {
    if depth > 32 {
        return Err(DataTypeProblem::TooDeep);
    }
    let child = |child_idx: u32| {
        let child_idx = child_idx as usize;
        if child_idx <= idx || child_idx >= nodes.len() {
            return Err(DataTypeProblem::Reference {
                from: idx,
                to: child_idx,
            });
        }
        build_type(nodes, child_idx, depth + 1)
    };
    Ok(match &nodes[idx] {
        wit::TypeNode::Any => DataType::Any,
        wit::TypeNode::Boolean => DataType::Boolean,
        wit::TypeNode::Integer => DataType::Integer,
        wit::TypeNode::Float => DataType::Float,
        wit::TypeNode::String => DataType::String,
        wit::TypeNode::Enumeration(cases) if cases.is_empty() => {
            return Err(DataTypeProblem::NoCases);
        }
        wit::TypeNode::Enumeration(cases) => DataType::Enum(cases.clone()),
        wit::TypeNode::Array(of) => DataType::Array(Box::new(child(*of)?)),
        wit::TypeNode::Hash(of) => DataType::Hash(Box::new(child(*of)?)),
        wit::TypeNode::OneOf(options) if options.is_empty() => {
            return Err(DataTypeProblem::NoOptions);
        }
        wit::TypeNode::OneOf(options) => DataType::OneOf(
            options
                .iter()
                .map(|option| child(*option))
                .collect::<Result<_, _>>()?,
        ),
        wit::TypeNode::Named(name) => DataType::Named(name.clone()),
    })
}

/// A resource type's name as manifests write it: `user`, `mymod::thing`.
fn is_type_name(name: &str) -> bool {
    name.len() <= 128 && name.split("::").all(is_identifier)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

/// A type schema from `describe`, checked.
/// The most files a type may ask to be watched.
const MAX_WATCHES: usize = 16;
/// The longest such file, before its `{attribute}`s are replaced.
const MAX_WATCH_BYTES: usize = 1024;

/// Whether `watch` is a file a type may ask to be watched: an absolute path (or one that
/// starts with an attribute's value) without `.` or `..`, whose `{name}`s are attributes
/// of the type. Why not, if it is not.
fn check_watch(watch: &str, attributes: &[AttributeSchema]) -> Result<(), String> {
    if watch.len() > MAX_WATCH_BYTES {
        return Err(format!("longer than {MAX_WATCH_BYTES} bytes"));
    }
    if !watch.starts_with('/') && !watch.starts_with('{') {
        return Err("not an absolute path".to_owned());
    }
    let mut literal = String::with_capacity(watch.len());
    let mut rest = watch;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err("a `}` without its `{`".to_owned());
        }
        literal.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return Err("a `{` without its `}`".to_owned());
        };
        let name = &rest[open + 1..open + close];
        if !attributes.iter().any(|attribute| attribute.name == name) {
            return Err(format!("`{{{name}}}` names no attribute of the type"));
        }
        literal.push('x');
        rest = &rest[open + close + 1..];
    }
    literal.push_str(rest);
    if literal
        .split('/')
        .skip(1)
        .any(|part| part.is_empty() || part == "." || part == "..")
        || literal.contains('\0')
    {
        return Err("not a path without `.`, `..`, empty parts or NUL".to_owned());
    }
    Ok(())
}

pub(crate) fn schema_from_wit(schema: &wit::TypeSchema) -> Result<TypeSchema, SchemaError> {
    let type_name = &schema.name;
    if !type_name.split("::").all(is_identifier) {
        return Err(SchemaError::TypeName(type_name.clone()));
    }
    let mut attributes: Vec<AttributeSchema> = Vec::with_capacity(schema.attributes.len());
    for attribute in &schema.attributes {
        let name = &attribute.name;
        let context = |problem: AttributeProblem| SchemaError::Attribute {
            type_name: type_name.clone(),
            attribute: name.clone(),
            problem,
        };
        if !is_identifier(name) {
            return Err(context(AttributeProblem::NotIdentifier));
        }
        if METAPARAMETERS.contains(&name.as_str()) {
            return Err(context(AttributeProblem::Metaparameter));
        }
        if attributes.iter().any(|existing| existing.name == *name) {
            return Err(context(AttributeProblem::DeclaredTwice));
        }
        let data_type = data_type_from_wit(&attribute.data_type)
            .map_err(|problem| context(AttributeProblem::DataType(problem)))?;
        if attribute.max.is_some_and(|max| max < attribute.min) {
            return Err(context(AttributeProblem::MaxBelowMin));
        }
        let default = attribute
            .default
            .as_ref()
            .map(value_from_wit)
            .transpose()
            .map_err(|malformed| context(AttributeProblem::Default(malformed)))?;
        let converted = AttributeSchema {
            name: name.clone(),
            doc: attribute.doc.clone(),
            data_type,
            min: attribute.min,
            max: attribute.max,
            default,
            behaviour: match attribute.behaviour {
                wit::Behaviour::Property => Behaviour::Property,
                wit::Behaviour::Parameter => Behaviour::Parameter,
                wit::Behaviour::Namevar => Behaviour::Namevar,
                wit::Behaviour::ReadOnly => Behaviour::ReadOnly,
                wit::Behaviour::InitOnly => Behaviour::InitOnly,
            },
            sensitive: attribute.sensitive,
            unsettable: attribute.unsettable,
            path_access: match attribute.path_access {
                wit::PathAccess::None => PathAccess::None,
                wit::PathAccess::Read => PathAccess::Read,
                wit::PathAccess::ReadPrivate => PathAccess::ReadPrivate,
                wit::PathAccess::ReadWrite => PathAccess::ReadWrite,
            },
            checks: attribute.checks.clone(),
            containment: None,
            derived: None,
            transient: false,
            refers_to: match &attribute.refers_to {
                Some(referred) if !is_type_name(referred) => {
                    return Err(context(AttributeProblem::RefersTo(referred.clone())));
                }
                referred => referred.clone(),
            },
            home_default: match &attribute.home_default {
                Some(home) => {
                    let normal = home.suffix.starts_with('/')
                        && home
                            .suffix
                            .split('/')
                            .skip(1)
                            .all(|part| !part.is_empty() && part != "." && part != "..");
                    if !normal || !is_identifier(&home.user_attribute) {
                        return Err(context(AttributeProblem::HomeDefault {
                            user_attribute: home.user_attribute.clone(),
                            suffix: home.suffix.clone(),
                        }));
                    }
                    Some(wconverge_catalog::HomeDefault {
                        user_attribute: home.user_attribute.clone(),
                        suffix: home.suffix.clone(),
                    })
                }
                None => None,
            },
        };
        if let Some(default) = &converted.default {
            converted
                .check(default)
                .map_err(|why| context(AttributeProblem::DefaultRefused(why)))?;
        }
        attributes.push(converted);
    }
    let namevars = attributes
        .iter()
        .filter(|attribute| attribute.behaviour == Behaviour::Namevar)
        .count();
    if namevars != 1 {
        return Err(SchemaError::Namevars {
            type_name: type_name.clone(),
            count: namevars,
        });
    }
    let mut context: Vec<RunContext> = Vec::new();
    for wanted in &schema.context {
        let wanted = match wanted {
            wit::RunContext::NodeAttributes => RunContext::NodeAttributes,
            wit::RunContext::Facts => RunContext::Facts,
            wit::RunContext::ManagedBeneath => RunContext::ManagedBeneath,
        };
        if wanted == RunContext::ManagedBeneath
            && attributes.iter().all(|attribute| {
                attribute.behaviour != Behaviour::Namevar
                    || attribute.path_access != PathAccess::ReadWrite
            })
        {
            return Err(SchemaError::ManagedBeneath(type_name.clone()));
        }
        if !context.contains(&wanted) {
            context.push(wanted);
        }
    }
    if schema.watches.len() > MAX_WATCHES {
        return Err(SchemaError::Watch {
            type_name: type_name.clone(),
            watch: schema.watches[MAX_WATCHES].clone(),
            why: format!("a type watches at most {MAX_WATCHES} files"),
        });
    }
    for watch in &schema.watches {
        check_watch(watch, &attributes).map_err(|why| SchemaError::Watch {
            type_name: type_name.clone(),
            watch: crate::convert::truncate(watch),
            why,
        })?;
    }
    if schema.concurrency == wit::Concurrency::PerPath
        && !attributes.iter().any(|attribute| {
            attribute.behaviour == Behaviour::Namevar
                && attribute.path_access == PathAccess::ReadWrite
        })
    {
        return Err(SchemaError::PerPath(type_name.clone()));
    }
    Ok(TypeSchema {
        name: type_name.clone(),
        doc: schema.doc.clone(),
        attributes,
        invariants: schema
            .invariants
            .iter()
            .map(|invariant| Invariant {
                title: invariant.title.clone(),
                source: invariant.source.clone(),
            })
            .collect(),
        refreshable: schema.refreshable,
        batch_state: schema.batch_state,
        concurrency: match schema.concurrency {
            wit::Concurrency::OneAtATime => wconverge_catalog::Concurrency::OneAtATime,
            wit::Concurrency::PerPath => wconverge_catalog::Concurrency::PerPath,
            wit::Concurrency::Any => wconverge_catalog::Concurrency::Any,
        },
        watches: schema.watches.clone(),
        context,
        parent: None,
        is_abstract: false,
        origin: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_refused_for_what_is_wrong_with_it() {
        let attribute = |name: &str, behaviour| wit::AttributeSchema {
            name: name.to_owned(),
            doc: String::new(),
            data_type: wit::DataType {
                nodes: vec![wit::TypeNode::String],
            },
            min: 0,
            max: Some(1),
            default: None,
            behaviour,
            sensitive: false,
            unsettable: false,
            path_access: wit::PathAccess::None,
            checks: Vec::new(),
            refers_to: None,
            home_default: None,
        };
        let schema = |attributes| wit::TypeSchema {
            name: "thing".to_owned(),
            doc: String::new(),
            attributes,
            invariants: Vec::new(),
            refreshable: false,
            context: Vec::new(),
            batch_state: false,
            concurrency: wit::Concurrency::Any,
            watches: Vec::new(),
        };
        let name = || attribute("name", wit::Behaviour::Namevar);
        assert!(schema_from_wit(&schema(vec![name()])).is_ok());
        let refused = |attributes| schema_from_wit(&schema(attributes)).expect_err("refused");
        let problem = |attribute: &str, problem| SchemaError::Attribute {
            type_name: "thing".to_owned(),
            attribute: attribute.to_owned(),
            problem,
        };
        let mut empty_enum = attribute("mode", wit::Behaviour::Property);
        empty_enum.data_type.nodes = vec![wit::TypeNode::Enumeration(Vec::new())];
        let mut bad_default = attribute("size", wit::Behaviour::Property);
        bad_default.default = Some(wit::Value { nodes: Vec::new() });
        let mut below = attribute("list", wit::Behaviour::Property);
        (below.min, below.max) = (2, Some(1));
        for (attributes, error, said) in [
            (
                vec![name(), attribute("Name", wit::Behaviour::Property)],
                problem("Name", AttributeProblem::NotIdentifier),
                "type `thing`, attribute `Name`: not a lowercase identifier",
            ),
            (
                vec![name(), attribute("require", wit::Behaviour::Property)],
                problem("require", AttributeProblem::Metaparameter),
                "type `thing`, attribute `require`: the name is a metaparameter",
            ),
            (
                vec![name(), name()],
                problem("name", AttributeProblem::DeclaredTwice),
                "type `thing`, attribute `name`: declared twice",
            ),
            (
                vec![name(), empty_enum],
                problem("mode", AttributeProblem::DataType(DataTypeProblem::NoCases)),
                "type `thing`, attribute `mode`: an enumeration has no cases",
            ),
            (
                vec![name(), bad_default],
                problem("size", AttributeProblem::Default(Malformed::Empty)),
                "type `thing`, attribute `size`: a value has no nodes",
            ),
            (
                vec![name(), below],
                problem("list", AttributeProblem::MaxBelowMin),
                "type `thing`, attribute `list`: `max` is below `min`",
            ),
            (
                vec![attribute("path", wit::Behaviour::Property)],
                SchemaError::Namevars {
                    type_name: "thing".to_owned(),
                    count: 0,
                },
                "type `thing` declares 0 namevars; a type has exactly one",
            ),
        ] {
            let refused = refused(attributes);
            assert_eq!(refused, error);
            assert_eq!(refused.to_string(), said);
        }
    }

    #[test]
    fn a_type_watches_only_absolute_normal_paths_naming_its_own_attributes() {
        let attributes = [
            AttributeSchema::new("name", wconverge_catalog::DataType::String),
            AttributeSchema::new("user", wconverge_catalog::DataType::String),
        ];
        for good in [
            "/var/lib/dpkg/status",
            "/var/spool/cron/crontabs/{user}",
            "{name}",
            "/etc/{name}.d/{user}.conf",
        ] {
            assert_eq!(check_watch(good, &attributes), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("etc/passwd", "not an absolute path"),
            (
                "/etc/../shadow",
                "not a path without `.`, `..`, empty parts or NUL",
            ),
            (
                "/etc//passwd",
                "not a path without `.`, `..`, empty parts or NUL",
            ),
            ("/etc/{home}", "`{home}` names no attribute of the type"),
            ("/etc/{user", "a `{` without its `}`"),
            ("/etc/user}", "a `}` without its `{`"),
        ] {
            assert_eq!(check_watch(bad, &attributes), Err(why.to_owned()), "{bad}");
        }
        assert!(check_watch(&format!("/{}", "a".repeat(2000)), &attributes).is_err());
    }
}
