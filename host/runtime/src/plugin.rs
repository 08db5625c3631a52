//! Loading a plugin: its bytes, their digest, the import check, compilation (through
//! the cache), pre-instantiation and `describe`; and running its instances.
//!
//! A provider whose summary the cache holds (what `describe` said, for this component
//! and engine) is described from it, and its code is loaded by a thread of its own
//! while the run is prepared ([`Deferred`]): preparing needs only the schemas, and the
//! first instance waits for the code if it is not there yet.

use crate::bindings::fact_source::facts;
use crate::bindings::interpreter::scripts;
use crate::bindings::launcher::launching;
use crate::bindings::{FACTS_EXPORT, LAUNCHING_EXPORT, PROVIDER_EXPORT, SCRIPTS_EXPORT};
use crate::cache::Cache;
use crate::code::{Bytes, Code, Deferred, compile};
use crate::digest::sha256_hex;
use crate::grants::Grant;
use crate::imports::Refused;
use crate::policy::{Access, PluginPolicy, Source};
use crate::previous::{ProviderExports, ProviderKind};
use crate::schema::schema_from_wit;
use crate::state::{Phase, PluginState, Shared, Stop};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use wasmtime::component::{InstancePre, Linker};
use wasmtime::{Engine, Store, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, ResourceTable, WasiCtxBuilder};
use wconverge_catalog::TypeSchema;
use wconverge_engine::{Level, LogRecord, PluginError, PluginErrorKind};

use crate::bindings::WIT_VERSION;

/// Idle instances kept per plugin, most recently used first: at least this many, and
/// one per core, so that `apply --jobs` workers on the same directory find one each.
const IDLE_INSTANCES: usize = 4;

fn idle_instances() -> usize {
    static CAP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        IDLE_INSTANCES.max(std::thread::available_parallelism().map_or(1, usize::from))
    })
}

/// What an interpreter plugin declares (the `interpreter` world's `scripts.info`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InterpreterInfo {
    pub(crate) inherits: Vec<String>,
    pub(crate) default_on: Vec<String>,
}

/// The longest suitability requirement a plugin may declare.
const MAX_REQUIREMENT_BYTES: usize = 64 * 1024;

/// A provider's suitability: the resource program its `describe` returned.
#[derive(Debug, Clone)]
pub(crate) struct Requirement {
    pub(crate) text: String,
    pub(crate) program: wconverge_requires::Program,
}

impl Requirement {
    /// Parses a provider's program; the error says what is wrong and who must fix it.
    pub(crate) fn parse(text: String) -> Result<Requirement, RequirementError> {
        if text.len() > MAX_REQUIREMENT_BYTES {
            return Err(RequirementError::TooLong);
        }
        match wconverge_requires::Program::parse(&text) {
            Ok(program) => Ok(Requirement { text, program }),
            Err(errors) => Err(RequirementError::Invalid(errors)),
        }
    }
}

/// Why a provider's suitability requirement is refused (its author must fix it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequirementError {
    /// Longer than [`MAX_REQUIREMENT_BYTES`].
    TooLong,
    /// Not a valid resource program.
    Invalid(Vec<wconverge_requires::ProgramError>),
}

impl std::fmt::Display for RequirementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequirementError::TooLong => write!(
                f,
                "its suitability requirement is longer than {} KiB",
                MAX_REQUIREMENT_BYTES / 1024
            )?,
            RequirementError::Invalid(errors) => {
                f.write_str("its suitability requirement is not a valid resource program: ")?;
                for (n, error) in errors.iter().enumerate() {
                    if n > 0 {
                        f.write_str("; ")?;
                    }
                    write!(
                        f,
                        "line {}, column {}: {}",
                        error.line, error.column, error.message
                    )?;
                }
            }
        }
        f.write_str("; its author must fix the plugin")
    }
}

impl std::error::Error for RequirementError {}

