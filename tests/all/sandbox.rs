//! The sandbox holds: paths the policy does not grant, hostile plugins, network imports,
//! pinned digests and the compiled-plugin cache.

use crate::support::{Machine, cache_dir, entry, sha256_of, test_plugins_policy};
use serde_json::json;

#[test]
fn a_path_the_policy_does_not_grant_is_refused_and_nothing_is_written() {
    let machine = Machine::new();
    let outside_dir = machine.root().join("elsewhere");
    std::fs::create_dir(&outside_dir).expect("dir");
    let outside = outside_dir.join("file").to_str().expect("utf-8").to_owned();
    let inside = machine.file("inside");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": outside, "attributes": { "content": "nope" } },
        { "type": "file", "title": inside, "attributes": { "content": "yes" } },
    ]));
    let policy = machine.policy("");
    for args in [&["--noop"][..], &[][..]] {
        let report = machine.apply_json(&catalog, &policy, args, 6);
        let error = entry(&report, &format!("File[{outside}]"))["error"]
            .as_str()
            .expect("error")
            .to_owned();
        assert_eq!(
            error,
            format!(
                "denied: the policy grants plugin `file` no read-write access to `{dir}`; add \
                 `{{ path = \"{dir}\", access = \"read-write\" }}` to `directories` of \
                 [plugins.file] in the policy",
                dir = outside_dir.display()
            )
        );
    }
    assert!(!std::path::Path::new(&outside).exists());
    assert_eq!(std::fs::read_to_string(&inside).expect("inside"), "yes");
}

#[test]
fn a_granted_path_that_resolves_outside_the_grant_is_refused() {
    let machine = Machine::new();
    let outside_dir = machine.root().join("elsewhere");
    std::fs::create_dir(&outside_dir).expect("dir");
    // A link inside the grant, owned by this user, pointing out of it: the policy is
    // checked against where the write would really land.
    let link = machine.file("sneaky");
    std::os::unix::fs::symlink(&outside_dir, &link).expect("symlink");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": format!("{link}/file"), "attributes": { "content": "nope" } },
    ]));
    let report = machine.apply_json(&catalog, &machine.policy(""), &[], 4);
    let error = crate::support::first_error(&report);
    assert!(
        error.contains(&format!("(`{link}` resolves to it)")),
        "{error}"
    );
    assert!(!outside_dir.join("file").exists());
}

