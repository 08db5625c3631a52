//! Facts: every fact-source plugin of the policy, gathered once per run, each with its
//! policy's directories read-only and nothing else, and what only the host knows
//! (`identity`, `path`).

use super::*;

impl Runtime {
    /// The facts of every fact-source plugin of the policy, gathered once per run, each
    /// plugin with read-only access to the directories its policy grants and nothing
    /// else: the groups gathered, and every plugin that failed.
    pub fn gather_facts(&self) -> (FactGroups, Vec<PluginError>) {
        self.facts.get_or_init(|| self.gather_facts_now()).clone()
    }

    pub(crate) fn gather_facts_now(&self) -> (FactGroups, Vec<PluginError>) {
        let machine = {
            let uname = rustix::system::uname();
            bindings::fact_source::facts::Machine {
                os: std::env::consts::OS.to_owned(),
                architecture: uname.machine().to_string_lossy().into_owned(),
                kernel: uname.release().to_string_lossy().into_owned(),
                hostname: uname.nodename().to_string_lossy().into_owned(),
            }
        };
        let mut groups = FactGroups::new();
        let mut from: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        let mut errors = Vec::new();
        for policy in self
            .policy
            .plugins
            .iter()
            .filter(|policy| policy.provides.is_empty())
        {
            let plugin = match self.plugin(&policy.name) {
                Ok(plugin) => plugin,
                Err(error) => {
                    errors.push(error);
                    continue;
                }
            };
            let Some(declared) = &plugin.fact_groups else {
                continue;
            };
            match self.gather_one(&plugin, declared, &machine) {
                Ok(gathered) => {
                    for (name, records) in gathered {
                        if let Some(other) = from.insert(name.clone(), policy.name.clone()) {
                            errors.push(PluginError::new(
                                &policy.name,
                                PluginErrorKind::Load,
                                format!(
                                    "it publishes the group `{name}`, which plugin `{other}` \
                                     publishes too; keep one of them in the policy"
                                ),
                            ));
                            continue;
                        }
                        groups.insert(name, records);
                    }
                }
                Err(error) => errors.push(error),
            }
        }
        // What only this process knows: who runs it and its PATH (Facter's
        // `identity` and `path`), unless a plugin publishes them.
        for (name, record) in host_facts() {
            groups
                .entry(name.to_owned())
                .or_insert_with(|| vec![record]);
        }
        (groups, errors)
    }

    pub(crate) fn gather_one(
        &self,
        plugin: &Plugin,
        declared: &[String],
        machine: &bindings::fact_source::facts::Machine,
    ) -> Result<FactGroups, PluginError> {
        let name = &plugin.policy.name;
        let roots = self.roots(plugin);
        let grants = plugin
            .policy
            .directories
            .iter()
            .filter(|directory| directory.path.exists())
            .map(|directory| {
                let path = directory.path.to_string_lossy();
                let granted = self
                    .grants
                    .grant(&plugin.policy, &roots, &path, Access::Read, false);
                let refused = match &granted {
                    Err(GrantError::Denied(message)) => Some(message.as_str()),
                    _ => None,
                };
                let recorded = self.audit_directory(
                    &plugin.policy,
                    &plugin.digest,
                    None,
                    &path,
                    Access::Read,
                    refused,
                );
                let granted = granted.map_err(|error| {
                    PluginError::new(
                        name,
                        PluginErrorKind::Denied,
                        match error {
                            GrantError::Denied(message)
                            | GrantError::Unusable(message)
                            | GrantError::Missing(message) => message,
                        },
                    )
                })?;
                recorded?;
                Ok(granted)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut instance = plugin.instance(&self.engine, &self.shared, Phase::Inspect, &grants)?;
        instance.store.data_mut().subject = None;
        let called = plugin.call(&mut instance, |exports, store| {
            exports.facts()?.call_gather(store, machine)
        });
        let gathered = called.outcome?;
        plugin.put_back(instance);
        let gathered =
            gathered.map_err(|message| provider_error(plugin, convert::truncate(&message)))?;
        let mut groups = FactGroups::new();
        for group in gathered {
            if !declared.contains(&group.name) {
                return Err(contract_error(
                    plugin,
                    format!(
                        "it returned the group `{}`, which it does not publish",
                        group.name
                    ),
                ));
            }
            if group.records.len() > MAX_FACT_RECORDS
                || group.records.iter().flatten().any(|(key, value)| {
                    key.len() > MAX_FACT_STRING || value.len() > MAX_FACT_STRING
                })
            {
                return Err(contract_error(
                    plugin,
                    format!(
                        "the group `{}` is larger than a fact group may be ({MAX_FACT_RECORDS} \
                         records, strings of {MAX_FACT_STRING} bytes)",
                        group.name
                    ),
                ));
            }
            groups.insert(group.name, group.records);
        }
        Ok(groups)
    }
}

/// The `identity` (user, uid, group, gid, privileged) and `path` of this process.
pub(crate) fn host_facts() -> [(&'static str, Vec<(String, String)>); 2] {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    // Regular files only, within a cap: a database of a million accounts is 100 MB.
    const DATABASE_BYTES: u64 = 256 << 20;
    let name_of = |database: &str, id: u32| {
        read_regular(std::path::Path::new(database), DATABASE_BYTES)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .and_then(|text| {
                text.lines().find_map(|line| {
                    let fields: Vec<&str> = line.split(':').collect();
                    (fields.get(2) == Some(&id.to_string().as_str())).then(|| fields[0].to_owned())
                })
            })
            .unwrap_or_else(|| id.to_string())
    };
    let pair = |key: &str, value: String| (key.to_owned(), value);
    [
        (
            "identity",
            vec![
                pair("user", name_of("/etc/passwd", uid)),
                pair("uid", uid.to_string()),
                pair("group", name_of("/etc/group", gid)),
                pair("gid", gid.to_string()),
                pair("privileged", (uid == 0).to_string()),
            ],
        ),
        (
            "path",
            vec![pair("path", std::env::var("PATH").unwrap_or_default())],
        ),
    ]
}
