//! What the compiler, `types` and `plugins audit` need of every plugin (its types and
//! schemas, imports, kind): from a plugin this run loaded, else from the cache's summary
//! entry, else by loading the plugin, which writes the entry.

use super::*;

impl Runtime {
    /// Every plugin of the policy, loaded, for `plugins list` and `types`.
    pub fn plugin_summaries(&self) -> Vec<Result<PluginSummary, PluginError>> {
        self.policy
            .plugins
            .iter()
            .map(|policy| self.summary(policy))
            .collect()
    }

    /// What a plugin is and provides: from the plugin if this run loaded it, else from
    /// the cache entry its last load left for this very component, engine and list of
    /// provided types, else by loading it (and leaving such an entry). A plugin is
    /// thus instantiated only when a resource needs it.
    pub(crate) fn summary(
        &self,
        policy: &policy::PluginPolicy,
    ) -> Result<PluginSummary, PluginError> {
        if let Some(loaded) = self.plugins.lock().expect("plugins lock").get(&policy.name) {
            return loaded.clone().map(|plugin| summary_of(policy, &plugin));
        }
        // A pin that does not match, or a component that cannot be read: the load
        // reports it as it always does.
        let component = self.component(policy);
        if let Some((_, digest)) = &component
            && let Some(cached) = self.cached_summary(policy, digest)
        {
            return Ok(cached.into_summary(policy, digest.clone()));
        }
        // Loading it (from the bytes just read) leaves the entry.
        let start = match component {
            Some((wasm, digest)) => Start::Unsummarized(wasm, digest),
            None => Start::Source,
        };
        self.plugin_from(&policy.name, start)
            .map(|plugin| summary_of(policy, &plugin))
    }

    /// The summary the cache holds for `policy`'s plugin, whose component has `digest`.
    fn cached_summary(&self, policy: &policy::PluginPolicy, digest: &str) -> Option<CachedSummary> {
        let bytes = self.cache.summary(digest, &variant(policy))?;
        serde_json::from_slice::<CachedSummary>(&bytes).ok()
    }

    /// Leaves the summary of a plugin just loaded in the cache.
    pub(crate) fn remember_summary(&self, policy: &policy::PluginPolicy, plugin: &Plugin) {
        if let Ok(bytes) = serde_json::to_vec(&CachedSummary::of(plugin)) {
            self.cache
                .store_summary(&plugin.digest, &variant(policy), &bytes);
        }
    }

    /// The bytes of `policy`'s component and their sha256, if it can be read and its
    /// pin (if any) matches. Read once a load: what is compiled is what was hashed.
    pub(crate) fn component(&self, policy: &policy::PluginPolicy) -> Option<(code::Bytes, String)> {
        let (wasm, known) = match &policy.source {
            policy::Source::Builtin => {
                let (_, bytes) = self
                    .builtins
                    .iter()
                    .find(|(name, _)| *name == policy.name)?;
                let digest = self
                    .builtin_digests
                    .iter()
                    .find(|(name, _)| *name == policy.name)
                    .map(|(_, digest)| (*digest).to_owned());
                (code::Bytes::Builtin(bytes), digest)
            }
            policy::Source::File(path) | policy::Source::PluginDir(Some(path)) => {
                (code::Bytes::Read(plugin::read_component(path).ok()?), None)
            }
            policy::Source::PluginDir(None) => return None,
        };
        let digest = known.unwrap_or_else(|| crate::digest::sha256_hex(wasm.as_slice()));
        policy
            .sha256
            .as_ref()
            .is_none_or(|pinned| *pinned == digest)
            .then_some((wasm, digest))
    }

