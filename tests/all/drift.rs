//! `wconverge agent --watch`: drift corrected as it happens, between whole runs an hour
//! apart, with the meaning of a whole run (what a corrected resource notifies is
//! refreshed; nothing else runs), each correction a report of its own marked
//! corrective; a resource something else keeps changing is left to the whole runs.

use crate::agent::{Agent, eventually, status, text};
use crate::support::Machine;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).map_or(0, |meta| meta.permissions().mode() & 0o777)
}

/// An agent watching for drift, with an hour between its whole runs.
fn watching(machine: &Machine, manifest: &Path, policy: &Path) -> Agent {
    Agent::start(
        machine,
        &[
            "--watch",
            "--interval",
            "1h",
            text(manifest),
            "--policy",
            text(policy),
        ],
    )
}

/// An agent watching `site.pp` (one file, `a`) with an hour between whole runs set in
/// its config file (so that SIGHUP has something to reload), after its first run.
fn reloadable(machine: &Machine) -> (Agent, PathBuf) {
    let config = machine.root().join("wconverge.conf");
    std::fs::write(&config, "runinterval = \"1h\"\n").expect("config");
    let manifest = machine.manifest("site.pp", "file { '@FILES@/a': content => \"a\\n\" }\n");
    let policy = machine.policy("");
    let agent = Agent::start(
        machine,
        &[
            "--watch",
            "--config",
            text(&config),
            text(&manifest),
            "--policy",
            text(&policy),
        ],
    );
    agent.wait_for("agent: run 1 ", Duration::from_secs(60));
    (agent, manifest)
}

/// How many corrections `agent status` counts.
fn corrections(machine: &Machine) -> u64 {
    let (_, said) = status(machine);
    said.split("watching for drift: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_watching_agent_corrects_drift_as_it_happens_with_the_meaning_of_a_whole_run() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.pp",
        r#"file { '@FILES@/a': content => "a\n", mode => '0644' }
file { '@FILES@/b': content => "b\n", notify => Exec['refresh'] }
exec { 'refresh': command => "/bin/sh -c 'echo refreshed >> @FILES@/refreshes'", refreshonly => true }
exec { 'every run': command => "/bin/sh -c 'echo ran >> @FILES@/runs'" }
file { '@FILES@/d': ensure => directory }
file { '@FILES@/d/inner': content => "inner\n" }
"#,
    );
    let policy = machine.policy("");
    let file = |name: &str| PathBuf::from(machine.file(name));
    let (a, b, inner) = (file("a"), file("b"), file("d/inner"));
    let mut agent = watching(&machine, &manifest, &policy);
    agent.wait_for("agent: run 1 ", Duration::from_secs(60));
    assert_eq!(lines(&file("runs")), 1, "{}", agent.log());
    assert_eq!(lines(&file("refreshes")), 1, "{}", agent.log());
    let within = Duration::from_secs(20);

    // A write: the content back.
    std::fs::write(&a, "drift\n").expect("drift");
    eventually(within, "the content back", || {
        std::fs::read_to_string(&a).is_ok_and(|content| content == "a\n")
    });
    // A chmod: the mode back.
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    eventually(within, "the mode back", || mode(&a) == 0o644);
    // A removal: the file back, and what it notifies refreshed, as in a whole run.
    std::fs::remove_file(&b).expect("rm");
    eventually(within, "the notified exec refreshed", || {
        lines(&file("refreshes")) == 2
    });
    assert_eq!(std::fs::read_to_string(&b).expect("b back"), "b\n");
    // A directory removed with what is in it: both back.
    std::fs::remove_dir_all(file("d")).expect("rm -r");
    eventually(within, "the directory and its file back", || {
        std::fs::read_to_string(&inner).is_ok_and(|content| content == "inner\n")
    });
    eventually(within, "the corrections counted", || {
        corrections(&machine) >= 4
    });
    // Nothing the drift did not concern ran again; the corrections' own changes led to
    // no correction of their own.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lines(&file("runs")), 1, "{}", agent.log());
    assert_eq!(lines(&file("refreshes")), 2, "{}", agent.log());
    let (code, said) = status(&machine);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("runs: 1;") && said.contains("watching for drift: "),
        "one whole run, then corrections: {said}"
    );
    let counted = corrections(&machine);
    assert!((4..=6).contains(&counted), "{said}\n{}", agent.log());

    // Each correction is a report of its own, marked corrective, with what changed (a
    // report is stored just after the agent hears of it).
    let corrected = || -> Vec<serde_json::Value> {
        let reports = machine.run(&["reports", "--format", "json"]);
        assert_eq!(reports.code, 0, "{reports:#?}");
        reports
            .json()
            .as_array()
            .expect("a list")
            .iter()
            .filter(|report| report["status"] == "corrected")
            .cloned()
            .collect()
    };
    eventually(Duration::from_secs(10), "every correction stored", || {
        corrected().len() as u64 == counted
    });
    let corrected = corrected();
    let id = corrected[0]["id"].to_string();
    let shown = machine.run(&["reports", "show", &id]);
    let shown = shown.json();
    assert_eq!(shown["corrective_change"], true, "{shown:#}");
    assert!(
        shown["drift"][0]["path"]
            .as_str()
            .is_some_and(|path| path.starts_with(machine.files_dir().as_str())),
        "{shown:#}"
    );
    assert!(
        shown["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|resource| resource["corrective_change"] == true),
        "{shown:#}"
    );

    // SIGTERM: the watching run wakes and stops at once.
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(20)), 0, "{}", agent.log());
    let (code, said) = status(&machine);
    assert_eq!(code, 3, "{said}");
}

