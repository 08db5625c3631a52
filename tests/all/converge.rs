//! Converging: idempotence, noop, order, refresh, failure isolation, cycles, the run
//! lock, and what the file and exec providers do.

use crate::support::{Machine, entry};
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

#[test]
fn first_apply_creates_and_second_reports_no_change() {
    let machine = Machine::new();
    let motd = machine.file("motd");
    let stamp = machine.file("stamp");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": motd, "attributes": { "content": "hello\n", "mode": "0640" } },
        { "type": "exec", "title": "stamp",
          "attributes": { "command": format!("echo once >> {stamp}"), "creates": stamp } },
    ]));
    let policy = machine.policy("");
    let first = machine.apply(&catalog, &policy, &[]);
    assert_eq!(first.code, 2, "{first:#?}");
    assert!(
        first
            .stdout
            .contains(&format!("File[{motd}]: created with content {{sha256}}")),
        "{first:#?}"
    );
    assert_eq!(std::fs::read_to_string(&motd).expect("motd"), "hello\n");
    assert_eq!(
        std::fs::metadata(&motd).expect("motd").permissions().mode() & 0o7777,
        0o640
    );
    assert_eq!(std::fs::read_to_string(&stamp).expect("stamp"), "once\n");

    let second = machine.apply_json(&catalog, &policy, &[], 0);
    assert_eq!(second["summary"]["changed"], 0);
    assert_eq!(second["summary"]["unchanged"], 2);
    assert_eq!(std::fs::read_to_string(&stamp).expect("stamp"), "once\n");
    let human = machine.apply(&catalog, &policy, &[]);
    assert_eq!(human.code, 0);
    assert!(
        human.stdout.contains("2 resources, 2 unchanged"),
        "{human:#?}"
    );
}

#[test]
fn noop_changes_nothing_and_reports_what_would_change() {
    let machine = Machine::new();
    let motd = machine.file("motd");
    let existing = machine.file("existing");
    std::fs::write(&existing, "old\n").expect("seed");
    let ran = machine.file("ran");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": motd, "attributes": { "content": "hello\n" } },
        { "type": "file", "title": existing, "attributes": { "content": "new\n" } },
        { "type": "exec", "title": "touch", "attributes": { "command": format!("touch {ran}") },
          "metaparams": { "subscribe": format!("File[{motd}]") } },
    ]));
    let policy = machine.policy("");
    let report = machine.apply_json(&catalog, &policy, &["--noop"], 2);
    assert_eq!(report["mode"], "noop");
    assert_eq!(report["summary"]["would_change"], 3);
    assert_eq!(
        entry(&report, &format!("File[{existing}]"))["status"],
        "would_change"
    );
    assert_eq!(
        entry(&report, "Exec[touch]")["refresh"]["outcome"],
        "would_refresh"
    );
    assert!(!std::path::Path::new(&motd).exists());
    assert!(!std::path::Path::new(&ran).exists());
    assert_eq!(
        std::fs::read_to_string(&existing).expect("existing"),
        "old\n"
    );
    let human = machine.apply(&catalog, &policy, &["--noop"]);
    assert!(
        human
            .stdout
            .contains(&format!("File[{existing}]: would change: content changed")),
        "{human:#?}"
    );
    assert!(human.stdout.contains("noop run in"), "{human:#?}");
}

