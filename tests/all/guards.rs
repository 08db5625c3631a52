//! Guards through the binary: every code example of Chef's guard interpreter RFC
//! that runs on Linux as a manifest, with real interpreters (`sh`, `bash`, `pwsh` where
//! installed), the architecture launcher, exit codes, `returns`, timeouts and missing
//! interpreters.

use crate::support::{Machine, entry};
use serde_json::Value;
use std::path::Path;

fn exists(path: &str) -> bool {
    Path::new(path).exists()
}

/// The guard report of `resource`: (metaparameter, interpreter, inherited, passed).
fn guard_of(report: &Value, resource: &str) -> (String, String, Vec<String>, bool) {
    let guard = entry(report, resource)["guards"]
        .as_array()
        .and_then(|guards| guards.last())
        .unwrap_or_else(|| panic!("{resource} evaluated no guard:\n{report:#}"));
    (
        guard["metaparameter"].as_str().expect("named").to_owned(),
        guard["interpreter"]
            .as_str()
            .expect("interpreter")
            .to_owned(),
        guard["inherited"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .map(|name| name.as_str().expect("string").to_owned())
                    .collect()
            })
            .unwrap_or_default(),
        guard["passed"].as_bool().expect("passed"),
    )
}

fn status<'a>(report: &'a Value, resource: &str) -> &'a str {
    entry(report, resource)["status"].as_str().expect("status")
}

#[test]
fn a_bash_guard_speaks_bash_and_a_default_guard_speaks_sh() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
# RFC: "Use bash for only_if" -- [[ ]] works only in bash.
bash { 'Use bash for only_if':
  guard_interpreter => bash,
  code              => 'echo "I am $BASH" > @FILES@/bash-ran',
  only_if           => '[[ 1 == 1 ]]',
}
# The same guard with the `default` interpreter runs in /bin/sh, where `[[` is no
# command: the guard is false and the resource is skipped.
bash { 'Same guard in sh':
  guard_interpreter => default,
  code              => 'touch @FILES@/sh-ran',
  only_if           => '[[ 1 == 1 ]]',
}
"#,
    );
    let report = machine.apply_json(&manifest, &machine.policy(""), &[], 2);
    assert!(exists(&machine.file("bash-ran")), "{report:#}");
    assert_eq!(status(&report, "Bash[Use bash for only_if]"), "changed");
    assert_eq!(
        guard_of(&report, "Bash[Use bash for only_if]"),
        ("only_if".to_owned(), "bash".to_owned(), vec![], true)
    );
    assert!(!exists(&machine.file("sh-ran")));
    assert_eq!(
        status(&report, "Bash[Same guard in sh]"),
        "skipped_by_guard"
    );
    assert_eq!(
        guard_of(&report, "Bash[Same guard in sh]"),
        ("only_if".to_owned(), "sh".to_owned(), vec![], false)
    );
}

#[test]
fn a_guard_inherits_cwd_and_its_own_parameters_override_it() {
    let machine = Machine::new();
    for dir in ["opt", "var"] {
        std::fs::create_dir(machine.file(dir)).expect("dir");
    }
    let manifest = machine.manifest(
        "site.wcv",
        r#"
# RFC: "Inheritance is your friend" -- the guard runs in the resource's cwd.
bash { 'My cwd gets inherited':
  guard_interpreter => bash,
  code              => 'touch @FILES@/inherited',
  cwd               => '@FILES@/opt',
  only_if           => '[[ $PWD == "@FILES@/opt" ]]',
}
# RFC: "Setting guard parameters" -- the guard's own cwd wins.
bash { 'Override my guard attributes':
  guard_interpreter => bash,
  code              => 'touch @FILES@/overridden',
  cwd               => '@FILES@/var',
  only_if           => { command => '[[ $PWD == "@FILES@/opt" ]]', cwd => '@FILES@/opt' },
}
"#,
    );
    let report = machine.apply_json(&manifest, &machine.policy(""), &[], 2);
    assert!(exists(&machine.file("inherited")), "{report:#}");
    assert!(exists(&machine.file("overridden")), "{report:#}");
    assert_eq!(
        guard_of(&report, "Bash[My cwd gets inherited]").2,
        vec!["cwd".to_owned()]
    );
    assert!(
        guard_of(&report, "Bash[Override my guard attributes]")
            .2
            .is_empty()
    );
}

