//! Launching programs for plugins: the policy check, then the launch with an empty
//! environment, in a session of its own (no controlling terminal), with only standard
//! input, output and error open, a wall-clock timeout that kills it with all its
//! descendants, and capped output.
//!
//! Isolation, set up in the child before exec (`spawn`):
//! - a cgroup of its own where a cgroup2 hierarchy is writable (`LaunchCgroup`);
//! - a new session: the program has no controlling terminal, so it cannot push input
//!   into the operator's terminal (`TIOCSTI`) or read from it;
//! - every descriptor above 2 is closed at exec, whatever wconverge inherited;
//! - it is a child subreaper, so what it starts and abandons (a daemon that called
//!   `setsid`) stays among its descendants, and the kill at the deadline finds it;
//! - it gets `SIGKILL` if wconverge dies.
//!
//! At the deadline, or when wconverge is interrupted, its cgroup is killed, then what
//! /proc shows of its tree (`kill_tree`). A program that exits in time may leave
//! descendants running (a service it started): they are not killed, and the run does
//! not wait for the output they hold past the deadline.

use crate::arguments::display_args;
use crate::bindings::process as wit;
use crate::policy::{PluginPolicy, Principals, ProgramGrant, dangerous_variable};
use std::path::{Component, Path};
use std::sync::Arc;
use std::time::Duration;

pub(crate) use wconverge_launch::Programs;
use wconverge_launch::{Pinned, Wrapped};

/// Where a program named without a path is found when the environment has no PATH.
const DEFAULT_PATH: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// What the phase of the call allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Launch {
    /// No programs at all (describe, validate).
    Never,
    /// Only programs the policy marks as queries (current state, plan, noop).
    QueriesOnly,
    /// Any program the policy allows (apply, refresh).
    Allowed,
}

/// How a program is run as another architecture: what the launcher plugin says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    /// In words: `32-bit personality (setarch i686)`.
    pub(crate) how: String,
    /// What provides `program`: `setarch, from util-linux`.
    pub(crate) provided_by: String,
}

/// The launcher plugin, as the process check sees it.
pub(crate) trait Launcher: Send + Sync {
    /// The launcher's policy entry: a wrapper it chooses must be on its allowlist.
    fn policy(&self) -> &PluginPolicy;

    /// How to run `program` with `args` as `architecture` on this machine.
    fn route(&self, program: &str, args: &[String], architecture: &str) -> Result<Route, String>;
}

/// The launcher slot of a run: a launcher, or why there is none.
pub(crate) type LauncherSlot = Result<std::sync::Arc<dyn Launcher>, String>;

/// The message of a launch error.
pub(crate) fn message(error: &wit::LaunchError) -> &str {
    match error {
        wit::LaunchError::Refused(message)
        | wit::LaunchError::NotFound(message)
        | wit::LaunchError::Failed(message) => message,
    }
}

/// A request that passed the policy, ready to run.
pub(crate) struct Checked {
    /// The architecture and the launcher's way to provide it, for messages.
    route: Option<(String, Route)>,
    program: String,
    args: Vec<String>,
    cwd: Option<String>,
    env: Vec<(String, String)>,
    uid: Option<u32>,
    gid: Option<u32>,
    umask: Option<u32>,
    timeout: Duration,
    stdin: Vec<u8>,
    output_cap: usize,
    /// The file that will run, opened when the request was checked: the launch runs
    /// exactly it, whatever happens to the path in between.
    file: Option<Arc<Pinned>>,
    /// The policy trusts this program by name although others may write it.
    others_may_write: bool,
}

impl Checked {
    /// The file that runs, after symlinks.
    pub(crate) fn resolved(&self) -> Option<String> {
        self.file.as_ref().map(|file| file.resolved().to_owned())
    }

    /// The command line that runs when the launcher changed it (a wrapper such as
    /// `setarch i686 /bin/sh -c ...`), with `scrub` applied to each element.
    pub(crate) fn launched(&self, scrub: &dyn Fn(&str) -> String) -> Option<String> {
        self.route.as_ref()?;
        let mut line = vec![scrub(&self.program)];
        line.extend(self.args.iter().map(|arg| scrub(arg)));
        Some(display_args(&line, 4096))
    }
}

fn normalized_absolute(path: &str) -> bool {
    let parsed = Path::new(path);
    parsed.is_absolute()
        && !parsed
            .components()
            .any(|component| matches!(component, Component::CurDir | Component::ParentDir))
}

