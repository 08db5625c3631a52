//! Resource programs through the binary: `wconverge requirement` over facts given as JSON
//! (PlainBox's examples, exit codes 0, 1 and 2, diagnostics) and over this machine's
//! facts; `wconverge facts`; the `requires` metaparameter in a manifest.

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

/// This machine's `os` record, as `wconverge facts` gathers it.
fn os_record(machine: &Machine, policy: &str) -> serde_json::Value {
    let run = machine.run(&["facts", "--raw", "--format", "json", "--policy", policy]);
    assert_eq!(run.code, 0, "{run:#?}");
    let facts = run.json();
    facts["os"][0].clone()
}

#[test]
fn facts_are_gathered_by_plugins_and_programs_read_them() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let policy = policy.to_str().expect("utf-8");
    let os = os_record(&machine, policy);
    let architecture = rustix_free_uname_m();
    assert_eq!(os["architecture"], architecture.as_str(), "{os:#}");
    assert!(
        !os["name"].as_str().unwrap_or_default().is_empty(),
        "{os:#}"
    );
    let run = machine.run(&[
        "requirement",
        &format!("os.architecture == '{architecture}'"),
        "--policy",
        policy,
    ]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "true\n"), "{run:#?}");
}

/// `uname -m`, from the program itself.
fn rustix_free_uname_m() -> String {
    let output = std::process::Command::new("uname")
        .arg("-m")
        .output()
        .expect("uname runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn requires_skips_a_resource_and_its_dependents_when_it_does_not_hold() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let os = os_record(&machine, policy.to_str().expect("utf-8"));
    let name = os["name"].as_str().expect("os name");
    let manifest = machine.manifest(
        "site.wcv",
        &format!(
            r#"
file {{ '@FILES@/here':
  content  => "here\n",
  requires => "os.name == '{name}'",
}}
file {{ '@FILES@/elsewhere':
  content  => "elsewhere\n",
  requires => "os.name == '{name}'\nos.name == 'no-such-os'",
}}
file {{ '@FILES@/after':
  content => "after\n",
  require => File['@FILES@/elsewhere'],
}}
"#
        ),
    );
    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(std::path::Path::new(&machine.file("here")).exists());
    assert!(!std::path::Path::new(&machine.file("elsewhere")).exists());
    assert!(!std::path::Path::new(&machine.file("after")).exists());
    let elsewhere = machine.file("elsewhere");
    assert!(
        run.stdout.contains(&format!(
            "File[{elsewhere}]: requirement not met: line 2 does not hold: `os.name == 'no-such-os'`"
        )),
        "{run:#?}"
    );
    assert!(
        run.stdout.contains(&format!(
            "File[{}]: skipped: the requirement of File[{elsewhere}] is not met",
            machine.file("after")
        )),
        "{run:#?}"
    );
    let invalid = machine.manifest(
        "invalid.wcv",
        "file { '@FILES@/x': content => 'x', requires => 'os.family == 1 and package.name' }\n",
    );
    let run = machine.apply(&invalid, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(
            "`requires` line 1, column 1: the expression uses 2 group variables (os, package)"
        ),
        "{run:#?}"
    );
}

#[test]
fn manifests_read_facter_s_facts_and_the_other_groups_as_record_lists() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.pp",
        r#"
$system = $facts['os']
$bash = $facts['package'].filter |$p| { $p['name'] == 'bash' }
file { '@FILES@/arch':
  content => "${system['hardware']} ${::hardwaremodel} ${facts['kernel']} ${bash[0]['name']}\n",
}
file { '@FILES@/host':
  content => "${networking['hostname']} ${trusted['certname']} ${identity['uid']} ${processors['count'] > 0}\n",
}
"#,
    );
    // The built-in policy, as on a stock machine: no fact plugin warns of a refused read.
    let run = machine.run(&[
        "apply",
        manifest.to_str().expect("utf-8"),
        "--node",
        "web1.example.com",
    ]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        !run.stderr.contains("refus") && !run.stderr.contains("warning"),
        "no refused read: {run:#?}"
    );
    let arch = rustix_free_uname_m();
    assert_eq!(
        std::fs::read_to_string(machine.file("arch")).expect("written"),
        format!("{arch} {arch} Linux bash\n")
    );
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let short = hostname
        .trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        std::fs::read_to_string(machine.file("host")).expect("written"),
        format!("{short} web1.example.com 0 true\n")
    );
}

