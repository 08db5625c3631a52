//! `wconverge agent`: keeps the machine converged on its own, as Puppet's agent does.
//! Every `--interval` (after a random `--splay`) it runs `wconverge apply` with the
//! arguments it was given, one run at a time, each in a process of its own (a run's
//! memory and any crash end with it). Each run takes the run lock and sends its report
//! and facts to the store, spooling them while the store is down, as `apply` does.
//!
//! Signals: SIGTERM or SIGINT stop the agent; a run in progress is asked to finish the
//! resources it is applying and apply nothing more (SIGUSR1 to the run), then the agent
//! exits. SIGHUP reloads the config file: a valid one is used from the next run on, a
//! broken one is refused with why, and the runs go on with the last good one (the runs
//! read a copy of it the agent keeps in the state directory). Every wait has a deadline:
//! a run longer than `--run-timeout` is asked to stop, then killed.
//!
//! The agent's state is `agent.json` in the state directory: `wconverge agent status`
//! prints it (last run, its result, next run, the changes its runs made since it
//! started: drift it corrected).

use crate::fleet::{Config, StoreArgs, time_text};
use crate::output;
use anyhow::{Context, bail};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a run asked to stop (SIGUSR1, then SIGTERM) may take before the next step.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// The name of the agent's state file in the state directory.
const STATE_FILE: &str = "agent.json";
/// The copy of the config file the runs read.
const CONFIG_COPY: &str = "agent.conf";

/// What `wconverge agent` is given.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct AgentArgs {
    #[command(subcommand)]
    pub(crate) command: Option<AgentCommand>,
    /// How often to run: `30m` (the default, or the config file's `runinterval`),
    /// `90s`, `2h`.
    #[arg(long, value_name = "DURATION")]
    pub(crate) interval: Option<String>,
    /// Wait a random time up to this before each run (default: the config file's
    /// `splaylimit`, else none), so that a fleet's nodes do not all run at once.
    #[arg(long, value_name = "DURATION")]
    pub(crate) splay: Option<String>,
    /// Run once and exit with the run's exit code (for a systemd timer or cron).
    #[arg(long, conflicts_with = "watch")]
    pub(crate) once: bool,
    /// Between the whole runs, watch what the resources manage and correct drift as it
    /// happens: just the resources concerned and what they notify, each correction a
    /// report of its own marked `corrective_change`.
    #[arg(long)]
    pub(crate) watch: bool,
    /// With `--watch`: how long changes must be quiet before they are corrected
    /// (default `10ms`; at most a minute).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub(crate) debounce: Option<String>,
    /// The longest a run may take before it is asked to stop (default `1h`).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub(crate) run_timeout: String,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// What each run applies: the arguments of `wconverge apply` (manifests or a
    /// catalog, `--policy`, `--node`, `--jobs`...).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "APPLY ARGS"
    )]
    pub(crate) apply: Vec<String>,
}

