//! `apply --jobs N`: up to N resources applied at once, without changing what the
//! manifest means: the run does what `--jobs 1` does, in the same order wherever order
//! can matter.
//!
//! Each resource goes through the same states: waiting for the resources it must follow,
//! ready, running, finished. It must follow its dependencies in the graph, and, in run
//! order (the graph's order, ties broken by manifest order, Puppet's `ordering =
//! manifest`):
//! - a resource whose effects are not bounded (a *barrier*: it runs a program, manages a
//!   package, a service, a user, or is of a type that declares nothing) follows every
//!   resource before it, and every resource after it follows it;
//! - a resource whose effects are bounded by its paths (its type declares `per-path` or
//!   `any` concurrency and its plugin may launch no program: `file`, `template`,
//!   `notify`) follows each earlier one whose paths overlap its own (the same path, or
//!   one beneath the other) where either writes.
//!
//! A resource that reads or writes node attributes, or asks to be `serial`, is a barrier
//! too. So two resources overlap only when nothing either does can reach the other, and
//! the states read ahead in batches are dropped whenever a resource changes the machine
//! (`prefetch`): a no-op run keeps all its parallelism, and a run that changes the
//! machine does what one at a time would.
//!
//! Reading is not changing: a worker with nothing to start evaluates ahead the script
//! guards of a barrier soon to come (`ahead`), and the barrier takes what
//! they said when its turn comes only if nothing changed the machine since they began;
//! else it evaluates them again in its place. So 200 guarded commands that change
//! nothing still use every core.
//!
//! A worker goes on with the resource after the one it finished when that one is ready,
//! so that each worker applies a stretch of the run order and the states read in a batch
//! for it are mostly its own; otherwise it starts the first ready resource, or, while
//! another worker runs, the first from halfway through the ready ones, taking half of
//! what is left. With one worker that is always the first ready one in run order. What a
//! resource sees of the others (which failed, which notified it) comes only from those
//! it depends on, which have all finished before it starts: the report is the same as
//! with `--jobs 1`.

use crate::GuardBody;
use crate::prepared::{ENGINE, Prepared, PreparedResource};
use crate::report::Status;
use crate::run::{Inputs, Outcome, Shared, apply_one};
use crate::validate::without_trailing_slash;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Condvar, Mutex};
use wconverge_catalog::{Concurrency, EdgeKind, PathAccess, RunContext, Value};

/// How far past the first unfinished resource a worker with nothing to start looks for
/// guards to evaluate ahead.
const GUARD_AHEAD: usize = 64;

/// What a resource may touch, as far as the order of a run is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Footprint<'p> {
    /// Anything: a barrier in run order.
    Unbounded,
    /// The paths it writes and the paths it reads, and nothing else (none: `notify`).
    Paths {
        writes: Vec<&'p str>,
        reads: Vec<&'p str>,
    },
}

fn footprint<'p>(
    prepared: &'p Prepared,
    host: &dyn crate::PluginHost,
    resource: &'p PreparedResource,
) -> Footprint<'p> {
    let schema = prepared.schema(resource);
    let reads_node = resource.provider == ENGINE
        || !resource.lazy.is_empty()
        || resource
            .guards
            .iter()
            .any(|guard| matches!(guard.body, GuardBody::Block(_)))
        || schema.is_some_and(|schema| schema.context.contains(&RunContext::NodeAttributes));
    let Some(schema) = schema else {
        return Footprint::Unbounded;
    };
    if reads_node
        || schema.concurrency == Concurrency::OneAtATime
        || resource.get("serial") == Some(&Value::Boolean(true))
        || host.launches_programs(&resource.provider)
    {
        return Footprint::Unbounded;
    }
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    for (attribute, path) in resource.paths(schema) {
        let path = without_trailing_slash(path);
        match attribute.path_access {
            PathAccess::ReadWrite => writes.push(path),
            PathAccess::Read | PathAccess::ReadPrivate => reads.push(path),
            PathAccess::None => {}
        }
    }
    if schema.concurrency == Concurrency::PerPath && writes.is_empty() {
        // A type that orders its resources by path, and this one names none.
        return Footprint::Unbounded;
    }
    Footprint::Paths { writes, reads }
}

