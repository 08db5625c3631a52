//! Validation before the run: every resource against its type's schema and its
//! provider's checks, every relationship against the catalog. A catalog with any
//! problem changes nothing.

use crate::graph::{End, Graph};
use crate::guard::{self, Defaults};
use crate::prepared::schema_of;
use crate::prepared::{ENGINE, Prepared, PreparedResource};
use crate::provider_checks::provider_checks;
use crate::redact::Secrets;
use crate::schemas::Schemas;
use crate::{PluginErrorKind, PluginHost};
use std::collections::HashMap;
use wconverge_catalog::DiagnosticCode;
use wconverge_catalog::{
    AttributeSchema, Behaviour, Catalog, Code, DataType, Lazy, NODE_BLOCK, PathAccess, Problem,
    Resource, ResourceRef, TypeSchema, Value,
};

/// `node_block`: Chef's `ruby_block`, in the manifest language. Its lazy `block` runs
/// during the run, in graph order, and may write node attributes for the lazy values of
/// the resources after it. It changes nothing on the machine, so it runs in noop runs
/// too, and never counts as a change.
pub fn node_block_schema() -> TypeSchema {
    let attribute = |name: &str, data_type, behaviour, min, doc: &str| AttributeSchema {
        doc: doc.to_owned(),
        min,
        behaviour,
        ..AttributeSchema::new(name, data_type)
    };
    TypeSchema {
        attributes: vec![
            attribute(
                "name",
                DataType::String,
                Behaviour::Namevar,
                0,
                "A name for the block; the title.",
            ),
            attribute(
                "block",
                DataType::Any,
                Behaviour::Parameter,
                1,
                "`lazy { ... }`: the code, which may write `$node.default[...]` and \
                 `$node.override[...]`.",
            ),
        ],
        ..TypeSchema::new(
            NODE_BLOCK,
            "Runs a lazy block during the run that may write node attributes, for the \
             resources ordered after it (Chef's whyrun-safe ruby_block); changes nothing on \
             the machine.",
        )
    }
}

/// A type, and the provider a resource asked for by `provider`, if any.
type Choice = (String, Option<String>);

/// The namevar of a resource whose type writes the path it names (`file`, `template`).
fn written_path<'r>(schemas: &Schemas, resource: &'r PreparedResource) -> Option<&'r str> {
    let namevar = schema_of(schemas, resource)?
        .namevar()
        .filter(|namevar| namevar.path_access == PathAccess::ReadWrite)?;
    resource.get(&namevar.name)?.as_str()
}

