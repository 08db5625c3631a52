//! The performance table: each workload through the release `wconverge` binary (whole
//! processes, medians, peak RSS) against its floor measured in the same run by a small
//! native program here:
//!
//! - `apply` of an empty `.wcv` manifest with the built-in policy, against `apply` of
//!   an empty JSON catalog;
//! - a no-op re-apply of 5,000 files, against a loop that `lstat`s, opens, reads and
//!   compares each file;
//! - 200 `exec` resources whose `unless` guard (`test -e FILE`) holds, against 200
//!   spawns of `/bin/sh -c 'test -e FILE'` with their output captured;
//! - the first apply of 5,000 files, against a loop that writes each as the file
//!   provider must (a temporary file, `fchmod`, `write`, `fsync`, `rename`, `fsync` of
//!   the directory);
//! - a no-op re-apply of 5,000 files with 200 guarded `exec`s among them (one after
//!   every 25 files, no relationships: each a barrier in manifest order), against the
//!   floors of the two rows above added up;
//! - `wconverge compile` of 50,000 resources (defaults, classes, 5,000 defined type
//!   instances, a collector realizing 5,000 virtual resources): no floor, a target.
//!
//! The rows of `apply` run with the default `--jobs` (the number of cores), and again
//! with `--jobs 1` for comparison (those rows are for comparison and have no target).
//! Prints a Markdown table; asserts nothing about time. Run it with `scripts/bench` (or
//! `cargo bench -p wconverge-cli --bench floors`).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

mod support;

#[path = "../../lang/benches/support/manifest.rs"]
mod manifest;

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Sample, cores, load, measure, median, ms, summary};

const FILES: usize = 5_000;
const GUARDS: usize = 200;

/// One row of the table.
struct Row {
    workload: &'static str,
    wall: Duration,
    rss_kib: i64,
    floor: Option<Duration>,
    target: &'static str,
}

use support::Dirs as Bench;

impl Bench {
    fn path(&self, name: &str) -> String {
        self.root.join(name).to_str().expect("utf-8").to_owned()
    }

    /// A policy granting the file plugin `files/` read-write.
    fn file_policy(&self) -> String {
        self.policy().to_str().expect("utf-8").to_owned()
    }

    /// A catalog of [`FILES`] files under `files/NAME-DDD/`, 100 per directory, and
    /// each file with its content.
    fn files_catalog(&self, name: &str) -> (String, Vec<(PathBuf, String)>) {
        let (path, files) = support::files_catalog(&self.root, name, FILES);
        (path.to_str().expect("utf-8").to_owned(), files)
    }
}

fn main() {
    support::serve_as_helper();
    let bench = Bench::new("wcv-floors");
    let env = bench.env();
    println!(
        "the performance table ({} cores, load average {}); binary: {}\n",
        cores(),
        load(),
        support::WCONVERGE
    );
    let rows = [
        startup(&bench, &env),
        noop(&bench, &env, None),
        noop(&bench, &env, Some("1")),
        guards(&bench, &env, None),
        guards(&bench, &env, Some("1")),
        first_apply(&bench, &env, None),
        first_apply(&bench, &env, Some("1")),
        interleaved(&bench, &env, None),
        interleaved(&bench, &env, Some("1")),
        compile(&bench, &env),
    ];
    println!("| workload | wconverge | peak RSS | floor | ratio | target |");
    println!("| --- | ---: | ---: | ---: | ---: | --- |");
    for row in rows {
        let (floor, ratio) = match row.floor {
            Some(floor) => (
                ms(floor),
                format!("{:.2}x", row.wall.as_secs_f64() / floor.as_secs_f64()),
            ),
            None => (String::new(), String::new()),
        };
        println!(
            "| {} | {} | {} MiB | {floor} | {ratio} | {} |",
            row.workload,
            ms(row.wall),
            row.rss_kib / 1024,
            row.target
        );
    }
    let _ = std::fs::remove_dir_all(&bench.root);
}