/// For each run position, the later run positions that must wait for it beyond the
/// graph's own edges: the order barriers and overlapping paths keep (see the module's
/// comment). At most two for each resource around a barrier, and one for each pair of
/// overlapping paths.
fn run_order(footprints: &[Footprint<'_>]) -> Vec<Vec<usize>> {
    let n_positions = footprints.len();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n_positions];
    let mut last_barrier: Option<usize> = None;
    let mut since_barrier: Vec<usize> = Vec::new();
    for (position, footprint) in footprints.iter().enumerate() {
        match footprint {
            Footprint::Unbounded => {
                if since_barrier.is_empty()
                    && let Some(barrier) = last_barrier
                {
                    after[barrier].push(position);
                }
                for earlier in since_barrier.drain(..) {
                    after[earlier].push(position);
                }
                last_barrier = Some(position);
            }
            Footprint::Paths { .. } => {
                if let Some(barrier) = last_barrier {
                    after[barrier].push(position);
                }
                since_barrier.push(position);
            }
        }
    }
    // Overlapping paths where one side writes: every path against the written ones, the
    // same or above it (looked up by ancestor), and beneath it (a range of the sorted
    // written paths).
    let mut written: Vec<(&str, usize)> = Vec::new();
    for (position, footprint) in footprints.iter().enumerate() {
        if let Footprint::Paths { writes, .. } = footprint {
            written.extend(writes.iter().map(|path| (*path, position)));
        }
    }
    if written.is_empty() {
        return after;
    }
    written.sort_unstable();
    let mut by_path: HashMap<&str, Vec<usize>> = HashMap::with_capacity(written.len());
    for (path, position) in &written {
        by_path.entry(path).or_default().push(*position);
    }
    let mut pair = |a: usize, b: usize| {
        if a != b {
            after[a.min(b)].push(a.max(b));
        }
    };
    for (position, footprint) in footprints.iter().enumerate() {
        let Footprint::Paths { writes, reads } = footprint else {
            continue;
        };
        for path in writes.iter().chain(reads) {
            // The same path, and each ancestor.
            let mut ancestor = *path;
            loop {
                for &other in by_path.get(ancestor).into_iter().flatten() {
                    pair(position, other);
                }
                match ancestor.rfind('/') {
                    Some(0) if ancestor != "/" => ancestor = "/",
                    Some(slash) if slash > 0 => ancestor = &ancestor[..slash],
                    _ => break,
                }
            }
            // Beneath it: the written paths that start with it and a `/` next.
            let start = written.partition_point(|(other, _)| *other <= *path);
            for &(other, other_position) in &written[start..] {
                if !other.starts_with(path) {
                    break;
                }
                if *path == "/" || other.as_bytes().get(path.len()) == Some(&b'/') {
                    pair(position, other_position);
                }
            }
        }
    }
    for successors in &mut after {
        successors.sort_unstable();
        successors.dedup();
    }
    after
}

struct State {
    /// By catalog index: how many of its dependencies have not finished.
    waiting_on: Vec<usize>,
    /// By catalog index.
    statuses: Vec<Option<Status>>,
    notified_by: Vec<Vec<usize>>,
    /// Run positions whose dependencies have all finished, not started yet.
    ready: BTreeSet<usize>,
    /// Run positions running now.
    running: BTreeSet<usize>,
    /// The first run position not finished.
    first_unfinished: usize,
    finished: Vec<bool>,
    n_finished: usize,
    outcomes: Vec<Option<Outcome>>,
    /// A worker panicked: the others stop taking resources, and the run panics with it.
    panicked: Option<Box<dyn std::any::Any + Send>>,
    /// Workers waiting for a change: a finish wakes them only if there are any (a
    /// wake-up is a system call even when no one waits).
    sleeping: usize,
    /// By run position: its guards were evaluated ahead of its turn, or are being.
    guarded_ahead: Vec<bool>,
    /// Run positions whose guards are being evaluated ahead: they start once that ends.
    guarding: BTreeSet<usize>,
}

