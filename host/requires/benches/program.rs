//! Benchmark of resource programs: a 20-line program evaluated over 5,000 package
//! records (the target: under 5 ms). Prints figures; asserts nothing about time.
//!
//! Run it with `scripts/bench` (or `cargo bench -p wconverge-requires --bench program`).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::time::{Duration, Instant};
use wconverge_requires::{Facts, Program};

fn main() {
    let packages: Vec<Vec<(String, String)>> = (0..5000)
        .map(|idx| {
            vec![
                ("name".to_owned(), format!("package-{idx:04}")),
                (
                    "version".to_owned(),
                    format!("{}.{}.{}", idx % 7, idx % 13, idx),
                ),
                (
                    "architecture".to_owned(),
                    if idx % 3 == 0 { "all" } else { "amd64" }.to_owned(),
                ),
            ]
        })
        .collect();
    let mut facts = Facts::default();
    facts.groups.insert("package".to_owned(), packages);
    // Twenty lines; most match late in the list or never, so most walk all records.
    let mut lines = Vec::new();
    for idx in 0..16 {
        lines.push(format!("package.name == 'package-{:04}'", 4999 - idx * 7));
    }
    lines.push("package.architecture in ['amd64', 'arm64'] and package.name != 'x'".to_owned());
    lines.push("package.name == 'package-4990' or package.version == '0.0.0'".to_owned());
    lines.push("all(package.name != 'ubuntu-desktop')".to_owned());
    lines.push("'package-49' in package.name and package.architecture == 'all'".to_owned());
    let text = lines.join("\n");
    let parse_started = Instant::now();
    let program = Program::parse(&text).expect("the benchmark program is valid");
    let parsed = parse_started.elapsed();
    assert!(
        program.evaluate(&facts).holds,
        "the benchmark program holds"
    );
    let mut samples: Vec<Duration> = (0..51)
        .map(|_| {
            let started = Instant::now();
            let verdict = program.evaluate(&facts);
            let elapsed = started.elapsed();
            assert!(verdict.holds);
            elapsed
        })
        .collect();
    samples.sort();
    println!("resource program benchmark (20 lines, 5,000 package records, median of 51)");
    println!("parse: {:.3} ms", parsed.as_secs_f64() * 1000.0);
    println!(
        "evaluate: {:.3} ms (best {:.3} ms; target under 5 ms)",
        samples[25].as_secs_f64() * 1000.0,
        samples[0].as_secs_f64() * 1000.0
    );
}