/// Providers validate many resources per call. A plugin that traps on one of
/// them fails that resource alone (the call is made again for each resource of the
/// batch), and the problems still come in catalog order.
#[test]
fn a_trap_in_a_batched_validate_fails_only_its_own_resource() {
    let machine = Machine::new();
    let files = machine.files_dir();
    let hostile = |name: &str, action: &str| {
        json!({ "type": "hostile", "title": format!("{files}/{name}"),
                "attributes": { "action": action } })
    };
    let first = machine.file("first");
    let last = machine.file("last");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": first, "attributes": { "mode": "0999" } },
        hostile("fine", "behave"),
        hostile("trapping", "trap_in_validate"),
        hostile("also-fine", "behave"),
        { "type": "file", "title": last, "attributes": { "backup": "a/b" } },
    ]));
    let policy = machine.policy(&test_plugins_policy(&machine, ""));
    let run = machine.run(&[
        "validate",
        catalog.to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    let line_of = |needle: &str| {
        run.stderr
            .lines()
            .position(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in {run:#?}"))
    };
    let lines = [
        line_of(&format!("File[{first}]")),
        line_of(&format!("Hostile[{files}/trapping]")),
        line_of(&format!("File[{last}]")),
    ];
    assert!(lines.is_sorted(), "not in catalog order: {run:#?}");
    assert!(
        run.stderr.contains("deliberate panic in validate"),
        "{run:#?}"
    );
    for valid in ["fine]", "also-fine]"] {
        assert!(!run.stderr.contains(valid), "{valid}: {run:#?}");
    }
}

#[test]
fn hostile_plugins_fail_their_own_resource_and_the_host_converges_the_rest() {
    let machine = Machine::new();
    let secret = machine.root().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-CONTENT\n").expect("secret");
    let link = machine.file("link-to-secret");
    std::os::unix::fs::symlink(&secret, &link).expect("symlink");
    let files = machine.files_dir();
    let hostile = |name: &str, action: &str, target: &str| {
        json!({ "type": "hostile", "title": format!("{files}/{name}"),
                "attributes": { "action": action, "target": target } })
    };
    let converged = machine.file("converged");
    let catalog = machine.catalog(json!([
        hostile("passwd", "read_file", "/etc/passwd"),
        hostile("climb", "read_file", &format!("{files}/../secret.txt")),
        hostile("symlink", "read_file", &link),
        hostile("launch", "launch", "/usr/bin/id"),
        hostile("loop", "loop_forever", ""),
        hostile("allocate", "allocate_forever", ""),
        hostile("stdout", "flood_stdout", ""),
        hostile("log", "flood_log", ""),
        hostile("trap", "trap", ""),
        hostile("behaves", "behave", ""),
        { "type": "file", "title": converged, "attributes": { "content": "fine\n" } },
    ]));
    let limits = "cpu_seconds = 1\nmemory_mib = 32\noutput_kib = 64";
    let policy = machine.policy(&test_plugins_policy(&machine, limits));
    let started = std::time::Instant::now();
    let run = machine.apply(&catalog, &policy, &["--format", "json"]);
    assert_eq!(run.code, 6, "{run:#?}");
    let report = run.json();
    let error_of = |name: &str| {
        entry(&report, &format!("Hostile[{files}/{name}]"))["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} did not fail:\n{report:#}"))
            .to_owned()
    };
    let expectations = [
        (
            "passwd",
            // Outside the grant: the host refuses it (before, the guest found no preopen).
            "reading `/etc/passwd` failed: Permission denied",
        ),
        ("climb", "failed: Operation not permitted"),
        ("symlink", "failed: Operation not permitted"),
        (
            "launch",
            "program `/usr/bin/id` is not on the allowlist of plugin `hostile`",
        ),
        (
            "loop",
            "plugin `hostile` faulted: it ran past its CPU limit of 1 s",
        ),
        (
            "allocate",
            "plugin `hostile` faulted: it tried to use more than its memory limit of 32 MiB",
        ),
        (
            "stdout",
            "plugin `hostile` faulted: it wrote more than its output limit of 64 KiB",
        ),
        (
            "log",
            "plugin `hostile` faulted: it wrote more than its output limit of 64 KiB",
        ),
        ("trap", "deliberate panic in the hostile plugin"),
    ];
    for (name, expected) in expectations {
        let error = error_of(name);
        assert!(
            error.contains(expected),
            "{name}: `{error}` does not contain `{expected}`"
        );
    }
    assert_eq!(
        entry(&report, &format!("Hostile[{files}/behaves]"))["status"],
        "changed"
    );
    assert_eq!(
        entry(&report, &format!("File[{converged}]"))["status"],
        "changed"
    );
    assert_eq!(
        std::fs::read_to_string(&converged).expect("converged"),
        "fine\n"
    );
    let output = run.all_output();
    assert!(
        !output.contains("TOP-SECRET-CONTENT"),
        "the secret leaked:\n{output}"
    );
    assert!(
        !output.contains("root:x:0:0"),
        "/etc/passwd leaked:\n{output}"
    );
    // One CPU second for the loop plus compile-free start-up: far from a hang.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_plugin_that_imports_the_network_is_refused_before_it_runs() {
    let machine = Machine::new();
    let catalog = machine.catalog(json!([
        { "type": "netclient", "title": "127.0.0.1:9" },
        { "type": "file", "title": machine.file("untouched"), "attributes": { "content": "x" } },
    ]));
    let policy = machine.policy(&test_plugins_policy(&machine, ""));
    let run = machine.apply(&catalog, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("plugin `netclient` could not be loaded: it imports `wasi:sockets/"),
        "{run:#?}"
    );
    assert!(
        run.stderr.contains("plugins have no network access"),
        "{run:#?}"
    );
    assert!(!std::path::Path::new(&machine.file("untouched")).exists());
}

#[test]
fn a_digest_mismatch_refuses_the_plugin() {
    let machine = Machine::new();
    let genuine = sha256_of(wconverge_tests::HOSTILE);
    let wrong = format!(
        "{}{}",
        if genuine.starts_with('0') { "1" } else { "0" },
        &genuine[1..]
    );
    let policy = machine.policy(&format!(
        "[plugins.hostile]\nsource = \"{}\"\nsha256 = \"{wrong}\"\n",
        wconverge_tests::HOSTILE
    ));
    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": machine.file("h"), "attributes": { "action": "behave" } },
    ]));
    let run = machine.apply(&catalog, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "digest mismatch: the policy pins sha256 {wrong}, but the component is sha256 {genuine}"
        )),
        "{run:#?}"
    );
}