struct Scheduler<'a, 'b> {
    shared: &'a Shared<'b>,
    /// By run position: whether it is a barrier.
    barriers: Vec<bool>,
    /// By run position: the later positions that wait for it besides its graph
    /// successors.
    after: Vec<Vec<usize>>,
    /// By run position: a barrier whose guards may be evaluated ahead of its turn.
    may_guard_ahead: Vec<bool>,
    state: Mutex<State>,
    changed: Condvar,
}

impl Scheduler<'_, '_> {
    /// Whether the ready resource at `position` may start beside those running. The
    /// order `run_order` adds already says so; this keeps a barrier alone even if it
    /// did not.
    fn may_start(&self, state: &State, position: usize) -> bool {
        if state.guarding.contains(&position) {
            return false;
        }
        if self.barriers[position] {
            return state.running.is_empty() && state.first_unfinished == position;
        }
        state.running.iter().all(|&other| !self.barriers[other])
    }

    /// Takes the next resource to run (with the lock, `state`, held), waiting until one
    /// may start; `None` when all have finished. `after` is the run position this worker
    /// finished last.
    fn next<'s>(
        &'s self,
        mut state: std::sync::MutexGuard<'s, State>,
        after: Option<usize>,
    ) -> Option<(usize, Inputs)> {
        let prepared = self.shared.prepared;
        loop {
            if state.n_finished == state.finished.len() || state.panicked.is_some() {
                return None;
            }
            let others_running = !state.running.is_empty();
            if let Some(position) = pick(&state.ready, others_running, after, |position| {
                self.may_start(&state, position)
            }) {
                state.ready.remove(&position);
                state.running.insert(position);
                let idx = prepared.graph.order()[position];
                let inputs = Inputs::of(prepared, idx, &state.statuses, &state.notified_by);
                return Some((position, inputs));
            }
            // Nothing may start: the guards of a barrier soon to come are evaluated
            // ahead of its turn (reading is not changing; `apply_one` takes what they
            // said only if nothing changed the machine since).
            if let Some(position) = (state.first_unfinished..)
                .take(GUARD_AHEAD)
                .take_while(|&position| position < state.finished.len())
                .find(|&position| {
                    self.may_guard_ahead[position]
                        && !state.guarded_ahead[position]
                        && !state.running.contains(&position)
                        && !state.finished[position]
                })
            {
                state.guarded_ahead[position] = true;
                state.guarding.insert(position);
                drop(state);
                let evaluated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    crate::ahead::evaluate(self.shared, position)
                }));
                state = self.state.lock().expect("scheduler lock");
                state.guarding.remove(&position);
                if let Err(panic) = evaluated {
                    state.panicked.get_or_insert(panic);
                }
                if state.sleeping > 0 {
                    self.changed.notify_all();
                }
                continue;
            }
            state.sleeping += 1;
            state = self.changed.wait(state).expect("scheduler lock");
            state.sleeping -= 1;
        }
    }

    /// Records what the resource at `position` did; the lock, held still, for the
    /// worker to take its next resource without taking it again.
    fn finish(&self, position: usize, outcome: Outcome) -> std::sync::MutexGuard<'_, State> {
        let graph = &self.shared.prepared.graph;
        let idx = graph.order()[position];
        let mut state = self.state.lock().expect("scheduler lock");
        state.statuses[idx] = Some(outcome.report.status);
        let notifies = outcome.notifies();
        for &(successor, kind) in graph.successors(idx) {
            if notifies && kind == EdgeKind::Notify {
                state.notified_by[successor].push(idx);
            }
            state.waiting_on[successor] -= 1;
            if state.waiting_on[successor] == 0 {
                state.ready.insert(graph.position(successor));
            }
        }
        for &later in &self.after[position] {
            let successor = graph.order()[later];
            state.waiting_on[successor] -= 1;
            if state.waiting_on[successor] == 0 {
                state.ready.insert(later);
            }
        }
        state.running.remove(&position);
        state.finished[position] = true;
        state.n_finished += 1;
        while state.first_unfinished < state.finished.len()
            && state.finished[state.first_unfinished]
        {
            state.first_unfinished += 1;
        }
        state.outcomes[position] = Some(outcome);
        if state.sleeping > 0 {
            self.changed.notify_all();
        }
        state
    }

    fn work(&self) {
        let mut taken = self.next(self.state.lock().expect("scheduler lock"), None);
        while let Some((position, inputs)) = taken {
            let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                apply_one(self.shared, position, inputs)
            }));
            match applied {
                Ok(outcome) => taken = self.next(self.finish(position, outcome), Some(position)),
                Err(panic) => {
                    let mut state = self.state.lock().expect("scheduler lock");
                    state.panicked.get_or_insert(panic);
                    self.changed.notify_all();
                    return;
                }
            }
        }
    }
}