/// The relationships types imply, `(required, requiring)`, as Puppet's autorequire:
/// - a resource that writes a path (its namevar, or another `read-write` path attribute
///   such as an authorized key's `target`, its default below the user's home included)
///   requires the one that writes its nearest written ancestor directory;
/// - an attribute that `refers-to` a type names resources of it, required when the
///   catalog declares them (a file's `owner` names a `user`); one that refers to `file`
///   names a path (a file's `source`, an exec's `cwd` or command), and requires the
///   resource that writes it: the whole value, or its first word when it has several (a
///   command's program).
fn implied_relationships(
    resources: &[PreparedResource],
    schemas: &Schemas,
    in_catalog: usize,
    host: &dyn PluginHost,
) -> Vec<(End, End)> {
    // A resource by its catalog index when every resource of the catalog was prepared
    // (then the indices are the same); by its reference otherwise (the graph is built
    // only to report its own problems then).
    let aligned = resources.len() == in_catalog;
    let end = |idx: usize| {
        if aligned {
            End::At(idx)
        } else {
            End::Named(resources[idx].reference.clone())
        }
    };
    let paths: Vec<Option<&str>> = resources
        .iter()
        .map(|resource| written_path(schemas, resource))
        .collect();
    let mut written: HashMap<&str, usize> = HashMap::with_capacity(resources.len());
    written.extend(
        paths
            .iter()
            .enumerate()
            .filter_map(|(idx, path)| Some((without_trailing_slash((*path)?), idx))),
    );
    // The homes the catalog's users declare, made when a default below a home needs one.
    let homes: std::cell::OnceCell<HashMap<&str, &str>> = std::cell::OnceCell::new();
    let home_of = |user: &str| -> Option<String> {
        let declared = homes.get_or_init(|| {
            resources
                .iter()
                .filter(|resource| resource.type_name == "user")
                .filter_map(|resource| {
                    let name = match resource.get("name").and_then(Value::as_str) {
                        Some(name) => name,
                        None => resource.title.as_str(),
                    };
                    Some((name, resource.get("home")?.as_str()?))
                })
                .collect()
        });
        match declared.get(user) {
            Some(home) => Some((*home).to_owned()),
            None => host.home_of(user),
        }
    };
    // The nearest written ancestor of a path is its directory's: looked up once for the
    // files of one directory, which come one after another.
    let mut last: Option<(&str, Option<usize>)> = None;
    let mut implied = Vec::new();
    for (idx, (resource, path)) in resources.iter().zip(&paths).enumerate() {
        if let Some(path) = path {
            let trimmed = path.trim_end_matches('/');
            let dir = match trimmed.rfind('/') {
                Some(0) => "/",
                Some(slash) => &trimmed[..slash],
                None => "",
            };
            let parent = match last {
                Some((seen, parent)) if seen == dir && !dir.is_empty() => parent,
                _ => {
                    let parent = nearest_written(&written, trimmed);
                    last = Some((dir, parent));
                    parent
                }
            };
            if let Some(parent) = parent {
                implied.push((end(parent), end(idx)));
            }
        }
        let Some(schema) = schema_of(schemas, resource) else {
            continue;
        };
        for attribute in &schema.attributes {
            if attribute.path_access == PathAccess::ReadWrite
                && attribute.behaviour != Behaviour::Namevar
            {
                let value = match resource.get(&attribute.name) {
                    Some(value) => value.unwrap_sensitive().as_str().map(str::to_owned),
                    None => attribute.home_default.as_ref().and_then(|home| {
                        let user = resource.get(&home.user_attribute)?.as_str()?;
                        let dir = home_of(user)?;
                        Some(home.below(&dir))
                    }),
                };
                if let Some(parent) = value
                    .as_deref()
                    .and_then(|path| nearest_written(&written, path.trim_end_matches('/')))
                    .filter(|parent| *parent != idx)
                {
                    implied.push((end(parent), end(idx)));
                }
            }
            let (Some(referred), Some(value)) =
                (&attribute.refers_to, resource.get(&attribute.name))
            else {
                continue;
            };
            let names: Vec<&str> = match value.unwrap_sensitive() {
                Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                other => other.as_str().into_iter().collect(),
            };
            for name in names {
                if referred == "file" {
                    let first_word = name.split_whitespace().next().filter(|word| *word != name);
                    if let Some(&writer) = [Some(name), first_word]
                        .into_iter()
                        .flatten()
                        .map(without_trailing_slash)
                        .find_map(|path| written.get(path))
                        .filter(|writer| **writer != idx)
                    {
                        implied.push((end(writer), end(idx)));
                    }
                    continue;
                }
                implied.push((End::Named(ResourceRef::new(referred, name)), end(idx)));
            }
        }
    }
    implied
}

/// `path` without its trailing slashes; `/` stays `/`.
pub(crate) fn without_trailing_slash(path: &str) -> &str {
    match path.trim_end_matches('/') {
        "" if path.starts_with('/') => "/",
        trimmed => trimmed,
    }
}

/// The resource that writes the nearest ancestor directory of `path` (its trailing
/// slashes trimmed), if one does.
fn nearest_written(written: &HashMap<&str, usize>, path: &str) -> Option<usize> {
    let mut ancestor = path;
    while let Some(slash) = ancestor.rfind('/') {
        ancestor = if slash == 0 { "/" } else { &ancestor[..slash] };
        if let Some(&parent) = written.get(ancestor) {
            return Some(parent);
        }
        if ancestor == "/" {
            break;
        }
    }
    None
}

