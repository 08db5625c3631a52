//! What users read, as golden files in `tests/golden/`: the human report of an
//! apply, `validate`'s problem list, `plugins audit` and `types`. Each file holds a
//! command's exit code, stdout and stderr, with what differs between machines and runs
//! replaced by a placeholder (the temporary directory, digests, durations).
//! `WCONVERGE_BLESS=1` rewrites the files; review the diff before committing it.

use crate::support::{Machine, Run, cache_dir, test_plugins_policy};
use serde_json::json;
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

/// `text` with this machine's and this run's particulars replaced by placeholders.
fn normalized(machine: &Machine, text: &str) -> String {
    let mut text = text.to_owned();
    let root = machine.root();
    let mut roots = vec![root.display().to_string()];
    if let Ok(canonical) = std::fs::canonicalize(root) {
        roots.push(canonical.display().to_string());
    }
    // Longest first, so no placeholder is left half-replaced.
    roots.sort_by_key(|root| std::cmp::Reverse(root.len()));
    for root in roots {
        text = text.replace(&root, "<ROOT>");
    }
    text = text.replace(&cache_dir().display().to_string(), "<CACHE>");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(|c: char| c.is_ascii_hexdigit()) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let run = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        let preceded_by_word = out.ends_with(|c: char| c.is_ascii_alphanumeric());
        if run == 64 && !preceded_by_word {
            out.push_str("<SHA256>");
        } else {
            out.push_str(&rest[..run]);
        }
        rest = &rest[run..];
    }
    out.push_str(rest);
    // Durations: `applied in 0.01 s:`, `noop run in 0.00 s:`.
    let mut lines: Vec<String> = Vec::new();
    for line in out.lines() {
        let duration = line.find(" in ").and_then(|start| {
            let number = &line[start + 4..];
            let digits = number.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
            (digits > 0 && number[digits..].starts_with(" s:")).then_some((start, digits))
        });
        lines.push(match duration {
            Some((start, digits)) => {
                format!("{} in <T>{}", &line[..start], &line[start + 4 + digits..])
            }
            None => line.to_owned(),
        });
    }
    lines.join("\n")
}

/// Compares `run` (normalized) with `tests/golden/NAME.txt`, or writes it there with
/// `WCONVERGE_BLESS=1`.
fn golden(machine: &Machine, name: &str, run: &Run) {
    let actual = format!(
        "exit code: {}\n--- stdout\n{}\n--- stderr\n{}\n",
        run.code,
        normalized(machine, &run.stdout),
        normalized(machine, &run.stderr)
    );
    let path = golden_dir().join(format!("{name}.txt"));
    // `=1` only: `WCONVERGE_BLESS=0` (or an empty value) checks, as it reads.
    if std::env::var_os("WCONVERGE_BLESS").is_some_and(|value| value == "1") {
        std::fs::create_dir_all(golden_dir()).expect("tests/golden");
        std::fs::write(&path, &actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing; run with WCONVERGE_BLESS=1 to create it",
            path.display()
        )
    });
    assert!(
        actual == expected,
        "{name}: the output differs from {} (WCONVERGE_BLESS=1 rewrites it; review the \
         diff):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8")
}

#[test]
fn the_human_report_of_an_apply() {
    let machine = Machine::new();
    let policy = machine.policy(&test_plugins_policy(&machine, ""));
    let kept = machine.file("kept");
    std::fs::write(&kept, "as it is\n").expect("kept");
    let changed = machine.file("changed");
    std::fs::write(&changed, "old line\nsame line\n").expect("changed");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": kept, "attributes": { "content": "as it is\n" } },
        { "type": "file", "title": changed,
          "attributes": { "content": "new line\nsame line\n" } },
        { "type": "file", "title": machine.file("created"),
          "attributes": { "content": "created\n", "mode": "0640" } },
        { "type": "hostile", "title": machine.file("fails"),
          "attributes": { "action": "write_file", "target": "/etc/not-granted" } },
        { "type": "notify", "title": "after the failure",
          "attributes": { "message": "never said" },
          "metaparams": { "require": [format!("Hostile[{}]", machine.file("fails"))] } },
        { "type": "notify", "title": "hello", "attributes": { "message": "hello, operator" } },
    ]));
    for (name, extra) in [
        ("apply-human", &["--jobs", "1"][..]),
        (
            "apply-human-show-diff",
            &["--jobs", "1", "--noop", "--show-diff"][..],
        ),
    ] {
        if name == "apply-human-show-diff" {
            std::fs::write(&changed, "old line\nsame line\n").expect("changed back");
        }
        let run = machine.apply(&catalog, &policy, extra);
        golden(&machine, name, &run);
    }
}

