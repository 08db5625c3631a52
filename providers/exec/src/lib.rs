//! The `exec` provider: runs a command, as Puppet's `exec` does.
//!
//! A string command runs through `/bin/sh -c`; an array is the program's argv, whose
//! first element must be an absolute path. The command runs when the resource is
//! applied, unless `creates` exists or `refreshonly` is set; a refreshonly exec runs
//! only when a resource it subscribes to changed. Every launch goes through the host,
//! which checks it against the plugin's policy.

use std::time::Duration;
use wconverge_sdk::process::{Command, ExitStatus, Output};
use wconverge_sdk::{
    Attribute, Change, DataType, Error, PathAccess, Provider, ProviderInfo, Resource, Result,
    State, TypeSchema, Value, export_provider, log,
};

struct ExecProvider;

/// The shell that runs string commands.
const SHELL: &str = "/bin/sh";

/// Puppet's default timeout for an exec, in seconds.
const DEFAULT_TIMEOUT_SECONDS: i64 = 300;

impl Provider for ExecProvider {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("exec", env!("CARGO_PKG_VERSION")).with_type(
            TypeSchema::new(
                "exec",
                "Runs a command when the resource is applied (unless `creates` exists or \
                 `refreshonly` is set) and when it is refreshed.",
            )
            .refreshable()
            .attribute(
                Attribute::new(
                    "command",
                    DataType::OneOf(vec![DataType::String, DataType::array_of(DataType::String)]),
                    "A string run by /bin/sh -c, or an argv array whose first element is \
                     an absolute path. Defaults to the title.",
                )
                .namevar(),
            )
            .attribute(
                Attribute::new("cwd", DataType::String, "Absolute working directory.").parameter(),
            )
            .attribute(
                Attribute::new(
                    "environment",
                    DataType::OneOf(vec![
                        DataType::array_of(DataType::String),
                        DataType::hash_of(DataType::String),
                    ]),
                    "Environment variables, as 'NAME=value' strings or a hash. The \
                     environment starts empty.",
                )
                .parameter(),
            )
            .attribute(Attribute::new("user", DataType::String, "User to run as.").parameter())
            .attribute(Attribute::new("group", DataType::String, "Group to run as.").parameter())
            .attribute(
                Attribute::new("umask", DataType::String, "Umask in octal, like '022'.")
                    .parameter(),
            )
            .attribute(
                Attribute::new(
                    "timeout",
                    DataType::OneOf(vec![DataType::Integer, DataType::Float]),
                    "Seconds before the command's process group is killed.",
                )
                .default(DEFAULT_TIMEOUT_SECONDS)
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "returns",
                    DataType::Integer,
                    "Exit codes that mean success.",
                )
                .many()
                .default(vec![0i64])
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "creates",
                    DataType::String,
                    "A path; when it exists the command does not run.",
                )
                .path_access(PathAccess::Read)
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "refreshonly",
                    DataType::Boolean,
                    "Run only when refreshed by a resource this one subscribes to.",
                )
                .default(false)
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "logoutput",
                    DataType::enumeration(["true", "false", "on_failure"]),
                    "When to log the command's output.",
                )
                .default("on_failure")
                .parameter(),
            ),
        )
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(problem) = argv(resource) {
            problems.push(problem.to_string());
        }
        for attribute in ["cwd", "creates"] {
            if let Some(path) = resource.get_str(attribute)
                && !path.starts_with('/')
            {
                problems.push(format!(
                    "{attribute} `{path}` is not absolute; it must start with `/`"
                ));
            }
        }
        if let Some(umask) = resource.get_str("umask")
            && parse_umask(umask).is_none()
        {
            problems.push(format!("umask `{umask}` is not an octal umask like '022'"));
        }
        if let Err(problem) = environment(resource) {
            problems.push(problem.to_string());
        }
        if let Err(problem) = timeout(resource) {
            problems.push(problem.to_string());
        }
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let mut state = State::new().with("returns", "notrun");
        if let Some(creates) = resource.get_str("creates") {
            state.set("creates_exists", std::fs::symlink_metadata(creates).is_ok());
        }
        Ok(state)
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        if resource.get_bool("refreshonly") == Some(true) {
            return Ok(vec![]);
        }
        if current.get("creates_exists").and_then(Value::as_bool) == Some(true) {
            log::debug(&format!(
                "not running: `{}` exists",
                resource.get_str("creates").unwrap_or_default()
            ));
            return Ok(vec![]);
        }
        let expected = expected_returns(resource);
        Ok(vec![Change::new(
            "returns",
            Some("notrun".into()),
            Some(Value::Array(
                expected.into_iter().map(Value::Integer).collect(),
            )),
            "executed successfully",
        )])
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        run(resource)
    }

    fn refresh(resource: &Resource) -> Result<()> {
        if let Some(creates) = resource.get_str("creates")
            && std::fs::symlink_metadata(creates).is_ok()
        {
            log::debug(&format!("not refreshing: `{creates}` exists"));
            return Ok(());
        }
        run(resource)
    }
}

