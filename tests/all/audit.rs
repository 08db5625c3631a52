//! `wconverge plugins audit`: what a reviewer signs off: each
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
        "  ! root-equivalent: may launch /usr/bin/env with any arguments, and it runs what its \
         arguments name; restrict it with `args` patterns",
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

#[test]
fn lock_pins_every_plugin_keeps_the_file_and_says_what_changed() {
    let machine = Machine::new();
    let site = wconverge_tests::FACTS_CUSTOM;
    let copy = machine.root().join("site.wasm");
    std::fs::copy(site, &copy).expect("copy");
    let policy = machine.root().join("locked.toml");
    let text = "# Reviewed by the security team.\n\
                [plugins.notify]\nsource = \"builtin\" # messages only\n\n\
                [plugins.site]\nsource = \"site.wasm\"\nprovides = []\n";
    std::fs::write(&policy, text).expect("policy");
    let policy_arg = policy.to_str().expect("utf-8");
    let lock = machine.run(&["plugins", "lock", "--policy", policy_arg]);
    assert_eq!(lock.code, 0, "{lock:#?}");
    let digest = crate::support::sha256_of(site);
    assert!(
        lock.stdout
            .contains(&format!("site: pinned sha256 {digest}")),
        "{lock:#?}"
    );
    assert!(lock.stdout.contains("notify: pinned sha256 "), "{lock:#?}");
    let locked = std::fs::read_to_string(&policy).expect("policy");
    assert!(
        locked.starts_with("# Reviewed by the security team.\n"),
        "{locked}"
    );
    assert!(
        locked.contains("source = \"builtin\" # messages only"),
        "{locked}"
    );
    assert!(
        locked.contains(&format!("sha256 = \"{digest}\"")),
        "{locked}"
    );
    // The locked policy loads: the pinned file plugin gathers its facts.
    let facts = machine.run(&["facts", "--policy", policy_arg]);
    assert!(facts.stdout.contains("paris"), "{facts:#?}");

    let again = machine.run(&["plugins", "lock", "--policy", policy_arg]);
    assert_eq!(again.code, 0, "{again:#?}");
    assert!(again.stdout.contains("site: unchanged"), "{again:#?}");
    assert!(again.stdout.contains("already locked"), "{again:#?}");

    // A new build of the plugin: lock says so, loudly.
    let mut bytes = std::fs::read(&copy).expect("wasm");
    bytes.extend_from_slice(b"\0");
    std::fs::write(&copy, &bytes).expect("changed");
    let changed = machine.run(&["plugins", "lock", "--policy", policy_arg]);
    assert_eq!(changed.code, 0, "{changed:#?}");
    assert!(
        changed
            .stdout
            .contains(&format!("site: CHANGED from sha256 {digest} to ")),
        "{changed:#?}"
    );

    // A plugin that cannot be read: nothing is written.
    std::fs::remove_file(&copy).expect("removed");
    let before = std::fs::read_to_string(&policy).expect("policy");
    let missing = machine.run(&["plugins", "lock", "--policy", policy_arg]);
    assert_eq!(missing.code, 1, "{missing:#?}");
    assert!(
        missing.stdout.contains("site: not pinned: cannot read"),
        "{missing:#?}"
    );
    assert!(
        missing.stderr.contains("nothing was written"),
        "{missing:#?}"
    );
    assert_eq!(std::fs::read_to_string(&policy).expect("policy"), before);
}

#[test]
fn inspect_shows_a_plugins_world_imports_and_schemas() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let policy = policy.to_str().expect("utf-8");
    let sh = machine.run(&["plugins", "inspect", "sh", "--policy", policy]);
    assert_eq!(sh.code, 0, "{sh:#?}");
    for expected in [
        "plugin sh\n",
        "  world: wconverge:plugin/interpreter",
        "  wit: 0.8.0 (this wconverge speaks 0.8.0)\n",
        "    wconverge:plugin/process@0.8.0\n",
        "  guards inherit: ",
        "\ntype Exec\n",
        "  command  ",
    ] {
        assert!(sh.stdout.contains(expected), "{expected}\n{sh:#?}");
    }
    let template = machine.run(&["plugins", "inspect", "template", "--policy", policy]);
    assert!(
        template
            .stdout
            .contains("  receives during the run: node, facts"),
        "{template:#?}"
    );
    let unknown = machine.run(&["plugins", "inspect", "nope", "--policy", policy]);
    assert_eq!(unknown.code, 1, "{unknown:#?}");
    assert!(
        unknown.stderr.contains("the policy has no plugin `nope`"),
        "{unknown:#?}"
    );
}
