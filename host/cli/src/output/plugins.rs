//! What the CLI prints about types and plugins: `types` (the list, one type with its
//! providers, a declared type), `plugins list`, `plugins inspect` and `plugins audit`.

use super::*;

/// One provider of a type, for `wconverge types`.
pub(crate) struct TypeProvider<'a> {
    pub(crate) plugin: &'a PluginSummary,
    pub(crate) schema: &'a TypeSchema,
    pub(crate) suitability: Suitability,
}

/// Every type with its documentation; a type with several providers, or whose provider
/// is suitable only on some machines, also lists its providers.
pub(crate) fn types_list(types: &BTreeMap<&str, Vec<TypeProvider>>, declared: &[TypeSchema]) {
    let mut text = String::new();
    let width = types.keys().map(|name| name.len()).max().unwrap_or(0);
    for (name, providers) in types {
        let shown = providers
            .iter()
            .find(|provider| provider.suitability.is_suitable())
            .unwrap_or(&providers[0]);
        text.push_str(&format!("{name:width$}  {}\n", shown.schema.doc));
        if providers.len() > 1 || providers[0].plugin.requires.is_some() {
            let listed: Vec<String> = providers
                .iter()
                .map(|provider| {
                    format!(
                        "{} ({})",
                        provider.plugin.name,
                        if provider.suitability.is_suitable() {
                            "suitable"
                        } else {
                            "not suitable"
                        }
                    )
                })
                .collect();
            text.push_str(&format!(
                "{:width$}  providers: {}\n",
                "",
                listed.join(", ")
            ));
        }
    }
    if !declared.is_empty() {
        text.push_str("\ndeclared in the manifests:\n");
        let width = declared
            .iter()
            .map(|schema| schema.name.len())
            .max()
            .unwrap_or(0);
        for schema in declared {
            let mut traits = Vec::new();
            if let Some(parent) = &schema.parent {
                traits.push(format!("inherits {parent}"));
            }
            if schema.is_abstract {
                traits.push("abstract".to_owned());
            }
            if let Some(origin) = &schema.origin {
                traits.push(origin.clone());
            }
            text.push_str(&format!("{:width$}  {}\n", schema.name, traits.join(", ")));
        }
    }
    out(&text);
}

/// A type a manifest declares: its features (inherited ones included), checks and
/// invariants, as Puppet's types ARM writes them.
pub(crate) fn declared_type_detail(schema: &TypeSchema) {
    let mut text = format!("{}\n", schema.name);
    if let Some(origin) = &schema.origin {
        text.push_str(&format!("  declared at {origin}\n"));
    }
    if let Some(parent) = &schema.parent {
        text.push_str(&format!(
            "  inherits {parent} (its features are listed too)\n"
        ));
    }
    if schema.is_abstract {
        text.push_str("  abstract: it cannot be instantiated\n");
    }
    text.push_str("\nfeatures:\n");
    text.push_str(&attributes_text(schema));
    text.push_str(&invariants_text(schema));
    out(&text);
}

/// A schema's invariants, one per line.
pub(super) fn invariants_text(schema: &TypeSchema) -> String {
    if schema.invariants.is_empty() {
        return String::new();
    }
    let mut text = "\ninvariants:\n".to_owned();
    for invariant in &schema.invariants {
        let code = invariant
            .source
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        match &invariant.title {
            Some(title) => text.push_str(&format!("  \"{title}\" {code}\n")),
            None => text.push_str(&format!("  {code}\n")),
        }
    }
    text
}

