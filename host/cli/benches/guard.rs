//! Benchmark of one guard: `sh` running `true` through the interpreter plugin (the
//! runtime's `run_guard`, as the engine calls it for every `only_if`), against a direct
//! spawn of `/bin/sh -c true` from Rust. Prints figures and their ratio (the table's
//! target: at most 1.2x); asserts nothing about time.
//!
//! Run it with `scripts/bench` (or `cargo bench -p wconverge-cli --bench guard`).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wconverge_engine::{GuardScript, PluginHost, ScriptStatus};
use wconverge_runtime::policy::Policy;
use wconverge_runtime::{Runtime, RuntimeOptions};

const ROUNDS: usize = 7;
const GUARDS_PER_ROUND: usize = 200;

fn guard() -> GuardScript {
    GuardScript {
        interpreter: "sh".to_owned(),
        plugin: "sh".to_owned(),
        subject: "Exec[bench]".to_owned(),
        secrets: wconverge_engine::Secrets::default(),
        code: "true".to_owned(),
        sensitive: false,
        cwd: None,
        environment: Vec::new(),
        user: None,
        group: None,
        umask: None,
        path: Vec::new(),
        architecture: None,
        timeout: Duration::from_secs(300),
        options: Vec::new(),
    }
}

/// The mean cost of one guard through the plugin over `GUARDS_PER_ROUND` guards.
fn through_plugin(runtime: &Runtime, script: &GuardScript) -> Duration {
    let started = Instant::now();
    for _ in 0..GUARDS_PER_ROUND {
        let output = runtime.run_guard(script).outcome.expect("the guard runs");
        assert_eq!(output.status, ScriptStatus::Exited(0));
    }
    started.elapsed() / GUARDS_PER_ROUND as u32
}

/// The mean cost of one direct spawn of `/bin/sh -c true`, its output captured.
fn direct() -> Duration {
    let started = Instant::now();
    for _ in 0..GUARDS_PER_ROUND {
        let output = Command::new("/bin/sh")
            .args(["-c", "true"])
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .expect("sh runs");
        assert!(output.status.success());
    }
    started.elapsed() / GUARDS_PER_ROUND as u32
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn us(duration: Duration) -> String {
    format!("{:.0} us", duration.as_secs_f64() * 1e6)
}

fn main() {
    let cache = std::env::temp_dir().join(format!("wcv-bench-guard-{}", std::process::id()));
    let runtime = Runtime::new(RuntimeOptions {
        policy: Policy::builtin(),
        cache_dir: Some(cache.clone()),
        builtins: wconverge_builtin::BUILTINS,
        builtin_digests: wconverge_builtin::BUILTIN_DIGESTS,
    })
    .expect("runtime");
    let script = guard();
    // Loading and compiling the plugin is a once-per-machine cost (the cache), not a
    // per-guard one: warm it before measuring.
    let warm = Instant::now();
    runtime.run_guard(&script).outcome.expect("the guard runs");
    println!("guard benchmark ({GUARDS_PER_ROUND} guards per round, median of {ROUNDS} rounds)");
    println!("first guard (loads the sh plugin): {}", us(warm.elapsed()));
    let mut plugin = Vec::new();
    let mut spawn = Vec::new();
    for _ in 0..ROUNDS {
        // Interleaved, so a busy moment of the machine hits both alike.
        spawn.push(direct());
        plugin.push(through_plugin(&runtime, &script));
    }
    let plugin = median(plugin);
    let spawn = median(spawn);
    println!("direct spawn of /bin/sh -c true: {} per run", us(spawn));
    println!(
        "guard `true` through the sh plugin: {} per guard",
        us(plugin)
    );
    println!(
        "ratio: {:.2}x (target: at most 1.20x)",
        plugin.as_secs_f64() / spawn.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(cache);
}