#[test]
fn a_corrupted_cache_entry_is_rebuilt_not_trusted() {
    let machine = Machine::new();
    let private_cache = machine.root().join("cache");
    let catalog = machine.catalog(json!([
        { "type": "notify", "title": "hi" },
    ]));
    let policy = machine.policy("");
    let run_with_cache = || {
        let output = std::process::Command::new(crate::support::WCONVERGE)
            .args([
                "apply",
                catalog.to_str().expect("utf-8"),
                "--policy",
                policy.to_str().expect("utf-8"),
            ])
            .arg("--cache-dir")
            .arg(&private_cache)
            .env("WCONVERGE_STATE_DIR", machine.root().join("state"))
            .output()
            .expect("runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(run_with_cache().0, Some(2));
    // The compiled code (beside it, the `validate` calls remembered).
    let entries: Vec<_> = std::fs::read_dir(private_cache.join("components"))
        .expect("cache written")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "cwasm")
        })
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let mut bytes = std::fs::read(&entries[0]).expect("entry");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entries[0], bytes).expect("corrupted");
    let (code, stderr) = run_with_cache();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("its digest does not match its content"),
        "{stderr}"
    );
    let (code, stderr) = run_with_cache();
    assert_eq!(code, Some(2));
    assert!(
        stderr.is_empty(),
        "the rebuilt entry is trusted again: {stderr}"
    );
    let _ = cache_dir();
}

/// A plugin from a file is read once a load: `plugins list` (its summary) and the apply of
/// a catalog (its code) each open it once, whether the cache holds its summary yet or
/// not, and the bytes compiled are the bytes hashed. (A manifest's apply opens it twice:
/// once for the compiler's summary, once for the run; its pin holds the two to one
/// content.) Counted with inotify, as the kernel sees the file opened.
#[test]
fn a_plugin_file_is_opened_once_a_load_with_or_without_its_cached_summary() {
    use rustix::fs::inotify;
    let machine = Machine::new();
    let plugin = machine.root().join("hostile.wasm");
    std::fs::copy(wconverge_tests::HOSTILE, &plugin).expect("plugin copied");
    let files = machine.files_dir();
    let policy = machine.root().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.hostile]\nsource = \"{}\"\nsha256 = \"{}\"\n\
             directories = [{{ path = \"{files}\", access = \"read-write\" }}]\n",
            plugin.display(),
            sha256_of(wconverge_tests::HOSTILE)
        ),
    )
    .expect("policy written");
    let catalog = machine.catalog(json!([{ "type": "hostile", "title": machine.file("x"),
        "attributes": { "action": "behave" } }]));
    let cache = machine.root().join("cache");
    let watch = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)
        .expect("inotify");
    // Closes too: the kernel merges an event into the unread one before it when both
    // are the same, so opens alone would count as one.
    inotify::add_watch(
        &watch,
        &plugin,
        inotify::WatchFlags::OPEN | inotify::WatchFlags::CLOSE_NOWRITE,
    )
    .expect("watched");
    let opens = |args: &[&str]| {
        let output = std::process::Command::new(crate::support::WCONVERGE)
            .args(args)
            .arg("--policy")
            .arg(&policy)
            .arg("--cache-dir")
            .arg(&cache)
            .env("WCONVERGE_STATE_DIR", machine.root().join("state"))
            .output()
            .expect("runs");
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut buffer = [std::mem::MaybeUninit::uninit(); 4096];
        let mut events = inotify::Reader::new(&watch, &mut buffer);
        let mut count = 0;
        while let Ok(event) = events.next() {
            if event.events().contains(inotify::ReadFlags::OPEN) {
                count += 1;
            }
        }
        count
    };
    let catalog = catalog.to_str().expect("utf-8");
    // `plugins list` with nothing cached: the summary is learnt by loading it whole.
    assert_eq!(opens(&["plugins", "list"]), 1);
    assert_eq!(opens(&["plugins", "list"]), 1);
    std::fs::remove_dir_all(&cache).expect("cache emptied");
    // A run with nothing cached, then one from the summary the first left.
    assert_eq!(opens(&["apply", catalog]), 1);
    assert_eq!(opens(&["apply", catalog]), 1);
}

