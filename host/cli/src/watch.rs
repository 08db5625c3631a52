//! Drift corrected as it happens (`wconverge agent --watch`): after a whole run, the run
//! stays, with its catalog prepared and its plugins loaded, and watches with inotify what
//! the resources name (every path attribute: the files they manage and those they read,
//! such as a template's source; and the files their types declare, `watches`: the package
//! database, `/etc/passwd`) for as long as `--watch-for` says. When something
//! changes, it waits for the changes to settle (`--debounce`), takes the run lock and
//! applies just the resources concerned and whatever they notify (`run_scoped`: the same
//! order, dependencies and notifications as a whole run), then reports the run as a run
//! of its own, marked `corrective_change` and listing what it saw change.
//!
//! Only the resources whose plugins' policies grant what they need are watched: a
//! watch reveals nothing to a plugin, and a resource refused would fail anyway. The
//! host sets the watches up by name, which is harmless: a watch only reads, and a
//! directory swapped for another by someone else at most sends the wrong events, which
//! lead to a check that finds nothing to do (the next whole run reads everything again).
//!
//! Each path is watched through its directory (a write, a change of mode or owner, a
//! removal, a rename, a creation in it) and, when it exists, itself (a write through
//! another hard link). The run's own changes send events too: the resources concerned
//! are then checked once more, found in sync, and that check is no report. A resource
//! that drifts again each time it is corrected (something else on the machine manages
//! it too) is corrected at most [`FLAP_LIMIT`] times a minute, then left to the whole
//! runs, with a warning. Waiting costs nothing: the thread sleeps in `poll` until an
//! event, a signal or the end of `--watch-for`.

use crate::{ReportFormat, fleet, output};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use rustix::event::{PollFd, PollFlags};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use wconverge_engine::report::{Drift, Report, Status};
use wconverge_engine::{Mode, Prepared, Scope};
use wconverge_runtime::Runtime;

/// The longest the changes of one drift may go on before the resources concerned are
/// corrected anyway (or four debounce windows, when that is longer).
const SETTLE_LIMIT: Duration = Duration::from_secs(1);
/// The most corrections of one resource in [`FLAP_WINDOW`].
pub(crate) const FLAP_LIMIT: usize = 20;
const FLAP_WINDOW: Duration = Duration::from_secs(60);
/// How often lost events (the kernel's queue overflowed) may have everything checked.
const OVERFLOW_EVERY: Duration = Duration::from_secs(60);
/// The most paths one drift lists in its report (the run applies them all).
const DRIFT_LISTED: usize = 100;

/// What a watching run is told.
#[derive(Clone, Copy)]
pub(crate) struct Watching {
    /// How long to watch after the whole run.
    pub(crate) duration: Duration,
    /// How long the changes must be quiet before the correction.
    pub(crate) debounce: Duration,
}

/// What a correction needs of the command that ran the whole run.
pub(crate) struct Context<'a> {
    pub(crate) prepared: &'a Prepared,
    pub(crate) runtime: &'a Runtime,
    pub(crate) fleet: &'a fleet::Fleet,
    pub(crate) state_dir: &'a std::path::Path,
    pub(crate) node: &'a str,
    pub(crate) format: ReportFormat,
    pub(crate) jobs: usize,
    /// The catalog has lazy values (evaluated on a deep stack).
    pub(crate) lazy: bool,
}

/// Written to when a signal comes, so that the watch wakes up to it.
static WAKE: OnceLock<OwnedFd> = OnceLock::new();

/// Wakes a watch waiting for events (a signal came: it looks whether to stop).
pub(crate) fn wake() {
    if let Some(fd) = WAKE.get() {
        let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
    }
}

/// The inotify watches and what they concern.
struct Watches {
    inotify: Inotify,
    /// What each watch descriptor watches (several paths when they are one inode).
    by_wd: HashMap<WatchDescriptor, Vec<String>>,
    /// Each watched path and the resources (catalog indices) that name it.
    paths: BTreeMap<String, Vec<usize>>,
    /// The kernel's limit of watches was reached (said once).
    limit_said: bool,
    /// When lost events last had everything checked.
    overflowed: Option<Instant>,
}

fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// What an event says happened, for the report.
fn event_name(mask: AddWatchFlags) -> &'static str {
    if mask.intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_DELETE_SELF) {
        "removed"
    } else if mask.intersects(
        AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_MOVE_SELF,
    ) {
        "moved"
    } else if mask.contains(AddWatchFlags::IN_CREATE) {
        "created"
    } else if mask.contains(AddWatchFlags::IN_ATTRIB) {
        "attributes"
    } else {
        "written"
    }
}

/// What a resource's changes show in: its path attributes, and the files its type
/// declares (`watches`, each `{name}` replaced by the resource's value of `name`).
fn watched(prepared: &Prepared, resource: &wconverge_engine::PreparedResource) -> Vec<String> {
    let Some(schema) = prepared.schema(resource) else {
        return Vec::new();
    };
    let mut found: Vec<String> = resource
        .paths(schema)
        .into_iter()
        .map(|(_, path)| path.trim_end_matches('/').to_owned())
        .filter(|path| path.starts_with('/'))
        .collect();
    found.extend(
        schema
            .watches
            .iter()
            .filter_map(|watch| declared(watch, resource)),
    );
    found
}

/// A file a type declares, for `resource`: each `{name}` replaced by its value of the
/// attribute `name` (a string without `/`); none when one is missing or the path is not
/// absolute and normal.
fn declared(watch: &str, resource: &wconverge_engine::PreparedResource) -> Option<String> {
    let mut path = String::with_capacity(watch.len());
    let mut rest = watch;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}')?;
        path.push_str(&rest[..open]);
        let value = resource.get(&rest[open + 1..close])?.as_str()?;
        if value.is_empty() || value.contains(['/', '\0']) {
            return None;
        }
        path.push_str(value);
        rest = &rest[close + 1..];
    }
    path.push_str(rest);
    let normal = path.starts_with('/')
        && path
            .split('/')
            .skip(1)
            .all(|part| !part.is_empty() && part != "." && part != "..");
    normal.then_some(path)
}

/// How much an event says, for the one a path's drift is listed with.
fn rank(event: &str) -> u8 {
    // A file replaced by a rename (an editor's save, `sed -i`) is also unlinked: moved
    // says more than removed.
    match event {
        "moved" => 5,
        "removed" => 4,
        "created" => 3,
        "written" => 2,
        "attributes" => 1,
        _ => 0,
    }
}

