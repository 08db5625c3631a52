//! The commands that work on a catalog (`apply`, `compile`, `validate`, `graph`) and on
//! facts (`facts`, `requirement`): what each is given, and what it does.

use crate::catalog::{
    EarlyCatalog, InputArgs, Loaded, Publish, has_lazy, load, load_with_sources, module_path,
    prepare, prepare_for_run,
};
use crate::setup::{RuntimeArgs, Trails, runtime_for};
use crate::{GraphFormat, ReportFormat, dirs, fleet, input, output, signals};
use std::path::{Path, PathBuf};
use wconverge_engine::Mode;

/// What `wconverge apply` is given.
#[derive(clap::Args)]
pub(crate) struct ApplyArgs {
    #[command(flatten)]
    pub(crate) input: InputArgs,
    /// Report what would change; change nothing.
    #[arg(long)]
    pub(crate) noop: bool,
    /// Print each change's diff under it (a unified diff of a file's content, a value
    /// before and after), as its provider gave it; never a sensitive attribute's.
    #[arg(long)]
    pub(crate) show_diff: bool,
    /// Also say what was skipped by a guard (`unless`, `onlyif`, `creates`), which a run
    /// otherwise counts without a line (the JSON report always has it).
    #[arg(long, short = 'v')]
    pub(crate) verbose: bool,
    /// After the report, where the time went: the phases (facts, compile, prepare,
    /// run, report) and the slowest resources, each with the time of its guards, its
    /// check, its change and its refresh.
    #[arg(long)]
    pub(crate) timings: bool,
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub(crate) format: ReportFormat,
    /// How many resources to apply at once (default: the number of cores). A
    /// resource still waits for those it depends on; the report is the same as
    /// with `--jobs 1`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) jobs: Option<u16>,
    /// Keep the store's reports this many days (default: the config file's
    /// `keep_reports`, else 14); older ones go when this run's report is stored.
    #[arg(long, value_name = "DAYS", value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub(crate) keep_reports: Option<u32>,
    /// After the run, watch what the resources manage this long and correct drift as
    /// it happens, each correction a report of its own (what `wconverge agent --watch`
    /// runs; the reports as JSON Lines with `--format json`).
    #[arg(long, value_name = "DURATION", hide = true, conflicts_with = "noop")]
    pub(crate) watch_for: Option<String>,
    /// Keep the catalog in the state directory when the manifests compile, and apply the
    /// one kept when they do not (what `wconverge agent` asks of its runs).
    #[arg(long, hide = true)]
    pub(crate) keep_catalog: bool,
    /// The agent that started this run: when it dies, the run finishes the resources it
    /// is applying and stops, as on SIGTERM (its parent's death signal).
    #[arg(long, value_name = "PID", hide = true)]
    pub(crate) agent_pid: Option<u32>,
    /// With `--watch-for`: how long changes must be quiet before they are corrected.
    #[arg(long, value_name = "DURATION", hide = true, default_value = "10ms")]
    pub(crate) debounce: String,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
    #[command(flatten)]
    pub(crate) store: fleet::StoreArgs,
}

/// What `wconverge compile` is given.
#[derive(clap::Args)]
pub(crate) struct CompileArgs {
    #[command(flatten)]
    pub(crate) input: InputArgs,
    /// Compile for the node `--node` names with the facts it last stored, not this
    /// machine's: a fleet compiles centrally and applies on each node.
    #[arg(long, requires = "node")]
    pub(crate) facts_from_store: bool,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
    #[command(flatten)]
    pub(crate) store: fleet::StoreArgs,
}

/// What `wconverge validate` is given.
#[derive(clap::Args)]
pub(crate) struct ValidateArgs {
    #[command(flatten)]
    pub(crate) input: InputArgs,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
    #[command(flatten)]
    pub(crate) store: fleet::StoreArgs,
}

/// What `wconverge graph` is given.
#[derive(clap::Args)]
pub(crate) struct GraphArgs {
    #[command(flatten)]
    pub(crate) input: InputArgs,
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    pub(crate) format: GraphFormat,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
    #[command(flatten)]
    pub(crate) store: fleet::StoreArgs,
}