#[derive(clap::Subcommand)]
pub(crate) enum AgentCommand {
    /// The agent's state: its last run and result, its next run, the drift it corrected.
    Status {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `--debounce`: a duration of at most a minute.
pub(crate) fn debounce(text: &str) -> anyhow::Result<Duration> {
    if text.bytes().all(|byte| byte.is_ascii_digit()) {
        bail!("`--debounce {text}`: give a unit, `{text}ms` or `{text}s`");
    }
    let duration = parse_duration(text, "--debounce")?;
    if duration > Duration::from_secs(60) {
        bail!("`--debounce {text}`: at most a minute (`10ms`, the default, suits most)");
    }
    Ok(duration)
}

/// A duration as written on the command line or in the config file: `90s`, `30m`, `2h`,
/// `1d`, `20ms`, or seconds.
pub(crate) fn parse_duration(text: &str, what: &str) -> anyhow::Result<Duration> {
    let bad = || anyhow::anyhow!("`{what} {text}`: give a duration such as `90s`, `30m`, `2h`");
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let count: u64 = number.parse().map_err(|_| bad())?;
    let milliseconds = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    let duration = Duration::from_millis(count.checked_mul(milliseconds).ok_or_else(bad)?);
    if duration > Duration::from_secs(366 * 86_400) {
        bail!("`{what} {text}`: at most a year");
    }
    Ok(duration)
}

/// The agent's state, as `agent.json` keeps it.
#[derive(serde::Serialize, serde::Deserialize, Default, Clone)]
struct State {
    pid: u32,
    started: i64,
    interval_seconds: u64,
    runs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_run: Option<LastRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_run: Option<i64>,
    /// Changes made by the runs after the first: drift corrected.
    drift_changes: u64,
    /// Whether it watches for drift between the whole runs.
    #[serde(default)]
    watching: bool,
    /// The corrections of drift it watched for.
    #[serde(default)]
    corrections: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_correction: Option<Correction>,
    /// Whether the agent is still running (false once it has stopped cleanly).
    running: bool,
}

#[derive(serde::Serialize, serde::Deserialize, Default, Clone)]
struct LastRun {
    at: i64,
    exit_code: i32,
    status: String,
    changed: u64,
    failed: u64,
    seconds: f64,
}

/// The last correction of drift the agent watched for.
#[derive(serde::Serialize, serde::Deserialize, Default, Clone)]
struct Correction {
    at: i64,
    changed: u64,
    failed: u64,
    /// What it saw change: `PATH EVENT`.
    drift: Vec<String>,
}

/// What the agent's main loop hears about.
enum Event {
    Signal(Signal),
    /// A report the run printed (a watching run prints one per correction).
    Report(Vec<u8>),
    RunEnded(std::io::Result<std::process::ExitStatus>),
}

/// The largest report the agent reads of a run.
const REPORT_CAP: u64 = 256 << 20;

/// `wconverge agent ...` and `wconverge agent status`.
pub(crate) fn agent(args: AgentArgs) -> anyhow::Result<u8> {
    if let Some(AgentCommand::Status { store }) = &args.command {
        return status(store);
    }
    if args.apply.is_empty() {
        bail!(
            "`wconverge agent` needs what to apply: `wconverge agent site.pp --policy policy.toml`"
        );
    }
    let state_dir = crate::dirs::state_dir(args.store.state_dir.clone())?;
    let run_timeout = parse_duration(&args.run_timeout, "--run-timeout")?;
    // Checked here, not by the first run: a mistake stops the agent before it starts.
    match (&args.debounce, args.watch) {
        (Some(_), false) => {
            bail!("`--debounce` is for `--watch`: add `--watch`, or leave it out")
        }
        (Some(text), true) => {
            debounce(text)?;
        }
        (None, _) => {}
    }
    let (tx, rx) = mpsc::channel();
    watch_signals(tx.clone());
    let mut settings = Settings::load(&args, &state_dir)?;
    let mut state = State {
        pid: std::process::id(),
        started: wconverge_store::now(),
        interval_seconds: settings.interval.as_secs(),
        running: true,
        watching: args.watch,
        ..State::default()
    };
    let mut first_wait = settings.splay_now();
    loop {
        if !args.once {
            state.next_run =
                Some(wconverge_store::now() + i64::try_from(first_wait.as_secs()).unwrap_or(0));
            write_state(&state_dir, &state);
            if let Some(signal) = wait(&rx, first_wait, &mut settings, &args, &state_dir) {
                output::line(&format!("agent: {signal}: stopping"));
                break;
            }
        }
        let run_started = Instant::now();
        let (code, stopped, reloaded) = run(
            &args,
            &mut settings,
            &state_dir,
            run_timeout,
            (&tx, &rx),
            &mut state,
        );
        if args.once {
            state.running = false;
            write_state(&state_dir, &state);
            return Ok(code);
        }
        if let Some(signal) = stopped {
            output::line(&format!("agent: {signal}: the run stopped; stopping"));
            break;
        }
        state.interval_seconds = settings.interval.as_secs();
        first_wait = if !args.watch {
            settings.interval + settings.splay_now()
        } else if reloaded {
            // Ended for a reload: the next whole run, with the new configuration, now.
            settings.splay_now()
        } else {
            // The watching run lasted the interval, unless it could not start (a
            // manifest that does not compile): then the rest of the interval.
            settings.interval.saturating_sub(run_started.elapsed()) + settings.splay_now()
        };
    }
    state.running = false;
    state.next_run = None;
    write_state(&state_dir, &state);
    Ok(0)
}

/// The settings the agent runs with: from the command line, else the config file.
struct Settings {
    interval: Duration,
    splay: Duration,
    /// The copy of the config file the runs read, when there is a config file.
    config_copy: Option<PathBuf>,
}

impl Settings {
    fn load(args: &AgentArgs, state_dir: &Path) -> anyhow::Result<Settings> {
        let (config, text) = Config::load_with_text(&args.store)?;
        let interval = match (&args.interval, config.runinterval()) {
            (Some(text), _) => parse_duration(text, "--interval")?,
            (None, Some(text)) => parse_duration(text, "runinterval")?,
            (None, None) => Duration::from_secs(30 * 60),
        };
        if interval < Duration::from_secs(1) {
            bail!("`--interval`: at least one second");
        }
        let splay = match (&args.splay, config.splaylimit()) {
            (Some(text), _) => parse_duration(text, "--splay")?,
            (None, Some(text)) => parse_duration(text, "splaylimit")?,
            (None, None) => Duration::ZERO,
        };
        let config_copy = match text {
            Some(text) => {
                let path = state_dir.join(CONFIG_COPY);
                crate::dirs::write_private(state_dir, CONFIG_COPY, text.as_bytes()).with_context(
                    || {
                        format!(
                            "cannot keep a copy of the config file in `{}`",
                            path.display()
                        )
                    },
                )?;
                Some(path)
            }
            None => None,
        };
        Ok(Settings {
            interval,
            splay,
            config_copy,
        })
    }

    /// A random wait up to the splay.
    fn splay_now(&self) -> Duration {
        if self.splay.is_zero() {
            return Duration::ZERO;
        }
        // The standard library's hasher keys come from the system's random source (no
        // path to open): enough to spread a fleet's runs.
        let random = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            std::time::SystemTime::now(),
        );
        Duration::from_millis(random % (self.splay.as_millis().max(1) as u64))
    }
}

/// Waits `duration`, or until SIGHUP reloads the config; the signal that stops the
/// agent, if one comes.
fn wait(
    rx: &mpsc::Receiver<Event>,
    duration: Duration,
    settings: &mut Settings,
    args: &AgentArgs,
    state_dir: &Path,
) -> Option<Signal> {
    let until = Instant::now() + duration;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Err(mpsc::RecvTimeoutError::Timeout) => return None,
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            Ok(Event::Signal(Signal::SIGHUP)) => {
                // Reloaded: the next run, with what was reloaded and the manifests
                // compiled again, now (as Puppet's agent restarts on SIGHUP).
                if reload(settings, args, state_dir) {
                    return None;
                }
            }
            Ok(Event::Signal(signal)) => return Some(signal),
            Ok(Event::RunEnded(_) | Event::Report(_)) => {}
        }
    }
}

