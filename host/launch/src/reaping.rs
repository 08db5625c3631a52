//! Every launched program's end: the programs running now, a cgroup of its own for
//! each launch (pooled, swept after a run that died), the kill of a whole tree at a
//! deadline or on an interrupt, and the reaping of strays.

use super::*;

/// The programs running now, by process id, each with wconverge's children from before
/// it started: an interrupted wconverge kills their trees.
pub(super) static LIVE: Mutex<Vec<Running>> = Mutex::new(Vec::new());

/// A program running now: its pid, how to tell which of wconverge's children are not
/// its own, and its cgroup's kill switch.
pub(super) type Running = (i32, Before, Option<Killer>);

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
    pub(super) fn includes(&self, pid: i32) -> bool {
        match self {
            Before::Children(children) => children.contains(&pid),
            Before::OwnCgroup => own_cgroup_name()
                .is_some_and(|own| cgroup_name(&pid.to_string()).is_some_and(|name| name == own)),
        }
    }
}

/// Held while a program is spawned and registered, and while wconverge's children are
/// scanned for strays: a child spawned by another thread is never taken for one.
pub(super) static SPAWN: Mutex<()> = Mutex::new(());

/// For a test that spawns a child outside [`run`] and waits for it itself: while held,
/// no launch ending in another test reaps it as a stray (`reap_strays` takes this lock).
#[cfg(test)]
pub(crate) fn hold_reaping() -> std::sync::MutexGuard<'static, ()> {
    SPAWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One running program in [`LIVE`], until dropped.
pub(super) struct Live(i32);

impl Live {
    pub(super) fn register(pid: i32, before: Before, killer: Option<Killer>) -> Live {
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
pub fn kill_live() {
    let live = LIVE.lock().expect("live programs lock").clone();
    for (pid, before, killer) in live {
        kill_launch(pid, &before, killer.as_ref());
    }
}

/// Kills a launch: its cgroup, if it has one, then its tree as /proc shows it (for what
/// left the cgroup, or where there is none).
pub(super) fn kill_launch(root: i32, before: &Before, killer: Option<&Killer>) {
    if let Some(killer) = killer {
        killer.kill();
    }
    kill_tree(root, before);
}

/// Removes the launch cgroups that wconverge processes no longer running left (one killed
/// with `SIGKILL` cannot remove its own); a cgroup that still holds a process stays. A
/// cgroup is named for the process that made it by pid and start time, so a pid used
/// again since does not keep it.
pub fn sweep_cgroups() {
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

/// How this process's launch cgroups are named, before their number: for the process
/// that made them, by pid and start time (read once: it never changes).
pub(crate) fn cgroup_prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| {
        format!(
            "wconverge-{}-{}-",
            std::process::id(),
            start_time(std::process::id()).unwrap_or(0)
        )
    })
}

/// When process `pid` started (in clock ticks since boot), if it runs.
pub(super) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, in parentheses: state is field 3, start time field 22.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The cgroup v2 of process `pid` (or `self`), as /proc names it (`/a/b`).
pub(super) fn cgroup_name(pid: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("0::").map(str::to_owned))
}

/// This process's cgroup v2, read once (wconverge never moves).
pub(super) fn own_cgroup_name() -> Option<&'static str> {
    static OWN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    OWN.get_or_init(|| cgroup_name("self")).as_deref()
}

/// The cgroup v2 hierarchy and this process's cgroup in it, found once: where launches
/// get cgroups of their own. `None` where there is no cgroup2 file system, or this
/// process may not make cgroups in it.
pub(super) fn own_cgroup() -> Option<&'static std::path::Path> {
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
pub(super) struct Killer(Arc<(rustix::fd::OwnedFd, std::sync::atomic::AtomicBool)>);

impl Killer {
    pub(super) fn kill(&self) {
        self.0.1.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = rustix::io::write(&self.0.0, b"1");
    }