/// Checks a request against the plugin's policy and, when it names an architecture,
/// routes it through the launcher; the error says what was refused and what would
/// allow it.
#[cfg(test)]
pub(crate) fn check<'l>(
    policy: &PluginPolicy,
    launch: Launch,
    command: &wit::Command,
    launcher: impl FnOnce() -> Option<&'l LauncherSlot>,
) -> Result<Checked, wit::LaunchError> {
    check_scrubbed(
        policy,
        launch,
        command,
        launcher,
        &|text| text.to_owned(),
        &Programs::unnamed(),
    )
}

/// [`check`], with `scrub` applied to every argument a refusal quotes (a resource's
/// secrets are removed before the arguments are quoted and cut, which would hide them
/// from a later scrub); the program that will run is opened (or found open) in
/// `programs`.
pub(crate) fn check_scrubbed<'l>(
    policy: &PluginPolicy,
    launch: Launch,
    command: &wit::Command,
    launcher: impl FnOnce() -> Option<&'l LauncherSlot>,
    scrub: &dyn Fn(&str) -> String,
    programs: &Programs,
) -> Result<Checked, wit::LaunchError> {
    let mut checked =
        check_policy(policy, launch, command, scrub).map_err(wit::LaunchError::Refused)?;
    if let Some(architecture) = &command.architecture {
        // Loaded only now, for a launch the policy allows.
        let launcher = match launcher() {
            Some(Ok(launcher)) => launcher,
            Some(Err(why)) => {
                return Err(wit::LaunchError::Failed(format!(
                    "cannot run `{}` as `{architecture}`: {why}",
                    command.program
                )));
            }
            None => {
                return Err(wit::LaunchError::Failed(format!(
                    "cannot run `{}` as `{architecture}`: no launcher was given",
                    command.program
                )));
            }
        };
        let route = launcher
            .route(&checked.program, &checked.args, architecture)
            .map_err(|why| {
                wit::LaunchError::Failed(format!("architecture `{architecture}`: {why}"))
            })?;
        if route.program == checked.program && route.args == checked.args {
            // The machine runs it as it is: pinned like any other launch.
            checked.file = Some(
                programs
                    .pin(&checked.program, checked.others_may_write)
                    .map_err(launch_error)?,
            );
            return Ok(checked);
        }
        check_route(policy, launcher.policy(), launch, &checked, &route)
            .map_err(wit::LaunchError::Refused)?;
        // A wrapper that exists would hide a missing program behind its own exit code
        // (setarch exits 127 or 126): a program that is missing or not executable is
        // reported as such, before the launch.
        let runs = if route.args == checked.args {
            &route.program
        } else {
            &checked.program
        };
        match std::fs::metadata(runs) {
            Err(_) => {
                return Err(wit::LaunchError::NotFound(format!(
                    "cannot launch `{runs}`: it does not exist"
                )));
            }
            Ok(metadata)
                if !metadata.is_file()
                    || std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o111
                        == 0 =>
            {
                return Err(wit::LaunchError::Failed(format!(
                    "cannot launch `{runs}`: it is not an executable file"
                )));
            }
            Ok(_) => {}
        }
        checked.program = route.program.clone();
        checked.args = route.args.clone();
        checked.route = Some((architecture.clone(), route));
        // The launcher's program: trusted only as the machine's own files are.
        checked.others_may_write = false;
    }
    checked.file = Some(
        programs
            .pin(&checked.program, checked.others_may_write)
            .map_err(launch_error)?,
    );
    Ok(checked)
}