impl Watches {
    /// The watches of the resources of `prepared` that their policies grant.
    fn new(prepared: &Prepared, runtime: &Runtime) -> anyhow::Result<Watches> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|error| anyhow::anyhow!("cannot watch for drift: inotify: {error}"))?;
        let refused: BTreeSet<*const wconverge_engine::PreparedResource> = runtime
            .ungranted(prepared)
            .into_iter()
            .map(|(resource, _)| std::ptr::from_ref(resource))
            .collect();
        let mut paths: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (idx, resource) in prepared.resources.iter().enumerate() {
            if refused.contains(&std::ptr::from_ref(resource)) {
                continue;
            }
            for path in watched(prepared, resource) {
                paths.entry(path).or_default().push(idx);
            }
        }
        let mut watches = Watches {
            inotify,
            by_wd: HashMap::new(),
            paths,
            limit_said: false,
            overflowed: None,
        };
        let all: Vec<String> = watches.paths.keys().cloned().collect();
        for path in &all {
            watches.watch(path);
        }
        Ok(watches)
    }

    /// Watches `path` itself when it exists, and the nearest directory above it that
    /// exists.
    fn watch(&mut self, path: &str) {
        let mut dir = path;
        let mut first = true;
        loop {
            match self.inotify.add_watch(dir, mask()) {
                Ok(wd) => {
                    let watched = self.by_wd.entry(wd).or_default();
                    if !watched.iter().any(|known| known == dir) {
                        watched.push(dir.to_owned());
                    }
                    if !first {
                        return;
                    }
                }
                Err(nix::errno::Errno::ENOSPC) => {
                    if !self.limit_said {
                        self.limit_said = true;
                        output::warning(&format!(
                            "agent: the kernel's limit of inotify watches is reached \
                             (fs.inotify.max_user_watches): `{path}` and the paths after it \
                             are corrected by the whole runs only"
                        ));
                    }
                    return;
                }
                Err(_) => {}
            }
            first = false;
            match dir.rsplit_once('/') {
                Some(("", _)) if dir != "/" => dir = "/",
                Some((parent, _)) if !parent.is_empty() => dir = parent,
                _ => return,
            }
        }
    }

    /// The resources a change at `path` concerns: those naming it or a path beneath it.
    fn concerned(&self, path: &str, into: &mut BTreeSet<usize>) {
        if let Some(found) = self.paths.get(path) {
            into.extend(found);
        }
        let beneath = format!("{}/", path.trim_end_matches('/'));
        for (_, found) in self
            .paths
            .range(beneath.clone()..)
            .take_while(|(other, _)| other.starts_with(&beneath))
        {
            into.extend(found);
        }
    }

    /// Reads the events waiting: the resources they concern, and what changed.
    fn read(&mut self, pending: &mut Pending) {
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) if !events.is_empty() => events,
                _ => return,
            };
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    // Events were lost: everything watched is checked, at most once in
                    // [`OVERFLOW_EVERY`] (a flood of events in a directory others can
                    // write costs at most that); else left to the next whole run.
                    if self
                        .overflowed
                        .is_none_or(|at| at.elapsed() >= OVERFLOW_EVERY)
                    {
                        self.overflowed = Some(Instant::now());
                        let all: Vec<String> = self.paths.keys().cloned().collect();
                        for path in all {
                            self.concerned(&path, &mut pending.resources);
                        }
                    }
                    continue;
                }
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    // The watch is gone (what it watched was removed, which its own
                    // event said): watched again after the correction.
                    self.by_wd.remove(&event.wd);
                    continue;
                }
                let Some(watched) = self.by_wd.get(&event.wd).cloned() else {
                    continue;
                };
                for base in watched {
                    let path = match &event.name {
                        Some(name) => {
                            let name = name.to_string_lossy();
                            if base == "/" {
                                format!("/{name}")
                            } else {
                                format!("{base}/{name}")
                            }
                        }
                        None => base,
                    };
                    let before = pending.resources.len();
                    self.concerned(&path, &mut pending.resources);
                    if pending.resources.len() > before || self.paths.contains_key(&path) {
                        // The most telling event of each path: removed over written.
                        let seen = event_name(event.mask);
                        let kept = pending.drift.entry(path).or_insert(seen);
                        if rank(seen) > rank(kept) {
                            *kept = seen;
                        }
                    }
                }
            }
        }
    }

    /// Stops watching for the resource `idx` (it flaps).
    fn forget(&mut self, idx: usize) {
        self.paths.retain(|_, resources| {
            resources.retain(|&other| other != idx);
            !resources.is_empty()
        });
    }
}

/// What the events since the last correction concern.
#[derive(Default)]
struct Pending {
    resources: BTreeSet<usize>,
    drift: BTreeMap<String, &'static str>,
}

impl Pending {
    /// The events read just after a run are mostly its own (a file it replaced is
    /// `moved`), perhaps with a change made meanwhile: each path is then listed as
    /// `changed` (what happened is not known), unless a later event says more.
    fn own_changes(&mut self) {
        for event in self.drift.values_mut() {
            *event = "changed";
        }
    }
}

/// Whether to stop watching: a signal asked for it.
fn stopping() -> bool {
    wconverge_runtime::stopping().is_some() || wconverge_runtime::interrupted().is_some()
}

