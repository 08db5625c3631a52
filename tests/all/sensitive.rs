//! Sensitive values never appear in any output: a canary planted in sensitive values is
//! looked for in everything every run prints.

use crate::support::{Machine, Run};
use serde_json::json;

const CANARY: &str = "CANARY-7f3a9c";

fn assert_no_canary(run: &Run) {
    let output = run.all_output();
    assert!(!output.contains(CANARY), "the canary leaked:\n{output}");
}

#[test]
fn sensitive_values_never_appear_in_output_reports_logs_or_diffs() {
    let machine = Machine::new();
    let secret_file = machine.file("secret");
    let catalog = |content: &str| {
        machine.catalog(json!([
            { "type": "file", "title": secret_file,
              "attributes": { "content": { "__sensitive": content }, "mode": "0600" } },
            { "type": "exec", "title": "leaky",
              "attributes": { "command": { "__sensitive": format!("echo {CANARY}; echo {CANARY} >&2; exit 1") } } },
            { "type": "exec", "title": "env-leak",
              "attributes": { "command": "echo \"token is $TOKEN\"", "logoutput": "true",
                              "environment": { "TOKEN": { "__sensitive": CANARY } } } },
            { "type": "notify", "title": "whisper", "attributes": { "message": { "__sensitive": CANARY } } },
        ]))
    };
    let policy = machine.policy("");
    let first = catalog(&format!("password={CANARY}\n"));
    for (args, code) in [
        (&["--noop"][..], 2),
        (&[][..], 6),
        (&["--format", "json"][..], 6),
    ] {
        let run = machine.apply(&first, &policy, args);
        assert_eq!(run.code, code, "{run:#?}");
        assert_no_canary(&run);
    }
    // A content change shows a redacted diff.
    let second = catalog(&format!("password={CANARY}-rotated\n"));
    let run = machine.apply(&second, &policy, &["--format", "json"]);
    assert_no_canary(&run);
    let report = run.json();
    let file = crate::support::entry(&report, &format!("File[{secret_file}]"));
    assert_eq!(file["changes"][0]["message"], "content changed [redacted]");
    assert_eq!(
        std::fs::read_to_string(&secret_file).expect("written"),
        format!("password={CANARY}-rotated\n")
    );
    let env = crate::support::entry(&report, "Exec[env-leak]");
    assert_eq!(env["logs"][0]["message"], "stdout: token is [redacted]");
    // Validation errors do not print sensitive values either.
    let invalid = machine.catalog(json!([
        { "type": "file", "title": machine.file("x"), "attributes": { "mode": { "__sensitive": 644 } } },
    ]));
    let run = machine.apply(&invalid, &policy, &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("attribute `mode` expects String, got Integer"),
        "{run:#?}"
    );
    assert!(!run.stderr.contains("644"), "{run:#?}");
}