/// What `wconverge requirement` is given.
#[derive(clap::Args)]
pub(crate) struct RequirementArgs {
    #[arg(value_name = "PROGRAM")]
    pub(crate) program: String,
    /// The facts, as JSON: `{"group": [{"key": "value"}, ...]}`, instead of this
    /// machine's.
    #[arg(long, value_name = "FILE")]
    pub(crate) facts: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

/// What `wconverge facts` is given.
/// `wconverge apply`: the run's exit code, Puppet's detailed exit codes.
pub(crate) fn apply(args: ApplyArgs, trails: &Trails) -> anyhow::Result<u8> {
    let ApplyArgs {
        input,
        noop,
        show_diff,
        verbose,
        timings,
        format,
        jobs,
        keep_reports,
        watch_for,
        keep_catalog,
        agent_pid,
        debounce,
        runtime,
        store,
    } = args;
    let watching = match &watch_for {
        Some(duration) => Some(crate::watch::Watching {
            duration: crate::agent::parse_duration(duration, "--watch-for")?,
            debounce: crate::agent::debounce(&debounce)?,
        }),
        None => None,
    };
    signals::watch();
    if let Some(agent) = agent_pid {
        // SIGUSR1, which `signals` handles as the agent's own stop.
        if nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGUSR1).is_err()
            || nix::unistd::getppid().as_raw() != i32::try_from(agent).unwrap_or(-1)
        {
            anyhow::bail!("the agent (process {agent}) that started this run is gone");
        }
    }
    let early = EarlyCatalog::start(&input);
    let runtime = runtime_for(&runtime, trails)?;
    let state_dir = dirs::state_dir(store.state_dir.clone())?;
    let mut fleet = fleet::Fleet::new(&store, Some(&state_dir))?;
    if let Some(days) = keep_reports {
        fleet.keep_reports = days;
    }
    let milliseconds = |since: std::time::Instant| since.elapsed().as_secs_f64() * 1000.0;
    let load_started = std::time::Instant::now();
    let mut cached = false;
    let (mut loaded, problems) =
        match load_with_sources(&input, &runtime, &fleet, (Publish::Yes, early))? {
            Some(found) => found,
            None => {
                let instead = keep_catalog
                    .then(|| crate::cached_catalog::instead(&state_dir))
                    .flatten();
                let Some(instead) = instead else {
                    return Ok(1);
                };
                cached = true;
                match load_with_sources(&instead, &runtime, &fleet, (Publish::No, None))? {
                    Some(found) => found,
                    None => return Ok(1),
                }
            }
        };
    let loaded_ms = milliseconds(load_started);
    let lock = dirs::RunLock::acquire(&state_dir)?;
    // Asked before the values are moved out of the catalog.
    let lazy = has_lazy(&loaded.catalog);
    // Kept whole before its values are moved out for the run, once it is valid.
    let keep = (keep_catalog && !cached).then(|| loaded.catalog.clone());
    let prepare_started = std::time::Instant::now();
    let Some(prepared) = prepare_for_run(&mut loaded, &runtime, problems)? else {
        return Ok(1);
    };
    if let Some(catalog) = &keep {
        crate::cached_catalog::keep(&state_dir, catalog);
    }
    drop(keep);
    let prepare_ms = milliseconds(prepare_started);
    let catalog = &loaded.catalog;
    // Components compiled before the run (an empty cache) took time the run's own
    // duration does not count: the summary adds it.
    let compiled_before = runtime.compiled();
    let mode = if noop { Mode::Noop } else { Mode::Apply };
    let jobs = jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        usize::from,
    );
    let mut watcher = match watching.filter(|_| mode == Mode::Apply) {
        Some(watching) => Some(crate::watch::Watcher::start(&prepared, &runtime, watching)?),
        None => None,
    };
    let (report, node_attributes) = crate::run::run_prepared(
        (&prepared, &runtime),
        (mode, jobs, lazy),
        wconverge_engine::Scope::default(),
    );
    if let Some(watcher) = &mut watcher {
        watcher.after_whole_run();
    }
    // One sync per directory the run changed, rather than one per file: part of the
    // run's phase.
    let sync_started = std::time::Instant::now();
    let unsynced = runtime.sync_directories();
    let mut report = report;
    if cached {
        report.cached_catalog_status = Some("on_failure");
        report.exit_code |= 4;
    }
    report.phases = Some(wconverge_engine::report::Phases {
        facts_ms: loaded.facts_ms,
        compile_ms: (loaded_ms - loaded.facts_ms).max(0.0),
        prepare_ms,
        run_ms: report.duration_ms + milliseconds(sync_started),
    });
    let report_started = std::time::Instant::now();
    match format {
        ReportFormat::Human => output::report_human(
            &report,
            (show_diff, verbose),
            (compiled_before.time, runtime.compiled()),
        ),
        ReportFormat::Json if watching.is_some() => output::json_line(&report),
        ReportFormat::Json => output::json(&report),
    }
    output::held_refusals(Some(&report));
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
    if timings {
        crate::timings::print(
            &report,
            milliseconds(report_started),
            matches!(format, ReportFormat::Json),
        );
    }
    drop(lock);
    if let Some(watcher) = watcher {
        let context = crate::watch::Context {
            prepared: &prepared,
            runtime: &runtime,
            fleet: &fleet,
            state_dir: &state_dir,
            node: &node,
            format,
            jobs,
            lazy,
        };
        code |= crate::watch::watch_and_correct(&context, &report, node_attributes, watcher)?;
    }
    // The process ends next, and its memory with it: a catalog of many
    // resources is not freed one value at a time first.
    std::mem::forget((loaded, prepared, report));
    Ok(code)
}

