//! Security-reviewed deployments: third-party plugins from `--plugin-dir`,
//! loaded only when pinned; argument patterns, run-as and environment grants; the audit
//! trail of a run; the audit output as a snapshot.

use crate::support::{Machine, Run, first_error, sha256_of, trail};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A plugin directory holding the third-party example as `file_line.wasm`.
pub(crate) fn plugin_dir(machine: &Machine) -> PathBuf {
    let dir = machine.root().join("plugins");
    std::fs::create_dir_all(&dir).expect("plugin dir");
    std::fs::copy(wconverge_tests::FILE_LINE, dir.join("file_line.wasm")).expect("copied");
    dir
}

/// A policy file for `file_line` from the plugin directory, `pin` as its sha256 line.
pub(crate) fn file_line_policy(machine: &Machine, pin: &str) -> PathBuf {
    let path = machine.root().join("third-party.toml");
    std::fs::write(
        &path,
        format!(
            "# Reviewed by the security team.\n[plugins.file_line]\nsource = \"plugin-dir\"\n\
             {pin}directories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
            machine.files_dir()
        ),
    )
    .expect("policy written");
    path
}

pub(crate) fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// The audit trail's events, one JSON object per line.
const SSHD: &str = "Port 22\n#PermitRootLogin yes\nX11Forwarding no\n";

fn sshd_manifest(machine: &Machine) -> PathBuf {
    std::fs::write(machine.file("sshd_config"), SSHD).expect("file");
    machine.manifest(
        "site.wcv",
        "file_line { 'no root login':\n  path  => '@FILES@/sshd_config',\n  \
         line  => 'PermitRootLogin no',\n  match => '^#?PermitRootLogin\\s',\n}\n",
    )
}

/// `apply MANIFEST --policy POLICY --plugin-dir DIR`, plus `--audit-log LOG` if given.
fn apply_with_dir(
    machine: &Machine,
    manifest: &Path,
    policy: &Path,
    dir: &Path,
    log: Option<&Path>,
) -> Run {
    let mut args = vec![
        "apply",
        text(manifest),
        "--policy",
        text(policy),
        "--plugin-dir",
        text(dir),
    ];
    if let Some(log) = log {
        args.extend(["--audit-log", text(log)]);
    }
    machine.run(&args)
}

/// `plugins audit --policy POLICY --plugin-dir DIR`, which must succeed.
fn audit_with_dir(machine: &Machine, policy: &Path, dir: &Path) -> Run {
    let audit = machine.run(&[
        "plugins",
        "audit",
        "--policy",
        text(policy),
        "--plugin-dir",
        text(dir),
    ]);
    assert_eq!(audit.code, 0, "{audit:#?}");
    audit
}

#[test]
fn a_third_party_plugin_is_locked_from_the_plugin_dir_and_converges() {
    let machine = Machine::new();
    let dir = plugin_dir(&machine);
    // A stray component beside it, which no one reviewed.
    std::fs::copy(wconverge_tests::HOSTILE, dir.join("stray.wasm")).expect("copied");
    let policy = file_line_policy(&machine, "");
    let digest = sha256_of(wconverge_tests::FILE_LINE);

    let lock = machine.run(&[
        "plugins",
        "lock",
        "--policy",
        text(&policy),
        "--plugin-dir",
        text(&dir),
    ]);
    assert_eq!(lock.code, 0, "{lock:#?}");
    assert!(
        lock.stdout
            .contains(&format!("file_line: pinned sha256 {digest}\n")),
        "{lock:#?}"
    );
    assert!(
        lock.stderr.contains(&format!(
            "warning: {} is not pinned: no plugin of the policy takes it, so it is never loaded",
            dir.join("stray.wasm").display()
        )),
        "{lock:#?}"
    );
    let locked = std::fs::read_to_string(&policy).expect("policy");
    assert!(
        locked.starts_with("# Reviewed by the security team.\n"),
        "{locked}"
    );
    assert!(
        locked.contains(&format!("sha256 = \"{digest}\"")),
        "{locked}"
    );

    let manifest = sshd_manifest(&machine);
    let first = apply_with_dir(&machine, &manifest, &policy, &dir, None);
    assert_eq!(first.code, 2, "{first:#?}");
    assert!(
        first.stdout.contains(&format!(
            "File_line[no root login]: line added to {}/sshd_config",
            machine.files_dir()
        )),
        "{first:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("sshd_config")).expect("file"),
        "Port 22\nPermitRootLogin no\nX11Forwarding no\n"
    );
    let stray = dir.join("stray.wasm");
    assert!(
        first.stderr.contains(&format!(
            "warning: {} is not loaded: no plugin of the policy pins it",
            stray.display()
        )),
        "{first:#?}"
    );
    let second = apply_with_dir(&machine, &manifest, &policy, &dir, None);
    assert_eq!(second.code, 0, "converged: {second:#?}");

    let audit = audit_with_dir(&machine, &policy, &dir);
    assert!(
        audit.stdout.contains(&format!(
            "plugin file_line\n  source: plugin-dir {}\n  sha256: {digest}\n  kind: provider\n",
            dir.join("file_line.wasm").display()
        )),
        "{audit:#?}"
    );
    assert!(
        audit.stdout.contains(&format!(
            "not loaded (in the plugin directory, pinned by no plugin):\n  {}\n",
            stray.display()
        )),
        "{audit:#?}"
    );
}

