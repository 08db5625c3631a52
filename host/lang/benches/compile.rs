//! Benchmark of the compile phase: a generated manifest of 50,000 resources (about
//! 10 MB) with resource defaults, classes, a defined type, relationships (metaparameters
//! and chains) and a collector realizing virtual resources. Prints wall time (best and
//! median of several runs) and the peak memory of a process that does one compile;
//! asserts nothing about time.
//!
//! Run it with `scripts/bench` (or `cargo bench -p wconverge-lang --bench compile`).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::process::Command;
use std::time::{Duration, Instant};
use wconverge_lang::{CompileOptions, KnownTypes, Source, compile};

#[path = "support/manifest.rs"]
mod support;
use support::manifest;

const RUNS: usize = 5;

fn types() -> KnownTypes {
    let mut types = KnownTypes::new();
    types.insert(
        "file",
        [
            "path", "ensure", "content", "mode", "owner", "group", "backup",
        ],
    );
    types
}

/// Compiles `text`, moved into the source as the CLI does with what it read.
fn compile_once(text: String, types: &KnownTypes) -> (Duration, usize, usize) {
    let sources = [Source::new("bench.wcv", text)];
    let started = Instant::now();
    let compiled = compile(&sources, &CompileOptions::new("bench.example.com", types));
    let elapsed = started.elapsed();
    let catalog = compiled.catalog.unwrap_or_else(|| {
        panic!(
            "the benchmark manifest must compile: {:?}",
            compiled.diagnostics.first()
        )
    });
    let n_edges = catalog.edges.len()
        + catalog
            .resources
            .iter()
            .map(|resource| resource.metaparams.require.len())
            .sum::<usize>();
    (elapsed, catalog.resources.len(), n_edges)
}

/// Peak resident memory of this process so far, from /proc/self/status.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

fn main() {
    if std::env::args().any(|arg| arg == "--measure-child") {
        // One compile in a fresh process: its peak memory is the figure.
        let text = manifest();
        let (elapsed, _, _) = compile_once(text, &types());
        println!("{} {}", elapsed.as_nanos(), peak_rss_kib());
        return;
    }
    let text = manifest();
    let types = types();
    println!(
        "compile: generated manifest of {:.1} MB, {} lines",
        text.len() as f64 / 1e6,
        text.lines().count()
    );
    let mut times = Vec::with_capacity(RUNS);
    let mut shape = (0, 0);
    for _ in 0..RUNS {
        let (elapsed, n_resources, n_edges) = compile_once(text.clone(), &types);
        times.push(elapsed);
        shape = (n_resources, n_edges);
    }
    times.sort();
    println!(
        "compile: {} resources, {} relationships: best {:.0} ms, median {:.0} ms over {RUNS} runs (target: under 1 s)",
        shape.0,
        shape.1,
        times[0].as_secs_f64() * 1e3,
        times[RUNS / 2].as_secs_f64() * 1e3
    );
    let output = Command::new(std::env::current_exe().expect("own path"))
        .arg("--measure-child")
        .output()
        .expect("the measuring child runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<u64> = text
        .split_whitespace()
        .filter_map(|field| field.parse().ok())
        .collect();
    assert_eq!(fields.len(), 2, "child output: {text}");
    println!(
        "compile: peak memory of a process generating the manifest and compiling it once: {:.0} MiB (target: under 150 MiB)",
        fields[1] as f64 / 1024.0
    );
}
