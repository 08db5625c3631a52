//! Where a run's time goes: every resource of a report has the time of its guards, its
//! check, its change and its refresh; the report has the phases of the command;
//! `apply --timings` and `reports show ID --slow N` list the slowest resources.

use crate::support::Machine;
use serde_json::Value;

#[test]
fn a_report_says_where_each_resource_and_the_command_spent_their_time() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.pp",
        r#"exec { 'slow change': command => '/bin/sleep 0.4', unless => '/bin/sleep 0.2 && false' }
file { '@FILES@/quick': ensure => file, content => "x\n" }
exec { 'slow refresh': command => '/bin/true', refreshonly => true, subscribe => File['@FILES@/quick'] }
"#,
    );
    let policy = machine.policy("");
    let path = |path: &std::path::Path| path.to_str().expect("utf-8").to_owned();
    let run = machine.run(&[
        "apply",
        &path(&manifest),
        "--policy",
        &path(&policy),
        "--format",
        "json",
        "--timings",
    ]);
    assert_eq!(run.code, 2, "{run:#?}");
    let report: Value = serde_json::from_str(&run.stdout).expect("the JSON report alone on stdout");
    let resource = |name: &str| {
        report["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["resource"] == name)
            .unwrap_or_else(|| panic!("{name} in {report:#}"))
            .clone()
    };
    let ms = |value: &Value, key: &str| {
        value[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} in {value:#}"))
    };
    let slow = resource("Exec[slow change]");
    assert!(
        ms(&slow["timings"], "guards_ms") >= 200.0,
        "the guard slept 0.2 s: {slow:#}"
    );
    assert!(
        ms(&slow["timings"], "change_ms") >= 400.0,
        "the change slept 0.4 s: {slow:#}"
    );
    assert!(ms(&slow["timings"], "check_ms") < 400.0, "{slow:#}");
    let total: f64 = ["guards_ms", "check_ms", "change_ms", "refresh_ms"]
        .iter()
        .map(|key| ms(&slow["timings"], key))
        .sum();
    assert!(
        total <= ms(&slow, "duration_ms") + 1.0,
        "the parts fit in the whole: {slow:#}"
    );
    let refreshed = resource("Exec[slow refresh]");
    assert!(refreshed["refresh"].is_object(), "{refreshed:#}");
    assert!(
        ms(&refreshed["timings"], "refresh_ms") > 0.0,
        "{refreshed:#}"
    );
    for phase in ["facts_ms", "compile_ms", "prepare_ms", "run_ms"] {
        assert!(
            ms(&report["phases"], phase) > 0.0,
            "{phase} in {:#}",
            report["phases"]
        );
    }
    assert!(
        ms(&report["phases"], "run_ms") >= 600.0,
        "{:#}",
        report["phases"]
    );
    // On standard error (standard output is the JSON report): the phases, then the
    // slowest resource first.
    assert!(run.stderr.contains("timings: facts "), "{}", run.stderr);
    assert!(run.stderr.contains(", report "), "{}", run.stderr);
    let listed: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("  "))
        .collect();
    assert!(
        listed
            .first()
            .is_some_and(|line| line.contains("Exec[slow change]")),
        "{}",
        run.stderr
    );
    // The stored report says the same.
    let shown = machine.run(&["reports", "show", "1", "--slow", "1"]);
    assert_eq!(shown.code, 0, "{shown:#?}");
    assert!(
        shown.stdout.starts_with("timings: facts "),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("the 1 slowest resource:\n"),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("Exec[slow change]  (guards "),
        "{}",
        shown.stdout
    );
    assert!(
        !shown.stdout.contains("File["),
        "one resource only: {}",
        shown.stdout
    );
}
