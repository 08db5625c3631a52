//! `apply --jobs N`: up to N resources applied at once, each started as soon as the
//! resources it depends on have finished and its type's concurrency allows.
//!
//! Each resource goes through the same states: waiting for its dependencies, ready,
//! running, finished. A worker goes on with the resource after the one it finished
//! when that one is ready and may start, so that each worker applies a stretch of the
//! graph order and the states read in a batch for it are mostly its own; otherwise it
//! starts the first ready resource that may start, or, while another worker runs, the
//! first from halfway through the ready ones, taking half of what is left. With one
//! worker that is always the first ready one in graph order.
//!
//! Whether a resource may start: a resource of a `one-at-a-time` type waits while
//! another of its type and provider runs; one of a `per-path` type while another whose
//! path is the same as its own, or above or beneath it, runs; and a resource that reads
//! or writes node attributes waits until everything before it in graph order has
//! finished and runs alone, so it sees what it would see one resource at a time. What a
//! resource sees of the others (which failed, which notified it) comes only from those
//! it depends on, which have all finished before it starts: the report is the same as
//! with `--jobs 1`.

use crate::GuardBody;
use crate::report::Status;
use crate::run::{Inputs, Outcome, Shared, apply_one};
use crate::validate::{ENGINE, Prepared, PreparedResource};
use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex};
use wconverge_catalog::{Concurrency, EdgeKind, RunContext, Value};

/// What may run beside a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Exclusion<'p> {
    /// Nothing: it runs alone, after everything before it.
    Alone,
    /// No other resource of its type and provider.
    Type(&'p str, &'p str),
    /// No resource whose path is this one, above it or beneath it.
    Path(&'p str),
    /// Anything.
    Nothing,
}

fn exclusion<'p>(prepared: &'p Prepared, resource: &'p PreparedResource) -> Exclusion<'p> {
    let schema = prepared.schema(resource);
    let reads_node = resource.provider == ENGINE
        || !resource.lazy.is_empty()
        || resource
            .guards
            .iter()
            .any(|guard| matches!(guard.body, GuardBody::Block(_)))
        || schema.is_some_and(|schema| schema.context.contains(&RunContext::NodeAttributes));
    if reads_node {
        return Exclusion::Alone;
    }
    let Some(schema) = schema else {
        return Exclusion::Alone;
    };
    match schema.concurrency {
        Concurrency::Any if resource.get("serial") == Some(&Value::Boolean(true)) => {
            Exclusion::Alone
        }
        Concurrency::Any => Exclusion::Nothing,
        Concurrency::PerPath => match schema
            .namevar()
            .and_then(|namevar| resource.get(&namevar.name))
            .and_then(Value::as_str)
        {
            Some(path) => Exclusion::Path(path),
            None => Exclusion::Type(&resource.type_name, &resource.provider),
        },
        Concurrency::OneAtATime => Exclusion::Type(&resource.type_name, &resource.provider),
    }
}

/// Whether two paths are one, or one lies beneath the other.
fn overlap(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_end_matches('/'), b.trim_end_matches('/'));
    let beneath = |inner: &str, outer: &str| {
        inner == outer
            || outer.is_empty()
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    beneath(a, b) || beneath(b, a)
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
}

struct Scheduler<'a, 'b> {
    shared: &'a Shared<'b>,
    /// By run position.
    exclusions: Vec<Exclusion<'b>>,
    state: Mutex<State>,
    changed: Condvar,
}

impl Scheduler<'_, '_> {
    /// Whether the ready resource at `position` may start beside those running.
    fn may_start(&self, state: &State, position: usize) -> bool {
        let mine = &self.exclusions[position];
        if *mine == Exclusion::Alone {
            return state.running.is_empty() && state.first_unfinished == position;
        }
        state
            .running
            .iter()
            .all(|&other| match (mine, &self.exclusions[other]) {
                (_, Exclusion::Alone) => false,
                (Exclusion::Type(a, b), Exclusion::Type(c, d)) => !(a == c && b == d),
                (Exclusion::Path(a), Exclusion::Path(b)) => !overlap(a, b),
                _ => true,
            })
    }

    /// Takes the next resource to run (with the lock, `state`, held), waiting until one
    /// may start; `None` when all have finished. `after` is the run position this worker
    /// finished last.
    fn next(
        &self,
        mut state: std::sync::MutexGuard<'_, State>,
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
    let waiting_on: Vec<usize> = (0..n_resources)
        .map(|idx| graph.predecessors(idx).len())
        .collect();
    let ready = (0..n_resources)
        .filter(|&idx| waiting_on[idx] == 0)
        .map(|idx| graph.position(idx))
        .collect();
    let scheduler = Scheduler {
        shared,
        exclusions: graph
            .order()
            .iter()
            .map(|&idx| exclusion(prepared, &prepared.resources[idx]))
            .collect(),
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
    use super::{overlap, pick};
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
    fn paths_overlap_when_one_is_the_other_or_beneath_it() {
        assert!(overlap("/etc/app", "/etc/app"));
        assert!(overlap("/etc/app", "/etc/app/conf.d/a"));
        assert!(overlap("/etc/app/conf.d/a", "/etc/app"));
        assert!(overlap("/", "/etc"));
        assert!(!overlap("/etc/app", "/etc/apple"));
        assert!(!overlap("/etc/a", "/etc/b"));
    }
}