/// Checks the catalog against the schemas the host provides and builds the graph.
/// Returns every problem found, not only the first.
pub fn prepare(
    catalog: &Catalog,
    host: &(dyn PluginHost + Sync),
    code: &'static dyn Code,
) -> Result<Prepared, Vec<Problem>> {
    checked(catalog)?;
    prepare_checked(catalog, None, host, code)
}

/// The catalog's own problems, if it has any.
fn checked(catalog: &Catalog) -> Result<(), Vec<Problem>> {
    let problems = catalog.check();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// As [`prepare`], taking the attribute values out of `catalog` rather than copying them:
/// what a run does, which needs the catalog for nothing but its resources' names,
/// places and relationships after (a copy of every value is the catalog's size again,
/// in fresh memory). Left without attribute values, whatever it returns.
pub fn prepare_taking_values(
    catalog: &mut Catalog,
    host: &(dyn PluginHost + Sync),
    code: &'static dyn Code,
) -> Result<Prepared, Vec<Problem>> {
    checked(catalog)?;
    let values = catalog
        .resources
        .iter_mut()
        .map(|resource| std::mem::take(&mut resource.attributes))
        .collect();
    prepare_checked(catalog, Some(values), host, code)
}

/// [`prepare`] of a catalog that passed its own checks; the attribute values of each
/// resource in `values` when they were taken out of it.
fn prepare_checked(
    catalog: &Catalog,
    values: Option<Vec<wconverge_catalog::Attributes>>,
    host: &(dyn PluginHost + Sync),
    code: &'static dyn Code,
) -> Result<Prepared, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut values = values.map(Vec::into_iter);
    let mut schemas = Schemas::default();
    // The provider each type gets, for each `provider` a resource asks for; `None` when
    // there is none, reported once, at the first resource that needed it.
    // A few types a catalog: looked up by borrowing, not by a key made for each resource.
    let mut chosen: Vec<(Choice, Option<String>)> = Vec::new();
    let mut resources = Vec::with_capacity(catalog.resources.len());
    // Resources for their providers' checks: where their problems go in `problems`,
    // and which.
    let mut unchecked: Vec<(usize, usize)> = Vec::new();
    let mut defaults = Defaults::default();
    // The plugins the run is known to call (see `expect_calls`).
    let mut expected: Vec<String> = Vec::new();
    for resource in &catalog.resources {
        let given = match &mut values {
            Some(values) => std::borrow::Cow::Owned(values.next().unwrap_or_default()),
            None => std::borrow::Cow::Borrowed(&resource.attributes),
        };
        let type_name = &resource.type_name;
        let requested = resource.metaparams.provider.as_deref();
        let known = chosen
            .iter()
            .find(|((chosen_type, asked), _)| {
                chosen_type == type_name && asked.as_deref() == requested
            })
            .map(|(_, provider)| provider.clone());
        let provider = match known {
            Some(provider) => provider,
            None => {
                let provider = if type_name == NODE_BLOCK {
                    schemas.keep(type_name, ENGINE, node_block_schema);
                    match requested {
                        None | Some(ENGINE) => Some(ENGINE.to_owned()),
                        Some(other) => {
                            problems.push(Problem::of(
                            resource,
                            DiagnosticCode::ProviderUnavailable,
                            format!(
                                "`provider => '{other}'`: `node_block` is built into wconverge; \
                                 its only provider is `{ENGINE}`"
                            ),
                        ));
                            None
                        }
                    }
                } else {
                    match host.provider(type_name, requested) {
                        Ok(Some(choice)) => {
                            schemas.keep(type_name, &choice.plugin, || choice.schema);
                            Some(choice.plugin)
                        }
                        Ok(None) => {
                            problems.push(
                                Problem::of(
                                    resource,
                                    DiagnosticCode::NoProvider,
                                    format!("unknown type `{type_name}`; no plugin provides it"),
                                )
                                .with_help(
                                    "check the spelling, or add a plugin that provides it to the \
                                 policy; `wconverge types` lists the types available",
                                ),
                            );
                            None
                        }
                        Err(error) => {
                            problems.push(
                                Problem::of(
                                    resource,
                                    DiagnosticCode::ProviderUnavailable,
                                    error.to_string(),
                                )
                                .with_help(match error.kind {
                                    PluginErrorKind::Load => {
                                        "fix the plugin or its entry in the policy".to_owned()
                                    }
                                    PluginErrorKind::Unsuitable if requested.is_some() => format!(
                                        "`wconverge types {type_name}` shows its providers and \
                                     where each is suitable; name a suitable one, or remove \
                                     `provider` to use the first that suits this machine"
                                    ),
                                    PluginErrorKind::Unsuitable => format!(
                                        "`wconverge types {type_name}` shows its providers and \
                                     where each is suitable, and `wconverge facts` the facts \
                                     they are judged on; name one with `provider`, or add one \
                                     that suits this machine to the policy"
                                    ),
                                    _ => "report this to the plugin's author".to_owned(),
                                }),
                            );
                            None
                        }
                    }
                };
                chosen.push((
                    (type_name.clone(), requested.map(str::to_owned)),
                    provider.clone(),
                ));
                provider
            }
        };
        let Some(provider) = provider else {
            continue;
        };
        let schema = schemas
            .get(type_name, &provider)
            .expect("a provider is chosen with its schema");
        match prepare_resource(resource, given, schema, provider, code, &catalog.types) {
            Ok(mut prepared) => {
                if let Some(text) = &resource.metaparams.requires {
                    match wconverge_requires::Program::parse(text) {
                        Ok(program) => prepared.requirement = Some(program),
                        Err(errors) => problems.extend(errors.into_iter().map(|error| {
                            let mut problem = Problem::of(
                                resource,
                                DiagnosticCode::RequiresProgram,
                                format!(
                                    "`requires` line {}, column {}: {}",
                                    error.line, error.column, error.message
                                ),
                            );
                            problem.help = error.help;
                            problem
                        })),
                    }
                }
                match guard::prepare(resource, &prepared, host, code, &mut defaults) {
                    Ok((guards, secrets, reads_facts)) => {
                        prepared.guards = guards;
                        prepared.reads_facts |= reads_facts;
                        prepared.secrets.extend(secrets);
                        for guard in &mut prepared.guards {
                            if let crate::GuardBody::Script(script) = &mut guard.body {
                                script.subject = format!("guard of {}", prepared.reference);
                                script.secrets = prepared.secrets.clone();
                                expect_calls(host, &mut expected, &script.plugin);
                            }
                        }
                    }
                    Err(mut found) => problems.append(&mut found),
                }
                if prepared.provider == ENGINE {
                    if !prepared.lazy.iter().any(|(name, _)| name == "block") {
                        problems.push(
                            Problem::of(
                                resource,
                                DiagnosticCode::LazyAttribute,
                                "`block` must be a lazy value",
                            )
                            .with_help(
                                "write `block => lazy { $node.default['key'] = value }`: the \
                                 block runs during the run",
                            ),
                        );
                    }
                    resources.push(prepared);
                    continue;
                }
                // Provider checks run for every resource that passed its schema, so one
                // `validate` reports everything wrong at once; many resources per call,
                // their problems in catalog order. A resource with lazy values is
                // checked once they are resolved: before, the provider would miss what
                // they will set.
                if prepared.lazy.is_empty() {
                    unchecked.push((problems.len(), resources.len()));
                }
                // Its state is read by a call of its own during the run.
                if !prepared.lazy.is_empty() || !schema.batch_state {
                    expect_calls(host, &mut expected, &prepared.provider);
                }
                resources.push(prepared);
            }
            Err(mut found) => problems.append(&mut found),
        }
    }
    // The catalog's own checks need no plugin: made while the providers check.
    let (mut problems, (graph, same)) = provider_checks(
        problems,
        &resources,
        &unchecked,
        host,
        (
            || {
                Graph::build(
                    catalog,
                    &implied_relationships(&resources, &schemas, catalog.resources.len(), host),
                )
            },
            || same_namevar(&resources, &schemas, host),
        ),
    );
    problems.extend(same);
    let graph = match graph {
        Ok(graph) if problems.is_empty() => graph,
        Ok(_) => return Err(problems),
        Err(mut found) => {
            problems.append(&mut found);
            return Err(problems);
        }
    };
    Ok(Prepared {
        node: catalog.node.clone(),
        node_attributes: catalog.node_attributes.clone(),
        types: catalog.types.clone(),
        graph,
        written_paths: {
            let mut written: Vec<String> = resources
                .iter()
                .filter_map(|resource| written_path(&schemas, resource).map(str::to_owned))
                .collect();
            written.sort();
            written
        },
        resources,
        schemas,
        code,
    })
}

