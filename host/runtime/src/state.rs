//! What a plugin instance's store holds, and the host side of the imports it calls:
//! `log`, `process` and `file-metadata`.

use crate::bindings::{file_metadata, log, process};
use crate::convert::truncate;
use crate::files::{Actor, Paths};
use crate::grants::Grant;
use crate::policy::{Access, PluginPolicy};
use crate::process::{Launch, LauncherSlot};
use crate::trail::{Decision, Event, Trail};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use wasmtime::StoreLimits;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};
use wconverge_engine::Secrets;
use wconverge_engine::{Level, LogRecord};

/// How much of a file the host reads at a time to hash it (`file-metadata.sha256`),
/// checking the call's limits between reads.
const SHA256_CHUNK: usize = 64 * 1024;

/// Files smaller than this are read into a buffer on the stack.
const SHA256_SMALL: usize = 8 * 1024;

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
    /// Names for the programs launched, made at the first launch.
    exec_names: OnceLock<Option<crate::process::ExecNames>>,
    /// Directories whose entries plugins changed (renamed, removed, made) and that are
    /// not synced yet: `Runtime::sync_directories` makes them durable once each.
    unsynced: Mutex<HashMap<(u64, u64), (OwnedFd, std::path::PathBuf)>>,
}

/// The most directories waiting for their sync; past it, those waiting are synced.
const MAX_UNSYNCED: usize = 1024;

/// Loads the launcher plugin (see `launcher_loader` in the crate root).
pub(crate) type LauncherLoader = Box<dyn FnOnce() -> LauncherSlot + Send>;

impl Shared {
    pub(crate) fn set_trail(&self, trail: Arc<Trail>) {
        let _ = self.trail.set(trail);
    }

    pub(crate) fn exec_names(&self) -> Option<&crate::process::ExecNames> {
        self.exec_names
            .get_or_init(crate::process::ExecNames::create)
            .as_ref()
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

    /// Records an allowed change of file metadata; an error if the trail cannot take it.
    fn changed(&self, operation: &'static str, path: &str) -> Result<(), String> {
        let Some(trail) = self.shared.trail() else {
            return Ok(());
        };
        if let Some(why) = trail.broken() {
            return Err(self.refused(operation, path, why));
        }
        if trail.logs_allowed() {
            trail.record(self.event(operation, path.to_owned()))?;
        }
        Ok(())
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

    /// The grant containing `path`, and the rest of the path below it. The path must be
    /// absolute and normal: no `.`, `..` or empty component ever leads above a grant.
    fn locate<'a>(&self, path: &'a str) -> Result<(&Arc<Grant>, &'a str), String> {
        if !crate::walk::normal_absolute(path) {
            return Err(self.refused(
                "file-metadata",
                path,
                format!("`{path}` is not an absolute path without `.`, `..` and empty components"),
            ));
        }
        self.grants
            .iter()
            .filter_map(|grant| {
                let guest = grant.guest.as_str();
                let rest = if path == guest {
                    Some("")
                } else if guest == "/" {
                    path.strip_prefix('/')
                } else {
                    path.strip_prefix(guest)
                        .and_then(|rest| rest.strip_prefix('/'))
                };
                rest.map(|rest| (grant, rest))
            })
            .max_by_key(|(grant, _)| grant.guest.len())
            .ok_or_else(|| {
                self.refused(
                    "file-metadata",
                    path,
                    format!(
                        "`{path}` is outside the directories granted to this call ({})",
                        crate::files::granted(&self.grants, self.phase)
                    ),
                )
            })
    }

    /// Refuses to read what is not a regular file (a FIFO, a device) for a plugin.
    fn not_regular(&self, path: &str, kind: FileType) -> String {
        self.refused(
            "file-metadata",
            path,
            format!(
                "`{path}` is {}; wconverge reads only regular files for plugins",
                crate::files::kind_name(kind)
            ),
        )
    }

    /// Records a refusal in the audit trail and returns its reason.
    fn refused(&self, operation: &'static str, target: &str, reason: String) -> String {
        if let Some(trail) = self.shared.trail() {
            // A file that cannot take it leaves the console's warning.
            let _ = trail.record(Event {
                decision: Decision::Denied,
                reason: Some(self.scrub(&reason)),
                ..self.event(operation, target.to_owned())
            });
        }
        reason
    }

    /// The grant and the path below it of an entry beneath a writable grant (never the
    /// grant's directory itself).
    fn locate_writable<'a>(&self, path: &'a str) -> Result<(Arc<Grant>, &'a str), String> {
        let (grant, rest) = self.locate(path)?;
        if self.phase != Phase::Change || grant.access != Access::ReadWrite {
            return Err(self.refused(
                "file-metadata",
                path,
                format!("`{path}` is read-only in this call"),
            ));
        }
        if rest.is_empty() {
            return Err(format!(
                "`{path}` is a directory granted to this call; only what lies beneath it \
                 may be changed"
            ));
        }
        Ok((Arc::clone(grant), rest))
    }