/// Reloads the configuration on SIGHUP; whether it was.
fn reload(settings: &mut Settings, args: &AgentArgs, state_dir: &Path) -> bool {
    match Settings::load(args, state_dir) {
        Ok(loaded) => {
            *settings = loaded;
            output::line("agent: SIGHUP: the configuration is reloaded");
            true
        }
        Err(error) => {
            output::warning(&format!(
                "agent: SIGHUP: the configuration is not reloaded, the runs go on with the \
                 last good one: {error:#}"
            ));
            false
        }
    }
}

/// One run of `wconverge apply`: its exit code, the signal that stopped the agent
/// during it if one did, and whether a watching run was ended for a reload.
fn run(
    args: &AgentArgs,
    settings: &mut Settings,
    state_dir: &Path,
    run_timeout: Duration,
    (tx, rx): (&mpsc::Sender<Event>, &mpsc::Receiver<Event>),
    state: &mut State,
) -> (u8, Option<Signal>, bool) {
    let started = Instant::now();
    let at = wconverge_store::now();
    let mut command = std::process::Command::new(
        std::env::current_exe().unwrap_or_else(|_| PathBuf::from("wconverge")),
    );
    command
        .arg("apply")
        .args(&args.apply)
        .arg("--format")
        .arg("json");
    command.arg("--state-dir").arg(state_dir);
    // A run whose manifests fail applies the last catalog that compiled.
    command.arg("--keep-catalog");
    // An agent that dies (SIGKILL, a crash) leaves no run behind.
    command.arg(format!("--agent-pid={}", std::process::id()));
    if args.watch {
        // The run watches until the next whole run is due.
        command
            .arg("--watch-for")
            .arg(format!("{}ms", settings.interval.as_millis()))
            .arg(format!(
                "--debounce={}",
                args.debounce.as_deref().unwrap_or("10ms")
            ));
    }
    if let Some(store) = &args.store.store {
        command.arg("--store").arg(store);
    }
    if let Some(copy) = &settings.config_copy {
        command.arg("--config").arg(copy);
    }
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    let child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            output::warning(&format!("agent: the run could not start: {error}"));
            return (1, None, false);
        }
    };
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    let tx = tx.clone();
    let lines = args.watch;
    let mut child = child;
    std::thread::spawn(move || {
        if let Some(stdout) = child.stdout.take() {
            read_reports(stdout, lines, &tx);
        }
        let _ = tx.send(Event::RunEnded(child.wait()));
    });
    // A watching run lasts the interval, then its whole run's time.
    let run_timeout = if args.watch {
        run_timeout + settings.interval
    } else {
        run_timeout
    };
    let code: Option<i32>;
    let mut reloaded = false;
    let mut first: Option<serde_json::Value> = None;
    let mut stopping: Option<Signal> = None;
    let mut asked: Option<Instant> = None;
    let mut escalation = 0;
    loop {
        let deadline = match asked {
            Some(asked) => asked + STOP_GRACE,
            None => started + run_timeout,
        };
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::RunEnded(status)) => {
                code = status.ok().and_then(|status| status.code());
                break;
            }
            Ok(Event::Report(bytes)) => {
                let report = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
                if first.is_none() {
                    let report = report.unwrap_or_default();
                    if reloaded && stopping.is_none() {
                        // A reload came during the whole run: the watch ends now.
                        let _ = nix::sys::signal::kill(pid, Signal::SIGUSR1);
                    }
                    if args.watch {
                        let code = report["exit_code"]
                            .as_i64()
                            .and_then(|code| i32::try_from(code).ok())
                            .unwrap_or(4);
                        whole_run(state, state_dir, (at, started), Some(&report), code);
                    }
                    first = Some(report);
                } else if let Some(report) = report {
                    corrected(state, &report, state_dir);
                }
            }
            // Reloaded for the next runs; this one goes on with what it started with,
            // but for a watching run: once its whole run is done, it ends, so that the
            // next whole run (the manifests compiled again) takes the reload.
            Ok(Event::Signal(Signal::SIGHUP)) => {
                if reload(settings, args, state_dir) && args.watch && stopping.is_none() {
                    output::line(
                        "agent: SIGHUP: the watching run ends (once its whole run is done); \
                         the next whole run compiles the manifests again now",
                    );
                    if first.is_some() && !reloaded {
                        let _ = nix::sys::signal::kill(pid, Signal::SIGUSR1);
                    }
                    reloaded = true;
                }
            }
            Ok(Event::Signal(signal)) => {
                if stopping.is_none() {
                    output::line(&format!(
                        "agent: {signal}: the run finishes the resources in progress and applies nothing more"
                    ));
                    let _ = nix::sys::signal::kill(pid, Signal::SIGUSR1);
                    asked = Some(Instant::now());
                }
                stopping = Some(signal);
            }
            Err(_) => {
                // Past the deadline: asked to stop, then stopped, then killed.
                let next = [Signal::SIGUSR1, Signal::SIGTERM, Signal::SIGKILL][escalation.min(2)];
                output::warning(&format!("agent: the run takes too long: {next} to it"));
                let _ = nix::sys::signal::kill(pid, next);
                escalation += 1;
                asked = Some(Instant::now());
            }
        }
    }
    let code = code.unwrap_or(1);
    // A watching run's whole run was counted when its report came; its process ends
    // with the interval.
    if !(args.watch && first.is_some()) {
        whole_run(state, state_dir, (at, started), first.as_ref(), code);
    }
    (u8::try_from(code).unwrap_or(1), stopping, reloaded)
}