#[test]
fn order_follows_relationships_and_changes_refresh_subscribers() {
    let machine = Machine::new();
    let config = machine.file("config");
    let log = machine.file("log");
    let catalog = machine.catalog_with_edges(
        json!([
            { "type": "exec", "title": "third", "attributes": { "command": format!("echo third >> {log}") },
              "metaparams": { "require": "Exec[second]" } },
            { "type": "exec", "title": "second", "attributes": { "command": format!("echo second >> {log}") } },
            { "type": "exec", "title": "first", "attributes": { "command": format!("echo first >> {log}") },
              "metaparams": { "before": ["Exec[second]"] } },
            { "type": "file", "title": config, "attributes": { "content": "v1\n" },
              "metaparams": { "notify": "Exec[reload]" } },
            { "type": "exec", "title": "reload",
              "attributes": { "command": format!("echo reloaded >> {log}"), "refreshonly": true } },
            { "type": "notify", "title": "last" },
        ]),
        json!([{ "source": "Exec[third]", "target": "Notify[last]", "kind": "before" }]),
    );
    let policy = machine.policy("");
    // One at a time: the log shows the order (with more jobs, the same for commands).
    let report = machine.apply_json(&catalog, &policy, &["--jobs", "1"], 2);
    let order: Vec<String> = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|entry| entry["resource"].as_str().expect("name").to_owned())
        .collect();
    // `first` is before `second` (before), `second` before `third` (require), `third`
    // before `last` (an edge), the file before `reload` (notify); ties in catalog order.
    assert_eq!(
        order,
        vec![
            "Exec[first]".to_owned(),
            "Exec[second]".to_owned(),
            "Exec[third]".to_owned(),
            format!("File[{config}]"),
            "Exec[reload]".to_owned(),
            "Notify[last]".to_owned()
        ]
    );
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(text, "first\nsecond\nthird\nreloaded\n");
    assert_eq!(
        entry(&report, "Exec[reload]")["refresh"]["outcome"],
        "refreshed"
    );
    assert_eq!(
        entry(&report, "Exec[reload]")["refresh"]["triggered_by"],
        json!([format!("File[{config}]")])
    );

    // Nothing changed this time: the refreshonly exec stays quiet.
    std::fs::remove_file(&log).expect("reset log");
    let again = machine.apply_json(&catalog, &policy, &[], 2);
    assert!(entry(&again, "Exec[reload]").get("refresh").is_none());
    assert!(
        !std::fs::read_to_string(&log)
            .expect("log")
            .contains("reloaded")
    );
}

#[test]
fn a_failure_skips_its_dependents_and_the_rest_converge() {
    let machine = Machine::new();
    let after = machine.file("after");
    let independent = machine.file("independent");
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "broken", "attributes": { "command": "echo boom >&2; exit 3" } },
        { "type": "file", "title": after, "attributes": { "content": "x" },
          "metaparams": { "require": "Exec[broken]" } },
        { "type": "notify", "title": "later", "metaparams": { "require": format!("File[{after}]") } },
        { "type": "file", "title": independent, "attributes": { "content": "y" } },
    ]));
    let policy = machine.policy("");
    let report = machine.apply_json(&catalog, &policy, &[], 6);
    let broken = entry(&report, "Exec[broken]");
    assert_eq!(broken["status"], "failed");
    assert_eq!(
        broken["error"],
        "`echo boom >&2; exit 3` returned 3 instead of one of [0]"
    );
    assert!(
        broken["logs"]
            .as_array()
            .expect("logs")
            .iter()
            .any(|log| log["message"] == "stderr: boom"),
        "{broken:#}"
    );
    assert_eq!(
        entry(&report, &format!("File[{after}]"))["status"],
        "skipped_failed_dependency"
    );
    assert_eq!(
        entry(&report, "Notify[later]")["failed_dependencies"],
        json!([format!("File[{after}]")])
    );
    assert!(!std::path::Path::new(&after).exists());
    assert_eq!(
        std::fs::read_to_string(&independent).expect("converged"),
        "y"
    );
    assert_eq!(report["exit_code"], 6);
}

#[test]
fn a_dependency_cycle_is_printed_whole_and_nothing_is_applied() {
    let machine = Machine::new();
    let a = machine.file("a");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": a, "attributes": { "content": "x" },
          "metaparams": { "before": "Exec[b]" } },
        { "type": "exec", "title": "b", "attributes": { "command": "true" },
          "metaparams": { "before": format!("File[{a}]") } },
    ]));
    let run = machine.apply(&catalog, &machine.policy(""), &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "dependency cycle: File[{a}] -> Exec[b] -> File[{a}]"
        )),
        "{run:#?}"
    );
    assert!(run.stderr.contains("nothing was changed"), "{run:#?}");
    assert!(!std::path::Path::new(&a).exists());
}

