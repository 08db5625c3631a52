//! A script with its context, the command line that runs it, and the run itself.

use crate::Interpreter;
use crate::types::{ScriptType, timeout_of};
use std::time::Duration;
use wconverge_sdk::process::{Command, ExitStatus, LaunchError, Output};
use wconverge_sdk::wit::wconverge::plugin::process as wit_process;
use wconverge_sdk::{Error, Resource, Result, Value};

/// Why a script runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The code of a script resource.
    Code,
    /// A guard (`only_if`, `not_if`).
    Guard,
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Code {
    /// Text for the interpreter.
    Text(String),
    /// A program and its arguments, run without the interpreter (an `exec` whose
    /// `command` is an array).
    Argv(Vec<String>),
    /// A program and its arguments, with the code it reads on standard input: a
    /// sensitive argv command whose program is an interpreter handed its code
    /// (`['/bin/sh', '-c', CODE]` runs as `/bin/sh -s`, `['/usr/bin/python3', '-c',
    /// CODE]` as `/usr/bin/python3 -`), so the code is on no command line.
    Piped {
        /// The interpreter and the arguments that make it read standard input.
        argv: Vec<String>,
        /// The code, fed on standard input.
        input: String,
    },
}

/// A script and the context it runs in.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// The script type whose rules apply.
    pub type_name: String,
    /// The code.
    pub code: Code,
    /// The code is sensitive: the interpreter must read it on standard input, never
    /// from its arguments (every local user can read a process's arguments in
    /// `/proc/PID/cmdline`). [`run`] refuses a command line that carries it.
    pub sensitive: bool,
    /// Resource code or guard.
    pub purpose: Purpose,
    /// Absolute working directory.
    pub cwd: Option<String>,
    /// The environment (it starts empty).
    pub environment: Vec<(String, String)>,
    /// User to run as.
    pub user: Option<String>,
    /// Group to run as.
    pub group: Option<String>,
    /// File mode creation mask.
    pub umask: Option<u32>,
    /// Directories searched for commands, in order (sets `PATH`).
    pub path: Vec<String>,
    /// Architecture to run the interpreter as.
    pub architecture: Option<String>,
    /// When the script is killed, with everything it started.
    pub timeout: Option<Duration>,
    /// The type's own attributes (`flags`, and those added with
    /// [`ScriptType::option`]).
    pub options: Vec<(String, Value)>,
    /// The host's operating system, as Rust names it (`linux`, `windows`).
    pub os: String,
}

impl Script {
    /// A script of `type_name` with no context (for tests).
    pub fn new(type_name: &str, code: &str, purpose: Purpose) -> Self {
        Script {
            type_name: type_name.to_owned(),
            code: Code::Text(code.to_owned()),
            sensitive: false,
            purpose,
            cwd: None,
            environment: Vec::new(),
            user: None,
            group: None,
            umask: None,
            path: Vec::new(),
            architecture: None,
            timeout: None,
            options: Vec::new(),
            os: std::env::consts::OS.to_owned(),
        }
    }

    /// The script with option `name` set (for tests).
    pub fn with_option(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.options.push((name.to_owned(), value.into()));
        self
    }

    /// The value of one of the type's options, if set.
    pub fn option(&self, name: &str) -> Option<&Value> {
        self.options
            .iter()
            .find(|(option, _)| option == name)
            .map(|(_, value)| value.unwrap_sensitive())
    }