#[test]
fn environment_is_inherited_only_by_a_non_default_interpreter() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
# RFC: "javatooling" -- the guard needs JAVA_HOME, written once on the resource.
sh { 'javatooling':
  environment => { 'JAVA_HOME' => '/usr/lib/java/jdk1.7/home' },
  code        => 'touch @FILES@/java-started',
  not_if      => 'test "$JAVA_HOME" = /usr/lib/java/jdk1.7/home',
}
# With the `default` interpreter nothing is inherited, so the guard sees no JAVA_HOME.
sh { 'javatooling default':
  guard_interpreter => default,
  environment       => { 'JAVA_HOME' => '/usr/lib/java/jdk1.7/home' },
  code              => 'touch @FILES@/java-default',
  not_if            => 'test "$JAVA_HOME" = /usr/lib/java/jdk1.7/home',
}
"#,
    );
    let run = machine.apply(&manifest, &machine.policy(""), &["--verbose"]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stdout.contains(
            "Sh[javatooling]: skipped by guard: not_if `test \"$JAVA_HOME\" = \
             /usr/lib/java/jdk1.7/home` succeeded (interpreter `sh`, inheriting environment)"
        ),
        "{run:#?}"
    );
    assert!(!exists(&machine.file("java-started")));
    assert!(exists(&machine.file("java-default")));
}

#[test]
#[cfg_attr(
    not(target_arch = "x86_64"),
    ignore = "the i686 personality needs an x86_64 machine"
)]
fn architecture_is_inherited_and_launched_through_the_launcher() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
# RFC: "architecture inheritance" -- the guard runs as i386 like its resource.
sh { 'i386':
  architecture => 'i386',
  code         => 'uname -m > @FILES@/code-arch',
  only_if      => 'uname -m > @FILES@/guard-arch; test "$(uname -m)" = i686',
}
sh { 'native':
  code    => 'uname -m > @FILES@/native-arch',
}
sh { 'foreign':
  architecture => 'aarch64',
  code         => 'true',
}
"#,
    );
    let log = machine.root().join("audit.jsonl");
    let report = machine.apply_json(
        &manifest,
        &machine.policy(""),
        &["--audit-log", log.to_str().expect("utf-8")],
        6,
    );
    let read = |name: &str| std::fs::read_to_string(machine.file(name)).expect(name);
    assert_eq!(read("guard-arch"), "i686\n");
    // The trail shows the command line the plugin asked for and the one that ran.
    let trail = std::fs::read_to_string(&log).expect("audit log");
    let wrapped: Vec<serde_json::Value> = trail
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .filter(|event: &serde_json::Value| {
            event["resource"]
                .as_str()
                .is_some_and(|resource| resource.ends_with("Sh[i386]"))
                && event["launched"].is_string()
        })
        .collect();
    assert_eq!(wrapped.len(), 2, "the guard and the code: {trail}");
    for event in &wrapped {
        assert!(
            event["target"]
                .as_str()
                .is_some_and(|target| target.starts_with("/bin/sh -c ")),
            "{event:#}"
        );
        assert!(
            event["launched"]
                .as_str()
                .is_some_and(|line| line.starts_with("/usr/bin/setarch i686 ")
                    && line.contains(" /bin/sh -c ")),
            "{event:#}"
        );
    }
    // Allowed by the policy, but the launcher had nothing to run it with.
    let foreign: serde_json::Value = trail
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .find(|event: &serde_json::Value| event["resource"] == "Sh[foreign]")
        .expect("the foreign launch");
    assert_eq!(foreign["decision"], "allowed", "{foreign:#}");
    assert!(
        foreign["reason"].as_str().is_some_and(
            |reason| reason.starts_with("granted; not launched: architecture `aarch64`")
        ),
        "{foreign:#}"
    );
    assert_eq!(read("code-arch"), "i686\n");
    assert_eq!(read("native-arch"), "x86_64\n");
    assert_eq!(
        guard_of(&report, "Sh[i386]").2,
        vec!["architecture".to_owned()]
    );
    let error = entry(&report, "Sh[foreign]")["error"]
        .as_str()
        .expect("failed");
    assert!(
        error.contains(
            "architecture `aarch64`: this x86_64 Linux machine cannot run `aarch64` programs"
        ),
        "{error}"
    );
    // The private directory of program names is gone with the run, launcher and all.
    let left: Vec<_> = std::fs::read_dir(machine.temp_dir())
        .expect("tmp")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert!(left.is_empty(), "the run left {left:?}");
}

