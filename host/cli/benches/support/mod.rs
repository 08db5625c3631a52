//! What the benchmarks of whole `wconverge` processes share: a run measured in a helper
//! process of the benchmark (so each peak RSS belongs to that run alone), medians, and
//! the machine's state.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) const WCONVERGE: &str = env!("CARGO_BIN_EXE_wconverge");

/// The flag that makes a benchmark binary the helper process of [`measure`].
pub(crate) const MEASURE_CHILD: &str = "--measure-child";

pub(crate) struct Sample {
    pub(crate) wall: Duration,
    pub(crate) peak_rss_kib: i64,
    pub(crate) exit_code: i32,
}

/// In the helper process: runs the command, then reports its wall time and its peak
/// RSS (the maximum over this helper's children, of which there is one).
pub(crate) fn measure_child(command: &[String]) -> ! {
    let started = Instant::now();
    let status = Command::new(&command[0])
        .args(&command[1..])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the measured command starts");
    let wall = started.elapsed();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    println!(
        "{} {} {}",
        wall.as_nanos(),
        usage.max_rss(),
        status.code().unwrap_or(-1)
    );
    std::process::exit(0);
}

/// Becomes the helper process when this benchmark binary was started as one.
pub(crate) fn serve_as_helper() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(position) = args.iter().position(|arg| arg == MEASURE_CHILD) {
        measure_child(&args[position + 1..]);
    }
}

/// One `wconverge` run with `args` and `env`, measured by a helper process.
pub(crate) fn measure(args: &[&str], env: &[(&str, &Path)]) -> Sample {
    let mut command = Command::new(std::env::current_exe().expect("own path"));
    command.arg(MEASURE_CHILD).arg(WCONVERGE).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("helper runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<i64> = text
        .split_whitespace()
        .map(|field| field.parse().expect("helper prints numbers"))
        .collect();
    assert_eq!(fields.len(), 3, "helper output: {text}");
    Sample {
        wall: Duration::from_nanos(u64::try_from(fields[0]).expect("positive")),
        peak_rss_kib: fields[1],
        exit_code: i32::try_from(fields[2]).expect("exit code"),
    }
}

pub(crate) fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

/// The median wall time and the highest peak RSS (KiB) of `samples`.
pub(crate) fn summary(samples: &[Sample]) -> (Duration, i64) {
    (
        median(samples.iter().map(|sample| sample.wall).collect()),
        samples
            .iter()
            .map(|sample| sample.peak_rss_kib)
            .max()
            .unwrap_or(0),
    )
}

pub(crate) fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}