#[test]
fn invalid_catalogs_report_every_problem_with_its_location() {
    let machine = Machine::new();
    let catalog = machine.catalog(json!([
        { "type": "file", "title": machine.file("a"), "attributes": { "colour": "red" },
          "source": { "file": "site.wcv", "line": 4 } },
        { "type": "file", "title": machine.file("b"), "attributes": { "mode": "0999" },
          "source": { "file": "site.wcv", "line": 9 } },
        { "type": "exec", "title": "relative", "attributes": { "command": ["ls"] } },
        { "type": "pakage", "title": "typo" },
    ]));
    let run = machine.apply(&catalog, &machine.policy(""), &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    for expected in [
        "the catalog has 4 problems; nothing was changed",
        " --> site.wcv:4\n",
        "`file` has no attribute `colour`",
        "help: its attributes with provider `file` are: path, ensure, content, source, target, recurse, recurselimit, purge, force, replace, links, checksum, mode, owner, group, backup",
        " --> site.wcv:9\n",
        "mode `0999` is not an octal mode",
        "Exec[relative]: `ls` is not an absolute path",
        "Pakage[typo]: unknown type `pakage`; no plugin provides it",
    ] {
        assert!(
            run.stderr.contains(expected),
            "missing `{expected}` in:\n{}",
            run.stderr
        );
    }
    let syntax = machine.root().join("broken.json");
    std::fs::write(
        &syntax,
        "{\n  \"format_version\": 1,\n  \"resources\": [ {\"type\": \"file\" ] }\n",
    )
    .expect("write");
    let run = machine.run(&["validate", syntax.to_str().expect("utf-8")]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("broken.json:3:"), "{run:#?}");
}

#[test]
fn two_runs_never_interleave() {
    let machine = Machine::new();
    let slow = machine.catalog(json!([
        { "type": "exec", "title": "slow", "attributes": { "command": "sleep 3" } },
    ]));
    let policy = machine.policy("");
    let mut first = std::process::Command::new(crate::support::WCONVERGE)
        .args([
            "apply",
            slow.to_str().expect("utf-8"),
            "--policy",
            policy.to_str().expect("utf-8"),
        ])
        .env("WCONVERGE_CACHE_DIR", crate::support::cache_dir())
        .env("WCONVERGE_STATE_DIR", machine.root().join("state"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("first run starts");
    // Wait until the first run holds the lock (it writes its pid into the lock file).
    let lock = machine.root().join("state").join("run.lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(&lock).map_or(true, |pid| pid.trim() != first.id().to_string()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the first run never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = machine.apply(&slow, &policy, &[]);
    assert_eq!(second.code, 1, "{second:#?}");
    assert!(second.stderr.contains("holds the run lock"), "{second:#?}");
    assert!(
        second.stderr.contains(&format!("process {}", first.id())),
        "{second:#?}"
    );
    assert_eq!(first.wait().expect("first run ends").code(), Some(2));
}

#[test]
fn file_manages_mode_owner_backup_and_absence() {
    let machine = Machine::new();
    let managed = machine.file("managed");
    std::fs::write(&managed, "old\n").expect("seed");
    std::fs::set_permissions(&managed, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let gone = machine.file("gone");
    std::fs::write(&gone, "bye\n").expect("seed");
    require_root();
    let attributes =
        json!({ "content": "new\n", "mode": "0644", "backup": ".orig", "owner": "nobody" });
    let catalog = machine.catalog(json!([
        { "type": "file", "title": managed, "attributes": attributes },
        { "type": "file", "title": gone, "attributes": { "ensure": "absent" } },
    ]));
    let policy = machine.policy("");
    let report = machine.apply_json(&catalog, &policy, &[], 2);
    let changes: Vec<&str> = entry(&report, &format!("File[{managed}]"))["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|change| change["attribute"].as_str().expect("attribute"))
        .collect();
    assert_eq!(changes, vec!["content", "mode", "owner"]);
    assert_eq!(std::fs::read_to_string(&managed).expect("managed"), "new\n");
    assert_eq!(
        std::fs::read_to_string(format!("{managed}.orig")).expect("backup"),
        "old\n"
    );
    let metadata = std::fs::metadata(&managed).expect("managed");
    assert_eq!(metadata.permissions().mode() & 0o7777, 0o644);
    assert_eq!(metadata.uid(), 65534);
    assert!(!std::path::Path::new(&gone).exists());
    let leftovers: Vec<String> = std::fs::read_dir(machine.files_dir())
        .expect("list")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.contains(".wcv-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary files left behind: {leftovers:?}"
    );
    // A mode change alone does not rewrite the file.
    std::fs::set_permissions(&managed, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let inode = std::fs::metadata(&managed).expect("managed").ino();
    let again = machine.apply_json(&catalog, &policy, &[], 2);
    let changes = &entry(&again, &format!("File[{managed}]"))["changes"];
    assert_eq!(changes[0]["message"], "mode changed '0600' to '0644'");
    assert_eq!(std::fs::metadata(&managed).expect("managed").ino(), inode);
    machine.apply_json(&catalog, &policy, &[], 0);
}

#[test]
fn file_refuses_to_write_through_a_symlink() {
    let machine = Machine::new();
    let target = machine.root().join("outside");
    std::fs::write(&target, "precious\n").expect("seed");
    let link = machine.file("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": link, "attributes": { "content": "overwritten\n" } },
    ]));
    let report = machine.apply_json(&catalog, &machine.policy(""), &[], 4);
    let error = entry(&report, &format!("File[{link}]"))["error"]
        .as_str()
        .expect("error")
        .to_owned();
    assert!(
        error.contains("is a symbolic link; wconverge does not write through links"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("target"),
        "precious\n"
    );
}

#[test]
fn file_refuses_a_parent_symlink_owned_by_someone_else() {
    require_root();
    let machine = Machine::new();
    let real = machine.file("real");
    std::fs::create_dir(&real).expect("real dir");
    let planted = machine.file("planted");
    std::os::unix::fs::symlink(&real, &planted).expect("symlink");
    std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).expect("lchown");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": format!("{planted}/x"), "attributes": { "content": "x" } },
    ]));
    let report = machine.apply_json(&catalog, &machine.policy(""), &[], 4);
    let error = crate::support::first_error(&report);
    assert!(
        error.contains(&format!("`{planted}` is a symlink owned by uid 65534")),
        "{error}"
    );
    assert!(!std::path::Path::new(&real).join("x").exists());
}

#[test]
fn exec_applies_cwd_environment_returns_umask_and_user() {
    let machine = Machine::new();
    let out = machine.file("out");
    require_root();
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "env",
          "attributes": { "command": format!("echo \"$GREETING $(pwd)\" > {out}; umask >> {out}; exit 7"),
                          "cwd": machine.files_dir(), "environment": ["GREETING=hi"],
                          "returns": [0, 7], "umask": "027" } },
        { "type": "exec", "title": "argv",
          "attributes": { "command": ["/bin/echo", "argv works"], "logoutput": true } },
        { "type": "exec", "title": "whoami",
          "attributes": { "command": "id -u", "user": "nobody", "logoutput": "true" } },
    ]));
    let report = machine.apply_json(&catalog, &machine.policy(""), &[], 2);
    assert_eq!(
        std::fs::read_to_string(&out).expect("out"),
        format!("hi {}\n0027\n", machine.files_dir())
    );
    // `logoutput => true` as Puppet users write it, a boolean (or the string).
    let logs = &entry(&report, "Exec[argv]")["logs"];
    assert_eq!(logs[0]["message"], "stdout: argv works");
    assert_eq!(
        entry(&report, "Exec[whoami]")["logs"][0]["message"],
        "stdout: 65534"
    );
}

