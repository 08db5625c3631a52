//! `wconverge plugins list`, `inspect` and `audit`: what the policy's plugins are, from
//! their summaries (`lock`, `test` and `new` have modules of their own).

use crate::output;
use crate::setup::{RuntimeArgs, Trails, runtime_for};
use anyhow::bail;

/// Every plugin of the policy with its types; exit 1 if one failed to load.
pub(crate) fn list(runtime: &RuntimeArgs, trails: &Trails) -> anyhow::Result<u8> {
    let runtime = runtime_for(runtime, trails)?;
    let summaries = runtime.plugin_summaries();
    let failed = summaries.iter().any(Result::is_err);
    output::plugins_list(&summaries);
    Ok(u8::from(failed))
}

/// One plugin: its world, WIT version, imports and schemas.
pub(crate) fn inspect(name: &str, runtime: &RuntimeArgs, trails: &Trails) -> anyhow::Result<u8> {
    let runtime = runtime_for(runtime, trails)?;
    if runtime.policy().plugin(name).is_none() {
        bail!("the policy has no plugin `{name}`; `wconverge plugins list` lists them");
    }
    match runtime
        .plugin_summaries()
        .into_iter()
        .flatten()
        .find(|summary| summary.name == name)
    {
        Some(summary) => {
            output::plugin_inspect(&summary);
            Ok(0)
        }
        None => {
            // Its load error, as `plugins list` shows it.
            let error = runtime
                .plugin_summaries()
                .into_iter()
                .filter_map(Result::err)
                .find(|error| error.plugin == name)
                .map_or_else(|| "it could not be loaded".to_owned(), |e| e.to_string());
            bail!("{error}")
        }
    }
}

/// Every grant of the policy, with the flags a reviewer must look at twice; exit 1 if a
/// plugin failed to load.
pub(crate) fn audit(runtime: &RuntimeArgs, trails: &Trails) -> anyhow::Result<u8> {
    let runtime = runtime_for(runtime, trails)?;
    let summaries = runtime.plugin_summaries();
    let failed = summaries.iter().any(Result::is_err);
    output::plugins_audit(runtime.policy(), &summaries);
    Ok(u8::from(failed))
}