    /// `flags`, split at spaces.
    pub fn flags(&self) -> Vec<String> {
        self.option("flags")
            .and_then(Value::as_str)
            .map(|flags| flags.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// The code as text; an error for an argv command, which only `exec`-like types
    /// accept (they check [`Script::code`] first).
    pub fn text(&self) -> Result<&str> {
        match &self.code {
            Code::Text(text) => Ok(text),
            Code::Argv(_) | Code::Piped { .. } => Err(Error::new(format!(
                "`{}` takes its code as a string, not an array",
                self.type_name
            ))),
        }
    }

    /// The script a resource of `script_type` runs.
    pub(crate) fn from_resource(
        resource: &Resource,
        script_type: &ScriptType,
        purpose: Purpose,
    ) -> Result<Script> {
        let sensitive = resource
            .get(script_type.code_attribute())
            .is_some_and(Value::is_sensitive);
        let code = match resource
            .get(script_type.code_attribute())
            .map(Value::unwrap_sensitive)
        {
            Some(Value::String(text)) if text.trim().is_empty() => {
                return Err(Error::new(format!(
                    "`{}` is empty",
                    script_type.code_attribute()
                )));
            }
            Some(Value::String(text)) => Code::Text(text.clone()),
            Some(Value::Array(items)) if sensitive || items.iter().any(Value::is_sensitive) => {
                // A whole array made sensitive holds the program's path too, which is
                // on every command line: refused.
                match piped(items).filter(|_| !sensitive) {
                    Some((argv, input)) => Code::Piped { argv, input },
                    None => {
                        return Err(Error::new(format!(
                            "a sensitive `{}` given as an argument list would be readable by \
                             every local user while it runs (a command line is public): write \
                             it as a string, which the interpreter reads on standard input, \
                             give it as an interpreter's code alone (`['/bin/sh', '-c', \
                             CODE]`), or pass the secret in `environment`",
                            script_type.code_attribute()
                        )));
                    }
                }
            }
            Some(Value::Array(items)) => {
                let argv = items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        Error::new("every element of an argv command must be a string")
                    })?;
                match argv.first() {
                    None => return Err(Error::new("the argv command is empty")),
                    Some(program) if !program.starts_with('/') => {
                        return Err(Error::new(format!(
                            "`{program}` is not an absolute path; give its full path (like \
                             /usr/bin/{program}) or write the command as a string, which the \
                             interpreter runs"
                        )));
                    }
                    Some(_) => Code::Argv(argv),
                }
            }
            _ => {
                return Err(Error::new(format!(
                    "`{}` must be a string",
                    script_type.code_attribute()
                )));
            }
        };
        if let Some(cwd) = resource.get_str("cwd")
            && !cwd.starts_with('/')
        {
            return Err(Error::new(format!(
                "cwd `{cwd}` is not absolute; it must start with `/`"
            )));
        }
        let umask = match resource.get_str("umask") {
            Some(umask) => Some(parse_umask(umask).ok_or_else(|| {
                Error::new(format!("umask `{umask}` is not an octal umask like '022'"))
            })?),
            None => None,
        };
        let options = script_type
            .option_names()
            .filter_map(|name| {
                resource
                    .get(name)
                    .map(|value| (name.to_owned(), value.clone()))
            })
            .collect();
        Ok(Script {
            type_name: resource.type_name.clone(),
            code,
            sensitive,
            purpose,
            cwd: resource.get_str("cwd").map(str::to_owned),
            environment: environment(resource.get("environment"))?,
            user: resource.get_str("user").map(str::to_owned),
            group: resource.get_str("group").map(str::to_owned),
            umask,
            path: search_path(resource.get("path"))?,
            architecture: resource.get_str("architecture").map(str::to_owned),
            timeout: Some(timeout_of(resource.get("timeout"))?),
            options,
            os: std::env::consts::OS.to_owned(),
        })
    }
}

/// How an interpreter is invoked: the program (with fallbacks), its arguments and its
/// standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// Candidates for the program, tried in order until one exists.
    pub programs: Vec<String>,
    /// The arguments.
    pub args: Vec<String>,
    /// Standard input; empty when `None`.
    pub stdin: Option<Vec<u8>>,
    /// What to tell the operator when no candidate exists (`install PowerShell 7`).
    pub when_missing: Option<String>,
}

impl CommandLine {
    /// Runs `program`, an absolute path.
    pub fn new(program: &str) -> Self {
        CommandLine {
            programs: vec![program.to_owned()],
            args: Vec::new(),
            stdin: None,
            when_missing: None,
        }
    }

    /// What to do when no candidate program exists: `install PowerShell 7 (pwsh)`.
    pub fn when_missing(mut self, hint: &str) -> Self {
        self.when_missing = Some(hint.to_owned());
        self
    }

    /// Tries `program` when the ones before it do not exist.
    pub fn or(mut self, program: &str) -> Self {
        self.programs.push(program.to_owned());
        self
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<S: AsRef<str>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args
            .extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Feeds `stdin` to the interpreter.
    pub fn stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }
}

/// The interpreters an argv command may hand sensitive code to on standard input: the
/// file name of the program, the option that gives code as an argument, and the
/// arguments that make it read its code from standard input instead.
const PIPED_INTERPRETERS: &[(&str, &str, &[&str])] = &[
    ("sh", "-c", &["-s"]),
    ("dash", "-c", &["-s"]),
    ("bash", "-c", &["-s"]),
    ("zsh", "-c", &["-s"]),
    ("ksh", "-c", &["-s"]),
    ("python3", "-c", &["-"]),
    ("python", "-c", &["-"]),
    ("perl", "-e", &["-"]),
    ("ruby", "-e", &["-"]),
];

