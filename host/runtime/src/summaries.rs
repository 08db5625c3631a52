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
        let digest = match &policy.source {
            policy::Source::Builtin => self
                .builtin_digests
                .iter()
                .find(|(name, _)| *name == policy.name)
                .map(|(_, digest)| (*digest).to_owned()),
            policy::Source::File(path) | policy::Source::PluginDir(Some(path)) => {
                plugin::read_component(path)
                    .ok()
                    .map(|bytes| cache::sha256_hex(&bytes))
            }
            policy::Source::PluginDir(None) => None,
        };
        // A pin that does not match, or a component that cannot be read: the load
        // reports it as it always does.
        let Some(digest) =
            digest.filter(|digest| policy.sha256.as_ref().is_none_or(|pinned| pinned == digest))
        else {
            return self
                .plugin(&policy.name)
                .map(|plugin| summary_of(policy, &plugin));
        };
        let variant = {
            let mut provides = policy.provides.clone();
            provides.sort();
            cache::sha256_hex(provides.join("\n").as_bytes())[..16].to_owned()
        };
        if let Some(bytes) = self.cache.summary(&digest, &variant)
            && let Ok(cached) = serde_json::from_slice::<CachedSummary>(&bytes)
        {
            return Ok(cached.into_summary(policy, digest));
        }
        let plugin = self.plugin(&policy.name)?;
        let summary = summary_of(policy, &plugin);
        if let Ok(bytes) = serde_json::to_vec(&CachedSummary::of(&summary)) {
            self.cache.store_summary(&digest, &variant, &bytes);
        }
        Ok(summary)
    }
}

/// A loaded plugin's summary under its policy.
pub(crate) fn summary_of(policy: &policy::PluginPolicy, plugin: &Plugin) -> PluginSummary {
    let mut types: Vec<TypeSchema> = plugin.schemas.values().cloned().collect();
    types.sort_by(|a, b| a.name.cmp(&b.name));
    PluginSummary {
        name: policy.name.clone(),
        source: policy.source.describe(),
        sha256: plugin.digest.clone(),
        version: plugin.version.clone(),
        imports: plugin.imports.clone(),
        types,
        kind: plugin.kind(),
        inherits: plugin
            .interpreter
            .as_ref()
            .map(|info| info.inherits.clone())
            .unwrap_or_default(),
        default_on: plugin
            .interpreter
            .as_ref()
            .map(|info| info.default_on.clone())
            .unwrap_or_default(),
        requires: plugin
            .requirement
            .as_ref()
            .map(|requirement| requirement.text.clone()),
    }
}

/// A summary as the cache keeps it: what depends only on the component and the types
/// the policy says it provides (which are part of the entry's key).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct CachedSummary {
    version: String,
    imports: Vec<String>,
    types: Vec<TypeSchema>,
    kind: PluginKind,
    inherits: Vec<String>,
    default_on: Vec<String>,
    requires: Option<String>,
}

impl CachedSummary {
    fn of(summary: &PluginSummary) -> CachedSummary {
        CachedSummary {
            version: summary.version.clone(),
            imports: summary.imports.clone(),
            types: summary.types.clone(),
            kind: summary.kind,
            inherits: summary.inherits.clone(),
            default_on: summary.default_on.clone(),
            requires: summary.requires.clone(),
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