#[test]
fn a_flipped_byte_refuses_the_plugin_and_changes_nothing() {
    let machine = Machine::new();
    let dir = plugin_dir(&machine);
    let genuine = sha256_of(wconverge_tests::FILE_LINE);
    let policy = file_line_policy(&machine, &format!("sha256 = \"{genuine}\"\n"));
    let component = dir.join("file_line.wasm");
    let mut bytes = std::fs::read(&component).expect("component");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&component, &bytes).expect("flipped");
    let tampered = sha256_of(text(&component));
    let manifest = sshd_manifest(&machine);
    let log = machine.root().join("audit.jsonl");
    let run = apply_with_dir(&machine, &manifest, &policy, &dir, Some(&log));
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "plugin `file_line` could not be loaded: digest mismatch: the policy pins sha256 \
             {genuine}, but the component is sha256 {tampered}; refusing to load it (if you \
             rebuilt it, review the change, then `wconverge plugins lock --policy FILE` pins \
             the new digest)"
        )),
        "{run:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("sshd_config")).expect("file"),
        SSHD,
        "nothing changed"
    );
    let events = trail(&log);
    let load = events
        .iter()
        .find(|event| event["operation"] == "load")
        .unwrap_or_else(|| panic!("a load event: {events:#?}"));
    assert_eq!(load["plugin"], "file_line");
    assert_eq!(load["decision"], "denied");
    // The event names the file that was refused, by its own digest.
    assert_eq!(load["digest"], tampered.as_str());
    assert!(
        load["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("digest mismatch")),
        "{load:#?}"
    );
}

#[test]
fn an_unpinned_plugin_is_never_loaded() {
    let machine = Machine::new();
    let dir = plugin_dir(&machine);
    let manifest = sshd_manifest(&machine);
    // In the directory, but not in the policy: its type does not exist.
    let policy = machine.policy("");
    let run = apply_with_dir(&machine, &manifest, &policy, &dir, None);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "warning: {} is not loaded: no plugin of the policy pins it",
            dir.join("file_line.wasm").display()
        )),
        "{run:#?}"
    );
    assert!(run.stderr.contains("file_line"), "{run:#?}");
    // In the policy without a pin: the policy itself is refused.
    let unpinned = file_line_policy(&machine, "");
    let run = apply_with_dir(&machine, &manifest, &unpinned, &dir, None);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(
            "plugin `file_line`: a plugin loaded from a file must be pinned: add `sha256 = \"...\"`"
        ),
        "{run:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("sshd_config")).expect("file"),
        SSHD
    );
}