/// A whole run ended (for a watching run: its report came): counted, said, and kept in
/// the agent's state.
fn whole_run(
    state: &mut State,
    state_dir: &Path,
    (at, started): (i64, Instant),
    report: Option<&serde_json::Value>,
    code: i32,
) {
    let seconds = started.elapsed().as_secs_f64();
    let count = |key: &str| {
        report
            .and_then(|report| report["summary"][key].as_u64())
            .unwrap_or(0)
    };
    let (changed, failed, skipped) = (count("changed"), count("failed"), count("skipped"));
    let status = match code {
        0 => "unchanged",
        2 => "changed",
        1 => "not run",
        _ => "failed",
    };
    state.runs += 1;
    if state.watching {
        // The next whole run follows the watch, an interval from now.
        state.next_run =
            Some(wconverge_store::now() + i64::try_from(state.interval_seconds).unwrap_or(0));
    } else if state.runs > 1 {
        // Without a watch, a later run's changes are the drift it corrected (with a watch,
        // the corrections count theirs, and a whole run's are the catalog's).
        state.drift_changes += changed;
    }
    state.last_run = Some(LastRun {
        at,
        exit_code: code,
        status: status.to_owned(),
        changed,
        failed,
        seconds,
    });
    write_state(state_dir, state);
    let skipped = if skipped > 0 {
        format!(", {skipped} skipped (a dependency failed)")
    } else {
        String::new()
    };
    output::line(&format!(
        "agent: run {} at {}: {status} (exit {code}), {changed} changed, {failed} failed{skipped}, {seconds:.2} s",
        state.runs,
        time_text(at)
    ));
    if let Some(report) = report {
        say_failures(report);
    }
}