    pub(super) fn killed(&self) -> bool {
        self.0.1.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Whether launches get cgroups: false once one could not be joined.
pub(super) static CGROUPS_USABLE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

/// Launch cgroups that are empty again, kept for the next launches (making and removing
/// a cgroup each time costs more than the launch).
pub(super) static POOL: Mutex<Vec<LaunchCgroup>> = Mutex::new(Vec::new());

/// The cgroup a program is born in, under this process's own; one launch at a time.
pub(crate) struct LaunchCgroup {
    dir: std::path::PathBuf,
    pub(super) dir_fd: rustix::fd::OwnedFd,
    pub(super) procs: rustix::fd::OwnedFd,
    /// `cgroup.procs` open for reading, read again from its start after each launch.
    listing: rustix::fd::OwnedFd,
    own_procs: rustix::fd::OwnedFd,
    kill: Killer,
}

impl LaunchCgroup {
    /// An empty cgroup for one launch, from the pool or new; `None` where there can be
    /// none (then the kill goes by /proc alone).
    pub(super) fn take() -> Option<LaunchCgroup> {
        if !CGROUPS_USABLE.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        if let Some(cgroup) = POOL.lock().expect("cgroup pool lock").pop() {
            return Some(cgroup);
        }
        Self::create()
    }

    pub(super) fn create() -> Option<LaunchCgroup> {
        use rustix::fs::{Mode, OFlags};
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let own = own_cgroup()?;
        let dir = own.join(format!(
            "{}{}",
            cgroup_prefix(),
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
                listing: rustix::fs::open(
                    dir.join("cgroup.procs"),
                    OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()?,
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

    pub(super) fn killer(&self) -> Killer {
        self.kill.clone()
    }

    /// Whether a process is still in it (or in a cgroup below it).
    pub(super) fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "populated 1"))
    }

    /// Done with the launch: what is left in the cgroup (a service the program started)
    /// goes back to this process's cgroup, and the cgroup, empty, goes back to the pool;
    /// one that was killed is removed instead (Linux 6.x kills every process later cloned
    /// into a cgroup whose kill count differs from its parent's: a killed cgroup would
    /// kill every program born in it).
    pub(super) fn finish(self) {
        if self.kill.killed() {
            // What was killed may still be dying: removed at the end of the runtime.
            KILLED.lock().expect("cgroup pool lock").push(self);
            return;
        }
        for _ in 0..KILL_ROUNDS {
            let Some(procs) = self.members() else {
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

    /// The processes in it now: its open `cgroup.procs` read again from the start (one
    /// read when it is empty, as after almost every launch), up to [`MEMBERS_CAP`]
    /// bytes; `None` if it cannot be read.
    fn members(&self) -> Option<String> {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        // Each read starts where the one before ended, as the listing expects.
        while bytes.len() < MEMBERS_CAP {
            let read = rustix::io::pread(&self.listing, &mut chunk, bytes.len() as u64).ok()?;
            if read == 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..read]);
        }
        if bytes.len() >= MEMBERS_CAP {
            // Whole lines only: a number cut short would name another process.
            let whole = bytes
                .iter()
                .rposition(|&byte| byte == b'\n')
                .map_or(0, |at| at + 1);
            bytes.truncate(whole);
        }
        String::from_utf8(bytes).ok()
    }
}

/// The most of a launch cgroup's listing read at a time (its process ids, a line
/// each): the rest is moved out in the next round.
const MEMBERS_CAP: usize = 1 << 20;

/// Launch cgroups that were killed, to remove once what they held has died.
pub(super) static KILLED: Mutex<Vec<LaunchCgroup>> = Mutex::new(Vec::new());

/// How long the end of a runtime waits for killed cgroups to empty.
pub(super) const KILLED_EMPTY_WAIT: Duration = Duration::from_secs(1);

/// Removes the pool's cgroups and the killed ones (when the runtime ends), waiting up to
/// [`KILLED_EMPTY_WAIT`] for a killed one to empty; one still busy then is left to the
/// next run's `sweep_cgroups`.
pub fn release_cgroups() {
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
pub fn become_subreaper() {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// The children of process `parent`, from /proc.
pub(super) fn children_of(parent: u32) -> Vec<i32> {
    let parent = i32::try_from(parent).unwrap_or(0);
    parent_links()
        .into_iter()
        .filter(|(_, ppid, _)| *ppid == parent)
        .map(|(pid, ..)| pid)
        .collect()
}

/// The programs running now.
pub(super) fn live_pids() -> Vec<i32> {
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
pub(super) fn reap_strays(live: i32) {
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
pub(super) const KILL_TIME: Duration = Duration::from_secs(1);

/// The most rounds a loop over a cgroup's processes makes.
pub(super) const KILL_ROUNDS: usize = 100;

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
pub(super) fn parent_links() -> Vec<(i32, i32, bool)> {
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
pub(super) const KILLED_GRACE: Duration = Duration::from_secs(2);

/// How often a wait looks whether wconverge was interrupted.
pub(super) const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// Why a launched program's end could not be waited for.
#[derive(Debug)]
pub(crate) enum WaitError {
    /// The system call that waits (`waitpid`, `poll` on its pidfd) failed.
    Failed(std::io::Error),
    /// The thread that waits for it is gone without an answer.
    WaiterGone,
    /// Its pidfd said it ended, and no status came.
    StatusLost,
}

impl std::fmt::Display for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitError::Failed(error) => write!(f, "waiting for the program failed: {error}"),
            WaitError::WaiterGone => f.write_str("the process waiter vanished"),
            WaitError::StatusLost => f.write_str("the program's status was lost"),
        }
    }
}

impl std::error::Error for WaitError {}

/// Waits for the child, killing it with all its descendants at the deadline, or when
/// wconverge is interrupted. Never waits past the deadline and a short grace: a child
/// whose exit status cannot be collected (a tracer holds it) is reported killed.
pub(super) fn wait_until(
    child: i32,
    deadline: Instant,
    before: &Before,
    killer: Option<&Killer>,
) -> Result<(std::process::ExitStatus, bool), WaitError> {
    let (sender, receiver) = mpsc::channel();
    // Not joined: if the status never comes, the thread stays blocked, not the run.
    std::thread::spawn(move || {
        let _ = sender.send(crate::spawn::wait(child));
    });
    loop {
        let now = Instant::now();
        if now >= deadline || crate::interrupted_by().is_some() {
            break;
        }
        match receiver.recv_timeout((deadline - now).min(INTERRUPT_POLL)) {
            Ok(result) => {
                let status = result.map_err(WaitError::Failed)?;
                return Ok((status, false));
            }
            // A daemon an earlier launch started came to wconverge, a subreaper, when that
            // launch ended; once it dies (this launch stops it, say) it is reaped here, or
            // whoever waits for it to be gone (`start-stop-daemon --retry`) would wait for
            // a zombie.
            Err(mpsc::RecvTimeoutError::Timeout) => reap_strays(child),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(WaitError::WaiterGone);
            }
        }
    }
    kill_launch(child, before, killer);
    let status = match receiver.recv_timeout(KILLED_GRACE) {
        Ok(result) => result.map_err(WaitError::Failed)?,
        Err(_) => {
            use std::os::unix::process::ExitStatusExt;
            std::process::ExitStatus::from_raw(libc::SIGKILL)
        }
    };
    Ok((status, true))
}