#[test]
fn a_shell_cannot_be_smuggled_through_the_arguments_of_an_allowed_program() {
    let machine = Machine::new();
    let files = machine.files_dir();
    std::fs::write(machine.file("data"), "payload\n").expect("file");
    let policy = machine.root().join("tar.toml");
    std::fs::write(
        &policy,
        format!(
            r#"[plugins.sh]
source = "builtin"
provides = ["sh", "exec", "script"]
directories = [{{ path = "/", access = "read" }}]
programs = [{{ path = "/usr/bin/tar", args = [["-c", "-f", "{files}/*.tar", "-C", "{files}", "*"]] }}]
"#
        ),
    )
    .expect("policy");
    let manifest = machine.manifest(
        "tar.wcv",
        "exec { 'backup': command => ['/usr/bin/tar', '-c', '-f', '@FILES@/ok.tar', '-C', '@FILES@', 'data'] }\n\
         exec { 'smuggle': command => ['/usr/bin/tar', '-c', '-f', '@FILES@/bad.tar', \
         '--checkpoint=1', '--checkpoint-action=exec=touch @FILES@/pwned', '-C', '@FILES@', 'data'] }\n\
         exec { 'climb': command => ['/usr/bin/tar', '-c', '-f', '@FILES@/../up.tar', '-C', '@FILES@', 'data'] }\n",
    );
    let log = machine.root().join("audit.jsonl");
    let run = machine.run(&[
        "apply",
        text(&manifest),
        "--policy",
        text(&policy),
        "--audit-log",
        text(&log),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 6, "{run:#?}");
    let report = run.json();
    assert_eq!(
        crate::support::entry(&report, "Exec[backup]")["status"],
        "changed",
        "{report:#}"
    );
    assert!(Path::new(&machine.file("ok.tar")).exists());
    for (title, argument) in [
        ("smuggle", "argument 4 `--checkpoint=1` fits no pattern"),
        ("climb", "argument 3"),
    ] {
        let entry = crate::support::entry(&report, &format!("Exec[{title}]"));
        assert_eq!(entry["status"], "failed", "{entry:#}");
        let error = first_error(&serde_json::json!({ "resources": [entry] }));
        assert!(error.contains(argument), "{title}: {error}");
        assert!(
            error.contains(&format!(
                "the policy allows only `/usr/bin/tar -c -f {files}/*.tar -C {files} *`"
            )),
            "{error}"
        );
    }
    assert!(!Path::new(&machine.file("pwned")).exists(), "no shell ran");
    // (A secret never gets as far as a command line: `sensitive.rs`.)
    assert!(!Path::new(&machine.file("bad.tar")).exists());
    // The failure says why; the refusal is not said a second time on the console.
    assert!(
        !run.stderr.contains("refused (plugin `sh`, Exec[smuggle])"),
        "{run:#?}"
    );

    let events = trail(&log);
    let launches: Vec<&Value> = events
        .iter()
        .filter(|event| event["operation"] == "launch")
        .collect();
    assert_eq!(launches.len(), 3, "{events:#?}");
    let allowed = launches
        .iter()
        .find(|event| event["resource"] == "Exec[backup]")
        .expect("the backup's launch");
    assert_eq!(allowed["decision"], "allowed");
    assert_eq!(allowed["plugin"], "sh");
    assert_eq!(
        allowed["target"],
        format!("/usr/bin/tar -c -f {files}/ok.tar -C {files} data")
    );
    assert_eq!(allowed["resolved"], "/usr/bin/tar");
    assert_eq!(allowed["digest"].as_str().map(str::len), Some(64));
    let denied = launches
        .iter()
        .find(|event| event["resource"] == "Exec[smuggle]")
        .expect("the smuggler's launch");
    assert_eq!(denied["decision"], "denied");
    assert!(
        denied["target"]
            .as_str()
            .is_some_and(|target| target.contains("'--checkpoint-action=exec=touch ")),
        "{denied:#?}"
    );
    assert!(denied.get("resolved").is_none(), "{denied:#?}");
}

#[test]
fn running_as_a_user_or_setting_a_variable_needs_its_own_grant() {
    let machine = Machine::new();
    let policy = machine.root().join("sh.toml");
    std::fs::write(
        &policy,
        r#"[plugins.sh]
source = "builtin"
provides = ["sh", "exec", "script"]
directories = [{ path = "/", access = "read" }]
programs = ["/bin/sh"]
users = ["root"]
environment = ["LANG", "APP_*"]
"#,
    )
    .expect("policy");
    let manifest = machine.manifest(
        "sh.wcv",
        "exec { 'as nobody': command => 'true', user => 'nobody' }\n\
         exec { 'with FOO': command => 'true', environment => ['FOO=1'] }\n\
         exec { 'with PATH': command => 'true', environment => ['PATH=/tmp'] }\n\
         exec { 'with LANG': command => 'echo $LANG $APP_MODE > @FILES@/lang', environment => ['LANG=C', 'APP_MODE=x'] }\n",
    );
    let report = machine.apply_json(&manifest, &policy, &[], 6);
    let error = |title: &str| {
        let entry = crate::support::entry(&report, &format!("Exec[{title}]"));
        assert_eq!(entry["status"], "failed", "{entry:#}");
        first_error(&serde_json::json!({ "resources": [entry] }))
    };
    assert!(
        error("as nobody").contains(
            "plugin `sh` may not run programs as user `nobody`; add it to `users` of [plugins.sh]"
        ),
        "{report:#}"
    );
    assert!(
        error("with FOO").contains(
            "environment variable `FOO` may not be set by plugin `sh`; grant `FOO` (or `*`)"
        ),
        "{report:#}"
    );
    assert!(
        error("with PATH").contains("it decides what code runs: grant `PATH` by name"),
        "{report:#}"
    );
    assert_eq!(
        crate::support::entry(&report, "Exec[with LANG]")["status"],
        "changed"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("lang")).expect("written"),
        "C x\n"
    );
}

