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
use rustix::fd::AsRawFd;
use std::io::{Read, Write};
use std::path::{Component, Path};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Where a program named without a path is found when the environment has no PATH.
const DEFAULT_PATH: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// How long to wait for a program's output after it (or its group) is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

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
    file: Option<Pinned>,
}

/// A program file held open from the check to the launch.
struct Pinned {
    fd: rustix::fd::OwnedFd,
    /// Where it is, after symlinks, when it was opened.
    resolved: String,
    /// A `#!` script: its interpreter opens it again by name, so it runs by name.
    script: bool,
}

impl Checked {
    /// The file that runs, after symlinks.
    pub(crate) fn resolved(&self) -> Option<String> {
        self.file.as_ref().map(|file| file.resolved.clone())
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

/// Names for pinned programs: a private directory (mode 0711, this process's own) of
/// symlinks `N/NAME -> /proc/self/fd/N`. Running a pinned program through such a link
/// runs exactly the file descriptor N holds, and gives the process its own name in `ps`,
/// `top` and the kernel's audit log (the kernel names a process after the last component
/// of the path it was started by, which for `/proc/self/fd/N` would be `N`).
pub(crate) struct ExecNames {
    dir: std::path::PathBuf,
}

impl ExecNames {
    /// A new directory under the temporary directory; `None` if it cannot be made (a
    /// pinned program then runs as `/proc/self/fd/N`, named `N`).
    pub(crate) fn create() -> Option<ExecNames> {
        use std::os::unix::fs::PermissionsExt;
        let template = std::env::temp_dir().join("wconverge-exec-XXXXXX");
        let dir = nix::unistd::mkdtemp(&template).ok()?;
        let names = ExecNames { dir };
        std::fs::set_permissions(&names.dir, std::fs::Permissions::from_mode(0o711)).ok()?;
        Some(names)
    }

    /// A link named like `program` to the file `fd` holds; removed when dropped.
    fn link(&self, fd: i32, program: &str) -> Option<Link> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let name = Path::new(program).file_name()?;
        let slot = self.dir.join(fd.to_string());
        match std::fs::DirBuilder::new().mode(0o711).create(&slot) {
            Ok(()) => {
                std::fs::set_permissions(&slot, std::fs::Permissions::from_mode(0o711)).ok()?;
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        let path = slot.join(name);
        // A link left by an earlier launch with the same descriptor and name.
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(format!("/proc/self/fd/{fd}"), &path).ok()?;
        Some(Link(path))
    }
}

impl Drop for ExecNames {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One program's name in [`ExecNames`], removed when the launch is done.
struct Link(std::path::PathBuf);

impl Drop for Link {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Opens the program that is about to be checked and run, so the launch runs this very
/// file; refuses anything but an executable regular file.
fn pin(program: &str) -> Result<Pinned, wit::LaunchError> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::open(program, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(
        |error| {
            if error == rustix::io::Errno::NOENT {
                wit::LaunchError::NotFound(format!("cannot launch `{program}`: it does not exist"))
            } else {
                wit::LaunchError::Failed(format!("cannot launch `{program}`: {error}"))
            }
        },
    )?;
    let stat = rustix::fs::fstat(&fd)
        .map_err(|error| wit::LaunchError::Failed(format!("cannot launch `{program}`: {error}")))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || stat.st_mode & 0o111 == 0 {
        return Err(wit::LaunchError::Failed(format!(
            "cannot launch `{program}`: it is not an executable file"
        )));
    }
    let link = format!("/proc/self/fd/{}", rustix::fd::AsRawFd::as_raw_fd(&fd));
    let resolved = std::fs::read_link(&link)
        .map_or_else(|_| program.to_owned(), |path| path.display().to_string());
    // A file that cannot be read cannot be a script: its interpreter could not read it.
    let script = std::fs::File::open(&link)
        .and_then(|mut file| {
            let mut magic = [0u8; 2];
            file.read_exact(&mut magic).map(|()| magic == *b"#!")
        })
        .unwrap_or(false);
    Ok(Pinned {
        fd,
        resolved,
        script,
    })
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
    check_scrubbed(policy, launch, command, launcher, &|text| text.to_owned())
}

/// [`check`], with `scrub` applied to every argument a refusal quotes (a resource's
/// secrets are removed before the arguments are quoted and cut, which would hide them
/// from a later scrub).
pub(crate) fn check_scrubbed<'l>(
    policy: &PluginPolicy,
    launch: Launch,
    command: &wit::Command,
    launcher: impl FnOnce() -> Option<&'l LauncherSlot>,
    scrub: &dyn Fn(&str) -> String,
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
    }
    checked.file = Some(pin(&checked.program)?);
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

/// The user named `user` (a name or a numeric id) in the user database.
pub(crate) fn lookup_user(user: &str) -> Result<nix::unistd::User, String> {
    match user.parse::<u32>() {
        Ok(uid) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)),
        Err(_) => nix::unistd::User::from_name(user),
    }
    .map_err(|error| format!("cannot look up user `{user}`: {error}"))?
    .ok_or_else(|| format!("user `{user}` does not exist"))
}

/// The group named `group` (a name or a numeric id) in the group database.
pub(crate) fn lookup_group(group: &str) -> Result<nix::unistd::Group, String> {
    match group.parse::<u32>() {
        Ok(gid) => nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)),
        Err(_) => nix::unistd::Group::from_name(group),
    }
    .map_err(|error| format!("cannot look up group `{group}`: {error}"))?
    .ok_or_else(|| format!("group `{group}` does not exist"))
}

/// The uid and primary gid of a user the policy allows.
fn resolve_user(user: &str, allowed: &Principals, plugin: &str) -> Result<(u32, u32), String> {
    let entry = lookup_user(user)?;
    if !allowed.allows(user) && !allowed.allows(&entry.name) {
        return Err(format!(
            "plugin `{plugin}` may not run programs as user `{user}`; add it to `users` of \
             [plugins.{plugin}] in the policy"
        ));
    }
    Ok((entry.uid.as_raw(), entry.gid.as_raw()))
}