/// An argv command whose code is sensitive, as an interpreter reading that code on
/// standard input: the command line without the code, and the code. Only
/// `[INTERPRETER, OPTION, CODE]`, with nothing after the code (a shell would take it as
/// `$0` and the arguments, which stay on the command line) and nothing sensitive but
/// the code.
fn piped(items: &[Value]) -> Option<(Vec<String>, String)> {
    let [program, option, code] = items else {
        return None;
    };
    if program.is_sensitive() || option.is_sensitive() {
        return None;
    }
    let program = program.unwrap_sensitive().as_str()?;
    let option = option.unwrap_sensitive().as_str()?;
    let code = code.unwrap_sensitive().as_str()?;
    let name = program.rsplit('/').next()?;
    let (_, _, reading) = PIPED_INTERPRETERS
        .iter()
        .find(|(interpreter, given, _)| *interpreter == name && *given == option)?;
    if !program.starts_with('/') {
        return None;
    }
    let argv = std::iter::once(program)
        .chain(reading.iter().copied())
        .map(str::to_owned)
        .collect();
    Some((argv, code.to_owned()))
}

/// Runs `script` with the interpreter's command line, through the host.
pub fn run<I: Interpreter>(script: &Script) -> Result<Output, LaunchError> {
    let line = match &script.code {
        // An argv command runs its program directly: there is nothing to interpret.
        Code::Argv(argv) => CommandLine::new(&argv[0]).args(&argv[1..]),
        Code::Piped { argv, input } => CommandLine::new(&argv[0])
            .args(&argv[1..])
            .stdin(input.as_bytes()),
        Code::Text(code) => {
            let line =
                I::command_line(script).map_err(|error| LaunchError::Failed(error.to_string()))?;
            if script.sensitive && line.args.iter().any(|arg| arg.contains(code.as_str())) {
                return Err(LaunchError::Failed(format!(
                    "the interpreter of `{}` passes its code as an argument, where every local \
                     user can read it, and this code is sensitive; its author must pass \
                     sensitive code on standard input",
                    script.type_name
                )));
            }
            line
        }
    };
    let mut missing = Vec::new();
    for program in &line.programs {
        let mut command = Command::new(program).args(&line.args);
        for (name, value) in &script.environment {
            command = command.env(name, value);
        }
        if !script.path.is_empty() {
            let separator = if script.os == "windows" { ";" } else { ":" };
            command = command.env("PATH", &script.path.join(separator));
        }
        if let Some(cwd) = &script.cwd {
            command = command.cwd(cwd);
        }
        if let Some(user) = &script.user {
            command = command.user(user);
        }
        if let Some(group) = &script.group {
            command = command.group(group);
        }
        if let Some(umask) = script.umask {
            command = command.umask(umask);
        }
        if let Some(timeout) = script.timeout {
            command = command.timeout(timeout);
        }
        if let Some(architecture) = &script.architecture {
            command = command.architecture(architecture);
        }
        if let Some(stdin) = &line.stdin {
            command = command.stdin(stdin.clone());
        }
        match command.run() {
            Err(LaunchError::NotFound(message)) => missing.push(message),
            other => return other,
        }
    }
    let found = match missing.as_slice() {
        [one] => one.clone(),
        _ => format!("none of {} exists", line.programs.join(", ")),
    };
    Err(LaunchError::NotFound(match &line.when_missing {
        Some(hint) => format!("{found}; {hint}"),
        None => found,
    }))
}

fn parse_umask(umask: &str) -> Option<u32> {
    if umask.is_empty() || umask.len() > 4 {
        return None;
    }
    u32::from_str_radix(umask, 8)
        .ok()
        .filter(|umask| *umask <= 0o777)
}

fn environment(value: Option<&Value>) -> Result<Vec<(String, String)>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let entry = |entry: &str| {
        entry
            .split_once('=')
            .filter(|(name, _)| !name.is_empty())
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .ok_or_else(|| {
                Error::new(format!(
                    "environment entry `{entry}` is not of the form NAME=value"
                ))
            })
    };
    match value.unwrap_sensitive() {
        Value::Hash(entries) => entries
            .iter()
            .map(|(name, value)| {
                value
                    .unwrap_sensitive()
                    .as_str()
                    .map(|value| (name.clone(), value.to_owned()))
                    .ok_or_else(|| Error::new(format!("environment `{name}` must be a string")))
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.unwrap_sensitive()
                    .as_str()
                    .ok_or_else(|| Error::new("environment entries must be strings"))
                    .and_then(entry)
            })
            .collect(),
        Value::String(text) => Ok(vec![entry(text)?]),
        _ => Err(Error::new("`environment` must be an array or a hash")),
    }
}

