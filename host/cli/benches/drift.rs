//! Benchmark of drift correction (`wconverge apply --watch-for`, what `wconverge agent
//! --watch` runs) through the release binary: 5,000 managed files, 100 to a directory;
//! 1,000 drifts one after another (a third writes, a third `chmod`s, a third removals,
//! of files picked at random), each timed from just before the change to the moment the
//! run's report of its correction is read from its output (so the figure includes the
//! report); then the run's CPU time and its threads' wake-ups over 10 idle seconds.
//! Checks each correction (content and mode back, the report naming the file); prints
//! figures, asserts nothing about time.
//!
//! Run it with `scripts/bench` (or `cargo bench -p wconverge-cli --bench drift`).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[expect(dead_code, reason = "the benchmark uses part of the shared support")]
mod support;
use support::{Dirs, cores, load, ms};

const FILES: usize = 5_000;
const DRIFTS: usize = 1_000;
const IDLE: Duration = Duration::from_secs(10);

/// The watching run, killed when dropped.
struct Watching(Child);

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The CPU time of all the process's threads (`/proc/PID/task/*/schedstat`) and their
/// voluntary and involuntary context switches: what it did, and how often it woke.
fn cpu_and_switches(pid: u32) -> (Duration, u64) {
    let mut cpu = 0u64;
    let mut switches = 0u64;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks");
    for task in tasks {
        let task = task.expect("task").path();
        if let Ok(text) = std::fs::read_to_string(task.join("schedstat")) {
            cpu += text
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
        if let Ok(text) = std::fs::read_to_string(task.join("status")) {
            for line in text.lines() {
                if line.starts_with("voluntary_ctxt_switches:")
                    || line.starts_with("nonvoluntary_ctxt_switches:")
                {
                    switches += line
                        .split_whitespace()
                        .nth(1)
                        .and_then(|count| count.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
        }
    }
    (Duration::from_nanos(cpu), switches)
}

/// `VmRSS` and `VmHWM` of the process, in MiB.
fn memory(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[at]
}

fn figures(name: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "| {name} | {} | {} | {} | {} | {} |",
        times.len(),
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.9)),
        ms(percentile(&times, 0.99)),
        ms(*times.last().expect("times")),
    );
}

/// Waits for the next report line; when it came.
fn next_report(reports: &mpsc::Receiver<(Instant, String)>, what: &str) -> (Instant, String) {
    reports
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("no report within 30 s: {what}"))
}

fn main() {
    support::serve_as_helper();
    let dirs = Dirs::new("wcv-drift");
    let policy = dirs.policy();
    let (catalog, files) = support::files_catalog(&dirs.root, "watched", FILES);
    println!(
        "drift correction benchmark ({} cores, load average {})",
        cores(),
        load()
    );
    println!("binary: {}\n", support::WCONVERGE);

    let mut command = Command::new(support::WCONVERGE);
    command
        .arg("apply")
        .arg(&catalog)
        .arg("--policy")
        .arg(&policy)
        .args([
            "--watch-for",
            "30m",
            "--debounce",
            "10ms",
            "--format",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (key, value) in dirs.env() {
        command.env(key, value);
    }
    let started = Instant::now();
    let mut child = Watching(command.spawn().expect("wconverge starts"));
    let pid = child.0.id();
    let stdout = child.0.stdout.take().expect("stdout");
    let (tx, reports) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    let (at, first) = next_report(&reports, "the whole run");
    let first: serde_json::Value = serde_json::from_str(&first).expect("a report");
    println!(
        "whole run (first apply) of {FILES} files: {} to its report, {} changed",
        ms(at - started),
        first["summary"]["changed"]
    );
    // The whole run's own writes are checked once more (found in sync, no report).
    std::thread::sleep(Duration::from_secs(3));
    let (rss, peak) = memory(pid);
    println!("watching {FILES} files: {rss} MiB resident ({peak} MiB peak)\n");

    let mut by_kind: [Vec<Duration>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut all = Vec::with_capacity(DRIFTS);
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for drift in 0..DRIFTS {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let (path, content): &(PathBuf, String) = &files[(state % FILES as u64) as usize];
        let kind = drift % 3;
        let before = Instant::now();
        match kind {
            0 => std::fs::write(path, "drift\n").expect("write"),
            1 => std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .expect("chmod"),
            _ => std::fs::remove_file(path).expect("remove"),
        }
        let (at, line) = next_report(&reports, &format!("drift {drift} of {}", path.display()));
        let took = at - before;
        let report: serde_json::Value = serde_json::from_str(&line).expect("a report");
        let named = report["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|resource| {
                resource["resource"] == format!("File[{}]", path.display())
                    && resource["corrective_change"] == true
            });
        assert!(named, "the report names the file: {line}");
        assert_eq!(&std::fs::read_to_string(path).expect("back"), content);
        assert_eq!(mode(path), 0o644);
        by_kind[kind].push(took);
        all.push(took);
        // The check of the correction's own changes, then the next drift.
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("| drift to its correction reported | drifts | median | p90 | p99 | max |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    figures("a write (`std::fs::write`)", by_kind[0].clone());
    figures("a `chmod`", by_kind[1].clone());
    figures("a removal", by_kind[2].clone());
    figures("all", all);

    std::thread::sleep(Duration::from_secs(1));
    let (cpu_before, switches_before) = cpu_and_switches(pid);
    std::thread::sleep(IDLE);
    let (cpu_after, switches_after) = cpu_and_switches(pid);
    let (rss, peak) = memory(pid);
    println!(
        "\nidle for {} s: {} of CPU, {} wake-ups (context switches of all its threads); \
         {rss} MiB resident ({peak} MiB peak)",
        IDLE.as_secs(),
        ms(cpu_after.saturating_sub(cpu_before)),
        switches_after.saturating_sub(switches_before)
    );
    drop(child);
    let _ = std::fs::remove_dir_all(&dirs.root);
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).map_or(0, |meta| meta.permissions().mode() & 0o777)
}
