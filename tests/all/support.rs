//! The test harness: a temporary "machine" directory, catalogs and policies in it, and
//! runs of the real binary against it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub(crate) const WCONVERGE: &str = env!("CARGO_BIN_EXE_wconverge");

/// One compiled-plugin cache for the whole test run: compiling a component with a debug
/// build of wasmtime takes seconds, so every test reuses the cache.
pub(crate) fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wconverge-cache")
}

/// A plugin cache of a test's own (for a test that tampers with its entries), with the
/// compiled code of the shared one, so nothing is compiled again: pass it to `apply` as
/// `WCONVERGE_CACHE_DIR`.
pub(crate) fn private_cache(machine: &Machine) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let cache = machine.root().join("cache");
    let components = cache.join("components");
    std::fs::create_dir_all(&components).expect("cache dir");
    for dir in [&cache, &components] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).expect("mode");
    }
    for entry in std::fs::read_dir(cache_dir().join("components")).expect("the shared cache") {
        let path = entry.expect("entry").path();
        if path
            .extension()
            .is_some_and(|extension| extension == "cwasm")
        {
            let copy = components.join(path.file_name().expect("a name"));
            std::fs::copy(&path, &copy).expect("copied");
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).expect("mode");
        }
    }
    cache
}

/// The digest of a file, as policies pin it.
pub(crate) fn sha256_of(path: &str) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap_or_else(|error| panic!("cannot read {path}: {error}"));
    sha2::Sha256::digest(&bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The result of one `wconverge` run.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// Runs `command` to completion.
    pub(crate) fn of(command: &mut Command) -> Run {
        let output = command.output().expect("the command runs");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("stdout is not JSON ({error}):\n{self:#?}"))
    }

    /// Everything the run printed.
    pub(crate) fn all_output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// The report entry of `resource` (like `File[/x]`).
pub(crate) fn entry<'a>(report: &'a Value, resource: &str) -> &'a Value {
    report["resources"]
        .as_array()
        .expect("a report has resources")
        .iter()
        .find(|entry| entry["resource"] == resource)
        .unwrap_or_else(|| panic!("{resource} is not in the report:\n{report:#}"))
}

/// The events of an audit log (`--audit-log`), one JSON object a line.
pub(crate) fn trail(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the audit log was written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
        .collect()
}

