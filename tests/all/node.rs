//! Node attributes, lazy values and `node_block` (Facebook's Chef model, "Compile Time vs
//! Run Time, and APIs"): set at compile time, read at run time, and the stale read reported.

use crate::support::{Machine, entry, first_error};
use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

#[test]
fn attributes_merge_override_over_default_and_the_last_writer_wins() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let manifest = machine.manifest(
        "site.wcv",
        r#"
$node.override['fb_swap']['enabled'] = true
$node.default['fb_swap']['enabled'] = false
$node.default['fb_swap']['size'] = 1024
$node.default['fb_swap']['size'] = 2048
$node.default['fb_timers']['jobs']['backup']['command'] = '/usr/bin/backup'
file { '@FILES@/swap':
  content => "${node['fb_swap']['enabled']} ${node['fb_swap']['size']} [${node['no']['such']['key']}] ${node['fb_timers']['jobs']['backup']['command']}\n",
}
"#,
    );
    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert_eq!(
        read(&machine.file("swap")),
        "true 2048 [] /usr/bin/backup\n"
    );
    // Nothing was read before a write changed it: no warning.
    assert!(!run.stderr.contains("warning"), "{run:#?}");
}

#[test]
fn fb_awesomesoft_a_plain_read_sees_1_a_lazy_read_sees_42_and_the_warning_names_both() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let manifest = machine.manifest(
        "site.wcv",
        r#"$node.default['fb_awesomesoft']['version'] = 1
file { '@FILES@/plain': content => "${node['fb_awesomesoft']['version']}\n" }
file { '@FILES@/lazy': content => lazy { "${node['fb_awesomesoft']['version']}\n" } }
$node.default['fb_awesomesoft']['version'] = 42
"#,
    );
    let manifest_path = manifest.to_str().expect("utf-8");
    let validate = machine.run(&[
        "validate",
        manifest_path,
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert_eq!(validate.code, 0, "a warning is no error: {validate:#?}");
    for expected in [
        "warning[wcv::stale-node-read]: `$node['fb_awesomesoft']['version']` is read at compile \
         time, when it is `1`; a later write makes it `42`",
        "site.wcv:2:",
        "read here, before the write",
        "site.wcv:4:1",
        "written here, after the read",
        "`lazy { $node['fb_awesomesoft']['version'] }`",
    ] {
        assert!(
            validate.stderr.contains(expected),
            "{expected}\n{validate:#?}"
        );
    }

    // `--deny-warnings`: an error, and nothing changes.
    let denied = machine.apply(&manifest, &policy, &["--deny-warnings"]);
    assert_eq!(denied.code, 1, "{denied:#?}");
    assert!(
        denied
            .stderr
            .contains("1 warning and `--deny-warnings`: nothing was compiled or changed"),
        "{denied:#?}"
    );
    assert!(!Path::new(&machine.file("plain")).exists());

    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr.contains("stale-node-read"),
        "apply prints it too: {run:#?}"
    );
    assert_eq!(read(&machine.file("plain")), "1\n");
    assert_eq!(read(&machine.file("lazy")), "42\n");
}

#[test]
fn the_harmful_refactoring_of_a_gate_into_a_compile_time_if_is_reported() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let manifest = machine.manifest(
        "site.wcv",
        r#"$node.default['fb_awesomesoft']['enabled'] = false
# BAD: decided at compile time, before the override below.
if $node['fb_awesomesoft']['enabled'] {
  file { '@FILES@/refactored': content => "x\n" }
}
# Right: a gate read during the run.
file { '@FILES@/gated':
  content => "x\n",
  only_if => lazy { $node['fb_awesomesoft']['enabled'] },
}
$node.override['fb_awesomesoft']['enabled'] = true
"#,
    );
    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr.contains(
            "`$node['fb_awesomesoft']['enabled']` is read at compile time, when it is `false`; \
             a later write makes it `true`"
        ),
        "{run:#?}"
    );
    assert!(run.stderr.contains("site.wcv:3:4"), "{run:#?}");
    assert!(run.stderr.contains("site.wcv:11:1"), "{run:#?}");
    assert!(!Path::new(&machine.file("refactored")).exists());
    assert!(Path::new(&machine.file("gated")).exists());
}