#[test]
fn a_failing_fact_plugin_stops_only_what_needs_its_facts() {
    let machine = Machine::new();
    // No directory: /proc/mounts cannot be read.
    let policy = machine.policy("[plugins.facts-mount]\nsource = \"builtin\"\nprovides = []\n");
    let policy = policy.to_str().expect("utf-8");
    let plain = machine.manifest("plain.wcv", "notify { 'hello': }\n");
    let run = machine.run(&["apply", plain.to_str().expect("utf-8"), "--policy", policy]);
    assert_eq!(run.code, 2, "{run:#?}");
    let facts = machine.run(&["facts", "--raw", "--policy", policy]);
    assert_eq!(facts.code, 1, "{facts:#?}");
    assert!(facts.stdout.contains("os (1 record)"), "{facts:#?}");
    assert!(
        facts.stderr.contains("cannot read /proc/mounts"),
        "{facts:#?}"
    );
    let requirement = machine.run(&["requirement", "os.family != ''", "--policy", policy]);
    assert_eq!(requirement.code, 2, "{requirement:#?}");
    assert!(
        requirement
            .stderr
            .contains("the facts are incomplete; the program was not evaluated"),
        "{requirement:#?}"
    );
    let typo = machine.run(&["requirement", "os.family != ''", "--fact", "x.json"]);
    assert_eq!(
        typo.code, 2,
        "usage errors of requirement are 2, not false: {typo:#?}"
    );
}

#[test]
fn a_third_party_fact_plugin_is_pinned_and_its_group_is_readable() {
    let machine = Machine::new();
    let plugin = wconverge_tests::FACTS_CUSTOM;
    let policy = machine.policy(&format!(
        "[plugins.site]\nsource = \"{plugin}\"\nsha256 = \"{}\"\nprovides = []\n",
        crate::support::sha256_of(plugin)
    ));
    let policy = policy.to_str().expect("utf-8");
    let run = machine.run(&[
        "requirement",
        "site.name == 'paris'\nint(site.rack) > 10",
        "--policy",
        policy,
    ]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "true\n"), "{run:#?}");
    let wrong = machine.policy(&format!(
        "[plugins.site]\nsource = \"{plugin}\"\nsha256 = \"{}\"\nprovides = []\n",
        "0".repeat(64)
    ));
    let run = machine.run(&["facts", "--policy", wrong.to_str().expect("utf-8")]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(run.stderr.contains("digest mismatch"), "{run:#?}");
}

/// Each built-in fact plugin, through the binary with the built-in policy, gathers its
/// groups from this machine: each named with what any Debian machine has.
#[test]
fn each_builtin_fact_plugin_gathers_its_groups_from_this_machine() {
    let machine = Machine::new();
    let run = machine.run(&["facts", "--raw", "--format", "json"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let facts = run.json();
    let records = |group: &str| facts[group].as_array().cloned().unwrap_or_default();
    let has = |group: &str, field: &str, value: &str| {
        records(group)
            .iter()
            .any(|record| record[field].as_str() == Some(value))
    };
    let gathered: [(&str, bool); 5] = [
        ("facts-os", has("os", "family", "debian")),
        ("facts-package", has("package", "name", "dpkg")),
        (
            "facts-users",
            has("user", "name", "root") && has("group", "name", "root"),
        ),
        ("facts-mount", has("mount", "path", "/")),
        (
            "facts-system",
            !records("virtual").is_empty()
                && records("processors")
                    .first()
                    .and_then(|record| record["count"].as_str())
                    .is_some_and(|count| count.parse::<u32>().is_ok_and(|n| n > 0)),
        ),
    ];
    for (plugin, found) in gathered {
        assert!(found, "{plugin} gathered nothing expected: {facts:#}");
    }
}
