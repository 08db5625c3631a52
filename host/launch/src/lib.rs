//! Launching programs for plugins, as root, without trusting them: the one part of
//! wconverge that forks. It knows nothing of wasmtime, plugins or policies (a tidy test
//! keeps wasmtime out); the runtime checks a plugin's request against its policy, then
//! hands it here as a [`Request`] and converts the answer back once.
//!
//! What a launched program can and cannot inherit, and how it dies, each with its test:
//!
//! - **The file that was checked.** The program is opened when the request is checked
//!   ([`Programs::pin`]) and run through that descriptor (`/proc/self/fd/N`, behind a
//!   link named like the program), so a path swapped after the check runs nothing else;
//!   as root, a program is pinned only when it and every directory and link on the way
//!   are root's alone ([`walk`], by descriptor from `/`). Tests:
//!   `launches::a_program_someone_else_can_swap_is_not_launched_as_root`,
//!   `launches::a_program_swapped_for_a_shell_while_runs_go_is_never_launched`, runtime
//!   unit `the_program_that_runs_is_the_file_that_was_checked_under_its_own_name`.
//! - **Nothing of wconverge's.** An empty environment but what the request sets, only
//!   standard input, output and error open (every other descriptor is closed at exec,
//!   whatever wconverge inherited: [`close_inherited_on_exec`]), no controlling
//!   terminal (a session of its own), its user, group and umask as asked. Tests:
//!   runtime unit `a_program_runs_with_an_empty_environment_and_its_input`,
//!   `hardening::a_launched_program_gets_only_standard_input_output_and_error`,
//!   `hardening::a_launched_program_has_no_controlling_terminal`.
//! - **Its input.** What the request gives, else `/dev/null` (it reads its end at
//!   once). Test: runtime unit `a_program_that_gets_no_input_reads_the_null_device`.
//! - **Its output, capped.** Each of its output and errors is kept up to the request's
//!   cap, the rest read and dropped so the program never blocks, and marked truncated.
//!   Test: runtime unit `output_is_capped_and_marked_truncated`.
//! - **How it dies.** At its deadline, or when wconverge is interrupted ([`interrupt`]),
//!   it is killed with everything it started: its cgroup (`cgroup.kill`, which no fork
//!   outruns) where a cgroup2 hierarchy is writable, and what /proc shows of its tree
//!   (wconverge is a child subreaper: [`become_subreaper`], so nothing it abandons goes
//!   to init meanwhile); it gets `SIGKILL` if wconverge dies, and a watchdog
//!   ([`watchdog`], wconverge's own binary, outliving it) kills the launches' cgroups if
//!   wconverge is killed. The caller never waits past the deadline and a short grace.
//!   Tests: runtime unit `the_timeout_kills_the_whole_group`,
//!   `hardening::a_timeout_kills_every_descendant_even_one_that_left_its_session`,
//!   `hardening::programs_that_escape_the_tree_are_killed_and_the_run_ends_on_time`,
//!   `hardening::an_interrupted_or_killed_wconverge_leaves_no_program_running`.
//! - **What it leaves.** A program that exits in time may leave descendants running (a
//!   service it started): they are not killed, and the caller does not wait for the
//!   output they hold past the deadline.

pub mod walk;

mod pin;
mod reaping;
mod spawn;
mod supervise;
pub mod watchdog;

pub use pin::{HELD_PROGRAMS, Pinned, Programs};
pub use reaping::{become_subreaper, kill_live, release_cgroups, sweep_cgroups};

use reaping::*;
use rustix::fd::AsRawFd;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use supervise::*;

