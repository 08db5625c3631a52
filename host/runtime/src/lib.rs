//! The plugin runtime: runs providers as WebAssembly components under wasmtime, each
//! call with only the capabilities its policy grants, narrowed to the resource at hand.
//! It implements the engine's [`PluginHost`]; it is the only crate that knows wasmtime.
//!
//! Per call: the directories the resource's path attributes need (read-only unless the
//! call applies changes), no inherited environment, no network (imports are checked
//! before instantiation), programs only through the host's `process` import and only
//! those the policy allows, and caps on memory, CPU time and output.

mod bindings;
mod cache;
mod clock;
mod code;
mod convert;
mod digest;
mod facts;
mod files;
mod grants;
mod host;
mod imports;
mod input;
mod interruption;
mod plugin;
mod previous;
mod process;
mod replay;
mod schema;
mod state;
mod summaries;
mod ticker;
pub mod trail;

/// The descriptor walk lives with the launcher, which pins programs by it; the runtime
/// resolves its grants and files by it too.
use wconverge_launch::walk;
/// The policy, its argument patterns and its audit flags live in `wconverge-policy`,
/// which needs no wasmtime; they keep their paths here.
pub use wconverge_policy::{arguments, audit, policy};

use crate::grants::{Grant, GrantCache, GrantError, Granted};
use crate::plugin::{Instance, Loader, Plugin};
use crate::policy::{Access, Policy};
use crate::process::{Launcher, LauncherSlot, Route};
use crate::state::{Phase, PluginState, Shared};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Once, Weak};
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine};
use wconverge_catalog::TypeSchema;
use wconverge_engine::{
    Call, Change, Checked, GuardScript, InterpreterInfo, LogRecord, PluginError, PluginErrorKind,
    PluginHost, PreparedResource, ProviderChoice, ScriptOutput, State,
};

pub use bindings::{PREVIOUS_WIT_VERSION, WIT_VERSION};
pub use cache::{Compiled, PrivateDirError, open_private_dir};
pub use digest::sha256_hex;
pub use input::{ReadError, read_regular};
pub use interruption::{interrupt, interrupted, stop_after_current, stopping};
pub use plugin::read_component;
pub use wconverge_launch::walk::WalkError;
pub use wconverge_launch::watchdog;

/// A plugin's granted directories as they really are, with their access.
type PolicyRoots = Vec<(PathBuf, Access)>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    #[error("cannot set up wasmtime: {0}")]
    Wasmtime(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the runtime needs from its caller.
pub struct RuntimeOptions {
    pub policy: Policy,
    /// Where compiled components are kept; `None` compiles on every run.
    pub cache_dir: Option<PathBuf>,
    /// The components embedded in the binary, by plugin name.
    pub builtins: &'static [(&'static str, &'static [u8])],
    /// The sha256 of each of `builtins`, computed when the binary was built.
    pub builtin_digests: &'static [(&'static str, &'static str)],
}

/// Where a plugin's load starts.
enum Start {
    /// Nothing read yet: its component is read, and described from the summary the
    /// cache holds for it, if any.
    Source,
    /// Its component's bytes and sha256, read by whoever found that the cache holds no
    /// summary of it: loaded whole from them (the cache is not asked again).
    Unsummarized(code::Bytes, String),
}

/// Fact records by group name: each record string keys and string values.
pub type FactGroups = std::collections::BTreeMap<String, Vec<Vec<(String, String)>>>;

/// The most records a group may have, and the longest key or value, from a fact plugin.
const MAX_FACT_RECORDS: usize = 1_000_000;
const MAX_FACT_STRING: usize = 64 * 1024;

/// A plugin as `wconverge plugins list` and `types` show it.
#[derive(Debug, Clone)]
pub struct PluginSummary {
    pub name: String,
    pub source: String,
    pub sha256: String,
    pub version: String,
    pub imports: Vec<String>,
    pub types: Vec<TypeSchema>,
    /// What the plugin is.
    pub kind: PluginKind,
    /// For an interpreter: the attributes its guards inherit.
    pub inherits: Vec<String>,
    /// For an interpreter: the OS families where its first type guards by `default`.
    pub default_on: Vec<String>,
    /// Where it is suitable: its resource program over facts, if it declares one.
    pub requires: Option<String>,
}

/// What a plugin is, told by the world it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// Implements resource types (`wconverge:plugin/provider`).
    Provider,
    /// A provider whose script types also run guards (`wconverge:plugin/interpreter`).
    Interpreter,
    /// Launches programs of other architectures (`wconverge:plugin/launcher`).
    Launcher,
    /// Gathers facts (`wconverge:plugin/fact-source`).
    Facts,
    /// Not a plugin: the types built into the engine (`node_block`), listed as if from a
    /// plugin of their own.
    Engine,
}

