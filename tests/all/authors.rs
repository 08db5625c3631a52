//! The plugin author's kit. `wconverge plugins test` converges a manifest with
//! the author's build in a throwaway root, twice, then in noop, and says whether the
//! plugin is idempotent.

use crate::support::{Machine, Run, WCONVERGE, cache_dir};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory the policy grants that does not exist on the machine: everything the
/// test writes must land in its throwaway root instead.
fn granted(machine: &Machine) -> PathBuf {
    machine.root().join("granted")
}

fn plugins_test(
    machine: &Machine,
    plugin: &Path,
    manifest: &Path,
    policy: &Path,
    extra: &[&str],
) -> Run {
    let mut command = Command::new(WCONVERGE);
    command
        .args(["plugins", "test"])
        .arg(plugin)
        .arg(manifest)
        .arg("--policy")
        .arg(policy)
        .args(extra)
        .env("WCONVERGE_CACHE_DIR", cache_dir())
        .env("TMPDIR", machine.temp_dir());
    Run::of(&mut command)
}

/// The third-party `file_line` provider, as its author builds it, with a fixture file
/// whose content is sensitive.
fn file_line_setup(machine: &Machine, replace: bool) -> (PathBuf, PathBuf, PathBuf) {
    let dir = machine.root().join("build");
    std::fs::create_dir(&dir).expect("build/");
    let plugin = dir.join("file_line.wasm");
    std::fs::copy(wconverge_tests::FILE_LINE, &plugin).expect("copied");
    let granted = granted(machine);
    let policy = machine.root().join("author-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.file]\nsource = \"builtin\"\n\
             directories = [{{ path = \"{g}\", access = \"read-write\" }}]\n\n\
             [plugins.file_line]\nsource = \"plugin-dir\"\n\
             sha256 = \"{zeros}\"\n\
             directories = [{{ path = \"{g}\", access = \"read-write\" }}]\n",
            g = granted.display(),
            zeros = "0".repeat(64)
        ),
    )
    .expect("policy");
    let manifest = machine.manifest(
        "author.wcv",
        &format!(
            "file {{ '{g}/sshd_config':\n  content => Sensitive(\"Port 2222\\nPermitRootLogin yes\\n\"),\n  replace => {replace},\n}}\n\
             file_line {{ 'no root login':\n  path    => '{g}/sshd_config',\n  line    => 'PermitRootLogin no',\n  match   => '^PermitRootLogin',\n  require => File['{g}/sshd_config'],\n}}\n",
            g = granted.display()
        ),
    );
    (plugin, manifest, policy)
}

#[test]
fn plugins_test_passes_an_idempotent_plugin_in_a_throwaway_root() {
    let machine = Machine::new();
    let (plugin, manifest, policy) = file_line_setup(&machine, false);
    let run = plugins_test(
        &machine,
        &plugin,
        &manifest,
        &policy,
        &["--verbose", "--keep"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(
        run.stdout.contains("testing plugin `file_line`"),
        "{run:#?}"
    );
    assert!(
        run.stdout.contains("apply: 2 resources, 2 changed"),
        "{run:#?}"
    );
    assert!(
        run.stdout.contains("apply again: 2 resources, 0 changed"),
        "{run:#?}"
    );
    assert!(
        run.stdout
            .contains("noop: 2 resources, 0 changed, 0 would change"),
        "{run:#?}"
    );
    assert!(run.stdout.contains("is idempotent"), "{run:#?}");
    // --verbose shows each call, its input and its answer, never a sensitive value.
    assert!(
        run.stdout.contains("call plan File_line[no root login]"),
        "{run:#?}"
    );
    assert!(
        run.stdout.contains("line => \"PermitRootLogin no\""),
        "{run:#?}"
    );
    assert!(run.stdout.contains("content => [sensitive]"), "{run:#?}");
    assert!(!run.stdout.contains("2222"), "{run:#?}");
    // Nothing was written where the policy grants, only in the throwaway root.
    assert!(!granted(&machine).exists(), "{run:#?}");
    let kept = run
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("the throwaway root is kept: `"))
        .and_then(|rest| rest.strip_suffix('`'))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("the kept root is named: {run:#?}"));
    let rebased = kept.join(granted(&machine).strip_prefix("/").expect("absolute"));
    assert_eq!(
        std::fs::read_to_string(rebased.join("sshd_config")).expect("converged"),
        "Port 2222\nPermitRootLogin no\n"
    );
    std::fs::remove_dir_all(&kept).expect("the kept root is removed");
}