/// The argv to launch: a string through the shell, an array as it is.
fn argv(resource: &Resource) -> Result<Vec<String>> {
    match resource.get("command").map(Value::unwrap_sensitive) {
        Some(Value::String(command)) if command.trim().is_empty() => {
            Err(Error::new("the command is empty"))
        }
        Some(Value::String(command)) => {
            Ok(vec![SHELL.to_owned(), "-c".to_owned(), command.clone()])
        }
        Some(Value::Array(items)) => {
            let argv = items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::new("every element of an argv command must be a string"))?;
            match argv.first() {
                None => Err(Error::new("the argv command is empty")),
                Some(program) if !program.starts_with('/') => Err(Error::new(format!(
                    "`{program}` is not an absolute path; give its full path (like \
                     /usr/bin/{program}) or write the command as a string, which /bin/sh runs"
                ))),
                Some(_) => Ok(argv),
            }
        }
        _ => Err(Error::new(
            "`command` must be a string or an array of strings",
        )),
    }
}

fn parse_umask(umask: &str) -> Option<u32> {
    if umask.is_empty() || umask.len() > 4 {
        return None;
    }
    u32::from_str_radix(umask, 8)
        .ok()
        .filter(|umask| *umask <= 0o777)
}

fn environment(resource: &Resource) -> Result<Vec<(String, String)>> {
    let Some(value) = resource.get("environment") else {
        return Ok(Vec::new());
    };
    match value.unwrap_sensitive() {
        Value::Hash(entries) => entries
            .iter()
            .map(|(name, value)| {
                value
                    .as_str()
                    .map(|value| (name.clone(), value.to_owned()))
                    .ok_or_else(|| Error::new(format!("environment `{name}` must be a string")))
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                let entry = item
                    .as_str()
                    .ok_or_else(|| Error::new("environment entries must be strings"))?;
                entry
                    .split_once('=')
                    .filter(|(name, _)| !name.is_empty())
                    .map(|(name, value)| (name.to_owned(), value.to_owned()))
                    .ok_or_else(|| {
                        Error::new(format!(
                            "environment entry `{entry}` is not of the form NAME=value"
                        ))
                    })
            })
            .collect(),
        Value::String(entry) => entry
            .split_once('=')
            .map(|(name, value)| vec![(name.to_owned(), value.to_owned())])
            .ok_or_else(|| {
                Error::new(format!(
                    "environment entry `{entry}` is not of the form NAME=value"
                ))
            }),
        _ => Err(Error::new("`environment` must be an array or a hash")),
    }
}

