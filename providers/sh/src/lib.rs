//! The `sh` interpreter: `/bin/sh` for the `sh`, `exec` and `script` resource types and
//! for their guards, and the `default` guard interpreter on Unix.
//!
//! - `exec` is Puppet's: `command` (defaulting to the title) is a string run by
//!   `/bin/sh -c`, or an argv array run directly; `onlyif` and `unless` are its guards.
//! - `sh` runs its `code` with `/bin/sh -c`.
//! - `script` runs its `code` with the program named by `interpreter`, which reads it
//!   on standard input (so `python3`, `perl` or `bash` all work).

use wconverge_sdk::{Attribute, DataType, Result};
use wconverge_sdk_interpreter::{
    CommandLine, INHERITABLE, Interpreter, InterpreterInfo, Script, ScriptType, export_interpreter,
};

struct Sh;

/// The shell, on every Unix.
const SHELL: &str = "/bin/sh";

impl Interpreter for Sh {
    fn info() -> InterpreterInfo {
        // A `script` resource's guards run with its own `interpreter` too.
        let mut inherits = INHERITABLE.to_vec();
        inherits.push("interpreter");
        InterpreterInfo::new("sh", env!("CARGO_PKG_VERSION"))
            .inherits(&inherits)
            .default_on("unix")
            .with_type(ScriptType::new(
                "sh",
                "Runs its code with /bin/sh when the resource is applied (unless `creates` \
                 exists or `refreshonly` is set) and when it is refreshed.",
            ))
            .with_type(
                ScriptType::new(
                    "exec",
                    "Runs a command when the resource is applied (unless `creates` exists or \
                     `refreshonly` is set) and when it is refreshed, as Puppet's exec.",
                )
                .command_namevar()
                .puppet_guards(),
            )
            .with_type(
                ScriptType::new(
                    "script",
                    "Runs its code with the program named by `interpreter`, which reads it \
                     on standard input.",
                )
                .option(
                    Attribute::new(
                        "interpreter",
                        DataType::String,
                        "Absolute path of the program that runs the code (`/usr/bin/python3`).",
                    )
                    .required()
                    .parameter(),
                ),
            )
    }

    fn command_line(script: &Script) -> Result<CommandLine> {
        let code = script.text()?;
        if script.type_name == "script" {
            let interpreter = script
                .option("interpreter")
                .and_then(|value| value.as_str())
                .unwrap_or_default();
            if !interpreter.starts_with('/') {
                return Err(format!(
                    "interpreter `{interpreter}` is not an absolute path; give its full path, \
                     like /usr/bin/{interpreter}"
                )
                .into());
            }
            return Ok(CommandLine::new(interpreter)
                .args(script.flags())
                .stdin(code.as_bytes()));
        }
        // Sensitive code is read on standard input (`-s`): arguments are public.
        if script.sensitive {
            return Ok(CommandLine::new(SHELL)
                .args(script.flags())
                .arg("-s")
                .stdin(code.as_bytes()));
        }
        Ok(CommandLine::new(SHELL)
            .args(script.flags())
            .arg("-c")
            .arg(code))
    }
}

export_interpreter!(Sh);

#[cfg(test)]
mod tests {
    use super::*;
    use wconverge_sdk::process::ExitStatus;
    use wconverge_sdk::{Provider, Resource, State, Value, log};
    use wconverge_sdk_interpreter::{Purpose, ScriptProvider, run};

    type Scripts = ScriptProvider<Sh>;

    fn exec(command: impl Into<Value>) -> Resource {
        Resource::new("exec", "test").with("command", command)
    }

    #[test]
    fn a_string_runs_through_the_shell_with_its_flags() {
        let script = Script::new("sh", "echo hi", Purpose::Code).with_option("flags", "-e -u");
        assert_eq!(
            Sh::command_line(&script).expect("valid"),
            CommandLine::new("/bin/sh").args(["-e", "-u", "-c", "echo hi"])
        );
    }

    #[test]
    fn sensitive_code_is_read_on_standard_input() {
        let mut script = Script::new("exec", "echo hunter2", Purpose::Guard);
        script.sensitive = true;
        assert_eq!(
            Sh::command_line(&script).expect("valid"),
            CommandLine::new("/bin/sh").arg("-s").stdin("echo hunter2")
        );
    }

    #[test]
    fn script_feeds_its_code_to_the_named_interpreter() {
        let script = Script::new("script", "print(1)", Purpose::Code)
            .with_option("interpreter", "/usr/bin/python3");
        assert_eq!(
            Sh::command_line(&script).expect("valid"),
            CommandLine::new("/usr/bin/python3").stdin("print(1)")
        );
        let relative =
            Script::new("script", "x", Purpose::Code).with_option("interpreter", "python3");
        assert!(
            Sh::command_line(&relative)
                .expect_err("relative")
                .to_string()
                .contains("/usr/bin/python3")
        );
    }