/// One type: the schema of `shown` (the provider a resource gets, or the one asked for)
/// and every provider of the type with its suitability, in the order they are tried.
pub(crate) fn type_detail(shown: &TypeProvider, providers: &[TypeProvider]) {
    let schema = shown.schema;
    let mut text = format!("{}\n  {}\n", display_type_name(&schema.name), schema.doc);
    if schema.refreshable {
        text.push_str("  refreshable: reacts to notifications\n");
    }
    text.push_str(match schema.concurrency {
        wconverge_catalog::Concurrency::OneAtATime => {
            "  concurrency: one resource of this type at a time under `apply --jobs`\n"
        }
        wconverge_catalog::Concurrency::PerPath => {
            "  concurrency: at once under `apply --jobs`, never two at one path or beneath it\n"
        }
        wconverge_catalog::Concurrency::Any => {
            "  concurrency: any number at once under `apply --jobs`\n"
        }
    });
    if !schema.watches.is_empty() {
        text.push_str(&format!(
            "  watched besides its paths (`agent --watch`): {}\n",
            schema
                .watches
                .iter()
                .map(|watch| format!("`{watch}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !schema.context.is_empty() {
        let received: Vec<String> = schema
            .context
            .iter()
            .map(|wanted| match wanted {
                wconverge_catalog::RunContext::NodeAttributes => {
                    "the node's attributes (`node`)".to_owned()
                }
                wconverge_catalog::RunContext::Facts => "the facts (`facts`)".to_owned(),
                wconverge_catalog::RunContext::ManagedBeneath => {
                    "the paths other resources manage beneath its path (`managed`)".to_owned()
                }
            })
            .collect();
        text.push_str(&format!(
            "  its provider receives, during the run: {}\n",
            received.join(" and ")
        ));
    }
    let plugin = shown.plugin;
    if plugin.kind == PluginKind::Interpreter {
        text.push_str(&format!(
            "  script type of interpreter plugin `{}`: its guards run with `{}` unless \
             `guard_interpreter` says otherwise, inheriting {}\n",
            plugin.name,
            schema.name,
            if plugin.inherits.is_empty() {
                "nothing".to_owned()
            } else {
                plugin.inherits.join(", ")
            }
        ));
    }
    text.push_str("\nproviders, in the order they are tried (`provider => NAME` picks one):\n");
    let width = providers
        .iter()
        .map(|provider| provider.plugin.name.len())
        .max()
        .unwrap_or(0);
    for provider in providers {
        text.push_str(&format!(
            "  {:width$}  {}\n",
            provider.plugin.name,
            provider.suitability.describe()
        ));
    }
    if !providers
        .iter()
        .any(|provider| provider.suitability.is_suitable())
    {
        text.push_str(
            "  none suits this machine: a resource of this type is refused here unless the \
             policy gains a provider that suits it\n",
        );
    }
    text.push_str(&format!("\nattributes (provider `{}`):\n", plugin.name));
    text.push_str(&attributes_text(schema));
    text.push_str(&invariants_text(schema));
    out(&text);
}

/// A schema's attributes, each with its data type, multiplicity, behaviour and doc.
pub(super) fn attributes_text(schema: &TypeSchema) -> String {
    let mut text = String::new();
    for attribute in &schema.attributes {
        let mut traits = vec![
            format!("{}", attribute.data_type),
            attribute.multiplicity(),
            format!("{:?}", attribute.behaviour).to_lowercase(),
        ];
        if let Some(default) = &attribute.default {
            traits.push(format!("default {}", default.display()));
        }
        if attribute.sensitive {
            traits.push("sensitive".to_owned());
        }
        if attribute.path_access != wconverge_catalog::PathAccess::None {
            traits.push(format!("path ({:?})", attribute.path_access).to_lowercase());
        }
        if attribute.unsettable {
            traits.push("unsettable".to_owned());
        }
        match attribute.containment {
            Some(true) => traits.push("contained".to_owned()),
            Some(false) => traits.push("referenced".to_owned()),
            None => {}
        }
        if attribute.transient {
            traits.push("transient".to_owned());
        }
        if let Some(home) = &attribute.home_default {
            traits.push(format!(
                "default the home of `{}`, then {}",
                home.user_attribute, home.suffix
            ));
        }
        if let Some(referred) = &attribute.refers_to {
            traits.push(format!("requires the `{referred}` it names"));
        }
        text.push_str(&format!("  {}  {}\n", attribute.name, traits.join(", ")));
        if !attribute.doc.is_empty() {
            text.push_str(&format!("      {}\n", attribute.doc));
        }
        // Code on one line each: what the host evaluates.
        let one_line = |code: &str| code.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(code) = &attribute.derived {
            text.push_str(&format!("      derived: {}\n", one_line(code)));
        }
        for code in &attribute.checks {
            text.push_str(&format!("      check: {}\n", one_line(code)));
        }
    }
    text
}

/// `plugins inspect NAME`: what the plugin is (its world), what it imports, and each
/// type it provides with its schema.
pub(crate) fn plugin_inspect(summary: &PluginSummary) {
    let mut text = format!(
        "plugin {}
  source: {}
  sha256: {}
  version: {}
  world: {}
",
        summary.name,
        summary.source,
        summary.sha256,
        if summary.version.is_empty() {
            "-"
        } else {
            &summary.version
        },
        match summary.kind {
            PluginKind::Interpreter =>
                "wconverge:plugin/interpreter (a provider whose script types run guards)",
            PluginKind::Launcher => "wconverge:plugin/launcher",
            PluginKind::Facts => "wconverge:plugin/fact-source",
            PluginKind::Provider => "wconverge:plugin/provider",
            PluginKind::Engine => "none: built into wconverge",
        }
    );
    // The WIT version it was built against: that of the wconverge interfaces it imports.
    let wit = summary
        .imports
        .iter()
        .filter_map(|import| import.strip_prefix("wconverge:plugin/"))
        .filter_map(|import| import.split_once('@').map(|(_, version)| version))
        .next();
    let adapted = if wit == Some(wconverge_runtime::PREVIOUS_WIT_VERSION) {
        ", and loads this version's providers through an adapter"
    } else {
        ""
    };
    text.push_str(&format!(
        "  wit: {} (this wconverge speaks {}{adapted})\n",
        wit.unwrap_or("-"),
        wconverge_runtime::WIT_VERSION
    ));
    let mut imports = summary.imports.clone();
    imports.sort();
    text.push_str("  imports:\n");
    for import in imports {
        text.push_str(&format!("    {import}\n"));
    }
    if let Some(requires) = &summary.requires {
        text.push_str(&format!("  suitable where: {}\n", one_line(requires)));
    }
    if summary.kind == PluginKind::Interpreter {
        text.push_str(&format!(
            "  guards inherit: {}\n",
            if summary.inherits.is_empty() {
                "nothing".to_owned()
            } else {
                summary.inherits.join(", ")
            }
        ));
    }
    for schema in &summary.types {
        text.push_str(&format!(
            "\ntype {}\n  {}\n",
            display_type_name(&schema.name),
            schema.doc
        ));
        if !schema.context.is_empty() {
            let received: Vec<&str> = schema.context.iter().map(|wanted| wanted.entry()).collect();
            text.push_str(&format!(
                "  receives during the run: {}\n",
                received.join(", ")
            ));
        }
        text.push_str(&attributes_text(schema));
    }
    out(&text);
}

/// A resource program on one line: its expressions joined by `and`, as they are.
pub(super) fn one_line(program: &str) -> String {
    program
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" and ")
}

pub(crate) fn plugins_list(summaries: &[Result<PluginSummary, wconverge_engine::PluginError>]) {
    let mut text = String::new();
    for summary in summaries {
        match summary {
            Ok(summary) => {
                let types: Vec<&str> = summary
                    .types
                    .iter()
                    .map(|schema| schema.name.as_str())
                    .collect();
                let version = if summary.version.is_empty() {
                    String::new()
                } else {
                    format!(" {}", summary.version)
                };
                text.push_str(&format!(
                    "{}  {} {}{version}  sha256:{}  types: {}\n",
                    summary.name,
                    summary.kind.as_str(),
                    summary.source,
                    summary.sha256,
                    if types.is_empty() {
                        "none".to_owned()
                    } else {
                        types.join(", ")
                    }
                ));
                if summary.kind == PluginKind::Interpreter {
                    let default = if summary.default_on.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; the `default` guard interpreter on {}",
                            summary.default_on.join(", ")
                        )
                    };
                    text.push_str(&format!(
                        "  guards inherit: {}{default}\n",
                        if summary.inherits.is_empty() {
                            "nothing".to_owned()
                        } else {
                            summary.inherits.join(", ")
                        }
                    ));
                }
                if let Some(requires) = &summary.requires {
                    text.push_str(&format!("  suitable where: {}\n", one_line(requires)));
                }
            }
            Err(error) => text.push_str(&format!("error: {error}\n")),
        }
    }
    out(&text);
}

/// `plugins audit`: for each plugin of the policy, in its order, what it is and what it
/// may do, then the flags on its grants. Nothing in it depends on the machine but the
/// plugins' digests, so two deployments diff line by line.
pub(crate) fn plugins_audit(
    policy: &wconverge_runtime::policy::Policy,
    summaries: &[Result<PluginSummary, wconverge_engine::PluginError>],
) {
    use wconverge_runtime::policy::Principals;
    let mut text = String::new();
    let mut flagged = 0;
    for (plugin, summary) in policy.plugins.iter().zip(summaries) {
        text.push_str(&format!("plugin {}\n", plugin.name));
        let field = |text: &mut String, name: &str, value: String| {
            text.push_str(&format!("  {name}: {value}\n"));
        };
        // A list is one item per line, so that a diff shows what was added or removed.
        let list = |text: &mut String, name: &str, items: Vec<String>| {
            if items.is_empty() {
                text.push_str(&format!("  {name}: none\n"));
            } else {
                text.push_str(&format!("  {name}:\n"));
                for item in items {
                    text.push_str(&format!("    {item}\n"));
                }
            }
        };
        field(&mut text, "source", plugin.source.describe());
        match summary {
            Ok(summary) => {
                field(&mut text, "sha256", summary.sha256.clone());
                field(&mut text, "kind", summary.kind.as_str().to_owned());
                list(
                    &mut text,
                    "provides",
                    summary.types.iter().map(|t| t.name.clone()).collect(),
                );
                let mut imports = summary.imports.clone();
                imports.sort();
                list(&mut text, "imports", imports);
                if let Some(requires) = &summary.requires {
                    field(
                        &mut text,
                        "suitable",
                        format!("where {}", one_line(requires)),
                    );
                }
                for schema in &summary.types {
                    // What it writes, and (in the attribute's words) how what is
                    // written there is checked.
                    for attribute in schema.attributes.iter().filter(|attribute| {
                        attribute.path_access == wconverge_catalog::PathAccess::ReadWrite
                    }) {
                        field(
                            &mut text,
                            "writes",
                            format!(
                                "`{}` of type {}: {}",
                                attribute.name,
                                schema.name,
                                one_line(&attribute.doc)
                            ),
                        );
                    }
                    if !schema.context.is_empty() {
                        field(
                            &mut text,
                            "receives",
                            format!(
                                "{} (type {})",
                                schema
                                    .context
                                    .iter()
                                    .map(|wanted| match wanted {
                                        wconverge_catalog::RunContext::NodeAttributes => {
                                            "node attributes"
                                        }
                                        wconverge_catalog::RunContext::Facts => "facts",
                                        wconverge_catalog::RunContext::ManagedBeneath => {
                                            "the paths other resources manage beneath its own"
                                        }
                                    })
                                    .collect::<Vec<_>>()
                                    .join(", "),
                                schema.name
                            ),
                        );
                    }
                }
            }
            Err(error) => field(&mut text, "error", error.to_string()),
        }
        list(
            &mut text,
            "directories",
            plugin
                .directories
                .iter()
                .map(|grant| format!("{} {}", grant.path.display(), grant.access.as_str()))
                .collect(),
        );
        if !plugin.files.is_empty() {
            list(
                &mut text,
                "writes only the files",
                plugin
                    .files
                    .iter()
                    .map(|file| file.display().to_string())
                    .collect(),
            );
        }
        list(
            &mut text,
            "programs",
            plugin
                .programs
                .iter()
                .flat_map(|grant| {
                    let query = if grant.query { " (query)" } else { "" };
                    match &grant.args {
                        None => vec![format!("{} (any arguments){query}", grant.pattern)],
                        Some(patterns) if patterns.is_empty() => {
                            vec![format!(
                                "{} (never: no argument pattern){query}",
                                grant.pattern
                            )]
                        }
                        Some(patterns) => patterns
                            .iter()
                            .map(|args| format!("{} {args}{query}", grant.pattern))
                            .collect(),
                    }
                })
                .collect(),
        );
        let principals = |principals: &Principals| match principals {
            Principals::Any => vec!["* (anyone)".to_owned()],
            Principals::Only(names) => names.clone(),
        };
        list(&mut text, "users", principals(&plugin.users));
        list(&mut text, "groups", principals(&plugin.groups));
        if let Some(user) = &plugin.run_as {
            list(
                &mut text,
                "run as",
                vec![format!("{user} (every launch that names no user)")],
            );
        }
        list(
            &mut text,
            "environment",
            plugin
                .environment
                .entries()
                .into_iter()
                .map(|entry| {
                    if entry == "*" {
                        "* (any, but PATH, LD_* and DYLD_* only by name)".to_owned()
                    } else {
                        entry
                    }
                })
                .collect(),
        );
        let limits = &plugin.limits;
        field(
            &mut text,
            "limits",
            format!(
                "memory {} MiB, cpu {} s, wall clock {} s per call, output {} KiB, process \
                 timeout {} s",
                limits.memory_bytes / 1024 / 1024,
                limits.cpu_seconds,
                limits.wall_seconds,
                limits.output_bytes / 1024,
                limits.process_timeout_seconds
            ),
        );
        let types = summary
            .as_ref()
            .map_or(&[][..], |summary| summary.types.as_slice());
        for flag in wconverge_runtime::audit::flags(plugin)
            .into_iter()
            .chain(wconverge_runtime::audit::writable_programs(plugin))
            .chain(wconverge_runtime::audit::type_flags(types))
        {
            flagged += 1;
            text.push_str(&format!("  ! {}: {}\n", flag.severity, flag.message));
        }
        text.push('\n');
    }
    if !policy.unclaimed.is_empty() {
        text.push_str("not loaded (in the plugin directory, pinned by no plugin):\n");
        for file in &policy.unclaimed {
            text.push_str(&format!("  {}\n", file.display()));
        }
        text.push('\n');
    }
    text.push_str(&format!(
        "{} plugins, {flagged} flagged grants\n",
        policy.plugins.len()
    ));
    out(&text);
}
