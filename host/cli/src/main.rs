//! `wconverge`: the command line (**API boundary**: commands, flags, output formats and
//! exit codes are a contract; see DESIGN section 9).
//!
//! Exit codes of `apply` follow Puppet's `--detailed-exitcodes`: 0 nothing changed,
//! 2 changes, 4 failures, 6 both. Anything that stops a command before it runs (a bad
//! catalog, a bad policy, a held lock) exits 1.

mod dirs;
mod output;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use wconverge_catalog::Catalog;
use wconverge_engine::{Mode, Prepared};
use wconverge_runtime::policy::Policy;
use wconverge_runtime::{Runtime, RuntimeOptions};

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
    /// Where compiled plugins are cached (default: /var/cache/wconverge as root, else
    /// $XDG_CACHE_HOME/wconverge; or $WCONVERGE_CACHE_DIR).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Converge the machine to a catalog.
    Apply {
        /// The catalog, as JSON (docs/catalog-format.md).
        catalog: PathBuf,
        /// Report what would change; change nothing.
        #[arg(long)]
        noop: bool,
        #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
        format: ReportFormat,
        /// Where the run lock lives (default: /var/lib/wconverge as root, else
        /// $XDG_STATE_HOME/wconverge; or $WCONVERGE_STATE_DIR).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Check a catalog against the types' schemas and the graph, changing nothing.
    Validate {
        catalog: PathBuf,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Print the resource graph in application order.
    Graph {
        catalog: PathBuf,
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Show the resource types the plugins provide, or one type's schema.
    Types {
        #[arg(value_name = "TYPE")]
        type_name: Option<String>,
        #[command(flatten)]
        runtime: RuntimeArgs,
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
            let code = if error.use_stderr() { 1 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WCONVERGE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            output::error(&format!("{error:#}"));
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Apply {
            catalog,
            noop,
            format,
            state_dir,
            runtime,
        } => {
            let catalog = read_catalog(&catalog)?;
            let state_dir = dirs::state_dir(state_dir)?;
            let _lock = dirs::RunLock::acquire(&state_dir)?;
            let runtime = runtime_for(&runtime)?;
            let Some(prepared) = prepare(&catalog, &runtime)? else {
                return Ok(1);
            };
            let mode = if noop { Mode::Noop } else { Mode::Apply };
            let report = wconverge_engine::run(&prepared, &runtime, mode);
            match format {
                ReportFormat::Human => output::report_human(&report),
                ReportFormat::Json => output::json(&report),
            }
            Ok(u8::try_from(report.exit_code).expect("exit codes are 0 to 6"))
        }
        Command::Validate { catalog, runtime } => {
            let catalog_path = catalog;
            let catalog = read_catalog(&catalog_path)?;
            let runtime = runtime_for(&runtime)?;
            Ok(match prepare(&catalog, &runtime)? {
                Some(prepared) => {
                    output::line(&format!(
                        "{}: valid, {} resources",
                        catalog_path.display(),
                        prepared.resources.len()
                    ));
                    0
                }
                None => 1,
            })
        }
        Command::Graph {
            catalog,
            format,
            runtime,
        } => {
            let catalog = read_catalog(&catalog)?;
            let runtime = runtime_for(&runtime)?;
            let Some(prepared) = prepare(&catalog, &runtime)? else {
                return Ok(1);
            };
            match format {
                GraphFormat::Dot => output::graph_dot(&prepared),
                GraphFormat::Json => output::graph_json(&prepared),
            }
            Ok(0)
        }
        Command::Types { type_name, runtime } => {
            let runtime = runtime_for(&runtime)?;
            let mut failed = false;
            let mut schemas = Vec::new();
            for summary in runtime.plugin_summaries() {
                match summary {
                    Ok(summary) => schemas.extend(summary.types),
                    Err(error) => {
                        output::error(&error.to_string());
                        failed = true;
                    }
                }
            }
            schemas.sort_by(|a, b| a.name.cmp(&b.name));
            match type_name {
                None => output::types_list(&schemas),
                Some(name) => match schemas.iter().find(|schema| schema.name == name) {
                    Some(schema) => output::type_detail(schema),
                    None => bail!(
                        "no plugin of the policy provides type `{name}`; `wconverge types` lists them"
                    ),
                },
            }
            Ok(u8::from(failed))
        }
        Command::Plugins {
            command: PluginsCommand::List { runtime },
        } => {
            let runtime = runtime_for(&runtime)?;
            let summaries = runtime.plugin_summaries();
            let failed = summaries.iter().any(Result::is_err);
            output::plugins_list(&summaries);
            Ok(u8::from(failed))
        }
    }
}

fn read_catalog(path: &Path) -> anyhow::Result<Catalog> {
    if path.extension().is_some_and(|extension| extension == "wcv") {
        bail!(
            "`{}` is a manifest; this wconverge applies catalogs in JSON (docs/catalog-format.md)",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the catalog `{}`", path.display()))?;
    Catalog::from_json(&text).map_err(|error| match error {
        wconverge_catalog::Error::Syntax {
            message,
            line,
            column,
        } => anyhow::anyhow!("{}:{line}:{column}: {message}", path.display()),
        other => anyhow::anyhow!("{}: {other}", path.display()),
    })
}

fn runtime_for(args: &RuntimeArgs) -> anyhow::Result<Runtime> {
    let policy = match &args.policy {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the policy `{}`", path.display()))?;
            let base = path.parent().map(|parent| {
                if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                }
            });
            Policy::parse(&text, &path.display().to_string(), base)?
        }
        None => Policy::builtin(),
    };
    let cache_dir = dirs::cache_dir(args.cache_dir.clone());
    Ok(Runtime::new(RuntimeOptions {
        policy,
        cache_dir: cache_dir.map(|dir| dir.join("components")),
        builtins: wconverge_builtin::BUILTINS,
    })?)
}

/// Validates the catalog; prints every problem and returns `None` if there are any.
fn prepare(catalog: &Catalog, runtime: &Runtime) -> anyhow::Result<Option<Prepared>> {
    match wconverge_engine::prepare(catalog, runtime) {
        Ok(prepared) => Ok(Some(prepared)),
        Err(problems) => {
            output::problems(&problems);
            Ok(None)
        }
    }
}