impl PluginKind {
    /// Its name in output and in the cache.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Provider => "provider",
            PluginKind::Interpreter => "interpreter",
            PluginKind::Launcher => "launcher",
            PluginKind::Facts => "facts",
            PluginKind::Engine => "engine",
        }
    }
}

/// The most directories `resolve_path` remembers; past it, it starts again.
const MAX_RESOLVED_DIRS: usize = 100_000;

/// Runs plugins for the engine.
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<PluginState>>,
    cache: Arc<cache::Cache>,
    policy: Policy,
    builtins: &'static [(&'static str, &'static [u8])],
    builtin_digests: &'static [(&'static str, &'static str)],
    shared: Arc<Shared>,
    plugins: Mutex<HashMap<String, Result<Arc<Plugin>, PluginError>>>,
    grants: GrantCache,
    roots: Mutex<HashMap<String, Arc<PolicyRoots>>>,
    ticker: Once,
    facts: std::sync::OnceLock<(FactGroups, Vec<PluginError>)>,
    suitability: Mutex<HashMap<String, Suitability>>,
    /// Directories `resolve_path` walked in this run, and where each walk ended.
    resolved: Mutex<HashMap<String, Option<String>>>,
    /// The threads loading the code of plugins ahead of their first call, by plugin.
    loading: Mutex<Vec<(String, std::thread::JoinHandle<()>)>>,
}

impl Drop for Runtime {
    /// The cgroups kept for launches go with the runtime; directories plugins changed
    /// and no one synced are synced.
    fn drop(&mut self) {
        // A load under way may be writing a cache entry: it ends first.
        for (_, thread) in self
            .loading
            .get_mut()
            .expect("loading threads lock")
            .drain(..)
        {
            let _ = thread.join();
        }
        let _ = self.shared.sync_directories();
        self.shared.ticker.close();
        wconverge_launch::release_cgroups();
    }
}

/// Whether a provider suits this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Suitability {
    /// It declares no requirement.
    Everywhere,
    /// Its requirement (this text) holds on this machine's facts.
    Holds(String),
    /// Its requirement does not hold: why.
    Fails(String),
    /// Its requirement could not be evaluated: why.
    Unknown(String),
}

impl Suitability {
    pub fn is_suitable(&self) -> bool {
        matches!(self, Suitability::Everywhere | Suitability::Holds(_))
    }

    /// In words, for messages and `wconverge types`.
    pub fn describe(&self) -> String {
        match self {
            Suitability::Everywhere => "suitable everywhere".to_owned(),
            Suitability::Holds(text) => format!(
                "suitable: its requirement holds: `{}`",
                text.trim().replace('\n', "`, `")
            ),
            Suitability::Fails(why) | Suitability::Unknown(why) => why.clone(),
        }
    }
}

fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Runtime {
    pub fn new(options: RuntimeOptions) -> Result<Runtime> {
        static CLOSE_INHERITED: Once = Once::new();
        CLOSE_INHERITED.call_once(|| {
            wconverge_launch::close_inherited_on_exec();
            wconverge_launch::become_subreaper();
            wconverge_launch::sweep_cgroups();
        });
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Each instance maps its memory when it is made, not in a slot of wasmtime's
        // pooling allocator: with the scan that made the pool worth it (`PAGEMAP_SCAN`),
        // wasmtime 48 leaves a page the plugin wrote and the kernel swapped out neither
        // reset nor decommitted, and the next instance in the slot would read it
        // (bytecodealliance/wasmtime#14357); without the scan the pool gained nothing.
        let engine = Engine::new(&config).map_err(|error| Error::Wasmtime(format!("{error:#}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|error| Error::Wasmtime(format!("{error:#}")))?;
        files::add_to_linker(&mut linker).map_err(|error| Error::Wasmtime(format!("{error:#}")))?;
        clock::add_to_linker(&mut linker).map_err(|error| Error::Wasmtime(format!("{error:#}")))?;
        bindings::Provider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|error| Error::Wasmtime(format!("{error:#}")))?;
        previous::add_to_linker(&mut linker)
            .map_err(|error| Error::Wasmtime(format!("{error:#}")))?;
        let cache = Arc::new(cache::Cache::new(options.cache_dir.as_deref(), &engine));
        let shared = Arc::new(Shared::default());
        shared.set_launcher_loader(launcher_loader(
            &engine,
            &linker,
            options.cache_dir.as_deref(),
            options.builtins,
            options.builtin_digests,
            &shared,
            &options.policy,
        ));
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
            cache,
            policy: options.policy,
            builtins: options.builtins,
            builtin_digests: options.builtin_digests,
            shared,
            plugins: Mutex::new(HashMap::new()),
            grants: GrantCache::default(),
            roots: Mutex::new(HashMap::new()),
            ticker: Once::new(),
            facts: std::sync::OnceLock::new(),
            suitability: Mutex::new(HashMap::new()),
            resolved: Mutex::new(HashMap::new()),
            loading: Mutex::new(Vec::new()),
        })
    }

    /// Makes durable every directory whose entries plugins changed since the last call
    /// (a file replaced by a rename, a removal): once per directory, not once per file.
    /// Returns what could not be synced, each naming its directory.
    pub fn sync_directories(&self) -> Vec<String> {
        self.shared.sync_directories()
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Records every capability decision of this runtime's plugins in `trail`.
    pub fn set_trail(&self, trail: Arc<trail::Trail>) {
        self.shared.set_trail(trail);
    }

    /// A directory decision in the audit trail: refusals always, grants when the trail
    /// has a file. An error (denied, from the plugin's point of view) refuses a grant the
    /// trail cannot record.
    fn audit_directory(
        &self,
        plugin: &policy::PluginPolicy,
        digest: &str,
        resource: Option<&PreparedResource>,
        directory: &str,
        access: Access,
        refused: Option<&str>,
    ) -> std::result::Result<(), PluginError> {
        let Some(trail) = self.shared.trail() else {
            return Ok(());
        };
        let broken = if refused.is_none() {
            trail.broken()
        } else {
            None
        };
        if refused.is_none() && broken.is_none() && !trail.logs_allowed() {
            return Ok(());
        }
        let scrub = |text: &str| {
            resource.map_or_else(
                || text.to_owned(),
                |resource| resource.secrets().scrub(text),
            )
        };
        let reason = refused
            .map(scrub)
            .or_else(|| broken.as_ref().map(ToString::to_string));
        let recorded = trail.record(trail::Event {
            resource: resource.map(|resource| resource.reference.to_string()),
            access: Some(access.as_str()),
            decision: if reason.is_some() {
                trail::Decision::Denied
            } else {
                trail::Decision::Allowed
            },
            reason,
            ..trail::Event::new(&plugin.name, digest, "open-directory", scrub(directory))
        });
        match (refused, broken) {
            (Some(_), _) => Ok(()),
            (None, Some(why)) => Err(why),
            (None, None) => recorded,
        }
        .map_err(|why| PluginError::new(&plugin.name, PluginErrorKind::Denied, why.to_string()))
    }

    /// Starts the thread that advances the engine's epoch, which the CPU limit counts.
    fn start_ticker(&self) {
        self.ticker.call_once(|| {
            ticker::start(&self.engine, Arc::clone(&self.shared.ticker));
        });
    }

    /// The plugin named `name`, loaded on first use.
    fn plugin(&self, name: &str) -> Result<Arc<Plugin>, PluginError> {
        self.plugin_from(name, Start::Source)
    }

    /// The plugin named `name`, loaded on first use from where `start` says.
    fn plugin_from(&self, name: &str, start: Start) -> Result<Arc<Plugin>, PluginError> {
        if let Some(loaded) = self.plugins.lock().expect("plugins lock").get(name) {
            return loaded.clone();
        }
        self.start_ticker();
        let policy = self
            .policy
            .plugin(name)
            .ok_or_else(|| {
                PluginError::new(name, PluginErrorKind::Load, "the policy has no such plugin")
            })?
            .clone();
        let policy = Arc::new(policy);
        let mut seen = None;
        let described = match start {
            Start::Unsummarized(wasm, digest) => Err(Some((wasm, digest))),
            Start::Source => match self.component(&policy) {
                Some((wasm, digest)) => self.described(&policy, wasm, digest),
                None => Err(None),
            },
        };
        let loaded = match described {
            Ok(plugin) => Ok(plugin),
            Err(component) => {
                let loader = Loader {
                    engine: &self.engine,
                    linker: &self.linker,
                    cache: &self.cache,
                    builtins: self.builtins,
                    digests: self.builtin_digests,
                    shared: &self.shared,
                };
                let loaded = Plugin::load(&loader, Arc::clone(&policy), component, &mut seen);
                if let Ok(plugin) = &loaded {
                    self.remember_summary(&policy, plugin);
                }
                loaded.map(Arc::new)
            }
        };
        if loaded.is_ok() {
            // Whoever can replace a program the plugin may launch can run code as the
            // user it launches it as.
            for flag in audit::writable_programs(&policy) {
                tracing::warn!("plugin `{name}`: {}", flag.message);
            }
        }
        if let (Err(error), Some(trail)) = (&loaded, self.shared.trail())
            && matches!(error.kind, PluginErrorKind::Load | PluginErrorKind::Denied)
        {
            // The digest of the file that was refused; the pinned one if it was not read.
            let digest = seen
                .as_deref()
                .or(policy.sha256.as_deref())
                .unwrap_or_default();
            // Refusals always reach the console, whatever the file does.
            let _ = trail.record(trail::Event {
                decision: trail::Decision::Denied,
                reason: Some(error.message.clone()),
                ..trail::Event::new(name, digest, "load", policy.source.describe())
            });
        }
        self.plugins
            .lock()
            .expect("plugins lock")
            .insert(name.to_owned(), loaded.clone());
        loaded
    }

    /// The provider of `type_name` that a resource gets: the one `requested` names, or
    /// the first suitable one in the policy's order; `None` when no plugin provides it.
    fn choose(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<Arc<Plugin>>, PluginError> {
        let unsuitable = |message: String| {
            PluginError::new(
                requested.unwrap_or(type_name),
                PluginErrorKind::Unsuitable,
                message,
            )
        };
        let candidates: Vec<&str> = self
            .policy
            .providers_of(type_name)
            .map(|plugin| plugin.name.as_str())
            .collect();
        if let Some(requested) = requested {
            if !candidates.contains(&requested) {
                return Err(unsuitable(if candidates.is_empty() {
                    format!(
                        "`provider => '{requested}'`: no plugin of the policy provides type \
                         `{type_name}`"
                    )
                } else if self.policy.plugin(requested).is_some() {
                    format!(
                        "`provider => '{requested}'`: plugin `{requested}` does not provide type \
                         `{type_name}`; its providers are {}",
                        quoted_list(&candidates)
                    )
                } else {
                    format!(
                        "`provider => '{requested}'`: no plugin of the policy named \
                         `{requested}` provides type `{type_name}`; its providers are {}",
                        quoted_list(&candidates)
                    )
                }));
            }
            let plugin = self.plugin(requested)?;
            return match self.suitability(&plugin) {
                suitability if suitability.is_suitable() => Ok(Some(plugin)),
                suitability => Err(unsuitable(format!(
                    "provider `{requested}` of `{type_name}` is not suitable on this machine: \
                     {}",
                    suitability.describe()
                ))),
            };
        }
        if candidates.is_empty() {
            return Ok(None);
        }
        let mut reasons = Vec::with_capacity(candidates.len());
        for name in candidates {
            let plugin = self.plugin(name)?;
            let suitability = self.suitability(&plugin);
            if suitability.is_suitable() {
                return Ok(Some(plugin));
            }
            // Falling through to the next provider on incomplete facts would choose
            // differently from one run to the next.
            if let Suitability::Unknown(why) = &suitability {
                return Err(unsuitable(format!(
                    "cannot tell whether provider `{name}` of `{type_name}` suits this machine: \
                     {why}"
                )));
            }
            reasons.push(format!("`{name}`: {}", suitability.describe()));
        }
        Err(unsuitable(format!(
            "no provider of `{type_name}` is suitable on this machine ({})",
            reasons.join("; ")
        )))
    }

    /// Whether `plugin` suits this machine, evaluated once per run.
    fn suitability(&self, plugin: &Plugin) -> Suitability {
        let Some(requirement) = &plugin.requirement else {
            return Suitability::Everywhere;
        };
        let mut known = self.suitability.lock().expect("suitability lock");
        if let Some(suitability) = known.get(&plugin.policy.name) {
            return suitability.clone();
        }
        let suitability = match PluginHost::facts(self) {
            Err(error) => Suitability::Unknown(format!(
                "its requirement could not be evaluated: the facts could not be gathered: \
                 {error}"
            )),
            Ok(facts) => {
                let verdict = requirement.program.evaluate(&facts);
                if verdict.holds {
                    Suitability::Holds(requirement.text.clone())
                } else if verdict.exhausted {
                    Suitability::Fails(
                        "its requirement did more work than a resource program may, and was \
                         stopped"
                            .to_owned(),
                    )
                } else {
                    Suitability::Fails(verdict.failed.map_or_else(
                        || "its requirement does not hold".to_owned(),
                        |(line, text)| {
                            format!("line {line} of its requirement does not hold: `{text}`")
                        },
                    ))
                }
            }
        };
        known.insert(plugin.policy.name.clone(), suitability.clone());
        suitability
    }

    /// Starts another run with this runtime (a watching agent's correction): what the
    /// last run opened and walked by descriptor (the directories of its grants, the idle
    /// instances that hold them, the paths it resolved) is forgotten, so that a directory
    /// removed and made again since is opened anew rather than through the old one.
    pub fn begin_run(&self) {
        self.grants.clear();
        self.resolved.lock().expect("resolved paths lock").clear();
        let plugins: Vec<Arc<Plugin>> = self
            .plugins
            .lock()
            .expect("plugins lock")
            .values()
            .filter_map(|plugin| plugin.as_ref().ok().cloned())
            .collect();
        for plugin in plugins {
            plugin.drop_idle();
        }
    }

    /// Whether the plugin named `name` suits this machine, for `wconverge types`.
    pub fn plugin_suitability(&self, name: &str) -> Result<Suitability, PluginError> {
        Ok(self.suitability(&*self.plugin(name)?))
    }

    fn roots(&self, plugin: &Plugin) -> Arc<PolicyRoots> {
        let mut roots = self.roots.lock().expect("roots lock");
        if let Some(found) = roots.get(&plugin.policy.name) {
            return Arc::clone(found);
        }
        Arc::clone(
            roots
                .entry(plugin.policy.name.clone())
                .or_insert_with(|| Arc::new(grants::policy_roots(&plugin.policy))),
        )
    }

    fn grants_for(
        &self,
        plugin: &Plugin,
        resource: &PreparedResource,
        schema: &TypeSchema,
        phase: Phase,
    ) -> Result<Granted, PluginError> {
        self.grants_for_after(plugin, (resource, schema, phase), &mut None)
    }

    /// [`Runtime::grants_for`] for resources in turn: `last` keeps what the one before
    /// needed and got, and a resource that needs the same directories gets the same
    /// grants without looking them up again (each is still recorded for it).
    ///
    /// While a resource is only inspected, a directory it would write in that does not
    /// exist yet is left out (a resource before it may create it): what the resource
    /// writes is then absent (`Granted::absent`). When it is applied, the directory must
    /// exist.
    fn grants_for_after(
        &self,
        plugin: &Plugin,
        (resource, schema, phase): (&PreparedResource, &TypeSchema, Phase),
        last: &mut Option<(Vec<grants::Needed>, Granted)>,
    ) -> Result<Granted, PluginError> {
        let name = &plugin.policy.name;
        let convert = |error: GrantError| match error {
            GrantError::Denied(message) => PluginError::new(name, PluginErrorKind::Denied, message),
            GrantError::Unusable(message) | GrantError::Missing(message) => {
                PluginError::new(name, PluginErrorKind::Provider, message)
            }
        };
        let needed = grants::needed(resource, schema).map_err(convert)?;
        grants::named_files(&plugin.policy, resource, schema).map_err(convert)?;
        if let Some((before, granted)) = last.as_ref()
            && *before == needed
        {
            for (dir, access, _) in needed
                .iter()
                .filter(|(dir, _, _)| granted.grants.iter().any(|grant| grant.guest == *dir))
            {
                self.audit_directory(
                    &plugin.policy,
                    &plugin.digest,
                    Some(resource),
                    dir,
                    call_access(phase, *access),
                    None,
                )?;
            }
            return Ok(granted.clone());
        }
        let roots = self.roots(plugin);
        let mut absent = false;
        let granted = needed
            .iter()
            .filter_map(|(dir, access, private)| {
                // Checked for the access the resource declares, even while it is only
                // inspected: a resource that could not be applied fails before anything
                // changes. The call itself gets write access only when it applies.
                let granted = self
                    .grants
                    .grant(&plugin.policy, &roots, dir, *access, *private);
                let refused = match &granted {
                    Err(GrantError::Denied(message)) => Some(message.as_str()),
                    _ => None,
                };
                let gets = if refused.is_some() {
                    *access
                } else {
                    call_access(phase, *access)
                };
                if phase == Phase::Inspect
                    && *access == Access::ReadWrite
                    && matches!(granted, Err(GrantError::Missing(_)))
                {
                    // The plugin sees the nearest directory that exists, read-only, where
                    // what it would write is plainly absent; nothing if the policy does not
                    // grant that one.
                    absent = true;
                    let ancestor = grants::nearest_existing(dir);
                    let seen = self
                        .grants
                        .grant(&plugin.policy, &roots, &ancestor, Access::Read, *private)
                        .ok()?;
                    return Some(
                        self.audit_directory(
                            &plugin.policy,
                            &plugin.digest,
                            Some(resource),
                            &ancestor,
                            Access::Read,
                            None,
                        )
                        .map(|()| seen),
                    );
                }
                let recorded = self.audit_directory(
                    &plugin.policy,
                    &plugin.digest,
                    Some(resource),
                    dir,
                    gets,
                    refused,
                );
                Some(granted.map_err(convert).and_then(|granted| {
                    recorded?;
                    Ok(granted)
                }))
            })
            .collect::<Result<Vec<_>, PluginError>>()?;
        let granted = Granted {
            grants: granted,
            absent,
        };
        *last = Some((needed, granted.clone()));
        Ok(granted)
    }

    /// Runs `body` on an instance of the resource's plugin for `phase`, keeping the
    /// instance for reuse unless it faulted; `body` is told whether what the resource
    /// writes is absent because its directory does not exist yet (`Granted::absent`).
    fn session<T>(
        &self,
        resource: &PreparedResource,
        phase: Phase,
        body: impl FnOnce(
            &Plugin,
            &TypeSchema,
            &mut Instance,
            bool,
            &mut Vec<LogRecord>,
        ) -> Result<T, PluginError>,
    ) -> Call<T> {
        let mut logs = Vec::new();
        let outcome = (|| {
            let plugin = self.plugin(&resource.provider)?;
            let schema = schema_of(&plugin, resource)?;
            let granted = match phase {
                Phase::Describe | Phase::Guard => Granted::default(),
                Phase::Inspect | Phase::Change => {
                    self.grants_for(&plugin, resource, schema, phase)?
                }
            };
            let mut instance =
                plugin.instance(&self.engine, &self.shared, phase, &granted.grants)?;
            instance.store.data_mut().subject =
                Some((resource.reference.to_string(), resource.secrets().clone()));
            let result = body(&plugin, schema, &mut instance, granted.absent, &mut logs);
            if !matches!(&result, Err(error) if error.kind == PluginErrorKind::Fault) {
                plugin.put_back(instance);
            }
            result
        })();
        Call::new(outcome, logs)
    }

    /// One call of a provider export that takes many resources (`validate`, `check`), on
    /// an instance for `access` (a phase and its grants), the call's subject the
    /// resources of `batch` (`what` says of what): one result per resource, or the fault.
    /// With it, when `record` asks for them, what it read when a replay could stand for
    /// it (see `replay`): it was the first call of a fresh instance, which reached the
    /// host only through what the reads record.
    pub(crate) fn call_many<T>(
        &self,
        plugin: &Plugin,
        (phase, grants, record): (Phase, &[Arc<Grant>], bool),
        batch: &[&PreparedResource],
        what: &str,
        (export, call): (
            &str,
            impl FnOnce(
                &plugin::Exports,
                &mut wasmtime::Store<PluginState>,
                &[bindings::types::Resource],
            ) -> wasmtime::Result<Vec<T>>,
        ),
        logs: &mut Vec<LogRecord>,
    ) -> Result<(Vec<T>, Option<replay::Reads>), PluginError> {
        let mut instance = plugin.instance(&self.engine, &self.shared, phase, grants)?;
        let recording = record && instance.calls == 0;
        let state = instance.store.data_mut();
        state.subject = Some(batch_subject(batch, what));
        if recording {
            state.reads = Some(replay::Reads::default());
        }
        let wits = convert::resources_to_wit(batch);
        let called = plugin.call(&mut instance, |exports, store| call(exports, store, &wits));
        logs.extend(called.logs);
        let results = called.outcome?;
        let state = instance.store.data_mut();
        let reads = state.reads.take().filter(|_| !state.unrecorded);
        if recording && reads.is_none() {
            tracing::debug!(plugin = %plugin.policy.name, "not replayable: the plugin reached the host other than through `file-metadata` reads");
        }
        plugin.put_back(instance);
        if results.len() != batch.len() {
            return Err(contract_error(
                plugin,
                format!(
                    "`{export}` returned {} results for {} resources",
                    results.len(),
                    batch.len()
                ),
            ));
        }
        Ok((results, reads))
    }
}

/// Finds and loads the launcher the first time a launch names an architecture, whatever
/// the resource or plugin: the plugin with no types whose component is a launcher. A run
/// that asks for no architecture never loads it.
fn launcher_loader(
    engine: &Engine,
    linker: &Linker<PluginState>,
    cache_dir: Option<&std::path::Path>,
    builtins: &'static [(&'static str, &'static [u8])],
    digests: &'static [(&'static str, &'static str)],
    shared: &Arc<Shared>,
    policy: &Policy,
) -> Box<dyn FnOnce() -> LauncherSlot + Send> {
    let engine = engine.clone();
    let linker = linker.clone();
    let cache_dir = cache_dir.map(std::path::Path::to_path_buf);
    let weak = Arc::downgrade(shared);
    let candidates: Vec<policy::PluginPolicy> = policy
        .plugins
        .iter()
        .filter(|plugin| plugin.provides.is_empty())
        .cloned()
        .collect();
    Box::new(move || {
        let shared = weak
            .upgrade()
            .ok_or("the run is over; nothing can be launched")?;
        let cache = cache::Cache::new(cache_dir.as_deref(), &engine);
        let loader = Loader {
            engine: &engine,
            linker: &linker,
            cache: &cache,
            builtins,
            digests,
            shared: &shared,
        };
        let mut found: Option<Arc<Plugin>> = None;
        for candidate in candidates {
            let plugin = Plugin::load(&loader, Arc::new(candidate), None, &mut None)
                .map_err(|error| format!("the launcher could not be loaded: {error}"))?;
            if !plugin.is_launcher() {
                continue;
            }
            if let Some(first) = &found {
                return Err(format!(
                    "the policy has two launchers, `{}` and `{}`; keep one",
                    first.policy.name, plugin.policy.name
                ));
            }
            plugin.drop_idle();
            found = Some(Arc::new(plugin));
        }
        let plugin = found.ok_or(
            "the policy has no launcher plugin; add `[plugins.launcher]` with `source = \
             \"builtin\"` and `provides = []`",
        )?;
        Ok(Arc::new(LauncherHandle {
            plugin,
            engine,
            shared: weak,
        }) as Arc<dyn Launcher>)
    })
}

/// The launcher plugin, as the process check calls it.
struct LauncherHandle {
    plugin: Arc<Plugin>,
    engine: Engine,
    shared: Weak<Shared>,
}

impl Launcher for LauncherHandle {
    fn policy(&self) -> &policy::PluginPolicy {
        &self.plugin.policy
    }

    fn route(&self, program: &str, args: &[String], architecture: &str) -> Result<Route, String> {
        let shared = self
            .shared
            .upgrade()
            .ok_or("the run is over; nothing can be launched")?;
        let mut instance = self
            .plugin
            .instance(&self.engine, &shared, Phase::Describe, &[])
            .map_err(|error| error.to_string())?;
        let launch = bindings::launcher::launching::Launch {
            program: program.to_owned(),
            args: args.to_vec(),
            architecture: architecture.to_owned(),
            platform: bindings::launcher::launching::Platform {
                os: std::env::consts::OS.to_owned(),
                machine: rustix::system::uname()
                    .machine()
                    .to_string_lossy()
                    .into_owned(),
                process_arch: std::env::consts::ARCH.to_owned(),
            },
        };
        let called = self.plugin.call(&mut instance, |exports, store| {
            exports.launching()?.call_plan(store, &launch)
        });
        // Not put back: see `Plugin::drop_idle`.
        let plan = called.outcome.map_err(|error| error.to_string())?;
        let plan = plan.map_err(|message| convert::truncate(&message))?;
        Ok(Route {
            program: plan.program,
            args: plan.args,
            how: convert::truncate(&plan.how),
            provided_by: convert::truncate(&plan.provided_by),
        })
    }
}

/// What a plugin said about `resource`, without its secrets, then cut to size (in that
/// order: a cut could split a secret, which no later scrub would recognize).
/// The schema of the resource's type in its plugin, which must provide it.
fn schema_of<'p>(
    plugin: &'p Plugin,
    resource: &PreparedResource,
) -> Result<&'p TypeSchema, PluginError> {
    plugin.schemas.get(&resource.type_name).ok_or_else(|| {
        PluginError::new(
            &resource.provider,
            PluginErrorKind::Load,
            format!("it does not provide type `{}`", resource.type_name),
        )
    })
}

fn said(resource: &PreparedResource, text: &str) -> String {
    convert::truncate(&resource.secrets().scrub(text))
}

fn provider_error(plugin: &Plugin, message: String) -> PluginError {
    PluginError::new(&plugin.policy.name, PluginErrorKind::Provider, message)
}

fn contract_error(plugin: &Plugin, breach: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        &plugin.policy.name,
        PluginErrorKind::Fault,
        format!("it broke the plugin contract: {breach}"),
    )
}

