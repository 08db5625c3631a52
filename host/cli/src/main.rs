//! `wconverge`: the command line (**API boundary**: commands, flags, output formats and
//! exit codes are a contract; see DESIGN section 9).
//!
//! Exit codes of `apply` follow Puppet's `--detailed-exitcodes`: 0 nothing changed,
//! 2 changes, 4 failures, 6 both. Anything that stops a command before it runs (a bad
//! catalog, a bad policy, a held lock) exits 1.

mod data;
mod dirs;
mod fleet;
mod generate;
mod input;
mod lock;
mod modules;
mod output;
mod plugin_test;
mod plugins_command;
mod scaffold;
mod signals;
mod types_command;

// mimalloc (its version 2: its version 3 keeps more memory) rather than the C library's
// allocator: a no-op of 5,000 files takes a fifth less time, and a compile of 50,000
// resources two fifths less in as much memory (`cargo bench --bench floors`). Both
// allocate and free many small values on several threads at once.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use wconverge_catalog::Catalog;
use wconverge_engine::{Mode, Prepared};
use wconverge_runtime::policy::Policy;
use wconverge_runtime::trail::Trail;
use wconverge_runtime::{Runtime, RuntimeOptions, Suitability};

#[derive(Parser)]
#[command(
    name = "wconverge",
    version,
    about = "Converge this machine to a declared state; every provider runs sandboxed"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct RuntimeArgs {
    /// Policy file: which plugins exist and what each may touch (default: the built-in
    /// policy, see the README).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Where the plugins whose policy entry says `source = "plugin-dir"` are, as
    /// NAME.wasm; a .wasm there that no entry pins is never loaded.
    #[arg(long, value_name = "DIR")]
    plugin_dir: Option<PathBuf>,
    /// Append every capability decision of the plugins (directories opened, programs
    /// launched, anything refused) to FILE, as JSON lines.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Where compiled plugins are cached (default: /var/cache/wconverge as root, else
    /// $XDG_CACHE_HOME/wconverge; or $WCONVERGE_CACHE_DIR).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// What to converge: manifests, or a catalog compiled earlier.
#[derive(clap::Args)]
struct InputArgs {
    /// Manifests (`.wcv` or Puppet's `.pp`, evaluated together in the order given), or
    /// one catalog in JSON (docs/catalog-format.md).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The node's name, matched against `node` definitions (default: this host's name).
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// Treat the manifests' warnings (a node attribute read before a later write
    /// changes it, say) as errors: nothing is compiled or applied while one remains.
    #[arg(long)]
    deny_warnings: bool,
    /// The modules: directories separated by `:`, searched in order, for classes and
    /// defined types (NAME/manifests/...) and `puppet:///modules/NAME/PATH` sources
    /// (NAME/files/PATH, resolved when applying). Default: the environment.conf's
    /// `modulepath`, else `modules/` next to the main manifest (and at the
    /// environment's root when that is `manifests/`).
    #[arg(long, value_name = "DIRS")]
    modulepath: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Converge the machine to manifests or a catalog.
    Apply {
        #[command(flatten)]
        input: InputArgs,
        /// Report what would change; change nothing.
        #[arg(long)]
        noop: bool,
        /// Print each change's diff under it (a unified diff of a file's content, a value
        /// before and after), as its provider gave it; never a sensitive attribute's.
        #[arg(long)]
        show_diff: bool,
        #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
        format: ReportFormat,
        /// Where the run lock lives (default: /var/lib/wconverge as root, else
        /// $XDG_STATE_HOME/wconverge; or $WCONVERGE_STATE_DIR).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// How many resources to apply at once (default: the number of cores). A
        /// resource still waits for those it depends on; the report is the same as
        /// with `--jobs 1`.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
        jobs: Option<u16>,
        /// Keep the store's reports this many days (default: the config file's
        /// `keep_reports`, else 14); older ones go when this run's report is stored.
        #[arg(long, value_name = "DAYS", value_parser = clap::value_parser!(u32).range(1..=36_500))]
        keep_reports: Option<u32>,
        #[command(flatten)]
        runtime: RuntimeArgs,
        #[command(flatten)]
        store: fleet::StoreArgs,
    },
    /// Compile manifests into a catalog and print it as JSON.
    Compile {
        #[command(flatten)]
        input: InputArgs,
        /// Compile for the node `--node` names with the facts it last stored, not this
        /// machine's: a fleet compiles centrally and applies on each node.
        #[arg(long, requires = "node")]
        facts_from_store: bool,
        #[command(flatten)]
        runtime: RuntimeArgs,
        #[command(flatten)]
        store: fleet::StoreArgs,
    },
    /// Check manifests or a catalog against the types' schemas and the graph, changing
    /// nothing.
    Validate {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
        #[command(flatten)]
        store: fleet::StoreArgs,
    },
    /// Print the resource graph in application order.
    Graph {
        #[command(flatten)]
        input: InputArgs,
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        #[command(flatten)]
        runtime: RuntimeArgs,
        #[command(flatten)]
        store: fleet::StoreArgs,
    },
    /// Show the resource types the plugins provide, or one type's schema.
    Types {
        #[arg(value_name = "TYPE")]
        type_name: Option<String>,
        /// Show the attributes of this provider of TYPE (a plugin's name in the policy)
        /// rather than of the one a resource gets by default.
        #[arg(long, value_name = "PLUGIN", requires = "type_name")]
        provider: Option<String>,
        /// Also the types these manifests (or this catalog) declare with `type Name`.
        #[arg(long = "manifest", value_name = "FILE")]
        manifests: Vec<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Evaluate a resource program (one expression per line, like
    /// `package.name == 'fwts'`): prints `true` (exit 0) or `false` (exit 1); an invalid
    /// program is a diagnostic (exit 2).
    Requirement {
        #[arg(value_name = "PROGRAM")]
        program: String,
        /// The facts, as JSON: `{"group": [{"key": "value"}, ...]}`, instead of this
        /// machine's.
        #[arg(long, value_name = "FILE")]
        facts: Option<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Print this machine's facts, as the fact plugins of the policy gather them; or,
    /// with `--node`, the facts that node last stored.
    Facts {
        #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
        format: ReportFormat,
        /// The node whose stored facts to print.
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        #[command(flatten)]
        runtime: RuntimeArgs,
        #[command(flatten)]
        store: fleet::StoreArgs,
    },
    /// The runs' reports in the store, newest first; `reports show ID` prints one.
    Reports {
        #[command(subcommand)]
        command: Option<fleet::ReportsCommand>,
        /// Only this node's.
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        /// Only those since then: an age (`12h`, `7d`), a date (`2026-11-25`) or a UTC
        /// time (`2026-11-25T08:00:00Z`).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
        format: ReportFormat,
        #[command(flatten)]
        store: fleet::StoreArgs,
    },
    /// Manage the store nodes share.
    Store {
        #[command(subcommand)]
        command: fleet::StoreCommand,
    },
    /// Inspect the plugins of the policy.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Each plugin with its source, digest, version and types.
    List {
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// For a reviewer: every plugin's digest, imports and grants, with a flag on each
    /// grant that amounts to root or reads secrets. Stable, so two deployments diff.
    Audit {
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// One plugin: its world, imports, and the schema of each type it provides.
    Inspect {
        #[arg(value_name = "NAME")]
        name: String,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// For a plugin's author: write a ready provider project (one type, its schema,
    /// state, plan and apply, a unit test, the guest SDK vendored, a manifest and a policy
    /// to try it); it builds and its test passes as written.
    New(scaffold::NewArgs),
    /// For a plugin's author: apply MANIFEST with PLUGIN.wasm in a throwaway root (the
    /// read-write grants and paths rebased below a temporary directory), apply it again
    /// (which must change nothing), then run noop (which must plan nothing).
    Test(plugin_test::TestArgs),
    /// Pin every plugin of a policy file to the digest of its component as it is now
    /// (`sha256 = ...`), keeping the file's comments and layout; prints what changed.
    Lock {
        /// The policy file to update.
        #[arg(long, value_name = "FILE")]
        policy: PathBuf,
        /// Where the plugins with `source = "plugin-dir"` are.
        #[arg(long, value_name = "DIR")]
        plugin_dir: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Human,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum GraphFormat {
    Dot,
    Json,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // `requirement` answers 1 for "false"; its usage errors are 2, as its other
            // errors are.
            let usage = if std::env::args().nth(1).as_deref() == Some("requirement") {
                2
            } else {
                1
            };
            let code = if error.use_stderr() { usage } else { 0 };
            output::parser_message(&error);
            return ExitCode::from(code);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(|| output::InertStderr)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WCONVERGE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    // The trails are finished whatever happened: a failed run's refusals matter most.
    let trails = Trails::default();
    let result = run(cli, &trails);
    let finished = trails.finish();
    match result.and_then(|code| finished.map(|()| code)) {
        // A closed pipe leaves the exit code to the command (an `apply`'s is the run's);
        // output lost any other way is a failure of a command that would have succeeded.
        Ok(0)
            if output::stdout_lost().is_some_and(|kind| kind != std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::from(1)
        }
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            output::error(&format!("{error:#}"));
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli, trails: &Trails) -> anyhow::Result<u8> {
    match cli.command {
        Command::Apply {
            input,
            noop,
            show_diff,
            format,
            state_dir,
            jobs,
            keep_reports,
            runtime,
            store,
        } => {
            signals::watch();
            let runtime = runtime_for(&runtime, trails)?;
            let state_dir = dirs::state_dir(state_dir)?;
            let mut fleet = fleet::Fleet::new(&store, Some(&state_dir))?;
            if let Some(days) = keep_reports {
                fleet.keep_reports = days;
            }
            let Some((catalog, problems)) =
                load_with_sources(&input, &runtime, &fleet, Publish::Yes)?
            else {
                return Ok(1);
            };
            let _lock = dirs::RunLock::acquire(&state_dir)?;
            let Some(prepared) = prepare(&catalog, &runtime, problems)? else {
                return Ok(1);
            };
            let mode = if noop { Mode::Noop } else { Mode::Apply };
            let jobs = jobs.map_or_else(
                || std::thread::available_parallelism().map_or(1, usize::from),
                usize::from,
            );
            // With lazy values, on the compiler's stack once, so that they evaluate
            // without a thread each (and only then: that thread is a little slower).
            // Concurrent runs give each worker such a stack.
            let report = if has_lazy(&catalog) && jobs == 1 {
                wconverge_lang::run_on_big_stack(|| {
                    wconverge_engine::run_with_jobs(&prepared, &runtime, mode, jobs)
                })
            } else {
                wconverge_engine::run_with_jobs(&prepared, &runtime, mode, jobs)
            };
            // One sync per directory the run changed, rather than one per file.
            let unsynced = runtime.sync_directories();
            match format {
                ReportFormat::Human => output::report_human(&report, show_diff),
                ReportFormat::Json => output::json(&report),
            }
            for problem in &unsynced {
                output::error(problem);
            }
            let mut code = u8::try_from(report.exit_code).expect("exit codes are 0 to 6");
            if !unsynced.is_empty() {
                // Puppet's detailed exit codes: 4, failures.
                code |= 4;
            }
            let node = catalog.node.clone().unwrap_or_else(dirs::host_name);
            // A fleet's store gets every node's facts, for central compiles.
            if fleet.explicit() && !fleet.facts_stored() {
                let (groups, errors) = runtime.gather_facts();
                for error in &errors {
                    output::warning(&format!(
                        "the stored facts lack the groups of a fact plugin that failed: {error}"
                    ));
                }
                fleet.store_facts(&node, &groups);
            }
            fleet.send_report(&node, &report);
            // The process ends next, and its memory with it: a catalog of many
            // resources is not freed one value at a time first.
            std::mem::forget((catalog, prepared, report));
            Ok(code)
        }
        Command::Compile {
            input,
            facts_from_store,
            runtime,
            store,
        } => {
            let runtime = runtime_for(&runtime, trails)?;
            let fleet = fleet::Fleet::of(&store)?;
            let publish = if facts_from_store {
                Publish::FactsFromStore
            } else {
                Publish::Yes
            };
            let Some(catalog) = load(&input, &runtime, &module_path(&input), &fleet, publish)?
            else {
                return Ok(1);
            };
            output::json(&catalog);
            // The process ends next: the catalog goes with it, not value by value.
            std::mem::forget(catalog);
            Ok(0)
        }
        Command::Validate {
            input,
            runtime,
            store,
        } => {
            let runtime = runtime_for(&runtime, trails)?;
            let fleet = fleet::Fleet::of(&store)?;
            let Some((catalog, problems)) =
                load_with_sources(&input, &runtime, &fleet, Publish::No)?
            else {
                return Ok(1);
            };
            Ok(match prepare(&catalog, &runtime, problems)? {
                Some(prepared) => {
                    let names: Vec<String> = input
                        .files
                        .iter()
                        .map(|path| path.display().to_string())
                        .collect();
                    output::line(&format!(
                        "{}: valid, {} resources",
                        names.join(", "),
                        prepared.resources.len()
                    ));
                    0
                }
                None => 1,
            })
        }
        Command::Graph {
            input,
            format,
            runtime,
            store,
        } => {
            let runtime = runtime_for(&runtime, trails)?;
            let fleet = fleet::Fleet::of(&store)?;
            let Some((catalog, problems)) =
                load_with_sources(&input, &runtime, &fleet, Publish::No)?
            else {
                return Ok(1);
            };
            let Some(prepared) = prepare(&catalog, &runtime, problems)? else {
                return Ok(1);
            };
            match format {
                GraphFormat::Dot => output::graph_dot(&prepared),
                GraphFormat::Json => output::graph_json(&prepared),
            }
            Ok(0)
        }
        Command::Types {
            type_name,
            provider,
            manifests,
            runtime,
        } => types_command::types(type_name, provider, manifests, &runtime, trails),
        Command::Requirement {
            program,
            facts,
            runtime,
        } => requirement(&program, facts.as_deref(), &runtime, trails),
        Command::Facts {
            format,
            node: Some(node),
            runtime: _,
            store,
        } => {
            let fleet = fleet::Fleet::of(&store)?;
            let store = fleet.existing_store()?;
            let Some((facts, at)) = store.facts(&node)? else {
                bail!(
                    "the store {} has no facts of node `{node}`: a run of `wconverge apply` on it with this store (`--store`, or the config file's `store`) sends them",
                    store.shown()
                );
            };
            let groups = fleet::facts_from_json(&facts, &format!("the facts of node `{node}`"))
                .map_err(anyhow::Error::msg)?;
            match format {
                ReportFormat::Human => {
                    output::line(&format!(
                        "# node {node}, facts stored {}",
                        fleet::time_text(at)
                    ));
                    output::facts_human(&groups);
                }
                ReportFormat::Json => output::facts_json(&groups),
            }
            Ok(0)
        }
        Command::Reports {
            command,
            node,
            since,
            format,
            store,
        } => fleet::reports_command(
            command.as_ref(),
            node.as_deref(),
            since.as_deref(),
            matches!(format, ReportFormat::Json),
            &store,
        ),
        Command::Store { command } => fleet::store_command(&command),
        Command::Facts {
            format,
            node: None,
            runtime,
            store: _,
        } => {
            let runtime = runtime_for(&runtime, trails)?;
            let (groups, errors) = runtime.gather_facts();
            match format {
                ReportFormat::Human => output::facts_human(&groups),
                ReportFormat::Json => output::facts_json(&groups),
            }
            for error in &errors {
                output::error(&error.to_string());
            }
            Ok(u8::from(!errors.is_empty()))
        }
        Command::Plugins {
            command: PluginsCommand::List { runtime },
        } => plugins_command::list(&runtime, trails),
        Command::Plugins {
            command: PluginsCommand::Inspect { name, runtime },
        } => plugins_command::inspect(&name, &runtime, trails),
        Command::Plugins {
            command: PluginsCommand::Lock { policy, plugin_dir },
        } => lock::lock(&policy, plugin_dir.as_deref(), wconverge_builtin::BUILTINS),
        Command::Plugins {
            command: PluginsCommand::Test(args),
        } => plugin_test::plugins_test(&args, trails),
        Command::Plugins {
            command: PluginsCommand::New(args),
        } => scaffold::plugins_new(&args),
        Command::Plugins {
            command: PluginsCommand::Audit { runtime },
        } => plugins_command::audit(&runtime, trails),
    }
}

/// `wconverge requirement`: 0 true, 1 false, 2 invalid (the program or the facts).
fn requirement(
    text: &str,
    facts: Option<&Path>,
    runtime: &RuntimeArgs,
    trails: &Trails,
) -> anyhow::Result<u8> {
    let program = match wconverge_program::Program::parse(text) {
        Ok(program) => program,
        Err(errors) => {
            output::program_errors(&errors, text);
            return Ok(2);
        }
    };
    let facts = match facts {
        Some(path) => match read_facts(path) {
            Ok(facts) => facts,
            Err(message) => {
                output::error(&message);
                return Ok(2);
            }
        },
        None => {
            let runtime = match runtime_for(runtime, trails) {
                Ok(runtime) => runtime,
                Err(error) => {
                    output::error(&format!("{error:#}"));
                    return Ok(2);
                }
            };
            let (groups, errors) = runtime.gather_facts();
            if !errors.is_empty() {
                for error in errors {
                    output::error(&error.to_string());
                }
                output::error("the facts are incomplete; the program was not evaluated");
                return Ok(2);
            }
            wconverge_program::Facts { groups }
        }
    };
    let verdict = program.evaluate(&facts);
    if verdict.exhausted {
        output::error(
            "the program did more work than a resource program may, and was stopped; \
             simplify it",
        );
        return Ok(2);
    }
    output::verdict(&verdict);
    Ok(u8::from(!verdict.holds))
}

/// Facts from a JSON file: `{"group": [{"key": "value"}, ...]}`, every value a string.
fn read_facts(path: &Path) -> Result<wconverge_program::Facts, String> {
    let text = input::read_text(path, "file of facts", input::FACTS_BYTES)?;
    Ok(wconverge_program::Facts {
        groups: fleet::facts_from_json(&text, &path.display().to_string())?,
    })
}

/// A manifest: `.wcv`, or Puppet's `.pp`.
fn is_manifest(path: &Path) -> bool {
    path.extension()
        .is_some_and(|extension| extension == "wcv" || extension == "pp")
}

/// The catalog to work on: compiled from the manifests, or read from a JSON file.
/// `None` when the manifests have errors (already printed).
/// The module path of the input: `--modulepath`, or the main manifest's environment's.
fn module_path(input: &InputArgs) -> Vec<PathBuf> {
    modules::module_path(
        input.modulepath.as_deref(),
        input
            .files
            .first()
            .filter(|path| is_manifest(path))
            .map(PathBuf::as_path),
    )
}

/// What a compile does with the store besides collecting other nodes' exports.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Publish {
    /// Nothing: an inspection (`validate`, `graph`).
    No,
    /// Store this node's exports, and its facts if the compile gathered them.
    Yes,
    /// As `Yes`, compiling with the node's stored facts rather than this machine's.
    FactsFromStore,
}

fn load(
    input: &InputArgs,
    runtime: &Runtime,
    modulepath: &[PathBuf],
    fleet: &fleet::Fleet,
    publish: Publish,
) -> anyhow::Result<Option<Catalog>> {
    let n_manifests = input.files.iter().filter(|path| is_manifest(path)).count();
    if n_manifests == 0 {
        let [path] = input.files.as_slice() else {
            bail!(
                "give one catalog (JSON) or any number of manifests (`.wcv`, `.pp`), not {} catalogs",
                input.files.len()
            );
        };
        if input.node.is_some() {
            bail!("`--node` applies to manifests; a compiled catalog is already for one node");
        }
        return read_catalog(path).map(Some);
    }
    if n_manifests != input.files.len() {
        bail!("give either manifests (`.wcv`, `.pp`) or one catalog (JSON), not both");
    }
    let mut sources = Vec::with_capacity(input.files.len());
    for path in &input.files {
        let text = input::read_text(path, "manifest", input::MANIFEST_BYTES)
            .map_err(anyhow::Error::msg)?;
        sources.push(wconverge_lang::Source::new(
            path.display().to_string(),
            text,
        ));
    }
    let mut schemas = vec![wconverge_engine::node_block_schema()];
    for summary in runtime.plugin_summaries() {
        match summary {
            Ok(summary) => schemas.extend(summary.types),
            Err(error) => bail!("{error}"),
        }
    }
    let types = wconverge_lang::KnownTypes::from_schemas(&schemas);
    let node = match &input.node {
        Some(node) => node.clone(),
        None => dirs::host_name(),
    };
    // `$facts`: this machine's, as the fact plugins of the policy gather them; only for
    // manifests that can read them, and a plugin that fails leaves out its groups.
    let loader = modules::ModuleLoader::new(
        modulepath,
        input
            .files
            .first()
            .map(|main| modules::environment_root(main)),
    );
    // Puppet code (a `.pp` manifest, a module) may read facts anywhere, under their
    // own names too (`$::osfamily`); a `.wcv` manifest reads them only where it says so.
    let reads_facts = !wconverge_lang::Loader::is_empty(&loader)
        || wconverge_lang::Loader::hiera_config(&loader, None).is_some()
        || input
            .files
            .iter()
            .any(|path| path.extension().is_some_and(|e| e == "pp"))
        || sources.iter().any(|source| {
            source.text.contains("facts")
                || source.text.contains("$::")
                || wconverge_engine::FACTER_NAMES
                    .iter()
                    .any(|name| source.text.contains(&format!("${name}")))
        });
    let facts = if publish == Publish::FactsFromStore {
        let store = fleet.existing_store()?;
        let Some((facts, _)) = store.facts(&node)? else {
            bail!(
                "the store {} has no facts of node `{node}`: run `wconverge apply` on it with this store (`--store`, or the config file's `store`) first",
                store.shown()
            );
        };
        let groups = fleet::facts_from_json(&facts, &format!("the facts of node `{node}`"))
            .map_err(anyhow::Error::msg)?;
        wconverge_engine::facts_value(&groups)
    } else if reads_facts {
        let (groups, errors) = runtime.gather_facts();
        for error in &errors {
            output::warning(&format!(
                "`$facts` lacks the groups of a fact plugin that failed: {error}"
            ));
        }
        if publish == Publish::Yes {
            fleet.store_facts(&node, &groups);
        }
        wconverge_engine::facts_value(&groups)
    } else {
        wconverge_catalog::Value::Hash(Vec::new())
    };
    let compiled =
        wconverge_lang::compile_with_store(&sources, &node, &types, &facts, &loader, fleet);
    let mut shown = sources;
    shown.extend(compiled.loaded.iter().cloned());
    output::diagnostics(&compiled.diagnostics, &shown);
    let warnings = compiled
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == wconverge_lang::Severity::Warning)
        .count();
    if input.deny_warnings && warnings > 0 && compiled.catalog.is_some() {
        output::error(&format!(
            "{warnings} warning{} and `--deny-warnings`: nothing was compiled or changed",
            if warnings == 1 { "" } else { "s" }
        ));
        return Ok(None);
    }
    if publish != Publish::No && compiled.catalog.is_some() {
        fleet.publish(&node, &compiled.exports);
    }
    Ok(compiled.catalog)
}

/// The catalog to apply or validate: loaded, then its `puppet:///modules/...` sources
/// found in the module path, with the problems of those it could not find (reported
/// with the catalog's other problems), and the resources it implies added.
fn load_with_sources(
    input: &InputArgs,
    runtime: &Runtime,
    fleet: &fleet::Fleet,
    publish: Publish,
) -> anyhow::Result<Option<(Catalog, Vec<wconverge_catalog::Problem>)>> {
    let modulepath = module_path(input);
    let Some(mut catalog) = load(input, runtime, &modulepath, fleet, publish)? else {
        return Ok(None);
    };
    let problems = modules::resolve_sources(&mut catalog, &modulepath);
    generate::implied_resources(&mut catalog);
    Ok(Some((catalog, problems)))
}

/// Whether the catalog holds lazy values, which the host evaluates.
fn has_lazy(catalog: &Catalog) -> bool {
    use wconverge_catalog::Lazy;
    catalog.resources.iter().any(|resource| {
        resource
            .attributes
            .iter()
            .any(|(_, value)| Lazy::within(value))
            || [&resource.metaparams.only_if, &resource.metaparams.not_if]
                .into_iter()
                .flatten()
                .any(Lazy::within)
    })
}

fn read_catalog(path: &Path) -> anyhow::Result<Catalog> {
    let text =
        input::read_text(path, "catalog", input::CATALOG_BYTES).map_err(anyhow::Error::msg)?;
    Catalog::from_json(&text).map_err(|error| match error {
        wconverge_catalog::Error::Syntax {
            message,
            line,
            column,
        } => anyhow::anyhow!("{}:{line}:{column}: {message}", path.display()),
        other => anyhow::anyhow!("{}: {other}", path.display()),
    })
}

fn runtime_for(args: &RuntimeArgs, trails: &Trails) -> anyhow::Result<Runtime> {
    let policy = match &args.policy {
        Some(path) => read_policy(path, args.plugin_dir.as_deref())?,
        None => {
            let mut policy = Policy::builtin();
            if let Some(dir) = &args.plugin_dir {
                place_plugin_dir(&mut policy, dir)?;
            }
            policy
        }
    };
    runtime_with(policy, args, trails)
}

/// The policy file at `path`, with its `plugin-dir` plugins found in `plugin_dir`.
fn read_policy(path: &Path, plugin_dir: Option<&Path>) -> anyhow::Result<Policy> {
    let text = input::read_text(path, "policy", input::POLICY_BYTES).map_err(anyhow::Error::msg)?;
    let base = path.parent().map(|parent| {
        if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        }
    });
    let mut policy = Policy::parse(&text, &path.display().to_string(), base)?;
    if let Some(dir) = plugin_dir {
        place_plugin_dir(&mut policy, dir)?;
    }
    Ok(policy)
}

/// Finds the policy's `plugin-dir` plugins in `dir`, warning of what it holds and no
/// plugin takes.
fn place_plugin_dir(policy: &mut Policy, dir: &Path) -> anyhow::Result<()> {
    policy
        .place_plugin_dir(dir)
        .with_context(|| format!("cannot list the plugin directory `{}`", dir.display()))?;
    if let Some(warning) = Policy::plugin_dir_warning(dir) {
        output::warning(&warning);
    }
    for file in &policy.unclaimed {
        output::warning(&format!(
            "{} is not loaded: no plugin of the policy pins it; review it, add \
             `[plugins.NAME]` with `source = \"plugin-dir\"` and its grants to the policy, \
             then run `wconverge plugins lock`",
            file.display()
        ));
    }
    Ok(())
}

/// A runtime over `policy`, with the cache and audit log `args` name; its trail is
/// finished with the command's (`trails`).
fn runtime_with(policy: Policy, args: &RuntimeArgs, trails: &Trails) -> anyhow::Result<Runtime> {
    let cache_dir = dirs::cache_dir(args.cache_dir.clone());
    let runtime = Runtime::new(RuntimeOptions {
        policy,
        cache_dir: cache_dir.map(|dir| dir.join("components")),
        builtins: wconverge_builtin::BUILTINS,
        builtin_digests: wconverge_builtin::BUILTIN_DIGESTS,
    })?;
    let file = match &args.audit_log {
        Some(path) => Some(open_audit_log(path)?),
        None => None,
    };
    let trail = Arc::new(Trail::new(file, Box::new(output::warning)));
    runtime.set_trail(Arc::clone(&trail));
    trails.0.borrow_mut().push(trail);
    Ok(runtime)
}

/// The audit log, opened for appending: never through a symlink, and only a regular file
/// of this user that no one else may write.
fn open_audit_log(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let context = || format!("cannot open the audit log `{}`", path.display());
    // What is there, named, before anything is opened (opening a FIFO to write fails or
    // blocks; a device could act).
    if let Ok(metadata) = std::fs::symlink_metadata(path)
        && !metadata.is_file()
    {
        bail!(
            "the audit log `{}` is {}; it must be a regular file of this user",
            path.display(),
            if metadata.file_type().is_symlink() {
                "a symlink"
            } else if metadata.is_dir() {
                "a directory"
            } else {
                "a special file (a FIFO, socket or device)"
            }
        );
    }
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        // Non-blocking: a FIFO in its place must not hang the run.
        .custom_flags(
            (rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::NONBLOCK
                | rustix::fs::OFlags::NOCTTY)
                .bits() as i32,
        )
        .open(path)
        .with_context(context)?;
    let metadata = file.metadata().with_context(context)?;
    // One link only: a hard link to another file of this user would have the log
    // written into that file.
    if !metadata.is_file()
        || metadata.uid() != rustix::process::geteuid().as_raw()
        || metadata.mode() & 0o022 != 0
        || metadata.nlink() != 1
    {
        bail!(
            "the audit log `{}` must be a regular file of this user, with no other link, \
             that no one else may write (mode 0600)",
            path.display()
        );
    }
    Ok(file)
}

/// The audit trails of one command's runtimes, finished when the command is done, how
/// ever it ended (`main` owns them; every runtime the command makes adds its own).
#[derive(Default)]
pub(crate) struct Trails(std::cell::RefCell<Vec<Arc<Trail>>>);

impl Trails {
    /// Ends every audit trail: the counts of suppressed refusals, and a flush. A trail
    /// that could not be written fails the command.
    fn finish(self) -> anyhow::Result<()> {
        for trail in self.0.into_inner() {
            trail
                .finish()
                .context("cannot write the audit log; it is incomplete")?;
        }
        Ok(())
    }
}

/// Validates the catalog; prints every problem (the `earlier` ones first) and returns
/// `None` if there are any.
fn prepare(
    catalog: &Catalog,
    runtime: &Runtime,
    mut earlier: Vec<wconverge_catalog::Problem>,
) -> anyhow::Result<Option<Prepared>> {
    // Checking lazy values, and the checks and invariants of types, needs the
    // compiler's stack: take it once, rather than once per check.
    let prepared = wconverge_lang::run_on_big_stack(|| {
        wconverge_engine::prepare(catalog, runtime, &wconverge_lang::Language)
    });
    match prepared {
        Ok(prepared) if earlier.is_empty() => Ok(Some(prepared)),
        Ok(_) => {
            output::problems(&earlier);
            Ok(None)
        }
        Err(mut problems) => {
            earlier.append(&mut problems);
            output::problems(&earlier);
            Ok(None)
        }
    }
}
