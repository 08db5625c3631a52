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
