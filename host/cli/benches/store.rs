//! The benchmark of the store nodes share, on SQLite and on a PostgreSQL server
//! this benchmark starts from the installed binaries (as the tests do):
//!
//! - 1,000 simulated nodes each export 20 resources (two of them tagged `lb_backend`):
//!   the time of one node's export write (median and 95th percentile), and the store's
//!   size once all are written;
//! - a collector selecting the 2,000 `lb_backend` exports by tag: the time of the
//!   query, with the exports read back (target: under 50 ms on both);
//! - 20 nodes applying at once against one PostgreSQL, each a `wconverge apply` that
//!   exports 20 files and collects the 20 its partner exports for it, then stores its
//!   facts and report: the wall time of all 20, and of each.
//!
//! Prints figures; asserts only that each step did what it should. Run it with
//! `cargo bench -p wconverge-cli --bench store` (or `scripts/bench`).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

#[expect(dead_code, reason = "the benchmark uses part of the shared support")]
mod support;

#[path = "../../../tests/all/pg.rs"]
#[expect(
    dead_code,
    reason = "the benchmark uses part of the tests' server harness"
)]
mod pg;

use std::process::Command;
use std::time::{Duration, Instant};
use support::{cores, load, median, ms};
use wconverge_catalog::{Attributes, Export, ExportQuery, Value};
use wconverge_store::{Location, Store};

const NODES: usize = 1_000;
const PER_NODE: usize = 20;
const CONCURRENT: usize = 20;

fn main() {
    println!(
        "the store benchmark ({} cores, load average {}); binary: {}\n",
        cores(),
        load(),
        support::WCONVERGE
    );
    let dir = tempfile::Builder::new()
        .prefix("wcv-store-bench-")
        .tempdir()
        .expect("a temporary directory");
    let postgres = pg::Postgres::start();
    println!(
        "| store | export write per node (median, p95) | store size | collect 2,000 of 20,000 by tag (median) |"
    );
    println!("| --- | ---: | ---: | ---: |");
    let sqlite_path = dir.path().join("store.sqlite");
    let sqlite = Location::Sqlite(sqlite_path.clone());
    let (write, p95, collect) = exports_and_collection(&sqlite);
    let size = ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", sqlite_path.display())).ok())
        .map(|metadata| metadata.len())
        .sum::<u64>();
    println!(
        "| SQLite | {} ({} p95) | {:.1} MiB | {} |",
        ms(write),
        ms(p95),
        size as f64 / f64::from(1 << 20),
        ms(collect)
    );
    let location = Location::parse(&postgres.url(), None, &|_| None).expect("url");
    let (write, p95, collect) = exports_and_collection(&location);
    let size: u64 = postgres
        .psql(
            "SELECT sum(pg_total_relation_size(c)) FROM unnest(ARRAY['nodes', 'exports', \
             'export_values', 'reports']::regclass[]) AS c",
        )
        .parse()
        .expect("a size");
    println!(
        "| PostgreSQL | {} ({} p95) | {:.1} MiB | {} |",
        ms(write),
        ms(p95),
        size as f64 / f64::from(1 << 20),
        ms(collect)
    );
    concurrent_applies(&dir, &postgres);
}

