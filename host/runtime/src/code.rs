//! A plugin's code: its component compiled (or taken from the cache), its imports and
//! exports checked, pre-instantiated. A plugin loaded whole gets it at once; one
//! described from its cached summary gets it through [`Deferred`], on a thread of its
//! own while the run is prepared, or at its first instance.

use crate::bindings::{WIT_PACKAGE, WIT_VERSION};
use crate::cache::Cache;
use crate::imports::{check_imports, check_previous_exports};
use crate::plugin::{World, load_error};
use crate::policy::PluginPolicy;
use crate::state::PluginState;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::Engine;
use wasmtime::component::{InstancePre, Linker};
use wconverge_engine::PluginError;

/// A component's code, ready to instantiate, and the world it was built for.
pub(crate) struct Code {
    pub(crate) pre: InstancePre<PluginState>,
    pub(crate) world: World,
}

/// The bytes of a component: the binary's own, or those read from its file (whose
/// digest matched; they are what is compiled, never the file read again).
pub(crate) enum Bytes {
    Builtin(&'static [u8]),
    Read(Vec<u8>),
}

impl Bytes {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Builtin(bytes) => bytes,
            Bytes::Read(bytes) => bytes,
        }
    }
}

/// What loads the code of a plugin described from its summary.
pub(crate) struct Deferred {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<PluginState>>,
    pub(crate) cache: Arc<Cache>,
    pub(crate) wasm: Bytes,
}

impl Deferred {
    /// Compiles (or takes from the cache) and checks the code as a whole load does; it
    /// must be of the kind its summary said.
    pub(crate) fn load(
        self,
        policy: &PluginPolicy,
        digest: &str,
        kind: crate::PluginKind,
    ) -> Result<Code, PluginError> {
        let started = Instant::now();
        let (code, _) = compile(
            &self.engine,
            &self.linker,
            &self.cache,
            policy,
            self.wasm.as_slice(),
            digest,
        )?;
        if code.world.kind() != kind {
            return Err(load_error(
                policy,
                format!(
                    "its cached summary says it is a {} plugin, but its component is a {} \
                     plugin; remove the plugin cache directory's entries for sha256 {digest}",
                    format!("{kind:?}").to_lowercase(),
                    format!("{:?}", code.world.kind()).to_lowercase()
                ),
            ));
        }
        tracing::debug!(plugin = %policy.name, elapsed = ?started.elapsed(), "loaded its code");
        Ok(code)
    }
}

/// The component compiled (through the cache), its imports and exports checked, and
/// pre-instantiated: its code, and the names it imports.
pub(crate) fn compile(
    engine: &Engine,
    linker: &Linker<PluginState>,
    cache: &Cache,
    policy: &PluginPolicy,
    wasm: &[u8],
    digest: &str,
) -> Result<(Code, Vec<String>), PluginError> {
    let component = cache
        .component(engine, wasm, digest)
        .map_err(|error| load_error(policy, format!("not a valid component: {error:#}")))?;
    let imports: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    check_imports(&imports).map_err(|refused| load_error(policy, refused.to_string()))?;
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let exported = |name: &str| exports.iter().any(|export| export == name);
    check_previous_exports(&exports).map_err(|refused| load_error(policy, refused.to_string()))?;
    let pre = linker.instantiate_pre(&component).map_err(|error| {
        load_error(
            policy,
            format!(
                "its imports do not fit what the host provides ({error:#}); if it was \
                 built against another copy of {WIT_PACKAGE}@{WIT_VERSION}, rebuild it \
                 against this wconverge's wit/"
            ),
        )
    })?;
    let world =
        World::of(&pre, &exported).map_err(|refused| load_error(policy, refused.to_string()))?;
    Ok((Code { pre, world }, imports))
}