#[test]
fn a_resource_something_else_keeps_changing_is_left_to_the_whole_runs() {
    // What the file notifies undoes the file: each correction leads to the next.
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.pp",
        r#"file { '@FILES@/fought': content => "ours\n", notify => Exec['theirs'] }
exec { 'theirs': command => "/bin/sh -c 'echo theirs > @FILES@/fought'", refreshonly => true }
"#,
    );
    let policy = machine.policy("");
    let agent = watching(&machine, &manifest, &policy);
    agent.wait_for("agent: run 1 ", Duration::from_secs(60));
    std::fs::write(machine.file("fought"), "drift\n").expect("drift");
    agent.wait_for(
        "drifted again each time it was corrected",
        Duration::from_secs(120),
    );
    // The agent counts the last reports a little after the run's warning.
    std::thread::sleep(Duration::from_millis(500));
    let settled = corrections(&machine);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(corrections(&machine), settled, "{}", agent.log());
    assert!(
        (20..=22).contains(&settled),
        "at most the limit: {settled}\n{}",
        agent.log()
    );
}

#[test]
fn sighup_ends_the_watch_and_the_next_whole_run_takes_the_new_manifest_at_once() {
    let machine = Machine::new();
    let (mut agent, manifest) = reloadable(&machine);
    std::fs::write(
        &manifest,
        format!(
            "file {{ '{}': content => \"a\\n\" }}\nfile {{ '{}': content => \"b\\n\" }}\n",
            machine.file("a"),
            machine.file("b")
        ),
    )
    .expect("manifest");
    agent.signal(nix::sys::signal::Signal::SIGHUP);
    // An hour between whole runs, but the reload ends the watching run: the next whole
    // run compiles the manifest again now, and watches what it declares.
    agent.wait_for("agent: run 2 ", Duration::from_secs(30));
    let b = PathBuf::from(machine.file("b"));
    assert_eq!(std::fs::read_to_string(&b).expect("b"), "b\n");
    std::fs::remove_file(&b).expect("drift");
    eventually(Duration::from_secs(20), "b back", || b.exists());
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(20)), 0, "{}", agent.log());
    assert!(!agent.log().contains("agent: run 3 "), "{}", agent.log());
}

#[test]
fn a_killed_agent_leaves_no_watching_run_behind() {
    let machine = Machine::new();
    let manifest = machine.manifest("site.pp", "file { '@FILES@/a': content => \"a\\n\" }\n");
    let policy = machine.policy("");
    let mut agent = watching(&machine, &manifest, &policy);
    agent.wait_for("agent: run 1 ", Duration::from_secs(60));
    let pid = agent.pid();
    let children: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .flat_map(|task| {
            let path = task.expect("task").path().join("children");
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .split_whitespace()
                .map(|child| child.parse().expect("a pid"))
                .collect::<Vec<u32>>()
        })
        .collect();
    assert_eq!(children.len(), 1, "the watching run: {children:?}");
    agent.signal(nix::sys::signal::Signal::SIGKILL);
    assert_eq!(agent.exit(Duration::from_secs(10)), -1);
    let run = format!("/proc/{}", children[0]);
    eventually(Duration::from_secs(10), "the watching run gone", || {
        // Gone, or a zombie its new parent has not reaped yet.
        std::fs::read_to_string(format!("{run}/stat"))
            .map_or(true, |stat| stat.split_whitespace().nth(2) == Some("Z"))
    });
}