    /// The entry at `rest` beneath `grant`, resolved by descriptor (links followed only
    /// where `walk::link_trust` allows, the entry itself never), opened as an `O_PATH`
    /// handle for a change of its metadata, with whether others can write its directory.
    fn entry(
        &self,
        operation: &'static str,
        grant: &Grant,
        rest: &str,
        path: &str,
    ) -> Result<(OwnedFd, bool), String> {
        let found = match crate::walk::beneath(&grant.fd, rest, false, &grant.canonical) {
            Ok(found) => found,
            Err(crate::walk::BeneathError::Escape) => {
                return Err(self.refused(
                    operation,
                    path,
                    format!("`{path}` leads out of the directories granted"),
                ));
            }
            Err(crate::walk::BeneathError::Untrusted(why)) => {
                return Err(self.refused(operation, path, why.to_string()));
            }
            Err(crate::walk::BeneathError::Errno(errno)) => {
                return Err(format!("cannot open `{path}`: {errno}"));
            }
        };
        let parent = found.parent(&grant.fd);
        let parent_stat =
            rustix::fs::fstat(parent).map_err(|error| format!("cannot stat `{path}`: {error}"))?;
        let fd = open_entry(parent, &parent_stat, &found.name, path)
            .map_err(|why| self.refused(operation, path, why))?;
        Ok((
            fd,
            crate::walk::shared(parent_stat.st_uid, parent_stat.st_mode),
        ))
    }