/// A launcher may do two things: run another build of the same program (the same file
/// name, elsewhere: `SysWOW64` for `System32`) with the same arguments, which the
/// plugin's own allowlist must allow; or wrap the original command line in a program of
/// its own allowlist with a few plain options (`setarch i686 /bin/sh -c ...`). It may
/// not rewrite the command, and in a call that only inspects, both must be queries.
fn check_route(
    policy: &PluginPolicy,
    launcher: &PluginPolicy,
    launch: Launch,
    checked: &Checked,
    route: &Route,
) -> Result<(), String> {
    let granted = |policy: &PluginPolicy| {
        normalized_absolute(&route.program)
            && policy.programs.iter().any(|grant| {
                grant.pattern.matches(Path::new(&route.program))
                    && grant.allows_args(&route.args)
                    && (launch != Launch::QueriesOnly || grant.query)
            })
    };
    let file_name = |program: &str| program.rsplit(['/', '\\']).next().map(str::to_owned);
    if route.args == checked.args {
        if file_name(&route.program) != file_name(&checked.program) {
            return Err(format!(
                "the launcher `{}` runs `{}` instead of `{}`, which is another program, not \
                 another build of it; refusing to run it",
                launcher.name, route.program, checked.program
            ));
        }
        if granted(policy) {
            return Ok(());
        }
        return Err(format!(
            "the launcher runs `{}` instead of `{}` ({}), which is not on the allowlist of \
             plugin `{}`; add it to `programs` of [plugins.{}] in the policy",
            route.program, checked.program, route.how, policy.name, policy.name
        ));
    }
    let kept = checked.args.len() + 1;
    let wraps = route.args.len() >= kept
        && route.args[route.args.len() - kept] == checked.program
        && route.args[route.args.len() - checked.args.len()..] == checked.args[..];
    let options = &route.args[..route.args.len().saturating_sub(kept)];
    let plain = |option: &String| {
        !option.is_empty()
            && option
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    };
    // `setarch` runs its first operand that is not an option as the program, looked up
    // in the default PATH: an option may not name a program there, unless it is the
    // wrapper itself under another name (`linux32` is setarch).
    let wrapper = std::fs::canonicalize(&route.program).ok();
    let names_a_program = |option: &String| {
        DEFAULT_PATH.iter().any(|dir| {
            let candidate = Path::new(dir).join(option);
            candidate.exists() && std::fs::canonicalize(&candidate).ok() != wrapper
        })
    };
    if !wraps
        || options.len() > 4
        || !options.iter().all(plain)
        || options.iter().any(names_a_program)
    {
        return Err(format!(
            "the launcher `{}` changed the command line of `{}` instead of wrapping it with a \
             few plain options; refusing to run it",
            launcher.name, checked.program
        ));
    }
    if !granted(launcher) {
        return Err(format!(
            "the launcher wraps `{}` in `{}` ({}), which is not on the allowlist of plugin \
             `{}`; add it to `programs` of [plugins.{}] in the policy",
            checked.program, route.program, route.how, launcher.name, launcher.name
        ));
    }
    Ok(())
}