#[test]
fn a_plugin_flooding_refusals_is_cut_short_with_a_count() {
    let machine = Machine::new();
    let policy = machine.policy(&crate::support::test_plugins_policy(&machine, ""));
    let catalog = machine.catalog(serde_json::json!([
        { "type": "hostile", "title": machine.file("flood"),
          "attributes": { "action": "flood_launch", "target": "/bin/sh" } },
    ]));
    let log = machine.root().join("audit.jsonl");
    let run = machine.apply(&catalog, &policy, &["--audit-log", text(&log)]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stdout.contains("5000 launches of `/bin/sh` refused"),
        "{run:#?}"
    );
    let warnings = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("warning: refused (plugin `hostile`, Hostile["))
        .count();
    assert_eq!(warnings, 5, "{run:#?}");
    assert!(
        run.stderr
            .contains("warning: plugin `hostile` was refused 4995 more times; not shown"),
        "{run:#?}"
    );
    let events = trail(&log);
    let denied = events
        .iter()
        .filter(|event| event["decision"] == "denied" && event["operation"] == "launch")
        .count();
    assert_eq!(denied, 1000);
    let summary = events.last().expect("events");
    assert_eq!(summary["operation"], "suppressed", "{summary:#}");
    assert_eq!(summary["count"], 4000);
}

/// The audit of a fixed policy, digests masked (they change with every build of the
/// built-in plugins): what a reviewer reads, line by line.
const AUDIT_SNAPSHOT: &str = "\
plugin file
  source: builtin
  sha256: <sha256>
  kind: provider
  provides:
    file
  imports:
@FILE_IMPORTS@
  writes: `path` of type file: Absolute path of the file.
  receives: the paths other resources manage beneath its own (type file)
  directories:
    /srv/app read-write
  programs: none
  users: none
  groups: none
  environment: none
  limits: memory 128 MiB, cpu 10 s, wall clock 300 s per call, output 1024 KiB, process timeout 3600 s

plugin sh
  source: builtin
  sha256: <sha256>
  kind: interpreter
  provides:
    exec
    script
    sh
  imports:
@SH_IMPORTS@
  directories:
    / read
  programs:
    /bin/systemctl restart *
    /bin/systemctl is-active * (query)
    /usr/bin/find /srv/app -name * -delete
    /usr/bin/tar (any arguments)
  users:
    app
  groups: none
  environment:
    LANG
  limits: memory 64 MiB, cpu 10 s, wall clock 300 s per call, output 1024 KiB, process timeout 600 s
  ! reads-secrets: read access to / covers /etc/shadow, /etc/gshadow, /etc/ssh, /root/.ssh, /etc/sudoers, /proc
  ! root-equivalent: may launch /usr/bin/find with arguments the plugin chooses (`*`, `...` or a glob), and it runs what its arguments name
  ! root-equivalent: may launch /usr/bin/tar with any arguments, and it runs what its arguments name; restrict it with `args` patterns

2 plugins, 3 flagged grants
";

#[test]
fn the_audit_of_a_policy_matches_its_snapshot() {
    let machine = Machine::new();
    let policy = machine.root().join("reviewed.toml");
    std::fs::write(
        &policy,
        r#"[plugins.file]
source = "builtin"
directories = [{ path = "/srv/app", access = "read-write" }]

[plugins.sh]
source = "builtin"
provides = ["sh", "exec", "script"]
directories = [{ path = "/", access = "read" }]
programs = [
  { path = "/bin/systemctl", args = [["restart", "*"]] },
  { path = "/bin/systemctl", args = [["is-active", "*"]], query = true },
  { path = "/usr/bin/find", args = [["/srv/app", "-name", "*", "-delete"]] },
  "/usr/bin/tar",
]
users = ["app"]
environment = ["LANG"]
limits = { memory_mib = 64, process_timeout_seconds = 600 }
"#,
    )
    .expect("policy");
    let audit = machine.run(&["plugins", "audit", "--policy", text(&policy)]);
    assert_eq!(audit.code, 0, "{audit:#?}");
    // Digests change with every build; imports only with the toolchain and the WIT,
    // and are checked for their shape here and in full by `plugins inspect` tests.
    let mut masked = String::new();
    let mut in_imports = false;
    let mut imports = Vec::new();
    for line in audit.stdout.lines() {
        if let Some(digest) = line.strip_prefix("  sha256: ") {
            assert_eq!(digest.len(), 64, "{line}");
            masked.push_str("  sha256: <sha256>\n");
            continue;
        }
        if line == "  imports:" {
            in_imports = true;
            masked.push_str(line);
            masked.push('\n');
            continue;
        }
        if in_imports && line.starts_with("    ") {
            imports.push(line.trim().to_owned());
            continue;
        }
        if in_imports {
            in_imports = false;
            let marker = if masked.contains("plugin sh\n") {
                "@SH_IMPORTS@"
            } else {
                "@FILE_IMPORTS@"
            };
            masked.push_str(marker);
            masked.push('\n');
        }
        masked.push_str(line);
        masked.push('\n');
    }
    assert_eq!(
        masked, AUDIT_SNAPSHOT,
        "the audit changed:\n{}",
        audit.stdout
    );
    assert!(
        imports
            .iter()
            .all(|import| import.starts_with("wasi:") || import.starts_with("wconverge:plugin/")),
        "{imports:#?}"
    );
    assert!(
        imports.contains(&"wconverge:plugin/process@0.8.0".to_owned()),
        "{imports:#?}"
    );
}

