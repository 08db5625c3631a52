//! The engine: validates a catalog against type schemas, orders it into a graph, and
//! runs it resource by resource through the [`PluginHost`] trait, producing a
//! [`report::Report`].
//!
//! The engine never touches the machine: everything it learns or changes goes through
//! [`PluginHost`], which the runtime implements with sandboxed plugins (and tests with
//! an in-memory host).
#![warn(clippy::disallowed_methods)]

mod ahead;
mod facter;
mod failure;
mod graph;
mod guard;
mod prefetch;
mod prepared;
mod provider_checks;
mod redact;
pub mod report;
pub use facter::{FACTER_NAMES, facts_value};
pub use failure::{FactsError, Failure};
mod run;
mod schedule;
mod schemas;
mod scope;
mod validate;

pub use graph::Graph;
pub use guard::{Guard, GuardBody};
pub use prepared::{ENGINE, Prepared, PreparedResource};
pub use redact::Secrets;
pub use run::Mode;
pub use schemas::Schemas;
pub use scope::{Scope, run, run_scoped, run_with_jobs};
pub use validate::{node_block_schema, prepare, prepare_taking_values};

use std::fmt;
use std::time::Duration;
use wconverge_catalog::{TypeSchema, Value};

/// How the engine reaches providers. The runtime implements it with wasm components;
/// each call gets only the capabilities the resource needs, as the policy allows.
pub trait PluginHost {
    /// The provider of a resource of `type_name`: the plugin `requested` names (the
    /// resource's `provider` metaparameter), or else the first of the type's providers
    /// that is suitable on this machine; `None` when no plugin provides the type. An
    /// error of kind [`PluginErrorKind::Unsuitable`] says why no provider fits. May load
    /// plugins and gather facts.
    fn provider(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<ProviderChoice>, PluginError>;

    /// Provider checks that their schemas cannot express, of many resources of one
    /// provider (of any of its types): one list of problems per resource, in order. No
    /// file system, no processes.
    fn validate(&self, resources: &[&PreparedResource]) -> Call<Vec<Vec<String>>>;

    /// Reads the resource's current state (unless `current` is the state a batch read
    /// for it) and plans the changes, with read-only access: the state it planned from
    /// and the changes.
    fn plan(&self, resource: &PreparedResource, current: Option<State>) -> Call<Checked>;

    /// Reads the current states of many resources of one type and provider at once, for
    /// a type whose schema sets `batch_state` (Puppet's prefetch), and plans each: one
    /// result per resource, in order. An error of the whole call makes each resource
    /// read its own.
    fn check(&self, resources: &[&PreparedResource]) -> Call<Vec<Result<Checked, Failure>>> {
        let _ = resources;
        Call::new(
            Err(PluginError::new(
                "",
                PluginErrorKind::Load,
                "this host reads states one at a time",
            )),
            Vec::new(),
        )
    }

    /// The run will call plugin `plugin` (a resource of it reads its own state, or a
    /// guard runs in it): what it needs for a call may be made ready now, in the
    /// background. Nothing else about it changes.
    fn expect_calls(&self, plugin: &str) {
        let _ = plugin;
    }

    /// Makes the planned changes, with the access the resource needs.
    fn apply(&self, resource: &PreparedResource, changes: &[Change]) -> Call<()>;

    /// Refreshes a resource that was notified.
    fn refresh(&self, resource: &PreparedResource) -> Call<()>;

    /// What the interpreter plugin that implements script type `type_name` declares, or
    /// `None` when no interpreter implements it.
    /// `requested` names the plugin (the resource's own provider, when a script
    /// resource's guards run with its own type); otherwise the type's first suitable
    /// provider.
    fn interpreter(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<InterpreterInfo>, PluginError>;

    /// The script type that evaluates guards whose interpreter is `default` on this
    /// machine (`sh` on Unix), or `None` when no installed interpreter claims it.
    fn default_interpreter(&self) -> Result<Option<InterpreterInfo>, PluginError>;

    /// Runs a guard's script through its interpreter plugin. An error means it did not
    /// run (the interpreter could not be launched or was refused).
    fn run_guard(&self, script: &GuardScript) -> Call<ScriptOutput>;

    /// This machine's facts, for `requires` (gathered once per run by the host's fact
    /// plugins). An error says why they could not be gathered.
    fn facts(&self) -> Result<wconverge_requires::Facts, FactsError>;

    /// The home directory of `user` (a name or a numeric id) on this machine, for the
    /// attributes whose default lies below it; `None` when the user has none.
    fn home_of(&self, user: &str) -> Option<String> {
        let _ = user;
        None
    }

    /// Whether a resource of plugin `plugin` can change the machine when it is applied or
    /// refreshed: when it cannot (its policy grants it no directory to write and no
    /// program to launch, as for `notify`), the states other resources read in batches
    /// are still good after it. Unknown plugins can.
    fn changes_machine(&self, plugin: &str) -> bool {
        let _ = plugin;
        true
    }

    /// Whether plugin `plugin` may launch programs (its policy grants it some): what a
    /// program does is not bounded by the paths its resource names, so each of its
    /// resources keeps its place in the run's order (`apply --jobs`). Unknown plugins
    /// may.
    fn launches_programs(&self, plugin: &str) -> bool {
        let _ = plugin;
        true
    }

    /// Why the run must stop now (the operator interrupted it), if it must: the
    /// resources not yet applied fail with this reason.
    fn interrupted(&self) -> Option<String> {
        None
    }

    /// Where the file at `path` really is, once the links above it are followed as the
    /// run's grants follow them; `None` when that cannot be told before the run (its
    /// directory does not exist yet). Two resources whose paths resolve alike manage one
    /// file.
    fn resolve_path(&self, path: &str) -> Option<String> {
        let _ = path;
        None
    }
}

/// The plugin that implements a resource, and its schema of the resource's type (two
/// providers of one type may accept different attributes).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderChoice {
    /// The plugin's name in the policy.
    pub plugin: String,
    pub schema: TypeSchema,
}

/// What an interpreter plugin declares.
#[derive(Debug, Clone, PartialEq)]
pub struct InterpreterInfo {
    /// The script type that runs guards.
    pub script_type: String,
    /// The plugin that implements it, by its name in the policy.
    pub plugin: String,
    /// The attributes a guard inherits from its resource when it does not set them.
    pub inherits: Vec<String>,
}

/// A guard's script and the context it runs in, with inherited values filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardScript {
    /// The script type that runs it (`sh`, `bash`, `powershell_script`).
    pub interpreter: String,
    /// The plugin that runs it, chosen before the run.
    pub plugin: String,
    /// The resource it guards (`Exec[restart]`), for the audit trail.
    pub subject: String,
    /// The sensitive strings of that resource, never written to the audit trail.
    pub secrets: Secrets,
    pub code: String,
    /// The guard is sensitive: its code reaches the interpreter on standard input, and
    /// its output is not kept in the report.
    pub sensitive: bool,
    pub cwd: Option<String>,
    pub environment: Vec<(String, String)>,
    pub user: Option<String>,
    pub group: Option<String>,
    pub umask: Option<u32>,
    pub path: Vec<String>,
    pub architecture: Option<String>,
    pub timeout: Duration,
    /// Inherited attributes of the interpreter's own script type beyond the context
    /// above (`interpreter` for `script`).
    pub options: Vec<(String, Value)>,
}