/// The ready resource to start next, if one `may` start: the one after `after` (what
/// this worker finished last); else, while others run, the first from halfway through
/// the ready ones (the other half is left to the worker there); else the first.
fn pick(
    ready: &BTreeSet<usize>,
    others_running: bool,
    after: Option<usize>,
    may: impl Fn(usize) -> bool,
) -> Option<usize> {
    if let Some(next) = after.map(|position| position + 1)
        && ready.contains(&next)
        && may(next)
    {
        return Some(next);
    }
    if others_running
        && let (Some(&first), Some(&last)) = (ready.first(), ready.last())
        && let Some(position) = ready
            .range(first + (last - first).div_ceil(2)..)
            .copied()
            .find(|&position| may(position))
    {
        return Some(position);
    }
    ready.iter().copied().find(|&position| may(position))
}

/// Runs every resource with up to `jobs` at once (`--jobs 1` is the same scheduler on
/// the calling thread); the outcomes in graph order.
pub(crate) fn concurrently(shared: &Shared<'_>, jobs: usize) -> Vec<Outcome> {
    let prepared = shared.prepared;
    let graph = &prepared.graph;
    let n_resources = prepared.resources.len();
    let footprints: Vec<Footprint<'_>> = graph
        .order()
        .iter()
        .map(|&idx| footprint(prepared, shared.host, &prepared.resources[idx]))
        .collect();
    let after = run_order(&footprints);
    let mut waiting_on: Vec<usize> = (0..n_resources)
        .map(|idx| graph.predecessors(idx).len())
        .collect();
    for later in after.iter().flatten() {
        waiting_on[graph.order()[*later]] += 1;
    }
    let ready = (0..n_resources)
        .filter(|&idx| waiting_on[idx] == 0)
        .map(|idx| graph.position(idx))
        .collect();
    let scheduler = Scheduler {
        shared,
        may_guard_ahead: graph
            .order()
            .iter()
            .zip(&footprints)
            .map(|(&idx, footprint)| {
                *footprint == Footprint::Unbounded
                    && shared.is_selected(idx)
                    && crate::ahead::may_guard_ahead(&prepared.resources[idx])
            })
            .collect(),
        barriers: footprints
            .iter()
            .map(|footprint| *footprint == Footprint::Unbounded)
            .collect(),
        after,
        state: Mutex::new(State {
            waiting_on,
            statuses: vec![None; n_resources],
            notified_by: vec![Vec::new(); n_resources],
            ready,
            running: BTreeSet::new(),
            first_unfinished: 0,
            finished: vec![false; n_resources],
            n_finished: 0,
            outcomes: (0..n_resources).map(|_| None).collect(),
            panicked: None,
            sleeping: 0,
            guarded_ahead: vec![false; n_resources],
            guarding: BTreeSet::new(),
        }),
        changed: Condvar::new(),
    };
    if jobs <= 1 {
        // One at a time, on this thread: the first ready resource is always the next
        // in graph order.
        scheduler.work();
    } else {
        std::thread::scope(|scope| {
            let scheduler = &scheduler;
            let workers: Vec<_> = (0..jobs.min(n_resources.max(1)))
                .filter_map(|_| {
                    // Each worker on a stack deep enough for the lazy values it may
                    // evaluate.
                    shared
                        .prepared
                        .code
                        .spawn_on_big_stack(scope, "wconverge-apply", Box::new(|| scheduler.work()))
                        .ok()
                })
                .collect();
            if workers.is_empty() {
                // No thread could be started: the run is one at a time, here.
                scheduler.work();
            }
            for worker in workers {
                if let Err(panic) = worker.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
    }
    let state = scheduler.state.into_inner().expect("scheduler lock");
    if let Some(panic) = state.panicked {
        std::panic::resume_unwind(panic);
    }
    state
        .outcomes
        .into_iter()
        .map(|outcome| outcome.expect("every resource finished"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Footprint, pick, run_order, without_trailing_slash};
    use std::collections::BTreeSet;

    #[test]
    fn a_worker_goes_on_with_the_next_resource_or_takes_half_of_what_is_ready() {
        let ready: BTreeSet<usize> = (1..=10).collect();
        let any = |_| true;
        // Alone: the first ready, whatever it finished last.
        assert_eq!(pick(&ready, false, None, any), Some(1));
        assert_eq!(pick(&ready, false, Some(0), any), Some(1));
        // Beside another worker: the next after its own, else halfway through.
        assert_eq!(pick(&ready, true, Some(4), any), Some(5));
        assert_eq!(pick(&ready, true, None, any), Some(6));
        assert_eq!(pick(&ready, true, Some(20), any), Some(6));
        // Only what may start: the next that may not is passed over, then the second
        // half, then the first.
        assert_eq!(pick(&ready, true, Some(4), |p| p != 5), Some(6));
        assert_eq!(pick(&ready, true, Some(4), |p| p < 6 && p != 5), Some(1));
        assert_eq!(pick(&ready, true, None, |_| false), None);
        assert_eq!(pick(&BTreeSet::new(), true, Some(1), any), None);
    }

    #[test]
    fn a_barrier_follows_everything_before_it_and_precedes_everything_after_it() {
        let file = |path| Footprint::Paths {
            writes: vec![path],
            reads: vec![],
        };
        let order = run_order(&[
            file("/a"),
            file("/b"),
            Footprint::Unbounded,
            Footprint::Unbounded,
            file("/c"),
            file("/d"),
            Footprint::Unbounded,
        ]);
        assert_eq!(
            order,
            vec![
                vec![2],
                vec![2],
                vec![3],
                vec![4, 5],
                vec![6],
                vec![6],
                vec![],
            ]
        );
    }

    #[test]
    fn overlapping_paths_keep_their_order_where_one_side_writes() {
        let paths = |writes: Vec<&'static str>, reads: Vec<&'static str>| Footprint::Paths {
            writes,
            reads,
        };
        let order = run_order(&[
            // 0 writes /srv/app, 1 a file beneath it, 2 a sibling whose name starts alike.
            paths(vec!["/srv/app"], vec![]),
            paths(vec!["/srv/app/conf"], vec![]),
            paths(vec!["/srv/apple"], vec![]),
            // 3 reads what 1 writes; 4 reads the directory 0 writes, 5 reads what 3 reads.
            paths(vec!["/etc/x"], vec!["/srv/app/conf"]),
            paths(vec!["/etc/y"], vec!["/srv"]),
            paths(vec!["/etc/z"], vec!["/srv/app/conf"]),
            // 6 writes the root: beneath it is everything written.
            paths(vec!["/"], vec![]),
            // 7 touches nothing.
            paths(vec![], vec![]),
        ]);
        assert_eq!(
            order,
            vec![
                vec![1, 3, 4, 5, 6],
                vec![3, 4, 5, 6],
                vec![4, 6],
                vec![6],
                vec![6],
                vec![6],
                vec![],
                vec![],
            ]
        );
        assert_eq!(without_trailing_slash("/srv/app/"), "/srv/app");
        assert_eq!(without_trailing_slash("///"), "/");
    }
}
