//! Launching programs through the host, the only way a plugin can.
//!
//! The host checks each command against the plugin's policy (the program must be an
//! allowlisted absolute path; no `PATH` lookup; no `PATH`, `LD_*` or `DYLD_*` in the
//! environment unless granted), runs it in a session of its own with only standard input,
//! output and error open, kills it with everything it started at the timeout, and caps
//! the captured output. Compiled for the machine's own target
//! (unit tests), commands run directly on the machine without those checks.

use crate::Error;
use std::time::Duration;

/// A program to run, built with chained calls.
///
/// ```no_run
/// use wconverge_sdk::process::Command;
/// let output = Command::new("/bin/sh").arg("-c").arg("echo hi").run()?;
/// assert!(output.success());
/// # Ok::<(), wconverge_sdk::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Command {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) cwd: Option<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) user: Option<String>,
    pub(crate) group: Option<String>,
    pub(crate) umask: Option<u32>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) stdin: Option<Vec<u8>>,
    pub(crate) architecture: Option<String>,
}

impl Command {
    /// Runs `program`, an absolute path.
    pub fn new(program: &str) -> Self {
        Command {
            program: program.to_owned(),
            ..Command::default()
        }
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

    /// Runs in `cwd`.
    pub fn cwd(mut self, cwd: &str) -> Self {
        self.cwd = Some(cwd.to_owned());
        self
    }

    /// Sets one environment variable (the environment starts empty).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Runs as this user (name or numeric id).
    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.to_owned());
        self
    }

    /// Runs with this group (name or numeric id).
    pub fn group(mut self, group: &str) -> Self {
        self.group = Some(group.to_owned());
        self
    }

    /// Runs with this file mode creation mask.
    pub fn umask(mut self, umask: u32) -> Self {
        self.umask = Some(umask);
        self
    }

    /// Kills the program, with everything it started, after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Feeds `stdin` to the program.
    pub fn stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }

    /// Runs the program as a process of `architecture` (`i686`, `x86_64`...); the host's
    /// launcher plugin decides how (a 32-bit personality, another build of the program).
    pub fn architecture(mut self, architecture: &str) -> Self {
        self.architecture = Some(architecture.to_owned());
        self
    }

    /// Runs the program to completion. An `Err` means it did not run; a program that ran
    /// and failed is an `Ok` whose [`Output::status`] says so.
    pub fn run(&self) -> Result<Output, LaunchError> {
        imp::run(self)
    }
}

/// Why a program did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchError {
    /// The policy refused it; the message says what would allow it.
    Refused(String),
    /// The program (or the wrapper the architecture needs) does not exist.
    NotFound(String),
    /// It exists but could not be started.
    Failed(String),
}

impl LaunchError {
    /// The host's message.
    pub fn message(&self) -> &str {
        match self {
            LaunchError::Refused(message)
            | LaunchError::NotFound(message)
            | LaunchError::Failed(message) => message,
        }
    }
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl From<LaunchError> for Error {
    fn from(error: LaunchError) -> Self {
        Error::new(error.message())
    }
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited with this code.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
    /// Ran past its timeout and was killed.
    TimedOut,
}

/// What a program did.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// Captured standard output (up to the host's cap).
    pub stdout: Vec<u8>,
    /// Captured standard error (up to the host's cap).
    pub stderr: Vec<u8>,
    /// Standard output went past the cap; the rest was discarded.
    pub stdout_truncated: bool,
    /// Standard error went past the cap; the rest was discarded.
    pub stderr_truncated: bool,
    /// How long it ran.
    pub duration: Duration,
}

impl Output {
    /// It exited with code 0.
    pub fn success(&self) -> bool {
        self.status == ExitStatus::Exited(0)
    }

    /// Its exit code, if it exited.
    pub fn exit_code(&self) -> Option<i32> {
        match self.status {
            ExitStatus::Exited(code) => Some(code),
            _ => None,
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::{Command, ExitStatus, LaunchError, Output};
    use crate::wit::wconverge::plugin::process as wit;
    use std::time::Duration;

    pub(super) fn run(command: &Command) -> Result<Output, LaunchError> {
        let request = wit::Command {
            program: command.program.clone(),
            args: command.args.clone(),
            cwd: command.cwd.clone(),
            env: command.env.clone(),
            user: command.user.clone(),
            group: command.group.clone(),
            umask: command.umask,
            timeout_ms: command
                .timeout
                .map(|timeout| u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            stdin: command.stdin.clone(),
            architecture: command.architecture.clone(),
        };
        let output = wit::run(&request).map_err(|error| match error {
            wit::LaunchError::Refused(message) => LaunchError::Refused(message),
            wit::LaunchError::NotFound(message) => LaunchError::NotFound(message),
            wit::LaunchError::Failed(message) => LaunchError::Failed(message),
        })?;
        Ok(Output {
            status: match output.status {
                wit::ExitStatus::Exited(code) => ExitStatus::Exited(code),
                wit::ExitStatus::Signaled(signal) => ExitStatus::Signaled(signal),
                wit::ExitStatus::TimedOut => ExitStatus::TimedOut,
            },
            stdout: output.stdout,
            stderr: output.stderr,
            stdout_truncated: output.stdout_truncated,
            stderr_truncated: output.stderr_truncated,
            duration: Duration::from_millis(output.duration_ms),
        })
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{Command, ExitStatus, LaunchError, Output};
    use std::io::Write;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    /// Runs the command on the machine, for unit tests of a provider's logic.
    pub(super) fn run(command: &Command) -> Result<Output, LaunchError> {
        if command.user.is_some() || command.group.is_some() || command.umask.is_some() {
            return Err(LaunchError::Refused(
                "the native test harness runs commands as the test's own user and umask".to_owned(),
            ));
        }
        if command.architecture.is_some() {
            return Err(LaunchError::Refused(
                "the native test harness has no launcher; an architecture is applied by the \
                 host"
                    .to_owned(),
            ));
        }
        let mut process = std::process::Command::new(&command.program);
        process
            .args(&command.args)
            .env_clear()
            .envs(command.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &command.cwd {
            process.current_dir(cwd);
        }
        let started = Instant::now();
        let mut child = process.spawn().map_err(|error| {
            let message = format!("cannot run `{}`: {error}", command.program);
            if error.kind() == std::io::ErrorKind::NotFound {
                LaunchError::NotFound(message)
            } else {
                LaunchError::Failed(message)
            }
        })?;
        if let Some(mut stdin) = child.stdin.take() {
            let input = command.stdin.clone().unwrap_or_default();
            // A program that exits without reading its input closes the pipe; that is
            // its business, not an error of the launch.
            let _ = stdin.write_all(&input);
        }
        let deadline = command.timeout.map(|timeout| started + timeout);
        loop {
            if child
                .try_wait()
                .map_err(|error| LaunchError::Failed(error.to_string()))?
                .is_some()
            {
                break;
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Output {
                    status: ExitStatus::TimedOut,
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                    stdout_truncated: false,
                    stderr_truncated: false,
                    duration: started.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let output = child
            .wait_with_output()
            .map_err(|error| LaunchError::Failed(error.to_string()))?;
        let status = match output.status.code() {
            Some(code) => ExitStatus::Exited(code),
            None => {
                use std::os::unix::process::ExitStatusExt;
                ExitStatus::Signaled(output.status.signal().unwrap_or(0))
            }
        };
        Ok(Output {
            status,
            stdout: output.stdout,
            stderr: output.stderr,
            stdout_truncated: false,
            stderr_truncated: false,
            duration: started.elapsed(),
        })
    }
}
