//! Puppet's `file` type, complete: directories, links, sources
//! and whole trees with `recurse` and `purge`, `force`, `replace`, `checksum`, symbolic
//! modes, and the relationships Puppet implies (a file requires its directory).

use crate::support::{Machine, entry};
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn mode_of(path: &str) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|error| panic!("{path}: {error}"))
        .permissions()
        .mode()
        & 0o7777
}

/// Every change message of a report entry, in order.
fn messages(report: &Value, resource: &str) -> Vec<String> {
    entry(report, resource)["changes"]
        .as_array()
        .map(|changes| {
            changes
                .iter()
                .map(|change| change["message"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn order(report: &Value) -> Vec<String> {
    report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|entry| entry["resource"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_tree_is_copied_from_its_source_purged_and_a_second_run_changes_nothing() {
    let machine = Machine::new();
    let source = machine.file("source");
    std::fs::create_dir_all(format!("{source}/sub")).expect("source");
    std::fs::write(format!("{source}/index.html"), "<h1>hi</h1>\n").expect("index");
    std::fs::write(format!("{source}/sub/app.js"), "run();\n").expect("app");
    std::os::unix::fs::symlink("index.html", format!("{source}/home.html")).expect("link");
    let www = machine.file("www");
    std::fs::create_dir_all(format!("{www}/old/deeper")).expect("www");
    std::fs::write(format!("{www}/old/deeper/x"), "x").expect("old");
    std::fs::write(format!("{www}/stale.html"), "stale").expect("stale");
    std::fs::write(format!("{www}/index.html"), "outdated\n").expect("outdated");
    // The file another resource manages is declared before its directory: Puppet's
    // autorequire orders it after, and purge leaves it alone.
    let manifest = machine.manifest(
        "site.wcv",
        r#"
file { '@FILES@/www/config.json': content => "{}\n", mode => '0600' }
file { '@FILES@/www':
  ensure  => directory,
  source  => '@FILES@/source',
  recurse => true,
  purge   => true,
  force   => true,
  mode    => 'u=rwX,go=rX',
}
"#,
    );
    let policy = machine.policy("");
    let www_ref = format!("File[{www}]");
    let config_ref = format!("File[{www}/config.json]");

    let noop = machine.apply_json(&manifest, &policy, &["--noop"], 2);
    let planned = messages(&noop, &www_ref).join("\n");
    for expected in [
        format!("`{www}/stale.html` removed file (purged: not in the source and not managed)"),
        format!("`{www}/old` removed directory (with everything in it) (purged"),
        format!("`{www}/index.html` content replaced by that of `{source}/index.html`"),
        format!("`{www}/home.html` created link to `index.html`"),
        format!("`{www}/sub` created directory, mode 0755"),
        format!("`{www}/sub/app.js` created with content {{sha256}}"),
    ] {
        assert!(
            planned.contains(&expected),
            "missing `{expected}` in:\n{planned}"
        );
    }
    assert!(!planned.contains("config.json"), "{planned}");
    assert!(
        Path::new(&format!("{www}/stale.html")).exists(),
        "noop removed nothing"
    );
    assert!(
        !Path::new(&format!("{www}/sub")).exists(),
        "noop made nothing"
    );

    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(order(&report), vec![www_ref.clone(), config_ref.clone()]);
    assert_eq!(
        std::fs::read_to_string(format!("{www}/index.html")).expect("index"),
        "<h1>hi</h1>\n"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{www}/sub/app.js")).expect("app"),
        "run();\n"
    );
    assert_eq!(
        std::fs::read_link(format!("{www}/home.html")).expect("link"),
        Path::new("index.html")
    );
    assert!(!Path::new(&format!("{www}/stale.html")).exists());
    assert!(!Path::new(&format!("{www}/old")).exists());
    assert_eq!(
        std::fs::read_to_string(format!("{www}/config.json")).expect("config"),
        "{}\n"
    );
    assert_eq!(
        mode_of(&format!("{www}/config.json")),
        0o600,
        "its own mode"
    );
    assert_eq!(mode_of(&format!("{www}/sub")), 0o755);
    assert_eq!(mode_of(&format!("{www}/sub/app.js")), 0o644);

    let again = machine.apply_json(&manifest, &policy, &[], 0);
    assert_eq!(again["summary"]["changed"], 0, "{again:#}");

    // A change in the source is copied on the next run, and only that.
    std::fs::write(format!("{source}/sub/app.js"), "run(2);\n").expect("app");
    let third = machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(
        messages(&third, &www_ref),
        vec![format!(
            "`{www}/sub/app.js` content replaced by that of `{source}/sub/app.js`, {{sha256}}{}",
            crate::support::sha256_of(&format!("{source}/sub/app.js"))
        )]
    );
}

#[test]
fn links_are_made_and_retargeted_and_a_directory_gives_way_only_with_force() {
    let machine = Machine::new();
    let link = machine.file("current");
    let manifest = |target: &str, force: bool| {
        machine.manifest(
            "link.wcv",
            &format!(
                "file {{ '@FILES@/current': ensure => link, target => '{target}', force => {force} }}\n"
            ),
        )
    };
    let policy = machine.policy("");
    let report = machine.apply_json(&manifest("/etc/hostname", false), &policy, &[], 2);
    assert_eq!(
        messages(&report, &format!("File[{link}]")),
        vec!["created link to `/etc/hostname`"]
    );
    assert_eq!(
        std::fs::read_link(&link).expect("link"),
        Path::new("/etc/hostname")
    );
    machine.apply_json(&manifest("/etc/hostname", false), &policy, &[], 0);
    let report = machine.apply_json(&manifest("releases/2", false), &policy, &[], 2);
    assert_eq!(
        messages(&report, &format!("File[{link}]")),
        vec!["target changed '/etc/hostname' to 'releases/2'"]
    );

    std::fs::remove_file(&link).expect("remove");
    std::fs::create_dir_all(format!("{link}/inside")).expect("a directory there");
    let refused = machine.apply_json(&manifest("releases/2", false), &policy, &[], 4);
    assert!(
        crate::support::first_error(&refused)
            .contains("is a directory; set `force => true` to replace it"),
        "{refused:#}"
    );
    assert!(Path::new(&format!("{link}/inside")).is_dir(), "left alone");
    machine.apply_json(&manifest("releases/2", true), &policy, &[], 2);
    assert_eq!(
        std::fs::read_link(&link).expect("link"),
        Path::new("releases/2")
    );

    // A link at a path managed as a file is refused, as before.
    let file = machine.manifest(
        "file.wcv",
        "file { '@FILES@/current': content => \"x\\n\" }\n",
    );
    let refused = machine.apply_json(&file, &policy, &[], 4);
    assert!(
        crate::support::first_error(&refused).contains("is a symbolic link"),
        "{refused:#}"
    );
    assert_eq!(
        std::fs::read_link(&link).expect("link"),
        Path::new("releases/2")
    );
}

#[test]
fn directories_are_made_removed_only_with_force_and_take_symbolic_modes() {
    let machine = Machine::new();
    let dir = machine.file("conf.d");
    let policy = machine.policy("");
    let make = machine.manifest(
        "dir.wcv",
        "file { '@FILES@/conf.d': ensure => directory, mode => '0640' }\n",
    );
    let report = machine.apply_json(&make, &policy, &[], 2);
    assert_eq!(
        messages(&report, &format!("File[{dir}]")),
        vec!["created directory, mode 0750"],
        "a numeric mode on a directory gets search where read, as Puppet's"
    );
    assert_eq!(mode_of(&dir), 0o750);
    machine.apply_json(&make, &policy, &[], 0);

    std::fs::write(format!("{dir}/a.conf"), "a").expect("a");
    std::fs::set_permissions(
        format!("{dir}/a.conf"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    let symbolic = machine.manifest(
        "modes.wcv",
        "file { '@FILES@/conf.d': ensure => directory, mode => 'u=rwX,go=rX', recurse => true }\n\
         file { '@FILES@/run.sh': content => \"#!/bin/sh\\n\", mode => 'a+x' }\n",
    );
    let report = machine.apply_json(&symbolic, &policy, &[], 2);
    assert_eq!(mode_of(&dir), 0o755, "{report:#}");
    assert_eq!(
        mode_of(&format!("{dir}/a.conf")),
        0o644,
        "X adds search only to directories and what some class may execute already"
    );
    assert_eq!(
        mode_of(&machine.file("run.sh")),
        0o755,
        "a+x from the default 0644"
    );
    machine.apply_json(&symbolic, &policy, &[], 0);

    let absent = |force: bool| {
        machine.manifest(
            "absent.wcv",
            &format!("file {{ '@FILES@/conf.d': ensure => absent, force => {force} }}\n"),
        )
    };
    let refused = machine.apply_json(&absent(false), &policy, &[], 4);
    assert!(
        crate::support::first_error(&refused)
            .contains("is a directory; set `force => true` to remove it"),
        "{refused:#}"
    );
    assert!(Path::new(&dir).is_dir());
    machine.apply_json(&absent(true), &policy, &[], 2);
    assert!(!Path::new(&dir).exists());
}

#[test]
fn replace_false_checksum_none_and_single_file_sources() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let kept = machine.file("kept");
    std::fs::write(&kept, "local edit\n").expect("kept");
    let copied = machine.file("copied");
    let source = machine.file("motd.source");
    std::fs::write(&source, "welcome\n").expect("source");
    let manifest = machine.manifest(
        "site.wcv",
        r#"
file { '@FILES@/kept': content => "managed\n", replace => false, mode => '0600' }
file { '@FILES@/unchecked': content => "managed\n", checksum => none }
file { '@FILES@/copied': source => '@FILES@/motd.source', owner => '0', group => '0' }
"#,
    );
    std::fs::write(machine.file("unchecked"), "as it is\n").expect("unchecked");
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(
        std::fs::read_to_string(&kept).expect("kept"),
        "local edit\n"
    );
    assert_eq!(mode_of(&kept), 0o600, "{report:#}");
    assert_eq!(
        std::fs::read_to_string(machine.file("unchecked")).expect("unchecked"),
        "as it is\n"
    );
    assert_eq!(
        std::fs::read_to_string(&copied).expect("copied"),
        "welcome\n"
    );
    let meta = std::fs::metadata(&copied).expect("copied");
    assert_eq!((meta.uid(), meta.gid()), (0, 0));
    machine.apply_json(&manifest, &policy, &[], 0);
    std::fs::write(&source, "welcome back\n").expect("source");
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(
        messages(&report, &format!("File[{copied}]")),
        vec![format!(
            "content replaced by that of `{source}`, {{sha256}}{}",
            crate::support::sha256_of(&source)
        )]
    );
    assert_eq!(
        std::fs::read_to_string(&copied).expect("copied"),
        "welcome back\n"
    );
}

#[test]
fn recursion_never_follows_a_link_out_of_the_tree() {
    let machine = Machine::new();
    let policy = machine.policy("");
    // Outside the managed tree (and outside the policy's directory).
    let outside = tempfile::tempdir().expect("outside");
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "keep me\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let tree = machine.file("tree");
    std::fs::create_dir_all(format!("{tree}/sub")).expect("tree");
    std::fs::write(format!("{tree}/sub/file"), "f").expect("file");
    std::os::unix::fs::symlink(outside.path(), format!("{tree}/sub/escape")).expect("link");
    std::os::unix::fs::symlink(&secret, format!("{tree}/secret")).expect("link");
    let manifest = machine.manifest(
        "tree.wcv",
        "file { '@FILES@/tree': ensure => directory, recurse => true, mode => '0640' }\n",
    );
    machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(mode_of(&format!("{tree}/sub")), 0o750);
    assert_eq!(mode_of(&format!("{tree}/sub/file")), 0o640);
    assert_eq!(
        mode_of(&secret.to_string_lossy()),
        0o600,
        "never through a link"
    );
    assert_eq!(
        mode_of(&outside.path().to_string_lossy()),
        0o700,
        "never through a link"
    );

    // A source whose link leads out of its directory is not followed either.
    let source = machine.file("source");
    std::fs::create_dir_all(&source).expect("source");
    std::os::unix::fs::symlink(&secret, format!("{source}/passwd")).expect("link");
    let follow = machine.manifest(
        "follow.wcv",
        "file { '@FILES@/copy': ensure => directory, source => '@FILES@/source', recurse => true, links => follow }\n",
    );
    let refused = machine.apply_json(&follow, &policy, &[], 4);
    assert!(
        crate::support::first_error(&refused).contains("passwd"),
        "{refused:#}"
    );
    assert!(
        !Path::new(&machine.file("copy/passwd")).exists(),
        "nothing of the secret was copied"
    );
    // Managed as a link, it stays a link (data, not the secret's content).
    let manage = machine.manifest(
        "manage.wcv",
        "file { '@FILES@/copy': ensure => directory, source => '@FILES@/source', recurse => true }\n",
    );
    machine.apply_json(&manage, &policy, &[], 2);
    assert_eq!(
        std::fs::read_link(machine.file("copy/passwd")).expect("link"),
        secret
    );
}

#[test]
fn puppet_urls_and_mixed_attributes_are_refused_before_anything_runs() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "bad.wcv",
        r#"file { '@FILES@/a': source => 'puppet:///modules/nginx/nginx.conf' }
file { '@FILES@/b': ensure => link }
file { '@FILES@/c': ensure => directory, content => "x" }
"#,
    );
    let run = machine.apply(&manifest, &machine.policy(""), &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    for expected in [
        "bad.wcv:1:",
        "names a module file, and there is no module path",
        "bad.wcv:2:",
        "ensure => link needs `target`",
        "bad.wcv:3:",
        "`content` is for regular files; with ensure => directory leave it out",
    ] {
        assert!(
            run.stderr.contains(expected),
            "missing `{expected}` in:\n{}",
            run.stderr
        );
    }
    assert!(
        std::fs::read_dir(machine.file(""))
            .expect("files")
            .next()
            .is_none()
    );
}

#[test]
fn puppet_module_sources_are_found_in_the_module_path_when_applied() {
    let machine = Machine::new();
    let modules = machine.root().join("modules");
    let files = modules.join("site/files");
    std::fs::create_dir_all(files.join("www/css")).expect("module");
    std::fs::write(files.join("motd"), "welcome\n").expect("motd");
    std::fs::write(files.join("www/index.html"), "<h1>hi</h1>\n").expect("index");
    std::fs::write(files.join("www/css/site.css"), "body {}\n").expect("css");
    let manifest = machine.manifest(
        "site.wcv",
        r#"
file { '@FILES@/motd': source => 'puppet:///modules/site/motd' }
file { '@FILES@/www': ensure => directory, source => 'puppet:///modules/site/www', recurse => true }
"#,
    );
    // The module directories need the file plugin's read access (the test policy grants
    // `files/` only).
    let policy = machine.policy("");
    let policy_text = std::fs::read_to_string(&policy)
        .expect("policy")
        .replacen(
            "[plugins.file]\nsource = \"builtin\"\ndirectories = [",
            &format!(
                "[plugins.file]\nsource = \"builtin\"\ndirectories = [{{ path = \"{}\", access = \"read\" }}, ",
                modules.display()
            ),
            1,
        );
    std::fs::write(&policy, policy_text).expect("policy");
    let modulepath = format!(
        "{}:{}",
        machine.root().join("other").display(),
        modules.display()
    );

    // Compiled, the catalog keeps the URL: it is resolved where it is applied.
    let compiled = machine.compile(&manifest, &policy);
    assert_eq!(compiled.code, 0, "{compiled:#?}");
    assert!(
        compiled.stdout.contains("puppet:///modules/site/motd"),
        "{compiled:#?}"
    );

    machine.apply_with(&manifest, Some(&policy), &["--modulepath", &modulepath], 2);
    assert_eq!(
        std::fs::read_to_string(machine.file("motd")).expect("motd"),
        "welcome\n"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("www/css/site.css")).expect("css"),
        "body {}\n"
    );
    machine.apply_with(&manifest, Some(&policy), &["--modulepath", &modulepath], 0);

    let missing = machine.manifest(
        "missing.wcv",
        "file { '@FILES@/x': source => 'puppet:///modules/site/nothing' }\n",
    );
    let run = machine.run(&[
        "apply",
        missing.to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
        "--modulepath",
        &modulepath,
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains("missing.wcv:1:")
            && run
                .stderr
                .contains("no directory of the module path holds `site/files/nothing`"),
        "{run:#?}"
    );
}

/// A catalog of `count` files `DIR/file-NNN` (`dir_of` their index), each holding
/// `line NNN` and mode 0640.
pub(crate) fn numbered_files(
    machine: &Machine,
    count: usize,
    dir_of: impl Fn(usize) -> &'static str,
) -> std::path::PathBuf {
    let resources: Vec<Value> = (0..count)
        .map(|index| {
            serde_json::json!({
                "type": "file",
                "title": machine.file(&format!("{}/file-{index:03}", dir_of(index))),
                "attributes": { "content": format!("line {index}\n"), "mode": "0640" },
            })
        })
        .collect();
    machine.catalog(Value::Array(resources))
}

/// `apply CATALOG --policy POLICY --format json --jobs JOBS`, with the debug log.
fn apply_logged(
    machine: &Machine,
    catalog: &Path,
    policy: &Path,
    jobs: &str,
) -> crate::support::Run {
    let mut command = machine.command(crate::support::WCONVERGE);
    command
        .args(["apply", catalog.to_str().expect("utf-8"), "--policy"])
        .arg(policy)
        .args(["--format", "json", "--jobs", jobs])
        .env("WCONVERGE_LOG", "debug");
    crate::support::Run::of(&mut command)
}

/// How many resources each `validate` call of the file plugin checked, from a debug log.
fn validate_calls(stderr: &str) -> Vec<usize> {
    counts(stderr, " validate plugin=file resources=")
}

/// How many resources each `validate` call that was answered from the cache (the same
/// call found nothing wrong in an earlier run) would have checked, from a debug log.
fn validated_before(stderr: &str) -> Vec<usize> {
    counts(stderr, " validated before plugin=file resources=")
}

pub(crate) fn counts(stderr: &str, needle: &str) -> Vec<usize> {
    let mut counts: Vec<usize> = stderr
        .lines()
        .filter_map(|line| line.split(needle).nth(1))
        .map(|count| count.trim().parse().expect("a count"))
        .collect();
    counts.sort_unstable();
    counts
}

/// How many lines of a debug log hold `needle`.
pub(crate) fn log_lines(stderr: &str, needle: &str) -> usize {
    stderr.lines().filter(|line| line.contains(needle)).count()
}

/// Whether a debug log shows a `check` that began while another was under way (the
/// `check begins` line of one between another's and its `check` or `check replayed`).
fn checks_overlap(stderr: &str) -> bool {
    let mut running = 0usize;
    for line in stderr.lines() {
        if line.contains(" check begins plugin=") {
            if running > 0 {
                return true;
            }
            running += 1;
        } else if line.contains(" check plugin=") || line.contains(" check replayed plugin=") {
            running = running.saturating_sub(1);
        }
    }
    false
}

/// The `check` calls a run made or replayed, from its debug log: how many resources
/// each read and planned, and the directories it was granted.
pub(crate) fn state_reads(stderr: &str) -> Vec<(usize, String)> {
    check_lines(stderr, " check plugin=")
        .into_iter()
        .chain(check_lines(stderr, " check replayed plugin="))
        .collect()
}

/// What [`state_reads`] finds in the lines that hold `needle`.
pub(crate) fn check_lines(stderr: &str, needle: &str) -> Vec<(usize, String)> {
    stderr
        .lines()
        .filter(|line| line.contains(needle))
        .map(|line| {
            let field = |name: &str| {
                line.split(&format!("{name}="))
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .unwrap_or_else(|| panic!("no {name} in {line}"))
                    .to_owned()
            };
            (
                field("resources").parse().expect("a count"),
                field("directories"),
            )
        })
        .collect()
}

/// A no-op of files reads the states of each directory's files in one call,
/// granted that directory alone, wherever the files sit in the run order; after a run
/// changes a file, what was read is not trusted, and the file changed by hand is the one
/// converged.
#[test]
fn files_are_checked_one_call_per_directory_each_granted_its_directory_alone() {
    let machine = Machine::new();
    let dirs = ["a", "b", "c"];
    for dir in dirs {
        std::fs::create_dir(machine.file(dir)).expect("dir");
    }
    // Interleaved: a, b, c, a, b, c...
    let catalog = numbered_files(&machine, 120, |index| dirs[index % 3]);
    let policy = machine.policy("");
    let apply = || {
        let run = apply_logged(&machine, &catalog, &policy, "2");
        let reads = state_reads(&run.stderr);
        (run, reads)
    };
    let (first, reads) = apply();
    assert_eq!(first.code, 2, "{first:#?}");
    assert_eq!(first.json()["summary"]["changed"], 120, "{}", first.stdout);
    // The provider validated them many at a time (calls of at least 64, spread over the
    // cores).
    assert_eq!(validate_calls(&first.stderr), [56, 64], "{first:#?}");
    // Once a file changed, the next read their own states until one is found in sync,
    // which none is: no batch is read for nothing (but by each of the two workers, at
    // most, before the first change).
    assert!(reads.len() <= 2, "{reads:?}");
    // Files planned on their own are logged (the line the runs below must not show).
    assert!(
        log_lines(&first.stderr, " plan plugin=") >= 100,
        "{first:#?}"
    );

    let (second, reads) = apply();
    assert_eq!(second.code, 0, "{second:#?}");
    // Each batch planned its files too: none is planned on its own; and the same calls
    // of `validate` found nothing wrong in the first run, so they are not made again.
    assert_eq!(log_lines(&second.stderr, " plan plugin="), 0, "{second:#?}");
    assert_eq!(validate_calls(&second.stderr), [0; 0], "{second:#?}");
    assert_eq!(validated_before(&second.stderr), [56, 64], "{second:#?}");
    let mut expected: Vec<(usize, String)> =
        dirs.iter().map(|dir| (40, machine.file(dir))).collect();
    let mut seen = reads.clone();
    seen.sort();
    expected.sort();
    assert_eq!(
        seen, expected,
        "one call of 40 files per directory: {reads:?}"
    );

    let tampered = machine.file("b/file-061");
    std::fs::write(&tampered, "tampered\n").expect("tampered");
    let (third, _) = apply();
    assert_eq!(third.code, 2, "{third:#?}");
    let report = third.json();
    assert_eq!(report["summary"]["changed"], 1, "{}", third.stdout);
    assert_eq!(
        entry(&report, &format!("File[{tampered}]"))["status"],
        "changed"
    );
    assert_eq!(
        std::fs::read_to_string(&tampered).expect("restored"),
        "line 61\n"
    );
}

/// A `notify` changes nothing on the machine (its plugin may write no
/// directory and launch no program): the files that run after it keep the states their
/// batch read, where a resource that changes the machine makes them read their own.
#[test]
fn a_notify_leaves_the_states_files_read_in_a_batch_standing() {
    let machine = Machine::new();
    std::fs::create_dir(machine.file("a")).expect("dir");
    let mut resources = vec![serde_json::json!({
        "type": "notify", "title": "hello", "attributes": { "message": "hello" }
    })];
    resources.extend((0..10).map(|index| {
        serde_json::json!({
            "type": "file",
            "title": machine.file(&format!("a/file-{index:03}")),
            "attributes": { "content": format!("line {index}\n") },
        })
    }));
    let catalog = machine.catalog(Value::Array(resources));
    let policy = machine.policy("");
    // One worker: the notify runs first, every time.
    let first = apply_logged(&machine, &catalog, &policy, "1");
    assert_eq!(first.code, 2, "{first:#?}");
    let second = apply_logged(&machine, &catalog, &policy, "1");
    assert_eq!(
        second.code, 2,
        "the notify changes, as in Puppet: {second:#?}"
    );
    assert_eq!(
        second.json()["summary"]["unchanged"],
        10,
        "{}",
        second.stdout
    );
    assert_eq!(
        state_reads(&second.stderr),
        [(10, machine.file("a"))],
        "{second:#?}"
    );
    assert_eq!(
        log_lines(&second.stderr, " plan plugin=file"),
        0,
        "{second:#?}"
    );
}

/// A batch is cut to fit its plugin's memory: files of 1 MiB each are
/// validated and checked several at a time, no call holding more than an eighth of the
/// plugin's memory limit, and the no-op holds.
#[test]
fn batches_of_large_files_are_cut_to_fit_the_plugin_memory() {
    let machine = Machine::new();
    let content = "x".repeat(1 << 20);
    let resources: Vec<Value> = (0..24)
        .map(|index| {
            serde_json::json!({
                "type": "file",
                "title": machine.file(&format!("big-{index:02}")),
                "attributes": { "content": content },
            })
        })
        .collect();
    let catalog = machine.catalog(Value::Array(resources));
    // An eighth of 64 MiB: 8 MiB, so at most 7 files of 1 MiB and their names.
    let policy = machine.policy("[plugins.file.limits]\nmemory_mib = 64\n");
    let apply = || apply_logged(&machine, &catalog, &policy, "1");
    let first = apply();
    assert_eq!(first.code, 2, "{first:#?}");
    let second = apply();
    assert_eq!(second.code, 0, "{second:#?}");
    let reads = state_reads(&second.stderr);
    assert_eq!(
        reads.iter().map(|(count, _)| count).sum::<usize>(),
        24,
        "{reads:?}"
    );
    assert!(
        reads.len() >= 4 && reads.iter().all(|(count, _)| *count <= 7),
        "{reads:?}"
    );
    let validated = validate_calls(&first.stderr);
    assert_eq!(validated.iter().sum::<usize>(), 24, "{validated:?}");
    assert!(
        validated.len() >= 4 && validated.iter().all(|count| *count <= 7),
        "{validated:?}"
    );
    assert_eq!(validated_before(&second.stderr), validated, "{second:#?}");
}

/// A `validate` call that found nothing wrong is remembered in the cache (for
/// its component, engine, policy entry and exact input) and not made again for the same
/// resources; one that found a problem is made, and the problem shown, on every run; and
/// an entry that does not verify is not trusted but rebuilt.
#[test]
fn a_clean_validate_is_remembered_and_a_problem_is_shown_on_every_run() {
    let machine = Machine::new();
    // A cache of this test's own, because its entry is tampered with below.
    let cache = crate::support::private_cache(&machine);
    let components = cache.join("components");
    let policy = machine.policy("");
    let apply = |catalog: &Path| {
        let mut command = machine.command(crate::support::WCONVERGE);
        command
            .args(["apply", catalog.to_str().expect("utf-8"), "--policy"])
            .arg(&policy)
            .args(["--format", "json", "--jobs", "1"])
            .env("WCONVERGE_CACHE_DIR", &cache)
            .env("WCONVERGE_LOG", "debug");
        crate::support::Run::of(&mut command)
    };

    std::fs::create_dir(machine.file("a")).expect("dir");
    let clean = numbered_files(&machine, 3, |_| "a");
    let first = apply(&clean);
    assert_eq!(first.code, 2, "{first:#?}");
    assert_eq!(validate_calls(&first.stderr), [3], "{first:#?}");
    let second = apply(&clean);
    assert_eq!(second.code, 0, "{second:#?}");
    assert_eq!(validate_calls(&second.stderr), [0; 0], "{second:#?}");
    assert_eq!(validated_before(&second.stderr), [3], "{second:#?}");

    // The remembered calls, tampered with: not trusted, and the calls made again.
    let remembered: Vec<std::path::PathBuf> = std::fs::read_dir(&components)
        .expect("the cache")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "validated")
        })
        .collect();
    assert_eq!(remembered.len(), 1, "{remembered:?}");
    let mut bytes = std::fs::read(&remembered[0]).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&remembered[0], bytes).expect("tampered");
    let third = apply(&clean);
    assert_eq!(third.code, 0, "{third:#?}");
    assert!(
        third
            .stderr
            .contains("its digest does not match its content"),
        "{third:#?}"
    );
    assert_eq!(validate_calls(&third.stderr), [3], "{third:#?}");
    assert_eq!(validated_before(&apply(&clean).stderr), [3]);

    // A problem the provider finds is found on every run.
    let wrong = machine.catalog(serde_json::json!([{
        "type": "file",
        "title": machine.file("wrong"),
        "attributes": { "content": "x\n", "backup": true },
    }]));
    for _ in 0..2 {
        let run = apply(&wrong);
        assert_eq!(run.code, 1, "{run:#?}");
        assert!(
            run.stderr.contains("backup => true names no suffix"),
            "{run:#?}"
        );
        assert_eq!(validate_calls(&run.stderr), [1], "{run:#?}");
    }
}

/// Two workers on the files of four directories, each directory's files one
/// after the other in the run order: while one worker reads a directory, the other, whose
/// next file is in it, reads the next directory meanwhile. Each directory is still read
/// once, in one call, no file is planned on its own, and a file changed by hand is the one
/// converged.
#[test]
fn two_workers_read_two_directories_at_once_and_each_once() {
    let machine = Machine::new();
    let dirs = ["a", "b", "c", "d"];
    for dir in dirs {
        std::fs::create_dir(machine.file(dir)).expect("dir");
    }
    let catalog = numbered_files(&machine, 200, |index| dirs[index / 50]);
    let policy = machine.policy("");
    let apply = || apply_logged(&machine, &catalog, &policy, "2");
    let first = apply();
    assert_eq!(first.code, 2);
    // Files planned on their own are logged (the line the runs below must not show).
    assert!(
        log_lines(&first.stderr, " plan plugin=") >= 100,
        "{first:#?}"
    );
    let mut overlaps = 0;
    for _ in 0..3 {
        let noop = apply();
        assert_eq!(noop.code, 0, "{noop:#?}");
        let mut reads = state_reads(&noop.stderr);
        reads.sort();
        let expected: Vec<(usize, String)> =
            dirs.iter().map(|dir| (50, machine.file(dir))).collect();
        assert_eq!(reads, expected, "{noop:#?}");
        assert_eq!(log_lines(&noop.stderr, " plan plugin="), 0, "{noop:#?}");
        overlaps += usize::from(checks_overlap(&noop.stderr));
    }
    // Two directories were read at once (the debug log shows a check begin while
    // another was under way), where there are two cores for the two workers.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    assert!(
        overlaps > 0 || cores < 2,
        "no two checks ran at once in 3 runs"
    );
    let tampered = machine.file("c/file-120");
    std::fs::write(&tampered, "tampered\n").expect("tampered");
    let run = apply();
    assert_eq!(run.code, 2, "{run:#?}");
    let report = run.json();
    assert_eq!(report["summary"]["changed"], 1, "{}", run.stdout);
    assert_eq!(
        entry(&report, &format!("File[{tampered}]"))["status"],
        "changed"
    );
    assert_eq!(
        std::fs::read_to_string(&tampered).expect("restored"),
        "line 120\n"
    );
}
