//! What a plugin instance's store holds, and the host side of the imports it calls:
//! `log`, `process` and `file-metadata`.

use crate::bindings::{log, process};
use crate::convert::truncate;
use crate::files::{Actor, Paths};
use crate::grants::Grant;
use crate::policy::PluginPolicy;
use crate::process::{Launch, LauncherSlot};
use crate::trail::{Decision, Event, Trail};
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Mode, OFlags};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use wasmtime::StoreLimits;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};
use wconverge_engine::Secrets;
use wconverge_engine::{Level, LogRecord};

mod metadata;

/// What a call may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// `describe` and `validate`: no directories, no programs.
    Describe,
    /// `current-state` and `plan`, and everything in a noop run: directories read-only,
    /// only query programs.
    Inspect,
    /// `apply` and `refresh`: the access the resource declares, as the policy allows.
    Change,
    /// An interpreter evaluating a guard: no directories, and any program its policy
    /// allows (guards run in noop runs too; that is how a noop run predicts).
    Guard,
}

/// Why the host stopped a plugin: it turns a trap into a message that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Its code used more CPU time than its limit.
    Cpu,
    /// wconverge was interrupted.
    Interrupted,
    /// The call went past its wall-clock limit.
    Deadline,
    Output,
}

/// CPU time this thread has used: a plugin's code runs on the thread that calls it.
pub(crate) fn thread_cpu_time() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or(0),
        u32::try_from(time.tv_nsec).unwrap_or(0),
    )
}

/// What every instance of a run shares: user and group names by id, and the launcher
/// plugin that maps an `architecture` to a launch.
#[derive(Default)]
pub(crate) struct Shared {
    users: Mutex<HashMap<u32, Option<String>>>,
    groups: Mutex<HashMap<u32, Option<String>>>,
    /// Loaded the first time a launch names an architecture; an error says why there is
    /// none.
    launcher: OnceLock<LauncherSlot>,
    launcher_loader: Mutex<Option<LauncherLoader>>,
    /// The run's audit trail, when the operator asked for one or a console is set.
    trail: OnceLock<Arc<Trail>>,
    /// The programs launched, held open with their names, from the first launch on.
    programs: OnceLock<crate::process::Programs>,
    /// Directories whose entries plugins changed (renamed, removed, made) and that are
    /// not synced yet: `Runtime::sync_directories` makes them durable once each.
    unsynced: Mutex<HashMap<(u64, u64), (OwnedFd, std::path::PathBuf)>>,
    /// Counts the plugin code running, for the epoch ticker.
    pub(crate) ticker: Arc<crate::ticker::Gate>,
}

/// The most directories waiting for their sync; past it, those waiting are synced.
const MAX_UNSYNCED: usize = 1024;

/// Loads the launcher plugin (see `launcher_loader` in the crate root).
pub(crate) type LauncherLoader = Box<dyn FnOnce() -> LauncherSlot + Send>;

impl Shared {
    pub(crate) fn set_trail(&self, trail: Arc<Trail>) {
        let _ = self.trail.set(trail);
    }

    pub(crate) fn programs(&self) -> &crate::process::Programs {
        self.programs.get_or_init(crate::process::Programs::new)
    }

