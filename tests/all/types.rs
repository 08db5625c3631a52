//! Types as data: a provider's checks and invariants, written in the manifest
//! language and evaluated by the host; every problem of a catalog reported at once;
//! `wconverge types` for declared and provided types.

use crate::deployment::{file_line_policy, plugin_dir, text};
use crate::support::{Machine, sha256_of};
use std::path::Path;

/// The third-party `file_line` provider, pinned, with `files/` granted, as a policy that
/// also has the built-in plugins.
fn file_line_machine() -> (Machine, std::path::PathBuf, std::path::PathBuf) {
    let machine = Machine::new();
    let dir = plugin_dir(&machine);
    let pinned = file_line_policy(
        &machine,
        &format!("sha256 = \"{}\"\n", sha256_of(wconverge_tests::FILE_LINE)),
    );
    let third_party = std::fs::read_to_string(&pinned).expect("policy");
    let policy = machine.policy(&third_party);
    (machine, policy, dir)
}

#[test]
fn a_catalog_with_several_errors_reports_every_one_and_changes_nothing() {
    let (machine, policy, dir) = file_line_machine();
    std::fs::write(machine.file("sshd_config"), "Port 22\n").expect("file");
    let manifest = machine.manifest(
        "site.wcv",
        r#"file { '@FILES@/motd': ensure => fil }
file { '@FILES@/issue': content => "hi\n", mode => 644 }
file_line { 'two lines': path => '@FILES@/sshd_config', line => "a\nb" }
file_line { 'relative': path => 'sshd_config', line => 'PermitRootLogin no' }
file_line { 'many': path => '@FILES@/sshd_config', line => 'X11Forwarding no', multiple => true }
file_line { 'fine': path => '@FILES@/sshd_config', line => 'UseDNS no' }
"#,
    );
    let run = machine.run(&[
        "apply",
        text(&manifest),
        "--policy",
        text(&policy),
        "--plugin-dir",
        text(&dir),
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    let site = manifest.display().to_string();
    // Each with its code (docs/diagnostics.md): the schema's types and checks, the
    // declared type's invariant.
    for (at, code, resource, message) in [
        (
            "1:8",
            "attribute-value",
            "File[@FILES@/motd]",
            "attribute `ensure` expects Enum[",
        ),
        (
            "2:8",
            "attribute-value",
            "File[@FILES@/issue]",
            "attribute `mode` expects String, got Integer",
        ),
        (
            "3:13",
            "attribute-value",
            "File_line[two lines]",
            "attribute `line`: `line` is one line: it may not contain a newline",
        ),
        (
            "4:13",
            "attribute-value",
            "File_line[relative]",
            "attribute `path`: `path` `sshd_config` is not an absolute path",
        ),
        (
            "5:13",
            "invariant",
            "File_line[many]",
            "`file_line`: `multiple` replaces the lines `match` finds: set `match` too",
        ),
    ] {
        let resource = resource.replace("@FILES@", &machine.files_dir());
        // Rendered as the manifests' diagnostics are: the headline, then the place with
        // its line of the manifest.
        let wanted = format!("error[wcv::{code}]: {resource}: {message}");
        assert!(run.stderr.contains(&wanted), "{wanted}\n{run:#?}");
        let place = format!(" --> {site}:{at}\n");
        assert!(run.stderr.contains(&place), "{place}\n{run:#?}");
    }
    assert!(
        run.stderr
            .contains("the catalog has 5 problems; nothing was changed"),
        "{run:#?}"
    );
    assert!(!Path::new(&machine.file("motd")).exists());
    assert_eq!(
        std::fs::read_to_string(machine.file("sshd_config")).expect("file"),
        "Port 22\n"
    );
}

#[test]
fn types_shows_declared_types_and_the_checks_a_provider_ships() {
    let (machine, policy, dir) = file_line_machine();
    // `wconverge types ARGS --policy POLICY --plugin-dir DIR`, which must succeed.
    let types = |args: &[&str]| {
        let mut all = vec!["types"];
        all.extend_from_slice(args);
        all.extend(["--policy", text(&policy), "--plugin-dir", text(&dir)]);
        let run = machine.run(&all);
        assert_eq!(run.code, 0, "{run:#?}");
        run
    };
    let shown = types(&["file_line"]);
    assert!(
        shown.stdout.contains(
            "      check: { if $it =~ /\\n/ { \"`line` is one line: it may not contain a newline\" } }\n"
        ),
        "{shown:#?}"
    );
    assert!(
        shown.stdout.contains(
            "invariants:\n  \"`multiple` replaces the lines `match` finds: set `match` too\" \
             !($multiple and $match == undef)\n"
        ),
        "{shown:#?}"
    );

    let manifest = machine.manifest(
        "types.wcv",
        "type User {\n  attr name, String { min => 1 }\n  attr groups, String { max => unbound }\n  \
         has roles, UserRole { max => unbound }\n}\ntype UserRole {\n  abstract\n  attr gid, String\n}\n",
    );
    let list = types(&["--manifest", text(&manifest)]);
    let at = manifest.display();
    assert!(
        list.stdout.contains(&format!(
            "declared in the manifests:\nUser      {at}:1\nUserRole  abstract, {at}:6\n"
        )),
        "{list:#?}"
    );
    let user = types(&["user", "--manifest", text(&manifest)]);
    assert_eq!(
        user.stdout,
        format!(
            "User\n  declared at {at}:1\n\nfeatures:\n  name  String, [1..1], property\n  \
             groups  String, [0..*], property\n  roles  UserRole, [0..*], property, contained\n"
        )
    );
}

#[test]
fn a_declared_type_checks_a_defined_resource_parameter_before_anything_changes() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let types = r#"
type MyApp::Config {
  attr port, Integer {
    default => 8080,
    check => { if $it < 1024 { "port ${it} is privileged; use one above 1023" } }
  }
  attr hosts, String { min => 1, max => unbound }
  invariant "a single host needs no balancer" { !($balanced and $hosts.length < 2) }
  attr balanced, Boolean { default => false }
}
define myapp::site(MyApp::Config $config) {
  file { "@FILES@/${title}.conf":
    content => "hosts=${config['hosts'].join(',')}\nport=${config['port']}\n",
  }
}
"#;
    let good = machine.manifest(
        "good.wcv",
        &format!("{types}myapp::site {{ 'shop': config => {{ hosts => ['a', 'b'] }} }}\n"),
    );
    let run = machine.run(&["apply", text(&good), "--policy", text(&policy)]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert_eq!(
        std::fs::read_to_string(machine.file("shop.conf")).expect("written"),
        "hosts=a,b\nport=8080\n"
    );
    let bad = machine.manifest(
        "bad.wcv",
        &format!(
            "{types}myapp::site {{ 'low': config => {{ hosts => ['a'], port => 80 }} }}\n\
             myapp::site {{ 'lonely': config => {{ hosts => ['a'], balanced => true }} }}\n"
        ),
    );
    let run = machine.run(&["apply", text(&bad), "--policy", text(&policy)]);
    assert_eq!(run.code, 1, "{run:#?}");
    let at = bad.display();
    for wanted in [
        format!(
            "error[wcv::parameter-type]: parameter `$config` as a `MyApp::Config`: `port`: port \
             80 is privileged; use one above 1023\n  --> {at}:16:15"
        ),
        format!(
            "error[wcv::parameter-type]: parameter `$config` as a `MyApp::Config`: a single host \
             needs no balancer\n  --> {at}:17:15"
        ),
    ] {
        assert!(run.stderr.contains(&wanted), "{wanted}\n{run:#?}");
    }
    assert!(!Path::new(&machine.file("low.conf")).exists());
    assert!(!Path::new(&machine.file("lonely.conf")).exists());
}