#[test]
fn a_lazy_value_compiled_into_a_catalog_is_resolved_when_the_catalog_is_applied() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let manifest = machine.manifest(
        "site.wcv",
        r#"$greeting = 'hello'
file { '@FILES@/motd':
  content => lazy { "${greeting} from ${node['site']['name']}\n" },
  mode    => lazy { $node['site']['mode'] },
}
$node.default['site'] = { 'name' => 'paris', 'mode' => '0600' }
$node.override['site']['name'] = 'tokyo'
"#,
    );
    let compiled = machine.compile(&manifest, &policy);
    assert_eq!(compiled.code, 0, "{compiled:#?}");
    let catalog: serde_json::Value = serde_json::from_str(&compiled.stdout).expect("JSON");
    assert_eq!(
        catalog["node_attributes"]["override"]["site"]["name"], "tokyo",
        "{catalog:#}"
    );
    let content = &catalog["resources"][0]["attributes"]["content"]["__lazy"];
    assert_eq!(content["variables"]["greeting"], "hello", "{catalog:#}");
    // Applied later, from the JSON alone (the manifest is gone).
    std::fs::remove_file(&manifest).expect("manifest removed");
    let path = machine.root().join("catalog.json");
    std::fs::write(&path, &compiled.stdout).expect("catalog written");
    let report = machine.apply_json(&path, &policy, &[], 2);
    let motd = machine.file("motd");
    assert_eq!(read(&motd), "hello from tokyo\n", "{report:#}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&motd).expect("motd").permissions().mode() & 0o777,
        0o600
    );
    // Idempotent, lazy values and all.
    machine.apply_json(&path, &policy, &[], 0);
}

#[test]
fn a_node_block_writes_attributes_that_a_later_resource_reads_lazily() {
    let machine = Machine::new();
    let policy = machine.policy("");
    // Facebook's compound API example: fill a hash for each job at run time, before
    // the resource that implements it.
    let manifest = machine.manifest(
        "site.wcv",
        r#"$node.default['fb_timers']['jobs']['backup'] = { 'command' => '/usr/bin/backup' }
$node.default['fb_timers']['jobs']['rotate'] = { 'command' => '/usr/sbin/logrotate' }

node_block { 'set fb_timer XAR environments':
  block => lazy {
    $node['fb_timers']['jobs'].each |$name, $job| {
      $node.default['fb_timers']['jobs'][$name]['service_options']['Environment=XAR_MOUNT_SEED'] = $name
    }
  },
}
file { '@FILES@/timers':
  content => lazy {
    $node['fb_timers']['jobs'].map |$name, $job| {
      "${name} ${job['command']} ${job['service_options']['Environment=XAR_MOUNT_SEED']}\n"
    }.join('')
  },
}
# A job added at compile time after the block is declared is still seen by it.
$node.default['fb_timers']['jobs']['scrub'] = { 'command' => '/usr/bin/scrub' }
"#,
    );
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(
        read(&machine.file("timers")),
        "backup /usr/bin/backup backup\nrotate /usr/sbin/logrotate rotate\nscrub /usr/bin/scrub scrub\n",
        "{report:#}"
    );
    let block = entry(&report, "Node_block[set fb_timer XAR environments]");
    assert_eq!(
        block["status"], "unchanged",
        "it changes nothing on the machine"
    );
    assert_eq!(block["provider"], "wconverge");
    assert_eq!(
        block["logs"][0]["message"],
        "set $node.default['fb_timers']['jobs']['backup']['service_options']['Environment=XAR_MOUNT_SEED'] = 'backup'",
        "{report:#}"
    );
    // In a noop run the block runs too (it is in memory), so the plan is the same.
    let timers = format!("File[{}]", machine.file("timers"));
    let applied = entry(&report, &timers)["changes"][0]["message"].clone();
    std::fs::remove_file(machine.file("timers")).expect("removed");
    let noop = machine.apply_json(&manifest, &policy, &["--noop"], 2);
    assert_eq!(
        entry(&noop, &timers)["changes"][0]["message"],
        applied,
        "{noop:#}"
    );
}

