//! A batched `check` that found everything in sync is replayed on the next run
//! (every read it made through `file-metadata` made again, natively, and compared) rather
//! than run again in the plugin; a check that reads anything else is never replayed.

use crate::files::{check_lines, numbered_files};
use crate::support::{Machine, Run, entry};
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `apply CATALOG --policy POLICY --jobs 1` with the debug log, against `cache`.
fn apply(machine: &Machine, cache: &Path, catalog: &Path, policy: &Path) -> Run {
    apply_with(machine, cache, catalog, policy, &[])
}

/// [`apply`] with `more` arguments.
fn apply_with(
    machine: &Machine,
    cache: &Path,
    catalog: &Path,
    policy: &Path,
    more: &[&str],
) -> Run {
    let mut command = machine.command(crate::support::WCONVERGE);
    command
        .args(["apply", catalog.to_str().expect("utf-8"), "--policy"])
        .arg(policy)
        .args(["--format", "json", "--jobs", "1"])
        .args(more)
        .env("WCONVERGE_CACHE_DIR", cache)
        .env("WCONVERGE_LOG", "debug");
    Run::of(&mut command)
}

/// Calls of a run: how many resources each had, and its directories, sorted.
type Calls = Vec<(usize, String)>;

/// The `check` calls a run made in the plugin, and those it replayed.
fn checks(run: &Run) -> (Calls, Calls) {
    let sorted = |mut calls: Calls| {
        calls.sort();
        calls
    };
    (
        sorted(check_lines(&run.stderr, " check plugin=")),
        sorted(check_lines(&run.stderr, " check replayed plugin=")),
    )
}

/// The entries of remembered checks in `cache`.
fn remembered(cache: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache.join("components"))
        .expect("the cache")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "checked")
        })
        .collect();
    found.sort();
    found
}

/// A file's content changed to another of the same size with its times put back, a
/// mode changed by hand, a resource changed in the catalog, a tampered entry: each is
/// seen, and only the directory it is in is checked in the plugin again.
#[test]
fn a_check_found_in_sync_is_replayed_and_every_read_made_again() {
    let machine = Machine::new();
    let cache = crate::support::private_cache(&machine);
    let policy = machine.policy("");
    for dir in ["a", "b"] {
        std::fs::create_dir(machine.file(dir)).expect("dir");
    }
    let dir_of = |index: usize| if index < 20 { "a" } else { "b" };
    let catalog = numbered_files(&machine, 40, dir_of);
    let both = vec![(20, machine.file("a")), (20, machine.file("b"))];
    let only = |dir: &str| vec![(20, machine.file(dir))];
    let run = || apply(&machine, &cache, &catalog, &policy);

    let first = run();
    assert_eq!(first.code, 2, "{first:#?}");
    assert!(remembered(&cache).is_empty(), "nothing was in sync");
    // Found in sync by the plugin, and remembered: one entry per call, this user's
    // alone.
    let second = run();
    assert_eq!(second.code, 0, "{second:#?}");
    assert_eq!(checks(&second), (both.clone(), vec![]), "{second:#?}");
    let entries = remembered(&cache);
    assert_eq!(entries.len(), 2, "{entries:?}");
    let owner = std::fs::metadata(&cache).expect("cache").uid();
    for path in &entries {
        let meta = std::fs::metadata(path).expect("entry");
        assert_eq!(
            (meta.uid(), meta.mode() & 0o777),
            (owner, 0o600),
            "{path:?}"
        );
    }
    // Replayed: no call enters the plugin.
    let third = run();
    assert_eq!(third.code, 0, "{third:#?}");
    assert_eq!(checks(&third), (vec![], both.clone()), "{third:#?}");
    assert_eq!(third.json()["summary"]["unchanged"], 40, "{}", third.stdout);

    // The same size, the times put back: only its content tells, and it is hashed again.
    let tampered = machine.file("a/file-003");
    let before = std::fs::metadata(&tampered).expect("file");
    std::fs::write(&tampered, "line X\n").expect("tampered");
    let times = std::fs::FileTimes::new()
        .set_modified(before.modified().expect("mtime"))
        .set_accessed(before.accessed().expect("atime"));
    std::fs::File::options()
        .write(true)
        .open(&tampered)
        .and_then(|file| file.set_times(times))
        .expect("times put back");
    assert_eq!(
        std::fs::metadata(&tampered).expect("file").len(),
        before.len()
    );
    let fourth = run();
    assert_eq!(fourth.code, 2, "{fourth:#?}");
    assert_eq!(checks(&fourth).1, only("b"), "{fourth:#?}");
    let report = fourth.json();
    assert_eq!(report["summary"]["changed"], 1, "{}", fourth.stdout);
    assert_eq!(
        entry(&report, &format!("File[{tampered}]"))["status"],
        "changed"
    );
    assert_eq!(
        std::fs::read_to_string(&tampered).expect("read"),
        "line 3\n"
    );

    // A mode changed by hand: the status read again differs.
    let loosened = machine.file("b/file-030");
    std::fs::set_permissions(&loosened, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let fifth = run();
    assert_eq!(fifth.code, 2, "{fifth:#?}");
    assert_eq!(checks(&fifth).1, only("a"), "{fifth:#?}");
    assert_eq!(
        std::fs::metadata(&loosened).expect("file").mode() & 0o777,
        0o640
    );
    assert_eq!(run().code, 0);

    // A resource changed in the catalog: another input, so the plugin checks it.
    let mut changed: Value =
        serde_json::from_str(&std::fs::read_to_string(&catalog).expect("catalog")).expect("json");
    changed["resources"][25]["attributes"]["content"] = Value::from("line 25, again\n");
    let edited = machine.root().join("edited.json");
    std::fs::write(&edited, changed.to_string()).expect("catalog");
    let sixth = apply(&machine, &cache, &edited, &policy);
    assert_eq!(sixth.code, 2, "{sixth:#?}");
    assert_eq!(checks(&sixth).1, only("a"), "{sixth:#?}");
    assert_eq!(sixth.json()["summary"]["changed"], 1, "{}", sixth.stdout);
    assert_eq!(
        std::fs::read_to_string(machine.file("b/file-025")).expect("read"),
        "line 25, again\n"
    );

    // Every entry tampered with: none is trusted, and the plugin checks again.
    let again = run();
    assert_eq!(again.code, 2, "{again:#?}");
    let settled = run();
    assert_eq!(checks(&settled), (vec![], both.clone()), "{settled:#?}");
    for path in remembered(&cache) {
        let mut bytes = std::fs::read(&path).expect("entry");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).expect("tampered");
    }
    let distrusted = run();
    assert_eq!(distrusted.code, 0, "{distrusted:#?}");
    assert_eq!(checks(&distrusted), (both, vec![]), "{distrusted:#?}");
    assert!(
        distrusted
            .stderr
            .contains("its digest does not match its content"),
        "{distrusted:#?}"
    );
}