fn resolve_group(group: &str, allowed: &Principals, plugin: &str) -> Result<u32, String> {
    let entry = lookup_group(group)?;
    if !allowed.allows(group) && !allowed.allows(&entry.name) {
        return Err(format!(
            "plugin `{plugin}` may not run programs with group `{group}`; add it to `groups` \
             of [plugins.{plugin}] in the policy"
        ));
    }
    Ok(entry.gid.as_raw())
}

/// Output kept up to a cap; the rest is read and dropped so the program never blocks.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
}

fn drain(mut source: impl Read, cap: usize, into: Arc<Mutex<Captured>>) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match source.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut captured = into.lock().expect("no reader panics while holding it");
                let room = cap.saturating_sub(captured.bytes.len());
                let kept = n.min(room);
                captured.bytes.extend_from_slice(&buffer[..kept]);
                if kept < n {
                    captured.truncated = true;
                }
            }
        }
    }
}

/// Reads `source` on a thread of its own into what it returns; the thread says on
/// `done` when it has read everything (the writer closed its end).
fn spawn_drain<R: Read + Send + 'static>(
    source: R,
    cap: usize,
    done: mpsc::Sender<()>,
) -> (Arc<Mutex<Captured>>, std::thread::JoinHandle<()>) {
    let captured = Arc::new(Mutex::new(Captured::default()));
    let into = Arc::clone(&captured);
    let handle = std::thread::spawn(move || {
        drain(source, cap, into);
        let _ = done.send(());
    });
    (captured, handle)
}