#[test]
fn exec_kills_a_command_that_runs_past_its_timeout() {
    let machine = Machine::new();
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "slow", "attributes": { "command": "sleep 30", "timeout": 1 } },
    ]));
    let started = std::time::Instant::now();
    let report = machine.apply_json(&catalog, &machine.policy(""), &[], 4);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(
        entry(&report, "Exec[slow]")["error"],
        "`sleep 30` ran past its timeout of 1 second; it was killed with everything it started"
    );
}

#[test]
fn notify_logs_its_message_every_run() {
    let machine = Machine::new();
    let catalog = machine.catalog(json!([
        { "type": "notify", "title": "greeting", "attributes": { "message": "hello, operator" } },
    ]));
    let policy = machine.policy("");
    for _ in 0..2 {
        let run = machine.apply(&catalog, &policy, &[]);
        assert_eq!(run.code, 2, "{run:#?}");
        assert!(
            run.stdout
                .contains("Notify[greeting]: notice: hello, operator"),
            "{run:#?}"
        );
    }
}

#[test]
fn graph_and_types_describe_the_catalog_and_the_plugins() {
    let machine = Machine::new();
    let catalog = machine.catalog(json!([
        { "type": "notify", "title": "b", "metaparams": { "require": "Notify[a]" } },
        { "type": "notify", "title": "a", "metaparams": { "notify": "Notify[c]" } },
        { "type": "notify", "title": "c" },
    ]));
    let run = machine.run(&[
        "graph",
        catalog.to_str().expect("utf-8"),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(
        run.json()["order"],
        json!(["Notify[a]", "Notify[b]", "Notify[c]"])
    );
    let dot = machine.run(&["graph", catalog.to_str().expect("utf-8")]);
    assert!(
        dot.stdout
            .contains("\"Notify[a]\" -> \"Notify[c]\" [style=dashed, label=\"notify\"];"),
        "{dot:#?}"
    );
    let types = machine.run(&["types", "exec"]);
    assert_eq!(types.code, 0, "{types:#?}");
    assert!(
        types
            .stdout
            .contains("refreshonly  Boolean, [0..1], parameter, default false"),
        "{types:#?}"
    );
    assert!(
        types.stdout.contains(
            "script type of interpreter plugin `sh`: its guards run with `exec` unless \
             `guard_interpreter` says otherwise, inheriting cwd, environment, group, path, \
             user, umask, architecture, interpreter"
        ),
        "{types:#?}"
    );
    let list = machine.run(&["plugins", "list"]);
    assert!(list.stdout.contains("file  provider builtin"), "{list:#?}");
    assert!(
        list.stdout.contains(
            "  guards inherit: cwd, environment, group, path, user, umask, architecture, \
             interpreter; the `default` guard interpreter on unix"
        ),
        "{list:#?}"
    );
    assert!(
        list.stdout.contains("launcher  launcher builtin"),
        "{list:#?}"
    );
}

/// Tests of ownership and run-as need root (this suite's machines and CI run as root).
/// Elsewhere they fail loudly rather than pass without testing anything.
pub(crate) fn require_root() {
    let euid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(str::to_owned))
        })
        .unwrap_or_default();
    assert_eq!(
        euid, "0",
        "this test changes owners and runs programs as another user: run the suite as root, \
         or exclude it with `--skip`"
    );
}