/// A check that read its file or its status through WASI, or asked for the time of day,
/// the monotonic clock or a random number, is never replayed: its answer could change
/// with nothing `file-metadata` would see. One that read through `file-metadata` alone
/// is. (Each reading reaches the host another way: `WasiView::ctx`, `files::view`,
/// `clock::view`; the debug log tells a replay from a call.)
#[test]
fn a_check_that_reads_more_than_file_metadata_is_never_replayed() {
    let machine = Machine::new();
    let cache = crate::support::private_cache(&machine);
    let policy = machine.policy(&crate::support::test_plugins_policy(&machine, ""));
    let readings = ["metadata", "file", "status", "clock", "monotonic", "random"];
    for reading in readings {
        std::fs::create_dir(machine.file(reading)).expect("dir");
    }
    let resources: Vec<Value> = readings
        .iter()
        .flat_map(|reading| (0..3).map(move |index| (reading, index)))
        .map(|(reading, index)| {
            serde_json::json!({
                "type": "peek",
                "title": machine.file(&format!("{reading}/{index}")),
                "attributes": { "reading": reading, "expect": format!("{reading} {index}\n") },
            })
        })
        .collect();
    let catalog = machine.catalog(Value::Array(resources));
    let run = || apply(&machine, &cache, &catalog, &policy);
    let calls = |run: &Run, needle: &str| {
        let mut found: Vec<String> = run
            .stderr
            .lines()
            .filter(|line| line.contains(needle))
            .filter_map(|line| line.split("directories=").nth(1))
            .map(|dir| dir.trim().rsplit('/').next().unwrap_or_default().to_owned())
            .collect();
        found.sort();
        found
    };
    let first = run();
    assert_eq!(first.code, 2, "{first:#?}");
    assert_eq!(first.json()["summary"]["changed"], 18, "{}", first.stdout);
    // Each checked in the plugin, and found in sync.
    let second = run();
    assert_eq!(second.code, 0, "{second:#?}");
    assert_eq!(
        calls(&second, " check plugin=hostile"),
        ["clock", "file", "metadata", "monotonic", "random", "status"],
        "{second:#?}"
    );
    for _ in 0..2 {
        let noop = run();
        assert_eq!(noop.code, 0, "{noop:#?}");
        assert_eq!(
            calls(&noop, " check plugin=hostile"),
            ["clock", "file", "monotonic", "random", "status"],
            "{noop:#?}"
        );
        assert_eq!(
            calls(&noop, " check replayed plugin=hostile"),
            ["metadata"],
            "{noop:#?}"
        );
    }
    // What the plugin read through WASI changed: it is checked, not replayed, so seen.
    for reading in readings {
        std::fs::write(machine.file(&format!("{reading}/1")), "changed\n").expect("changed");
    }
    let changed = run();
    assert_eq!(changed.code, 2, "{changed:#?}");
    let report = changed.json();
    assert_eq!(report["summary"]["changed"], 6, "{}", changed.stdout);
    for reading in readings {
        assert_eq!(
            entry(
                &report,
                &format!("Peek[{}]", machine.file(&format!("{reading}/1")))
            )["status"],
            "changed"
        );
    }
}