#[test]
fn a_manifest_that_stops_compiling_leaves_the_last_catalog_applied_and_watched() {
    let machine = Machine::new();
    let (mut agent, manifest) = reloadable(&machine);
    let good = std::fs::read_to_string(&manifest).expect("manifest");
    // A typo, then a reload: the run applies the last catalog that compiled, says the
    // manifests failed, and goes on watching.
    std::fs::write(&manifest, "file { 'oops' \n").expect("broken");
    agent.signal(nix::sys::signal::Signal::SIGHUP);
    agent.wait_for("agent: run 2 ", Duration::from_secs(30));
    let log = agent.log();
    assert!(
        log.contains("applying the catalog of the last run whose manifests did"),
        "{log}"
    );
    assert!(
        log.contains("agent: run 2 ") && log.contains("(exit 4)"),
        "{log}"
    );
    let a = PathBuf::from(machine.file("a"));
    std::fs::write(&a, "drift\n").expect("drift");
    eventually(Duration::from_secs(20), "a corrected", || {
        std::fs::read_to_string(&a).is_ok_and(|content| content == "a\n")
    });
    let reports = machine.run(&["reports", "--format", "json"]);
    let listed = reports.json();
    let id = listed
        .as_array()
        .expect("a list")
        .iter()
        .find(|report| report["status"] == "failed")
        .map(|report| report["id"].to_string())
        .expect("the run of the kept catalog is stored as failed");
    let shown = machine.run(&["reports", "show", &id]).json();
    assert_eq!(shown["cached_catalog_status"], "on_failure", "{shown:#}");
    // Fixed: the next run compiles it again.
    std::fs::write(&manifest, good).expect("fixed");
    agent.signal(nix::sys::signal::Signal::SIGHUP);
    agent.wait_for("agent: run 3 ", Duration::from_secs(30));
    let log = agent.log();
    let third = log
        .lines()
        .find(|line| line.starts_with("agent: run 3 "))
        .expect("run 3");
    assert!(third.contains("(exit 0)"), "compiled again, in sync: {log}");
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(20)), 0, "{}", agent.log());
}

#[test]
fn what_a_type_declares_is_watched_too_a_removed_user_comes_back() {
    // Declared before the agent: removed after it has stopped.
    let mut accounts = crate::accounts::Accounts::new();
    let name = accounts.user("watched");
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        &format!("user {{ '{name}': ensure => present, shell => '/bin/sh' }}\n"),
    );
    // The built-in policy: `user` (the useradd plugin) declares /etc/passwd and the other
    // account files, which are not path attributes of any user.
    let mut agent = Agent::start(&machine, &["--watch", "--interval", "1h", text(&manifest)]);
    agent.wait_for("agent: run 1 ", Duration::from_secs(120));
    let exists = || {
        std::process::Command::new("getent")
            .args(["passwd", &name])
            .output()
            .is_ok_and(|output| output.status.success())
    };
    assert!(exists(), "{}", agent.log());
    let removed = std::process::Command::new("userdel")
        .arg(&name)
        .output()
        .expect("userdel");
    assert!(removed.status.success(), "{removed:?}");
    eventually(Duration::from_secs(30), "the user back", exists);
    // The agent logs the correction once the run has reported it.
    eventually(
        Duration::from_secs(10),
        "the drift names /etc/passwd",
        || {
            agent
                .log()
                .lines()
                .any(|line| line.starts_with("agent: drift at ") && line.contains("/etc/passwd"))
        },
    );
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(30)), 0, "{}", agent.log());
}

#[test]
fn a_correction_lists_the_drift_seen_not_the_previous_corrections_own_changes() {
    // A second write soon after a correction, within the debounce window of the check
    // that the correction's own rename leads to: listed as written, not moved.
    let machine = Machine::new();
    let manifest = machine.manifest("site.pp", "file { '@FILES@/a': content => \"a\\n\" }\n");
    let policy = machine.policy("");
    let agent = Agent::start(
        &machine,
        &[
            "--watch",
            "--debounce",
            "1s",
            "--interval",
            "1h",
            text(&manifest),
            "--policy",
            text(&policy),
        ],
    );
    agent.wait_for("agent: run 1 ", Duration::from_secs(60));
    let a = PathBuf::from(machine.file("a"));
    let corrections = || agent.log().matches("agent: drift at ").count();
    for round in 1..=2 {
        std::fs::write(&a, "drift\n").expect("drift");
        eventually(Duration::from_secs(20), "corrected", || {
            corrections() >= round
        });
    }
    let log = agent.log();
    let drift: Vec<&str> = log
        .lines()
        .filter(|line| line.starts_with("agent: drift at "))
        .collect();
    assert_eq!(drift.len(), 2, "{log}");
    for line in drift {
        assert!(line.contains("/a written: 1 changed"), "{line}\n{log}");
    }
}