/// `apply` of an empty manifest (the compiler needs every plugin's types: from the
/// cache, no plugin loaded) against `apply` of an empty catalog.
fn startup(bench: &Bench, env: &[(&str, &Path)]) -> Row {
    let manifest = bench.path("empty.wcv");
    std::fs::write(&manifest, "").expect("manifest");
    let catalog = bench.path("empty.json");
    std::fs::write(&catalog, r#"{"format_version": 1, "resources": []}"#).expect("catalog");
    // The first run fills the plugin cache: a once-per-machine cost.
    let _ = measure(&["apply", &manifest], env);
    let mut wcv = Vec::new();
    let mut json = Vec::new();
    for _ in 0..21 {
        wcv.push(measure(&["apply", &manifest], env));
        json.push(measure(&["apply", &catalog], env));
    }
    let (wall, rss_kib) = summary(&wcv);
    Row {
        workload: "`apply` of an empty `.wcv` manifest (floor: `apply` of an empty JSON catalog)",
        wall,
        rss_kib,
        floor: Some(summary(&json).0),
        target: "<= 2x, under 10 ms",
    }
}

/// `apply ARGS` with `--jobs` when `jobs` says how many.
fn apply_args<'a>(args: &[&'a str], jobs: Option<&'a str>) -> Vec<&'a str> {
    let mut all = vec!["apply"];
    all.extend_from_slice(args);
    if let Some(jobs) = jobs {
        all.extend(["--jobs", jobs]);
    }
    all
}

/// `apply ARGS` once to converge, then seven no-op runs, each beside a run of `floor`:
/// the median wall time, the peak memory and the median floor.
fn noop_runs(
    args: &[&str],
    env: &[(&str, &Path)],
    floor: impl Fn() -> Duration,
) -> (Duration, i64, Duration) {
    let first = measure(args, env);
    assert!(
        matches!(first.exit_code, 0 | 2),
        "the first apply creates the files"
    );
    let mut samples = Vec::new();
    let mut floors = Vec::new();
    for _ in 0..7 {
        samples.push(measure(args, env));
        floors.push(floor());
    }
    assert!(
        samples.iter().all(|sample| sample.exit_code == 0),
        "a no-op"
    );
    let (wall, rss_kib) = summary(&samples);
    (wall, rss_kib, median(floors))
}

fn noop(bench: &Bench, env: &[(&str, &Path)], jobs: Option<&str>) -> Row {
    let policy = bench.file_policy();
    let (catalog, files) = bench.files_catalog("noop");
    let args = apply_args(&[&catalog, "--policy", &policy], jobs);
    let (wall, rss_kib, floor) = noop_runs(&args, env, || support::native_noop(&files));
    Row {
        workload: match jobs {
            None => "no-op re-apply of 5,000 files (floor: `lstat`, open, read, compare)",
            Some(_) => "the same, `--jobs 1`",
        },
        wall,
        rss_kib,
        floor: Some(floor),
        target: match jobs {
            None => "<= 3x",
            // One worker, for comparison: no target.
            Some(_) => "",
        },
    }
}

/// 200 spawns of `/bin/sh -c 'test -e FILE'`, output captured, as a guard's is.
fn native_guards(marker: &str) -> Duration {
    let started = Instant::now();
    for _ in 0..GUARDS {
        let output = Command::new("/bin/sh")
            .args(["-c", &format!("test -e {marker}")])
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .expect("sh runs");
        assert!(output.status.success());
    }
    started.elapsed()
}

fn guards(bench: &Bench, env: &[(&str, &Path)], jobs: Option<&str>) -> Row {
    let marker = bench.path("files/done");
    std::fs::write(&marker, "").expect("marker");
    let mut text = String::new();
    for index in 0..GUARDS {
        text.push_str(&format!(
            "exec {{ 'step {index}': command => '/bin/true', unless => 'test -e {marker}' }}\n"
        ));
    }
    let manifest = bench.path("guards.wcv");
    std::fs::write(&manifest, text).expect("manifest");
    let args = apply_args(&[&manifest], jobs);
    let _ = measure(&args, env);
    let mut samples = Vec::new();
    let mut floors = Vec::new();
    for _ in 0..7 {
        samples.push(measure(&args, env));
        floors.push(native_guards(&marker));
    }
    assert!(
        samples.iter().all(|sample| sample.exit_code == 0),
        "every guard holds: nothing runs"
    );
    let (wall, rss_kib) = summary(&samples);
    Row {
        workload: match jobs {
            None => {
                "200 `exec` no-op guards, `unless => 'test -e ...'` (floor: 200 spawns of `/bin/sh -c`)"
            }
            Some(_) => "the same, `--jobs 1`",
        },
        wall,
        rss_kib,
        floor: Some(median(floors)),
        target: match jobs {
            None => "<= 1.2x",
            Some(_) => "",
        },
    }
}

