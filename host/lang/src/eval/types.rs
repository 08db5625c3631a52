//! Types as data (Puppet's ARM "Puppet Types in the Puppet Language"): the checks and invariants of a
//! type, and instantiating a declared type from a hash.
//!
//! One schema model serves both sides: a type a manifest declares (`type User { ... }`)
//! and a resource type a provider declares through WIT are both a [`TypeSchema`], and
//! their checks and invariants are source text in the manifest language, evaluated here
//! in the restricted language of lazy values (no resources, classes or catalog
//! functions), with a budget.
//!
//! What a check or invariant returns decides (the ARM's table): a string rejects the
//! value with that message; `undef`, `true` (and any other value) accept it; `false`
//! rejects it with the standard message (`Illegal value: ...` for a check, the title or
//! `Illegal invariant` for an invariant).

use crate::eval::value::Val;
use std::collections::HashMap;
use wconverge_catalog::{AttributeSchema, DataType, Invariant, SourceLocation, TypeSchema, Value};

/// What a check or an invariant decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Rejected(String),
}

/// Declared types by name, looked up without regard to case (`MyApp::Config` is
/// referenced as written, but evaluates to a lowercase type value).
#[derive(Debug, Default)]
pub struct Declared<'a> {
    by_name: HashMap<String, &'a TypeSchema>,
}

impl<'a> Declared<'a> {
    pub fn new(types: impl IntoIterator<Item = &'a TypeSchema>) -> Declared<'a> {
        Declared {
            by_name: types
                .into_iter()
                .map(|schema| (schema.name.to_ascii_lowercase(), schema))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&'a TypeSchema> {
        self.by_name
            .get(&name.trim_start_matches("::").to_ascii_lowercase())
            .copied()
    }
}

/// Where messages say the code of `schema` comes from.
fn origin(schema: &TypeSchema) -> String {
    match &schema.origin {
        Some(origin) => format!("type `{}` ({origin})", schema.name),
        None => format!("type `{}`", schema.name),
    }
}

/// A value as a message shows it: sensitive values never.
pub fn shown(value: &Value) -> String {
    if value.is_sensitive() {
        return "[redacted]".to_owned();
    }
    Val::from_catalog(value).to_display()
}

/// The expression that evaluates `code` (a block, a lambda or an expression) with its
/// argument in `$wconverge_argument`.
fn callable(code: &str) -> String {
    let code = code.trim();
    if code.starts_with('|') {
        format!("with($wconverge_argument) {code}")
    } else if code.starts_with('{') {
        format!("with(0) |$wconverge_unused| {code}")
    } else {
        format!("with(0) |$wconverge_unused| {{ {code} }}")
    }
}

fn run(
    code: &str,
    mut variables: Vec<(String, Value)>,
    argument: Value,
    label: &str,
) -> Result<Val, String> {
    variables.push(("wconverge_argument".to_owned(), argument));
    crate::eval::evaluate_code(
        callable(code),
        variables,
        SourceLocation {
            file: label.to_owned(),
            line: 1,
            column: None,
        },
        label,
    )
}

/// Runs the check `code` of `attribute` (of `schema`) on one `value`: `$it` and the
/// attribute's own name are the value; a lambda gets it as its argument.
pub fn check_value(
    schema: &TypeSchema,
    attribute: &AttributeSchema,
    code: &str,
    value: &Value,
) -> Result<Verdict, String> {
    let label = format!("the check of `{}` in {}", attribute.name, origin(schema));
    let variables = vec![
        meta(schema, Some(attribute)),
        ("it".to_owned(), value.clone()),
        (attribute.name.clone(), value.clone()),
    ];
    Ok(match run(code, variables, value.clone(), &label)? {
        Val::Str(message) => Verdict::Rejected(message),
        Val::Bool(false) => Verdict::Rejected(format!(
            "Illegal value: {} is not an acceptable value for {}",
            shown(value),
            attribute.name
        )),
        _ => Verdict::Accepted,
    })
}

/// Runs an invariant of `schema` on an object: every feature is a variable (`undef`
/// when not set); a lambda gets the object as a hash.
pub fn check_invariant(
    schema: &TypeSchema,
    invariant: &Invariant,
    object: &[(String, Value)],
) -> Result<Verdict, String> {
    let label = match &invariant.title {
        Some(title) => format!("the invariant \"{title}\" of {}", origin(schema)),
        None => format!("an invariant of {}", origin(schema)),
    };
    let mut variables = vec![meta(schema, None)];
    variables.extend(features_of(schema, object));
    Ok(
        match run(
            &invariant.source,
            variables,
            Value::Hash(object.to_vec()),
            &label,
        )? {
            Val::Str(message) => Verdict::Rejected(message),
            Val::Bool(false) => Verdict::Rejected(
                invariant
                    .title
                    .clone()
                    .unwrap_or_else(|| "Illegal invariant".to_owned()),
            ),
            _ => Verdict::Accepted,
        },
    )
}

/// `$meta`, the ARM's description of what is checked: `$meta['name']`, the feature's
/// name (for a check), and `$meta['container']['name']`, the type's. A feature named
/// `meta` hides it.
fn meta(schema: &TypeSchema, attribute: Option<&AttributeSchema>) -> (String, Value) {
    let mut entries = Vec::new();
    if let Some(attribute) = attribute {
        entries.push(("name".to_owned(), Value::String(attribute.name.clone())));
    }
    entries.push((
        "container".to_owned(),
        Value::Hash(vec![(
            "name".to_owned(),
            Value::String(schema.name.clone()),
        )]),
    ));
    ("meta".to_owned(), Value::Hash(entries))
}

/// Every feature of `schema` as a variable: its value in `object`, or `undef`.
fn features_of(schema: &TypeSchema, object: &[(String, Value)]) -> Vec<(String, Value)> {
    schema
        .attributes
        .iter()
        .map(|attribute| {
            let value = object
                .iter()
                .find(|(name, _)| *name == attribute.name)
                .map_or(Value::Undef, |(_, value)| value.clone());
            (attribute.name.clone(), value)
        })
        .collect()
}

/// The values of a feature: the elements of an array when it may have several (and is
/// not itself typed as an array), else the value itself.
fn values_of<'v>(attribute: &AttributeSchema, value: &'v Value) -> Vec<&'v Value> {
    match value.unwrap_sensitive() {
        Value::Array(items)
            if attribute.max != Some(1) && !matches!(attribute.data_type, DataType::Array(_)) =>
        {
            items.iter().collect()
        }
        _ => vec![value],
    }
}

