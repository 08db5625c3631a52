//! `wconverge plugins audit`: what a reviewer signs off (issue 8, item 3 in part): each
//! plugin's digest, imports and grants, with root-equivalent grants flagged, stable so
//! that two deployments diff line by line.

use crate::support::Machine;

/// The audit's section of one plugin.
fn section<'a>(audit: &'a str, plugin: &str) -> &'a str {
    let start = audit
        .find(&format!("plugin {plugin}\n"))
        .unwrap_or_else(|| panic!("no section for {plugin}:\n{audit}"));
    let rest = &audit[start..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

#[test]
fn the_audit_flags_root_equivalent_grants_and_is_stable() {
    let machine = Machine::new();
    let policy = machine.policy(
        r#"[plugins.deployer]
source = "builtin"
provides = []
directories = [{ path = "/etc/sudoers.d", access = "read-write" }]
programs = ["/usr/bin/env", "/usr/bin/systemctl"]
users = ["root"]
environment = ["LD_PRELOAD"]
"#,
    );
    let policy = policy.to_str().expect("utf-8");
    let audit = machine.run(&["plugins", "audit", "--policy", policy]);
    // `deployer` names no built-in component: it is listed, with its grants, and the
    // command says it could not be loaded.
    assert_eq!(audit.code, 1, "{audit:#?}");
    let deployer = section(&audit.stdout, "deployer");
    for expected in [
        "  ! root-equivalent: write access to /etc/sudoers.d covers /etc/sudoers.d",
        "  ! root-equivalent: may launch /usr/bin/env, which runs whatever it is given",
        "  ! root-equivalent: may run programs as root",
        "  ! root-equivalent: may set LD_PRELOAD, which decides what code a program runs",
    ] {
        assert!(deployer.contains(expected), "{expected}\n{deployer}");
    }
    assert!(!deployer.contains("systemctl,"), "{deployer}");

    let notify = section(&audit.stdout, "notify");
    assert!(notify.contains("  kind: provider\n"), "{notify}");
    assert!(
        notify.contains("  directories: none\n  programs: none\n"),
        "{notify}"
    );
    assert!(
        !notify.contains("  ! "),
        "a plugin that may touch nothing has no flag: {notify}"
    );
    let sh = section(&audit.stdout, "sh");
    assert!(
        sh.contains("  ! root-equivalent: may launch any program in /usr/bin, shells and interpreters included"),
        "{sh}"
    );
    assert!(sh.contains("  sha256: "), "{sh}");

    // The same policy audits the same, byte for byte.
    let again = machine.run(&["plugins", "audit", "--policy", policy]);
    assert_eq!(again.stdout, audit.stdout);
}