#[test]
fn a_provider_written_in_python_converges_within_its_argument_patterns() {
    let machine = Machine::new();
    let files = machine.files_dir();
    let dir = machine.root().join("plugins");
    std::fs::create_dir_all(&dir).expect("plugin dir");
    std::fs::copy(wconverge_tests::GIT_CONFIG, dir.join("git_config.wasm")).expect("copied");
    let config = machine.file("gitconfig");
    std::fs::write(&config, "[core]\n\teditor = vim\n\tpager = less\n").expect("config");
    let policy = machine.root().join("python.toml");
    std::fs::write(
        &policy,
        format!(
            r#"[plugins.git_config]
source = "plugin-dir"
sha256 = "{digest}"
programs = [
  {{ path = "/usr/bin/git", args = [["config", "--file", "{files}/*", "--get", "*"]], query = true }},
  {{ path = "/usr/bin/git", args = [
      ["config", "--file", "{files}/*", "--replace-all", "*", "*"],
      ["config", "--file", "{files}/*", "--unset-all", "*"],
  ] }},
]
"#,
            digest = sha256_of(wconverge_tests::GIT_CONFIG)
        ),
    )
    .expect("policy");
    let manifest = machine.manifest(
        "git.wcv",
        "git_config { 'user.email': value => 'ops@example.com', file => '@FILES@/gitconfig' }\n\
         git_config { 'core.editor': ensure => absent, file => '@FILES@/gitconfig' }\n\
         git_config { 'core.pager': value => 'less', file => '@FILES@/gitconfig' }\n\
         git_config { 'alias.x': value => '!sh -c id', file => '@FILES@/../gitconfig' }\n",
    );
    let log = machine.root().join("audit.jsonl");
    let first = apply_with_dir(&machine, &manifest, &policy, &dir, Some(&log));
    assert_eq!(first.code, 6, "{first:#?}");
    assert!(
        first
            .stdout
            .contains("Git_config[user.email]: user.email set"),
        "{first:#?}"
    );
    assert!(
        first
            .stdout
            .contains("Git_config[core.editor]: core.editor unset"),
        "{first:#?}"
    );
    // A file outside the pattern's directory: refused before git runs.
    assert!(
        first.stdout.contains(
            "Git_config[alias.x]: failed: cannot run /usr/bin/git: plugin \
         `git_config` may not run `/usr/bin/git config --file"
        ),
        "{first:#?}"
    );
    let get = |key: &str| {
        let output = std::process::Command::new("/usr/bin/git")
            .args(["config", "--file", &config, "--get", key])
            .output()
            .expect("git runs");
        String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned()
    };
    assert_eq!(get("user.email"), "ops@example.com");
    assert_eq!(get("core.editor"), "");
    assert_eq!(get("core.pager"), "less");
    assert!(!Path::new(&machine.root().join("gitconfig")).exists());

    let second = apply_with_dir(&machine, &manifest, &policy, &dir, Some(&log));
    assert_eq!(
        second.code, 4,
        "only the refused resource fails again: {second:#?}"
    );
    assert!(second.stdout.contains("3 unchanged"), "{second:#?}");
    // A value that changes comes with its diff as data (WIT `change.diff`): before and
    // after, which `--show-diff` prints.
    let changed = machine.manifest(
        "git2.wcv",
        "git_config { 'core.pager': value => 'more', file => '@FILES@/gitconfig' }\n",
    );
    let third = machine.run(&[
        "apply",
        text(&changed),
        "--policy",
        text(&policy),
        "--plugin-dir",
        text(&dir),
        "--show-diff",
    ]);
    assert_eq!(third.code, 2, "{third:#?}");
    assert!(
        third
            .stdout
            .contains("Git_config[core.pager]: core.pager set\n    - less\n    + more"),
        "{third:#?}"
    );

    let events = trail(&log);
    let launches: Vec<&Value> = events
        .iter()
        .filter(|event| event["operation"] == "launch" && event["decision"] == "allowed")
        .collect();
    assert!(
        launches
            .iter()
            .all(|event| event["plugin"] == "git_config" && event["resolved"] == "/usr/bin/git"),
        "{launches:#?}"
    );
    assert!(
        launches.iter().any(|event| event["target"]
            == format!(
                "/usr/bin/git config --file {config} --replace-all user.email ops@example.com"
            )),
        "{launches:#?}"
    );

    // It imports wconverge's interfaces and nothing else: no WASI, so no file system of
    // its own and no network.
    let audit = audit_with_dir(&machine, &policy, &dir);
    assert!(
        audit.stdout.contains(
            "  imports:\n    wconverge:plugin/file-metadata@0.8.0\n    wconverge:plugin/log@0.8.0\n    \
             wconverge:plugin/process@0.8.0\n    wconverge:plugin/types@0.8.0\n  directories: none\n"
        ),
        "{audit:#?}"
    );
}