/// Waits until `until` for the inotify descriptor to be readable (whether it is), or
/// for `wake` (a signal came; emptied here).
fn wait_readable(inotify: &Inotify, wake: Option<&OwnedFd>, until: Instant) -> bool {
    let left = until.saturating_duration_since(Instant::now());
    let timeout = rustix::event::Timespec {
        tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(left.subsec_nanos()),
    };
    let mut fds = vec![PollFd::new(inotify, PollFlags::IN)];
    if let Some(wake) = wake {
        fds.push(PollFd::new(wake, PollFlags::IN));
    }
    if rustix::event::poll(&mut fds, Some(&timeout)).is_err() {
        // Not expected (no signal reaches this thread); never a loop that spins.
        std::thread::sleep(Duration::from_millis(100));
        return false;
    }
    let readable = !fds[0].revents().is_empty();
    let woken = fds.get(1).is_some_and(|fd| !fd.revents().is_empty());
    drop(fds);
    if let (true, Some(wake)) = (woken, wake) {
        let mut buffer = [0u8; 8];
        let _ = rustix::io::read(wake, &mut buffer);
    }
    readable
}

/// The watches, set up before the whole run: a change during it or just after is
/// seen (what the run itself changed is checked once more, and found in sync).
pub(crate) struct Watcher {
    watches: Watches,
    watching: Watching,
    pending: Pending,
}

impl Watcher {
    pub(crate) fn start(
        prepared: &Prepared,
        runtime: &Runtime,
        watching: Watching,
    ) -> anyhow::Result<Watcher> {
        Ok(Watcher {
            watches: Watches::new(prepared, runtime)?,
            watching,
            pending: Pending::default(),
        })
    }

    /// Right after the whole run: its own changes are queued by now (the kernel queues
    /// an event in the call that causes it). What they concern is checked once more.
    pub(crate) fn after_whole_run(&mut self) {
        self.watches.read(&mut self.pending);
        self.pending.own_changes();
    }
}

/// After the whole run `first`: watches and corrects until `watching.duration` has
/// passed or a signal stops it. The exit code to add to the whole run's: 4 when a
/// correction failed.
pub(crate) fn watch_and_correct(
    context: &Context<'_>,
    first: &Report,
    mut node: wconverge_catalog::NodeAttributes,
    watcher: Watcher,
) -> anyhow::Result<u8> {
    let Watcher {
        mut watches,
        watching,
        mut pending,
    } = watcher;
    let until = Instant::now() + watching.duration;
    let wake = rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .ok()
    .and_then(|fd| {
        let _ = WAKE.set(fd);
        WAKE.get()
    });
    let prepared = context.prepared;
    // How the last run of each resource left it, by catalog index: a later change of one
    // left in sync corrects drift; what depends on one left failed is held back.
    let mut left = vec![Status::Unchanged; prepared.resources.len()];
    let by_reference: HashMap<String, usize> = prepared
        .resources
        .iter()
        .enumerate()
        .map(|(idx, resource)| (resource.reference.to_string(), idx))
        .collect();
    let note = |report: &Report, left: &mut Vec<Status>| {
        for resource in &report.resources {
            if let Some(&idx) = by_reference.get(&resource.resource) {
                left[idx] = resource.status;
            }
        }
    };
    note(first, &mut left);
    let mut corrections: HashMap<usize, VecDeque<Instant>> = HashMap::new();
    let mut code = 0u8;
    while !stopping() && Instant::now() < until {
        if pending.resources.is_empty() {
            if !wait_readable(&watches.inotify, wake, until) {
                continue;
            }
            watches.read(&mut pending);
            if pending.resources.is_empty() {
                continue;
            }
        }
        // Settles: more changes may follow the first (a file written in parts).
        let first_event = Instant::now();
        let settle_limit = SETTLE_LIMIT.max(watching.debounce * 4);
        loop {
            let quiet_until = (Instant::now() + watching.debounce).min(first_event + settle_limit);
            if stopping() || !wait_readable(&watches.inotify, None, quiet_until) {
                break;
            }
            watches.read(&mut pending);
        }
        if stopping() {
            break;
        }
        let Some(_lock) = run_lock(context.state_dir, until) else {
            break;
        };
        let taken = std::mem::take(&mut pending);
        let mut selected = vec![false; prepared.resources.len()];
        for &idx in &taken.resources {
            selected[idx] = true;
        }
        context.runtime.begin_run();
        let (mut report, after) = run(context, (&selected, &left), node.clone());
        node = after;
        let unsynced = context.runtime.sync_directories();
        for problem in &unsynced {
            output::error(problem);
        }
        drop(_lock);
        // The run's own changes are queued by now (the kernel queues an event in the call
        // that causes it): what they concern is checked once more.
        watches.read(&mut pending);
        pending.own_changes();
        let now = Instant::now();
        for resource in &mut report.resources {
            let Some(&idx) = by_reference.get(&resource.resource) else {
                continue;
            };
            if resource.status == Status::Changed {
                resource.corrective_change =
                    matches!(left[idx], Status::Changed | Status::Unchanged);
            }
            // Each change or failure counts towards the limit: a resource that cannot be
            // corrected is not tried again at every event either.
            if matches!(resource.status, Status::Changed | Status::Failed) {
                let times = corrections.entry(idx).or_default();
                times.push_back(now);
                while times
                    .front()
                    .is_some_and(|at| now.duration_since(*at) > FLAP_WINDOW)
                {
                    times.pop_front();
                }
                if times.len() >= FLAP_LIMIT {
                    output::warning(&format!(
                        "agent: {} drifted again each time it was corrected, or could not \
                         be ({FLAP_LIMIT} times in a minute): something else on the machine \
                         changes it too; it is left to the whole runs",
                        resource.resource
                    ));
                    watches.forget(idx);
                    corrections.remove(&idx);
                }
            }
        }
        note(&report, &mut left);
        // What the run changed may have moved what is watched (a directory created, a
        // file replaced by another): watched again.
        for &idx in &taken.resources {
            for path in watched(prepared, &prepared.resources[idx]) {
                watches.watch(&path);
            }
        }
        let changed = report.summary.changed + report.summary.refreshed > 0;
        let failed = report.exit_code & 4 != 0 || !unsynced.is_empty();
        if !changed && !failed {
            // The check after a correction (its own events), or drift undone meanwhile.
            continue;
        }
        if failed {
            code |= 4;
        }
        report.corrective_change = report
            .resources
            .iter()
            .any(|resource| resource.corrective_change);
        report.phases = Some(wconverge_engine::report::Phases {
            run_ms: report.duration_ms,
            ..wconverge_engine::report::Phases::default()
        });
        report.drift = taken
            .drift
            .into_iter()
            .take(DRIFT_LISTED)
            .map(|(path, event)| Drift {
                path,
                event: event.to_owned(),
            })
            .collect();
        print(context, &report);
        context.fleet.send_report(context.node, &report);
    }
    Ok(code)
}

