//! Launching programs for plugins: the policy check, then the launch with an empty
//! environment, its own process group, a wall-clock timeout that kills the group, and
//! capped output.

use crate::bindings::process as wit;
use crate::policy::{PluginPolicy, Principals};
use std::io::{Read, Write};
use std::path::{Component, Path};
use std::process::{Child, ChildStderr, ChildStdout, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Environment variables no plugin may set unless its policy names them: they change
/// which program runs or what code it loads.
fn dangerous(name: &str) -> bool {
    name == "PATH" || name.starts_with("LD_") || name.starts_with("DYLD_")
}

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

/// A request that passed the policy, ready to run.
pub(crate) struct Checked {
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
}

fn normalized_absolute(path: &str) -> bool {
    let parsed = Path::new(path);
    parsed.is_absolute()
        && !parsed
            .components()
            .any(|component| matches!(component, Component::CurDir | Component::ParentDir))
}

/// Checks a request against the plugin's policy; the error says what was refused and
/// what would allow it.
pub(crate) fn check(
    policy: &PluginPolicy,
    launch: Launch,
    command: &wit::Command,
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
    let grant = policy
        .programs
        .iter()
        .find(|grant| grant.pattern.matches(Path::new(program)))
        .ok_or_else(|| {
            format!(
                "program `{program}` is not on the allowlist of plugin `{plugin}`; add it to \
                 `programs` of [plugins.{plugin}] in the policy"
            )
        })?;
    if launch == Launch::QueriesOnly && !grant.query {
        return Err(format!(
            "program `{program}` may run only when changes are applied; this call only \
             inspects (mark it `query = true` in the policy if it changes nothing)"
        ));
    }
    for (name, _) in &command.env {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(format!("`{name}` is not an environment variable name"));
        }
        if dangerous(name) && !policy.environment.iter().any(|granted| granted == name) {
            return Err(format!(
                "environment variable `{name}` may not be set by plugin `{plugin}`; grant it \
                 in `environment` of [plugins.{plugin}] if you must"
            ));
        }
    }
    if let Some(cwd) = &command.cwd
        && !normalized_absolute(cwd)
    {
        return Err(format!("working directory `{cwd}` is not an absolute path"));
    }
    let user = command
        .user
        .as_deref()
        .map(|user| resolve_user(user, &policy.users, plugin))
        .transpose()?;
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
                command.user.as_deref().unwrap_or_default()
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
    })
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

fn spawn_drain<R: Read + Send + 'static>(
    source: Option<R>,
    cap: usize,
) -> (Arc<Mutex<Captured>>, Option<std::thread::JoinHandle<()>>) {
    let captured = Arc::new(Mutex::new(Captured::default()));
    let handle = source.map(|source| {
        let into = Arc::clone(&captured);
        std::thread::spawn(move || drain(source, cap, into))
    });
    (captured, handle)
}

/// Runs a checked request to completion.
pub(crate) fn run(checked: Checked) -> Result<wit::Output, String> {
    let mut command = std::process::Command::new(&checked.program);
    command
        .args(&checked.args)
        .env_clear()
        .envs(checked.env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    if let Some(cwd) = &checked.cwd {
        command.current_dir(cwd);
    }
    // From root, std drops the supplementary groups when it sets the uid.
    if let Some(gid) = checked.gid {
        std::os::unix::process::CommandExt::gid(&mut command, gid);
    }
    if let Some(uid) = checked.uid {
        std::os::unix::process::CommandExt::uid(&mut command, uid);
    }
    if let Some(umask) = checked.umask {
        set_umask(&mut command, umask);
    }
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot launch `{}`: {error}", checked.program))?;
    let pid = child.id();
    let stdin = child.stdin.take();
    let input = checked.stdin;
    let feeder = stdin.map(|mut stdin| {
        std::thread::spawn(move || {
            // A program may exit without reading its input; a broken pipe is its choice.
            let _ = stdin.write_all(&input);
        })
    });
    let (stdout, stdout_reader) =
        spawn_drain::<ChildStdout>(child.stdout.take(), checked.output_cap);
    let (stderr, stderr_reader) =
        spawn_drain::<ChildStderr>(child.stderr.take(), checked.output_cap);
    let deadline = started + checked.timeout;
    let (status, timed_out) = wait_until(child, pid, deadline)?;
    // The program is gone; what it left in the pipes arrives shortly, unless something
    // it started outside its group still holds them open.
    let grace = Instant::now() + DRAIN_GRACE;
    for handle in [stdout_reader, stderr_reader].into_iter().flatten() {
        while !handle.is_finished() && Instant::now() < grace {
            std::thread::sleep(Duration::from_millis(1));
        }
        if handle.is_finished() {
            let _ = handle.join();
        }
    }
    drop(feeder);
    let take = |captured: &Arc<Mutex<Captured>>| {
        let mut captured = captured.lock().expect("no reader panics while holding it");
        (std::mem::take(&mut captured.bytes), captured.truncated)
    };
    let (stdout, stdout_truncated) = take(&stdout);
    let (stderr, stderr_truncated) = take(&stderr);
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

#[expect(
    unsafe_code,
    reason = "a umask for the child only can be set only between fork and exec"
)]
fn set_umask(command: &mut std::process::Command, umask: u32) {
    let mask = nix::sys::stat::Mode::from_bits_truncate(umask);
    // SAFETY: the closure runs in the child between fork and exec. It calls only
    // umask(2), which is async-signal-safe, on a value computed before the fork; it
    // allocates nothing and takes no lock.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, move || {
            nix::sys::stat::umask(mask);
            Ok(())
        });
    }
}