/// Runs a checked request to completion.
pub(crate) fn run(
    checked: Checked,
    names: Option<&ExecNames>,
) -> Result<wit::Output, wit::LaunchError> {
    // The file opened at the check, through its descriptor: the kernel resolves
    // `/proc/self/fd/N` in the child to that very inode (the descriptor is closed only as
    // the program starts), through a link that carries the program's name when there is
    // one. The program still sees its own path as argv[0]. A script is opened again by
    // its interpreter, by name, so it runs by name.
    let mut link = None;
    let path = match &checked.file {
        Some(file) if !file.script => {
            let fd = rustix::fd::AsRawFd::as_raw_fd(&file.fd);
            link = names.and_then(|names| names.link(fd, &checked.program));
            match &link {
                Some(Link(path)) => path.as_os_str().to_owned(),
                None => format!("/proc/self/fd/{fd}").into(),
            }
        }
        _ => checked.program.clone().into(),
    };
    let text = |text: &[u8], what: &str| {
        std::ffi::CString::new(text).map_err(|_| {
            wit::LaunchError::Failed(format!(
                "cannot launch `{}`: {what} holds a NUL byte",
                checked.program
            ))
        })
    };
    let mut spec = crate::spawn::Spawn {
        path: text(
            std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()),
            "its path",
        )?,
        argv: std::iter::once(&checked.program)
            .chain(&checked.args)
            .map(|arg| text(arg.as_bytes(), "an argument"))
            .collect::<Result<_, _>>()?,
        envp: checked
            .env
            .iter()
            .map(|(name, value)| text(format!("{name}={value}").as_bytes(), "the environment"))
            .collect::<Result<_, _>>()?,
        cwd: checked
            .cwd
            .as_deref()
            .map(|cwd| text(cwd.as_bytes(), "its working directory"))
            .transpose()?,
        uid: checked.uid,
        gid: checked.gid,
        umask: checked.umask,
        cgroup: None,
    };
    // wconverge's own children before this launch: any other that appears during it (a
    // process the program made wconverge's child with `CLONE_PARENT`, or an orphan of
    // its tree that came to wconverge, a subreaper) belongs to this launch.
    // Spawned and registered as one step: no other thread's scan of wconverge's
    // children sees it unregistered.
    let spawning = SPAWN.lock().expect("spawn lock");
    // Born in a cgroup of its own where there is one: at the deadline the kernel kills
    // everything in it at once, however fast it forks.
    // The child joins it itself, before anything else (wconverge does not move).
    let mut cgroup = LaunchCgroup::take();
    spec.cgroup = cgroup.as_ref().map(|cgroup| crate::spawn::Cgroup {
        dir: cgroup.dir_fd.as_raw_fd(),
        procs: cgroup.procs.as_raw_fd(),
    });
    let mut started = Instant::now();
    let mut spawned = crate::spawn::spawn(&spec);
    if matches!(&spawned, Err(error) if crate::spawn::failed_to_join(error)) {
        // A hierarchy that takes no process here (a cgroup with controllers of its
        // own): no cgroups for launches from now on.
        CGROUPS_USABLE.store(false, std::sync::atomic::Ordering::Relaxed);
        cgroup = None;
        spec.cgroup = None;
        started = Instant::now();
        spawned = crate::spawn::spawn(&spec);
    }
    // Without a cgroup, the kill goes by /proc and needs wconverge's children from
    // before (the child has just started and made none yet).
    let before = match &cgroup {
        Some(_) => Before::OwnCgroup,
        None => Before::Children(children_of(std::process::id())),
    };
    let child = spawned.map_err(|error| {
        let program = &checked.program;
        match (&checked.route, error.kind()) {
            (Some((architecture, route)), std::io::ErrorKind::NotFound) => {
                let install = if route.provided_by.is_empty() {
                    String::new()
                } else {
                    format!("; install {}", route.provided_by)
                };
                wit::LaunchError::NotFound(format!(
                    "cannot launch `{program}`, which runs programs as `{architecture}` ({}): \
                     it is not installed{install}",
                    route.how
                ))
            }
            (None, std::io::ErrorKind::NotFound) => {
                wit::LaunchError::NotFound(format!("cannot launch `{program}`: it does not exist"))
            }
            _ => wit::LaunchError::Failed(format!("cannot launch `{program}`: {error}")),
        }
    })?;
    // The program runs; its name is no longer needed.
    drop(link);
    let pid = child.pid;
    let killer = cgroup.as_ref().map(LaunchCgroup::killer);
    let _live = Live::register(pid, before.clone(), killer.clone());
    drop(spawning);
    let mut stdin = child.stdin;
    let input = checked.stdin;
    // No input (most launches, every guard): the pipe is closed at once (the program
    // reads the end of its input), and no thread is started to feed it.
    let feeder = if input.is_empty() {
        drop(stdin);
        None
    } else {
        Some(std::thread::spawn(move || {
            // A program may exit without reading its input; a broken pipe is its choice.
            let _ = stdin.write_all(&input);
        }))
    };
    let deadline = started + checked.timeout;
    let mut cgroup = cgroup;
    let ended = || {
        reap_strays(pid);
        if let Some(cgroup) = cgroup.take() {
            cgroup.finish();
        }
    };
    // Where the kernel has pidfds (Linux 5.3), this thread waits for the program and
    // reads its output at once, with one poll: no thread per launch. Elsewhere, threads.
    let pidfd = rustix::process::Pid::from_raw(pid)
        .filter(|_| PIDFDS_USABLE.load(std::sync::atomic::Ordering::Relaxed))
        .and_then(|pid| {
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
        });
    let supervised = match pidfd {
        Some(pidfd) => supervise(
            pid,
            &pidfd,
            [child.stdout, child.stderr],
            checked.output_cap,
            deadline,
            &before,
            killer.as_ref(),
            ended,
        ),
        None => supervise_with_threads(
            pid,
            [child.stdout, child.stderr],
            checked.output_cap,
            deadline,
            &before,
            killer.as_ref(),
            ended,
        ),
    };
    drop(feeder);
    let (status, timed_out, [stdout, stderr]) = supervised.map_err(wit::LaunchError::Failed)?;
    let (stdout, stdout_truncated) = (stdout.bytes, stdout.truncated);
    let (stderr, stderr_truncated) = (stderr.bytes, stderr.truncated);
    let status = if timed_out {
        wit::ExitStatus::TimedOut
    } else {
        match status.code() {
            Some(code) => wit::ExitStatus::Exited(code),
            None => {
                use std::os::unix::process::ExitStatusExt;
                wit::ExitStatus::Signaled(status.signal().unwrap_or(0))
            }
        }
    };
    Ok(wit::Output {
        status,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// Whether launches are supervised through pidfds (tests turn it off to run the
/// threads that stand in for them on kernels without).
static PIDFDS_USABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// What a launch ended with: its status, whether it was killed at its deadline (or on
/// an interruption), and what it wrote to its output and its errors.
type Supervised = (std::process::ExitStatus, bool, [Captured; 2]);

/// Waits for the program `pid` (through its pidfd) while reading its two output pipes,
/// all in this thread: at its deadline (or an interruption) it is killed with all it
/// started; `ended` runs as soon as it is gone. What it left in the pipes is read until
/// they close, unless something it started still holds them open: then at the latest
/// [`DRAIN_GRACE`] later, or the deadline (200 ms after a kill).
#[expect(clippy::too_many_arguments, reason = "one launch's parts, used once")]
fn supervise(
    pid: i32,
    pidfd: &rustix::fd::OwnedFd,
    pipes: [std::fs::File; 2],
    cap: usize,
    deadline: Instant,
    before: &Before,
    killer: Option<&Killer>,
    mut ended: impl FnMut(),
) -> Result<Supervised, String> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let [out, err] = pipes;
    let mut open = [Some(out), Some(err)];
    let mut captured = [Captured::default(), Captured::default()];
    let mut status: Option<std::process::ExitStatus> = None;
    let mut timed_out = false;
    let mut grace: Option<Instant> = None;
    let mut buffer = vec![0u8; 16 * 1024];
    let timespec = |within: Duration| Timespec {
        tv_sec: i64::try_from(within.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(within.subsec_nanos()),
    };
    let reaped = || {
        crate::spawn::wait(pid).map_err(|error| format!("waiting for the program failed: {error}"))
    };
    loop {
        let now = Instant::now();
        if status.is_none() && (now >= deadline || crate::interrupted().is_some()) {
            kill_launch(pid, before, killer);
            timed_out = true;
            let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
            let gone = !matches!(poll(&mut fds, Some(&timespec(KILLED_GRACE))), Ok(0));
            status = Some(if gone {
                reaped()?
            } else {
                // A status a tracer holds is given up on, as a kill.
                use std::os::unix::process::ExitStatusExt;
                std::process::ExitStatus::from_raw(libc::SIGKILL)
            });
            ended();
            grace = Some(Instant::now() + Duration::from_millis(200));
            continue;
        }
        let reading = open.iter().any(Option::is_some);
        if status.is_some() && (!reading || grace.is_some_and(|grace| now >= grace)) {
            break;
        }
        let until = grace.unwrap_or(deadline);
        let within = until.saturating_duration_since(now).min(INTERRUPT_POLL);
        let (out_ready, err_ready, child_ended) = {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
            let mut slots = [None, None, None];
            for (idx, pipe) in open.iter().enumerate() {
                if let Some(pipe) = pipe {
                    slots[idx] = Some(fds.len());
                    fds.push(PollFd::new(pipe, PollFlags::IN));
                }
            }
            if status.is_none() {
                slots[2] = Some(fds.len());
                fds.push(PollFd::new(pidfd, PollFlags::IN));
            }
            match poll(&mut fds, Some(&timespec(within))) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(error) => return Err(format!("waiting for the program failed: {error}")),
            }
            let ready = |slot: Option<usize>| slot.is_some_and(|at| !fds[at].revents().is_empty());
            (ready(slots[0]), ready(slots[1]), ready(slots[2]))
        };
        for (idx, ready) in [out_ready, err_ready].into_iter().enumerate() {
            if !ready {
                continue;
            }
            let read = match &mut open[idx] {
                Some(pipe) => pipe.read(&mut buffer),
                None => continue,
            };
            match read {
                Ok(0) | Err(_) => open[idx] = None,
                Ok(n) => {
                    let room = cap.saturating_sub(captured[idx].bytes.len());
                    let kept = n.min(room);
                    captured[idx].bytes.extend_from_slice(&buffer[..kept]);
                    if kept < n {
                        captured[idx].truncated = true;
                    }
                }
            }
        }
        if child_ended {
            status = Some(reaped()?);
            ended();
            let now = Instant::now();
            grace = Some((now + DRAIN_GRACE).min(deadline.max(now)));
        } else if status.is_none() && !out_ready && !err_ready {
            // A daemon an earlier launch started came to wconverge, a subreaper; once
            // it dies it is reaped here (see `wait_until`).
            reap_strays(pid);
        }
    }
    let status = status.ok_or("the program's status was lost")?;
    Ok((status, timed_out, captured))
}

/// [`supervise`] without a pidfd: a thread reads each pipe, another waits.
fn supervise_with_threads(
    pid: i32,
    pipes: [std::fs::File; 2],
    cap: usize,
    deadline: Instant,
    before: &Before,
    killer: Option<&Killer>,
    mut ended: impl FnMut(),
) -> Result<Supervised, String> {
    let [out, err] = pipes;
    let (drained, drained_signal) = mpsc::channel();
    let (stdout, stdout_reader) = spawn_drain(out, cap, drained.clone());
    let (stderr, stderr_reader) = spawn_drain(err, cap, drained);
    let waited = wait_until(pid, deadline, before, killer);
    ended();
    let (status, timed_out) = waited?;
    let grace = if timed_out {
        Instant::now() + Duration::from_millis(200)
    } else {
        (Instant::now() + DRAIN_GRACE).min(deadline.max(Instant::now()))
    };
    let mut finished = 0;
    while finished < 2 {
        let left = grace.saturating_duration_since(Instant::now());
        match drained_signal.recv_timeout(left) {
            Ok(()) => finished += 1,
            Err(_) => break,
        }
    }
    for handle in [stdout_reader, stderr_reader] {
        if handle.is_finished() {
            let _ = handle.join();
        }
    }
    let take = |captured: &Arc<Mutex<Captured>>| {
        let mut captured = captured.lock().expect("no reader panics while holding it");
        Captured {
            bytes: std::mem::take(&mut captured.bytes),
            truncated: captured.truncated,
        }
    };
    Ok((status, timed_out, [take(&stdout), take(&stderr)]))
}

/// Marks every descriptor above 2 that this process holds close-on-exec, so no program
/// it launches inherits one (a descriptor on a root-only file, left open by whoever
/// started wconverge, would otherwise reach a child running as another user).
pub(crate) fn close_inherited_on_exec() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        set_cloexec(fd);
    }
}