#[test]
fn a_manifest_loads_only_the_plugins_it_uses_and_a_tampered_summary_is_rebuilt() {
    let machine = Machine::new();
    let private_cache = machine.root().join("cache");
    let manifest = machine.manifest(
        "site.wcv",
        "file { '@FILES@/one': content => \"1\\n\" }\nnotify { 'hi': }\n",
    );
    let run = || {
        let output = std::process::Command::new(crate::support::WCONVERGE)
            .args(["apply", manifest.to_str().expect("utf-8")])
            .arg("--cache-dir")
            .arg(&private_cache)
            .env("WCONVERGE_STATE_DIR", machine.root().join("state"))
            .env("WCONVERGE_LOG", "debug")
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(matches!(output.status.code(), Some(0 | 2)), "{stderr}");
        // Loaded whole (instantiated, `describe` called), or described from the cache
        // and only its code loaded.
        let plugins = |message: &str| {
            let mut names: Vec<String> = stderr
                .lines()
                .filter_map(|line| line.split(message).nth(1))
                .map(|rest| {
                    rest.split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            names.sort();
            names
        };
        let loaded = plugins(" loaded plugin=");
        let code = plugins(" loaded its code plugin=");
        (loaded, code, stderr)
    };
    // The first run loads every plugin of the built-in policy once, to learn their
    // types, and keeps what it learnt.
    let (first, _, _) = run();
    assert!(first.len() > 10, "{first:?}");
    // Then a manifest of two types instantiates no plugin before the run needs it: it
    // is prepared with what the cache says of them; their code is loaded for the calls
    // the run makes.
    let (second, code, stderr) = run();
    assert!(second.is_empty(), "{stderr}");
    assert_eq!(code, ["file", "notify"], "{stderr}");
    // A summary someone changed is not believed: it is rebuilt by loading the plugin.
    let summary = std::fs::read_dir(private_cache.join("components"))
        .expect("cache written")
        .map(|entry| entry.expect("entry").path())
        .find(|path| {
            path.extension().is_some_and(|e| e == "summary")
                && std::fs::read_to_string(path).is_ok_and(|text| text.contains("\"cron\""))
        })
        .expect("the cron plugin's summary");
    let text = std::fs::read_to_string(&summary).expect("summary");
    std::fs::write(&summary, text.replace("\"cron\"", "\"crom\"")).expect("tampered");
    let (third, _, stderr) = run();
    assert!(
        stderr.contains("its digest does not match its content")
            && third.contains(&"cron".to_owned()),
        "{stderr}"
    );
    // The rebuilt entry is trusted again; and a plugin's code is loaded only for a call
    // the run makes: the file's check is replayed now (its code is not needed), the
    // notify resource reads its own state (its code loaded ahead, while it is prepared).
    let (fourth, code, stderr) = run();
    assert!(
        fourth.is_empty() && code == ["notify"] && stderr.contains("check replayed plugin=file"),
        "{stderr}"
    );
}