#[test]
fn plugins_test_fails_what_is_not_idempotent() {
    let machine = Machine::new();
    // The fixture replaces the line file_line fixed: the two fight on every run.
    let (plugin, manifest, policy) = file_line_setup(&machine, true);
    let run = plugins_test(&machine, &plugin, &manifest, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stdout.contains(
            "File_line[no root login] changed again, so its plan or its state is not idempotent"
        ),
        "{run:#?}"
    );
    assert!(
        run.stderr.contains("plugin `file_line` failed its test"),
        "{run:#?}"
    );
    // A plugin whose state never says its work is done.
    let build = machine.root().join("hostile-build");
    std::fs::create_dir(&build).expect("build/");
    let hostile = build.join("hostile.wasm");
    std::fs::copy(wconverge_tests::HOSTILE, &hostile).expect("copied");
    let policy = machine.root().join("hostile-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.hostile]\nsource = \"{}\"\nsha256 = \"{}\"\n\
             directories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
            hostile.display(),
            "0".repeat(64),
            granted(&machine).display()
        ),
    )
    .expect("policy");
    let manifest = machine.manifest(
        "hostile.wcv",
        &format!(
            "hostile {{ '{}/x': action => 'behave' }}\n",
            granted(&machine).display()
        ),
    );
    let run = plugins_test(&machine, &hostile, &manifest, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(run.stdout.contains("Hostile["), "{run:#?}");
    assert!(run.stdout.contains("changed again"), "{run:#?}");
    assert!(
        run.stdout.contains("would change after two applies"),
        "{run:#?}"
    );
    // A plugin that may launch programs would act on this machine: refused unless the
    // author says so.
    let launching = machine.root().join("launching-policy.toml");
    std::fs::write(
        &launching,
        std::fs::read_to_string(&policy).expect("policy") + "programs = [\"/bin/true\"]\n",
    )
    .expect("policy");
    let refused = plugins_test(&machine, &hostile, &manifest, &launching, &[]);
    assert_eq!(refused.code, 1, "{refused:#?}");
    assert!(
        refused
            .stderr
            .contains("plugin `hostile` may launch programs")
            && refused.stderr.contains("--allow-programs"),
        "{refused:#?}"
    );
    let allowed = plugins_test(
        &machine,
        &hostile,
        &manifest,
        &launching,
        &["--allow-programs"],
    );
    assert!(allowed.stdout.contains("changed again"), "{allowed:#?}");
    // A manifest with nothing of the plugin's is an error, not a pass.
    let other = machine.manifest("other.wcv", "$nothing = 'here'\n");
    let run = plugins_test(&machine, &hostile, &other, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("declares no resource of the types plugin `hostile` provides"),
        "{run:#?}"
    );
}

/// The SDK is a crate of its own: `cargo package` takes it with the WIT contract inside,
/// and builds it from the package alone, as an author's dependency would be.
#[test]
fn the_sdk_packages_on_its_own_with_its_wit() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk/Cargo.toml");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sdk-package");
    let output = Command::new(env!("CARGO"))
        .args(["package", "--allow-dirty", "--manifest-path"])
        .arg(&sdk)
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo package failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let packaged = std::fs::read_dir(target.join("package"))
        .expect("the package directory")
        .flatten()
        .map(|entry| entry.path())
        .find(|path| {
            path.is_dir()
                && path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("wconverge-sdk-"))
        })
        .expect("the unpacked crate");
    for file in [
        "wit/provider.wit",
        "wit/types.wit",
        "wit/host.wit",
        "README.md",
    ] {
        assert!(packaged.join(file).is_file(), "{file} is in the package");
    }
    let readme = std::fs::read_to_string(packaged.join("README.md")).expect("README");
    assert!(
        readme.contains("export_provider!(Marker);"),
        "the README has a whole provider"
    );
}

