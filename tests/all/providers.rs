//! Provider suitability: several plugins provide one type,
//! each suitable where its resource program over facts holds; a resource gets the first
//! suitable one in the policy's order, or the one its `provider` metaparameter names.
//! The facts come from a third-party fact plugin that publishes `site.name == 'paris'`
//! and `site.rack == '12'`.

use crate::support::{Machine, entry, sha256_of};
use std::path::Path;

/// A `[plugins.NAME]` table for a pinned test plugin providing `hello`.
fn pinned(name: &str, path: &str) -> String {
    format!(
        "[plugins.{name}]\nsource = \"{path}\"\nsha256 = \"{}\"\nprovides = [\"hello\"]\n\n",
        sha256_of(path)
    )
}

/// The site fact plugin, then the given providers of `hello`, in that order.
fn policy_with(machine: &Machine, providers: &[(&str, &str)]) -> String {
    let site = wconverge_tests::FACTS_CUSTOM;
    let mut extra = format!(
        "[plugins.site]\nsource = \"{site}\"\nsha256 = \"{}\"\nprovides = []\n\n",
        sha256_of(site)
    );
    for (name, path) in providers {
        extra.push_str(&pinned(name, path));
    }
    machine.policy(&extra).to_str().expect("utf-8").to_owned()
}

/// `wconverge validate MANIFEST --policy POLICY`.
fn validate(machine: &Machine, manifest: &Path, policy: &str) -> crate::support::Run {
    machine.run(&[
        "validate",
        manifest.to_str().expect("utf-8"),
        "--policy",
        policy,
    ])
}

fn both(machine: &Machine) -> String {
    policy_with(
        machine,
        &[
            ("hello-tokyo", wconverge_tests::HELLO_TOKYO),
            ("hello-paris", wconverge_tests::HELLO_PARIS),
        ],
    )
}