/// A loaded plugin.
pub(crate) struct Plugin {
    pub(crate) policy: Arc<PluginPolicy>,
    pub(crate) digest: String,
    pub(crate) version: String,
    pub(crate) schemas: HashMap<String, TypeSchema>,
    /// The types it provides, in the order it describes them.
    pub(crate) type_order: Vec<String>,
    pub(crate) imports: Vec<String>,
    /// Set for an interpreter plugin.
    pub(crate) interpreter: Option<InterpreterInfo>,
    /// For a fact source: the groups it publishes.
    pub(crate) fact_groups: Option<Vec<String>>,
    /// Where it is suitable: its resource program over facts, as it wrote it and parsed.
    pub(crate) requirement: Option<Requirement>,
    kind: crate::PluginKind,
    /// Set when the plugin is loaded whole; for one described from its summary, by the
    /// first to need it (the thread that loads it, or an instance).
    code: OnceLock<Result<Code, PluginError>>,
    /// For a plugin described from its summary: what loads its code, taken by the
    /// first to load it.
    deferred: Mutex<Option<Deferred>>,
    idle: Mutex<Vec<Instance>>,
    /// Its policy entry as text, for the fingerprints of the calls it remembers (made
    /// once, not for each call).
    policy_text: OnceLock<String>,
}

/// What a plugin is: the world its component was built for, with where its exports are.
pub(crate) enum World {
    /// `provider`: resource types.
    Provider(ProviderKind),
    /// `interpreter`: a provider whose script types also run guards.
    Interpreter(ProviderKind, scripts::GuestIndices),
    /// `launcher`: launches programs of other architectures.
    Launcher(launching::GuestIndices),
    /// `fact-source`: gathers facts.
    FactSource(facts::GuestIndices),
}

impl World {
    pub(crate) fn kind(&self) -> crate::PluginKind {
        match self {
            World::Provider(_) => crate::PluginKind::Provider,
            World::Interpreter(..) => crate::PluginKind::Interpreter,
            World::Launcher(_) => crate::PluginKind::Launcher,
            World::FactSource(_) => crate::PluginKind::Facts,
        }
    }

    /// The world of a component that exports `exported` (by name), its exports found in
    /// `pre`; an error says what does not fit, and what to do.
    pub(crate) fn of(
        pre: &InstancePre<PluginState>,
        exported: &dyn Fn(&str) -> bool,
    ) -> Result<World, Refused> {
        let misfit = |world: &'static str, error: wasmtime::Error| Refused::Misfit {
            world,
            error: format!("{error:#}"),
        };
        let mixed = Refused::Mixed;
        let provides = exported(PROVIDER_EXPORT) || exported(SCRIPTS_EXPORT);
        match (exported(LAUNCHING_EXPORT), exported(FACTS_EXPORT)) {
            (true, true) => Err(mixed("both a launcher's and a fact source's interface")),
            (true, false) if provides => Err(mixed("a launcher's and a provider's functions")),
            (false, true) if provides => Err(mixed("a fact source's and a provider's functions")),
            (true, false) => launching::GuestIndices::new(pre)
                .map(World::Launcher)
                .map_err(|error| misfit("launcher", error)),
            (false, true) => facts::GuestIndices::new(pre)
                .map(World::FactSource)
                .map_err(|error| misfit("fact-source", error)),
            (false, false) => {
                let provider = ProviderKind::new(pre).map_err(|error| misfit("provider", error))?;
                if exported(SCRIPTS_EXPORT) {
                    scripts::GuestIndices::new(pre)
                        .map(|scripts| World::Interpreter(provider, scripts))
                        .map_err(|error| misfit("interpreter", error))
                } else {
                    Ok(World::Provider(provider))
                }
            }
        }
    }

    /// The exports of an instance of this world.
    pub(crate) fn load(
        &self,
        store: &mut Store<PluginState>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<Exports> {
        Ok(match self {
            World::Provider(provider) => Exports::Provider(provider.load(&mut *store, instance)?),
            World::Interpreter(provider, scripts) => Exports::Interpreter(
                provider.load(&mut *store, instance)?,
                scripts.load(&mut *store, instance)?,
            ),
            World::Launcher(launching) => Exports::Launcher(launching.load(&mut *store, instance)?),
            World::FactSource(facts) => Exports::FactSource(facts.load(&mut *store, instance)?),
        })
    }
}