/// Tells the host, once per plugin, that the run will call `plugin`.
fn expect_calls(host: &dyn PluginHost, expected: &mut Vec<String>, plugin: &str) {
    if !expected.iter().any(|known| known == plugin) {
        expected.push(plugin.to_owned());
        host.expect_calls(plugin);
    }
}

/// Two resources of one type with the same path as namevar (`file { 'a': path => '/x' }`
/// and `file { '/x': }`) would manage one thing twice, each undoing the other; so would
/// two whose paths differ but lead to one file through a symlinked directory, which the
/// host resolves as the run's grants will. Only namevars that are paths count: two
/// `exec`s may run the same command, as in Puppet.
fn same_namevar(
    resources: &[PreparedResource],
    schemas: &Schemas,
    host: &dyn PluginHost,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    // Sized once: a map that grows rehashes into fresh memory each time it doubles.
    let mut seen: HashMap<(&str, String), &PreparedResource> =
        HashMap::with_capacity(resources.len());
    for resource in resources {
        let Some(namevar) = schema_of(schemas, resource)
            .and_then(TypeSchema::namevar)
            .filter(|namevar| namevar.path_access != PathAccess::None)
        else {
            continue;
        };
        let Some(value) = resource.get(&namevar.name).and_then(Value::as_str) else {
            continue;
        };
        // Types that write the path they name (`file`, `template`) share one space: two
        // of them at one path fight whatever their types.
        let space = if namevar.path_access == PathAccess::ReadWrite {
            ""
        } else {
            resource.type_name.as_str()
        };
        // Its path with symlinks followed, where it can be resolved.
        let key = (
            space,
            host.resolve_path(value).unwrap_or_else(|| value.to_owned()),
        );
        match seen.get(&key) {
            Some(first) => {
                let first_at = first
                    .source
                    .as_ref()
                    .map_or_else(String::new, |location| format!(" (declared at {location})"));
                let via = if key.1 == value {
                    String::new()
                } else {
                    format!(": both are `{}` once symlinks are followed", key.1)
                };
                problems.push(
                    Problem {
                        code: DiagnosticCode::SameNamevar,
                        resource: Some(resource.reference.clone()),
                        location: resource.source.clone(),
                        message: format!(
                            "manages the same {} `{value}` as {}{first_at}{via}",
                            namevar.name, first.reference
                        ),
                        help: None,
                    }
                    .with_help("keep one of the two: two resources for one thing undo each other"),
                );
            }
            None => {
                seen.insert(key, resource);
            }
        }
    }
    problems
}

