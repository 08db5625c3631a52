//! `wconverge requirement` through the binary: the seed's examples over facts given as
//! JSON, exit codes 0, 1 and 2, and diagnostics.

use crate::support::Machine;

fn facts(machine: &Machine, json: &str) -> String {
    let path = machine.root().join("facts.json");
    std::fs::write(&path, json).expect("facts written");
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn requirement_prints_true_or_false_and_exits_0_or_1() {
    let machine = Machine::new();
    let facts = facts(
        &machine,
        r#"{
  "package": [{"name": "xorg", "version": "1.21"}, {"name": "procps", "version": "4.0"}],
  "device": [{"category": "CDROM"}],
  "optical_drive": [{"cd": "writable"}]
}"#,
    );
    for (program, code, stdout) in [
        (
            "package.name == 'xorg'\npackage.name == 'procps'",
            0,
            "true\n",
        ),
        (
            "package.name == 'xorg' and package.name == 'procps'",
            1,
            "false\n",
        ),
        (
            "device.category == 'CDROM'\noptical_drive.cd == 'writable'",
            0,
            "true\n",
        ),
        ("all(package.name != 'ubuntu-desktop')", 0, "true\n"),
        ("int(package.version.split) > 1", 2, ""),
        ("float(package.version) > 4", 1, "false\n"),
        ("float(package.version) >= 4", 0, "true\n"),
        ("mount.path == '/'", 1, "false\n"),
    ] {
        let run = machine.run(&["requirement", program, "--facts", &facts]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (code, stdout),
            "{program}: {run:#?}"
        );
    }
    let run = machine.run(&[
        "requirement",
        "package.name == 'xorg'\npackage.name == 'wayland'",
        "--facts",
        &facts,
    ]);
    assert_eq!(
        run.stderr,
        "line 2 does not hold: `package.name == 'wayland'`\n"
    );
}

#[test]
fn an_invalid_program_or_bad_facts_exit_2_with_a_diagnostic() {
    let machine = Machine::new();
    let good = facts(&machine, r#"{"package": [{"name": "fwts"}]}"#);
    let run = machine.run(&["requirement", "True", "--facts", &good]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert_eq!(
        run.stderr,
        "error: line 1, column 1: the expression uses no group variable\n  | True\n  | ^\n  = \
         help: each line reads one group, like `package.name == 'fwts'`; to always apply, leave \
         the requirement out\nerror: the resource program is invalid (1 error); nothing was \
         evaluated\n"
    );
    let bad = facts(&machine, r#"{"package": [{"name": "fwts", "size": 12}]}"#);
    let run = machine.run(&["requirement", "package.name == 'fwts'", "--facts", &bad]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr.contains(
            "`package` record 0: `size` must be a string (every fact is a string; write \"12\")"
        ),
        "{run:#?}"
    );
}