    /// The open descriptor of the file the plugin created exclusively at `path` (`rest`
    /// beneath `grant`), if it still holds it.
    fn created_file(&self, grant: &Grant, rest: &str) -> Option<Arc<std::fs::File>> {
        let rep = self.paths.created(&grant.canonical.join(rest))?;
        let resource =
            wasmtime::component::Resource::<wasmtime_wasi::filesystem::Descriptor>::new_borrow(rep);
        match self.table.get(&resource).ok()? {
            wasmtime_wasi::filesystem::Descriptor::File(file) => Some(Arc::clone(&file.file)),
            wasmtime_wasi::filesystem::Descriptor::Dir(_) => None,
        }
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
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl crate::bindings::types::Host for PluginState {}

impl log::Host for PluginState {
    fn log(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
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
        let started = Instant::now();
        let shared = &self.shared;
        let checked = crate::process::check_scrubbed(
            &self.policy,
            self.launch(),
            &command,
            || Some(shared.launcher()),
            &|text| self.scrub(text),
        );
        let mut checked = checked;
        if let (Ok(_), Some(why)) = (&checked, crate::interrupted()) {
            checked = Err(process::LaunchError::Refused(why));
        }
        if let Some(trail) = shared.trail() {
            if checked.is_ok()
                && let Some(why) = trail.broken()
            {
                checked = Err(process::LaunchError::Refused(why));
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
                    checked = Err(process::LaunchError::Refused(why));
                }
            }
        }
        let mut result =
            checked.and_then(|checked| crate::process::run(checked, shared.exec_names()));
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

fn kind_of(file_type: FileType) -> file_metadata::FileKind {
    match file_type {
        FileType::RegularFile => file_metadata::FileKind::File,
        FileType::Directory => file_metadata::FileKind::Directory,
        FileType::Symlink => file_metadata::FileKind::Symlink,
        _ => file_metadata::FileKind::Other,
    }
}

/// Opens the entry `name` of the directory `parent` as an `O_PATH` handle on the entry
/// itself, for a change of its metadata, and refuses anything but a regular file or a
/// directory (never a symlink), a file another user could have moved in, and a file
/// with other hard links in a directory other users can write (the other link could be
/// any file of the machine).
fn open_entry(
    parent: rustix::fd::BorrowedFd<'_>,
    parent_stat: &rustix::fs::Stat,
    name: &std::ffi::OsStr,
    path: &str,
) -> Result<OwnedFd, String> {
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|error| format!("cannot open `{path}`: {error}"))?;
    let stat = rustix::fs::fstat(&fd).map_err(|error| format!("cannot stat `{path}`: {error}"))?;
    let shown = std::path::Path::new(path);
    if let Some(reason) = crate::files::moved_in(parent_stat, &stat, shown) {
        return Err(reason);
    }
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => match crate::files::other_links(parent_stat, &stat, shown) {
            Some(reason) => Err(reason),
            None => Ok(fd),
        },
        FileType::Directory => Ok(fd),
        FileType::Symlink => Err(format!("`{path}` is a symlink; it is never followed")),
        kind => Err(format!(
            "`{path}` is {}; wconverge changes only regular files and directories",
            crate::files::kind_name(kind)
        )),
    }
}

impl file_metadata::Host for PluginState {
    fn stat(&mut self, path: String) -> Result<Option<file_metadata::FileStat>, String> {
        let (grant, rest) = self.locate(&path)?;
        let stat = if rest.is_empty() {
            rustix::fs::fstat(&grant.fd)
        } else {
            // The parent resolved beneath the grant by descriptor, following only the
            // links `walk::link_trust` allows; the entry itself is not followed.
            match crate::walk::beneath(&grant.fd, rest, false, &grant.canonical) {
                Ok(found) => rustix::fs::statat(
                    found.parent(&grant.fd),
                    found.name.as_os_str(),
                    AtFlags::SYMLINK_NOFOLLOW,
                ),
                Err(crate::walk::BeneathError::Errno(errno)) => Err(errno),
                Err(crate::walk::BeneathError::Escape) => {
                    return Err(format!("`{path}` leads out of the directories granted"));
                }
                Err(crate::walk::BeneathError::Untrusted(why)) => {
                    return Err(self.refused("file-metadata", &path, why.to_string()));
                }
            }
        };
        let stat = match stat {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Ok(None),
            Err(error) => return Err(format!("cannot stat `{path}`: {error}")),
        };
        let kind = FileType::from_raw_mode(stat.st_mode);
        self.looked.entry = Some((path, kind));
        Ok(Some(file_metadata::FileStat {
            kind: kind_of(kind),
            mode: stat.st_mode & 0o7777,
            uid: stat.st_uid,
            gid: stat.st_gid,
            owner: self.shared.user(stat.st_uid),
            group: self.shared.group(stat.st_gid),
            size: u64::try_from(stat.st_size).unwrap_or(0),
        }))
    }