/// Whether `value` fits `attribute`: its data type and multiplicity, and the checks the
/// type declares (a provider's, in the manifest language, evaluated here). A value of a
/// declared type (`DataType::Named`) is instantiated as one: `Some` is the object, with
/// its defaults. Each error is a whole message, the value shown unless it is secret.
pub(crate) fn conform(
    schema: &TypeSchema,
    attribute: &AttributeSchema,
    value: &Value,
    code: &dyn Code,
    declared: &[TypeSchema],
) -> Result<Option<Value>, Vec<String>> {
    let name = &attribute.name;
    let secret = value.is_sensitive() || attribute.sensitive;
    let mut secrets = Vec::new();
    value.collect_secrets(attribute.sensitive, &mut secrets);
    let scrub = Secrets::new(secrets);
    if matches!(attribute.data_type, DataType::Named(_)) {
        return code
            .instantiate(schema, attribute, value, declared)
            .map(Some)
            .map_err(|messages| {
                messages
                    .into_iter()
                    .map(|message| format!("attribute {}", scrub.scrub(&message)))
                    .collect()
            });
    }
    if let Err(message) = attribute.check(value) {
        let shown = if secret {
            String::new()
        } else {
            format!(" (the value is {})", value.display())
        };
        return Err(vec![format!("attribute `{name}` {message}{shown}")]);
    }
    let rejected = code.run_checks(schema, attribute, value);
    if rejected.is_empty() {
        return Ok(None);
    }
    Err(rejected
        .into_iter()
        .map(|message| format!("attribute `{name}`: {}", scrub.scrub(&message)))
        .collect())
}