    #[test]
    fn an_argv_command_needs_an_absolute_program() {
        let problems = Scripts::validate(&exec(vec!["echo", "hi"]));
        assert!(problems[0].contains("/usr/bin/echo"), "{problems:?}");
        assert!(Scripts::validate(&exec(vec!["/bin/echo", "hi"])).is_empty());
    }

    #[test]
    fn a_sensitive_interpreter_command_hands_its_code_on_standard_input() {
        let secret = |value: &str| Value::Sensitive(Box::new(value.into()));
        let shell = |code: &str| {
            exec(Value::Array(vec![
                "/bin/sh".into(),
                "-c".into(),
                secret(code),
            ]))
        };
        assert!(Scripts::validate(&shell("true")).is_empty());
        // It runs: the shell reads the code on standard input.
        assert_eq!(
            Scripts::apply(&shell("test \"$((6 * 7))\" = 42"), &[]),
            Ok(())
        );
        let error = Scripts::apply(&shell("exit 3 # hunter2"), &[]).expect_err("3");
        assert!(!error.message().contains("hunter2"), "{error}");
        // A whole array made sensitive holds the program too: refused.
        let whole = exec(Value::Sensitive(Box::new(
            vec!["/bin/sh", "-c", "exit 0"].into(),
        )));
        assert!(Scripts::validate(&whole)[0].contains("standard input"));
        // Anything after the code would stay on the command line: refused.
        let more = exec(Value::Array(vec![
            "/bin/sh".into(),
            "-c".into(),
            secret("echo $1"),
            "name".into(),
            "arg".into(),
        ]));
        assert!(Scripts::validate(&more)[0].contains("standard input"));
    }

    #[test]
    fn a_sensitive_argument_list_is_refused() {
        let whole = exec(Value::Sensitive(Box::new(
            vec!["/bin/echo", "hunter2"].into(),
        )));
        let problems = Scripts::validate(&whole);
        assert!(
            problems[0].contains("readable by every local user"),
            "{problems:?}"
        );
        let part = exec(Value::Array(vec![
            "/bin/echo".into(),
            Value::Sensitive(Box::new("hunter2".into())),
        ]));
        assert!(Scripts::validate(&part)[0].contains("standard input"));
    }

    #[test]
    fn environment_accepts_puppet_strings_and_hashes() {
        let bad = exec("true").with("environment", vec!["NOVALUE"]);
        assert!(Scripts::validate(&bad)[0].contains("NAME=value"));
        let good = exec("true").with("environment", vec!["A=1", "B=x=y"]);
        assert!(Scripts::validate(&good).is_empty());
    }

    #[test]
    fn refreshonly_and_creates_mean_no_change() {
        let state = State::new().with("returns", "notrun");
        let refreshonly = exec("true").with("refreshonly", true);
        assert!(
            Scripts::plan(&refreshonly, &state)
                .expect("plan")
                .is_empty()
        );
        let created = State::new().with("creates_exists", true);
        assert!(
            Scripts::plan(&exec("true"), &created)
                .expect("plan")
                .is_empty()
        );
        assert_eq!(Scripts::plan(&exec("true"), &state).expect("plan").len(), 1);
    }

    #[test]
    fn native_run_checks_returns_and_logs_output_on_failure() {
        assert_eq!(Scripts::apply(&exec("exit 0"), &[]), Ok(()));
        let error = Scripts::apply(&exec("echo oops; exit 3"), &[]).expect_err("3");
        assert_eq!(
            error.message(),
            "`echo oops; exit 3` returned 3 instead of one of [0]"
        );
        let logs = log::take_captured();
        assert!(
            logs.iter().any(|(_, message)| message == "stdout: oops"),
            "{logs:?}"
        );
        let accepted = exec("exit 3").with("returns", vec![0i64, 3]);
        assert_eq!(Scripts::apply(&accepted, &[]), Ok(()));
    }

    #[test]
    fn native_run_kills_at_the_timeout() {
        let slow = exec("sleep 5").with("timeout", 0.2);
        let error = Scripts::apply(&slow, &[]).expect_err("times out");
        assert!(
            error
                .message()
                .contains("ran past its timeout of 0.2 seconds"),
            "{error}"
        );
    }

    #[test]
    fn a_guard_runs_in_its_cwd_with_its_path() {
        let mut script = Script::new(
            "sh",
            "test \"$PWD\" = /tmp && test \"$PATH\" = /bin",
            Purpose::Guard,
        );
        script.cwd = Some("/tmp".to_owned());
        script.path = vec!["/bin".to_owned()];
        let output = run::<Sh>(&script).expect("runs");
        assert_eq!(output.status, ExitStatus::Exited(0), "{output:?}");
    }
}