#[test]
fn the_problems_validate_lists() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": machine.file("mode"), "attributes": { "mode": "0999" } },
        { "type": "file", "title": machine.file("unknown"), "attributes": { "colour": "red" } },
        { "type": "nosuchtype", "title": "x", "attributes": {} },
        { "type": "file", "title": "relative/path", "attributes": {} },
        { "type": "notify", "title": "waits", "attributes": {},
          "metaparams": { "require": ["Notify[missing]"] } },
    ]));
    let run = machine.run(&["validate", text(&catalog), "--policy", text(&policy)]);
    golden(&machine, "validate-problems", &run);
}

/// The same problems found in a manifest: each shown as the manifests' diagnostics are,
/// with the line it lies on.
#[test]
fn the_problems_validate_lists_with_their_lines() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let manifest = machine.manifest(
        "site.wcv",
        "file { 'motd':\n  path => '@FILES@/motd',\n  mode => '0999',\n}\n\nfile { 'relative/path': }\n",
    );
    let run = machine.run(&["validate", text(&manifest), "--policy", text(&policy)]);
    golden(&machine, "validate-problems-manifest", &run);
}

#[test]
fn plugins_audit() {
    let machine = Machine::new();
    // The built-in plugins only: the test plugins' paths are those of the build.
    let policy = machine.policy("");
    let run = machine.run(&["plugins", "audit", "--policy", text(&policy)]);
    golden(&machine, "plugins-audit", &run);
}

#[test]
fn types_and_one_type() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let run = machine.run(&["types", "--policy", text(&policy)]);
    golden(&machine, "types", &run);
    let run = machine.run(&["types", "file", "--policy", text(&policy)]);
    golden(&machine, "types-file", &run);
}

/// A policy or a JSON catalog that cannot be used as a whole is a diagnostic too: a
/// code, the place (with the policy's line), and what happened; nothing is done.
#[test]
fn a_policy_or_a_catalog_that_cannot_be_used() {
    let machine = Machine::new();
    let empty = machine.catalog(json!([]));
    let write = |name: &str, text: &str| {
        let path = machine.root().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let misspelt = write(
        "misspelt.toml",
        "[plugins.file]\nsource = \"builtin\"\ndirectories = [{ path = \"/srv\", acess = \"read\" }]\n",
    );
    let refused = write(
        "refused.toml",
        "# Files of the application.\n[plugins.file]\nsource = \"builtin\"\ndirectories = [{ path = \"srv\", access = \"read\" }]\n",
    );
    let not_json = write(
        "not-json.json",
        "{\"format_version\": 1, \"resources\": [ {\"type\": 3} ]}",
    );
    let invalid = write(
        "invalid.json",
        "{\"format_version\": 1, \"resources\": [ {\"type\": \"file\", \"title\": \"\"} ]}",
    );
    for (name, args) in [
        (
            "policy-syntax",
            vec!["apply", text(&empty), "--policy", text(&misspelt)],
        ),
        (
            "policy-entry",
            vec!["apply", text(&empty), "--policy", text(&refused)],
        ),
        ("catalog-syntax", vec!["apply", text(&not_json)]),
        ("catalog-invalid", vec!["validate", text(&invalid)]),
    ] {
        let run = machine.run(&args);
        golden(&machine, name, &run);
    }
}
