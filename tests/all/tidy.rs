//! Tidy checks: the architecture's invariants, enforced rather than stated.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("host/cli is two levels below the repository root")
        .to_path_buf()
}

/// The packages `package` depends on (normal and build dependencies, for `target` or
/// the host), from `cargo tree`, which needs only what the build already downloaded.
fn dependencies(
    manifest: &Path,
    package: &str,
    target: Option<&str>,
    depth: Option<u32>,
) -> BTreeSet<String> {
    let mut command = Command::new(env!("CARGO"));
    command
        .args([
            "tree",
            "--edges",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .args(["--package", package, "--manifest-path"])
        .arg(manifest);
    if let Some(target) = target {
        command.args(["--target", target]);
    }
    if let Some(depth) = depth {
        command.args(["--depth", &depth.to_string()]);
    }
    let output = command.output().expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != package)
        .map(str::to_owned)
        .collect()
}

fn workspace_packages(manifest_dir: &Path, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for dir in ["host", "tests", "providers", "tests/plugins", "."] {
        let Ok(entries) = std::fs::read_dir(manifest_dir.join(dir)) else {
            continue;
        };
        for entry in entries {
            let manifest = entry.expect("entry").path().join("Cargo.toml");
            let Ok(text) = std::fs::read_to_string(&manifest) else {
                continue;
            };
            if let Some(name) = text
                .lines()
                .find_map(|line| line.strip_prefix("name = \""))
                .and_then(|rest| rest.strip_suffix('"'))
                && name.starts_with(prefix)
            {
                names.push(name.to_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn wasmtime_stays_in_the_runtime_and_the_cli() {
    let root = repository();
    let manifest = root.join("Cargo.toml");
    let members: Vec<String> = workspace_packages(&root, "wconverge-")
        .into_iter()
        .filter(|name| {
            // The guest workspace and the fuzz targets are workspaces of their own.
            !name.starts_with("wconverge-plugin-")
                && !name.starts_with("wconverge-testplugin-")
                && name != "wconverge-sdk"
                && name != "wconverge-fuzz"
        })
        .collect();
    assert!(members.len() >= 7, "{members:?}");
    for name in &members {
        let reaches_wasmtime = dependencies(&manifest, name, None, None).contains("wasmtime");
        let allowed = matches!(name.as_str(), "wconverge-runtime" | "wconverge-cli");
        assert!(
            allowed || !reaches_wasmtime,
            "{name} depends on wasmtime; only wconverge-runtime (and the CLI through it) may"
        );
        if name == "wconverge-runtime" {
            assert!(reaches_wasmtime, "the runtime is where wasmtime is");
        }
    }
}

/// The launcher forks as root for plugins it knows nothing of: no wasmtime, no plugin,
/// no policy; the runtime converts a checked request into its `Request` once.
#[test]
fn the_launcher_depends_on_no_host_crate_and_never_on_wasmtime() {
    let manifest = repository().join("Cargo.toml");
    let all = dependencies(&manifest, "wconverge-launch", None, None);
    let ours: Vec<&String> = all
        .iter()
        .filter(|name| name.starts_with("wconverge-"))
        .collect();
    assert!(ours.is_empty(), "wconverge-launch depends on {ours:?}");
    assert!(
        !all.contains("wasmtime"),
        "wconverge-launch depends on wasmtime"
    );
}

#[test]
fn the_language_front_end_depends_on_no_host_crate_but_the_catalog() {
    let manifest = repository().join("Cargo.toml");
    let ours: Vec<String> = dependencies(&manifest, "wconverge-lang", None, None)
        .into_iter()
        .filter(|name| name.starts_with("wconverge-"))
        .collect();
    assert_eq!(
        ours,
        ["wconverge-catalog"],
        "wconverge-lang may know the catalog and nothing else of the host"
    );
}

/// The engine decides what to do and never how: the code a catalog carries runs through
/// `wconverge_catalog::Code` (the language implements it, the CLI hands it over), and
/// plugins through `PluginHost`.
#[test]
fn the_engine_depends_on_the_catalog_and_resource_programs_alone() {
    let manifest = repository().join("Cargo.toml");
    let ours: Vec<String> = dependencies(&manifest, "wconverge-engine", None, None)
        .into_iter()
        .filter(|name| name.starts_with("wconverge-"))
        .collect();
    assert_eq!(
        ours,
        ["wconverge-catalog", "wconverge-requires"],
        "wconverge-engine may know the catalog and resource programs and nothing else of \
         the host"
    );
}

#[test]
fn plugins_depend_on_the_sdk_and_never_on_the_host() {
    let root = repository();
    let manifest = root.join("providers").join("Cargo.toml");
    let plugins: Vec<String> = workspace_packages(&root, "wconverge-")
        .into_iter()
        .filter(|name| {
            name.starts_with("wconverge-plugin-") || name.starts_with("wconverge-testplugin-")
        })
        .collect();
    assert!(plugins.len() >= 5, "{plugins:?}");
    // A plugin builds on an SDK crate; a launcher is a pure function of its world and may
    // use wit-bindgen alone. Every other crate a built-in plugin uses is reviewed and
    // listed here: it runs inside the sandbox, but it is code the binary ships.
    let sdks = BTreeSet::from([
        "wconverge-sdk".to_owned(),
        "wconverge-sdk-interpreter".to_owned(),
        "wconverge-sdk-facts".to_owned(),
        "wit-bindgen".to_owned(),
    ]);
    let reviewed = BTreeSet::from([
        // What `file` and `template` share (a library of the guest workspace).
        ("wconverge-plugin-file", "wconverge-file-core"),
        ("wconverge-plugin-template", "wconverge-file-core"),
        // What `apt` and `dpkg` share.
        ("wconverge-plugin-apt", "wconverge-package-core"),
        ("wconverge-plugin-dpkg", "wconverge-package-core"),
        // The file type's atomic replace, for hosts files and authorized_keys.
        ("wconverge-plugin-hosts", "wconverge-file-core"),
        ("wconverge-plugin-sshkeys", "wconverge-file-core"),
        // What the service providers share.
        ("wconverge-plugin-systemd", "wconverge-service-core"),
        ("wconverge-plugin-debian", "wconverge-service-core"),
        ("wconverge-plugin-base", "wconverge-service-core"),
        // The Jinja engine.
        ("wconverge-plugin-template", "minijinja"),
        // wasi-libc's `*at` functions, for the test plugin that makes path calls as a
        // plugin written for WASI makes them (never shipped).
        ("wconverge-testplugin-hostile", "libc"),
        // WASI's own bindings, for the calls wasi-libc never makes (`link-at` with
        // `symlink-follow`), asked of the interface by the same test plugin.
        ("wconverge-testplugin-hostile", "wasip2"),
    ]);
    for name in &plugins {
        let direct = dependencies(&manifest, name, Some("wasm32-wasip2"), Some(1));
        let unreviewed: Vec<&String> = direct
            .iter()
            .filter(|dependency| {
                !sdks.contains(*dependency)
                    && !reviewed.contains(&(name.as_str(), dependency.as_str()))
            })
            .collect();
        assert!(
            direct.iter().any(|dependency| sdks.contains(dependency)) && unreviewed.is_empty(),
            "{name} must depend on the SDK (or wit-bindgen) and reviewed crates alone; not \
             reviewed: {unreviewed:?}"
        );
        let all = dependencies(&manifest, name, Some("wasm32-wasip2"), None);
        let host: Vec<&String> = all
            .iter()
            .filter(|dep| {
                dep.starts_with("wconverge-")
                    && !sdks.contains(*dep)
                    && dep.as_str() != "wconverge-file-core"
                    && dep.as_str() != "wconverge-package-core"
                    && dep.as_str() != "wconverge-service-core"
            })
            .collect();
        assert!(host.is_empty(), "{name} depends on host crates: {host:?}");
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_ending(dir, &[".rs"], out);
}

/// The files under `dir` whose names end with one of `endings`, build output and hidden
/// directories left out.
fn files_ending(dir: &Path, endings: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable directory") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                files_ending(&path, endings, out);
            }
        } else if endings.iter().any(|ending| name.ends_with(ending)) {
            out.push(path);
        }
    }
}

/// A file a newcomer can hold: none of the host's is over 1,000 lines (split a big one
/// into rooms by concern, as `eval/` and `parser/` are).
#[test]
fn no_file_of_the_host_is_over_a_thousand_lines() {
    let mut files = Vec::new();
    rust_files(&repository().join("host"), &mut files);
    assert!(files.len() > 20, "found only {} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path)
                .expect("readable")
                .lines()
                .count();
            (lines > 1_000).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    assert!(long.is_empty(), "files of host/ over 1,000 lines: {long:?}");
}

#[test]
fn every_rust_file_says_what_it_is_for() {
    let root = repository();
    let mut files = Vec::new();
    for dir in ["host", "providers", "guest-sdk", "tests", "xtask"] {
        if root.join(dir).is_dir() {
            rust_files(&root.join(dir), &mut files);
        }
    }
    assert!(files.len() > 20, "found only {} files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("readable");
            !text.trim_start().starts_with("//!")
        })
        .map(|path| {
            path.strip_prefix(&root)
                .unwrap_or(path)
                .display()
                .to_string()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` first line: {missing:?}"
    );
}

/// The design brief and the documents behind it are not in this repository: code,
/// manifests, scripts and documents say what they mean instead of pointing there (to a
/// section of the brief, a decision of it, or one of its source documents by file).
#[test]
fn nothing_points_to_the_design_brief_or_the_tracker_outside_the_repository() {
    let root = repository();
    let listed = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["ls-files", "-z"])
        .output()
        .expect("git ls-files runs");
    assert!(listed.status.success(), "git ls-files failed");
    let files: Vec<PathBuf> = listed
        .stdout
        .split(|byte| *byte == 0)
        .filter(|name| !name.is_empty())
        .map(|name| root.join(String::from_utf8_lossy(name).as_ref()))
        .collect();
    assert!(files.len() > 300, "git lists only {} files", files.len());
    // Built here, so that this file does not name what it looks for.
    let brief = ["DES", "IGN"].concat();
    let seed = ["se", "ed"].concat();
    let tracker = ["iss", "ue"].concat();
    let exact = [brief.clone()];
    let any_case: Vec<String> = [
        format!("{brief} section"),
        format!("{brief}.md"),
        format!("{seed} `"),
        format!("{seed}'s"),
        format!("({seed} "),
        format!("the {seed}"),
        format!("types {seed}"),
        format!("catalog {seed}"),
        format!("{seed}s/"),
        // The tracker: a reader of the repository has neither its issues nor its notes.
        format!("the {tracker}'s"),
        format!("{tracker} #"),
        format!("{} #", ["re", "fs"].concat()),
    ]
    .iter()
    .map(|pointer| pointer.to_lowercase())
    .collect();
    let numbered = [
        "decision ".to_owned(),
        "decisions ".to_owned(),
        format!("{tracker} "),
        format!("{tracker}_"),
        format!("{tracker}s "),
    ];
    let decision = |line: &str| {
        numbered.iter().any(|word| {
            line.match_indices(word)
                .any(|(at, word)| line[at + word.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
    };
    let mut read = 0;
    let mut found = Vec::new();
    for path in &files {
        // Binary files (components, images) are not text to read.
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        read += 1;
        let shown = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            if exact.iter().any(|pointer| line.contains(pointer.as_str()))
                || any_case
                    .iter()
                    .any(|pointer| lower.contains(pointer.as_str()))
                || decision(&lower)
            {
                found.push(format!("{shown}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(read > 300, "read only {read} text files");
    assert!(
        found.is_empty(),
        "references to the design brief or the tracker, which are not in this repository; \
         say what they mean instead: {found:#?}"
    );
}

/// The types each built-in plugin provides in the built-in policy (`provides`, or the
/// plugin's own name), read from its text in the policy crate.
fn builtin_types(root: &Path) -> Vec<(String, Vec<String>)> {
    let source = std::fs::read_to_string(root.join("host/policy/src/policy.rs"))
        .expect("host/policy/src/policy.rs");
    let mut plugins: Vec<(String, Vec<String>)> = Vec::new();
    for line in source.lines() {
        if let Some(name) = line
            .strip_prefix("[plugins.")
            .and_then(|rest| rest.strip_suffix(']'))
            && !name.contains('.')
        {
            plugins.push((name.to_owned(), vec![name.to_owned()]));
        } else if let Some(list) = line.strip_prefix("provides = [")
            && let Some((_, types)) = plugins.last_mut()
        {
            *types = list
                .trim_end_matches(']')
                .split(',')
                .map(|item| item.trim().trim_matches('"').to_owned())
                .filter(|item| !item.is_empty())
                .collect();
        }
    }
    plugins
}

#[test]
fn every_builtin_plugin_has_an_end_to_end_test() {
    let root = repository();
    // The tests themselves, not this file: it names what it looks for.
    let mut tests = String::new();
    for entry in std::fs::read_dir(root.join("tests").join("all")).expect("tests/all") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|name| name == "tidy.rs") {
            continue;
        }
        tests.push_str(&std::fs::read_to_string(path).expect("test file"));
    }
    // Whitespace runs as one space: an assertion may be wrapped anywhere.
    let flat = tests.split_whitespace().collect::<Vec<_>>().join(" ");
    let builtins = builtin_types(&root);
    let mut untested = Vec::new();
    for entry in std::fs::read_dir(root.join("providers")).expect("providers") {
        let path = entry.expect("entry").path();
        if !path.join("Cargo.toml").is_file() {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .expect("name")
            .to_owned();
        let types = &builtins
            .iter()
            .find(|(plugin, _)| *plugin == name)
            .unwrap_or_else(|| panic!("plugin `{name}` is not in the built-in policy"))
            .1;
        // A type that another built-in plugin provides too (`service`: systemd, debian,
        // base) is no evidence that this one ran: a test must have chosen it
        // (`provider => NAME`) or seen it in a report (`"provider": "NAME"`). A plugin
        // without types, by what it does: the launcher through `architecture`, a fact
        // plugin by a test that names it with the groups it checks it gathered.
        let shared = types.iter().any(|type_name| {
            builtins
                .iter()
                .filter(|(_, provided)| provided.contains(type_name))
                .count()
                > 1
        });
        let evidence = if types.is_empty() {
            if name == "launcher" {
                vec!["architecture =>".to_owned()]
            } else {
                vec![format!("\"{name}\",")]
            }
        } else if shared {
            vec![
                format!("provider => {name}"),
                format!("provider => '{name}'"),
                format!("\"provider\": \"{name}\""),
                format!("[\"provider\"], \"{name}\""),
            ]
        } else {
            Vec::new()
        };
        if !evidence.is_empty() && !evidence.iter().any(|needle| flat.contains(needle.as_str())) {
            untested.push(name.clone());
        }
        for type_name in types {
            if !(tests.contains(&format!("\"type\": \"{type_name}\""))
                || tests.contains(&format!("\n{type_name} {{")))
            {
                untested.push(format!("{name}: type `{type_name}`"));
            }
        }
    }
    assert!(
        untested.is_empty(),
        "built-in plugins that no end-to-end test in tests/all runs: {untested:#?}"
    );
}

#[test]
fn the_guest_workspace_is_formatted() {
    let output = Command::new(env!("CARGO"))
        .args(["fmt", "--all", "--check", "--manifest-path"])
        .arg(repository().join("providers").join("Cargo.toml"))
        .output()
        .expect("cargo fmt runs");
    assert!(
        output.status.success(),
        "run `cargo fmt --all --manifest-path providers/Cargo.toml`:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// The SDK's and the plugins' own unit tests run natively (the SDK's host functions
/// work on the machine there), in the guest workspace.
#[test]
fn guest_unit_tests_pass() {
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest-native");
    let output = Command::new(env!("CARGO"))
        .args(["test", "--workspace", "--manifest-path"])
        .arg(repository().join("providers").join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo test runs");
    assert!(
        output.status.success(),
        "the guest workspace's tests failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_policy_reference_shows_the_builtin_policy_as_it_is() {
    let root = repository();
    let source = std::fs::read_to_string(root.join("host/policy/src/policy.rs"))
        .expect("host/policy/src/policy.rs");
    let start = "pub const DEFAULT_POLICY: &str = r#\"";
    let from = source.find(start).expect("DEFAULT_POLICY") + start.len();
    let policy = &source[from..from + source[from..].find("\"#;").expect("end of DEFAULT_POLICY")];
    let reference = std::fs::read_to_string(root.join("docs/policy.md")).expect("docs/policy.md");
    assert!(
        reference.contains(&format!("```toml\n{policy}```")),
        "docs/policy.md's built-in policy differs from DEFAULT_POLICY in host/policy/src/policy.rs"
    );
}

#[test]
fn the_readme_is_for_a_newcomer() {
    let readme = std::fs::read_to_string(repository().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; it is for a newcomer (at most 250): reference goes to docs/"
    );
}