    /// Notes that a plugin changed an entry of `dir` (at `path`): the directory is
    /// synced once, at the end of the run (or when too many wait), not after every
    /// change. The entry's own content was made durable by its writer; a crash before
    /// the sync leaves each name with its old file or its new one, never a half-written
    /// one.
    pub(crate) fn changed_directory(
        &self,
        dir: rustix::fd::BorrowedFd<'_>,
        path: &std::path::Path,
    ) {
        let Ok(stat) = rustix::fs::fstat(dir) else {
            return;
        };
        let key = (stat.st_dev, stat.st_ino);
        let mut unsynced = self.unsynced.lock().expect("unsynced directories lock");
        if unsynced.contains_key(&key) {
            return;
        }
        if unsynced.len() >= MAX_UNSYNCED {
            for (fd, _) in std::mem::take(&mut *unsynced).into_values() {
                let _ = rustix::fs::fsync(&fd);
            }
        }
        // The directory reopened for reading: the descriptors of walks are `O_PATH`,
        // which cannot be synced.
        let Ok(fd) = rustix::fs::openat(
            dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        unsynced.insert(key, (fd, path.to_path_buf()));
    }

    /// Syncs every directory whose entries changed since the last call: the problems,
    /// each naming its directory.
    pub(crate) fn sync_directories(&self) -> Vec<String> {
        let unsynced =
            std::mem::take(&mut *self.unsynced.lock().expect("unsynced directories lock"));
        unsynced
            .into_values()
            .filter_map(|(fd, path)| {
                rustix::fs::fsync(&fd).err().map(|error| {
                    format!(
                        "cannot sync directory `{}`: {error}; what changed in it may not \
                         survive a crash of the machine",
                        path.display()
                    )
                })
            })
            .collect()
    }

    pub(crate) fn trail(&self) -> Option<&Trail> {
        self.trail.get().map(|trail| &**trail)
    }

    pub(crate) fn set_launcher_loader(&self, loader: LauncherLoader) {
        *self.launcher_loader.lock().expect("launcher loader lock") = Some(loader);
    }

    /// The launcher, loaded on first use.
    pub(crate) fn launcher(&self) -> &LauncherSlot {
        self.launcher.get_or_init(|| {
            let loader = self
                .launcher_loader
                .lock()
                .expect("launcher loader lock")
                .take();
            match loader {
                Some(load) => load(),
                None => Err("no launcher is configured".to_owned()),
            }
        })
    }
}

impl Shared {
    fn user(&self, uid: u32) -> Option<String> {
        let mut users = self.users.lock().expect("name cache lock");
        users
            .entry(uid)
            .or_insert_with(|| {
                nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map(|user| user.name)
            })
            .clone()
    }

    fn group(&self, gid: u32) -> Option<String> {
        let mut groups = self.groups.lock().expect("name cache lock");
        groups
            .entry(gid)
            .or_insert_with(|| {
                nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
                    .ok()
                    .flatten()
                    .map(|group| group.name)
            })
            .clone()
    }
}

/// The data of one plugin instance's store.
pub(crate) struct PluginState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: StoreLimits,
    pub(crate) policy: Arc<PluginPolicy>,
    /// The sha256 of the plugin's component, for the audit trail.
    pub(crate) digest: Arc<str>,
    /// The resource the current call is about, and its secrets (the audit trail names
    /// the one and never shows the others).
    pub(crate) subject: Option<(String, Secrets)>,
    pub(crate) phase: Phase,
    pub(crate) grants: Vec<Arc<Grant>>,
    pub(crate) shared: Arc<Shared>,
    /// Per call: what the plugin logged, and how many bytes of output it used.
    pub(crate) logs: Vec<LogRecord>,
    pub(crate) output_used: usize,
    /// Per call: when it started, the thread's CPU time then, and how long the programs
    /// it launched ran since (which its wall-clock limit does not count).
    pub(crate) call_started: Instant,
    pub(crate) cpu_started: Duration,
    pub(crate) program_time: Duration,
    pub(crate) stop: Option<Stop>,
    /// Where the instance's open file descriptors are, for the audit trail.
    pub(crate) paths: Paths,
    /// Per call: what `file-metadata` last looked at, so that `sha256` after `stat` of
    /// the same file does not look again.
    pub(crate) looked: Looked,
    /// While a call is recorded for replay: what it read (see `replay`).
    pub(crate) reads: Option<crate::replay::Reads>,
    /// Whether the plugin reached the host other than through what `reads` records,
    /// since the instance was made: a WASI function, a launch, a log line, a change of
    /// metadata. Every import sets it but `file-metadata.stat` and `.sha256`, which
    /// record their answers instead; a call of an instance that set it is never
    /// replayed.
    pub(crate) unrecorded: bool,
    /// While a remembered call's reads are made again (see `replay`): the refusals they
    /// met, for the audit trail once the call is replayed; when it is not, the call
    /// itself meets and records them.
    pub(crate) held: std::cell::RefCell<Option<Vec<Event>>>,
}

/// What `file-metadata` saw earlier in the same call. Each is only a first look: the
/// file is still checked by its descriptor once open, so reusing one is no weaker than
/// looking again a moment later (the entry can change between any look and the open).
#[derive(Default)]
pub(crate) struct Looked {
    /// The path `stat` last found, and what it was.
    entry: Option<(String, FileType)>,
    /// A granted directory's own status (by the grant's address), for the check that
    /// a file in it was not moved in by another user.
    grant_dir: Option<(usize, rustix::fs::Stat)>,
}