/// `plugins new` writes a project that builds, whose unit test passes, and whose
/// component passes `plugins test` with the manifest and policy it comes with.
#[test]
fn plugins_new_writes_a_project_that_builds_tests_and_converges() {
    let machine = Machine::new();
    let project = machine.root().join("motd_file");
    let mut new = Command::new(WCONVERGE);
    new.args([
        "plugins",
        "new",
        "motd_file",
        "--type",
        "managed_file",
        "--dir",
    ])
    .arg(&project);
    let written = Run::of(&mut new);
    assert_eq!(written.code, 0, "{written:#?}");
    assert!(
        written
            .stdout
            .contains("cargo build --release --target wasm32-wasip2"),
        "{written:#?}"
    );
    // One target directory for every run of this test: the SDK's dependencies build once.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target");
    let cargo = |args: &[&str]| {
        let output = Command::new(env!("CARGO"))
            .args(args)
            .current_dir(&project)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "cargo {args:?} failed in the generated project:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let tested = cargo(&["test"]);
    assert!(
        tested.contains("converges_then_stays_quiet ... ok"),
        "{tested}"
    );
    cargo(&["build", "--release", "--target", "wasm32-wasip2"]);
    let component = target.join("wasm32-wasip2/release/motd_file.wasm");
    let run = plugins_test(
        &machine,
        &component,
        &project.join("test.wcv"),
        &project.join("policy.toml"),
        &[],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(
        run.stdout.contains("apply: 2 resources, 1 changed"),
        "{run:#?}"
    );
    assert!(run.stdout.contains("is idempotent"), "{run:#?}");
    // Nothing of the author's is overwritten, and a name is checked.
    let again = Run::of(
        Command::new(WCONVERGE)
            .args(["plugins", "new", "motd_file", "--dir"])
            .arg(&project),
    );
    assert_eq!(again.code, 1, "{again:#?}");
    assert!(again.stderr.contains("must not exist yet"), "{again:#?}");
    let bad = Run::of(
        Command::new(WCONVERGE)
            .args(["plugins", "new", "Motd-File"])
            .current_dir(machine.root()),
    );
    assert_eq!(bad.code, 1, "{bad:#?}");
    assert!(bad.stderr.contains("is not a name"), "{bad:#?}");
}

/// A Python provider's bug (an exception its code does not catch) is its resource's
/// error, with the exception and its traceback, and the other resources go on.
#[test]
fn a_python_exception_is_reported_with_its_traceback() {
    let machine = Machine::new();
    let policy = machine.root().join("python-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.raising]\nsource = \"{}\"\nsha256 = \"{}\"\n",
            wconverge_tests::PYTHON_RAISING,
            crate::support::sha256_of(wconverge_tests::PYTHON_RAISING)
        ),
    )
    .expect("policy");
    let manifest = machine.manifest(
        "raising.wcv",
        "raising { 'bug': parts => '0' }\nraising { 'fine': parts => '2' }\n",
    );
    let report = machine.apply_with(&manifest, Some(&policy), &[], 4);
    let bug = crate::support::entry(&report, "Raising[bug]");
    let error = bug["error"].as_str().expect("an error");
    for expected in [
        "ZeroDivisionError: division by zero",
        "Traceback (most recent call last):",
        ", in plan",
        ", in ratio",
    ] {
        assert!(error.contains(expected), "`{expected}` in: {error}");
    }
    assert!(!error.contains("unreachable"), "{error}");
    let fine = crate::support::entry(&report, "Raising[fine]");
    assert_eq!(fine["status"], "unchanged", "{report:#}");

    // In validate, which has no error to give, the exception is a problem of each
    // resource of the call, with its traceback.
    let manifest = machine.manifest("raising-validate.wcv", "raising { 'bug': parts => 'x' }\n");
    let run = machine.run(&[
        "validate",
        manifest.to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    for expected in [
        "Raising[bug]",
        "the plugin failed: ValueError: invalid literal for int() with base 10: 'x'",
        "Traceback (most recent call last):",
        ", in validate",
    ] {
        assert!(run.stderr.contains(expected), "`{expected}` in: {run:#?}");
    }
    assert!(!run.stderr.contains("unreachable"), "{run:#?}");
}

/// `plugins new --lang python` writes a project whose unit test passes natively, which
/// componentize-py builds, and whose component passes `plugins test`: its programs' path
/// arguments are rebased into the throwaway root with its grants, so nothing is written
/// where the policy points.
#[test]
fn plugins_new_writes_a_python_project_that_tests_builds_and_converges() {
    let machine = Machine::new();
    let project = machine.root().join("py_file");
    let written = Run::of(
        Command::new(WCONVERGE)
            .args([
                "plugins",
                "new",
                "py_file",
                "--lang",
                "python",
                "--type",
                "managed_py",
                "--dir",
            ])
            .arg(&project),
    );
    assert_eq!(written.code, 0, "{written:#?}");
    let run = |program: &str, args: &[&str]| {
        let output = Command::new(program)
            .args(args)
            .current_dir(&project)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("runs");
        assert!(
            output.status.success(),
            "{program} {args:?} failed in the generated project:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let componentize = wconverge_tests::COMPONENTIZE_PY;
    run(
        componentize,
        &["--wit-path", "wit", "--world", "provider", "bindings", "."],
    );
    let tested = run("python3", &["-m", "unittest", "test_app"]);
    assert!(
        tested.contains("Ran 1 test") && tested.contains("OK"),
        "{tested}"
    );
    run(
        componentize,
        &[
            "--wit-path",
            "wit",
            "--world",
            "provider",
            "componentize",
            "--stub-wasi",
            "app",
            "--output",
            "py_file.wasm",
        ],
    );
    let component = project.join("py_file.wasm");
    let policy = project.join("policy.toml");
    let manifest = project.join("test.wcv");
    let refused = plugins_test(&machine, &component, &manifest, &policy, &[]);
    assert_eq!(refused.code, 1, "{refused:#?}");
    assert!(refused.stderr.contains("--allow-programs"), "{refused:#?}");
    let passed = plugins_test(
        &machine,
        &component,
        &manifest,
        &policy,
        &["--allow-programs"],
    );
    assert_eq!(passed.code, 0, "{passed:#?}");
    assert!(
        passed.stdout.contains("apply: 2 resources, 1 changed"),
        "{passed:#?}"
    );
    assert!(passed.stdout.contains("is idempotent"), "{passed:#?}");
    assert!(
        !Path::new("/var/lib/py_file").exists(),
        "nothing outside the root"
    );
}

/// A plugin that writes, removes or reads outside the directories its call was granted
/// is stopped by the host, which says so with the path and the grant: in the report with
/// the resource, on the console and in the audit trail. Paths no grant holds (absolute
/// or relative) reach the host instead of failing inside the guest as a bare "no such
/// file".
#[test]
fn the_host_reports_a_write_outside_the_grant_with_the_path_and_the_grant() {
    let machine = Machine::new();
    let policy = machine.policy(&crate::support::test_plugins_policy(&machine, ""));
    let files = std::fs::canonicalize(machine.files_dir()).expect("files dir");
    let root = std::fs::canonicalize(machine.root()).expect("root");
    let escape = root.join("escape.txt");
    let kept = root.join("kept.txt");
    std::fs::write(&kept, "a secret the plugin must not read\n").expect("kept");
    let hostile = |name: &str, action: &str, target: &str| {
        serde_json::json!({ "type": "hostile", "title": machine.file(name),
                            "attributes": { "action": action, "target": target } })
    };
    let catalog = machine.catalog(serde_json::json!([
        hostile("absolute", "write_file", escape.to_str().expect("utf-8")),
        hostile("relative", "write_file", "relative.txt"),
        hostile("remove", "remove", kept.to_str().expect("utf-8")),
        hostile("read", "read_file", kept.to_str().expect("utf-8")),
        hostile("inside", "write_file", &machine.file("inside.txt")),
        hostile("chmod", "chmod", kept.to_str().expect("utf-8")),
    ]));
    let log = machine.root().join("audit.jsonl");
    let run = machine.apply(
        &catalog,
        &policy,
        &["--audit-log", log.to_str().expect("utf-8")],
    );
    assert_eq!(run.code, 6, "five failed and one changed: {run:#?}");
    assert!(!escape.exists(), "nothing was written outside the grant");
    assert!(!Path::new("/relative.txt").exists());
    assert_eq!(
        std::fs::read_to_string(&kept).expect("still there"),
        "a secret the plugin must not read\n"
    );
    assert!(!run.stdout.contains("a secret"), "{run:#?}");
    assert!(Path::new(&machine.file("inside.txt")).exists());

    let granted = format!("(granted: `{}` read-write)", files.display());
    let hint = "a call gets the directories its resource's path attributes need, where \
                `directories` in [plugins.hostile] allows them";
    let expected = [
        ("absolute", "open-for-writing", "writing", escape.clone()),
        (
            "relative",
            "open-for-writing",
            "writing",
            PathBuf::from("/relative.txt"),
        ),
        ("remove", "remove-file", "writing", kept.clone()),
        ("read", "open", "reading", kept.clone()),
    ];
    let events = crate::support::trail(&log);
    for (name, operation, verb, target) in expected {
        let resource = format!("Hostile[{}]", machine.file(name));
        let reason = format!(
            "{verb} `{}` is outside the directories granted to this call {granted}; {hint}",
            target.display()
        );
        // With the resource in the report, so the author sees it where the failure is.
        assert!(
            run.stdout
                .contains(&format!("{resource}: warning: host: {reason}")),
            "{resource}: {run:#?}"
        );
        let denied: Vec<_> = events
            .iter()
            .filter(|event| event["resource"] == resource.as_str())
            .filter(|event| event["decision"] == "denied")
            .collect();
        assert_eq!(denied.len(), 1, "{resource}: {events:#?}");
        assert_eq!(denied[0]["operation"], operation);
        assert_eq!(denied[0]["target"], target.display().to_string());
        assert_eq!(denied[0]["reason"], reason.as_str());
    }
    // The host's own file-metadata calls say the same.
    let chmod = format!(
        "Hostile[{}]: failed: `{}` is outside the directories granted to this call {granted}",
        machine.file("chmod"),
        kept.display()
    );
    assert!(run.stdout.contains(&chmod), "{run:#?}");
    assert!(
        events
            .iter()
            .any(|event| event["operation"] == "file-metadata"
                && event["decision"] == "denied"
                && event["target"] == kept.display().to_string()),
        "{events:#?}"
    );
    assert_ne!(
        std::fs::metadata(&kept).expect("kept").permissions().mode() & 0o7777,
        0o4777
    );
    // The guest sees an error of the sandbox, no longer "no such file".
    let absolute = format!("Hostile[{}]: failed: writing", machine.file("absolute"));
    assert!(
        run.stdout
            .lines()
            .any(|line| line.starts_with(&absolute) && line.contains("Operation not permitted")),
        "{run:#?}"
    );
}

/// The committed plugin built against WIT 0.7.0: its digest, so it cannot change
/// unnoticed (`tests/fixtures/wit-0.7.0/README.md` says how it was built).
const WIT_07_PLUGIN_SHA256: &str =
    "cf794ea739c105f0d62c40f6427fd7ad4ddd169b8c1e12774dcb686c390fe063";

/// A provider built against the previous WIT version (a committed binary) loads through
/// the adapter and runs with the same sandbox as a current one: its changes are planned
/// and applied, it logs, its launch is checked against the allowlist, its metadata call
/// and its file writes go through the grants, and a write outside them is refused by the
/// host. `plugins inspect` says which version it was built against.
#[test]
fn a_provider_built_against_the_previous_wit_loads_through_the_adapter() {
    let machine = Machine::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/wit-0.7.0/hostile.wasm")
        .canonicalize()
        .expect("the fixture is in the repository");
    let digest = crate::support::sha256_of(fixture.to_str().expect("utf-8"));
    assert_eq!(digest, WIT_07_PLUGIN_SHA256, "the fixture changed");
    let policy = machine.root().join("previous.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.hostile]\nsource = \"{}\"\nsha256 = \"{digest}\"\n\
             directories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
            fixture.display(),
            machine.files_dir()
        ),
    )
    .expect("policy");
    let outside = std::fs::canonicalize(machine.root())
        .expect("root")
        .join("escape.txt");
    let hostile = |name: &str, action: &str, target: &str| {
        serde_json::json!({ "type": "hostile", "title": machine.file(name),
                            "attributes": { "action": action, "target": target } })
    };
    let written = machine.file("written.txt");
    let catalog = machine.catalog(serde_json::json!([
        hostile("write", "write_file", &written),
        hostile("stat", "stat", &written),
        hostile("launch", "launch", "/usr/bin/id"),
        hostile("outside", "write_file", outside.to_str().expect("utf-8")),
        hostile("behave", "behave", ""),
    ]));
    let log = machine.root().join("audit.jsonl");
    let run = machine.apply(
        &catalog,
        &policy,
        &["--audit-log", log.to_str().expect("utf-8"), "--jobs", "1"],
    );
    assert_eq!(run.code, 6, "three changed and two failed: {run:#?}");
    let resource = |name: &str| format!("Hostile[{}]", machine.file(name));
    for line in [
        // plan's change and apply's log message.
        format!("{}: write_file done", resource("write")),
        format!("{}: notice: wrote `{written}`", resource("write")),
        // file-metadata@0.7.0.
        format!(
            "{}: notice: stat of `{written}`: Some(FileStat {{ kind: File",
            resource("stat")
        ),
        // process@0.7.0, checked against the policy as any launch.
        format!(
            "{}: failed: program `/usr/bin/id` is not on the allowlist of plugin `hostile`",
            resource("launch")
        ),
        format!(
            "{}: warning: host: writing `{}` is outside the directories granted to this call",
            resource("outside"),
            outside.display()
        ),
        format!("{}: behave done", resource("behave")),
    ] {
        assert!(run.stdout.contains(&line), "`{line}` in: {run:#?}");
    }
    assert_eq!(
        std::fs::read_to_string(&written).expect("written"),
        "written by the hostile plugin\n"
    );
    assert!(!outside.exists());
    let events = crate::support::trail(&log);
    assert!(
        events
            .iter()
            .any(|event| event["operation"] == "open-for-writing"
                && event["decision"] == "allowed"
                && event["digest"] == WIT_07_PLUGIN_SHA256),
        "{events:#?}"
    );

    let inspect = machine.run(&[
        "plugins",
        "inspect",
        "hostile",
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    assert_eq!(inspect.code, 0, "{inspect:#?}");
    assert!(
        inspect.stdout.contains(
            "  wit: 0.7.0 (this wconverge speaks 0.8.0, and loads this version's providers \
             through an adapter)\n"
        ),
        "{inspect:#?}"
    );
}