fn check_policy(
    policy: &PluginPolicy,
    launch: Launch,
    command: &wit::Command,
    scrub: &dyn Fn(&str) -> String,
) -> Result<Checked, String> {
    let plugin = &policy.name;
    let program = &command.program;
    if launch == Launch::Never {
        return Err(format!(
            "plugin `{plugin}` may not launch programs while describing or validating"
        ));
    }
    if !normalized_absolute(program) {
        return Err(format!(
            "program `{program}` is not an absolute path; plugins name programs by absolute \
             path (there is no PATH lookup)"
        ));
    }
    let by_path: Vec<&ProgramGrant> = policy
        .programs
        .iter()
        .filter(|grant| grant.pattern.matches(Path::new(program)))
        .collect();
    if by_path.is_empty() {
        return Err(format!(
            "program `{program}` is not on the allowlist of plugin `{plugin}`; add it to \
             `programs` of [plugins.{plugin}] in the policy"
        ));
    }
    let by_args: Vec<&ProgramGrant> = by_path
        .iter()
        .copied()
        .filter(|grant| grant.allows_args(&command.args))
        .collect();
    if by_args.is_empty() {
        return Err(arguments_refused(
            plugin,
            program,
            &command.args,
            &by_path,
            scrub,
        ));
    }
    let others_may_write = by_args.iter().any(|grant| grant.others_may_write);
    if launch == Launch::QueriesOnly && !by_args.iter().any(|grant| grant.query) {
        return Err(format!(
            "program `{program}` may run only when changes are applied; this call only \
             inspects (mark it `query = true` in the policy if it changes nothing)"
        ));
    }
    for (name, _) in &command.env {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(format!("`{name}` is not an environment variable name"));
        }
        if !policy.environment.allows(name) {
            let how = if dangerous_variable(name) {
                format!("it decides what code runs: grant `{name}` by name")
            } else {
                format!("grant `{name}` (or `*`)")
            };
            return Err(format!(
                "environment variable `{name}` may not be set by plugin `{plugin}`; {how} in \
                 `environment` of [plugins.{plugin}] in the policy if you must"
            ));
        }
    }
    if let Some(cwd) = &command.cwd
        && !normalized_absolute(cwd)
    {
        return Err(format!("working directory `{cwd}` is not an absolute path"));
    }
    // A launch that names no user runs as the policy's `run_as`, which needs no entry
    // in `users`: the plugin did not choose it.
    let user = match (command.user.as_deref(), policy.run_as.as_deref()) {
        (Some(user), _) => Some(resolve_user(user, &policy.users, plugin)?),
        (None, Some(user)) => Some(resolve_user(user, &Principals::Any, plugin)?),
        (None, None) => None,
    };
    let user_name = command.user.as_deref().or(policy.run_as.as_deref());
    let uid = user.map(|(uid, _)| uid);
    let gid = match command.group.as_deref() {
        Some(group) => Some(resolve_group(group, &policy.groups, plugin)?),
        // Running as a user without naming a group means the user's primary group.
        None => user.map(|(_, primary_gid)| primary_gid),
    };
    let euid = rustix::process::geteuid().as_raw();
    if euid != 0 {
        if uid.is_some_and(|uid| uid != euid) {
            return Err(format!(
                "cannot run `{program}` as user `{}`: wconverge runs as uid {euid}, not root",
                user_name.unwrap_or_default()
            ));
        }
        let egid = rustix::process::getegid().as_raw();
        if gid.is_some_and(|gid| gid != egid) {
            return Err(format!(
                "cannot run `{program}` with group `{}`: wconverge runs as gid {egid}, not root",
                command.group.as_deref().unwrap_or_default()
            ));
        }
    }
    if let Some(umask) = command.umask
        && umask > 0o777
    {
        return Err(format!("umask {umask:o} is not a umask"));
    }
    let limit = Duration::from_secs(policy.limits.process_timeout_seconds);
    let timeout = command
        .timeout_ms
        .map(Duration::from_millis)
        .map_or(limit, |requested| requested.min(limit));
    Ok(Checked {
        route: None,
        program: program.clone(),
        args: command.args.clone(),
        cwd: command.cwd.clone(),
        env: command.env.clone(),
        uid,
        gid,
        umask: command.umask,
        timeout,
        stdin: command.stdin.clone().unwrap_or_default(),
        output_cap: policy.limits.output_bytes,
        file: None,
        others_may_write,
    })
}

/// Why a program on the allowlist may not get these arguments: the first one that fits
/// no pattern, and the patterns the policy has.
fn arguments_refused(
    plugin: &str,
    program: &str,
    args: &[String],
    grants: &[&ProgramGrant],
    scrub: &dyn Fn(&str) -> String,
) -> String {
    let patterns: Vec<_> = grants
        .iter()
        .filter_map(|grant| grant.args.as_ref())
        .flatten()
        .collect();
    // The argument that went furthest before failing names the problem; a pattern
    // that only wanted more arguments counts when no argument failed.
    let mismatches: Vec<usize> = patterns
        .iter()
        .filter_map(|pattern| pattern.mismatch(args))
        .collect();
    let first_bad = mismatches
        .iter()
        .copied()
        .filter(|&at| at < args.len())
        .max()
        .or_else(|| mismatches.iter().copied().max())
        .unwrap_or(0);
    let args: Vec<String> = args.iter().map(|arg| scrub(arg)).collect();
    let args = args.as_slice();
    let at = match args.get(first_bad) {
        Some(argument) => format!(
            "argument {} `{}` fits no pattern",
            first_bad + 1,
            display_args(std::slice::from_ref(argument), 120)
        ),
        None => "the arguments stop short of every pattern".to_owned(),
    };
    let allowed = patterns
        .iter()
        .map(|pattern| format!("`{program} {pattern}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "plugin `{plugin}` may not run `{program} {}`: {at}; the policy allows only {allowed} \
         (add a pattern to `args` of this program in [plugins.{plugin}] if it is safe)",
        display_args(args, 200)
    )
}

/// Why a user or group could not be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PrincipalError {
    /// The database has no such entry; `kind` is `user` or `group`.
    Unknown { kind: &'static str, name: String },
    /// The database could not be read.
    Lookup {
        kind: &'static str,
        name: String,
        error: nix::errno::Errno,
    },
}

impl std::fmt::Display for PrincipalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrincipalError::Unknown { kind, name } => write!(f, "{kind} `{name}` does not exist"),
            PrincipalError::Lookup { kind, name, error } => {
                write!(f, "cannot look up {kind} `{name}`: {error}")
            }
        }
    }
}