/// Runs every check of `attribute` on `value` (on each element when it may have
/// several): what they rejected, and any that could not be evaluated.
pub fn run_checks(schema: &TypeSchema, attribute: &AttributeSchema, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for code in &attribute.checks {
        for item in values_of(attribute, value) {
            match check_value(schema, attribute, code, item) {
                Ok(Verdict::Accepted) => {}
                Ok(Verdict::Rejected(message)) => errors.push(message),
                Err(error) => errors.push(error),
            }
        }
    }
    errors
}

/// Runs every invariant of `schema` on `object`: what they rejected, and any that
/// could not be evaluated.
pub fn run_invariants(schema: &TypeSchema, object: &[(String, Value)]) -> Vec<String> {
    let mut errors = Vec::new();
    for invariant in &schema.invariants {
        match check_invariant(schema, invariant, object) {
            Ok(Verdict::Accepted) => {}
            Ok(Verdict::Rejected(message)) => errors.push(message),
            Err(error) => errors.push(error),
        }
    }
    errors
}

/// Checks one feature's value against its data type, multiplicity and checks, and
/// instantiates the declared types it holds; the value to keep, or why not.
pub fn check_feature(
    schema: &TypeSchema,
    attribute: &AttributeSchema,
    value: &Value,
    declared: &Declared<'_>,
    depth: usize,
) -> Result<Value, Vec<String>> {
    let mut errors = Vec::new();
    let name = &attribute.name;
    let value = match &attribute.data_type {
        DataType::Named(type_name) => {
            let Some(referenced) = declared.get(type_name) else {
                return Err(vec![format!(
                    "`{name}` expects a `{type_name}`, a type no manifest declares"
                )]);
            };
            let contained = attribute.containment != Some(false);
            let one = |item: &Value, errors: &mut Vec<String>| -> Value {
                match item.unwrap_sensitive() {
                    Value::Hash(entries) if contained => {
                        match instantiate_at(referenced, declared, entries, depth + 1) {
                            Ok(instance) => instance,
                            Err(inner) => {
                                errors.extend(inner.into_iter().map(|e| format!("`{name}`: {e}")));
                                item.clone()
                            }
                        }
                    }
                    // A reference that is not contained names its object.
                    Value::String(_) if !contained => item.clone(),
                    other => {
                        errors.push(format!(
                            "`{name}` expects {} `{type_name}`, got {}",
                            if contained {
                                "a hash of the features of a"
                            } else {
                                "the name of a"
                            },
                            other.type_name()
                        ));
                        item.clone()
                    }
                }
            };
            match value.unwrap_sensitive() {
                Value::Array(items) if attribute.max != Some(1) => {
                    let count = items.len();
                    if count < attribute.min as usize {
                        errors.push(format!(
                            "`{name}` expects at least {} values, got {count}",
                            attribute.min
                        ));
                    }
                    if attribute.max.is_some_and(|max| count > max as usize) {
                        errors.push(format!(
                            "`{name}` expects at most {} values, got {count}",
                            attribute.max.unwrap_or_default()
                        ));
                    }
                    Value::Array(items.iter().map(|item| one(item, &mut errors)).collect())
                }
                _ => one(value, &mut errors),
            }
        }
        _ => {
            if let Err(message) = attribute.check(value) {
                return Err(vec![format!("`{name}` {message}")]);
            }
            value.clone()
        }
    };
    errors.extend(
        run_checks(schema, attribute, &value)
            .into_iter()
            .map(|message| format!("`{name}`: {message}")),
    );
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

/// Declared types nest at most this deep in one value.
const MAX_NESTING: usize = 64;

/// Instantiates `schema` from `given` (the ARM's `new`): defaults first, then each
/// given value (unknown keys and derived features refused), checked as it is set; then
/// the required features, the derived ones and the invariants. The object is a hash of
/// its features in declaration order. Every problem is reported, not only the first.
pub fn instantiate(
    schema: &TypeSchema,
    declared: &Declared<'_>,
    given: &[(String, Value)],
) -> Result<Value, Vec<String>> {
    instantiate_at(schema, declared, given, 0)
}

fn instantiate_at(
    schema: &TypeSchema,
    declared: &Declared<'_>,
    given: &[(String, Value)],
    depth: usize,
) -> Result<Value, Vec<String>> {
    if depth > MAX_NESTING {
        return Err(vec![format!(
            "objects nest more than {MAX_NESTING} deep; a containment reference cycles"
        )]);
    }
    if schema.is_abstract {
        return Err(vec![format!(
            "type `{}` is abstract and cannot be instantiated; instantiate a type that \
             inherits it",
            schema.name
        )]);
    }
    let mut errors = Vec::new();
    for (key, _) in given {
        match schema.attribute(key) {
            None => errors.push(format!(
                "type `{}` has no feature `{key}`; its features are: {}",
                schema.name,
                feature_names(schema)
            )),
            Some(attribute) if attribute.derived.is_some() => errors.push(format!(
                "`{key}` is derived (computed from the other features) and cannot be set"
            )),
            Some(_) => {}
        }
        if given.iter().filter(|(other, _)| other == key).count() > 1 {
            errors.push(format!("`{key}` is given twice"));
        }
    }
    let mut object: Vec<(String, Value)> = Vec::new();
    for attribute in &schema.attributes {
        if attribute.derived.is_some() {
            continue;
        }
        let value = match given.iter().find(|(key, _)| *key == attribute.name) {
            Some((_, value)) => Some(value),
            None => attribute.default.as_ref(),
        };
        let Some(value) = value else {
            if attribute.min > 0 {
                errors.push(format!(
                    "`{}` is required (at least {} value{})",
                    attribute.name,
                    attribute.min,
                    if attribute.min == 1 { "" } else { "s" }
                ));
            }
            continue;
        };
        // Empty is "not set", unless the feature is unsettable (the ARM: then empty
        // differs from not set).
        let empty = matches!(value.unwrap_sensitive(), Value::Undef)
            || matches!(value.unwrap_sensitive(), Value::Array(items) if items.is_empty() && attribute.max != Some(1));
        if empty && !attribute.unsettable {
            if attribute.min > 0 {
                errors.push(format!(
                    "`{}` is required and cannot be empty",
                    attribute.name
                ));
            }
            continue;
        }
        if empty {
            object.push((attribute.name.clone(), value.clone()));
            continue;
        }
        match check_feature(schema, attribute, value, declared, depth) {
            Ok(value) => object.push((attribute.name.clone(), value)),
            Err(mut problems) => errors.append(&mut problems),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for attribute in &schema.attributes {
        let Some(code) = &attribute.derived else {
            continue;
        };
        let label = format!(
            "the derived feature `{}` of {}",
            attribute.name,
            origin(schema)
        );
        let variables = features_of(schema, &object)
            .into_iter()
            .filter(|(name, _)| *name != attribute.name)
            .collect();
        let computed = run(code, variables, Value::Hash(object.clone()), &label)
            .and_then(|value| value.to_catalog());
        match computed {
            Ok(Value::Undef) => {}
            Ok(value) => match check_feature(schema, attribute, &value, declared, depth) {
                Ok(value) => object.push((attribute.name.clone(), value)),
                Err(mut problems) => errors.append(&mut problems),
            },
            Err(error) => errors.push(error),
        }
    }
    errors.extend(run_invariants(schema, &object));
    // Transient features are checked and seen by derived features and invariants, but
    // are no part of the object (the ARM: not serialized; the object is what goes into
    // the catalog).
    object.retain(|(name, _)| {
        schema
            .attribute(name)
            .is_none_or(|attribute| !attribute.transient)
    });
    // Declaration order, whatever order the derived ones were computed in.
    object.sort_by_key(|(name, _)| {
        schema
            .attributes
            .iter()
            .position(|attribute| attribute.name == *name)
    });
    if errors.is_empty() {
        Ok(Value::Hash(object))
    } else {
        Err(errors)
    }
}

fn feature_names(schema: &TypeSchema) -> String {
    if schema.attributes.is_empty() {
        return "none".to_owned();
    }
    schema
        .attributes
        .iter()
        .map(|attribute| format!("`{}`", attribute.name))
        .collect::<Vec<_>>()
        .join(", ")
}