/// What a call on many resources is about, for its logs and audit records: the one
/// resource, or how many (`what` says of what); and the secrets of all of them, which
/// are scrubbed from what the call writes.
fn batch_subject(batch: &[&PreparedResource], what: &str) -> (String, wconverge_engine::Secrets) {
    (
        match batch {
            [one] => one.reference.to_string(),
            _ => format!("{} resources{what}", batch.len()),
        },
        wconverge_engine::Secrets::union(batch.iter().map(|resource| resource.secrets())),
    )
}

/// `resources` cut into batches that each take at most an eighth of a plugin's memory
/// limit (`memory_bytes`) once lowered into it, and hold at least one resource.
fn by_weight<'r, 'p>(
    resources: &'r [&'p PreparedResource],
    memory_bytes: usize,
) -> impl Iterator<Item = &'r [&'p PreparedResource]> {
    let budget = memory_bytes / 8;
    let mut rest = resources;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut taken = 0;
        let mut weight = 0;
        for resource in rest {
            weight += convert::lowered_bytes(resource);
            if taken > 0 && weight > budget {
                break;
            }
            taken += 1;
        }
        let (batch, after) = rest.split_at(taken);
        rest = after;
        Some(batch)
    })
}

/// The access a call of `phase` gets to a directory its resource declares `access` to:
/// write access only when it applies.
fn call_access(phase: Phase, access: Access) -> Access {
    if phase == Phase::Change {
        access
    } else {
        Access::Read
    }
}