#[test]
fn exit_codes_in_returns_are_success_and_a_timeout_fails_the_resource() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
file { '@FILES@/three':
  content => "3\n",
  only_if => { command => 'exit 3', returns => [0, 3] },
}
file { '@FILES@/four':
  content => "4\n",
  only_if => { command => 'exit 4', returns => [0, 3] },
}
file { '@FILES@/slow':
  content => "slow\n",
  not_if  => { command => 'sleep 30', timeout => 1 },
}
file { '@FILES@/after-slow':
  content => "after\n",
  require => File['@FILES@/slow'],
}
"#,
    );
    let started = std::time::Instant::now();
    let report = machine.apply_json(&manifest, &machine.policy(""), &[], 6);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(exists(&machine.file("three")));
    assert!(!exists(&machine.file("four")));
    assert_eq!(
        status(&report, &format!("File[{}]", machine.file("four"))),
        "skipped_by_guard"
    );
    let slow = format!("File[{}]", machine.file("slow"));
    assert_eq!(
        entry(&report, &slow)["error"],
        "not_if guard `sleep 30` (interpreter `sh`) ran past its timeout of 1 second; it was \
         killed with everything it started"
    );
    assert_eq!(
        status(&report, &format!("File[{}]", machine.file("after-slow"))),
        "skipped_failed_dependency"
    );
    assert!(!exists(&machine.file("slow")));
}

#[test]
fn a_missing_interpreter_fails_and_an_unknown_one_is_refused_before_the_run() {
    let machine = Machine::new();
    let missing = machine.manifest(
        "missing.wcv",
        r#"
script { 'no such shell':
  interpreter => '/usr/bin/wconverge-no-such-shell',
  code        => 'true',
}
"#,
    );
    let policy = machine.policy("");
    let report = machine.apply_json(&missing, &policy, &[], 4);
    assert_eq!(
        entry(&report, "Script[no such shell]")["error"],
        "cannot launch `/usr/bin/wconverge-no-such-shell`: it does not exist"
    );
    // A guard whose interpreter cannot be launched fails its resource, also when a
    // launcher (setarch) stands between: never a silent false.
    let guarded = machine.manifest(
        "guarded.wcv",
        r#"
script { 'guard needs the missing shell':
  interpreter => '/usr/bin/wconverge-no-such-shell',
  code        => 'true',
  only_if     => 'true',
}
script { 'through the launcher':
  interpreter  => '/usr/bin/wconverge-no-such-shell',
  architecture => 'i386',
  code         => 'true',
  not_if       => 'true',
}
script { 'a real one':
  interpreter => '/bin/sh',
  code        => 'touch @FILES@/script-ran',
  only_if     => 'test -d @FILES@',
}
"#,
    );
    let report = machine.apply_json(&guarded, &policy, &[], 6);
    assert_eq!(
        entry(&report, "Script[guard needs the missing shell]")["error"],
        "only_if guard `true` (interpreter `script`) could not be evaluated: cannot launch \
         `/usr/bin/wconverge-no-such-shell`: it does not exist"
    );
    assert_eq!(
        entry(&report, "Script[through the launcher]")["error"],
        "not_if guard `true` (interpreter `script`) could not be evaluated: cannot launch \
         `/usr/bin/wconverge-no-such-shell`: it does not exist"
    );
    assert!(exists(&machine.file("script-ran")), "{report:#}");
    assert_eq!(
        guard_of(&report, "Script[a real one]").2,
        vec!["interpreter".to_owned()]
    );
    let unknown = machine.manifest(
        "unknown.wcv",
        r#"
file { '@FILES@/zsh':
  content           => "x\n",
  guard_interpreter => zsh,
  only_if           => '[[ -o interactive ]]',
}
"#,
    );
    let run = machine.apply(&unknown, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("guard_interpreter `zsh` is not an installed interpreter"),
        "{run:#?}"
    );
    assert!(!exists(&machine.file("zsh")));
}