fn timeout(resource: &Resource) -> Result<Duration> {
    let seconds = match resource.get("timeout").map(Value::unwrap_sensitive) {
        None => DEFAULT_TIMEOUT_SECONDS as f64,
        Some(Value::Integer(seconds)) => *seconds as f64,
        Some(Value::Float(seconds)) => *seconds,
        Some(_) => return Err(Error::new("`timeout` must be a number of seconds")),
    };
    if !(seconds > 0.0 && seconds <= 86_400.0 * 7.0) {
        return Err(Error::new(format!(
            "timeout `{seconds}` must be more than 0 seconds and at most a week"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn expected_returns(resource: &Resource) -> Vec<i64> {
    let returns: Vec<i64> = resource
        .get("returns")
        .map(|value| {
            value
                .as_list()
                .iter()
                .filter_map(|v| v.as_integer())
                .collect()
        })
        .unwrap_or_default();
    if returns.is_empty() { vec![0] } else { returns }
}

/// How the report names the command: the string, or the argv joined.
fn display(resource: &Resource) -> String {
    match resource.get("command") {
        Some(value) if value.is_sensitive() => "[sensitive command]".to_owned(),
        Some(Value::String(command)) => command.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        _ => resource.title.clone(),
    }
}

fn run(resource: &Resource) -> Result<()> {
    let argv = argv(resource)?;
    let timeout = timeout(resource)?;
    let mut command = Command::new(&argv[0]).args(&argv[1..]).timeout(timeout);
    for (name, value) in environment(resource)? {
        command = command.env(&name, &value);
    }
    if let Some(cwd) = resource.get_str("cwd") {
        command = command.cwd(cwd);
    }
    if let Some(user) = resource.get_str("user") {
        command = command.user(user);
    }
    if let Some(group) = resource.get_str("group") {
        command = command.group(group);
    }
    if let Some(umask) = resource.get_str("umask").and_then(parse_umask) {
        command = command.umask(umask);
    }
    let output = command.run()?;
    let expected = expected_returns(resource);
    let success =
        matches!(output.status, ExitStatus::Exited(code) if expected.contains(&i64::from(code)));
    let logoutput = resource.get_str("logoutput").unwrap_or("on_failure");
    if logoutput == "true" || (logoutput == "on_failure" && !success) {
        // The output of a sensitive command may echo any part of it; the host can only
        // redact the whole value, so the output is withheld (as Puppet does).
        if resource.get("command").is_some_and(Value::is_sensitive) {
            log::notice("[the output of a sensitive command is not shown]");
        } else {
            log_output(&output);
        }
    }
    if success {
        return Ok(());
    }
    let shown = display(resource);
    Err(Error::new(match output.status {
        ExitStatus::Exited(code) => {
            format!("`{shown}` returned {code} instead of one of {expected:?}")
        }
        ExitStatus::Signaled(signal) => format!("`{shown}` was killed by signal {signal}"),
        ExitStatus::TimedOut => format!(
            "`{shown}` ran past its timeout of {} seconds; its process group was killed",
            timeout.as_secs_f64()
        ),
    }))
}

fn log_output(output: &Output) {
    for (stream, bytes, truncated) in [
        ("stdout", &output.stdout, output.stdout_truncated),
        ("stderr", &output.stderr, output.stderr_truncated),
    ] {
        for line in String::from_utf8_lossy(bytes).lines() {
            log::notice(&format!("{stream}: {line}"));
        }
        if truncated {
            log::notice(&format!("{stream}: [output truncated at the host's cap]"));
        }
    }
}

export_provider!(ExecProvider);

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(command: impl Into<Value>) -> Resource {
        Resource::new("exec", "test").with("command", command)
    }

    #[test]
    fn a_string_command_runs_through_the_shell() {
        assert_eq!(
            argv(&exec("echo hi")).expect("valid"),
            vec!["/bin/sh", "-c", "echo hi"]
        );
    }

    #[test]
    fn an_argv_command_needs_an_absolute_program() {
        let error = argv(&exec(vec!["echo", "hi"])).expect_err("relative program");
        assert!(error.message().contains("/usr/bin/echo"), "{error}");
        assert_eq!(
            argv(&exec(vec!["/bin/echo", "hi"])).expect("valid"),
            vec!["/bin/echo", "hi"]
        );
    }

    #[test]
    fn environment_accepts_puppet_strings_and_hashes() {
        let resource = exec("true").with("environment", vec!["A=1", "B=x=y"]);
        assert_eq!(
            environment(&resource).expect("valid"),
            vec![
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "x=y".to_owned())
            ]
        );
        let bad = exec("true").with("environment", vec!["NOVALUE"]);
        assert!(ExecProvider::validate(&bad)[0].contains("NAME=value"));
    }

    #[test]
    fn refreshonly_and_creates_mean_no_change() {
        let state = State::new().with("returns", "notrun");
        let refreshonly = exec("true").with("refreshonly", true);
        assert!(
            ExecProvider::plan(&refreshonly, &state)
                .expect("plan")
                .is_empty()
        );
        let created = State::new().with("creates_exists", true);
        assert!(
            ExecProvider::plan(&exec("true"), &created)
                .expect("plan")
                .is_empty()
        );
        assert_eq!(
            ExecProvider::plan(&exec("true"), &state)
                .expect("plan")
                .len(),
            1
        );
    }

    #[test]
    fn native_run_checks_returns_and_logs_output_on_failure() {
        assert_eq!(run(&exec("exit 0")), Ok(()));
        let error = run(&exec("echo oops; exit 3")).expect_err("3 is not expected");
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
        assert_eq!(run(&accepted), Ok(()));
    }

    #[test]
    fn native_run_kills_at_the_timeout() {
        let slow = exec("sleep 5").with("timeout", 0.2);
        let error = run(&slow).expect_err("times out");
        assert!(
            error
                .message()
                .contains("ran past its timeout of 0.2 seconds"),
            "{error}"
        );
    }
}