impl std::error::Error for PrincipalError {}

/// The entry `found` by looking up `name` in the `kind` database.
fn principal<T>(
    kind: &'static str,
    name: &str,
    found: nix::Result<Option<T>>,
) -> Result<T, PrincipalError> {
    match found {
        Ok(Some(entry)) => Ok(entry),
        Ok(None) => Err(PrincipalError::Unknown {
            kind,
            name: name.to_owned(),
        }),
        Err(error) => Err(PrincipalError::Lookup {
            kind,
            name: name.to_owned(),
            error,
        }),
    }
}

/// The user named `user` (a name or a numeric id) in the user database.
pub(crate) fn lookup_user(user: &str) -> Result<nix::unistd::User, PrincipalError> {
    let found = match user.parse::<u32>() {
        Ok(uid) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)),
        Err(_) => nix::unistd::User::from_name(user),
    };
    principal("user", user, found)
}

/// The group named `group` (a name or a numeric id) in the group database.
pub(crate) fn lookup_group(group: &str) -> Result<nix::unistd::Group, PrincipalError> {
    let found = match group.parse::<u32>() {
        Ok(gid) => nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)),
        Err(_) => nix::unistd::Group::from_name(group),
    };
    principal("group", group, found)
}

/// The uid and primary gid of a user the policy allows.
fn resolve_user(user: &str, allowed: &Principals, plugin: &str) -> Result<(u32, u32), String> {
    let entry = lookup_user(user).map_err(|error| error.to_string())?;
    if !allowed.allows(user) && !allowed.allows(&entry.name) {
        return Err(format!(
            "plugin `{plugin}` may not run programs as user `{user}`; add it to `users` of \
             [plugins.{plugin}] in the policy"
        ));
    }
    Ok((entry.uid.as_raw(), entry.gid.as_raw()))
}

fn resolve_group(group: &str, allowed: &Principals, plugin: &str) -> Result<u32, String> {
    let entry = lookup_group(group).map_err(|error| error.to_string())?;
    if !allowed.allows(group) && !allowed.allows(&entry.name) {
        return Err(format!(
            "plugin `{plugin}` may not run programs with group `{group}`; add it to `groups` \
             of [plugins.{plugin}] in the policy"
        ));
    }
    Ok(entry.gid.as_raw())
}

/// Runs a checked request to completion, through the launcher crate, and says how it
/// ended in the plugin's terms.
pub(crate) fn run(checked: Checked) -> Result<wit::Output, wit::LaunchError> {
    let request = wconverge_launch::Request {
        wrapped: checked.route.map(|(architecture, route)| Wrapped {
            architecture,
            how: route.how,
            provided_by: route.provided_by,
        }),
        program: checked.program,
        args: checked.args,
        cwd: checked.cwd,
        env: checked.env,
        uid: checked.uid,
        gid: checked.gid,
        umask: checked.umask,
        timeout: checked.timeout,
        stdin: checked.stdin,
        output_cap: checked.output_cap,
        file: checked.file,
    };
    let output = wconverge_launch::run(request).map_err(launch_error)?;
    Ok(wit::Output {
        status: match output.status {
            wconverge_launch::ExitStatus::Exited(code) => wit::ExitStatus::Exited(code),
            wconverge_launch::ExitStatus::Signaled(signal) => wit::ExitStatus::Signaled(signal),
            wconverge_launch::ExitStatus::TimedOut => wit::ExitStatus::TimedOut,
        },
        stdout: output.stdout,
        stderr: output.stderr,
        stdout_truncated: output.stdout_truncated,
        stderr_truncated: output.stderr_truncated,
        duration_ms: u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX),
    })
}

/// A launcher crate's error as the plugin sees it.
fn launch_error(error: wconverge_launch::Error) -> wit::LaunchError {
    match error {
        wconverge_launch::Error::Refused(message) => wit::LaunchError::Refused(message),
        wconverge_launch::Error::NotFound(message) => wit::LaunchError::NotFound(message),
        wconverge_launch::Error::Failed(message) => wit::LaunchError::Failed(message),
    }
}

#[cfg(test)]
mod tests;