impl PluginState {
    /// Who acts in this store, for the audit trail.
    pub(crate) fn actor(&self) -> Actor<'_> {
        Actor {
            policy: &self.policy,
            digest: &self.digest,
            subject: self.subject.as_ref(),
            trail: self.shared.trail(),
        }
    }

    /// `text` without the current resource's secrets.
    pub(crate) fn scrub(&self, text: &str) -> String {
        self.actor().scrub(text)
    }

    /// An event of this plugin about the current resource, allowed until said otherwise.
    pub(crate) fn event(&self, operation: &'static str, target: String) -> Event {
        self.actor().event(operation, &target)
    }

    pub(crate) fn begin_call(&mut self) {
        self.paths.begin_call();
        self.looked = Looked::default();
        self.logs.clear();
        self.output_used = 0;
        self.call_started = Instant::now();
        self.cpu_started = thread_cpu_time();
        self.program_time = Duration::ZERO;
        self.stop = None;
    }

    /// Wall-clock time this call has taken, not counting its programs.
    fn wall_time(&self) -> Duration {
        self.call_started
            .elapsed()
            .saturating_sub(self.program_time)
    }

    /// What is left of this call's wall-clock limit.
    pub(crate) fn wall_remaining(&self) -> Duration {
        Duration::from_secs_f64(self.policy.limits.wall_seconds).saturating_sub(self.wall_time())
    }

    /// The limit this call has gone past, if any (checked at every epoch tick while the
    /// plugin's code runs).
    pub(crate) fn stop_reason(&self) -> Option<Stop> {
        let limits = &self.policy.limits;
        if crate::interrupted().is_some() {
            Some(Stop::Interrupted)
        } else if thread_cpu_time().saturating_sub(self.cpu_started)
            > Duration::from_secs_f64(limits.cpu_seconds)
        {
            Some(Stop::Cpu)
        } else if self.wall_time() > Duration::from_secs_f64(limits.wall_seconds) {
            Some(Stop::Deadline)
        } else {
            None
        }
    }

    fn launch(&self) -> Launch {
        match self.phase {
            Phase::Describe => Launch::Never,
            Phase::Inspect => Launch::QueriesOnly,
            Phase::Change | Phase::Guard => Launch::Allowed,
        }
    }

    /// Records a refusal in the audit trail (or holds it, see [`PluginState::held`])
    /// and returns its reason.
    fn refused(&self, operation: &'static str, target: &str, reason: String) -> String {
        if let Some(trail) = self.shared.trail() {
            let event = Event {
                decision: Decision::Denied,
                reason: Some(self.scrub(&reason)),
                ..self.event(operation, target.to_owned())
            };
            match self.held.borrow_mut().as_mut() {
                Some(held) => held.push(event),
                // A file that cannot take it leaves the console's warning.
                None => {
                    let _ = trail.record(event);
                }
            }
        }
        reason
    }

    fn record(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        self.output_used += message.len();
        if self.output_used > self.policy.limits.output_bytes {
            self.stop = Some(Stop::Output);
            wasmtime::bail!("the plugin logged more than its output limit");
        }
        // Secrets out before the cut, which could split one.
        self.logs.push(LogRecord {
            level,
            message: truncate(&self.scrub(&message)),
        });
        Ok(())
    }
}