/// Writes every node's exports, then collects the `lb_backend` ones 21 times.
fn exports_and_collection(location: &Location) -> (Duration, Duration, Duration) {
    let store = Store::open(location).expect("store");
    let mut writes = Vec::with_capacity(NODES);
    for node in 0..NODES {
        let exports: Vec<Export> = (0..PER_NODE)
            .map(|n| Export {
                type_name: "file".to_owned(),
                title: format!("/etc/fleet/node-{node:04}/{n:02}.conf"),
                tags: vec![
                    "file".to_owned(),
                    format!("node-{node:04}"),
                    if n < 2 { "lb_backend" } else { "app" }.to_owned(),
                ],
                attributes: Attributes(vec![
                    (
                        "content".to_owned(),
                        Value::String(format!("server node-{node:04}:{}\n", 8000 + n)),
                    ),
                    ("mode".to_owned(), Value::String("0644".to_owned())),
                ]),
                source: None,
            })
            .collect();
        let started = Instant::now();
        assert!(
            store
                .replace_exports(&format!("node-{node:04}"), &exports)
                .expect("write")
        );
        writes.push(started.elapsed());
    }
    let query = ExportQuery::Compare {
        attribute: "tag".to_owned(),
        equal: true,
        value: Value::String("lb_backend".to_owned()),
    };
    let mut collections = Vec::new();
    for _ in 0..21 {
        let started = Instant::now();
        let found = store.collect("file", &query, "lb").expect("collect");
        collections.push(started.elapsed());
        assert_eq!(found.len(), NODES * 2);
    }
    writes.sort();
    let p95 = writes[writes.len() * 95 / 100];
    (median(writes), p95, median(collections))
}

/// 20 `wconverge apply` at once against one PostgreSQL: node `app-N` exports 20 files
/// for its partner (`app-(N xor 1)`) and collects the 20 its partner exports for it.
fn concurrent_applies(dir: &tempfile::TempDir, postgres: &pg::Postgres) {
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).expect("files/");
    let manifest = dir.path().join("site.wcv");
    let mut site = String::new();
    for node in 0..CONCURRENT {
        let partner = node ^ 1;
        let titles: Vec<String> = (0..PER_NODE)
            .map(|n| format!("'{}/app-{partner}/from-{node}-{n}'", files.display()))
            .collect();
        site.push_str(&format!(
            "node 'app-{node}' {{\n  file {{ '{files}/app-{node}': ensure => directory }}\n  \
             @@file {{ [{titles}]: content => \"from app-{node}\\n\", tag => 'for-app-{partner}' }}\n  \
             File <<| tag == 'for-app-{node}' |>>\n}}\n",
            files = files.display(),
            titles = titles.join(", ")
        ));
    }
    std::fs::write(&manifest, site).expect("manifest");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.file]\nsource = \"builtin\"\ndirectories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
            files.display()
        ),
    )
    .expect("policy");
    let url = postgres.url();
    let run = |node: usize| {
        let started = Instant::now();
        let output = Command::new(support::WCONVERGE)
            .args(["apply", manifest.to_str().expect("utf-8"), "--node"])
            .arg(format!("app-{node}"))
            .args(["--policy", policy.to_str().expect("utf-8"), "--store", &url])
            .env("WCONVERGE_CACHE_DIR", dir.path().join("cache"))
            .env(
                "WCONVERGE_STATE_DIR",
                dir.path().join(format!("state-{node}")),
            )
            .output()
            .expect("wconverge runs");
        (started.elapsed(), output)
    };
    // Every node's exports are stored once, so that the measured round collects them;
    // this also fills the plugin cache.
    for node in 0..CONCURRENT {
        let (_, output) = run(node);
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "app-{node}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let started = Instant::now();
    let results: Vec<(Duration, std::process::Output)> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..CONCURRENT)
            .map(|node| scope.spawn(move || run(node)))
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a run"))
            .collect()
    });
    let all = started.elapsed();
    for (node, (_, output)) in results.iter().enumerate() {
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "app-{node}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let collected = std::fs::read_dir(files.join(format!("app-{node}")))
            .expect("collected files")
            .count();
        assert_eq!(collected, 20, "app-{node} collected its partner's 20 files");
    }
    let each = median(results.iter().map(|(wall, _)| *wall).collect());
    let reports = postgres.psql("SELECT count(*) FROM reports");
    println!(
        "\n{CONCURRENT} nodes applying at once against one PostgreSQL (each exports 20 files, \
         collects 20, stores its facts and report): all in {}, each {} (median); {reports} \
         reports stored",
        ms(all),
        ms(each)
    );
}