/// 5,000 files and 200 `exec`s whose `unless` guard holds, one after every 25 files, with
/// no relationships: a no-op re-apply, where order keeps each command in its place.
fn interleaved(bench: &Bench, env: &[(&str, &Path)], jobs: Option<&str>) -> Row {
    let marker = bench.path("files/done");
    std::fs::write(&marker, "").expect("marker");
    let (catalog, files) = bench.files_catalog("mixed");
    let mut parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&catalog).expect("catalog")).expect("json");
    let resources = parsed["resources"].as_array_mut().expect("resources");
    let every = FILES / GUARDS;
    let mut mixed = Vec::with_capacity(resources.len() + GUARDS);
    for (index, resource) in resources.drain(..).enumerate() {
        mixed.push(resource);
        if (index + 1) % every == 0 {
            mixed.push(serde_json::json!({
                "type": "exec",
                "title": format!("step {index}"),
                "attributes": { "command": "/bin/true", "unless": format!("test -e {marker}") },
            }));
        }
    }
    *resources = mixed;
    std::fs::write(&catalog, serde_json::to_string(&parsed).expect("json")).expect("catalog");
    let policy = bench.path("mixed-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "{}\n[plugins.sh]\nsource = \"builtin\"\nprovides = [\"sh\", \"exec\", \"script\"]\n\
             programs = [\"/bin/sh\", \"/bin/true\"]\n",
            std::fs::read_to_string(bench.file_policy()).expect("policy")
        ),
    )
    .expect("policy");
    let args = apply_args(&[&catalog, "--policy", &policy], jobs);
    let (wall, rss_kib, floor) = noop_runs(&args, env, || {
        support::native_noop(&files) + native_guards(&marker)
    });
    Row {
        workload: match jobs {
            None => {
                "no-op re-apply of 5,000 files and 200 guarded `exec`s among them (floor: the two floors above)"
            }
            Some(_) => "the same, `--jobs 1`",
        },
        wall,
        rss_kib,
        floor: Some(floor),
        target: "",
    }
}

/// Writes each file as the file provider must: a new temporary file, its mode, its
/// content, `fsync`, `rename` over the name, `fsync` of the directory.
fn native_first_apply(files: &[(PathBuf, String)]) -> Duration {
    let started = Instant::now();
    for (path, content) in files {
        let dir = path.parent().expect("parent");
        let temporary = dir.join(format!(
            ".{}.tmp",
            path.file_name().expect("name").to_string_lossy()
        ));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .expect("create");
        file.set_permissions(std::fs::Permissions::from_mode(0o644))
            .expect("fchmod");
        file.write_all(content.as_bytes()).expect("write");
        file.sync_all().expect("fsync");
        std::fs::rename(&temporary, path).expect("rename");
        std::fs::File::open(dir)
            .and_then(|dir| dir.sync_all())
            .expect("fsync dir");
    }
    started.elapsed()
}

fn first_apply(bench: &Bench, env: &[(&str, &Path)], jobs: Option<&str>) -> Row {
    let policy = bench.file_policy();
    let mut samples: Vec<Sample> = Vec::new();
    let mut floors = Vec::new();
    let name = if jobs.is_some() { "serial" } else { "first" };
    for round in 0..3 {
        let (catalog, _) = bench.files_catalog(&format!("{name}{round}"));
        let sample = measure(&apply_args(&[&catalog, "--policy", &policy], jobs), env);
        assert_eq!(sample.exit_code, 2, "the first apply creates the files");
        samples.push(sample);
        let (_, files) = bench.files_catalog(&format!("native-{name}{round}"));
        floors.push(native_first_apply(&files));
    }
    let (wall, rss_kib) = summary(&samples);
    Row {
        workload: match jobs {
            None => {
                "first apply of 5,000 files (floor: temporary file, `fchmod`, `write`, `fsync`, `rename`, `fsync` of the directory)"
            }
            Some(_) => "the same, `--jobs 1`",
        },
        wall,
        rss_kib,
        floor: Some(median(floors)),
        target: match jobs {
            None => "<= 1.15x",
            Some(_) => "",
        },
    }
}

fn compile(bench: &Bench, env: &[(&str, &Path)]) -> Row {
    let manifest = bench.path("big.wcv");
    std::fs::write(&manifest, manifest::manifest()).expect("manifest");
    let samples: Vec<Sample> = (0..3)
        .map(|_| measure(&["compile", &manifest], env))
        .collect();
    assert!(
        samples.iter().all(|sample| sample.exit_code == 0),
        "the manifest compiles"
    );
    let (wall, rss_kib) = summary(&samples);
    Row {
        workload: "`compile` of 50,000 resources (defaults, classes, 5,000 defines, a collector realizing 5,000 virtual resources)",
        wall,
        rss_kib,
        floor: None,
        target: "under 1 s, under 150 MiB",
    }
}