/// How a script ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptStatus {
    Exited(i32),
    Signaled(i32),
    TimedOut,
}

/// What a script did.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptOutput {
    pub status: ScriptStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The timeout that applied: the script's, or the host's limit if smaller.
    pub timeout: Duration,
}

/// The outcome of one plugin call and what the plugin logged during it.
#[derive(Debug)]
pub struct Call<T> {
    pub outcome: Result<T, PluginError>,
    pub logs: Vec<LogRecord>,
}

impl<T> Call<T> {
    pub fn new(outcome: Result<T, PluginError>, logs: Vec<LogRecord>) -> Self {
        Call { outcome, logs }
    }
}

/// A resource's state as its provider observed it: attribute values.
pub type State = Vec<(String, Value)>;

/// A resource as a batch read found it: its state, and the changes its provider planned
/// for that state (none when it is in sync).
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub state: State,
    pub changes: Vec<Change>,
}

/// One change a provider planned.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub attribute: String,
    pub current: Option<Value>,
    pub desired: Option<Value>,
    pub message: String,
    /// The difference itself, as the provider gave it.
    pub diff: Option<Diff>,
}

/// How a change differs, beyond its message (WIT `diff`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diff {
    /// A unified diff of a text.
    Unified(String),
    /// A value before and after, as text.
    BeforeAfter { before: String, after: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Notice => "notice",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// A message a plugin (or the host, about a plugin) logged during a call.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub level: Level,
    pub message: String,
}

/// What went wrong in a plugin call.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginError {
    pub plugin: String,
    pub kind: PluginErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginErrorKind {
    /// The provider returned an error: the resource could not be converged.
    Provider,
    /// The host refused a capability the resource needs (a path the policy does not
    /// grant, say); nothing was attempted.
    Denied,
    /// The plugin trapped or exceeded a limit (memory, CPU, output); its instance is
    /// gone and the run goes on.
    Fault,
    /// The plugin could not be loaded or instantiated.
    Load,
    /// No provider of the type is suitable on this machine, or the one the resource
    /// names is not.
    Unsuitable,
}

impl PluginError {
    pub fn new(plugin: &str, kind: PluginErrorKind, message: impl Into<String>) -> Self {
        PluginError {
            plugin: plugin.to_owned(),
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PluginErrorKind::Provider | PluginErrorKind::Unsuitable => f.write_str(&self.message),
            PluginErrorKind::Denied => write!(f, "denied: {}", self.message),
            PluginErrorKind::Fault => {
                write!(f, "plugin `{}` faulted: {}", self.plugin, self.message)
            }
            PluginErrorKind::Load => {
                write!(
                    f,
                    "plugin `{}` could not be loaded: {}",
                    self.plugin, self.message
                )
            }
        }
    }
}

impl std::error::Error for PluginError {}

#[cfg(test)]
mod tests;
