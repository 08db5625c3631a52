//! Benchmark of fact gathering: all the built-in fact plugins of the built-in policy, as a
//! run pays for it (a new runtime, plugins from a warm cache, every plugin gathering),
//! the target being under 50 ms. Prints figures; asserts nothing about time.
//!
//! Run it with `scripts/bench` (or `cargo bench -p wconverge-cli --bench facts`).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::time::{Duration, Instant};
use wconverge_runtime::policy::Policy;
use wconverge_runtime::{Runtime, RuntimeOptions};

fn gather(cache: &std::path::Path) -> (Duration, usize) {
    let started = Instant::now();
    let runtime = Runtime::new(RuntimeOptions {
        policy: Policy::builtin(),
        cache_dir: Some(cache.to_path_buf()),
        builtins: wconverge_builtin::BUILTINS,
        builtin_digests: wconverge_builtin::BUILTIN_DIGESTS,
    })
    .expect("runtime");
    let (groups, errors) = runtime.gather_facts();
    assert!(errors.is_empty(), "facts gathered: {errors:?}");
    let records = groups.values().map(Vec::len).sum();
    (started.elapsed(), records)
}

fn main() {
    let cache = std::env::temp_dir().join(format!("wcv-bench-facts-{}", std::process::id()));
    let (cold, records) = gather(&cache);
    let mut samples: Vec<Duration> = (0..21).map(|_| gather(&cache).0).collect();
    samples.sort();
    println!("fact gathering benchmark (built-in policy, {records} records, median of 21)");
    println!(
        "first run (compiles the fact plugins): {:.1} ms",
        cold.as_secs_f64() * 1000.0
    );
    println!(
        "gathering with a warm cache: {:.1} ms (best {:.1} ms; target under 50 ms)",
        samples[10].as_secs_f64() * 1000.0,
        samples[0].as_secs_f64() * 1000.0
    );
    let _ = std::fs::remove_dir_all(cache);
}
