//! The engine's side of the runtime: `PluginHost` for `Runtime` (providers chosen,
//! resources validated, checked, planned, applied and refreshed, guards run, facts and
//! paths served).

use super::*;
use wconverge_engine::Failure;

impl PluginHost for Runtime {
    fn interpreter(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<InterpreterInfo>, PluginError> {
        Ok(self.choose(type_name, requested)?.and_then(|plugin| {
            plugin.interpreter.as_ref().map(|info| InterpreterInfo {
                script_type: type_name.to_owned(),
                plugin: plugin.policy.name.clone(),
                inherits: info.inherits.clone(),
            })
        }))
    }

    fn default_interpreter(&self) -> Result<Option<InterpreterInfo>, PluginError> {
        for policy in self
            .policy
            .plugins
            .iter()
            .filter(|policy| !policy.provides.is_empty())
        {
            // A plugin that does not load is reported where its types are used.
            let Ok(plugin) = self.plugin(&policy.name) else {
                continue;
            };
            if let Some(info) = &plugin.interpreter
                && self.suitability(&plugin).is_suitable()
                && info
                    .default_on
                    .iter()
                    .any(|family| family == std::env::consts::FAMILY)
                && let Some(first) = plugin.type_order.first()
            {
                return Ok(Some(InterpreterInfo {
                    script_type: first.clone(),
                    plugin: policy.name.clone(),
                    inherits: info.inherits.clone(),
                }));
            }
        }
        Ok(None)
    }

    /// A requirement is evaluated only on complete facts: a plugin that failed could
    /// have published the group it reads.
    fn interrupted(&self) -> Option<String> {
        interrupted().or_else(crate::stopping)
    }

    fn expect_calls(&self, plugin: &str) {
        self.load_ahead(plugin);
    }

    fn changes_machine(&self, plugin: &str) -> bool {
        self.policy.plugin(plugin).is_none_or(|policy| {
            !policy.programs.is_empty()
                || policy
                    .directories
                    .iter()
                    .any(|grant| grant.access == crate::policy::Access::ReadWrite)
        })
    }

    fn launches_programs(&self, plugin: &str) -> bool {
        self.policy
            .plugin(plugin)
            .is_none_or(|policy| !policy.programs.is_empty())
    }

    /// The directory walked as a grant is (links followed only when root or this user
    /// owns them), then the file's name.
    fn resolve_path(&self, path: &str) -> Option<String> {
        let (dir, name) = path.rsplit_once('/')?;
        if !walk::plain_name(name) {
            return None;
        }
        let dir = if dir.is_empty() { "/" } else { dir };
        // Once per directory and run: a path only names a resource here (two names of
        // one file are one resource), nothing is opened by it.
        let mut resolved = self.resolved.lock().expect("resolved paths lock");
        // Looked up by borrowing: a key is made only for a directory not seen before.
        if let Some(canonical) = resolved.get(dir) {
            return canonical
                .as_deref()
                .map(|canonical| joined(canonical, name));
        }
        if resolved.len() >= MAX_RESOLVED_DIRS {
            resolved.clear();
        }
        let canonical = walk::walk(std::path::Path::new(dir), walk::Ancestors::Any)
            .ok()
            .map(|walked| walked.canonical.to_string_lossy().into_owned());
        let path = canonical
            .as_deref()
            .map(|canonical| joined(canonical, name));
        resolved.insert(dir.to_owned(), canonical);
        path
    }

    fn home_of(&self, user: &str) -> Option<String> {
        process::lookup_user(user)
            .ok()
            .map(|entry| entry.dir.to_string_lossy().into_owned())
            .filter(|dir| dir.starts_with('/') && dir != "/")
    }

    fn facts(&self) -> Result<wconverge_requires::Facts, wconverge_engine::FactsError> {
        let (groups, errors) = self.gather_facts();
        if errors.is_empty() {
            Ok(wconverge_requires::Facts { groups })
        } else {
            Err(wconverge_engine::FactsError(errors))
        }
    }

    fn run_guard(&self, script: &GuardScript) -> Call<ScriptOutput> {
        let mut logs = Vec::new();
        let outcome = (|| {
            // The plugin chosen before the run, so the guard runs with what was checked.
            let plugin = self.plugin(&script.plugin)?;
            if plugin.interpreter.is_none() || !plugin.schemas.contains_key(&script.interpreter) {
                return Err(PluginError::new(
                    &script.plugin,
                    PluginErrorKind::Load,
                    format!(
                        "it is no interpreter of script type `{}`",
                        script.interpreter
                    ),
                ));
            }
            let mut instance = plugin.instance(&self.engine, &self.shared, Phase::Guard, &[])?;
            instance.store.data_mut().subject =
                Some((script.subject.clone(), script.secrets.clone()));
            // The host kills a program at the smaller of its timeout and the policy's limit.
            let timeout = script.timeout.min(std::time::Duration::from_secs(
                plugin.policy.limits.process_timeout_seconds,
            ));
            let wit = convert::script_to_wit(script, timeout);
            let called = plugin.call(&mut instance, |exports, store| {
                exports.scripts()?.call_run(store, &wit)
            });
            logs.extend(called.logs);
            let result = called.outcome?;
            plugin.put_back(instance);
            result
                .map(|output| convert::output_from_wit(output, timeout))
                .map_err(|error| provider_error(&plugin, process::message(&error).to_owned()))
        })();
        Call::new(outcome, logs)
    }

    fn provider(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<ProviderChoice>, PluginError> {
        Ok(self.choose(type_name, requested)?.and_then(|plugin| {
            plugin.schemas.get(type_name).map(|schema| ProviderChoice {
                plugin: plugin.policy.name.clone(),
                schema: schema.clone(),
            })
        }))
    }

    fn validate(&self, resources: &[&PreparedResource]) -> Call<Vec<Vec<String>>> {
        let Some(first) = resources.first() else {
            return Call::new(Ok(Vec::new()), Vec::new());
        };
        let mut logs = Vec::new();
        let outcome = (|| {
            let plugin = self.plugin(&first.provider)?;
            let mut found = Vec::with_capacity(resources.len());
            for batch in by_weight(resources, plugin.policy.limits.memory_bytes) {
                for resource in batch {
                    if resource.provider != first.provider {
                        return Err(PluginError::new(
                            &first.provider,
                            PluginErrorKind::Load,
                            format!(
                                "{} is not a resource of provider `{}`",
                                resource.reference, first.provider
                            ),
                        ));
                    }
                    schema_of(&plugin, resource)?;
                }
                // A call with the same input (and component, engine, policy) found
                // nothing wrong in an earlier run: its answer would be the same.
                let fingerprint = convert::fingerprint(plugin.policy_text(), batch);
                if self.cache.validated(&plugin.digest, &fingerprint) {
                    tracing::debug!(
                        plugin = %plugin.policy.name,
                        resources = batch.len(),
                        "validated before"
                    );
                    found.extend(batch.iter().map(|_| Vec::new()));
                    continue;
                }
                tracing::debug!(
                    plugin = %plugin.policy.name,
                    resources = batch.len(),
                    "validate"
                );
                let logged = logs.len();
                let (lists, _) = self.call_many(
                    &plugin,
                    (Phase::Describe, &[], false),
                    batch,
                    "",
                    ("validate", |exports, store, wits| {
                        exports.provider()?.call_validate(store, wits)
                    }),
                    &mut logs,
                )?;
                if logs.len() == logged && lists.iter().all(Vec::is_empty) {
                    self.cache.remember_validated(&plugin.digest, &fingerprint);
                }
                found.extend(lists.iter().zip(batch).map(|(problems, resource)| {
                    problems
                        .iter()
                        .take(100)
                        .map(|problem| said(resource, problem))
                        .collect()
                }));
            }
            Ok(found)
        })();
        Call::new(outcome, logs)
    }

    fn plan(&self, resource: &PreparedResource, current: Option<State>) -> Call<Checked> {
        self.session(
            resource,
            Phase::Inspect,
            |plugin, schema, instance, absent, logs| {
                tracing::debug!(
                    plugin = %plugin.policy.name,
                    resource = %resource.reference,
                    read = current.is_none(),
                    "plan"
                );
                let wit = convert::resource_to_wit(resource);
                let state = match current {
                    // Read in a batch, and checked then.
                    Some(state) => convert::attributes_to_wit(&state),
                    // Its directory does not exist yet: nothing is there.
                    None if absent => convert::attributes_to_wit(&absent_state(plugin, schema)?),
                    None => {
                        let called = plugin.call(instance, |exports, store| {
                            exports.provider()?.call_current_state(store, &wit)
                        });
                        logs.extend(called.logs);
                        let state = called
                            .outcome?
                            .map_err(|message| provider_error(plugin, said(resource, &message)))?;
                        convert::check_state(&state, schema)
                            .map_err(|message| contract_error(plugin, message))?;
                        state
                    }
                };
                let called = plugin.call(instance, |exports, store| {
                    exports.provider()?.call_plan(store, &wit, &state)
                });
                logs.extend(called.logs);
                let changes = called
                    .outcome?
                    .map_err(|message| provider_error(plugin, said(resource, &message)))?;
                let changes =
                    convert::changes_from_wit(&changes, schema, &|text| said(resource, text))
                        .map_err(|message| contract_error(plugin, message))?;
                let state = convert::state_from_wit(state, schema)
                    .map_err(|message| contract_error(plugin, message))?;
                Ok(Checked { state, changes })
            },
        )
    }

    fn check(&self, resources: &[&PreparedResource]) -> Call<Vec<Result<Checked, Failure>>> {
        let Some(first) = resources.first() else {
            return Call::new(Ok(Vec::new()), Vec::new());
        };
        let mut logs = Vec::new();
        let outcome = (|| {
            let plugin = self.plugin(&first.provider)?;
            let schema = schema_of(&plugin, first)?;
            if !schema.batch_state {
                return Err(contract_error(
                    &plugin,
                    format!("type `{}` does not read its states in batches", schema.name),
                ));
            }
            let mut results: Vec<Option<Result<Checked, Failure>>> = vec![None; resources.len()];
            // Each resource's directories, checked (and recorded) for it as for a call of
            // its own; resources are read together only when they need exactly the same
            // ones, so no call sees more than each of its resources needs.
            let mut groups: Vec<(Vec<Arc<Grant>>, Vec<usize>)> = Vec::new();
            let mut last = None;
            for (position, resource) in resources.iter().enumerate() {
                if resource.provider != first.provider || resource.type_name != first.type_name {
                    results[position] = Some(Err(Failure::State(format!(
                        "{} is not of type `{}` with provider `{}`",
                        resource.reference, first.type_name, first.provider
                    ))));
                    continue;
                }
                match self.grants_for_after(&plugin, (resource, schema, Phase::Inspect), &mut last)
                {
                    Ok(granted) if granted.absent => {
                        // Its directory does not exist yet: planned on its own, from
                        // nothing there.
                        let planned = self.plan(resource, None);
                        logs.extend(planned.logs);
                        results[position] = Some(planned.outcome.map_err(Failure::Plugin));
                    }
                    Ok(granted) => {
                        let grants = granted.grants;
                        let same = |other: &Vec<Arc<Grant>>| {
                            other.len() == grants.len()
                                && other.iter().zip(&grants).all(|(a, b)| Arc::ptr_eq(a, b))
                        };
                        match groups.iter_mut().find(|(other, _)| same(other)) {
                            Some((_, members)) => members.push(position),
                            None => groups.push((grants, vec![position])),
                        }
                    }
                    Err(error) => results[position] = Some(Err(Failure::Plugin(error))),
                }
            }
            for (grants, members) in groups {
                let group: Vec<&PreparedResource> = members
                    .iter()
                    .map(|&position| resources[position])
                    .collect();
                let mut members = members.into_iter();
                for batch in by_weight(&group, plugin.policy.limits.memory_bytes) {
                    let checked = self.check_batch(&plugin, schema, &grants, batch, &mut logs)?;
                    // `checked` first: `zip` asks its first iterator first, and the
                    // members of the next batch must not be consumed.
                    for (checked, position) in checked.into_iter().zip(members.by_ref()) {
                        results[position] = Some(checked.map_err(Failure::State));
                    }
                }
            }
            Ok(results
                .into_iter()
                .map(|result| {
                    result
                        .unwrap_or_else(|| Err(Failure::State("its state was not read".to_owned())))
                })
                .collect())
        })();
        Call::new(outcome, logs)
    }

    fn apply(&self, resource: &PreparedResource, changes: &[Change]) -> Call<()> {
        self.session(resource, Phase::Change, |plugin, _, instance, _, logs| {
            let wit = convert::resource_to_wit(resource);
            let changes: Vec<_> = changes.iter().map(convert::change_to_wit).collect();
            let called = plugin.call(instance, |exports, store| {
                exports.provider()?.call_apply(store, &wit, &changes)
            });
            logs.extend(called.logs);
            called
                .outcome?
                .map_err(|message| provider_error(plugin, said(resource, &message)))
        })
    }

    fn refresh(&self, resource: &PreparedResource) -> Call<()> {
        self.session(resource, Phase::Change, |plugin, _, instance, _, logs| {
            let wit = convert::resource_to_wit(resource);
            let called = plugin.call(instance, |exports, store| {
                exports.provider()?.call_refresh(store, &wit)
            });
            logs.extend(called.logs);
            called
                .outcome?
                .map_err(|message| provider_error(plugin, said(resource, &message)))
        })
    }
}

/// The state of a resource whose directory does not exist yet: `ensure` absent, for a
/// type that has `ensure`.
fn absent_state(plugin: &Plugin, schema: &TypeSchema) -> Result<State, PluginError> {
    if schema.attribute("ensure").is_none() {
        return Err(PluginError::new(
            &plugin.policy.name,
            PluginErrorKind::Provider,
            format!(
                "a directory a `{}` resource writes in does not exist; create it first (for \
                 example with a resource ordered before this one)",
                schema.name
            ),
        ));
    }
    Ok(vec![(
        "ensure".to_owned(),
        wconverge_catalog::Value::String("absent".to_owned()),
    )])
}

/// `name` in the directory `dir` (an absolute path, `/` included).
fn joined(dir: &str, name: &str) -> String {
    let mut path = String::with_capacity(dir.len() + 1 + name.len());
    path.push_str(dir);
    if !dir.ends_with('/') {
        path.push('/');
    }
    path.push_str(name);
    path
}