/// The most failed resources the agent's log names for one report.
const FAILURES_SAID: usize = 10;

/// Says in the agent's log which resources failed and why (the report has the rest).
fn say_failures(report: &serde_json::Value) {
    let failed: Vec<&serde_json::Value> = report["resources"]
        .as_array()
        .map(|resources| {
            resources
                .iter()
                .filter(|resource| resource["status"] == "failed")
                .collect()
        })
        .unwrap_or_default();
    for resource in failed.iter().take(FAILURES_SAID) {
        output::line(&format!(
            "agent:   {}: {}",
            resource["resource"].as_str().unwrap_or("?"),
            resource["error"].as_str().unwrap_or("failed")
        ));
    }
    if failed.len() > FAILURES_SAID {
        output::line(&format!(
            "agent:   and {} more failed (`wconverge reports show ID` has them all)",
            failed.len() - FAILURES_SAID
        ));
    }
}

/// Sends the reports a run prints: each line (a watching run's JSON Lines), or the
/// whole output as one.
fn read_reports(stdout: std::process::ChildStdout, lines: bool, tx: &mpsc::Sender<Event>) {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(stdout);
    loop {
        let mut bytes = Vec::new();
        let read = if lines {
            (&mut reader).take(REPORT_CAP).read_until(b'\n', &mut bytes)
        } else {
            (&mut reader).take(REPORT_CAP).read_to_end(&mut bytes)
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if bytes.len() as u64 >= REPORT_CAP && !bytes.ends_with(b"\n") {
            output::warning(&format!(
                "agent: a report of the run is over {} MiB: not read",
                REPORT_CAP >> 20
            ));
            // The rest of it, to the end of its line, is skipped.
            let mut rest = Vec::new();
            let _ = reader.read_until(b'\n', &mut rest);
            continue;
        }
        if tx.send(Event::Report(bytes)).is_err() {
            return;
        }
    }
    // What remains unread (after an error) is drained so that the run never blocks.
    let _ = std::io::copy(&mut reader, &mut std::io::sink());
}

/// A correction the watching run reported.
fn corrected(state: &mut State, report: &serde_json::Value, state_dir: &Path) {
    let count = |key: &str| report["summary"][key].as_u64().unwrap_or(0);
    let drift: Vec<String> = report["drift"]
        .as_array()
        .map(|seen| {
            seen.iter()
                .map(|drift| {
                    format!(
                        "{} {}",
                        drift["path"].as_str().unwrap_or("?"),
                        drift["event"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let corrective = report["resources"].as_array().map_or(0, |resources| {
        resources
            .iter()
            .filter(|resource| resource["corrective_change"] == true)
            .count() as u64
    });
    state.corrections += 1;
    state.drift_changes += corrective;
    let at = wconverge_store::now();
    let skipped = match count("skipped") {
        0 => String::new(),
        skipped => format!(", {skipped} skipped (a dependency failed)"),
    };
    output::line(&format!(
        "agent: drift at {}: {}: {} changed, {} failed{skipped}",
        time_text(at),
        drift.join(", "),
        count("changed"),
        count("failed")
    ));
    say_failures(report);
    state.last_correction = Some(Correction {
        at,
        changed: count("changed"),
        failed: count("failed"),
        drift,
    });
    write_state(state_dir, state);
}

/// Blocks the signals the agent handles (SIGUSR1 too, which it sends its runs, which
/// unblock it) and sends each as an event.
fn watch_signals(tx: mpsc::Sender<Event>) {
    let mut signals = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        signals.add(signal);
    }
    if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&signals), None).is_err() {
        return;
    }
    std::thread::spawn(move || {
        while let Ok(signal) = signals.wait() {
            if tx.send(Event::Signal(signal)).is_err() {
                return;
            }
        }
    });
}

fn write_state(state_dir: &Path, state: &State) {
    let Ok(text) = serde_json::to_string_pretty(state) else {
        return;
    };
    if let Err(error) = crate::dirs::write_private(state_dir, STATE_FILE, text.as_bytes()) {
        output::warning(&format!("agent: its state could not be written: {error}"));
    }
}

/// `wconverge agent status`.
fn status(store: &StoreArgs) -> anyhow::Result<u8> {
    let state_dir = crate::dirs::state_dir(store.state_dir.clone())?;
    let path = state_dir.join(STATE_FILE);
    let bytes = match wconverge_runtime::read_regular(&path, 1 << 20) {
        Ok(bytes) => bytes,
        Err(_) => {
            output::line(&format!(
                "no agent has run with the state directory `{}`",
                state_dir.display()
            ));
            return Ok(3);
        }
    };
    let state: State = serde_json::from_slice(&bytes)
        .with_context(|| format!("`{}` is not the agent's state", path.display()))?;
    let alive = state.running
        && nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(state.pid).unwrap_or(0)),
            None,
        )
        .is_ok();
    let mut text = format!(
        "agent: {} (pid {}, started {}), a run every {} s\n",
        if alive { "running" } else { "not running" },
        state.pid,
        time_text(state.started),
        state.interval_seconds
    );
    match &state.last_run {
        Some(last) => text.push_str(&format!(
            "last run: {}: {} (exit {}), {} changed, {} failed, {:.2} s\n",
            time_text(last.at),
            last.status,
            last.exit_code,
            last.changed,
            last.failed,
            last.seconds
        )),
        None => text.push_str("last run: none yet\n"),
    }
    if let (true, Some(next)) = (alive, state.next_run) {
        text.push_str(&format!("next run: {}\n", time_text(next)));
    }
    text.push_str(&format!(
        "runs: {}; drift corrected since it started: {} change{}\n",
        state.runs,
        state.drift_changes,
        if state.drift_changes == 1 { "" } else { "s" }
    ));
    if state.watching {
        text.push_str(&format!(
            "watching for drift: {} correction{}",
            state.corrections,
            if state.corrections == 1 { "" } else { "s" }
        ));
        match &state.last_correction {
            Some(last) => text.push_str(&format!(
                ", the last at {}: {} ({} changed, {} failed)\n",
                time_text(last.at),
                last.drift.join(", "),
                last.changed,
                last.failed
            )),
            None => text.push('\n'),
        }
    }
    output::text(&text);
    Ok(if alive { 0 } else { 3 })
}