#[expect(
    unsafe_code,
    reason = "marking a descriptor this process may not own needs a borrowed raw descriptor"
)]
fn set_cloexec(fd: i32) {
    // SAFETY: `fd` was listed in /proc/self/fd a moment ago; if it has been closed since,
    // fcntl fails with EBADF and nothing happens. The borrow ends with this call.
    let fd = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
    if let Ok(flags) = rustix::io::fcntl_getfd(fd) {
        let _ = rustix::io::fcntl_setfd(fd, flags | rustix::io::FdFlags::CLOEXEC);
    }
}

/// The programs running now, by process id, each with wconverge's children from before
/// it started: an interrupted wconverge kills their trees.
static LIVE: Mutex<Vec<Running>> = Mutex::new(Vec::new());

/// A program running now: its pid, how to tell which of wconverge's children are not
/// its own, and its cgroup's kill switch.
type Running = (i32, Before, Option<Killer>);

/// Which of wconverge's children were there before a launch (and so are not its own).
#[derive(Clone)]
pub(crate) enum Before {
    /// These, listed when it started (there is no cgroup).
    Children(Vec<i32>),
    /// Those in wconverge's own cgroup: the launch's are in the launch's cgroup, or left
    /// it for another.
    OwnCgroup,
}

impl Before {
    /// Whether wconverge's child `pid` was there before the launch.
    fn includes(&self, pid: i32) -> bool {
        match self {
            Before::Children(children) => children.contains(&pid),
            Before::OwnCgroup => own_cgroup_name()
                .is_some_and(|own| cgroup_name(&pid.to_string()).is_some_and(|name| name == own)),
        }
    }
}

/// Held while a program is spawned and registered, and while wconverge's children are
/// scanned for strays: a child spawned by another thread is never taken for one.
static SPAWN: Mutex<()> = Mutex::new(());

/// For a test that spawns a child outside [`run`] and waits for it itself: while held,
/// no launch ending in another test reaps it as a stray (`reap_strays` takes this lock).
#[cfg(test)]
pub(crate) fn hold_reaping() -> std::sync::MutexGuard<'static, ()> {
    SPAWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One running program in [`LIVE`], until dropped.
struct Live(i32);

impl Live {
    fn register(pid: i32, before: Before, killer: Option<Killer>) -> Live {
        LIVE.lock()
            .expect("live programs lock")
            .push((pid, before, killer));
        Live(pid)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.lock()
            .expect("live programs lock")
            .retain(|(pid, ..)| *pid != self.0);
    }
}

/// Kills every program running now, with all its descendants.
pub(crate) fn kill_live() {
    let live = LIVE.lock().expect("live programs lock").clone();
    for (pid, before, killer) in live {
        kill_launch(pid, &before, killer.as_ref());
    }
}

/// Kills a launch: its cgroup, if it has one, then its tree as /proc shows it (for what
/// left the cgroup, or where there is none).
fn kill_launch(root: i32, before: &Before, killer: Option<&Killer>) {
    if let Some(killer) = killer {
        killer.kill();
    }
    kill_tree(root, before);
}