#[test]
fn puppet_onlyif_and_unless_on_exec_are_guards_that_run_in_noop_too() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
exec { 'touch @FILES@/onlyif-ran': onlyif => 'test -d @FILES@' }
exec { 'touch @FILES@/unless-ran': unless => 'test -d @FILES@' }
exec { 'touch @FILES@/cwd-ran':
  cwd    => '@FILES@',
  onlyif => 'test "$PWD" = @FILES@',
}
"#,
    );
    let policy = machine.policy("");
    let noop = machine.apply_json(&manifest, &policy, &["--noop"], 2);
    let unless = format!("Exec[touch {}]", machine.file("unless-ran"));
    assert_eq!(status(&noop, &unless), "skipped_by_guard");
    assert_eq!(
        status(
            &noop,
            &format!("Exec[touch {}]", machine.file("onlyif-ran"))
        ),
        "would_change"
    );
    assert!(!exists(&machine.file("onlyif-ran")));
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert!(exists(&machine.file("onlyif-ran")));
    assert!(exists(&machine.file("cwd-ran")), "{report:#}");
    assert!(!exists(&machine.file("unless-ran")));
    assert_eq!(
        guard_of(&report, &unless),
        ("unless".to_owned(), "exec".to_owned(), vec![], false)
    );
}

const POWERSHELL_POLICY: &str = r#"[plugins.powershell]
source = "builtin"
provides = ["powershell_script"]
directories = [{ path = "/", access = "read" }]
programs = ["/usr/bin/pwsh", "/usr/local/bin/pwsh", "/opt/microsoft/powershell/7/pwsh", "/snap/bin/pwsh"]
"#;

/// What needs no PowerShell: the schema check and a noop plan.
#[test]
fn powershell_script_is_checked_and_planned_without_powershell() {
    let machine = Machine::new();
    let policy = machine.policy(POWERSHELL_POLICY);
    let bad = machine.manifest(
        "bad.wcv",
        r#"
powershell_script { 'set execution policy':
  code                   => 'set-executionpolicy remotesigned',
  convert_boolean_return => 'yes',
}
"#,
    );
    let run = machine.run(&[
        "validate",
        bad.to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("attribute `convert_boolean_return` expects Boolean"),
        "{run:#?}"
    );
    let good = machine.manifest(
        "good.wcv",
        r#"
powershell_script { 'set execution policy':
  code                   => 'set-executionpolicy remotesigned',
  convert_boolean_return => true,
}
"#,
    );
    let report = machine.apply_json(&good, &policy, &["--noop"], 2);
    assert_eq!(
        status(&report, "Powershell_script[set execution policy]"),
        "would_change"
    );
}

/// The PowerShell examples of the RFC, run by a real `pwsh`.
#[test]
#[ignore = "needs pwsh (PowerShell 7) installed"]
fn powershell_guards_convert_booleans_and_keep_ordinary_exit_codes() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
powershell_script { 'true skips':
  code   => 'New-Item -ItemType File -Path @FILES@/true-ran',
  not_if => '(1 + 1) -eq 2',
}
powershell_script { 'false runs':
  code   => 'New-Item -ItemType File -Path @FILES@/false-ran',
  not_if => '(1 + 1) -eq 3',
}
powershell_script { 'a string is no verdict':
  code    => 'New-Item -ItemType File -Path @FILES@/string-ran',
  only_if => "'a string'",
}
powershell_script { 'an exception is false':
  code    => 'New-Item -ItemType File -Path @FILES@/throw-ran',
  only_if => "throw 'no'",
}
powershell_script { 'a native exit code counts':
  code    => 'New-Item -ItemType File -Path @FILES@/exit-ran',
  only_if => { command => '/bin/sh -c "exit 3"', returns => [3] },
}
"#,
    );
    let report = machine.apply_json(&manifest, &machine.policy(POWERSHELL_POLICY), &[], 2);
    assert!(!exists(&machine.file("true-ran")), "{report:#}");
    assert!(exists(&machine.file("false-ran")), "{report:#}");
    assert!(exists(&machine.file("string-ran")), "{report:#}");
    assert!(!exists(&machine.file("throw-ran")), "{report:#}");
    assert!(exists(&machine.file("exit-ran")), "{report:#}");
}