/// A read the plugin was refused is refused again when a remembered check's reads are
/// made again, and the audit trail records each refusal once a run: replayed, as the
/// call would have; not replayed because a later read differs, by the call alone.
#[test]
fn a_refused_read_is_in_the_audit_trail_once_a_run_replayed_or_not() {
    let machine = Machine::new();
    let cache = crate::support::private_cache(&machine);
    let policy = machine.policy(&crate::support::test_plugins_policy(&machine, ""));
    std::fs::create_dir(machine.file("peek")).expect("dir");
    // Beside the granted directory, not in it.
    let outside = machine.file("outside");
    std::fs::write(&outside, "not granted\n").expect("file");
    let resources: Vec<Value> = (0..2)
        .map(|index| {
            serde_json::json!({
                "type": "peek",
                "title": machine.file(&format!("peek/{index}")),
                "attributes": {
                    "reading": "metadata",
                    "expect": format!("peek {index}\n"),
                    "also": outside,
                },
            })
        })
        .collect();
    let catalog = machine.catalog(Value::Array(resources));
    let mut runs = 0;
    let mut run = || {
        runs += 1;
        let log = machine.root().join(format!("trail-{runs}.jsonl"));
        let run = apply_with(
            &machine,
            &cache,
            &catalog,
            &policy,
            &["--audit-log", log.to_str().expect("utf-8")],
        );
        let refused: Vec<Value> = crate::support::trail(&log)
            .into_iter()
            .filter(|event| event["decision"] == "denied")
            .collect();
        (run, refused)
    };
    let (first, _) = run();
    assert_eq!(first.code, 2, "{first:#?}");
    let (second, refused) = run();
    assert_eq!(second.code, 0, "{second:#?}");
    assert_eq!(
        checks(&second).0,
        [(2, machine.file("peek"))],
        "{second:#?}"
    );
    assert_eq!(refused.len(), 2, "{refused:#?}");
    for event in &refused {
        assert_eq!(event["target"], outside, "{event:#}");
        // The call's subject: its resources.
        assert_eq!(event["resource"], "2 resources of type `peek`", "{event:#}");
    }
    // Replayed: the same refusals, for the same call.
    let (third, replayed) = run();
    assert_eq!(third.code, 0, "{third:#?}");
    assert_eq!(checks(&third).1, [(2, machine.file("peek"))], "{third:#?}");
    let without_time = |events: &[Value]| {
        events
            .iter()
            .map(|event| {
                let mut event = event.clone();
                event["time"] = Value::Null;
                event
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(without_time(&replayed), without_time(&refused));
    // The second file changed: its read, after both refused ones, differs, and the
    // call that is then made records the refusals, once.
    std::fs::write(machine.file("peek/1"), "changed\n").expect("changed");
    let (fourth, refused_again) = run();
    assert_eq!(fourth.code, 2, "{fourth:#?}");
    assert_eq!(
        checks(&fourth),
        (vec![(2, machine.file("peek"))], vec![]),
        "{fourth:#?}"
    );
    assert_eq!(without_time(&refused_again), without_time(&refused));
}