/// Removes the launch cgroups that wconverge processes no longer running left (one killed
/// with `SIGKILL` cannot remove its own); a cgroup that still holds a process stays. A
/// cgroup is named for the process that made it by pid and start time, so a pid used
/// again since does not keep it.
pub(crate) fn sweep_cgroups() {
    let Some(own) = own_cgroup() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, started)) = name
            .to_str()
            .and_then(|name| name.strip_prefix("wconverge-"))
            .and_then(|rest| {
                let mut parts = rest.split('-');
                Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
            })
        else {
            continue;
        };
        if start_time(pid) != Some(started) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// When process `pid` started (in clock ticks since boot), if it runs.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, in parentheses: state is field 3, start time field 22.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The cgroup v2 of process `pid` (or `self`), as /proc names it (`/a/b`).
fn cgroup_name(pid: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("0::").map(str::to_owned))
}

/// This process's cgroup v2, read once (wconverge never moves).
fn own_cgroup_name() -> Option<&'static str> {
    static OWN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    OWN.get_or_init(|| cgroup_name("self")).as_deref()
}

/// The cgroup v2 hierarchy and this process's cgroup in it, found once: where launches
/// get cgroups of their own. `None` where there is no cgroup2 file system, or this
/// process may not make cgroups in it.
fn own_cgroup() -> Option<&'static std::path::Path> {
    static OWN: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mounts.lines().find_map(|line| {
            let (fields, rest) = line.split_once(" - ")?;
            rest.starts_with("cgroup2 ")
                .then(|| fields.split(' ').nth(4).map(std::path::PathBuf::from))?
        })?;
        Some(mount.join(own_cgroup_name()?.trim_start_matches('/')))
    })
    .as_deref()
}

/// A launch's cgroup, to kill all it holds at once; it remembers whether it did.
#[derive(Clone)]
struct Killer(Arc<(rustix::fd::OwnedFd, std::sync::atomic::AtomicBool)>);

impl Killer {
    fn kill(&self) {
        self.0.1.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = rustix::io::write(&self.0.0, b"1");
    }