/// The exports of one instance, by world.
pub(crate) enum Exports {
    Provider(ProviderExports),
    Interpreter(ProviderExports, scripts::Guest),
    Launcher(launching::Guest),
    FactSource(facts::Guest),
}

impl Exports {
    pub(crate) fn provider(&self) -> wasmtime::Result<&ProviderExports> {
        match self {
            Exports::Provider(provider) | Exports::Interpreter(provider, _) => Ok(provider),
            _ => Err(wasmtime::format_err!("the plugin is not a provider")),
        }
    }

    pub(crate) fn scripts(&self) -> wasmtime::Result<&scripts::Guest> {
        match self {
            Exports::Interpreter(_, scripts) => Ok(scripts),
            _ => Err(wasmtime::format_err!("the plugin is not an interpreter")),
        }
    }

    pub(crate) fn facts(&self) -> wasmtime::Result<&facts::Guest> {
        match self {
            Exports::FactSource(facts) => Ok(facts),
            _ => Err(wasmtime::format_err!("the plugin is not a fact source")),
        }
    }

    pub(crate) fn launching(&self) -> wasmtime::Result<&launching::Guest> {
        match self {
            Exports::Launcher(launching) => Ok(launching),
            _ => Err(wasmtime::format_err!("the plugin is not a launcher")),
        }
    }
}

/// What makes two instances interchangeable: the phase and exactly the same grants.
type InstanceKey = (Phase, Vec<(String, Access)>);

fn instance_key(phase: Phase, grants: &[Arc<Grant>]) -> InstanceKey {
    (
        phase,
        grants
            .iter()
            .map(|grant| (grant.guest.clone(), grant.access))
            .collect(),
    )
}

/// A live instance with the grants it was made with.
pub(crate) struct Instance {
    key: InstanceKey,
    pub(crate) store: Store<PluginState>,
    exports: Exports,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    /// How many calls it has taken.
    pub(crate) calls: u32,
}

/// Everything loading needs from the runtime.
pub(crate) struct Loader<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) linker: &'a Linker<PluginState>,
    pub(crate) cache: &'a Cache,
    pub(crate) builtins: &'a [(&'static str, &'static [u8])],
    /// The sha256 of each built-in component, computed when the binary was built.
    pub(crate) digests: &'a [(&'static str, &'static str)],
    pub(crate) shared: &'a Arc<Shared>,
}