/// What to run, checked by the caller: the program (an absolute path), its arguments,
/// environment, working directory, user, group and umask, its input, its deadline and
/// the cap on each of its outputs.
pub struct Request {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub umask: Option<u32>,
    pub timeout: Duration,
    pub stdin: Vec<u8>,
    pub output_cap: usize,
    /// The file that will run, opened when the request was checked: the launch runs
    /// exactly it, whatever happens to the path in between.
    pub file: Option<Arc<Pinned>>,
    /// The program is a wrapper that runs another as an architecture: said when the
    /// wrapper is not installed.
    pub wrapped: Option<Wrapped>,
}

/// How a program is run as another architecture, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    /// `i686`.
    pub architecture: String,
    /// In words: `32-bit personality (setarch i686)`.
    pub how: String,
    /// What provides the wrapper: `setarch, from util-linux`.
    pub provided_by: String,
}

/// Why a program did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// It may not run (its file could be replaced by someone else).
    Refused(String),
    /// It does not exist (or the wrapper it needs).
    NotFound(String),
    /// It could not be started.
    Failed(String),
}

impl Error {
    pub fn message(&self) -> &str {
        match self {
            Error::Refused(message) | Error::NotFound(message) | Error::Failed(message) => message,
        }
    }
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(i32),
    Signaled(i32),
    /// Killed at its deadline.
    TimedOut,
}

/// What a program did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration: Duration,
}

/// The signal that interrupted this process, or 0.
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Stops every launch: the programs running now are killed with all their
/// descendants, and nothing more is launched. For a signal handler thread (`signal` is
/// the signal's number, for messages).
pub fn interrupt(signal: i32) {
    INTERRUPTED.store(signal, std::sync::atomic::Ordering::SeqCst);
    kill_live();
}

