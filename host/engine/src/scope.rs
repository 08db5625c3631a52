//! The entry points of a run: the whole catalog ([`run`], [`run_with_jobs`]), or the
//! resources a [`Scope`] selects ([`run_scoped`]), into a report.

use crate::PluginHost;
use crate::prepared::Prepared;
use crate::report::{Report, ResourceReport, Status, Summary};
use crate::run::{Mode, Shared};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Instant;
use wconverge_catalog::NodeAttributes;

/// Runs a prepared catalog, one resource at a time in graph order. Failures of single
/// resources are outcomes in the report; this function itself does not fail.
pub fn run(prepared: &Prepared, host: &(dyn PluginHost + Sync), mode: Mode) -> Report {
    run_with_jobs(prepared, host, mode, 1)
}

/// Runs a prepared catalog, applying up to `jobs` resources at once without changing
/// what it means (see `schedule`): a resource starts once every resource it depends on
/// has finished and every earlier one it could reach or be reached by; each resource
/// sees what it would see with `jobs` at 1, and the report lists resources in graph
/// order whatever finished first.
pub fn run_with_jobs(
    prepared: &Prepared,
    host: &(dyn PluginHost + Sync),
    mode: Mode,
    jobs: usize,
) -> Report {
    run_scoped(prepared, host, mode, jobs, Scope::default()).0
}

/// Which resources a run applies, and the node attributes it starts from: a whole run
/// by default.
#[derive(Default)]
pub struct Scope<'a> {
    /// By catalog index: the resources to apply. Another resource runs only when one
    /// that ran notifies it (and is then applied and refreshed, as in a whole run);
    /// else it is taken as the whole run before left it (in sync: what depends on it
    /// goes on) and is not in the report. `None`: every resource.
    pub selected: Option<&'a [bool]>,
    /// By catalog index: how the runs before left each resource the run does not apply
    /// (`Failed`, `SkippedFailedDependency`...), so that what depends on it is held back
    /// as it was; `None`: in sync.
    pub left: Option<&'a [Status]>,
    /// The node attributes the run starts from (as a whole run's `node_block`s left
    /// them, for a run of some resources after it); `None`: as compiled.
    pub node: Option<NodeAttributes>,
}

/// [`run_with_jobs`] for the resources `scope` selects (what changed since a whole
/// run: the drift `wconverge agent --watch` corrects), with the same meaning: the same
/// order, dependencies and notifications. Also returns the node attributes as the run
/// left them.
pub fn run_scoped(
    prepared: &Prepared,
    host: &(dyn PluginHost + Sync),
    mode: Mode,
    jobs: usize,
    scope: Scope<'_>,
) -> (Report, NodeAttributes) {
    let started = Instant::now();
    let shared = Shared {
        prepared,
        host,
        mode,
        node: RwLock::new(
            scope
                .node
                .unwrap_or_else(|| prepared.node_attributes.clone()),
        ),
        facts: OnceLock::new(),
        prefetched: crate::prefetch::Prefetched::for_selection(scope.selected),
        ahead: Mutex::new(HashMap::new()),
        selected: scope.selected,
        left: scope.left,
    };
    let mut finished = crate::schedule::concurrently(&shared, jobs);
    if scope.selected.is_some() {
        finished.retain(|outcome| outcome.ran);
    }
    let Shared { node, .. } = shared;
    let node = node
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut summary = Summary {
        resources: finished.len(),
        ..Summary::default()
    };
    for outcome in &finished {
        match outcome.report.status {
            Status::Changed => summary.changed += 1,
            Status::Unchanged => summary.unchanged += 1,
            Status::WouldChange => summary.would_change += 1,
            Status::Failed => summary.failed += 1,
            Status::SkippedFailedDependency => summary.skipped += 1,
            Status::SkippedByGuard => summary.skipped_by_guard += 1,
            Status::SkippedByRequirement => summary.skipped_by_requirement += 1,
        }
        if outcome.refreshed {
            summary.refreshed += 1;
        }
    }
    // Into the outcomes' own memory (a report is most of an outcome): a copy of every
    // report into fresh memory would be a catalog's worth of pages to zero.
    let reports: Vec<ResourceReport> = finished.into_iter().map(|outcome| outcome.report).collect();
    let exit_code = Report::detailed_exit_code(&summary);
    let report = Report {
        format_version: crate::report::FORMAT_VERSION,
        node: prepared.node.clone(),
        mode: match mode {
            Mode::Apply => "apply",
            Mode::Noop => "noop",
        },
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        phases: None,
        summary,
        resources: reports,
        exit_code,
        corrective_change: false,
        drift: Vec::new(),
        cached_catalog_status: None,
    };
    (report, node)
}
