//! `wconverge plugins test PLUGIN.wasm --policy FILE MANIFEST`: a plugin author's
//! idempotence check, as Test Kitchen's converge-twice and Terraform's acceptance
//! harness give theirs. The manifest is applied in a throwaway root (every directory
//! the policy grants read-write, and every read-write path a resource names, rebased
//! below a temporary directory), then applied again, which must change nothing, then
//! run with `--noop`, which must plan nothing.
//!
//! The plugin under test is loaded from PLUGIN.wasm, unpinned (its policy entry,
//! named by the file's stem, gives its grants). Reads outside the read-write grants see
//! the machine as the policy allows. A plugin the manifest uses that may launch programs
//! is refused unless `--allow-programs` says so: the programs would run for real, on
//! this machine.

use crate::catalog::{InputArgs, Publish, load_with_sources, prepare};
use crate::setup::{RuntimeArgs, read_policy, runtime_with};
use crate::{fleet, output};
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use wconverge_catalog::{Behaviour, Catalog, PathAccess, TypeSchema, Value};
use wconverge_engine::report::{Report, Status};
use wconverge_engine::{Mode, PluginHost};
use wconverge_runtime::policy::{Access, Policy, Source};

/// What `plugins test` is given.
#[derive(clap::Args)]
pub(crate) struct TestArgs {
    /// The plugin's component, as built (`target/wasm32-wasip2/release/NAME.wasm`); the
    /// policy's entry named `NAME` gives its grants.
    #[arg(value_name = "PLUGIN.wasm")]
    plugin: PathBuf,
    /// The manifest (or catalog) to converge: the plugin's resources, and any others
    /// (files it reads, say) as fixtures.
    #[arg(value_name = "MANIFEST")]
    manifest: PathBuf,
    /// The policy: the plugin's entry, and those of the other plugins the manifest uses.
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// Where the policy's `source = "plugin-dir"` plugins are.
    #[arg(long, value_name = "DIR")]
    plugin_dir: Option<PathBuf>,
    /// Print each call to a plugin: its inputs and what it answered (sensitive values
    /// redacted).
    #[arg(long)]
    verbose: bool,
    /// Keep the throwaway root (its path is printed) instead of removing it.
    #[arg(long)]
    keep: bool,
    /// Run even though a plugin the manifest uses may launch programs: they act on this
    /// machine, outside the throwaway root (use a VM or a container).
    #[arg(long)]
    allow_programs: bool,
    /// Where compiled plugins are cached.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// The three runs and what each must show.
const RUNS: [(&str, Mode); 3] = [
    ("apply", Mode::Apply),
    ("apply again", Mode::Apply),
    ("noop", Mode::Noop),
];

pub(crate) fn plugins_test(args: &TestArgs, trails: &crate::setup::Trails) -> anyhow::Result<u8> {
    let name = args
        .plugin
        .file_stem()
        .and_then(|stem| stem.to_str())
        .filter(|_| args.plugin.extension().is_some_and(|ext| ext == "wasm"))
        .with_context(|| {
            format!(
                "`{}` is not a component file: give the plugin's NAME.wasm",
                args.plugin.display()
            )
        })?
        .to_owned();
    // Absolute, not resolved: the runtime opens and checks the component itself, once.
    let plugin = std::path::absolute(&args.plugin)
        .with_context(|| format!("cannot read the plugin `{}`", args.plugin.display()))?;
    let root = tempfile::Builder::new()
        .prefix("wcv-plugin-test-")
        .tempdir()
        .context("cannot make the throwaway root")?;
    let mut policy = read_policy(&args.policy, args.plugin_dir.as_deref())?;
    let Some(entry) = policy.plugins.iter_mut().find(|entry| entry.name == name) else {
        bail!(
            "the policy `{}` has no plugin `{name}`: add `[plugins.{name}]` with the grants \
             it needs (its `source` is replaced by `{}` for the test)",
            args.policy.display(),
            args.plugin.display()
        );
    };
    entry.source = Source::File(plugin.clone());
    // The author's build of the moment: a test bench does not ask for a pin.
    entry.sha256 = None;
    rebase_grants(&mut policy, root.path())?;
    let runtime_args = RuntimeArgs {
        policy: None,
        plugin_dir: None,
        audit_log: None,
        cache_dir: args.cache_dir.clone(),
    };
    let runtime = runtime_with(policy.clone(), &runtime_args, trails)?;
    let summaries = runtime.plugin_summaries();
    let tested = summaries
        .iter()
        .flatten()
        .find(|summary| summary.name == name)
        .cloned();
    let Some(tested) = tested else {
        let why = summaries
            .into_iter()
            .filter_map(Result::err)
            .find(|error| error.plugin == name)
            .map_or_else(|| "it could not be loaded".to_owned(), |e| e.to_string());
        bail!("{why}");
    };
    let input = InputArgs {
        files: vec![args.manifest.clone()],
        node: None,
        deny_warnings: false,
        modulepath: None,
        execute: None,
    };
    let Some((mut loaded, problems)) =
        load_with_sources(&input, &runtime, &fleet::Fleet::none(), (Publish::No, None))?
    else {
        return Ok(1);
    };
    let catalog = &mut loaded.catalog;
    if !args.allow_programs {
        refuse_programs(&policy, catalog)?;
    }
    let mut schemas: Vec<&TypeSchema> = tested.types.iter().collect();
    schemas.extend(
        summaries
            .iter()
            .flatten()
            .flat_map(|summary| &summary.types),
    );
    let ours = rebase_catalog(catalog, &tested.types, &schemas, &name, root.path());
    if ours == 0 {
        bail!(
            "`{}` declares no resource of the types plugin `{name}` provides ({}): nothing to \
             test",
            args.manifest.display(),
            tested
                .types
                .iter()
                .map(|schema| schema.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    output::line(&format!(
        "testing plugin `{name}` ({}, sha256 {}) on {ours} resource{} in the throwaway root `{}`",
        args.plugin.display(),
        tested.sha256,
        if ours == 1 { "" } else { "s" },
        root.path().display()
    ));
    let mut failures = Vec::new();
    for (run, (label, mode)) in RUNS.into_iter().enumerate() {
        // A runtime of its own for each run: nothing one run learned is reused.
        let runtime = runtime_with(policy.clone(), &runtime_args, trails)?;
        let Some(prepared) = prepare(&loaded, &runtime, problems.clone())? else {
            return Ok(1);
        };
        let report = if args.verbose {
            let recorder = Recorder { inner: &runtime };
            wconverge_engine::run_with_jobs(&prepared, &recorder, mode, 1)
        } else {
            wconverge_engine::run_with_jobs(&prepared, &runtime, mode, 1)
        };
        let _ = runtime.sync_directories();
        let failed = verdict(run, &report);
        output::line(&format!(
            "{label}: {} resources, {} changed, {} would change, {} failed{}",
            report.summary.resources,
            report.summary.changed,
            report.summary.would_change,
            report.summary.failed,
            if failed.is_empty() { "" } else { "  FAILED" }
        ));
        for line in &failed {
            output::line(&format!("  {}", line.replace('\n', "\n    ")));
        }
        let stop = run == 0 && !failed.is_empty();
        failures.extend(failed);
        if stop {
            break;
        }
    }
    if args.keep {
        let kept = root.keep();
        output::line(&format!("the throwaway root is kept: `{}`", kept.display()));
    }
    if failures.is_empty() {
        output::line(&format!(
            "plugin `{name}` converges, and is idempotent: the second apply changed nothing and \
             noop planned nothing"
        ));
        Ok(0)
    } else {
        output::error(&format!(
            "plugin `{name}` failed its test: {} problem{} above",
            failures.len(),
            if failures.len() == 1 { "" } else { "s" }
        ));
        Ok(1)
    }
}

/// What run `run` (0: the first apply, 1: the second, 2: noop) shows that it must not.
fn verdict(run: usize, report: &Report) -> Vec<String> {
    let mut problems = Vec::new();
    for resource in &report.resources {
        let changes = || {
            resource
                .changes
                .iter()
                .map(|change| format!("{}: {}", change.attribute, change.message))
                .collect::<Vec<_>>()
                .join("; ")
        };
        match resource.status {
            Status::Failed => problems.push(format!(
                "{} failed: {}",
                resource.resource,
                resource.error.as_deref().unwrap_or("no reason given")
            )),
            Status::Changed if run > 0 => problems.push(format!(
                "{} changed again, so its plan or its state is not idempotent: {}",
                resource.resource,
                changes()
            )),
            Status::WouldChange if run > 0 => problems.push(format!(
                "{} would change after two applies: {}",
                resource.resource,
                changes()
            )),
            _ => {}
        }
    }
    problems
}

/// Refuses a test whose plugins may launch programs other than read-only queries: they
/// run on this machine, and only their arguments that name a read-write directory are
/// rebased.
fn refuse_programs(policy: &Policy, catalog: &Catalog) -> anyhow::Result<()> {
    for entry in &policy.plugins {
        let used = catalog
            .resources
            .iter()
            .any(|resource| entry.provides.contains(&resource.type_name));
        let launches = entry.programs.iter().any(|program| !program.query);
        if used && launches {
            bail!(
                "plugin `{}` may launch programs, which run on this machine: the arguments \
                 that name a read-write directory are rebased into the throwaway root, but a \
                 program may act elsewhere. Give `--allow-programs` to run the test anyway \
                 (in a VM or a container, unless you know what its programs touch)",
                entry.name
            );
        }
    }
    Ok(())
}

/// Every directory the policy grants read-write, below `root` instead (created), and the
/// argument patterns of programs that name them; what it grants read-only stays as it
/// is.
fn rebase_grants(policy: &mut Policy, root: &Path) -> anyhow::Result<()> {
    let mut moved: Vec<(String, String)> = Vec::new();
    for entry in &mut policy.plugins {
        for grant in &mut entry.directories {
            if grant.access == Access::ReadWrite {
                let from = grant.path.display().to_string();
                grant.path = rebased(root, &grant.path);
                std::fs::create_dir_all(&grant.path)
                    .with_context(|| format!("cannot create `{}`", grant.path.display()))?;
                moved.push((from, grant.path.display().to_string()));
            }
        }
    }
    // A program's argument patterns that name a rebased directory name its new place,
    // as the resources' paths do.
    for entry in &mut policy.plugins {
        for program in &mut entry.programs {
            if let Some(patterns) = &mut program.args {
                for pattern in patterns.iter_mut() {
                    for (from, to) in &moved {
                        *pattern = pattern.rebased(from, to);
                    }
                }
            }
        }
    }
    Ok(())
}

fn rebased(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Rebases the catalog's read-write paths below `root`, and has the resources of
/// `ours` (the tested plugin's types) use plugin `name`. Returns how many are ours.
fn rebase_catalog(
    catalog: &mut Catalog,
    ours: &[TypeSchema],
    schemas: &[&TypeSchema],
    name: &str,
    root: &Path,
) -> usize {
    let mut count = 0;
    for resource in &mut catalog.resources {
        let mine = ours.iter().any(|schema| schema.name == resource.type_name);
        if mine {
            count += 1;
            if resource.metaparams.provider.is_none() {
                resource.metaparams.provider = Some(name.to_owned());
            }
        }
        let Some(schema) = schemas
            .iter()
            .find(|schema| schema.name == resource.type_name)
        else {
            continue;
        };
        for attribute in &schema.attributes {
            if attribute.path_access != PathAccess::ReadWrite {
                continue;
            }
            let value = match resource.attributes.get(&attribute.name) {
                Some(value) => Some(rebase_value(value, root)),
                // A path namevar left to the title.
                None if attribute.behaviour == Behaviour::Namevar
                    && resource.title.starts_with('/') =>
                {
                    Some(rebase_value(&Value::String(resource.title.clone()), root))
                }
                None => None,
            };
            if let Some(value) = value {
                resource.attributes.set(&attribute.name, value);
            }
        }
    }
    count
}

fn rebase_value(value: &Value, root: &Path) -> Value {
    match value {
        Value::String(path) if path.starts_with('/') => {
            Value::String(rebased(root, Path::new(path)).display().to_string())
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| rebase_value(item, root)).collect())
        }
        other => other.clone(),
    }
}

/// The runtime, printing each call's inputs and answer (`--verbose`).
struct Recorder<'a> {
    inner: &'a wconverge_runtime::Runtime,
}

impl Recorder<'_> {
    fn show<T: std::fmt::Debug>(
        &self,
        call: &str,
        resources: &[&wconverge_engine::PreparedResource],
        input: &str,
        outcome: &wconverge_engine::Call<T>,
    ) {
        let secrets = wconverge_engine::Secrets::union(resources.iter().map(|r| r.secrets()));
        self.show_scrubbed(call, resources, input, outcome, &secrets);
    }

    /// Shows a call, scrubbed of `secrets` (the resources' own and, for a call that
    /// read states, what it read of their sensitive attributes).
    fn show_scrubbed<T: std::fmt::Debug>(
        &self,
        call: &str,
        resources: &[&wconverge_engine::PreparedResource],
        input: &str,
        outcome: &wconverge_engine::Call<T>,
        secrets: &wconverge_engine::Secrets,
    ) {
        let names: Vec<String> = resources
            .iter()
            .map(|resource| resource.reference.to_string())
            .collect();
        let answer = match &outcome.outcome {
            Ok(value) => format!("{value:?}"),
            Err(error) => format!("error: {error}"),
        };
        output::line(&secrets.scrub(&format!(
            "  call {call} {}{input}\n    -> {answer}",
            names.join(", ")
        )));
    }
}

/// A resource's attributes as a call's input shows them.
fn attributes(resource: &wconverge_engine::PreparedResource) -> String {
    let shown: Vec<String> = resource
        .attributes
        .iter()
        .map(|(name, value)| format!("{name} => {}", shown_value(value)))
        .collect();
    format!(" {{ {} }}", shown.join(", "))
}

fn shown_value(value: &Value) -> String {
    match value {
        Value::Sensitive(_) => "[sensitive]".to_owned(),
        Value::String(text) => format!("{text:?}"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(shown_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Hash(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(key, value)| format!("{key:?} => {}", shown_value(value)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Integer(number) => number.to_string(),
        Value::Float(number) => number.to_string(),
        Value::Boolean(flag) => flag.to_string(),
        Value::Undef => "undef".to_owned(),
    }
}

impl PluginHost for Recorder<'_> {
    fn provider(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<wconverge_engine::ProviderChoice>, wconverge_engine::PluginError> {
        self.inner.provider(type_name, requested)
    }

    fn validate(
        &self,
        resources: &[&wconverge_engine::PreparedResource],
    ) -> wconverge_engine::Call<Vec<Vec<String>>> {
        let call = self.inner.validate(resources);
        self.show("validate", resources, "", &call);
        call
    }

    fn plan(
        &self,
        resource: &wconverge_engine::PreparedResource,
        current: Option<wconverge_engine::State>,
    ) -> wconverge_engine::Call<wconverge_engine::Checked> {
        let call = self.inner.plan(resource, current);
        let secrets = match &call.outcome {
            Ok(checked) => resource.secrets_with_observed(&checked.state),
            Err(_) => resource.secrets().clone(),
        };
        self.show_scrubbed("plan", &[resource], &attributes(resource), &call, &secrets);
        call
    }

    fn check(
        &self,
        resources: &[&wconverge_engine::PreparedResource],
    ) -> wconverge_engine::Call<Vec<Result<wconverge_engine::Checked, wconverge_engine::Failure>>>
    {
        let call = self.inner.check(resources);
        let input: String = resources
            .iter()
            .map(|resource| attributes(resource))
            .collect();
        let read: Vec<wconverge_engine::Secrets> = match &call.outcome {
            Ok(results) => resources
                .iter()
                .zip(results)
                .map(|(resource, result)| match result {
                    Ok(checked) => resource.secrets_with_observed(&checked.state),
                    Err(_) => resource.secrets().clone(),
                })
                .collect(),
            Err(_) => resources.iter().map(|r| r.secrets().clone()).collect(),
        };
        let secrets = wconverge_engine::Secrets::union(&read);
        self.show_scrubbed("check", resources, &input, &call, &secrets);
        call
    }

    fn apply(
        &self,
        resource: &wconverge_engine::PreparedResource,
        changes: &[wconverge_engine::Change],
    ) -> wconverge_engine::Call<()> {
        let call = self.inner.apply(resource, changes);
        self.show(
            "apply",
            &[resource],
            &format!(" changes {changes:?}"),
            &call,
        );
        call
    }

    fn refresh(&self, resource: &wconverge_engine::PreparedResource) -> wconverge_engine::Call<()> {
        let call = self.inner.refresh(resource);
        self.show("refresh", &[resource], "", &call);
        call
    }

    fn interpreter(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<wconverge_engine::InterpreterInfo>, wconverge_engine::PluginError> {
        self.inner.interpreter(type_name, requested)
    }

    fn default_interpreter(
        &self,
    ) -> Result<Option<wconverge_engine::InterpreterInfo>, wconverge_engine::PluginError> {
        self.inner.default_interpreter()
    }

    fn run_guard(
        &self,
        script: &wconverge_engine::GuardScript,
    ) -> wconverge_engine::Call<wconverge_engine::ScriptOutput> {
        self.inner.run_guard(script)
    }

    fn facts(&self) -> Result<wconverge_requires::Facts, wconverge_engine::FactsError> {
        self.inner.facts()
    }

    fn home_of(&self, user: &str) -> Option<String> {
        self.inner.home_of(user)
    }

    fn interrupted(&self) -> Option<String> {
        self.inner.interrupted()
    }

    fn resolve_path(&self, path: &str) -> Option<String> {
        self.inner.resolve_path(path)
    }

    fn changes_machine(&self, plugin: &str) -> bool {
        self.inner.changes_machine(plugin)
    }

    fn launches_programs(&self, plugin: &str) -> bool {
        self.inner.launches_programs(plugin)
    }
}