#[test]
fn a_lazy_block_guard_is_evaluated_by_the_host_even_from_a_compiled_catalog() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
$port = 8080
file { '@FILES@/high-port':
  content => "high\n",
  only_if => lazy { $port > 1024 },
}
file { '@FILES@/low-port':
  content => "low\n",
  only_if => [lazy { $port < 1024 }, 'true'],
}
file { '@FILES@/broken':
  content => "broken\n",
  not_if  => lazy { $port + 'x' },
}
"#,
    );
    // Compiled here, applied later from the JSON catalog.
    let compiled = machine.run(&["compile", manifest.to_str().expect("utf-8"), "--node", "n1"]);
    assert_eq!(compiled.code, 0, "{compiled:#?}");
    assert!(
        compiled.stdout.contains("\"__lazy\""),
        "{}",
        compiled.stdout
    );
    let catalog = machine.root().join("compiled.json");
    std::fs::write(&catalog, &compiled.stdout).expect("catalog written");
    let report = machine.apply_json(&catalog, &machine.policy(""), &[], 6);
    assert!(exists(&machine.file("high-port")));
    assert!(!exists(&machine.file("low-port")));
    let low = format!("File[{}]", machine.file("low-port"));
    assert_eq!(
        guard_of(&report, &low),
        ("only_if".to_owned(), "host".to_owned(), vec![], false)
    );
    let broken = format!("File[{}]", machine.file("broken"));
    let error = entry(&report, &broken)["error"].as_str().expect("failed");
    assert!(
        error.starts_with(
            "not_if guard `lazy { $port + 'x' }` (interpreter `host`) could not be evaluated: \
             the lazy block at "
        ) && error.contains("site.wcv:13:14 failed")
            && error.contains("`+` needs numbers, and the string `x` is not one"),
        "{error}"
    );
    assert!(!exists(&machine.file("broken")));
}

#[test]
fn a_third_party_interpreter_is_a_plugin_and_nothing_else() {
    let machine = Machine::new();
    let perl = wconverge_tests::PERL;
    let policy = machine.policy(&format!(
        r#"[plugins.perl]
source = "{perl}"
sha256 = "{digest}"
directories = [{{ path = "/", access = "read" }}]
programs = ["/usr/bin/perl"]
"#,
        digest = crate::support::sha256_of(perl)
    ));
    std::fs::create_dir(machine.file("work")).expect("dir");
    let manifest = machine.manifest(
        "site.wcv",
        r#"
perl { 'hello':
  code    => 'open(my $f, ">", "@FILES@/perl-ran") or die',
  cwd     => '@FILES@/work',
  only_if => 'use Cwd; exit(getcwd() eq "@FILES@/work" ? 0 : 1)',
}
file { '@FILES@/guarded-by-perl':
  content           => "x\n",
  guard_interpreter => perl,
  not_if            => 'exit(-d "@FILES@" ? 0 : 1)',
}
"#,
    );
    let report = machine.apply_json(&manifest, &policy, &[], 2);
    assert!(exists(&machine.file("perl-ran")), "{report:#}");
    assert_eq!(
        guard_of(&report, "Perl[hello]"),
        (
            "only_if".to_owned(),
            "perl".to_owned(),
            vec!["cwd".to_owned()],
            true
        )
    );
    let guarded = format!("File[{}]", machine.file("guarded-by-perl"));
    assert_eq!(status(&report, &guarded), "skipped_by_guard");
    assert_eq!(guard_of(&report, &guarded).1, "perl");
}