/// `apply --jobs N` never changes what a manifest means: commands touch what no one can
/// tell, so four of them (each taking 0.3 s) with no relationships still run one after
/// the other in manifest order; either way a failure skips its dependents, a change
/// refreshes its subscriber, and the report is the same, in the same order.
#[test]
fn commands_keep_their_manifest_order_under_jobs_with_the_report_of_one_at_a_time() {
    let run = |jobs: &str| {
        let machine = Machine::new();
        let log = machine.file("log");
        let step = |name: &str| {
            json!({ "type": "exec", "title": name, "attributes": {
                "command": format!("echo start {name} >> {log}; sleep 0.3; echo end {name} >> {log}") } })
        };
        let catalog = machine.catalog(json!([
            step("a"),
            step("b"),
            step("c"),
            step("d"),
            { "type": "exec", "title": "broken", "attributes": { "command": "exit 3" } },
            { "type": "exec", "title": "after-broken", "attributes": { "command": "true" },
              "metaparams": { "require": "Exec[broken]" } },
            { "type": "file", "title": machine.file("config"), "attributes": { "content": "v1\n" },
              "metaparams": { "notify": "Exec[reload]" } },
            { "type": "exec", "title": "reload",
              "attributes": { "command": "true", "refreshonly": true } },
        ]));
        let report = machine.apply_json(&catalog, &machine.policy(""), &["--jobs", jobs], 6);
        let lines: Vec<String> = std::fs::read_to_string(&log)
            .expect("log")
            .lines()
            .map(str::to_owned)
            .collect();
        (report, lines)
    };
    let (alone, alone_log) = run("1");
    let (together, together_log) = run("4");
    // One at a time, each command ends before the next starts.
    for pair in alone_log.chunks(2) {
        assert!(
            pair[0].starts_with("start ") && pair[1] == pair[0].replace("start", "end"),
            "{alone_log:?}"
        );
    }
    // With four jobs, the same: in manifest order, none beside another.
    assert_eq!(together_log, alone_log);
    assert_eq!(together_log.len(), 8, "{together_log:?}");
    let shape = |report: &serde_json::Value| -> Vec<String> {
        report["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|entry| {
                // Each run has its own directory: names are compared without it.
                let last = |text: &str| text.rsplit('/').next().unwrap_or_default().to_owned();
                let triggers: Vec<String> = entry["refresh"]["triggered_by"]
                    .as_array()
                    .map(|triggers| {
                        triggers
                            .iter()
                            .map(|trigger| last(trigger.as_str().unwrap_or_default()))
                            .collect()
                    })
                    .unwrap_or_default();
                format!(
                    "{} {} {} {} {triggers:?}",
                    last(entry["resource"].as_str().unwrap_or_default()),
                    entry["status"],
                    entry["failed_dependencies"],
                    entry["refresh"]["outcome"]
                )
            })
            .collect()
    };
    assert_eq!(shape(&alone), shape(&together));
    assert_eq!(alone["summary"], together["summary"]);
    assert_eq!(
        entry(&together, "Exec[after-broken]")["status"],
        "skipped_failed_dependency"
    );
    assert_eq!(
        entry(&together, "Exec[reload]")["refresh"]["outcome"],
        "refreshed"
    );
}