fn search_path(value: Option<&Value>) -> Result<Vec<String>> {
    let directories: Vec<String> = match value.map(Value::unwrap_sensitive) {
        None => return Ok(Vec::new()),
        Some(Value::String(joined)) => joined
            .split(':')
            .filter(|dir| !dir.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::new("`path` entries must be strings"))
            })
            .collect::<Result<_>>()?,
        Some(_) => return Err(Error::new("`path` must be a string or an array")),
    };
    if let Some(relative) = directories.iter().find(|dir| !dir.starts_with('/')) {
        return Err(Error::new(format!(
            "path entry `{relative}` is not absolute; it must start with `/`"
        )));
    }
    Ok(directories)
}

/// Entry point of the `scripts.info` export.
pub fn info_export<I: Interpreter>()
-> crate::wit::exports::wconverge::plugin::scripts::InterpreterInfo {
    let info = I::info();
    crate::wit::exports::wconverge::plugin::scripts::InterpreterInfo {
        inherits: info.inherits,
        default_on: info.default_on,
    }
}

/// Entry point of the `scripts.run` export.
pub fn run_export<I: Interpreter>(
    script: crate::wit::exports::wconverge::plugin::scripts::Script,
) -> Result<wit_process::Output, wit_process::LaunchError> {
    use crate::wit::exports::wconverge::plugin::scripts as wit;
    let options = wconverge_sdk::__private::attributes_from_wit(script.options)
        .map_err(wit_process::LaunchError::Failed)?;
    let script = Script {
        type_name: script.type_name,
        code: Code::Text(script.code),
        sensitive: script.sensitive,
        purpose: match script.purpose {
            wit::Purpose::Code => Purpose::Code,
            wit::Purpose::Guard => Purpose::Guard,
        },
        cwd: script.cwd,
        environment: script.environment,
        user: script.user,
        group: script.group,
        umask: script.umask,
        path: script.path,
        architecture: script.architecture,
        timeout: script.timeout_ms.map(Duration::from_millis),
        options,
        os: script.os,
    };
    match run::<I>(&script) {
        Ok(output) => Ok(wit_process::Output {
            status: match output.status {
                ExitStatus::Exited(code) => wit_process::ExitStatus::Exited(code),
                ExitStatus::Signaled(signal) => wit_process::ExitStatus::Signaled(signal),
                ExitStatus::TimedOut => wit_process::ExitStatus::TimedOut,
            },
            stdout: output.stdout,
            stderr: output.stderr,
            stdout_truncated: output.stdout_truncated,
            stderr_truncated: output.stderr_truncated,
            duration_ms: u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX),
        }),
        Err(LaunchError::Refused(message)) => Err(wit_process::LaunchError::Refused(message)),
        Err(LaunchError::NotFound(message)) => Err(wit_process::LaunchError::NotFound(message)),
        Err(LaunchError::Failed(message)) => Err(wit_process::LaunchError::Failed(message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_interpreters_code_alone_is_handed_on_standard_input() {
        let secret = |text: &str| Value::Sensitive(Box::new(text.into()));
        let argv = |items: &[&str]| {
            items
                .iter()
                .map(|item| (*item).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            piped(&["/bin/bash".into(), "-c".into(), secret("echo hi")]),
            Some((argv(&["/bin/bash", "-s"]), "echo hi".to_owned()))
        );
        assert_eq!(
            piped(&["/usr/bin/perl".into(), "-e".into(), secret("print 1")]),
            Some((argv(&["/usr/bin/perl", "-"]), "print 1".to_owned()))
        );
        for refused in [
            // Not an interpreter, or not its option for code.
            vec!["/bin/echo".into(), "-c".into(), secret("x")],
            vec!["/bin/sh".into(), "-e".into(), secret("x")],
            // Arguments after the code stay on the command line.
            vec!["/bin/sh".into(), "-c".into(), secret("x"), "y".into()],
            // A relative program.
            vec!["sh".into(), "-c".into(), secret("x")],
            // A secret elsewhere than in the code.
            vec![secret("/bin/sh"), "-c".into(), "x".into()],
        ] {
            assert_eq!(piped(&refused), None, "{refused:?}");
        }
    }
}