/// What the invariants of `schema` reject in a resource's attributes.
pub(crate) fn invariants(
    code: &dyn Code,
    schema: &TypeSchema,
    attributes: &[(String, Value)],
) -> Vec<String> {
    if schema.invariants.is_empty() {
        return Vec::new();
    }
    code.run_invariants(schema, attributes)
        .into_iter()
        .map(|message| format!("`{}`: {message}", schema.name))
        .collect()
}

fn prepare_resource(
    resource: &Resource,
    given: std::borrow::Cow<'_, wconverge_catalog::Attributes>,
    schema: &TypeSchema,
    provider: String,
    code: &dyn Code,
    declared: &[TypeSchema],
) -> Result<PreparedResource, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut reads_facts = false;
    let mut lazy_values: Vec<(String, Lazy)> = Vec::new();
    // Values of declared types, as instantiated (their defaults filled in).
    let mut instantiated: Vec<(String, Value)> = Vec::new();
    for (name, value) in given.iter() {
        let Some(attribute) = schema.attribute(name) else {
            let known: Vec<&str> = schema
                .attributes
                .iter()
                .filter(|attribute| attribute.behaviour != Behaviour::ReadOnly)
                .map(|attribute| attribute.name.as_str())
                .collect();
            problems.push(
                Problem::of(
                    resource,
                    DiagnosticCode::UnknownAttribute,
                    format!("`{}` has no attribute `{name}`", schema.name),
                )
                .with_help(format!(
                    "its attributes with provider `{provider}` are: {}",
                    known.join(", ")
                )),
            );
            continue;
        };
        if matches!(value, Value::Undef) {
            continue;
        }
        if attribute.behaviour == Behaviour::ReadOnly {
            problems.push(
                Problem::of(
                    resource,
                    DiagnosticCode::ReadOnlyAttribute,
                    format!("attribute `{name}` is read-only"),
                )
                .with_help("remove it; the provider reports it, a manifest cannot set it"),
            );
            continue;
        }
        if Lazy::within(value) && attribute.behaviour == Behaviour::Namevar {
            problems.push(
                Problem::of(
                    resource,
                    DiagnosticCode::LazyAttribute,
                    format!("`{name}` names the resource and cannot be lazy"),
                )
                .with_help("a namevar is known when the catalog is compiled; compute it there"),
            );
            continue;
        }
        if Lazy::within(value) {
            match Lazy::from_value(value) {
                Some(Ok(lazy)) => match code.check_lazy(&lazy) {
                    Ok(used) => {
                        reads_facts |= used.reads_facts;
                        lazy_values.push((name.to_owned(), lazy));
                    }
                    Err(message) => {
                        problems.push(Problem::of(
                            resource,
                            DiagnosticCode::LazyAttribute,
                            format!("attribute `{name}`: {message}"),
                        ));
                    }
                },
                Some(Err(message)) => problems.push(Problem::of(
                    resource,
                    DiagnosticCode::LazyAttribute,
                    format!("attribute `{name}` holds a malformed lazy value: {message}"),
                )),
                None => problems.push(
                    Problem::of(
                        resource,
                        DiagnosticCode::LazyAttribute,
                        format!("attribute `{name}` holds a lazy value inside another value"),
                    )
                    .with_help(
                        "make the whole value lazy: `lazy { [$a, $b] }`, or `lazy { \
                         Sensitive(...) }` for a sensitive one",
                    ),
                ),
            }
            continue;
        }
        match conform(schema, attribute, value, code, declared) {
            Ok(Some(instance)) => instantiated.push((name.to_owned(), instance)),
            Ok(None) => {}
            Err(messages) => problems.extend(
                messages
                    .into_iter()
                    .map(|message| Problem::of(resource, DiagnosticCode::AttributeValue, message)),
            ),
        }
    }
    let mut attributes = Vec::with_capacity(schema.attributes.len());
    let mut secrets = Vec::new();
    // Values taken out of the catalog are moved, not copied.
    let mut given = given;
    let mut owned = match &mut given {
        std::borrow::Cow::Owned(values) => Some(&mut values.0),
        std::borrow::Cow::Borrowed(_) => None,
    };
    for attribute in &schema.attributes {
        if lazy_values.iter().any(|(name, _)| *name == attribute.name) {
            continue;
        }
        let instance = instantiated
            .iter_mut()
            .find(|(name, _)| *name == attribute.name)
            .map(|(_, instance)| std::mem::replace(instance, Value::Undef));
        let value = match &mut owned {
            Some(values) => values
                .iter_mut()
                .find(|(name, value)| *name == attribute.name && !matches!(value, Value::Undef))
                .map(|(_, value)| std::mem::replace(value, Value::Undef)),
            None => resource
                .attributes
                .get(&attribute.name)
                .filter(|value| !matches!(value, Value::Undef))
                .cloned(),
        };
        let value = match value {
            Some(value) => instance.unwrap_or(value),
            None if attribute.behaviour == Behaviour::Namevar => {
                Value::String(resource.title.clone())
            }
            None => match &attribute.default {
                Some(default) => default.clone(),
                None => {
                    if attribute.required() {
                        problems.push(
                            Problem::of(
                                resource,
                                DiagnosticCode::RequiredAttribute,
                                format!("attribute `{}` is required", attribute.name),
                            )
                            .with_help(format!("set `{}`: {}", attribute.name, attribute.doc)),
                        );
                    }
                    continue;
                }
            },
        };
        value.collect_secrets(attribute.sensitive, &mut secrets);
        let value = if attribute.sensitive && !value.is_sensitive() {
            Value::Sensitive(Box::new(value))
        } else {
            value
        };
        attributes.push((attribute.name.clone(), value));
    }
    // Room was made for every attribute of the type; a resource sets a few, and 5,000
    // of them would keep the rest (a file's: 1 KiB each) in fresh memory for the run.
    attributes.shrink_to_fit();
    // Invariants see every attribute, so they wait for the lazy ones (see
    // `run::resolve_lazy`).
    if problems.is_empty() && lazy_values.is_empty() {
        let scrub = Secrets::new(secrets.clone());
        problems.extend(
            invariants(code, schema, &attributes)
                .into_iter()
                .map(|message| {
                    Problem::of(resource, DiagnosticCode::Invariant, scrub.scrub(&message))
                }),
        );
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(PreparedResource {
        reference: resource.reference(),
        type_name: resource.type_name.clone(),
        provider,
        title: resource.title.clone(),
        attributes,
        source: resource.source.clone(),
        exported_by: resource.exported_by.clone(),
        noop: resource.metaparams.noop,
        guards: Vec::new(),
        requirement: None,
        lazy: lazy_values,
        context: Vec::new(),
        reads_facts,
        secrets: Secrets::new(secrets),
    })
}