/// The run lock, waited for while another run holds it (a manual `apply`), until
/// `until` or a signal.
fn run_lock(state_dir: &std::path::Path, until: Instant) -> Option<crate::dirs::RunLock> {
    let mut said = false;
    loop {
        match crate::dirs::RunLock::acquire(state_dir) {
            Ok(lock) => return Some(lock),
            Err(error) => {
                if !said {
                    said = true;
                    output::warning(&format!(
                        "agent: drift is corrected once the run lock is free: {error:#}"
                    ));
                }
            }
        }
        if stopping() || Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The scoped run of the `selected` resources, the others as the runs before `left`
/// them, from the node attributes `node`.
fn run(
    context: &Context<'_>,
    (selected, left): (&[bool], &[Status]),
    node: wconverge_catalog::NodeAttributes,
) -> (Report, wconverge_catalog::NodeAttributes) {
    crate::run::run_prepared(
        (context.prepared, context.runtime),
        (Mode::Apply, context.jobs, context.lazy),
        Scope {
            selected: Some(selected),
            left: Some(left),
            node: Some(node),
        },
    )
}

fn print(context: &Context<'_>, report: &Report) {
    match context.format {
        ReportFormat::Json => output::json_line(report),
        ReportFormat::Human => {
            let seen: Vec<String> = report
                .drift
                .iter()
                .map(|drift| format!("{} {}", drift.path, drift.event))
                .collect();
            output::line(&format!("drift: {}", seen.join(", ")));
            output::report_human(
                report,
                (false, false),
                (Duration::ZERO, context.runtime.compiled()),
            );
        }
    }
}