/// The command lines an audit log records launches of, in order.
pub(crate) fn launched(path: &Path) -> Vec<String> {
    trail(path)
        .into_iter()
        .filter(|event| event["operation"] == "launch")
        .map(|event| event["target"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The error of the first resource of a report.
pub(crate) fn first_error(report: &Value) -> String {
    report["resources"][0]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("the first resource did not fail:\n{report:#}"))
        .to_owned()
}

/// A temporary directory standing for the machine: `files/` is where resources live and
/// what test policies grant; `state/` holds the run lock; `tmp/` is the runs' `TMPDIR`.
pub(crate) struct Machine {
    temp: tempfile::TempDir,
}

impl Machine {
    pub(crate) fn new() -> Machine {
        warm_cache();
        let temp = tempfile::Builder::new()
            .prefix("wcv-e2e-")
            .tempdir()
            .expect("a temporary directory");
        std::fs::create_dir(temp.path().join("files")).expect("files/");
        std::fs::create_dir(temp.path().join("tmp")).expect("tmp/");
        Machine { temp }
    }

    pub(crate) fn root(&self) -> &Path {
        self.temp.path()
    }

    /// A path under `files/`, as a string for catalogs.
    pub(crate) fn file(&self, name: &str) -> String {
        self.temp
            .path()
            .join("files")
            .join(name)
            .to_str()
            .expect("temporary paths are UTF-8")
            .to_owned()
    }

    /// The temporary directory of this machine's runs (`TMPDIR`): what a run leaves
    /// there, it leaked.
    pub(crate) fn temp_dir(&self) -> PathBuf {
        self.temp.path().join("tmp")
    }

    pub(crate) fn files_dir(&self) -> String {
        self.file("").trim_end_matches('/').to_owned()
    }

    /// Writes `resources` (a JSON array) as a catalog and returns its path.
    pub(crate) fn catalog(&self, resources: Value) -> PathBuf {
        self.catalog_with_edges(resources, Value::Array(Vec::new()))
    }

    pub(crate) fn catalog_with_edges(&self, resources: Value, edges: Value) -> PathBuf {
        let catalog = serde_json::json!({
            "format_version": 1,
            "resources": resources,
            "edges": edges,
        });
        let path = self.temp.path().join("catalog.json");
        std::fs::write(&path, serde_json::to_string_pretty(&catalog).expect("json"))
            .expect("catalog written");
        path
    }

    /// Writes a manifest named `name` (`@FILES@` stands for the `files/` directory) and
    /// returns its path.
    pub(crate) fn manifest(&self, name: &str, text: &str) -> PathBuf {
        let path = self.temp.path().join(name);
        std::fs::write(&path, text.replace("@FILES@", &self.files_dir()))
            .expect("manifest written");
        path
    }

    /// A policy granting the built-in plugins `files/` only (the interpreters may read
    /// anywhere, to check `creates`), plus `extra` TOML.
    pub(crate) fn policy(&self, extra: &str) -> PathBuf {
        let files = self.files_dir();
        let text = format!(
            r#"[plugins.file]
source = "builtin"
directories = [{{ path = "{files}", access = "read-write" }}]

[plugins.template]
source = "builtin"
directories = [{{ path = "{files}", access = "read-write" }}]

[plugins.sh]
source = "builtin"
provides = ["sh", "exec", "script"]
directories = [{{ path = "/", access = "read" }}]
programs = ["/bin/sh", "/usr/bin/*", "/bin/*"]
users = ["*"]
groups = ["*"]
environment = ["*"]

[plugins.bash]
source = "builtin"
directories = [{{ path = "/", access = "read" }}]
programs = ["/bin/bash", "/usr/bin/bash"]
environment = ["*"]

[plugins.launcher]
source = "builtin"
provides = []
programs = ["/usr/bin/setarch"]

[plugins.facts-os]
source = "builtin"
provides = []
directories = [{{ path = "/etc", access = "read" }}, {{ path = "/usr/lib", access = "read" }}, {{ path = "/run", access = "read" }}]

[plugins.facts-package]
source = "builtin"
provides = []
directories = [{{ path = "/var/lib/dpkg", access = "read" }}]

[plugins.notify]
source = "builtin"

{extra}"#
        );
        let path = self.temp.path().join("policy.toml");
        std::fs::write(&path, text).expect("policy written");
        path
    }

    /// Runs `wconverge` with `args`, the shared cache and this machine's state dir.
    pub(crate) fn run(&self, args: &[&str]) -> Run {
        let mut command = self.command(WCONVERGE);
        command.args(args);
        Run::of(&mut command)
    }

    /// `program` with this machine's environment for `wconverge` (the shared cache, its
    /// state and temporary directories), to run `wconverge` through another program.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .env("WCONVERGE_CACHE_DIR", cache_dir())
            .env("WCONVERGE_STATE_DIR", self.temp.path().join("state"))
            .env("TMPDIR", self.temp_dir())
            .env_remove("WCONVERGE_LOG");
        command
    }

    /// `wconverge compile MANIFEST --policy POLICY`.
    pub(crate) fn compile(&self, manifest: &Path, policy: &Path) -> Run {
        self.run(&[
            "compile",
            manifest.to_str().expect("utf-8"),
            "--policy",
            policy.to_str().expect("utf-8"),
        ])
    }

    /// `wconverge apply CATALOG --policy POLICY` plus `args`.
    pub(crate) fn apply(&self, catalog: &Path, policy: &Path, args: &[&str]) -> Run {
        let mut all = vec![
            "apply",
            catalog.to_str().expect("utf-8"),
            "--policy",
            policy.to_str().expect("utf-8"),
        ];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// `apply MANIFEST --format json` plus `args`, with the built-in policy (the grants
    /// that ship) unless `policy` names one, checked to have exited with `code`.
    pub(crate) fn apply_with(
        &self,
        manifest: &Path,
        policy: Option<&Path>,
        args: &[&str],
        code: i32,
    ) -> Value {
        let mut all = vec![
            "apply",
            manifest.to_str().expect("utf-8"),
            "--format",
            "json",
        ];
        if let Some(policy) = policy {
            all.extend(["--policy", policy.to_str().expect("utf-8")]);
        }
        all.extend_from_slice(args);
        let run = self.run(&all);
        assert_eq!(run.code, code, "unexpected exit code:\n{run:#?}");
        run.json()
    }

    /// `apply MANIFEST` with the built-in policy and an audit log, checked to have been
    /// refused before the run (exit code 1), saying each of `expected`, with no launch
    /// in the audit log.
    pub(crate) fn refused_before_any_launch(&self, manifest: &Path, expected: &[&str]) {
        let log = self.root().join("refused.jsonl");
        let run = self.run(&[
            "apply",
            manifest.to_str().expect("utf-8"),
            "--audit-log",
            log.to_str().expect("utf-8"),
        ]);
        assert_eq!(run.code, 1, "{run:#?}");
        for expected in expected {
            assert!(
                run.stderr.contains(expected),
                "missing `{expected}` in:\n{}",
                run.stderr
            );
        }
        let trail = std::fs::read_to_string(&log).expect("the audit log was written");
        // The log recorded the run (the fact plugins' directories), and no launch.
        assert!(
            trail.contains("\"decision\":\"allowed\""),
            "the audit log recorded nothing of the run: {trail}"
        );
        assert!(
            !trail.contains("\"launch\""),
            "nothing was launched: {trail}"
        );
    }

    /// `apply --format json`, checked to have exited with `code`.
    pub(crate) fn apply_json(
        &self,
        catalog: &Path,
        policy: &Path,
        args: &[&str],
        code: i32,
    ) -> Value {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let run = self.apply(catalog, policy, &all);
        assert_eq!(run.code, code, "unexpected exit code:\n{run:#?}");
        run.json()
    }
}

/// The policy for the hostile and network test plugins, pinned by digest.
pub(crate) fn test_plugins_policy(machine: &Machine, limits: &str) -> String {
    format!(
        r#"[plugins.hostile]
source = "{hostile}"
sha256 = "{hostile_sha}"
provides = ["hostile", "peek"]
directories = [{{ path = "{files}", access = "read-write" }}]
[plugins.hostile.limits]
{limits}

[plugins.netclient]
source = "{net}"
sha256 = "{net_sha}"
"#,
        hostile = wconverge_tests::HOSTILE,
        hostile_sha = sha256_of(wconverge_tests::HOSTILE),
        net = wconverge_tests::NETCLIENT,
        net_sha = sha256_of(wconverge_tests::NETCLIENT),
        files = machine.files_dir(),
    )
}

/// Compiles every plugin into the shared cache once, before the tests run in parallel
/// (otherwise each would compile the same plugins at the same time).
fn warm_cache() {
    static WARM: OnceLock<()> = OnceLock::new();
    WARM.get_or_init(|| {
        let temp = tempfile::tempdir().expect("temp dir");
        let machine = Machine { temp };
        std::fs::create_dir(machine.root().join("files")).expect("files/");
        let policy = machine.policy(&test_plugins_policy(&machine, ""));
        // The network plugin is refused after it is compiled, so this reports an error;
        // the cache is warm either way.
        let run = machine.run(&[
            "plugins",
            "list",
            "--policy",
            policy.to_str().expect("utf-8"),
        ]);
        assert!(
            run.stdout.contains("hostile"),
            "warming the cache failed:\n{run:#?}"
        );
    });
}