/// The signal [`interrupt`] was called with, if it was.
pub fn interrupted_by() -> Option<i32> {
    match INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Whether launches are supervised through pidfds (on by default where the kernel has
/// them); off, threads stand in for them, as on kernels without (for tests of that
/// path).
pub fn use_pidfds(usable: bool) {
    PIDFDS_USABLE.store(usable, std::sync::atomic::Ordering::Relaxed);
}

/// How long to wait for a program's output after it (or its group) is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

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

/// Runs `request` to completion: the program, in a session and a cgroup of its own,
/// killed with everything it started at its deadline or on an interruption.
pub fn run(request: Request) -> Result<Output, Error> {
    // Before anything of this launch: the watchdog is no part of it.
    if CGROUPS_USABLE.load(std::sync::atomic::Ordering::Relaxed)
        && let Some(own) = reaping::own_cgroup()
    {
        watchdog::arm(own, reaping::cgroup_prefix());
    }
    // The file opened at the check, through its descriptor: the kernel resolves
    // `/proc/self/fd/N` in the child to that very inode (the descriptor is closed only as
    // the program starts), through a link that carries the program's name when there is
    // one. The program still sees its own path as argv[0]. A script is opened again by
    // its interpreter, by name, so it runs by name.
    let path = match &request.file {
        Some(file) if !file.script => file.exec_path().into_os_string(),
        _ => request.program.clone().into(),
    };
    let text = |text: &[u8], what: &str| {
        std::ffi::CString::new(text).map_err(|_| {
            Error::Failed(format!(
                "cannot launch `{}`: {what} holds a NUL byte",
                request.program
            ))
        })
    };
    let mut spec = crate::spawn::Spawn {
        path: text(
            std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()),
            "its path",
        )?,
        argv: std::iter::once(&request.program)
            .chain(&request.args)
            .map(|arg| text(arg.as_bytes(), "an argument"))
            .collect::<Result<_, _>>()?,
        envp: request
            .env
            .iter()
            .map(|(name, value)| text(format!("{name}={value}").as_bytes(), "the environment"))
            .collect::<Result<_, _>>()?,
        cwd: request
            .cwd
            .as_deref()
            .map(|cwd| text(cwd.as_bytes(), "its working directory"))
            .transpose()?,
        uid: request.uid,
        gid: request.gid,
        umask: request.umask,
        cgroup: None,
        input: !request.stdin.is_empty(),
        outlives_parent: false,
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
    if let (Err(error), Some(file)) = (&spawned, &request.file)
        && error.kind() == std::io::ErrorKind::NotFound
        && !file.script
        && let Ok(by_number) = text(
            std::os::unix::ffi::OsStrExt::as_bytes(file.fd_path().as_os_str()),
            "its path",
        )
        && by_number != spec.path
    {
        // The link that names it is gone (someone cleaned the temporary directory):
        // the file still runs, by its descriptor's number.
        spec.path = by_number;
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
        let program = &request.program;
        match (&request.wrapped, error.kind()) {
            (Some(route), std::io::ErrorKind::NotFound) => {
                let install = if route.provided_by.is_empty() {
                    String::new()
                } else {
                    format!("; install {}", route.provided_by)
                };
                Error::NotFound(format!(
                    "cannot launch `{program}`, which runs programs as `{}` ({}): \
                     it is not installed{install}",
                    route.architecture, route.how
                ))
            }
            (None, std::io::ErrorKind::NotFound) => {
                Error::NotFound(format!("cannot launch `{program}`: it does not exist"))
            }
            _ => Error::Failed(format!("cannot launch `{program}`: {error}")),
        }
    })?;
    let pid = child.pid;
    let killer = cgroup.as_ref().map(LaunchCgroup::killer);
    let _live = Live::register(pid, before.clone(), killer.clone());
    drop(spawning);
    let input = request.stdin;
    // No input (most launches, every guard): the program's input is `/dev/null` (it
    // reads the end of its input at once), and no thread is started to feed it.
    let feeder = child.stdin.map(|mut stdin| {
        std::thread::spawn(move || {
            // A program may exit without reading its input; a broken pipe is its choice.
            let _ = stdin.write_all(&input);
        })
    });
    let deadline = started + request.timeout;
    let mut cgroup = cgroup;
    let ended = || {
        reap_strays(pid);
        if let Some(cgroup) = cgroup.take() {
            cgroup.finish();
        }
    };
    // Where the kernel has pidfds (Linux 5.3), this thread waits for the program and
    // reads its output at once, with one poll: no thread per launch. Elsewhere, threads.
    // The pidfd comes with the child from `clone3`, or is asked for.
    let pidfd = rustix::process::Pid::from_raw(pid)
        .filter(|_| PIDFDS_USABLE.load(std::sync::atomic::Ordering::Relaxed))
        .and_then(|pid| {
            child.pidfd.or_else(|| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
            })
        });
    let supervised = match pidfd {
        Some(pidfd) => supervise(
            pid,
            &pidfd,
            [child.stdout, child.stderr],
            request.output_cap,
            deadline,
            &before,
            killer.as_ref(),
            ended,
        ),
        None => supervise_with_threads(
            pid,
            [child.stdout, child.stderr],
            request.output_cap,
            deadline,
            &before,
            killer.as_ref(),
            ended,
        ),
    };
    drop(feeder);
    let (status, timed_out, [stdout, stderr]) =
        supervised.map_err(|error| Error::Failed(error.to_string()))?;
    let (stdout, stdout_truncated) = (stdout.bytes, stdout.truncated);
    let (stderr, stderr_truncated) = (stderr.bytes, stderr.truncated);
    let status = if timed_out {
        ExitStatus::TimedOut
    } else {
        match status.code() {
            Some(code) => ExitStatus::Exited(code),
            None => {
                use std::os::unix::process::ExitStatusExt;
                ExitStatus::Signaled(status.signal().unwrap_or(0))
            }
        }
    };
    Ok(Output {
        status,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        duration: started.elapsed(),
    })
}

/// Marks every descriptor above 2 that this process holds close-on-exec, so no program
/// it launches inherits one (a descriptor on a root-only file, left open by whoever
/// started wconverge, would otherwise reach a child running as another user).
pub fn close_inherited_on_exec() {
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