#[test]
fn writing_node_attributes_during_the_run_outside_a_node_block_is_an_error() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let manifest = machine.manifest(
        "site.wcv",
        "file { '@FILES@/x':\n  content => lazy { $node.default['a'] = 'b' },\n}\n",
    );
    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(
            "only the `block` of a `node_block` may write node attributes during the run"
        ),
        "{run:#?}"
    );
    assert!(run.stderr.contains("site.wcv:2:21"), "{run:#?}");
    // A catalog from elsewhere that tries it anyway fails that resource during the run.
    let catalog = machine.catalog(serde_json::json!([
        { "type": "file", "title": machine.file("y"),
          "attributes": { "content": { "__lazy": {
              "expression": "$node.default['a'] = 'b'", "file": "elsewhere.wcv", "line": 7 } } } },
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 4);
    assert!(
        first_error(&report).contains(
            "node attributes are written at compile time, or during the run only in the \
             `block` of a `node_block`"
        ),
        "{report:#}"
    );
    assert!(!Path::new(&machine.file("y")).exists());
}

#[test]
fn a_lazy_value_is_checked_against_the_schema_when_it_is_resolved() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let manifest = machine.manifest(
        "site.wcv",
        r#"$node.default['app']['mode'] = 644
file { '@FILES@/bad': content => "x\n", mode => lazy { $node['app']['mode'] } }
file { '@FILES@/after': content => "x\n", require => File['@FILES@/bad'] }
file { '@FILES@/secret':
  content => lazy { Sensitive("token ${node['app']['mode']}\n") },
}
"#,
    );
    let report = machine.apply_json(&manifest, &policy, &[], 6);
    let bad = entry(&report, &format!("File[{}]", machine.file("bad")));
    assert_eq!(bad["status"], "failed", "{report:#}");
    let error = bad["error"].as_str().expect("error");
    assert!(
        error.starts_with("attribute `mode`: its lazy value (")
            && error.contains("site.wcv:2:")
            && error.ends_with("expects String, got Integer (the value is 644)"),
        "{error}"
    );
    let after = entry(&report, &format!("File[{}]", machine.file("after")));
    assert_eq!(after["status"], "skipped_failed_dependency", "{report:#}");
    // A sensitive lazy value is redacted like any other.
    assert_eq!(read(&machine.file("secret")), "token 644\n");
    assert!(!report.to_string().contains("token 644"), "{report:#}");
}

#[test]
fn a_template_renders_during_the_run_with_attributes_set_after_its_declaration() {
    let machine = Machine::new();
    let policy = machine.policy("");
    std::fs::write(
        machine.file("app.conf.j2"),
        "# {{ site }}\nversion = {{ node.fb_awesomesoft.version }}\n\
         {% for name, job in node.fb_timers.jobs | items %}job {{ name }} = {{ job.command }}\n{% endfor %}\
         password = {{ password }}\n",
    )
    .expect("template written");
    let manifest = machine.manifest(
        "site.wcv",
        r#"
template { '@FILES@/app.conf':
  source    => '@FILES@/app.conf.j2',
  variables => { 'site' => 'paris', 'password' => Sensitive('hunter2') },
  mode      => '0640',
  backup    => '.bak',
}
$node.default['fb_awesomesoft']['version'] = 42
$node.default['fb_timers']['jobs']['backup'] = { 'command' => '/usr/bin/backup' }
"#,
    );
    let conf = machine.file("app.conf");
    // Noop: nothing written, the change reported (sensitive: no digest, no diff).
    let noop = machine.apply_json(&manifest, &policy, &["--noop"], 2);
    assert!(!Path::new(&conf).exists());
    let change = &entry(&noop, &format!("Template[{conf}]"))["changes"][0]["message"];
    assert_eq!(
        change, "created with sensitive content, mode 0640",
        "{noop:#}"
    );
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(
        read(&conf),
        "# paris\nversion = 42\njob backup = /usr/bin/backup\npassword = hunter2\n",
        "{report:#}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&conf).expect("conf").permissions().mode() & 0o777,
        0o640
    );
    assert!(!report.to_string().contains("hunter2"), "{report:#}");
    machine.apply_json(&manifest, &policy, &[], 0);

    // Without secrets, a changed attribute shows as a diff in noop, but only of a file
    // anyone may read: this one is 0640 and held the secret, so no diff yet.
    let plain = |version: u32| {
        machine.manifest(
            "plain.wcv",
            &format!(
                r#"template {{ '@FILES@/app.conf':
  source    => '@FILES@/app.conf.j2',
  variables => {{ 'site' => 'paris', 'password' => 'public' }},
  mode      => '0644',
  backup    => '.bak',
}}
$node.default['fb_awesomesoft']['version'] = {version}
$node.default['fb_timers']['jobs'] = {{}}
"#
            ),
        )
    };
    let noop = machine.apply(&plain(43), &policy, &["--noop"]);
    assert_eq!(noop.code, 2, "{noop:#?}");
    assert!(!noop.stdout.contains("hunter2"), "{noop:#?}");
    assert!(!noop.stdout.contains("+version"), "{noop:#?}");
    machine.apply_json(&plain(43), &policy, &[], 2);
    assert_eq!(read(&conf), "# paris\nversion = 43\npassword = public\n");
    assert!(read(&format!("{conf}.bak")).contains("version = 42"));
    // Now world-readable: the next change has a diff, as data (WIT `change.diff`).
    let noop = machine.apply(&plain(44), &policy, &["--noop", "--show-diff"]);
    assert_eq!(noop.code, 2, "{noop:#?}");
    // Indented under its resource's line, as every message of several lines is.
    let diff = format!(
        "\n    --- {conf}\n    +++ {conf}\n    @@ -1,3 +1,3 @@\n     # paris\n    -version = 43\n    \
         +version = 44\n     password = public"
    );
    assert!(noop.stdout.contains(&diff), "{diff}\n{noop:#?}");
    // Without `--show-diff`, the message alone; the JSON report has the diff as data.
    let quiet = machine.apply(&plain(44), &policy, &["--noop"]);
    assert!(!quiet.stdout.contains("+version = 44"), "{quiet:#?}");
    let report = machine.apply_json(&plain(44), &policy, &["--noop"], 2);
    let change = &crate::support::entry(&report, &format!("Template[{conf}]"))["changes"][0];
    let unified = change["diff"]["unified"].as_str().expect("a unified diff");
    assert!(
        unified.contains("-version = 43\n+version = 44"),
        "{change:#}"
    );
    assert!(
        !change["message"].as_str().expect("message").contains("@@"),
        "{change:#}"
    );
}