/// A secret rotated away is still a secret: what a provider reads back of a sensitive
/// attribute (the old value, in the crontab, authorized_keys, a hosts file, a file) is
/// in no output, no JSON report and no stored report, whatever the text around it.
#[test]
fn a_rotated_secret_read_back_from_the_machine_appears_nowhere() {
    crate::entries::crontab_available();
    let user = crate::attacker::LocalUser::create();
    let _remove = crate::entries::CrontabRemoved(user.name.clone());
    let machine = Machine::new();
    let files = machine.files_dir();
    let policy = machine.policy(&format!(
        "[plugins.cron]\nsource = \"builtin\"\nprograms = [\n  {{ path = \"/usr/bin/crontab\", query = true, args = [[\"-u\", \"*\", \"-l\"]] }},\n  {{ path = \"/usr/bin/crontab\", args = [[\"-u\", \"*\", \"-\"]] }},\n]\n\n\
         [plugins.sshkeys]\nsource = \"builtin\"\nprovides = [\"ssh_authorized_key\"]\ndirectories = [{{ path = \"{files}\", access = \"read-write\" }}]\n\n\
         [plugins.hosts]\nsource = \"builtin\"\nprovides = [\"host\"]\ndirectories = [{{ path = \"{files}\", access = \"read-write\" }}]\n"
    ));
    let store = format!(
        "sqlite:{}",
        machine.root().join("state/fleet.sqlite").display()
    );
    let catalog = |token: &str| {
        let secret = |text: String| json!({ "__sensitive": text });
        machine.catalog(json!([
            { "type": "cron", "title": "backup", "attributes": {
                "user": user.name, "minute": 5,
                "command": secret(format!("/usr/local/bin/backup --token {token}")) } },
            { "type": "cron", "title": "report", "attributes": {
                "user": user.name, "minute": 7, "command": "/usr/local/bin/report",
                "environment": [secret(format!("API_TOKEN={token}"))] } },
            { "type": "ssh_authorized_key", "title": "deploy", "attributes": {
                "user": "root", "type": "ssh-ed25519", "target": format!("{files}/authorized_keys"),
                "key": "AAAAC3NzaC1lZDI1NTE5AAAAIDM2LGkSJYrTSjy13nkVtwz5jftP2gqdf8k6fqE5RJ8n",
                "options": [secret(format!("command=\"/bin/deploy {token}\""))] } },
            { "type": "host", "title": "db", "attributes": {
                "ip": "10.0.0.5", "target": format!("{files}/hosts"),
                "comment": secret(format!("token {token}")) } },
            { "type": "file", "title": format!("{files}/app.conf"), "attributes": {
                "content": secret(format!("token={token}\n")) } },
        ]))
    };
    let old = "OLDTOKEN-4b1d";
    let new = "NEWTOKEN-9e2c";
    let first = machine.apply(&catalog(old), &policy, &["--store", &store]);
    assert_eq!(first.code, 2, "{first:#?}");
    let rotated = catalog(new);
    let mut outputs = Vec::new();
    for (args, code) in [
        (&["--noop"][..], 2),
        (&["--noop", "--format", "json"][..], 2),
        (&["--format", "json", "--store", &store][..], 2),
        (&[][..], 0),
    ] {
        let run = machine.apply(&rotated, &policy, args);
        assert_eq!(run.code, code, "{run:#?}");
        outputs.push(run.all_output());
    }
    // Every change was reported, redacted.
    assert!(
        outputs[0].contains("command changed [redacted]")
            && outputs[0].contains("environment changed [redacted]")
            && outputs[0].contains("options changed [redacted]")
            && outputs[0].contains("comment changed [redacted]"),
        "{}",
        outputs[0]
    );
    for listed in [
        vec!["reports"],
        vec!["reports", "show", "1"],
        vec!["reports", "show", "2"],
    ] {
        let mut args = listed.clone();
        args.extend(["--store", &store]);
        let run = machine.run(&args);
        assert_eq!(run.code, 0, "{run:#?}");
        outputs.push(run.all_output());
    }
    let stored = std::fs::read(machine.root().join("state/fleet.sqlite")).expect("the store");
    outputs.push(String::from_utf8_lossy(&stored).into_owned());
    for (index, output) in outputs.iter().enumerate() {
        for token in [old, new] {
            assert!(
                !output.contains(token),
                "output {index} holds {token}:\n{output}"
            );
        }
    }
    // The secrets are on the machine, where they belong.
    let crontab = crate::entries::crontab_of(&user.name);
    assert!(crontab.contains(new) && !crontab.contains(old), "{crontab}");
}

/// A command line is public: every local user reads it in /proc while the program runs.
/// A sensitive argument list is refused before any change, saying how to pass the
/// secret; and whatever a plugin does, the host launches nothing with a secret of the
/// resource on its command line.
#[test]
fn a_secret_never_reaches_a_command_line() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let argv = machine.catalog(json!([
        { "type": "exec", "title": "argv", "attributes": {
            "command": { "__sensitive": ["/bin/echo", CANARY] } } },
    ]));
    let run = machine.apply(&argv, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains("would be readable by every local user")
            && run.stderr.contains("standard input"),
        "{run:#?}"
    );
    assert_no_canary(&run);
    // An interpreter's code alone may be sensitive: it reads it on standard input.
    let written = machine.file("handed");
    let handed = machine.catalog(json!([
        { "type": "exec", "title": "handed", "attributes": {
            "command": ["/bin/sh", "-c", { "__sensitive":
                format!(": {CANARY}; echo ran > {written}") }] } },
    ]));
    let run = machine.apply(&handed, &policy, &[]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert_eq!(std::fs::read_to_string(&written).expect("written"), "ran\n");
    assert_no_canary(&run);
    // The interpreter of a `script` is a program path the plugin puts on the command
    // line: made sensitive, the host refuses the launch.
    let program = machine.catalog(json!([
        { "type": "script", "title": "hidden", "attributes": {
            "interpreter": { "__sensitive": "/usr/bin/perl" }, "code": "print 1" } },
    ]));
    let run = machine.apply(&program, &policy, &["--format", "json"]);
    assert_eq!(run.code, 4, "{run:#?}");
    let error = crate::support::first_error(&run.json());
    assert!(
        error.contains("a secret of Script[hidden] would be on the command line"),
        "{error}"
    );
    assert!(!run.all_output().contains("/usr/bin/perl"), "{run:#?}");
}
