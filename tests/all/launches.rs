//! What root launches: a program the policy allows is launched as root only when no one
//! else can change it or the way to it, unless the policy trusts it by name; the test
//! user who could swap it races the launches for a bounded count.

use crate::attacker::LocalUser;
use crate::support::{Machine, Run};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A policy whose `sh` plugin may launch `programs` (TOML entries) besides the shell.
fn policy(machine: &Machine, programs: &str) -> std::path::PathBuf {
    let path = machine.root().join("launches.toml");
    std::fs::write(
        &path,
        format!(
            "[plugins.sh]\nsource = \"builtin\"\nprovides = [\"sh\", \"exec\", \"script\"]\n\
             directories = [{{ path = \"/\", access = \"read\" }}]\n\
             programs = [\"/bin/sh\", {programs}]\n\n\
             [plugins.facts-os]\nsource = \"builtin\"\nprovides = []\n\
             directories = [{{ path = \"/etc\", access = \"read\" }}, {{ path = \"/usr/lib\", access = \"read\" }}]\n"
        ),
    )
    .expect("policy");
    path
}

/// A machine, a test user, a directory every user may enter, her directory in it, and
/// root's copy of `echo` there, as `tool`.
fn her_directory_with_roots_echo() -> (
    Machine,
    LocalUser,
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let machine = Machine::new();
    let user = LocalUser::create();
    let shared = crate::grammars::shared_dir();
    let home = user.home_in(shared.path());
    let tool = home.join("tool");
    std::fs::copy("/bin/echo", &tool).expect("tool");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (machine, user, shared, home, tool)
}

fn apply(machine: &Machine, policy: &Path, resources: serde_json::Value) -> Run {
    let catalog = machine.catalog(resources);
    machine.apply(&catalog, policy, &["--format", "json"])
}

#[test]
fn a_program_someone_else_can_swap_is_not_launched_as_root() {
    let (machine, user, shared, _, tool) = her_directory_with_roots_echo();
    // And a link of root's, in a directory of root's, that leads there.
    let link = shared.path().join("link");
    std::os::unix::fs::symlink(&tool, &link).expect("link");
    let (tool, link) = (tool.display().to_string(), link.display().to_string());
    let refused = policy(&machine, &format!("\"{tool}\", \"{link}\""));
    for program in [&tool, &link] {
        let run = apply(
            &machine,
            &refused,
            json!([{ "type": "exec", "title": "x", "attributes": { "command": [program, "ran"] } }]),
        );
        assert_eq!(run.code, 4, "{run:#?}");
        let error = crate::support::first_error(&run.json());
        assert!(
            error.contains("is not launched as root")
                && error.contains(&format!("belongs to uid {}", user.uid))
                && error.contains("others_may_write"),
            "{error}"
        );
    }
    // Trusted by name: launched, and the audit says so.
    let trusted = policy(
        &machine,
        &format!("{{ path = \"{tool}\", others_may_write = true }}"),
    );
    let run = apply(
        &machine,
        &trusted,
        json!([{ "type": "exec", "title": "x", "attributes": {
            "command": [tool, "ran"], "logoutput": "true" } }]),
    );
    assert_eq!(run.code, 2, "{run:#?}");
    let audit = machine.run(&[
        "plugins",
        "audit",
        "--policy",
        trusted.to_str().expect("utf-8"),
    ]);
    assert!(
        audit
            .stdout
            .contains("the policy trusts it by name (`others_may_write`)"),
        "{audit:#?}"
    );
    // `others_may_write` names one program, never a directory of them.
    let directory = policy(
        &machine,
        "{ path = \"/usr/bin/*\", others_may_write = true }",
    );
    let run = apply(&machine, &directory, json!([]));
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(run.stderr.contains("not a directory of them"), "{run:#?}");
}

/// She swaps her program for a link to `/bin/sh` and back, as fast as she can, while
/// wconverge launches it 40 times: no launch happens, so the shell never runs the
/// command that would leave a mark.
#[test]
fn a_program_swapped_for_a_shell_while_runs_go_is_never_launched() {
    let (machine, user, shared, home, tool) = her_directory_with_roots_echo();
    let mark = shared.path().join("mark");
    let swapper = user.spawn_perl(
        &home,
        "symlink('/bin/sh', 'shell') or die; link('tool', 'echo') or die; \
         $n = 0; $SIG{TERM} = sub { print $n; exit 0 }; \
         while (1) { rename('shell', 'next'); rename('next', 'shell'); \
                     rename('tool', 'was'); symlink('/bin/sh', 'tool'); \
                     unlink('tool'); link('echo', 'tool'); unlink('was'); $n++ }",
        &[],
    );
    let tool = tool.display().to_string();
    let refused = policy(&machine, &format!("\"{tool}\""));
    let resources: Vec<serde_json::Value> = (0..40)
        .map(|index| {
            json!({ "type": "exec", "title": format!("x{index}"), "attributes": {
                "command": [tool, "-c", format!("touch {}", mark.display())] } })
        })
        .collect();
    let run = apply(&machine, &refused, serde_json::Value::Array(resources));
    let swaps = swapper.stop();
    assert_eq!(run.code, 4, "{run:#?}");
    let report = run.json();
    let failed = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter(|entry| {
            entry["error"]
                .as_str()
                .is_some_and(|error| error.contains("is not launched as root"))
        })
        .count();
    assert_eq!(
        failed, 40,
        "every launch was refused (the user swapped {swaps} times)"
    );
    assert!(!mark.exists(), "the shell never ran");
}