#[test]
fn every_file_a_plugin_changes_and_every_write_refused_is_in_the_audit_trail() {
    let machine = Machine::new();
    let policy = machine.policy(&crate::support::test_plugins_policy(&machine, ""));
    let files = std::fs::canonicalize(machine.files_dir()).expect("files dir");
    let outside = files.parent().expect("parent").join("escape.txt");
    let catalog = machine.catalog(serde_json::json!([
        { "type": "file", "title": machine.file("motd"),
          "attributes": { "ensure": "file", "content": "hello\n" } },
        { "type": "hostile", "title": machine.file("inside"),
          "attributes": { "action": "write_file", "target": machine.file("inside.txt") } },
        { "type": "hostile", "title": machine.file("climb"),
          "attributes": { "action": "write_file",
                          "target": format!("{}/../escape.txt", machine.files_dir()) } },
    ]));
    let log = machine.root().join("audit.jsonl");
    let run = machine.apply(&catalog, &policy, &["--audit-log", text(&log)]);
    assert_eq!(run.code, 6, "one resource failed and two changed: {run:#?}");
    assert!(!outside.exists(), "nothing was written outside the grant");
    assert!(Path::new(&machine.file("inside.txt")).exists());
    let climb = format!("Hostile[{}]", machine.file("climb"));
    assert!(
        run.stderr.contains(&format!(
            "warning: refused (plugin `hostile`, {climb}): not permitted: `{}` leads out of \
             the directories granted to this call, or its directory is read-only in this call \
             (granted: `{}` read-write)",
            outside.display(),
            files.display()
        )),
        "{run:#?}"
    );

    let events = trail(&log);
    let find = |resource: &str, operation: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|event| event["resource"] == resource && event["operation"] == operation)
            .collect()
    };
    let written = find(
        &format!("Hostile[{}]", machine.file("inside")),
        "open-for-writing",
    );
    assert_eq!(written.len(), 1, "{events:#?}");
    assert_eq!(written[0]["decision"], "allowed");
    assert_eq!(
        written[0]["target"],
        files.join("inside.txt").display().to_string()
    );
    assert_eq!(written[0]["plugin"], "hostile");
    let refused = find(&climb, "open-for-writing");
    assert_eq!(refused.len(), 1, "{events:#?}");
    assert_eq!(refused[0]["decision"], "denied");
    assert_eq!(refused[0]["target"], outside.display().to_string());
    // The file provider's write lands by a rename onto the file it manages.
    let motd = files.join("motd").display().to_string();
    let renamed = find(&format!("File[{}]", machine.file("motd")), "rename");
    assert!(
        renamed.iter().any(|event| event["decision"] == "allowed"
            && event["target"]
                .as_str()
                .is_some_and(|target| target.ends_with(&format!(" -> {motd}")))),
        "{events:#?}"
    );
}

/// Runs `wconverge` with a file-size limit of `blocks` (512 bytes each, as `ulimit -f`
/// counts them in sh) and the signal for exceeding it ignored, so a write past the limit
/// fails with EFBIG instead of killing the process: an audit log on a full disk.
fn run_with_file_size_limit(machine: &Machine, blocks: u64, args: &[&str]) -> Run {
    let mut command = machine.command("/bin/sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -f {blocks}; trap '' XFSZ; exec \"$0\" \"$@\""
        ))
        .arg(crate::support::WCONVERGE)
        .args(args);
    Run::of(&mut command)
}

