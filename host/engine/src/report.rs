//! The report of a run (**API boundary**: `wconverge apply --format json` prints it;
//! the format is versioned by `format_version`). Sensitive values never appear in it:
//! the engine redacts before it fills these types.

use serde::Serialize;
use wconverge_catalog::SourceLocation;

/// The report format this engine writes.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub format_version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `apply` or `noop`.
    pub mode: &'static str,
    pub duration_ms: f64,
    /// Where the time of the whole command went, when the command says (`apply`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    pub summary: Summary,
    /// In application order.
    pub resources: Vec<ResourceReport>,
    /// Puppet's `--detailed-exitcodes`: 0 no change, 2 changes, 4 failures, 6 both.
    pub exit_code: i32,
    /// Puppet's `corrective_change`: some change of this run put back what a run before
    /// had made so and the machine had since drifted from, rather than what a new
    /// catalog asked for.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub corrective_change: bool,
    /// For a run that corrects drift it watched for: what it saw change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<Drift>,
    /// Puppet's `cached_catalog_status`: `on_failure` when the manifests did not compile
    /// and the run applied the catalog of the last run whose manifests did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_catalog_status: Option<&'static str>,
}

/// A change on the machine that a watching agent saw, which led to a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Drift {
    pub path: String,
    /// `written`, `attributes` (mode, owner, times), `removed`, `created` or `moved`.
    pub event: String,
}

/// The phases of a command that applies, in milliseconds: gathering facts, compiling
/// the manifests, preparing the run (plugins compiled and loaded, the graph), and the
/// run itself.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct Phases {
    pub facts_ms: f64,
    pub compile_ms: f64,
    pub prepare_ms: f64,
    pub run_ms: f64,
}

/// Where a resource's time went, in milliseconds: its guards, the check (its state read
/// and its changes planned), the change, and its refresh.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct Timings {
    pub guards_ms: f64,
    pub check_ms: f64,
    pub change_ms: f64,
    pub refresh_ms: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub resources: usize,
    pub changed: usize,
    pub unchanged: usize,
    pub would_change: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Skipped because a guard said so: not a failure.
    pub skipped_by_guard: usize,
    /// Skipped because its requirement (or a dependency's) does not hold on this
    /// machine: not a failure.
    pub skipped_by_requirement: usize,
    pub refreshed: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Changed,
    Unchanged,
    /// Noop: the plan has changes that were not made.
    WouldChange,
    Failed,
    /// A resource it depends on failed (or was skipped for that reason).
    SkippedFailedDependency,
    /// A guard (`only_if`, `not_if`) said not to apply it.
    SkippedByGuard,
    /// Its `requires` program, or that of a resource it depends on, does not hold here.
    SkippedByRequirement,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Changed => "changed",
            Status::Unchanged => "unchanged",
            Status::WouldChange => "would change",
            Status::Failed => "failed",
            Status::SkippedFailedDependency => "skipped",
            Status::SkippedByGuard => "skipped by guard",
            Status::SkippedByRequirement => "requirement not met",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ResourceReport {
    /// `File[/etc/motd]`.
    pub resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceLocation>,
    /// For a resource collected from another node's exports: that node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exported_by: Option<String>,
    /// The plugin that implemented it, by its name in the policy.
    pub provider: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ChangeReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh: Option<RefreshReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For a skipped resource: the failed resources it depends on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_dependencies: Vec<String>,
    /// For a resource skipped by its requirement: the line that does not hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requirement: Option<String>,
    /// For a resource skipped because of a dependency's requirement: those resources.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmet_dependencies: Vec<String>,
    /// The guards evaluated, in order; the last one decided when the resource was
    /// skipped by a guard.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<GuardReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<LogReport>,
    pub duration_ms: f64,
    pub timings: Timings,
    /// Its change corrected drift: the run before had left it in sync with the same
    /// catalog (Puppet's `corrective_change`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub corrective_change: bool,
}

/// One guard as it was evaluated.
#[derive(Debug, Clone, Serialize)]
pub struct GuardReport {
    /// `only_if`, `not_if`, `onlyif` or `unless`.
    pub metaparameter: &'static str,
    /// The script (`[sensitive]` for a sensitive one).
    pub command: String,
    /// The script type that ran it.
    pub interpreter: String,
    /// What it inherited from the resource.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inherited: Vec<String>,
    /// Its exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether the script succeeded (its exit code is in `returns`).
    pub succeeded: bool,
    /// Whether the resource may be applied as far as this guard goes.
    pub passed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChangeReport {
    pub attribute: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    pub message: String,
    /// The provider's diff, secrets scrubbed; never for a sensitive attribute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffReport>,
}

/// A change's diff in the report: `{"unified": "..."}` or
/// `{"before_after": {"before": "...", "after": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffReport {
    Unified(String),
    BeforeAfter { before: String, after: String },
}

#[derive(Debug, Clone, Serialize)]
pub struct RefreshReport {
    /// The resources whose changes notified this one.
    pub triggered_by: Vec<String>,
    /// `refreshed`, `would_refresh` (noop), `unscheduled` (its own `ensure` changed in
    /// this run, as a service just started: Puppet's rule) or `failed`.
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct LogReport {
    pub level: &'static str,
    pub message: String,
}

impl Report {
    /// The exit code for the summary, in Puppet's `--detailed-exitcodes` convention. A
    /// noop run with pending changes counts as changes, so drift can be detected.
    pub fn detailed_exit_code(summary: &Summary) -> i32 {
        let changes = summary.changed + summary.would_change > 0;
        let failures = summary.failed + summary.skipped > 0;
        match (changes, failures) {
            (false, false) => 0,
            (true, false) => 2,
            (false, true) => 4,
            (true, true) => 6,
        }
    }
}