    /// A provider described from its cached summary, its code (`wasm`, whose sha256 is
    /// `digest`) loading on a thread of its own. When the cache has no summary for the
    /// component as it is now, it is loaded whole (and any problem is reported as the
    /// load finds it): from the component given back, or read again if the summary was
    /// one a provider's cannot be.
    pub(crate) fn described(
        &self,
        policy: &Arc<policy::PluginPolicy>,
        wasm: code::Bytes,
        digest: String,
    ) -> Result<Arc<Plugin>, Option<(code::Bytes, String)>> {
        let Some(cached) = self.cached_summary(policy, &digest) else {
            return Err(Some((wasm, digest)));
        };
        // Imports this host no longer allows (the entry may be older than its rules):
        // the load refuses it, before anything runs.
        if imports::check_imports(&cached.imports).is_err() {
            return Err(Some((wasm, digest)));
        }
        let deferred = code::Deferred {
            engine: self.engine.clone(),
            linker: Arc::clone(&self.linker),
            cache: Arc::clone(&self.cache),
            wasm,
        };
        // Its code is loaded by the first instance, or ahead of it when the run is known
        // to need one (`load_ahead`): a run that replays every check needs none.
        Ok(Arc::new(
            Plugin::described(Arc::clone(policy), digest, cached, deferred).map_err(|_| None)?,
        ))
    }

    /// Starts loading the code of plugin `name` on a thread of its own, once: the run
    /// will call it, and the call then need not wait for its code.
    pub(crate) fn load_ahead(&self, name: &str) {
        let plugin = match self.plugins.lock().expect("plugins lock").get(name) {
            Some(Ok(plugin)) => Arc::clone(plugin),
            _ => return,
        };
        let mut loading = self.loading.lock().expect("loading threads lock");
        if loading.iter().any(|(started, _)| started == name) {
            return;
        }
        // Without a thread, the first instance loads it.
        if let Ok(thread) = std::thread::Builder::new()
            .name(format!("load {name}"))
            .spawn(move || plugin.load_code())
        {
            loading.push((name.to_owned(), thread));
        }
    }
}

/// What of the policy shapes a summary: the types it says the plugin provides.
fn variant(policy: &policy::PluginPolicy) -> String {
    let mut provides = policy.provides.clone();
    provides.sort();
    crate::digest::sha256_hex(provides.join("\n").as_bytes())[..16].to_owned()
}

/// A loaded plugin's summary under its policy.
pub(crate) fn summary_of(policy: &policy::PluginPolicy, plugin: &Plugin) -> PluginSummary {
    CachedSummary::of(plugin).into_summary(policy, plugin.digest.clone())
}

/// A summary as the cache keeps it: what depends only on the component and the types
/// the policy says it provides (which are part of the entry's key).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct CachedSummary {
    pub(crate) version: String,
    pub(crate) imports: Vec<String>,
    pub(crate) types: Vec<TypeSchema>,
    /// The types in the order it describes them (its first interpreter type is its
    /// default guard interpreter's).
    pub(crate) type_order: Vec<String>,
    pub(crate) kind: PluginKind,
    pub(crate) inherits: Vec<String>,
    pub(crate) default_on: Vec<String>,
    pub(crate) requires: Option<String>,
}

impl CachedSummary {
    fn of(plugin: &Plugin) -> CachedSummary {
        let mut types: Vec<TypeSchema> = plugin.schemas.values().cloned().collect();
        types.sort_by(|a, b| a.name.cmp(&b.name));
        let interpreter = plugin.interpreter.as_ref();
        CachedSummary {
            version: plugin.version.clone(),
            imports: plugin.imports.clone(),
            types,
            type_order: plugin.type_order.clone(),
            kind: plugin.kind(),
            inherits: interpreter
                .map(|info| info.inherits.clone())
                .unwrap_or_default(),
            default_on: interpreter
                .map(|info| info.default_on.clone())
                .unwrap_or_default(),
            requires: plugin
                .requirement
                .as_ref()
                .map(|requirement| requirement.text.clone()),
        }
    }

    fn into_summary(self, policy: &policy::PluginPolicy, sha256: String) -> PluginSummary {
        PluginSummary {
            name: policy.name.clone(),
            source: policy.source.describe(),
            sha256,
            version: self.version,
            imports: self.imports,
            types: self.types,
            kind: self.kind,
            inherits: self.inherits,
            default_on: self.default_on,
            requires: self.requires,
        }
    }
}