#[test]
fn a_template_error_names_the_template_line_and_changes_nothing() {
    let machine = Machine::new();
    let policy = machine.policy("");
    std::fs::write(machine.file("bad.j2"), "ok\nport = {{ node.app.prot }}\n").expect("written");
    let manifest = machine.manifest(
        "site.wcv",
        "$node.default['app']['port'] = 8080\n\
         template { '@FILES@/bad.conf': source => '@FILES@/bad.j2' }\n",
    );
    let report = machine.apply_json(&manifest, &policy, &[], 4);
    let error = first_error(&report);
    assert!(
        error.contains("bad.j2`, line 2: undefined value"),
        "{report:#}"
    );
    assert!(!Path::new(&machine.file("bad.conf")).exists());
    // A source outside what the policy grants is refused.
    let outside = machine.manifest(
        "outside.wcv",
        "template { '@FILES@/x.conf': source => '/etc/hostname' }\n",
    );
    let report = machine.apply_json(&outside, &policy, &[], 4);
    assert!(first_error(&report).contains("denied"), "{report:#}");
}

#[test]
fn review_cases_node_block_guards_lazy_sources_run_time_facts_and_one_path_twice() {
    let machine = Machine::new();
    let policy = machine.policy("");
    std::fs::write(machine.file("motd.j2"), "hello from {{ node.site }}\n").expect("written");
    let manifest = machine.manifest(
        "site.wcv",
        r#"
$node.default['src'] = '@FILES@/motd.j2'
node_block { 'skipped':
  block   => lazy { $node.default['site'] = 'nowhere' },
  only_if => lazy { false },
}
node_block { 'site':
  block   => lazy { $node.default['site'] = 'paris' },
  not_if  => 'false',
}
template { '@FILES@/motd': source => lazy { $node['src'] } }
file { '@FILES@/family': content => lazy { "${facts['os']['family']}\n" } }
"#,
    );
    let compiled = machine.compile(&manifest, &policy);
    assert_eq!(compiled.code, 0, "{compiled:#?}");
    // `$facts` is read where the catalog is applied: it is not captured.
    assert!(
        !compiled.stdout.contains("\"facts\""),
        "{}",
        compiled.stdout
    );
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert_eq!(
        entry(&report, "Node_block[skipped]")["status"],
        "skipped_by_guard",
        "{report:#}"
    );
    assert_eq!(
        read(&machine.file("motd")),
        "hello from paris\n",
        "{report:#}"
    );
    let facts = machine.run(&[
        "facts",
        "--raw",
        "--format",
        "json",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let facts: serde_json::Value = serde_json::from_str(&facts.stdout).expect("facts");
    // Facter's spelling of the family the `os` record names (`debian` is `Debian`).
    let family = facts["os"][0]["family"].as_str().expect("family");
    let written = read(&machine.file("family"));
    assert!(
        written.trim().eq_ignore_ascii_case(family) && written.starts_with(char::is_uppercase),
        "{written:?} for {family}"
    );

    // A file and a template at one path would undo each other.
    let twice = machine.manifest(
        "twice.wcv",
        "file { '@FILES@/x': content => 'a' }\ntemplate { '@FILES@/x': source => '@FILES@/motd.j2' }\n",
    );
    let run = machine.run(&[
        "validate",
        twice.to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(run.stderr.contains("manages the same path"), "{run:#?}");
}