impl WasiView for PluginState {
    /// Every WASI function wasmtime-wasi implements reaches the store through here (and
    /// those this host replaces through `files::view` and `clock::view`), so each marks
    /// the instance as reading what no replay records.
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.unrecorded = true;
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl crate::bindings::types::Host for PluginState {}

impl log::Host for PluginState {
    fn log(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
        self.unrecorded = true;
        let level = match level {
            log::Level::Debug => Level::Debug,
            log::Level::Info => Level::Info,
            log::Level::Notice => Level::Notice,
            log::Level::Warning => Level::Warning,
            log::Level::Error => Level::Error,
        };
        self.record(level, message)
    }
}

impl process::Host for PluginState {
    fn run(&mut self, command: process::Command) -> Result<process::Output, process::LaunchError> {
        self.unrecorded = true;
        let started = Instant::now();
        let shared = &self.shared;
        let checked = crate::process::check_scrubbed(
            &self.policy,
            self.launch(),
            &command,
            || Some(shared.launcher()),
            &|text| self.scrub(text),
            shared.programs(),
        );
        let mut checked = checked;
        if let (Ok(_), Some(why)) = (&checked, crate::interrupted()) {
            checked = Err(process::LaunchError::Refused(why));
        }
        // Whatever the plugin: a command line is public (every local user reads it in
        // /proc while the program runs), so no secret of the resource goes on one.
        if checked.is_ok()
            && let Some((subject, secrets)) = &self.subject
            && std::iter::once(&command.program)
                .chain(&command.args)
                .any(|arg| secrets.within(arg))
        {
            checked = Err(process::LaunchError::Refused(format!(
                "a secret of {subject} would be on the command line of `{}`, which every \
                 local user can read while it runs; secrets go to a program on its standard \
                 input or in its environment",
                self.scrub(&command.program)
            )));
        }
        if let Some(trail) = shared.trail() {
            if checked.is_ok()
                && let Some(why) = trail.broken()
            {
                checked = Err(process::LaunchError::Refused(why.to_string()));
            }
            let denied = match &checked {
                Err(process::LaunchError::Refused(reason)) => Some(reason.as_str()),
                _ => None,
            };
            if denied.is_some() || trail.logs_allowed() {
                // Secrets out of each argument before quoting and cutting.
                let mut line = vec![self.scrub(&command.program)];
                line.extend(command.args.iter().map(|arg| self.scrub(arg)));
                let resolved = checked
                    .as_ref()
                    .ok()
                    .and_then(crate::process::Checked::resolved);
                let launched = checked
                    .as_ref()
                    .ok()
                    .and_then(|checked| checked.launched(&|text| self.scrub(text)));
                let event = self.event("launch", crate::arguments::display_args(&line, 4096));
                let recorded = trail.record(Event {
                    resolved,
                    launched,
                    decision: if denied.is_some() {
                        Decision::Denied
                    } else {
                        Decision::Allowed
                    },
                    reason: match &checked {
                        Err(process::LaunchError::Refused(reason)) => Some(self.scrub(reason)),
                        // Allowed, but there was nothing to run (a missing program, an
                        // architecture the machine cannot run).
                        Err(
                            process::LaunchError::NotFound(why) | process::LaunchError::Failed(why),
                        ) => Some(format!("granted; not launched: {}", self.scrub(why))),
                        Ok(_) => None,
                    },
                    ..event
                });
                // A launch the trail could not record does not happen.
                if let Err(why) = recorded
                    && checked.is_ok()
                {
                    checked = Err(process::LaunchError::Refused(why.to_string()));
                }
            }
        }
        let mut result = checked.and_then(crate::process::run);
        // Output cut at the cap may end with the start of a secret: drop it here, where
        // the secrets are known, before the plugin passes it on in pieces.
        if let (Ok(output), Some((_, secrets))) = (&mut result, &self.subject) {
            if output.stdout_truncated {
                secrets.trim_cut(&mut output.stdout);
            }
            if output.stderr_truncated {
                secrets.trim_cut(&mut output.stderr);
            }
        }
        self.program_time += started.elapsed();
        if let Err(error) = &result {
            // The plugin gets the error and reports it with its resource.
            tracing::debug!(plugin = %self.policy.name, "{}", crate::process::message(error));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::Shared;
    use rustix::fd::AsFd;

    #[test]
    fn a_changed_directory_is_synced_once_however_often_it_changed() {
        let temp = tempfile::tempdir().expect("temporary directory");
        let other = tempfile::tempdir().expect("temporary directory");
        let shared = Shared::default();
        // As a walk leaves it: an `O_PATH` descriptor, which cannot be synced itself.
        let path_fd = rustix::fs::open(
            temp.path(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .expect("O_PATH");
        let plain = std::fs::File::open(temp.path()).expect("open");
        for _ in 0..3 {
            shared.changed_directory(path_fd.as_fd(), temp.path());
        }
        shared.changed_directory(plain.as_fd(), temp.path());
        let other_fd = std::fs::File::open(other.path()).expect("open");
        shared.changed_directory(other_fd.as_fd(), other.path());
        assert_eq!(shared.unsynced.lock().expect("lock").len(), 2);
        assert_eq!(shared.sync_directories(), Vec::<String>::new());
        assert!(shared.unsynced.lock().expect("lock").is_empty());
        assert_eq!(shared.sync_directories(), Vec::<String>::new());
    }
}