#[test]
fn a_resource_gets_the_first_suitable_provider_of_its_type() {
    let machine = Machine::new();
    let policy = both(&machine);
    let manifest = machine.manifest("hello.wcv", "hello { 'world': }\n");
    let report = machine.apply_json(&manifest, Path::new(&policy), &[], 2);
    let hello = entry(&report, "Hello[world]");
    assert_eq!(hello["provider"], "hello-paris", "{report:#}");
    assert_eq!(hello["status"], "changed", "{report:#}");
    assert_eq!(hello["logs"][0]["message"], "bonjour, world", "{report:#}");
    // The human output shows what the provider logged.
    let run = machine.run(&[
        "apply",
        manifest.to_str().expect("utf-8"),
        "--policy",
        &policy,
    ]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(run.stdout.contains("bonjour, world"), "{run:#?}");
}

#[test]
fn the_policy_order_decides_between_two_suitable_providers() {
    let paris = wconverge_tests::HELLO_PARIS;
    for (first, second) in [("first", "second"), ("second", "first")] {
        let machine = Machine::new();
        let policy = policy_with(&machine, &[(first, paris), (second, paris)]);
        let manifest = machine.manifest("hello.wcv", "hello { 'world': }\n");
        let report = machine.apply_json(&manifest, Path::new(&policy), &[], 2);
        assert_eq!(
            entry(&report, "Hello[world]")["provider"],
            first,
            "{report:#}"
        );
    }
}

#[test]
fn the_provider_metaparameter_picks_one_and_refuses_an_unsuitable_one() {
    let machine = Machine::new();
    let policy = both(&machine);
    let chosen = machine.manifest(
        "chosen.wcv",
        "hello { 'world': provider => 'hello-paris' }\n",
    );
    let report = machine.apply_json(&chosen, Path::new(&policy), &[], 2);
    assert_eq!(entry(&report, "Hello[world]")["provider"], "hello-paris");

    // An unsuitable provider is refused before anything changes, naming the line of
    // its requirement that failed and the manifest line of the resource.
    let unsuitable = machine.manifest(
        "unsuitable.wcv",
        "file { '@FILES@/untouched': content => 'x' }\n\
         hello { 'world':\n  provider => 'hello-tokyo',\n}\n",
    );
    let run = machine.run(&[
        "apply",
        unsuitable.to_str().expect("utf-8"),
        "--policy",
        &policy,
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(
            "provider `hello-tokyo` of `hello` is not suitable on this machine: line 2 of its \
             requirement does not hold: `site.name == 'tokyo'`"
        ),
        "{run:#?}"
    );
    assert!(run.stderr.contains("unsuitable.wcv:2"), "{run:#?}");
    assert!(
        run.stderr
            .contains("`wconverge types hello` shows its providers"),
        "{run:#?}"
    );
    assert!(!Path::new(&machine.file("untouched")).exists(), "{run:#?}");

    // A provider that does not provide the type, or does not exist.
    for (named, expected) in [
        (
            "file",
            "`provider => 'file'`: plugin `file` does not provide type `hello`; its providers \
             are `hello-tokyo`, `hello-paris`",
        ),
        (
            "apt",
            "`provider => 'apt'`: no plugin of the policy named `apt` provides type `hello`; \
             its providers are `hello-tokyo`, `hello-paris`",
        ),
    ] {
        let manifest = machine.manifest(
            "named.wcv",
            &format!("hello {{ 'world': provider => '{named}' }}\n"),
        );
        let run = validate(&machine, &manifest, &policy);
        assert_eq!(run.code, 1, "{run:#?}");
        assert!(run.stderr.contains(expected), "{run:#?}");
    }
}

#[test]
fn a_type_without_a_suitable_provider_is_refused_with_each_reason() {
    let machine = Machine::new();
    let policy = policy_with(&machine, &[("hello-tokyo", wconverge_tests::HELLO_TOKYO)]);
    let manifest = machine.manifest("hello.wcv", "hello { 'world': }\n");
    let run = validate(&machine, &manifest, &policy);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(
            "no provider of `hello` is suitable on this machine (`hello-tokyo`: line 2 of its \
             requirement does not hold: `site.name == 'tokyo'`)"
        ),
        "{run:#?}"
    );
}

#[test]
fn a_resource_is_checked_against_its_own_providers_schema() {
    let machine = Machine::new();
    let policy = both(&machine);
    // `bow` is an attribute of hello-tokyo only: the manifest compiles (some provider
    // of `hello` has it), and the resource, which gets hello-paris, is refused.
    let manifest = machine.manifest("bow.wcv", "hello { 'world': bow => true }\n");
    let run = validate(&machine, &manifest, &policy);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains("`hello` has no attribute `bow`"),
        "{run:#?}"
    );
}

#[test]
fn the_provider_metaparameter_survives_a_compiled_catalog() {
    let machine = Machine::new();
    let policy = both(&machine);
    let manifest = machine.manifest(
        "hello.wcv",
        "hello { 'world': provider => 'hello-paris' }\n",
    );
    let run = machine.compile(&manifest, Path::new(&policy));
    assert_eq!(run.code, 0, "{run:#?}");
    let catalog: serde_json::Value = serde_json::from_str(&run.stdout).expect("catalog JSON");
    assert_eq!(
        catalog["resources"][0]["metaparams"]["provider"], "hello-paris",
        "{catalog:#}"
    );
    let path = machine.root().join("catalog.json");
    std::fs::write(&path, &run.stdout).expect("catalog written");
    let report = machine.apply_json(&path, Path::new(&policy), &[], 2);
    assert_eq!(entry(&report, "Hello[world]")["provider"], "hello-paris");
}