/// The bytes of `policy`'s component, from the binary or read from its file.
fn source_bytes(loader: &Loader<'_>, policy: &PluginPolicy) -> Result<Bytes, PluginError> {
    match &policy.source {
        Source::Builtin => loader
            .builtins
            .iter()
            .find(|(name, _)| *name == policy.name)
            .map(|(_, bytes)| Bytes::Builtin(bytes))
            .ok_or_else(|| {
                load_error(
                    policy,
                    format!(
                        "there is no built-in plugin named `{}`; the built-in plugins are: {}",
                        policy.name,
                        loader
                            .builtins
                            .iter()
                            .map(|(name, _)| *name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            }),
        Source::PluginDir(None) => Err(load_error(
            policy,
            "it comes from the plugin directory (`source = \"plugin-dir\"`), and no \
             --plugin-dir was given",
        )),
        Source::File(path) | Source::PluginDir(Some(path)) => {
            read_component(path).map(Bytes::Read).map_err(|error| {
                load_error(policy, format!("cannot read `{}`: {error}", path.display()))
            })
        }
    }
}

pub(crate) fn load_error(policy: &PluginPolicy, message: impl Into<String>) -> PluginError {
    PluginError::new(&policy.name, PluginErrorKind::Load, message)
}

/// The largest component file wconverge reads (the Python example is 18 MB).
const COMPONENT_BYTES: u64 = 512 << 20;

/// Reads a component file: a regular file (a FIFO or a device named `NAME.wasm` would
/// block or never end), of at most [`COMPONENT_BYTES`].
pub fn read_component(path: &Path) -> std::io::Result<Vec<u8>> {
    let refused = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, message);
    crate::read_regular(path, COMPONENT_BYTES).map_err(|error| match error {
        crate::ReadError::Io(error) => error,
        crate::ReadError::NotRegular(_) => refused("it is not a regular file".to_owned()),
        crate::ReadError::TooLarge(bytes) => refused(format!(
            "it has {bytes} bytes; a component may have at most {COMPONENT_BYTES}"
        )),
        crate::ReadError::Grew => refused(format!(
            "it grew past {COMPONENT_BYTES} bytes while it was read"
        )),
    })
}

impl Plugin {
    /// Loads the plugin `policy` describes; `seen` gets the digest of its component
    /// once it is read (a refusal's audit event names the file that was refused).
    pub(crate) fn load(
        loader: &Loader<'_>,
        policy: Arc<PluginPolicy>,
        component: Option<(Bytes, String)>,
        seen: &mut Option<String>,
    ) -> Result<Plugin, PluginError> {
        let started = Instant::now();
        let (read, read_digest) = component.unzip();
        // Read (and hashed) already, by whoever looked for its summary; else read now.
        let read = match read {
            Some(bytes) => bytes,
            None => source_bytes(loader, &policy)?,
        };
        let wasm = read.as_slice();
        let digest = match (&policy.source, read_digest) {
            (_, Some(digest)) => digest,
            (Source::Builtin, None) => loader
                .digests
                .iter()
                .find(|(name, _)| *name == policy.name)
                .map_or_else(|| sha256_hex(wasm), |(_, digest)| (*digest).to_owned()),
            (_, None) => sha256_hex(wasm),
        };
        *seen = Some(digest.clone());
        if let Some(pinned) = &policy.sha256
            && *pinned != digest
        {
            return Err(load_error(
                &policy,
                format!(
                    "digest mismatch: the policy pins sha256 {pinned}, but the component is \
                     sha256 {digest}; refusing to load it (if you rebuilt it, review the \
                     change, then `wconverge plugins lock --policy FILE` pins the new digest)"
                ),
            ));
        }
        let (code, imports) = compile(
            loader.engine,
            loader.linker,
            loader.cache,
            &policy,
            wasm,
            &digest,
        )?;
        let world = &code.world;
        let kind = world.kind();
        let wit = match world {
            World::Provider(provider) | World::Interpreter(provider, _) => provider.version(),
            World::Launcher(_) | World::FactSource(_) => WIT_VERSION,
        };
        let mut plugin = Plugin {
            policy: Arc::clone(&policy),
            digest,
            version: String::new(),
            schemas: HashMap::new(),
            type_order: Vec::new(),
            imports,
            interpreter: None,
            fact_groups: None,
            requirement: None,
            kind,
            code: OnceLock::from(Ok(code)),
            deferred: Mutex::new(None),
            idle: Mutex::new(Vec::new()),
            policy_text: OnceLock::new(),
        };
        let mut instance =
            plugin.instantiate(loader.engine, loader.shared, Phase::Describe, &[])?;
        if kind == crate::PluginKind::Facts {
            let groups = plugin
                .call(&mut instance, |exports, store| {
                    exports.facts()?.call_groups(store)
                })
                .outcome?;
            plugin.fact_groups = Some(groups);
        }
        if matches!(kind, crate::PluginKind::Launcher | crate::PluginKind::Facts) {
            if !policy.provides.is_empty() {
                return Err(load_error(
                    &policy,
                    format!(
                        "it is a launcher or a fact source, which provides no types, but the \
                         policy says it provides {}; set `provides = []` in [plugins.{}]",
                        policy.provides.join(", "),
                        policy.name
                    ),
                ));
            }
            plugin.put_back(instance);
            tracing::debug!(plugin = %policy.name, elapsed = ?started.elapsed(), "loaded launcher");
            return Ok(plugin);
        }
        if kind == crate::PluginKind::Interpreter {
            let info = plugin
                .call(&mut instance, |exports, store| {
                    exports.scripts()?.call_info(store)
                })
                .outcome?;
            plugin.interpreter = Some(InterpreterInfo {
                inherits: info.inherits,
                default_on: info.default_on,
            });
        }
        let described = plugin.call(&mut instance, |exports, store| {
            exports.provider()?.call_describe(store)
        });
        // `describe` has no error to give: what the plugin logged before it stopped (a
        // Python SDK's traceback) is the explanation.
        let info = described.outcome.map_err(|mut error| {
            for record in described
                .logs
                .iter()
                .filter(|record| record.level >= Level::Error)
            {
                error
                    .message
                    .push_str(&format!("; it logged: {}", record.message));
            }
            error
        })?;
        for type_name in &policy.provides {
            let schema = info
                .types
                .iter()
                .find(|schema| schema.name == *type_name)
                .ok_or_else(|| {
                    load_error(
                        &policy,
                        format!(
                            "the policy says it provides `{type_name}`, but it describes only: {}",
                            info.types
                                .iter()
                                .map(|schema| schema.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })?;
            let schema = schema_from_wit(schema)
                .map_err(|message| load_error(&policy, format!("invalid schema: {message}")))?;
            plugin.schemas.insert(type_name.clone(), schema);
        }
        // What a guard inherits must be an attribute of the interpreter's own types.
        if let Some(interpreter) = &plugin.interpreter
            && let Some(unknown) = interpreter.inherits.iter().find(|name| {
                !plugin
                    .schemas
                    .values()
                    .any(|schema| schema.attribute(name).is_some())
            })
        {
            return Err(load_error(
                &policy,
                format!(
                    "it says guards inherit `{unknown}`, which none of its types has; its \
                     author must fix the plugin"
                ),
            ));
        }
        plugin.type_order = info
            .types
            .iter()
            .map(|schema| schema.name.clone())
            .filter(|name| policy.provides.contains(name))
            .collect();
        plugin.version = info.version;
        plugin.requirement = info
            .requires
            .map(|text| {
                Requirement::parse(text).map_err(|error| load_error(&policy, error.to_string()))
            })
            .transpose()?;
        plugin.put_back(instance);
        tracing::debug!(
            plugin = %policy.name,
            wit,
            elapsed = ?started.elapsed(),
            "loaded"
        );
        Ok(plugin)
    }

    /// A provider (or interpreter) described from its cached `summary`, whose code
    /// `deferred` loads later.
    pub(crate) fn described(
        policy: Arc<PluginPolicy>,
        digest: String,
        summary: crate::summaries::CachedSummary,
        deferred: Deferred,
    ) -> Result<Plugin, PluginError> {
        let crate::summaries::CachedSummary {
            version,
            imports,
            types,
            type_order,
            kind,
            inherits,
            default_on,
            requires,
        } = summary;
        let interpreter = match kind {
            crate::PluginKind::Provider => None,
            crate::PluginKind::Interpreter => Some(InterpreterInfo {
                inherits,
                default_on,
            }),
            _ => return Err(load_error(&policy, "its summary is not a provider's")),
        };
        let requirement = requires
            .map(|text| {
                Requirement::parse(text).map_err(|error| load_error(&policy, error.to_string()))
            })
            .transpose()?;
        Ok(Plugin {
            policy,
            digest,
            version,
            schemas: types
                .into_iter()
                .map(|schema| (schema.name.clone(), schema))
                .collect(),
            type_order,
            imports,
            interpreter,
            fact_groups: None,
            requirement,
            kind,
            code: OnceLock::new(),
            deferred: Mutex::new(Some(deferred)),
            idle: Mutex::new(Vec::new()),
            policy_text: OnceLock::new(),
        })
    }

    /// Its code: loaded already, or now (waiting for the thread loading it, if one is).
    fn code(&self) -> Result<&Code, PluginError> {
        self.code
            .get_or_init(|| {
                let deferred = self.deferred.lock().expect("deferred code lock").take();
                match deferred {
                    Some(deferred) => deferred.load(&self.policy, &self.digest, self.kind),
                    None => Err(load_error(
                        &self.policy,
                        "its code is not loaded: the attempt to load it stopped",
                    )),
                }
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Its policy entry as text (what a remembered call's fingerprint starts with).
    pub(crate) fn policy_text(&self) -> &str {
        self.policy_text
            .get_or_init(|| format!("{:?}", self.policy))
    }

    /// Loads its code now if no one has.
    pub(crate) fn load_code(&self) {
        let _ = self.code();
    }

    /// A launcher plugin provides no types and runs no scripts.
    pub(crate) fn is_launcher(&self) -> bool {
        self.kind == crate::PluginKind::Launcher
    }

    /// What it is, as `plugins list` and `types` show it.
    pub(crate) fn kind(&self) -> crate::PluginKind {
        self.kind
    }

    /// A fresh instance for `phase` that sees exactly `grants`.
    pub(crate) fn instantiate(
        &self,
        engine: &Engine,
        shared: &Arc<Shared>,
        phase: Phase,
        grants: &[Arc<Grant>],
    ) -> Result<Instance, PluginError> {
        let code = self.code()?;
        let limits = &self.policy.limits;
        let stdout = MemoryOutputPipe::new(limits.output_bytes);
        let stderr = MemoryOutputPipe::new(limits.output_bytes);
        let mut builder = WasiCtxBuilder::new();
        // Must come before the preopens: each preopen records it when it is added.
        builder.allow_blocking_current_thread(true);
        builder.stdout(stdout.clone()).stderr(stderr.clone());
        for grant in grants {
            let perms = if phase == Phase::Change && grant.access == Access::ReadWrite {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(grant.reopen_path(), &grant.guest, perms)
                .map_err(|error| {
                    PluginError::new(
                        &self.policy.name,
                        PluginErrorKind::Denied,
                        format!("cannot open `{}`: {error}", grant.canonical.display()),
                    )
                })?;
        }
        let state = self.state(shared, phase, grants, builder.build());
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.limits);
        store.epoch_deadline_callback(move |mut context| {
            let state = context.data_mut();
            if let Some(stop) = state.stop_reason() {
                state.stop = Some(stop);
                wasmtime::bail!("the plugin ran past a limit");
            }
            Ok(UpdateDeadline::Continue(1))
        });
        store.set_epoch_deadline(1);
        store.data_mut().begin_call();
        let fault = |error: wasmtime::Error, store: &Store<PluginState>| {
            let stop = store.data().stop;
            PluginError::new(
                &self.policy.name,
                PluginErrorKind::Fault,
                describe_trap(&error, stop, &self.policy, &stdout, &stderr),
            )
        };
        let _running = shared.ticker.enter();
        let instance = match code.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(error) => return Err(fault(error, &store)),
        };
        let exports = match code.world.load(&mut store, &instance) {
            Ok(exports) => exports,
            Err(error) => return Err(fault(error, &store)),
        };
        Ok(Instance {
            key: instance_key(phase, grants),
            store,
            exports,
            stdout,
            stderr,
            calls: 0,
        })
    }

    /// The data of a store for `phase` that sees exactly `grants`, with `wasi` (whose
    /// preopens are those grants, or none where no instance is made: a replay).
    pub(crate) fn state(
        &self,
        shared: &Arc<Shared>,
        phase: Phase,
        grants: &[Arc<Grant>],
        wasi: wasmtime_wasi::WasiCtx,
    ) -> PluginState {
        let limits = &self.policy.limits;
        PluginState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .trap_on_grow_failure(true)
                .instances(64)
                .tables(64)
                .memories(16)
                .build(),
            policy: Arc::clone(&self.policy),
            digest: Arc::from(self.digest.as_str()),
            subject: None,
            phase,
            grants: grants.to_vec(),
            shared: Arc::clone(shared),
            logs: Vec::new(),
            output_used: 0,
            call_started: Instant::now(),
            cpu_started: crate::state::thread_cpu_time(),
            program_time: std::time::Duration::ZERO,
            stop: None,
            paths: crate::files::Paths::default(),
            looked: crate::state::Looked::default(),
            reads: None,
            unrecorded: false,
            held: std::cell::RefCell::new(None),
        }
    }

    /// An idle instance made for the same phase and grants, or a new one.
    pub(crate) fn instance(
        &self,
        engine: &Engine,
        shared: &Arc<Shared>,
        phase: Phase,
        grants: &[Arc<Grant>],
    ) -> Result<Instance, PluginError> {
        let key = instance_key(phase, grants);
        let reused = {
            let mut idle = self.idle.lock().expect("idle instances lock");
            idle.iter()
                .position(|instance| instance.key == key)
                .map(|position| idle.remove(position))
        };
        match reused {
            Some(instance) => Ok(instance),
            None => self.instantiate(engine, shared, phase, grants),
        }
    }

    /// Drops the idle instances. Each holds the run's shared state, so a plugin that the
    /// shared state holds (the launcher) must keep none: the cycle would keep both alive
    /// past the run, and with them the directory of program names.
    pub(crate) fn drop_idle(&self) {
        self.idle.lock().expect("idle instances lock").clear();
    }

    /// Keeps an instance for reuse by a later call with the same grants. An instance
    /// that wrote to stdout or stderr is dropped instead, so each call's output is its
    /// own and within the limit; so is one that still holds files, directories or
    /// listings it opened (idle, it would keep them from the resources that run next).
    pub(crate) fn put_back(&self, instance: Instance) {
        if !instance.stdout.contents().is_empty() || !instance.stderr.contents().is_empty() {
            return;
        }
        let state = instance.store.data();
        if state.paths.holds_more_than(state.grants.len()) {
            return;
        }
        let dropped = {
            let mut idle = self.idle.lock().expect("idle instances lock");
            idle.insert(0, instance);
            let keep = idle_instances().min(idle.len());
            idle.split_off(keep)
        };
        // Dropped outside the lock: freeing an instance's memory takes a while, and
        // other threads may want one meanwhile.
        drop(dropped);
    }

    /// Runs one export on `instance`. A trap or a limit becomes a fault naming the
    /// plugin; the caller must then drop the instance (it cannot be entered again).
    pub(crate) fn call<T>(
        &self,
        instance: &mut Instance,
        call: impl FnOnce(&Exports, &mut Store<PluginState>) -> wasmtime::Result<T>,
    ) -> Called<T> {
        let stdout_before = instance.stdout.contents().len();
        let stderr_before = instance.stderr.contents().len();
        instance.store.data_mut().begin_call();
        instance.store.set_epoch_deadline(1);
        let running = instance.store.data().shared.ticker.enter();
        let result = call(&instance.exports, &mut instance.store);
        drop(running);
        instance.calls = instance.calls.saturating_add(1);
        let state = instance.store.data_mut();
        let mut logs = std::mem::take(&mut state.logs);
        let stop = state.stop;
        for (stream, pipe, before) in [
            ("stdout", &instance.stdout, stdout_before),
            ("stderr", &instance.stderr, stderr_before),
        ] {
            let contents = pipe.contents();
            if contents.len() > before {
                let text = String::from_utf8_lossy(&contents[before..]);
                for line in text.lines().take(200) {
                    logs.push(LogRecord {
                        level: Level::Info,
                        message: crate::convert::truncate(
                            &state.scrub(&format!("{stream}: {line}")),
                        ),
                    });
                }
            }
        }
        let outcome = result.map_err(|error| {
            PluginError::new(
                &self.policy.name,
                PluginErrorKind::Fault,
                describe_trap(
                    &error,
                    stop,
                    &self.policy,
                    &instance.stdout,
                    &instance.stderr,
                ),
            )
        });
        Called { outcome, logs }
    }
}

/// What one call returned and logged.
pub(crate) struct Called<T> {
    pub(crate) outcome: Result<T, PluginError>,
    pub(crate) logs: Vec<LogRecord>,
}

/// Words for why a plugin stopped: the limit it hit, or its trap and what it last said
/// on stderr (a Rust guest's panic message goes there).
fn describe_trap(
    error: &wasmtime::Error,
    stop: Option<Stop>,
    policy: &PluginPolicy,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> String {
    let limits = &policy.limits;
    let plugin = &policy.name;
    match stop {
        Some(Stop::Cpu) => {
            return format!(
                "it ran past its CPU limit of {} s and was stopped (raise `cpu_seconds` in \
                 [plugins.{plugin}.limits] if it needs more)",
                limits.cpu_seconds
            );
        }
        Some(Stop::Deadline) => {
            return format!(
                "it ran past its wall-clock limit of {} s (waiting, or blocked in the host; the \
                 programs it launched not counted) and was stopped (raise `wall_seconds` in \
                 [plugins.{plugin}.limits] if it needs more)",
                limits.wall_seconds
            );
        }
        Some(Stop::Output) => return output_limit(policy),
        Some(Stop::Interrupted) => {
            return crate::interrupted().unwrap_or_else(|| "wconverge was interrupted".to_owned());
        }
        None => {}
    }
    let chain = format!("{error:?}");
    if chain.contains("forcing trap when growing memory") {
        return format!(
            "it tried to use more than its memory limit of {} MiB and was stopped (raise \
             `memory_mib` in [plugins.{plugin}.limits] if it needs more)",
            limits.memory_bytes / (1024 * 1024)
        );
    }
    // A full pipe reports itself closed, so a guest may panic on it rather than trap.
    if chain.contains("write beyond capacity of MemoryOutputPipe")
        || stdout.contents().len() >= limits.output_bytes
        || stderr.contents().len() >= limits.output_bytes
    {
        return output_limit(policy);
    }
    let trap = error
        .downcast_ref::<wasmtime::Trap>()
        .map(|trap| trap.to_string())
        .unwrap_or_else(|| error.root_cause().to_string());
    let said = String::from_utf8_lossy(&stderr.contents())
        .trim()
        .to_owned();
    let last_words: Vec<&str> = said.lines().rev().take(3).collect();
    if last_words.is_empty() {
        format!("it trapped: {trap}")
    } else {
        let last_words: Vec<&str> = last_words.into_iter().rev().collect();
        format!(
            "it trapped: {trap}; its last words on stderr: {}",
            last_words.join(" / ")
        )
    }
}

fn output_limit(policy: &PluginPolicy) -> String {
    format!(
        "it wrote more than its output limit of {} KiB and was stopped (raise `output_kib` \
         in [plugins.{}.limits] if it needs more)",
        policy.limits.output_bytes / 1024,
        policy.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_is_built_for_one_world() {
        // The smallest component: the magic number and the component layer's version.
        let engine = Engine::default();
        let component = wasmtime::component::Component::new(
            &engine,
            [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00],
        )
        .expect("an empty component");
        let linker = Linker::<PluginState>::new(&engine);
        let pre = linker
            .instantiate_pre(&component)
            .expect("nothing to import");
        let world = |exports: &[&str]| match World::of(&pre, &|name| exports.contains(&name)) {
            Ok(_) => "fits".to_owned(),
            Err(refused) => refused.to_string(),
        };
        for (exports, said) in [
            (
                &[LAUNCHING_EXPORT, FACTS_EXPORT][..],
                "it exports both a launcher's and a fact source's interface; a plugin is \
                 built for one world",
            ),
            (
                &[LAUNCHING_EXPORT, PROVIDER_EXPORT],
                "it exports a launcher's and a provider's functions",
            ),
            (
                &[FACTS_EXPORT, SCRIPTS_EXPORT],
                "it exports a fact source's and a provider's functions",
            ),
            (&[LAUNCHING_EXPORT], "it does not fit the `launcher` world"),
            (&[FACTS_EXPORT], "it does not fit the `fact-source` world"),
            (&[SCRIPTS_EXPORT], "it does not fit the `provider` world"),
            (&[], "it does not fit the `provider` world"),
        ] {
            let message = world(exports);
            assert!(message.starts_with(said), "{exports:?}: {message}");
        }
    }

    #[test]
    fn a_providers_requirement_is_checked_when_it_loads() {
        let requirement =
            Requirement::parse("os.family == 'debian'\n\nint(os.release) >= 12".to_owned())
                .expect("valid");
        assert_eq!(requirement.program.groups(), ["os"]);
        let error = Requirement::parse("os.family == 'debian'\nopen('/etc/shadow')".to_owned())
            .expect_err("a call is not allowed")
            .to_string();
        assert!(
            error.starts_with(
                "its suitability requirement is not a valid resource program: line 2, column 1:"
            ),
            "{error}"
        );
        assert!(error.ends_with("its author must fix the plugin"), "{error}");
        assert!(Requirement::parse("  \n".to_owned()).is_err());
        assert_eq!(
            Requirement::parse("x".repeat(MAX_REQUIREMENT_BYTES + 1))
                .expect_err("too long")
                .to_string(),
            "its suitability requirement is longer than 64 KiB; its author must fix the plugin"
        );
    }
}