    fn killed(&self) -> bool {
        self.0.1.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Whether launches get cgroups: false once one could not be joined.
static CGROUPS_USABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Launch cgroups that are empty again, kept for the next launches (making and removing
/// a cgroup each time costs more than the launch).
static POOL: Mutex<Vec<LaunchCgroup>> = Mutex::new(Vec::new());

/// The cgroup a program is born in, under this process's own; one launch at a time.
pub(crate) struct LaunchCgroup {
    dir: std::path::PathBuf,
    dir_fd: rustix::fd::OwnedFd,
    procs: rustix::fd::OwnedFd,
    own_procs: rustix::fd::OwnedFd,
    kill: Killer,
}

impl LaunchCgroup {
    /// An empty cgroup for one launch, from the pool or new; `None` where there can be
    /// none (then the kill goes by /proc alone).
    fn take() -> Option<LaunchCgroup> {
        if !CGROUPS_USABLE.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        if let Some(cgroup) = POOL.lock().expect("cgroup pool lock").pop() {
            return Some(cgroup);
        }
        Self::create()
    }

    fn create() -> Option<LaunchCgroup> {
        use rustix::fs::{Mode, OFlags};
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let own = own_cgroup()?;
        let dir = own.join(format!(
            "wconverge-{}-{}-{}",
            std::process::id(),
            start_time(std::process::id()).unwrap_or(0),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).ok()?;
        let open = |path: std::path::PathBuf| {
            rustix::fs::open(&path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty()).ok()
        };
        let opened = (|| {
            Some(LaunchCgroup {
                dir_fd: rustix::fs::open(
                    &dir,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()?,
                procs: open(dir.join("cgroup.procs"))?,
                own_procs: open(own.join("cgroup.procs"))?,
                kill: Killer(Arc::new((
                    open(dir.join("cgroup.kill"))?,
                    std::sync::atomic::AtomicBool::new(false),
                ))),
                dir: dir.clone(),
            })
        })();
        if opened.is_none() {
            let _ = std::fs::remove_dir(&dir);
        }
        opened
    }

    fn killer(&self) -> Killer {
        self.kill.clone()
    }

    /// Whether a process is still in it (or in a cgroup below it).
    fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "populated 1"))
    }

    /// Done with the launch: what is left in the cgroup (a service the program started)
    /// goes back to this process's cgroup, and the cgroup, empty, goes back to the pool;
    /// one that was killed is removed instead (Linux 6.x kills every process later cloned
    /// into a cgroup whose kill count differs from its parent's: a killed cgroup would
    /// kill every program born in it).
    fn finish(self) {
        if self.kill.killed() {
            // What was killed may still be dying: removed at the end of the runtime.
            KILLED.lock().expect("cgroup pool lock").push(self);
            return;
        }
        for _ in 0..KILL_ROUNDS {
            let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) else {
                return;
            };
            if procs.trim().is_empty() {
                POOL.lock().expect("cgroup pool lock").push(self);
                return;
            }
            for pid in procs.lines() {
                let _ = rustix::io::write(&self.own_procs, pid.trim().as_bytes());
            }
        }
    }
}

/// Launch cgroups that were killed, to remove once what they held has died.
static KILLED: Mutex<Vec<LaunchCgroup>> = Mutex::new(Vec::new());

/// How long the end of a runtime waits for killed cgroups to empty.
const KILLED_EMPTY_WAIT: Duration = Duration::from_secs(1);

/// Removes the pool's cgroups and the killed ones (when the runtime ends), waiting up to
/// [`KILLED_EMPTY_WAIT`] for a killed one to empty; one still busy then is left to the
/// next run's `sweep_cgroups`.
pub(crate) fn release_cgroups() {
    POOL.lock().expect("cgroup pool lock").clear();
    let killed = std::mem::take(&mut *KILLED.lock().expect("cgroup pool lock"));
    let until = Instant::now() + KILLED_EMPTY_WAIT;
    for cgroup in killed {
        while cgroup.populated() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for LaunchCgroup {
    /// Removes the cgroup; one that still holds a process stays (and `sweep_cgroups`
    /// removes it once it is empty and its wconverge gone).
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Makes wconverge a child subreaper, once: what a launched program abandons (an
/// orphan whose parents died, even past a program that turned its own subreaper off)
/// comes to wconverge rather than to init, where the kill at the deadline finds it.
pub(crate) fn become_subreaper() {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// The children of process `parent`, from /proc.
fn children_of(parent: u32) -> Vec<i32> {
    let parent = i32::try_from(parent).unwrap_or(0);
    parent_links()
        .into_iter()
        .filter(|(_, ppid, _)| *ppid == parent)
        .map(|(pid, ..)| pid)
        .collect()
}

/// The programs running now.
fn live_pids() -> Vec<i32> {
    LIVE.lock()
        .expect("live programs lock")
        .iter()
        .map(|(pid, ..)| *pid)
        .collect()
}

/// Reaps wconverge's children that have ended, but `live` and the programs running now
/// (which their own waiters reap): orphans that came to wconverge as a subreaper. Each is
/// looked at first without being reaped (`WNOWAIT`), so a program's own status is never
/// taken from its waiter.
fn reap_strays(live: i32) {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
    let _spawning = SPAWN.lock().expect("spawn lock");
    let running = live_pids();
    for _ in 0..KILL_ROUNDS {
        let peeked = waitid(
            Id::All,
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        );
        let pid = match peeked {
            Ok(WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, ..)) => pid,
            _ => return,
        };
        if pid.as_raw() == live || running.contains(&pid.as_raw()) {
            return;
        }
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
    }
}

/// How long `kill_tree` goes on finding what is left of a tree.
const KILL_TIME: Duration = Duration::from_secs(1);

/// The most rounds a loop over a cgroup's processes makes.
const KILL_ROUNDS: usize = 100;

/// Kills `root`, every descendant, and every child of wconverge's that was not there
/// before (`before`; with their descendants), as /proc shows them, round after round
/// until a round finds nothing left alive (or [`KILL_TIME`] has passed): what a killed
/// process leaves comes to wconverge (a child subreaper) and is found by the next round.
/// This is what kills a tree where there is no cgroup, and what left the cgroup where
/// there is one (a program may move itself out of it if it may write cgroups).
pub(crate) fn kill_tree(root: i32, before: &Before) {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;
    let started = Instant::now();
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let _spawning = SPAWN.lock().expect("spawn lock");
    // Other programs running now (another thread's) are not this one's.
    let others: Vec<i32> = live_pids().into_iter().filter(|pid| *pid != root).collect();
    let mut killed: std::collections::HashSet<i32> = std::collections::HashSet::new();
    let _ = killpg(Pid::from_raw(root), Signal::SIGKILL);
    loop {
        let links = parent_links();
        let mut children: std::collections::HashMap<i32, Vec<i32>> =
            std::collections::HashMap::new();
        let mut alive: std::collections::HashSet<i32> = std::collections::HashSet::new();
        for (pid, ppid, zombie) in &links {
            children.entry(*ppid).or_default().push(*pid);
            if !zombie {
                alive.insert(*pid);
            }
        }
        let mut frontier: Vec<i32> = children
            .get(&me)
            .into_iter()
            .flatten()
            .copied()
            .filter(|pid| !others.contains(pid) && !before.includes(*pid))
            .collect();
        frontier.push(root);
        let mut seen: std::collections::HashSet<i32> = std::collections::HashSet::new();
        let mut new = 0usize;
        while let Some(pid) = frontier.pop() {
            if !seen.insert(pid) {
                continue;
            }
            if alive.contains(&pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                if killed.insert(pid) {
                    new += 1;
                }
            }
            frontier.extend(children.get(&pid).into_iter().flatten().copied());
        }
        if new == 0 || started.elapsed() > KILL_TIME {
            break;
        }
    }
}

/// Every process's parent, from /proc: `(pid, ppid, whether it is a zombie)`.
fn parent_links() -> Vec<(i32, i32, bool)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
            let mut after = stat[stat.rfind(')')? + 1..].split_whitespace();
            let state = after.next()?;
            let ppid: i32 = after.next()?.parse().ok()?;
            Some((pid, ppid, state == "Z" || state == "X"))
        })
        .collect()
}

/// How long to wait for a killed program's exit status: one held by a tracer is given
/// up on, as a kill.
const KILLED_GRACE: Duration = Duration::from_secs(2);

/// How often a wait looks whether wconverge was interrupted.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// Waits for the child, killing it with all its descendants at the deadline, or when
/// wconverge is interrupted. Never waits past the deadline and a short grace: a child
/// whose exit status cannot be collected (a tracer holds it) is reported killed.
fn wait_until(
    child: i32,
    deadline: Instant,
    before: &Before,
    killer: Option<&Killer>,
) -> Result<(std::process::ExitStatus, bool), String> {
    let (sender, receiver) = mpsc::channel();
    // Not joined: if the status never comes, the thread stays blocked, not the run.
    std::thread::spawn(move || {
        let _ = sender.send(crate::spawn::wait(child));
    });
    loop {
        let now = Instant::now();
        if now >= deadline || crate::interrupted().is_some() {
            break;
        }
        match receiver.recv_timeout((deadline - now).min(INTERRUPT_POLL)) {
            Ok(result) => {
                let status =
                    result.map_err(|error| format!("waiting for the program failed: {error}"))?;
                return Ok((status, false));
            }
            // A daemon an earlier launch started came to wconverge, a subreaper, when that
            // launch ended; once it dies (this launch stops it, say) it is reaped here, or
            // whoever waits for it to be gone (`start-stop-daemon --retry`) would wait for
            // a zombie.
            Err(mpsc::RecvTimeoutError::Timeout) => reap_strays(child),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("the process waiter vanished".to_owned());
            }
        }
    }
    kill_launch(child, before, killer);
    let status = match receiver.recv_timeout(KILLED_GRACE) {
        Ok(result) => result.map_err(|error| format!("waiting for the program failed: {error}"))?,
        Err(_) => {
            use std::os::unix::process::ExitStatusExt;
            std::process::ExitStatus::from_raw(libc::SIGKILL)
        }
    };
    Ok((status, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    /// [`run`], then the launch cgroups kept for reuse are removed: a test process ends
    /// without the runtime's end, which would remove them.
    fn run_released(
        checked: Checked,
        names: Option<&ExecNames>,
    ) -> Result<wit::Output, wit::LaunchError> {
        let output = run(checked, names);
        release_cgroups();
        output
    }

    fn exec_policy() -> PluginPolicy {
        Policy::builtin().plugin("sh").expect("sh").clone()
    }

    fn command(program: &str, args: &[&str]) -> wit::Command {
        wit::Command {
            program: program.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            cwd: None,
            env: Vec::new(),
            user: None,
            group: None,
            umask: None,
            timeout_ms: None,
            stdin: None,
            architecture: None,
        }
    }

    fn refusal(result: Result<Checked, wit::LaunchError>) -> String {
        match result {
            Err(wit::LaunchError::Refused(message)) => message,
            Err(other) => panic!("not a refusal: {other:?}"),
            Ok(_) => panic!("allowed"),
        }
    }

    /// A launcher with fixed answers, to test what the host accepts from one.
    struct Fixed {
        policy: PluginPolicy,
        route: Route,
    }

    impl Launcher for Fixed {
        fn policy(&self) -> &PluginPolicy {
            &self.policy
        }
        fn route(&self, _: &str, _: &[String], _: &str) -> Result<Route, String> {
            Ok(self.route.clone())
        }
    }

    fn routed(program: &str, args: &[&str]) -> LauncherSlot {
        Ok(std::sync::Arc::new(Fixed {
            policy: Policy::builtin()
                .plugin("launcher")
                .expect("launcher")
                .clone(),
            route: Route {
                program: program.to_owned(),
                args: args.iter().map(|arg| (*arg).to_owned()).collect(),
                how: "test".to_owned(),
                provided_by: "test".to_owned(),
            },
        }))
    }

    #[test]
    fn a_launcher_may_wrap_the_command_line_but_not_rewrite_it() {
        let policy = exec_policy();
        let mut request = command("/bin/sh", &["-c", "uname -m"]);
        request.architecture = Some("i686".to_owned());
        let wrap = routed("/usr/bin/setarch", &["i686", "/bin/sh", "-c", "uname -m"]);
        let checked = check(&policy, Launch::Allowed, &request, || Some(&wrap)).expect("wraps");
        assert_eq!(checked.program, "/usr/bin/setarch");
        let rewrite = routed("/usr/bin/setarch", &["i686", "/bin/sh", "-c", "rm -rf /"]);
        let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&rewrite)));
        assert!(refused.contains("instead of wrapping it"), "{refused}");
        // Options before the original command line may not name another program.
        let smuggled = routed(
            "/usr/bin/setarch",
            &[
                "i686",
                "/usr/bin/python3",
                "-c",
                "x",
                "/bin/sh",
                "-c",
                "uname -m",
            ],
        );
        let refused = refusal(check(&policy, Launch::Allowed, &request, || {
            Some(&smuggled)
        }));
        assert!(refused.contains("instead of wrapping it"), "{refused}");
        // ...not even by a bare name that setarch would look up.
        let bare = routed(
            "/usr/bin/setarch",
            &["i686", "chmod", "/bin/sh", "-c", "uname -m"],
        );
        let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&bare)));
        assert!(refused.contains("instead of wrapping it"), "{refused}");
        // Another build must be the same program.
        let other = routed("/usr/bin/python3", &["-c", "uname -m"]);
        let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&other)));
        assert!(refused.contains("is another program"), "{refused}");
        // While only inspecting, the wrapper must be a query too.
        let refused = refusal(check(&policy, Launch::QueriesOnly, &request, || {
            Some(&wrap)
        }));
        assert!(refused.contains("only inspects"), "{refused}");
        let ungranted = routed("/usr/bin/qemu-i386", &["/bin/sh", "-c", "uname -m"]);
        let refused = refusal(check(&policy, Launch::Allowed, &request, || {
            Some(&ungranted)
        }));
        assert!(
            refused.contains("not on the allowlist of plugin `launcher`"),
            "{refused}"
        );
        let swapped = routed("/opt/other/sh", &["-c", "uname -m"]);
        let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&swapped)));
        assert!(
            refused.contains("not on the allowlist of plugin `sh`"),
            "{refused}"
        );
        let none: LauncherSlot = Err("the policy has no launcher".to_owned());
        match check(&policy, Launch::Allowed, &request, || Some(&none)) {
            Err(wit::LaunchError::Failed(message)) => {
                assert!(message.contains("the policy has no launcher"), "{message}")
            }
            _ => panic!("no launcher must fail the launch"),
        }
    }

    #[test]
    fn the_policy_decides_what_runs() {
        let policy = exec_policy();
        assert!(check(&policy, Launch::Allowed, &command("/bin/sh", &[]), || None).is_ok());
        let relative = refusal(check(&policy, Launch::Allowed, &command("sh", &[]), || {
            None
        }));
        assert!(relative.contains("no PATH lookup"), "{relative}");
        let elsewhere = refusal(check(
            &policy,
            Launch::Allowed,
            &command("/tmp/x", &[]),
            || None,
        ));
        assert!(
            elsewhere.contains("not on the allowlist of plugin `sh`"),
            "{elsewhere}"
        );
        let inspecting = refusal(check(
            &policy,
            Launch::QueriesOnly,
            &command("/bin/sh", &[]),
            || None,
        ));
        assert!(inspecting.contains("only inspects"), "{inspecting}");
        let mut preload = command("/bin/sh", &[]);
        preload
            .env
            .push(("LD_PRELOAD".to_owned(), "/tmp/x.so".to_owned()));
        let refused = refusal(check(&policy, Launch::Allowed, &preload, || None));
        assert!(refused.contains("`LD_PRELOAD` may not be set"), "{refused}");
    }

    #[test]
    fn a_launch_that_names_no_user_runs_as_the_policys_run_as() {
        let mut policy = exec_policy();
        policy.users = Principals::Only(vec!["root".to_owned()]);
        policy.run_as = Some("nobody".to_owned());
        let nobody = lookup_user("nobody").expect("a `nobody` user");
        let checked = check(&policy, Launch::Allowed, &command("/bin/sh", &[]), || None);
        if rustix::process::geteuid().is_root() {
            let checked = checked.expect("allowed");
            assert_eq!(checked.uid, Some(nobody.uid.as_raw()));
            assert_eq!(checked.gid, Some(nobody.gid.as_raw()));
        } else {
            // Not root: it cannot switch, and it does not run as itself instead.
            let refused = refusal(checked);
            assert!(
                refused.contains("cannot run `/bin/sh` as user `nobody`"),
                "{refused}"
            );
        }
        // A user the launch names still needs `users`.
        let mut named = command("/bin/sh", &[]);
        named.user = Some("nobody".to_owned());
        let refused = refusal(check(&policy, Launch::Allowed, &named, || None));
        assert!(
            refused.contains("may not run programs as user `nobody`"),
            "{refused}"
        );
    }

    #[test]
    fn a_program_runs_with_an_empty_environment_and_its_input() {
        let mut request = command("/bin/sh", &["-c", "cat; echo \"[$HOME]\"; exit 3"]);
        request.stdin = Some(b"fed\n".to_vec());
        let output = run_released(
            check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"),
            None,
        )
        .expect("ran");
        assert_eq!(output.status, wit::ExitStatus::Exited(3));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "fed\n[]\n");
    }

    #[test]
    fn without_pidfds_threads_supervise_a_launch_alike() {
        PIDFDS_USABLE.store(false, std::sync::atomic::Ordering::Relaxed);
        let mut request = command("/bin/sh", &["-c", "cat; echo out; echo err >&2; exit 4"]);
        request.stdin = Some(b"in\n".to_vec());
        let output = run_released(
            check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"),
            None,
        );
        let mut slow = command("/bin/sh", &["-c", "sleep 30"]);
        slow.timeout_ms = Some(200);
        let timed = run_released(
            check(&exec_policy(), Launch::Allowed, &slow, || None).expect("allowed"),
            None,
        );
        PIDFDS_USABLE.store(true, std::sync::atomic::Ordering::Relaxed);
        let output = output.expect("ran");
        assert_eq!(output.status, wit::ExitStatus::Exited(4));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "in\nout\n");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "err\n");
        assert_eq!(timed.expect("ran").status, wit::ExitStatus::TimedOut);
    }

    #[test]
    fn a_program_given_no_input_reads_its_end_at_once() {
        // `cat` reads until its input ends: with nothing to feed, the pipe is closed
        // before the wait, so it ends long before its timeout.
        let mut request = command("/bin/sh", &["-c", "cat; echo done"]);
        request.timeout_ms = Some(5_000);
        let started = Instant::now();
        let output = run_released(
            check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"),
            None,
        )
        .expect("ran");
        assert_eq!(output.status, wit::ExitStatus::Exited(0));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "done\n");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn the_timeout_kills_the_whole_group() {
        let mut request = command("/bin/sh", &["-c", "sleep 30 & sleep 30"]);
        request.timeout_ms = Some(200);
        let started = Instant::now();
        let output = run_released(
            check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"),
            None,
        )
        .expect("ran");
        assert_eq!(output.status, wit::ExitStatus::TimedOut);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn output_is_capped_and_marked_truncated() {
        let mut policy = exec_policy();
        policy.limits.output_bytes = 1000;
        let request = command("/bin/sh", &["-c", "yes | head -c 100000"]);
        let output = run_released(
            check(&policy, Launch::Allowed, &request, || None).expect("allowed"),
            None,
        )
        .expect("ran");
        assert_eq!(output.stdout.len(), 1000);
        assert!(output.stdout_truncated);
        assert_eq!(output.status, wit::ExitStatus::Exited(0));
    }

    #[test]
    fn the_program_that_runs_is_the_file_that_was_checked_under_its_own_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let program = dir.path().join("tool");
        std::os::unix::fs::symlink("/bin/sh", &program).expect("link");
        let program = program.to_str().expect("utf-8").to_owned();
        let mut policy = exec_policy();
        policy.programs.push(crate::policy::ProgramGrant {
            pattern: crate::policy::ProgramPattern::Exact(program.clone().into()),
            args: None,
            query: false,
        });
        let request = command(&program, &["-c", "cat /proc/$$/comm; echo \"$0\"; exit 3"]);
        let checked = check(&policy, Launch::Allowed, &request, || None).expect("allowed");
        assert_eq!(
            checked.resolved().as_deref(),
            std::fs::canonicalize("/bin/sh")
                .ok()
                .and_then(|p| p.to_str().map(str::to_owned))
                .as_deref()
        );
        // The path now names another program: what was checked runs all the same.
        std::fs::remove_file(&program).expect("unlinked");
        std::os::unix::fs::symlink("/bin/false", &program).expect("relinked");
        let names = ExecNames::create().expect("a directory for names");
        let output = run_released(checked, Some(&names)).expect("ran");
        assert_eq!(output.status, wit::ExitStatus::Exited(3));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            format!("tool\n{program}\n")
        );
        let kept = std::fs::read_dir(&names.dir)
            .expect("names dir")
            .flat_map(|slot| std::fs::read_dir(slot.expect("slot").path()).expect("slot dir"))
            .count();
        assert_eq!(kept, 0, "the name is removed once the program runs");
        let dir_of_names = names.dir.clone();
        drop(names);
        assert!(!dir_of_names.exists());
    }
}