#[test]
fn an_audit_log_that_cannot_be_written_stops_every_further_change() {
    let machine = Machine::new();
    let policy = machine.policy(&crate::support::test_plugins_policy(&machine, ""));
    let resources: Vec<Value> = (0..40)
        .map(|n| {
            serde_json::json!({ "type": "hostile", "title": machine.file(&format!("r{n:02}")),
              "attributes": { "action": "write_file",
                              "target": machine.file(&format!("w{n:02}.txt")) } })
        })
        .collect();
    let catalog = machine.catalog(Value::Array(resources));
    // The process may write files of 512 MiB (wasmtime's memory images live in memfds,
    // which the limit counts too); the log already holds all but its last 8 KiB, a
    // hole that takes no disk. A few resources' events fit, far from forty.
    let limit: u64 = 512 << 20;
    let log = machine.root().join("audit.jsonl");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&log)
            .expect("log");
        file.set_len(limit - 8192).expect("a sparse log");
    }
    let run = run_with_file_size_limit(
        &machine,
        limit / 512,
        &[
            "apply",
            text(&catalog),
            "--policy",
            text(&policy),
            "--audit-log",
            text(&log),
        ],
    );
    let written = (0..40)
        .filter(|n| Path::new(&machine.file(&format!("w{n:02}.txt"))).exists())
        .count();
    assert!(written > 0, "the first resources ran: {run:#?}");
    assert!(
        written < 10,
        "the rest were refused, {written} ran: {run:#?}"
    );
    assert_eq!(run.code, 1, "{run:#?}");
    // Said by each resource refused, not again as a warning.
    assert!(
        run.stdout.contains(
            "failed: denied: the audit log cannot be written (File too large (os error 27)); \
             nothing more is allowed in this run"
        ),
        "{run:#?}"
    );
    assert!(!run.stderr.contains("warning: refused"), "{run:#?}");
    assert!(
        run.stderr
            .contains("error: cannot write the audit log; it is incomplete"),
        "{run:#?}"
    );
    // What reached the file is whole lines: a line cut short was taken back.
    let bytes = std::fs::read(&log).expect("log");
    let tail = &bytes[bytes.iter().position(|&byte| byte != 0).expect("events")..];
    let text = std::str::from_utf8(tail).expect("utf-8");
    assert!(text.ends_with('\n'), "{text}");
    for line in text.lines() {
        let event: Value = serde_json::from_str(line).expect("a whole JSON object");
        assert_eq!(event["plugin"], "hostile");
    }
}

#[test]
fn a_policy_can_decide_who_programs_run_as() {
    let machine = Machine::new();
    let policy = machine.root().join("sh.toml");
    std::fs::write(
        &policy,
        r#"[plugins.sh]
source = "builtin"
provides = ["sh", "exec", "script"]
directories = [{ path = "/", access = "read" }]
programs = ["/bin/sh"]
run_as = "nobody"
"#,
    )
    .expect("policy");
    let manifest = machine.manifest(
        "sh.wcv",
        "exec { 'who': command => '/usr/bin/id -un; exit 1' }\n",
    );
    let audit = machine.run(&["plugins", "audit", "--policy", text(&policy)]);
    assert!(
        audit
            .stdout
            .contains("  run as:\n    nobody (every launch that names no user)\n"),
        "{audit:#?}"
    );
    let report = machine.apply_json(&manifest, &policy, &[], 4);
    let error = first_error(&report);
    if rustix::process::geteuid().is_root() {
        // The command fails on purpose, so its output is in the report.
        assert_eq!(
            report["resources"][0]["logs"][0]["message"], "stdout: nobody",
            "{report:#}"
        );
    } else {
        assert!(
            error.contains("cannot run `/bin/sh` as user `nobody`: wconverge runs as uid"),
            "{report:#}"
        );
    }
}

#[test]
fn a_plugin_dir_others_may_write_is_reported_and_a_fifo_in_it_does_not_hang_the_run() {
    use std::os::unix::fs::PermissionsExt;
    let machine = Machine::new();
    let dir = machine.root().join("plugins");
    std::fs::create_dir(&dir).expect("plugin dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let fifo = dir.join("file_line.wasm");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let policy = file_line_policy(&machine, &format!("sha256 = \"{}\"\n", "ab".repeat(32)));
    let manifest = sshd_manifest(&machine);
    let run = apply_with_dir(&machine, &manifest, &policy, &dir, None);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "warning: the plugin directory `{}` can be written by every user (mode 777)",
            dir.display()
        )),
        "{run:#?}"
    );
    assert!(
        run.stderr.contains(&format!(
            "plugin `file_line` could not be loaded: cannot read `{}`: it is not a regular file",
            fifo.display()
        )),
        "{run:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("sshd_config")).expect("file"),
        SSHD
    );
}
