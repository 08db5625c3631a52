//! `wconverge resource TYPE [NAME...]`, as `puppet resource`: the current state of
//! resources on this machine, read through the same sandboxed providers a run uses and
//! printed as manifest code that, applied, changes nothing. Without a name, the
//! resources the facts list under the type's name (`user`, `group`, `package`).

use crate::catalog::{Loaded, prepare};
use crate::setup::{RuntimeArgs, Trails, runtime_for};
use crate::{ReportFormat, literal, output};
use anyhow::bail;
use wconverge_catalog::Behaviour;
use wconverge_catalog::{Catalog, Value};
use wconverge_engine::{PluginHost, Prepared, PreparedResource};

/// At most this many resources are read at once.
const MAX_RESOURCES: usize = 10_000;

/// What `wconverge resource` is given.
#[derive(clap::Args)]
pub(crate) struct ResourceArgs {
    /// The resource type (`user`, `package`, `file`, `service`...).
    #[arg(value_name = "TYPE")]
    pub(crate) type_name: String,
    /// The resources' titles (a user's name, a file's path); none: every resource of the
    /// type that the facts list (`user`, `group`, `package`).
    #[arg(value_name = "NAME")]
    pub(crate) names: Vec<String>,
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub(crate) format: ReportFormat,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

/// `wconverge resource`: 0 when every resource was read, 1 otherwise.
pub(crate) fn resource(args: ResourceArgs, trails: &Trails) -> anyhow::Result<u8> {
    let ResourceArgs {
        type_name,
        mut names,
        format,
        runtime,
    } = args;
    let runtime = runtime_for(&runtime, trails)?;
    if names.is_empty() {
        names = listed_names(&runtime, &type_name)?;
    }
    if names.len() > MAX_RESOURCES {
        bail!(
            "{} resources of type `{type_name}`, more than {MAX_RESOURCES} (the most read at \
             once); name the ones to read",
            names.len()
        );
    }
    let catalog = Catalog {
        resources: names
            .iter()
            .map(|name| wconverge_catalog::Resource {
                type_name: type_name.to_ascii_lowercase(),
                title: name.clone(),
                attributes: Default::default(),
                metaparams: Default::default(),
                source: None,
                exported_by: None,
            })
            .collect(),
        ..Catalog::default()
    };
    let loaded = Loaded {
        catalog,
        sources: Vec::new(),
        facts_ms: 0.0,
    };
    let Some(prepared) = prepare(&loaded, &runtime, Vec::new())? else {
        return Ok(1);
    };
    let resources: Vec<&PreparedResource> = prepared.resources.iter().collect();
    // Read in one call where the type reads its states in batches (Puppet's prefetch),
    // else one by one.
    let batch = resources
        .first()
        .and_then(|first| prepared.schema(first))
        .is_some_and(|schema| schema.batch_state);
    let checked: Vec<Result<wconverge_engine::Checked, String>> = if batch {
        match runtime.check(&resources).outcome {
            Ok(checked) => checked
                .into_iter()
                .map(|result| result.map_err(|failure| failure.to_string()))
                .collect(),
            Err(error) => bail!("{error}"),
        }
    } else {
        resources
            .iter()
            .map(|resource| {
                runtime
                    .plan(resource, None)
                    .outcome
                    .map_err(|error| error.to_string())
            })
            .collect()
    };
    let mut code = String::new();
    let mut json = Vec::new();
    let mut failed = false;
    for (resource, result) in resources.iter().zip(checked) {
        match result {
            Ok(checked) => {
                let attributes = shown(&prepared, resource, checked.state);
                code.push_str(&as_code(resource, &attributes));
                json.push(serde_json::json!({
                    "type": resource.type_name,
                    "title": resource.title,
                    "attributes": Value::Hash(attributes),
                }));
            }
            Err(why) => {
                failed = true;
                output::error(&format!("{}: {why}", resource.reference));
            }
        }
    }
    match format {
        ReportFormat::Human => output::text(&code),
        ReportFormat::Json => output::json(&json),
    }
    Ok(u8::from(failed))
}

/// The names the facts list for `type_name`: the `name` of each record of the fact
/// group of that name.
fn listed_names(
    runtime: &wconverge_runtime::Runtime,
    type_name: &str,
) -> anyhow::Result<Vec<String>> {
    let (groups, errors) = runtime.gather_facts();
    let Some(records) = groups.get(type_name) else {
        for error in &errors {
            output::warning(&error.to_string());
        }
        bail!(
            "no fact lists the resources of type `{type_name}`; name the ones to read: \
             `wconverge resource {type_name} NAME`"
        );
    };
    let mut names: Vec<String> = records
        .iter()
        .filter_map(|record| {
            record
                .iter()
                .find(|(key, _)| key == "name")
                .map(|(_, value)| value.clone())
        })
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// What the provider read that a manifest can set: the type's properties (not its
/// parameters, its namevar, what it only reports, or anything sensitive), in the
/// schema's order.
fn shown(
    prepared: &Prepared,
    resource: &PreparedResource,
    state: Vec<(String, Value)>,
) -> Vec<(String, Value)> {
    let Some(schema) = prepared.schema(resource) else {
        return Vec::new();
    };
    schema
        .attributes
        .iter()
        .filter(|attribute| {
            matches!(
                attribute.behaviour,
                Behaviour::Property | Behaviour::InitOnly
            ) && !attribute.sensitive
        })
        .filter_map(|attribute| {
            let (_, value) = state.iter().find(|(name, _)| *name == attribute.name)?;
            (!matches!(value, Value::Undef | Value::Sensitive(_)))
                .then(|| (attribute.name.clone(), value.clone()))
        })
        .collect()
}

/// `type { 'title':\n  attribute => value,\n}`, attributes aligned as Puppet prints them.
fn as_code(resource: &PreparedResource, attributes: &[(String, Value)]) -> String {
    let width = attributes
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    let mut code = format!(
        "{} {{ {}:\n",
        resource.type_name,
        literal::string(&resource.title)
    );
    for (name, value) in attributes {
        code.push_str(&format!(
            "  {name:<width$} => {},\n",
            literal::value(value, 2)
        ));
    }
    code.push_str("}\n");
    code
}
