//! The watchdog: a small process that outlives a wconverge killed with `SIGKILL` long
//! enough to kill what its launches started.
//!
//! A killed wconverge cannot kill anything: its direct children die with it
//! (`PDEATHSIG`), but what they started in a session of their own lives on, in the
//! launch's cgroup. So before its first launch with a cgroup, wconverge starts this
//! binary again as `wconverge __watchdog DIR PREFIX`, in a session of its own, without
//! `PDEATHSIG`, its standard input a pipe whose other end only wconverge holds. When
//! wconverge ends, however it ends, the pipe reads end of file: the watchdog kills every
//! cgroup in `DIR` named `PREFIX…` (`cgroup.kill`), waits for each to empty, removes it,
//! and exits. A wconverge that ended normally left none.

use std::io::Read;
use std::time::{Duration, Instant};

/// The argument that makes the binary the watchdog.
pub const WATCHDOG_ARGUMENT: &str = "__watchdog";

/// How long the watchdog waits for a killed cgroup to empty.
const EMPTY_WITHIN: Duration = Duration::from_secs(10);

static ENABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The pipe's end wconverge holds for its lifetime, once the watchdog runs.
static ARMED: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();

/// Says that this process's binary answers [`WATCHDOG_ARGUMENT`] with [`run`]: only then
/// does a launch start the watchdog (a test binary of the runtime does not).
pub fn enable() {
    ENABLED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Starts the watchdog, once, where launches get cgroups (`own` is the cgroup they are
/// made in, `prefix` how this process names them).
pub(super) fn arm(own: &std::path::Path, prefix: &str) {
    if !ENABLED.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    ARMED.get_or_init(|| {
        let text = |text: &str| std::ffi::CString::new(text).ok();
        let spec = crate::spawn::Spawn {
            path: text("/proc/self/exe")?,
            argv: vec![
                text("wconverge-watchdog")?,
                text(WATCHDOG_ARGUMENT)?,
                text(own.to_str()?)?,
                text(prefix)?,
            ],
            envp: Vec::new(),
            cwd: Some(text("/")?),
            uid: None,
            gid: None,
            umask: None,
            cgroup: None,
            input: true,
            outlives_parent: true,
        };
        match crate::spawn::spawn(&spec) {
            Ok(spawned) => spawned.stdin,
            Err(error) => {
                tracing::warn!(
                    "the watchdog could not start ({error}): if wconverge is killed, what its \
                     programs started may run on until the next run"
                );
                None
            }
        }
    });
}

/// The watchdog itself (`wconverge __watchdog DIR PREFIX`): waits for its input to end,
/// then kills and removes the cgroups. Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let [dir, prefix] = args else {
        return 2;
    };
    // Its own session keeps it from the terminal's signals; these are blocked besides
    // (it has one thread), so that only the end of wconverge ends it.
    let mut blocked = nix::sys::signal::SigSet::empty();
    for signal in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGQUIT,
    ] {
        blocked.add(signal);
    }
    let _ = blocked.thread_block();
    let mut sink = [0u8; 64];
    let mut input = std::io::stdin().lock();
    loop {
        match input.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kill_all(std::path::Path::new(dir), prefix);
    0
}

/// Kills every cgroup in `dir` named `prefix…`, and removes each once it is empty.
fn kill_all(dir: &std::path::Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let cgroups: Vec<std::path::PathBuf> = entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with(prefix))
        })
        .map(|entry| entry.path())
        .collect();
    for cgroup in &cgroups {
        let _ = std::fs::write(cgroup.join("cgroup.kill"), b"1");
    }
    let deadline = Instant::now() + EMPTY_WITHIN;
    for cgroup in &cgroups {
        while std::fs::read_to_string(cgroup.join("cgroup.procs"))
            .is_ok_and(|procs| !procs.trim().is_empty())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir(cgroup);
    }
}