    fn sha256(&mut self, path: String) -> Result<Option<String>, String> {
        use sha2::Digest;
        use std::io::Read;
        let (grant, rest) = self.locate(&path)?;
        if rest.is_empty() {
            return Err(format!("`{path}` is a directory granted to this call"));
        }
        // Resolved as `open-at` resolves it: by descriptor beneath the grant, links on
        // the way followed only where `walk::link_trust` allows, the entry itself never.
        let found = match crate::walk::beneath(&grant.fd, rest, false, &grant.canonical) {
            Ok(found) => found,
            Err(crate::walk::BeneathError::Errno(
                rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR,
            )) => return Ok(None),
            Err(crate::walk::BeneathError::Errno(errno)) => {
                return Err(format!("cannot open `{path}`: {errno}"));
            }
            Err(crate::walk::BeneathError::Escape) => {
                return Err(format!("`{path}` leads out of the directories granted"));
            }
            Err(crate::walk::BeneathError::Untrusted(why)) => {
                return Err(self.refused("file-metadata", &path, why.to_string()));
            }
        };
        let parent = found.parent(&grant.fd);
        let shown = std::path::Path::new(&path);
        // A special file is refused before it is opened: opening a device can do things.
        // A `stat` of the same path earlier in this call (the usual order: metadata,
        // then content when the size matches) already told what it is.
        let looked = match &self.looked.entry {
            Some((looked, kind)) if *looked == path => Some(*kind),
            _ => None,
        };
        let seen = match (looked, found.entry) {
            (Some(kind), _) => Ok(kind),
            (None, Some(stat)) => Ok(FileType::from_raw_mode(stat.st_mode)),
            (None, None) => {
                rustix::fs::statat(parent, found.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|stat| FileType::from_raw_mode(stat.st_mode))
            }
        };
        let kind = match seen {
            Ok(kind) => kind,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(error) => return Err(format!("cannot stat `{path}`: {error}")),
        };
        match kind {
            FileType::RegularFile => {}
            FileType::Symlink => {
                return Err(format!("`{path}` is a symlink; it is not followed"));
            }
            FileType::Directory => return Err(format!("`{path}` is a directory")),
            kind => return Err(self.not_regular(&path, kind)),
        }
        let file = match rustix::fs::openat(
            parent,
            found.name.as_os_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(file) => file,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(error) => return Err(format!("cannot open `{path}`: {error}")),
        };
        let stat =
            rustix::fs::fstat(&file).map_err(|error| format!("cannot stat `{path}`: {error}"))?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if kind != FileType::RegularFile {
            // Swapped in after the look above.
            return Err(self.not_regular(&path, kind));
        }
        // The granted directory's status is looked at once a call; a directory beneath
        // it each time.
        let grant_key = Arc::as_ptr(grant) as usize;
        let parent_stat = match self.looked.grant_dir {
            Some((key, stat)) if key == grant_key && found.parent.is_none() => stat,
            _ => {
                let stat = rustix::fs::fstat(parent)
                    .map_err(|error| format!("cannot stat `{path}`: {error}"))?;
                if found.parent.is_none() {
                    self.looked.grant_dir = Some((grant_key, stat));
                }
                stat
            }
        };
        if let Some(reason) = crate::files::moved_in(&parent_stat, &stat, shown) {
            return Err(self.refused("file-metadata", &path, reason));
        }
        let mut file = std::fs::File::from(file);
        let mut hasher = sha2::Sha256::new();
        // Most managed files are small: a buffer on the stack, touched already, for them;
        // a bigger one only for a bigger file.
        let size = usize::try_from(stat.st_size).unwrap_or(SHA256_CHUNK);
        let mut small = [0u8; SHA256_SMALL];
        let mut large = Vec::new();
        let buffer: &mut [u8] = if size < SHA256_SMALL {
            &mut small
        } else {
            large.resize(SHA256_CHUNK, 0u8);
            &mut large
        };
        let mut hashed = 0usize;
        loop {
            // The call's limits hold while the host reads for it: a huge file ends in an
            // error at the time limit, not in a call that never returns.
            if hashed >= SHA256_CHUNK && self.stop_reason().is_some() {
                return Err(format!(
                    "reading `{path}` to hash it went past the call's limits"
                ));
            }
            let read = match file.read(buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(format!("cannot read `{path}`: {error}")),
            };
            hasher.update(&buffer[..read]);
            hashed = hashed.saturating_add(read);
            // A small file read whole in one go, to exactly the size its descriptor
            // reported, with room to spare in the buffer: that was its end (a regular
            // file reads short only there), so no read is made to find it.
            if hashed == size && size < buffer.len() {
                break;
            }
        }
        Ok(Some(crate::cache::hex(&hasher.finalize())))
    }