#[test]
fn types_shows_each_provider_and_where_it_is_suitable() {
    let machine = Machine::new();
    let policy = both(&machine);
    let list = machine.run(&["types", "--policy", &policy]);
    assert_eq!(list.code, 0, "{list:#?}");
    assert!(
        list.stdout
            .contains("providers: hello-tokyo (not suitable), hello-paris (suitable)"),
        "{list:#?}"
    );
    let detail = machine.run(&["types", "hello", "--policy", &policy]);
    assert_eq!(detail.code, 0, "{detail:#?}");
    for expected in [
        "providers, in the order they are tried (`provider => NAME` picks one):",
        "  hello-tokyo  line 2 of its requirement does not hold: `site.name == 'tokyo'`",
        "  hello-paris  suitable: its requirement holds: `site.name == 'paris'`",
        "attributes (provider `hello-paris`):",
    ] {
        assert!(detail.stdout.contains(expected), "{expected}\n{detail:#?}");
    }
    assert!(!detail.stdout.contains("bow"), "{detail:#?}");
    let tokyo = machine.run(&[
        "types",
        "hello",
        "--provider",
        "hello-tokyo",
        "--policy",
        &policy,
    ]);
    assert_eq!(tokyo.code, 0, "{tokyo:#?}");
    assert!(
        tokyo
            .stdout
            .contains("attributes (provider `hello-tokyo`):")
    );
    assert!(tokyo.stdout.contains("  bow  Boolean"), "{tokyo:#?}");
    // The built-in types say nothing of providers: each has one, suitable everywhere.
    let file = machine.run(&["types", "file", "--policy", &policy]);
    assert!(
        file.stdout.contains("  file  suitable everywhere"),
        "{file:#?}"
    );
}

#[test]
fn a_script_resources_guards_run_with_its_own_provider() {
    // Two installs of one interpreter: the first may launch nothing, the second perl.
    // A resource that names the second runs its code and its guards with it.
    let machine = Machine::new();
    let perl = wconverge_tests::PERL;
    let digest = sha256_of(perl);
    let policy = machine.policy(&format!(
        r#"[plugins.perl-locked]
source = "{perl}"
sha256 = "{digest}"
provides = ["perl"]

[plugins.perl-open]
source = "{perl}"
sha256 = "{digest}"
provides = ["perl"]
directories = [{{ path = "/", access = "read" }}]
programs = ["/usr/bin/perl"]
"#
    ));
    let manifest = machine.manifest(
        "site.wcv",
        r#"perl { 'hello':
  code     => 'open(my $f, ">", "@FILES@/perl-ran") or die',
  only_if  => 'exit 0',
  provider => 'perl-open',
}
"#,
    );
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    let hello = entry(&report, "Perl[hello]");
    assert_eq!(hello["provider"], "perl-open", "{report:#}");
    assert_eq!(hello["guards"][0]["passed"], true, "{report:#}");
    assert!(Path::new(&machine.file("perl-ran")).exists(), "{report:#}");
    // Without `provider`, the first is used, code and guards alike, and refused.
    let first = machine.manifest(
        "first.wcv",
        "perl { 'hello': code => 'exit 0', only_if => 'exit 0' }\n",
    );
    let report = machine.apply_json(&first, &policy, &[], 4);
    let error = crate::support::first_error(&report);
    assert!(
        error.contains("is not on the allowlist of plugin `perl-locked`"),
        "{report:#}"
    );
}

#[test]
fn incomplete_facts_stop_the_choice_instead_of_falling_through() {
    let machine = Machine::new();
    let site = wconverge_tests::FACTS_CUSTOM;
    // A second install of the site fact plugin publishes the same group: the facts
    // cannot be gathered, so no provider's suitability can be judged.
    let policy = policy_with(
        &machine,
        &[
            ("hello-tokyo", wconverge_tests::HELLO_TOKYO),
            ("hello-paris", wconverge_tests::HELLO_PARIS),
        ],
    );
    let text = std::fs::read_to_string(&policy).expect("policy");
    std::fs::write(
        &policy,
        format!(
            "{text}[plugins.site-again]\nsource = \"{site}\"\nsha256 = \"{}\"\nprovides = []\n",
            sha256_of(site)
        ),
    )
    .expect("policy written");
    let manifest = machine.manifest("hello.wcv", "hello { 'world': }\n");
    let run = validate(&machine, &manifest, &policy);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(
            "cannot tell whether provider `hello-tokyo` of `hello` suits this machine: its \
             requirement could not be evaluated: the facts could not be gathered:"
        ),
        "{run:#?}"
    );
    assert!(run.stderr.contains("`wconverge facts`"), "{run:#?}");
}
