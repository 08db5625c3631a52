//! `wconverge types [TYPE] [--provider NAME] [--manifest FILE...]`: the types the
//! policy's plugins provide (and the engine's own, and those manifests declare), each
//! with its providers, their schemas and where each is suitable.

use crate::catalog::{InputArgs, Publish, load, module_path};
use crate::setup::{RuntimeArgs, Trails, runtime_for};
use crate::{fleet, output};
use anyhow::{Context, bail};
use std::path::PathBuf;
use wconverge_runtime::Suitability;

/// Lists the types, or shows one with its providers; exit 1 if a plugin failed to load.
pub(crate) fn types(
    type_name: Option<String>,
    provider: Option<String>,
    manifests: Vec<PathBuf>,
    runtime: &RuntimeArgs,
    trails: &Trails,
) -> anyhow::Result<u8> {
    let runtime = runtime_for(runtime, trails)?;
    let mut failed = false;
    let declared = if manifests.is_empty() {
        Vec::new()
    } else {
        let input = InputArgs {
            files: manifests,
            node: None,
            deny_warnings: false,
            modulepath: None,
            execute: None,
        };
        match load(
            &input,
            &runtime,
            &module_path(&input),
            &fleet::Fleet::none(),
            (Publish::No, None),
        )? {
            Some(loaded) => loaded.catalog.types,
            None => return Ok(1),
        }
    };
    // The types built into the engine, as if from a plugin of their own.
    let mut summaries = vec![wconverge_runtime::PluginSummary {
        name: wconverge_engine::ENGINE.to_owned(),
        source: "builtin".to_owned(),
        sha256: String::new(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        imports: Vec::new(),
        types: vec![wconverge_engine::node_block_schema()],
        kind: wconverge_runtime::PluginKind::Engine,
        inherits: Vec::new(),
        default_on: Vec::new(),
        requires: None,
    }];
    for summary in runtime.plugin_summaries() {
        match summary {
            Ok(summary) => summaries.push(summary),
            Err(error) => {
                output::error(&error.to_string());
                failed = true;
            }
        }
    }
    // Each type with its providers, in the policy's order. Facts are gathered
    // only if a provider has a requirement.
    let mut types: std::collections::BTreeMap<&str, Vec<output::TypeProvider>> =
        std::collections::BTreeMap::new();
    for summary in &summaries {
        let suitability = match &summary.requires {
            None => Suitability::Everywhere,
            Some(_) => runtime
                .plugin_suitability(&summary.name)
                .unwrap_or_else(|error| Suitability::Unknown(error.to_string())),
        };
        for schema in &summary.types {
            types
                .entry(&schema.name)
                .or_default()
                .push(output::TypeProvider {
                    plugin: summary,
                    schema,
                    suitability: suitability.clone(),
                });
        }
    }
    match type_name {
        None => output::types_list(&types, &declared),
        Some(name)
            if provider.is_none()
                && !types.contains_key(name.as_str())
                && let Some(schema) = declared
                    .iter()
                    .find(|schema| schema.name.eq_ignore_ascii_case(&name)) =>
        {
            output::declared_type_detail(schema);
        }
        Some(name) => {
            let Some(providers) = types.get(name.as_str()) else {
                bail!(
                    "no plugin of the policy provides type `{name}`, and no manifest \
                     given with --manifest declares it; `wconverge types` lists them"
                );
            };
            let shown = match &provider {
                Some(wanted) => providers
                    .iter()
                    .find(|candidate| candidate.plugin.name == *wanted)
                    .with_context(|| {
                        format!(
                            "no plugin named `{wanted}` provides type `{name}`; its \
                             providers are: {}",
                            providers
                                .iter()
                                .map(|candidate| candidate.plugin.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })?,
                None => providers
                    .iter()
                    .find(|candidate| candidate.suitability.is_suitable())
                    .unwrap_or(&providers[0]),
            };
            output::type_detail(shown, providers);
        }
    }
    Ok(u8::from(failed))
}