/// `wconverge compile`: the catalog as JSON on stdout.
pub(crate) fn compile(args: CompileArgs, trails: &Trails) -> anyhow::Result<u8> {
    let CompileArgs {
        input,
        facts_from_store,
        runtime,
        store,
    } = args;
    let runtime = runtime_for(&runtime, trails)?;
    let fleet = fleet::Fleet::of(&store)?;
    let publish = if facts_from_store {
        Publish::FactsFromStore
    } else {
        Publish::Yes
    };
    let Some(Loaded { catalog, .. }) = load(
        &input,
        &runtime,
        &module_path(&input),
        &fleet,
        (publish, None),
    )?
    else {
        return Ok(1);
    };
    output::json(&catalog);
    // The process ends next: the catalog goes with it, not value by value.
    std::mem::forget(catalog);
    Ok(0)
}

/// `wconverge validate`: 0 when the catalog is valid, else 1 with every problem printed.
pub(crate) fn validate(args: ValidateArgs, trails: &Trails) -> anyhow::Result<u8> {
    let ValidateArgs {
        input,
        runtime,
        store,
    } = args;
    let runtime = runtime_for(&runtime, trails)?;
    let fleet = fleet::Fleet::of(&store)?;
    let Some((loaded, problems)) =
        load_with_sources(&input, &runtime, &fleet, (Publish::No, None))?
    else {
        return Ok(1);
    };
    Ok(match prepare(&loaded, &runtime, problems)? {
        Some(prepared) if !crate::catalog::granted(&prepared, &runtime, &loaded.sources) => 1,
        Some(prepared) => {
            let names: Vec<String> = loaded
                .sources
                .iter()
                .take(input.files.len() + usize::from(input.execute.is_some()))
                .map(|source| source.name.clone())
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

/// `wconverge graph`: the resource graph in application order.
pub(crate) fn graph(args: GraphArgs, trails: &Trails) -> anyhow::Result<u8> {
    let GraphArgs {
        input,
        format,
        runtime,
        store,
    } = args;
    let runtime = runtime_for(&runtime, trails)?;
    let fleet = fleet::Fleet::of(&store)?;
    let Some((loaded, problems)) =
        load_with_sources(&input, &runtime, &fleet, (Publish::No, None))?
    else {
        return Ok(1);
    };
    let Some(prepared) = prepare(&loaded, &runtime, problems)? else {
        return Ok(1);
    };
    match format {
        GraphFormat::Dot => output::graph_dot(&prepared),
        GraphFormat::Json => output::graph_json(&prepared),
    }
    Ok(0)
}

/// `wconverge requirement`: 0 true, 1 false, 2 invalid (the program or the facts).
pub(crate) fn requirement(args: &RequirementArgs, trails: &Trails) -> anyhow::Result<u8> {
    let RequirementArgs {
        program: text,
        facts,
        runtime,
    } = args;
    let program = match wconverge_requires::Program::parse(text) {
        Ok(program) => program,
        Err(errors) => {
            output::program_errors(&errors, text);
            return Ok(2);
        }
    };
    let facts = match facts.as_deref() {
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
                    output::ending_error(&error);
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
            wconverge_requires::Facts { groups }
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
fn read_facts(path: &Path) -> Result<wconverge_requires::Facts, String> {
    let text = input::read_text(path, "file of facts", input::FACTS_BYTES)?;
    Ok(wconverge_requires::Facts {
        groups: fleet::facts_from_json(&text, &path.display().to_string())?,
    })
}