/// An `apply` whose output nobody reads (`wconverge apply | head`, or with
/// stderr too) still converges every resource, finishes its audit trail and exits with
/// the run's exit code; `/dev/full` as stdout makes a run that would succeed fail.
#[test]
fn an_apply_whose_output_pipe_is_closed_finishes_and_exits_with_the_runs_code() {
    fn text(path: &std::path::Path) -> &str {
        path.to_str().expect("utf-8")
    }
    let machine = Machine::new();
    let policy = machine.policy(&crate::support::test_plugins_policy(&machine, ""));
    let last = machine.file("last");
    let catalog = machine.catalog(serde_json::json!([
        { "type": "file", "title": machine.file("first"), "attributes": { "content": "1\n" } },
        { "type": "hostile", "title": machine.file("fails"),
          "attributes": { "action": "write_file", "target": "/etc/not-granted" } },
        { "type": "file", "title": last, "attributes": { "content": "2\n" } },
    ]));
    for (format, with_stderr) in [("human", false), ("json", false), ("human", true)] {
        let _ = std::fs::remove_file(&last);
        let log = machine
            .root()
            .join(format!("audit-{format}-{with_stderr}.jsonl"));
        let (reader, writer) = std::io::pipe().expect("pipe");
        // Nobody will read: every write gets EPIPE.
        drop(reader);
        let mut command = machine.command(crate::support::WCONVERGE);
        command
            .args(["apply", text(&catalog), "--policy", text(&policy)])
            .args(["--audit-log", text(&log), "--jobs", "1", "--format", format])
            .stdout(writer.try_clone().expect("clone"));
        if with_stderr {
            command.stderr(writer);
        } else {
            drop(writer);
        }
        let status = command.status().expect("wconverge runs");
        assert_eq!(
            status.code(),
            Some(6),
            "{format}, stderr closed too: {with_stderr}: one failed, others changed"
        );
        assert_eq!(
            std::fs::read_to_string(&last).expect("the last resource ran"),
            "2\n"
        );
        let events = crate::support::trail(&log);
        assert!(
            events
                .iter()
                .any(|event| event["operation"] == "open-for-writing"
                    && event["decision"] == "denied"),
            "{events:#?}"
        );
        assert!(
            events.iter().any(|event| event["operation"] == "rename"
                && event["target"]
                    .as_str()
                    .is_some_and(|target| target.ends_with(&format!(" -> {last}")))),
            "{events:#?}"
        );
    }

    // Output lost another way is said on stderr, and the run goes on; it turns a
    // success (0) into a failure, and leaves any other code as it was.
    let fine = machine.catalog(serde_json::json!([
        { "type": "file", "title": machine.file("fine"), "attributes": { "content": "3\n" } },
    ]));
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
    };
    let lost = "wconverge: cannot write to stdout: No space left on device";
    let changed = machine
        .command(crate::support::WCONVERGE)
        .args(["apply", text(&fine), "--policy", text(&policy)])
        .stdout(full())
        .output()
        .expect("wconverge runs");
    assert_eq!(changed.status.code(), Some(2), "{changed:#?}");
    assert!(
        String::from_utf8_lossy(&changed.stderr).contains(lost),
        "{changed:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("fine")).expect("converged"),
        "3\n"
    );
    let compiled = machine
        .command(crate::support::WCONVERGE)
        .args([
            "compile",
            text(&machine.manifest("site.wcv", "notify { 'hi': }\n")),
        ])
        .stdout(full())
        .output()
        .expect("wconverge runs");
    assert_eq!(compiled.status.code(), Some(1), "{compiled:#?}");
    assert!(
        String::from_utf8_lossy(&compiled.stderr).contains(lost),
        "{compiled:#?}"
    );
}