/// Waits for the child, killing its whole process group at the deadline.
fn wait_until(
    mut child: Child,
    pid: u32,
    deadline: Instant,
) -> Result<(std::process::ExitStatus, bool), String> {
    let (sender, receiver) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    let remaining = deadline.saturating_duration_since(Instant::now());
    let (result, timed_out) = match receiver.recv_timeout(remaining) {
        Ok(result) => (result, false),
        Err(_) => {
            kill_group(pid);
            (
                receiver
                    .recv()
                    .map_err(|_| "the process waiter vanished".to_owned())?,
                true,
            )
        }
    };
    let _ = waiter.join();
    let status = result.map_err(|error| format!("waiting for the program failed: {error}"))?;
    Ok((status, timed_out))
}

fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // The group may already be gone; that is the goal either way.
        let _ =
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn exec_policy() -> PluginPolicy {
        Policy::builtin().plugin("exec").expect("exec").clone()
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
        }
    }

    #[test]
    fn the_policy_decides_what_runs() {
        let policy = exec_policy();
        assert!(check(&policy, Launch::Allowed, &command("/bin/sh", &[])).is_ok());
        let relative = check(&policy, Launch::Allowed, &command("sh", &[]))
            .err()
            .expect("refused");
        assert!(relative.contains("no PATH lookup"), "{relative}");
        let elsewhere = check(&policy, Launch::Allowed, &command("/tmp/x", &[]))
            .err()
            .expect("refused");
        assert!(
            elsewhere.contains("not on the allowlist of plugin `exec`"),
            "{elsewhere}"
        );
        let inspecting = check(&policy, Launch::QueriesOnly, &command("/bin/sh", &[]))
            .err()
            .expect("refused");
        assert!(inspecting.contains("only inspects"), "{inspecting}");
        let mut preload = command("/bin/sh", &[]);
        preload
            .env
            .push(("LD_PRELOAD".to_owned(), "/tmp/x.so".to_owned()));
        let refused = check(&policy, Launch::Allowed, &preload)
            .err()
            .expect("refused");
        assert!(refused.contains("`LD_PRELOAD` may not be set"), "{refused}");
    }

    #[test]
    fn a_program_runs_with_an_empty_environment_and_its_input() {
        let mut request = command("/bin/sh", &["-c", "cat; echo \"[$HOME]\"; exit 3"]);
        request.stdin = Some(b"fed\n".to_vec());
        let output =
            run(check(&exec_policy(), Launch::Allowed, &request).expect("allowed")).expect("ran");
        assert_eq!(output.status, wit::ExitStatus::Exited(3));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "fed\n[]\n");
    }

    #[test]
    fn the_timeout_kills_the_whole_group() {
        let mut request = command("/bin/sh", &["-c", "sleep 30 & sleep 30"]);
        request.timeout_ms = Some(200);
        let started = Instant::now();
        let output =
            run(check(&exec_policy(), Launch::Allowed, &request).expect("allowed")).expect("ran");
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
        let output = run(check(&policy, Launch::Allowed, &request).expect("allowed")).expect("ran");
        assert_eq!(output.stdout.len(), 1000);
        assert!(output.stdout_truncated);
        assert_eq!(output.status, wit::ExitStatus::Exited(0));
    }
}