    fn set_mode(&mut self, path: String, mode: u32) -> Result<(), String> {
        if mode > 0o7777 {
            return Err(format!("mode {mode:o} has bits above 07777"));
        }
        let (grant, rest) = self.locate_writable(&path)?;
        let mode = Mode::from_raw_mode(mode);
        let failed = |error| format!("cannot set the mode of `{path}`: {error}");
        // A file the plugin created: through its own descriptor, never by name (another
        // user who may write the directory could have put anything under that name).
        if let Some(file) = self.created_file(&grant, rest) {
            self.changed("set-mode", &path)?;
            return rustix::fs::fchmod(&*file, mode).map_err(failed);
        }
        let (fd, shared) = self.entry("set-mode", &grant, rest, &path)?;
        if shared && mode.bits() & 0o6000 != 0 {
            return Err(self.refused(
                "set-mode",
                &path,
                format!(
                    "`{path}` is in a directory other users can write, where it could have been \
                     swapped for their file: wconverge sets set-user-ID and set-group-ID bits \
                     only on a file it writes, or in a directory only root can write"
                ),
            ));
        }
        self.changed("set-mode", &path)?;
        // chmod through the O_PATH handle's /proc entry changes exactly the inode that
        // was opened without following links (fchmod does not take O_PATH handles).
        rustix::fs::chmod(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(), mode)
            .map_err(failed)
    }

    fn set_owner(
        &mut self,
        path: String,
        owner: Option<String>,
        group: Option<String>,
    ) -> Result<(), String> {
        let (grant, rest) = self.locate_writable(&path)?;
        // A numeric id need not be in the databases; u32::MAX is -1, which chown reads
        // as "leave unchanged".
        let id =
            |text: &str, lookup: &dyn Fn(&str) -> Result<u32, String>| match text.parse::<u32>() {
                Ok(u32::MAX) => Err(format!("`{text}` is not an id")),
                Ok(id) => Ok(id),
                Err(_) => lookup(text),
            };
        let uid = owner
            .as_deref()
            .map(|owner| {
                id(owner, &|name| {
                    crate::process::lookup_user(name).map(|user| user.uid.as_raw())
                })
            })
            .transpose()?;
        let gid = group
            .as_deref()
            .map(|group| {
                id(group, &|name| {
                    crate::process::lookup_group(name).map(|entry| entry.gid.as_raw())
                })
            })
            .transpose()?;
        let uid = uid.map(rustix::fs::Uid::from_raw);
        let gid = gid.map(rustix::fs::Gid::from_raw);
        let failed = |error| format!("cannot change the owner of `{path}`: {error}");
        if let Some(file) = self.created_file(&grant, rest) {
            self.changed("set-owner", &path)?;
            return rustix::fs::fchown(&*file, uid, gid).map_err(failed);
        }
        let (fd, _) = self.entry("set-owner", &grant, rest, &path)?;
        self.changed("set-owner", &path)?;
        // Changing the owner clears set-user-ID and set-group-ID bits (for root too,
        // since Linux 2.2.13), so a provider that sets the mode first and the owner
        // second never leaves a set-ID file of the wrong owner.
        rustix::fs::chownat(&fd, "", uid, gid, AtFlags::EMPTY_PATH).map_err(failed)
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
