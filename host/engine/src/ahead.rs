//! Guards evaluated ahead of their resource's turn under `apply --jobs`: reading is not
//! changing, so a worker with nothing to start runs the script guards of a barrier soon
//! to come, and the barrier takes what they said only if nothing changed the machine
//! since they began (the count of changes `prefetch` keeps, bumped before and after
//! every change).

use crate::prepared::{ENGINE, PreparedResource};
use crate::report::GuardReport;
use crate::run::{Guarded, Shared, guards};
use crate::{GuardBody, LogRecord};
use wconverge_catalog::Value;

/// What a resource's guards said when evaluated ahead of its turn, and the count of the
/// machine's changes when they began.
pub(crate) struct Ahead {
    generation: u64,
    guarded: Guarded,
    reports: Vec<GuardReport>,
    logs: Vec<LogRecord>,
}

/// Whether the guards of `resource` may be evaluated ahead of its turn: they are all
/// scripts (a block guard reads node attributes), and the resource has no lazy value
/// and reads no facts. A script guard changes nothing (Chef's rule for guards), so what
/// it says stands until something changes the machine.
pub(crate) fn may_guard_ahead(resource: &PreparedResource) -> bool {
    !resource.guards.is_empty()
        && resource.lazy.is_empty()
        && !resource.reads_facts
        && resource.provider != ENGINE
        && resource
            .guards
            .iter()
            .all(|guard| matches!(guard.body, GuardBody::Script(_)))
}

/// Evaluates the guards of the resource at run `position` ahead of its turn (while a
/// worker has nothing else to start), for `run::apply_one` to take if nothing changed the
/// machine since they began.
pub(crate) fn evaluate(shared: &Shared<'_>, position: usize) {
    let prepared = shared.prepared;
    let resource = &prepared.resources[prepared.graph.order()[position]];
    let generation = shared.prefetched.generation();
    let mut reports = Vec::new();
    let mut logs = Vec::new();
    let guarded = guards(
        shared.host,
        prepared.code,
        resource,
        // Script guards read neither node attributes nor facts.
        &shared.node.read().expect("node attributes lock"),
        &Value::Hash(Vec::new()),
        &mut reports,
        &mut |call_logs| logs.extend(call_logs),
    );
    shared.ahead.lock().expect("guards ahead lock").insert(
        position,
        Ahead {
            generation,
            guarded,
            reports,
            logs,
        },
    );
}

impl Ahead {
    /// Whether nothing changed the machine since the guards began.
    pub(crate) fn still_holds(&self, shared: &Shared<'_>) -> bool {
        self.generation == shared.prefetched.generation()
    }

    /// What the guards decided, their reports and their logs.
    pub(crate) fn taken(self) -> (Guarded, Vec<GuardReport>, Vec<LogRecord>) {
        (self.guarded, self.reports, self.logs)
    }
}
