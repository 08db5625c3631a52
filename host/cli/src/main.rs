//! `wconverge`: the command line (**API boundary**: commands, flags, output formats and
//! exit codes are a contract: tests and users rely on them).
//!
//! Exit codes of `apply` follow Puppet's `--detailed-exitcodes`: 0 nothing changed,
//! 2 changes, 4 failures, 6 both. Anything that stops a command before it runs (a bad
//! catalog, a bad policy, a held lock) exits 1.

mod agent;
mod cached_catalog;
mod catalog;
mod commands;
mod data;
mod dirs;
mod facts_command;
mod fleet;
mod generate;
mod input;
mod literal;
mod lock;
mod modules;
mod output;
mod package;
mod plugin_test;
mod plugins_command;
mod reports;
mod resource_command;
mod run;
mod scaffold;
mod setup;
mod signals;
mod timings;
mod types_command;
mod watch;

// mimalloc (its version 2: its version 3 keeps more memory) rather than the C library's
// allocator: a no-op of 5,000 files takes a fifth less time, and a compile of 50,000
// resources two fifths less in as much memory (`cargo bench --bench floors`). Both
// allocate and free many small values on several threads at once.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand, ValueEnum};
use setup::{RuntimeArgs, Trails};
use std::path::PathBuf;
use std::process::ExitCode;

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

#[derive(Subcommand)]
enum Command {
    /// Converge the machine to manifests or a catalog.
    Apply(commands::ApplyArgs),
    /// Compile manifests into a catalog and print it as JSON.
    Compile(commands::CompileArgs),
    /// Check manifests or a catalog against the types' schemas and the graph, changing
    /// nothing.
    Validate(commands::ValidateArgs),
    /// Print the resource graph in application order.
    Graph(commands::GraphArgs),
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
    Requirement(commands::RequirementArgs),
    /// Print this machine's facts as manifests see them (`$facts`), or one by its
    /// dotted name (`os.family`); `--raw` the fact plugins' records; with `--node`, the
    /// facts that node last stored.
    Facts(facts_command::FactsArgs),
    /// Print resources as they are on this machine, as manifest code that changes
    /// nothing when applied (`wconverge resource user root`); without a name, every
    /// resource of the type the facts list (`user`, `group`, `package`).
    Resource(resource_command::ResourceArgs),
    /// The runs' reports in the store, newest first; `reports show ID` prints one.
    Reports {
        #[command(subcommand)]
        command: Option<reports::ReportsCommand>,
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
    /// Keep this machine converged: apply every `--interval` (the arguments are
    /// `apply`'s), or `--once`; `agent status` says how it goes.
    Agent(agent::AgentArgs),
    /// Build the Debian package of this binary into DIR (what `cargo xtask deb` runs).
    #[command(name = "__package-deb", hide = true)]
    PackageDeb {
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
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
pub(crate) enum ReportFormat {
    Human,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum GraphFormat {
    Dot,
    Json,
}

use wconverge_runtime::watchdog;

fn main() -> ExitCode {
    // The watchdog of another wconverge (see `wconverge_runtime::watchdog`): nothing else.
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new(watchdog::WATCHDOG_ARGUMENT)) {
        let rest: Vec<String> = args.map(|arg| arg.to_string_lossy().into_owned()).collect();
        return ExitCode::from(u8::try_from(watchdog::run(&rest)).unwrap_or(1));
    }
    watchdog::enable();
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
            output::ending_error(&error);
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli, trails: &Trails) -> anyhow::Result<u8> {
    match cli.command {
        Command::Apply(args) => commands::apply(args, trails),
        Command::Agent(args) => agent::agent(args),
        Command::PackageDeb { out } => {
            let package = package::build(&out, <Cli as clap::CommandFactory>::command())?;
            output::line(&package.display().to_string());
            Ok(0)
        }
        Command::Compile(args) => commands::compile(args, trails),
        Command::Validate(args) => commands::validate(args, trails),
        Command::Graph(args) => commands::graph(args, trails),
        Command::Types {
            type_name,
            provider,
            manifests,
            runtime,
        } => types_command::types(type_name, provider, manifests, &runtime, trails),
        Command::Requirement(args) => commands::requirement(&args, trails),
        Command::Facts(args) => facts_command::facts(args, trails),
        Command::Resource(args) => resource_command::resource(args, trails),
        Command::Reports {
            command,
            node,
            since,
            format,
            store,
        } => reports::reports_command(
            command.as_ref(),
            node.as_deref(),
            since.as_deref(),
            matches!(format, ReportFormat::Json),
            &store,
        ),
        Command::Store { command } => fleet::store_command(&command),
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
