//! The catalog a command works on: manifests compiled (with the facts and modules they
//! read, and the store's exports), or a catalog read from JSON; then prepared, every
//! problem printed.

use crate::{dirs, fleet, generate, input, modules, output};
use anyhow::bail;
use std::path::{Path, PathBuf};
use wconverge_catalog::{Catalog, DiagnosticCode};
use wconverge_engine::Prepared;
use wconverge_runtime::Runtime;

/// What to converge: manifests, or a catalog compiled earlier.
#[derive(clap::Args)]
pub(crate) struct InputArgs {
    /// Manifests (`.wcv` or Puppet's `.pp`, evaluated together in the order given), or
    /// one catalog in JSON (docs/catalog-format.md).
    #[arg(required_unless_present = "execute", value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    /// Manifest code given on the command line rather than in a file, as with
    /// `puppet apply -e`: `wconverge apply -e "package { 'htop': }"`.
    #[arg(short = 'e', long, value_name = "CODE", conflicts_with = "files")]
    pub(crate) execute: Option<String>,
    /// The node's name, matched against `node` definitions (default: this host's name).
    #[arg(long, value_name = "NAME")]
    pub(crate) node: Option<String>,
    /// Treat the manifests' warnings (a node attribute read before a later write
    /// changes it, say) as errors: nothing is compiled or applied while one remains.
    #[arg(long)]
    pub(crate) deny_warnings: bool,
    /// The modules: directories separated by `:`, searched in order, for classes and
    /// defined types (NAME/manifests/...) and `puppet:///modules/NAME/PATH` sources
    /// (NAME/files/PATH, resolved when applying). Default: the environment.conf's
    /// `modulepath`, else `modules/` next to the main manifest (and at the
    /// environment's root when that is `manifests/`).
    #[arg(long, value_name = "DIRS")]
    pub(crate) modulepath: Option<String>,
}

/// How diagnostics name the code given with `-e`.
const COMMAND_LINE: &str = "<command line>";

/// A manifest: `.wcv`, or Puppet's `.pp`.
fn is_manifest(path: &Path) -> bool {
    path.extension()
        .is_some_and(|extension| extension == "wcv" || extension == "pp")
}

/// The module path of the input: `--modulepath`, or the main manifest's environment's.
pub(crate) fn module_path(input: &InputArgs) -> Vec<PathBuf> {
    modules::module_path(
        input.modulepath.as_deref(),
        input
            .files
            .first()
            .filter(|path| is_manifest(path))
            .map(PathBuf::as_path),
    )
}

/// What a compile does with the store besides collecting other nodes' exports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    /// Nothing: an inspection (`validate`, `graph`).
    No,
    /// Store this node's exports, and its facts if the compile gathered them.
    Yes,
    /// As `Yes`, compiling with the node's stored facts rather than this machine's.
    FactsFromStore,
}

/// A catalog, with the manifests it was compiled from (none for a JSON catalog): where a
/// problem of the catalog lies in them is shown with its line.
pub(crate) struct Loaded {
    pub(crate) catalog: Catalog,
    pub(crate) sources: Vec<wconverge_lang::Source>,
    /// How long gathering the facts took, in milliseconds (none gathered: 0).
    pub(crate) facts_ms: f64,
}

/// A catalog in JSON being read and parsed on a thread of its own, started before the
/// runtime is made: neither needs the other, and the two cores do both at once.
pub(crate) struct EarlyCatalog(std::thread::JoinHandle<anyhow::Result<Catalog>>);

impl EarlyCatalog {
    /// Starts reading the catalog `input` names, if it names one catalog (and nothing
    /// that makes it an error: that is said when the catalog is loaded).
    pub(crate) fn start(input: &InputArgs) -> Option<EarlyCatalog> {
        let [path] = input.files.as_slice() else {
            return None;
        };
        if is_manifest(path) || input.node.is_some() {
            return None;
        }
        let path = path.clone();
        // As deep a stack as the main thread's, for a deeply nested value.
        std::thread::Builder::new()
            .name("wconverge-read".to_owned())
            .stack_size(8 << 20)
            .spawn(move || read_catalog(&path))
            .ok()
            .map(EarlyCatalog)
    }

    fn catalog(self) -> anyhow::Result<Catalog> {
        self.0
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// The catalog to work on: compiled from the manifests, or read from a JSON file (by
/// `early`, when it was started). `None` when the manifests have errors (already
/// printed).
pub(crate) fn load(
    input: &InputArgs,
    runtime: &Runtime,
    modulepath: &[PathBuf],
    fleet: &fleet::Fleet,
    (publish, early): (Publish, Option<EarlyCatalog>),
) -> anyhow::Result<Option<Loaded>> {
    let n_manifests = input.files.iter().filter(|path| is_manifest(path)).count();
    if n_manifests == 0 && input.execute.is_none() {
        let [path] = input.files.as_slice() else {
            bail!(
                "give one catalog (JSON) or any number of manifests (`.wcv`, `.pp`), not {} catalogs",
                input.files.len()
            );
        };
        if input.node.is_some() {
            bail!("`--node` applies to manifests; a compiled catalog is already for one node");
        }
        let catalog = match early {
            Some(early) => early.catalog(),
            None => read_catalog(path),
        };
        return catalog.map(|catalog| {
            Some(Loaded {
                catalog,
                sources: Vec::new(),
                facts_ms: 0.0,
            })
        });
    }
    if n_manifests != input.files.len() {
        bail!("give either manifests (`.wcv`, `.pp`) or one catalog (JSON), not both");
    }
    let mut sources = Vec::with_capacity(input.files.len() + 1);
    if let Some(code) = &input.execute {
        if code.len() > input::MANIFEST_BYTES as usize {
            bail!(
                "the code given with `-e` is longer than {} bytes, the limit for a manifest; \
                 put it in a file",
                input::MANIFEST_BYTES
            );
        }
        sources.push(wconverge_lang::Source::new(COMMAND_LINE, code.clone()));
    }
    for path in &input.files {
        let text = input::read_text(path, "manifest", input::MANIFEST_BYTES)
            .map_err(anyhow::Error::msg)?;
        sources.push(wconverge_lang::Source::new(
            path.display().to_string(),
            text,
        ));
    }
    let mut schemas = vec![wconverge_engine::node_block_schema()];
    for summary in runtime.plugin_summaries() {
        match summary {
            Ok(summary) => schemas.extend(summary.types),
            Err(error) => bail!("{error}"),
        }
    }
    let types = wconverge_lang::KnownTypes::from_schemas(&schemas);
    let node = match &input.node {
        Some(node) => node.clone(),
        None => dirs::host_name(),
    };
    // `$facts`: this machine's, as the fact plugins of the policy gather them; only for
    // manifests that can read them, and a plugin that fails leaves out its groups.
    let loader = modules::ModuleLoader::new(
        modulepath,
        input
            .files
            .first()
            .map(|main| modules::environment_root(main)),
    );
    // Puppet code (a `.pp` manifest, a module) may read facts anywhere, under their
    // own names too (`$::osfamily`); a `.wcv` manifest reads them only where it says so.
    let reads_facts = !wconverge_lang::Loader::is_empty(&loader)
        || wconverge_lang::Loader::hiera_config(&loader, None).is_some()
        || input
            .files
            .iter()
            .any(|path| path.extension().is_some_and(|e| e == "pp"))
        || sources.iter().any(|source| names_facts(&source.text));
    let facts_started = std::time::Instant::now();
    let facts = if publish == Publish::FactsFromStore {
        let (groups, _) = fleet.stored_facts(&node)?;
        wconverge_engine::facts_value(&groups)
    } else if reads_facts {
        let (groups, errors) = runtime.gather_facts();
        for error in &errors {
            output::warning(&format!(
                "`$facts` lacks the groups of a fact plugin that failed: {error}"
            ));
        }
        if publish == Publish::Yes {
            fleet.store_facts(&node, &groups);
        }
        wconverge_engine::facts_value(&groups)
    } else {
        wconverge_catalog::Value::Hash(Vec::new())
    };
    let facts_ms = facts_started.elapsed().as_secs_f64() * 1000.0;
    let compiled = wconverge_lang::compile(
        &sources,
        &wconverge_lang::CompileOptions::new(&node, &types)
            .facts(&facts)
            .modules(&loader)
            .exports(fleet),
    );
    let mut shown = sources;
    shown.extend(compiled.loaded.iter().cloned());
    output::diagnostics(&compiled.diagnostics, &shown);
    let warnings = compiled
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == wconverge_lang::Severity::Warning)
        .count();
    if input.deny_warnings && warnings > 0 && compiled.catalog.is_some() {
        output::error(&format!(
            "{warnings} warning{} and `--deny-warnings`: nothing was compiled or changed",
            if warnings == 1 { "" } else { "s" }
        ));
        return Ok(None);
    }
    if publish != Publish::No && compiled.catalog.is_some() {
        fleet.publish(&node, &compiled.exports);
    }
    Ok(compiled.catalog.map(|catalog| Loaded {
        catalog,
        sources: shown,
        facts_ms,
    }))
}

/// The catalog to apply or validate: loaded, then its `puppet:///modules/...` sources
/// found in the module path, with the problems of those it could not find (reported
/// with the catalog's other problems), and the resources it implies added.
pub(crate) fn load_with_sources(
    input: &InputArgs,
    runtime: &Runtime,
    fleet: &fleet::Fleet,
    publish: (Publish, Option<EarlyCatalog>),
) -> anyhow::Result<Option<(Loaded, Vec<wconverge_catalog::Problem>)>> {
    let modulepath = module_path(input);
    let Some(mut loaded) = load(input, runtime, &modulepath, fleet, publish)? else {
        return Ok(None);
    };
    let problems = modules::resolve_sources(&mut loaded.catalog, &modulepath);
    generate::implied_resources(&mut loaded.catalog);
    Ok(Some((loaded, problems)))
}

/// Whether the catalog holds lazy values, which the host evaluates.
pub(crate) fn has_lazy(catalog: &Catalog) -> bool {
    use wconverge_catalog::Lazy;
    catalog.resources.iter().any(|resource| {
        resource
            .attributes
            .iter()
            .any(|(_, value)| Lazy::within(value))
            || [&resource.metaparams.only_if, &resource.metaparams.not_if]
                .into_iter()
                .flatten()
                .any(Lazy::within)
    })
}

fn read_catalog(path: &Path) -> anyhow::Result<Catalog> {
    let text =
        input::read_text(path, "catalog", input::CATALOG_BYTES).map_err(anyhow::Error::msg)?;
    // The catalog's own lines are not shown: a generated catalog may be one long line.
    Catalog::from_json(&text).map_err(|error| {
        let problems = match error {
            wconverge_catalog::Error::Syntax {
                message,
                line,
                column,
            } => vec![wconverge_catalog::Problem {
                location: Some(wconverge_catalog::SourceLocation {
                    file: path.display().to_string(),
                    line: u32::try_from(line).unwrap_or(u32::MAX),
                    column: u32::try_from(column).ok(),
                }),
                ..wconverge_catalog::Problem::new(DiagnosticCode::CatalogSyntax, message)
            }],
            wconverge_catalog::Error::Invalid(problems) => problems,
        };
        let count = problems.len();
        anyhow::Error::new(output::shown_problems(
            &problems,
            &[],
            &format!(
                "{} is not a usable catalog ({count} problem{}); nothing was changed",
                path.display(),
                if count == 1 { "" } else { "s" }
            ),
        ))
    })
}

/// Validates the catalog; prints every problem (the `earlier` ones first), each where it
/// lies in the manifests, and returns `None` if there are any.
pub(crate) fn prepare(
    loaded: &Loaded,
    runtime: &Runtime,
    earlier: Vec<wconverge_catalog::Problem>,
) -> anyhow::Result<Option<Prepared>> {
    let mut earlier = earlier;
    earlier.extend(not_imported_types(
        &loaded.catalog,
        &runtime.policy().imports,
    ));
    // Checking lazy values, and the checks and invariants of types, needs the
    // compiler's stack: take it once, rather than once per check.
    let prepared = wconverge_lang::run_on_big_stack(|| {
        wconverge_engine::prepare(&loaded.catalog, runtime, &wconverge_lang::Language)
    });
    report(
        prepared,
        &loaded.sources,
        earlier,
        &runtime.policy().imports,
    )
}

/// Whether the policy grants every directory and file the prepared resources would
/// need; if not, each resource refused is printed as a problem.
pub(crate) fn granted(
    prepared: &Prepared,
    runtime: &Runtime,
    sources: &[wconverge_lang::Source],
) -> bool {
    let problems: Vec<wconverge_catalog::Problem> = runtime
        .ungranted(prepared)
        .into_iter()
        .map(|(resource, why)| wconverge_catalog::Problem {
            code: wconverge_catalog::DiagnosticCode::NotGranted,
            resource: Some(resource.reference.clone()),
            location: resource.source.clone(),
            message: why,
            help: None,
        })
        .collect();
    if problems.is_empty() {
        return true;
    }
    output::problems(&problems, sources);
    false
}

/// The resources collected from other nodes whose type this node's policy does not
/// import (`[imports] types`), known before the catalog is checked.
pub(crate) fn not_imported_types(
    catalog: &wconverge_catalog::Catalog,
    imports: &wconverge_runtime::policy::Imports,
) -> Vec<wconverge_catalog::Problem> {
    catalog
        .resources
        .iter()
        .filter(|resource| !imports.types.contains(&resource.type_name))
        .filter_map(|resource| {
            let node = resource.exported_by.as_ref()?;
            Some(
                wconverge_catalog::Problem::of(
                    resource,
                    wconverge_catalog::DiagnosticCode::NotImported,
                    format!(
                        "exported by node `{node}`, and this node imports no `{}` from other \
                         nodes",
                        resource.type_name
                    ),
                )
                .with_help(format!(
                    "add `{}` to `types` of [imports] in the policy if this node must take it \
                     from other nodes",
                    resource.type_name
                )),
            )
        })
        .collect()
}

/// As [`prepare`], for a run: the catalog's attribute values are moved into what is
/// prepared, not copied (it keeps its resources' names, places and relationships).
pub(crate) fn prepare_for_run(
    loaded: &mut Loaded,
    runtime: &Runtime,
    earlier: Vec<wconverge_catalog::Problem>,
) -> anyhow::Result<Option<Prepared>> {
    let mut earlier = earlier;
    earlier.extend(not_imported_types(
        &loaded.catalog,
        &runtime.policy().imports,
    ));
    let catalog = &mut loaded.catalog;
    let prepared = wconverge_lang::run_on_big_stack(|| {
        wconverge_engine::prepare_taking_values(catalog, runtime, &wconverge_lang::Language)
    });
    report(
        prepared,
        &loaded.sources,
        earlier,
        &runtime.policy().imports,
    )
}

/// The prepared catalog, or `None` with every problem printed (the `earlier` ones first).
/// What the node does not import from other nodes is a problem too.
fn report(
    prepared: Result<Prepared, Vec<wconverge_catalog::Problem>>,
    sources: &[wconverge_lang::Source],
    mut earlier: Vec<wconverge_catalog::Problem>,
    imports: &wconverge_runtime::policy::Imports,
) -> anyhow::Result<Option<Prepared>> {
    if let Ok(prepared) = &prepared {
        earlier.extend(not_imported_paths(prepared, imports));
    }
    match prepared {
        Ok(prepared) if earlier.is_empty() => Ok(Some(prepared)),
        Ok(_) => {
            output::problems(&earlier, sources);
            Ok(None)
        }
        Err(mut problems) => {
            earlier.append(&mut problems);
            output::problems(&earlier, sources);
            Ok(None)
        }
    }
}

/// The resources collected from other nodes that name a path outside every
/// `[imports] directories` of this node's policy (their types are checked before).
fn not_imported_paths(
    prepared: &Prepared,
    imports: &wconverge_runtime::policy::Imports,
) -> Vec<wconverge_catalog::Problem> {
    let mut problems = Vec::new();
    for resource in &prepared.resources {
        let (Some(node), Some(schema)) = (&resource.exported_by, prepared.schema(resource)) else {
            continue;
        };
        for (attribute, path) in resource.paths(schema) {
            let inside = !path.split('/').any(|c| c == "..")
                && imports
                    .directories
                    .iter()
                    .any(|dir| std::path::Path::new(path).starts_with(dir));
            if !inside {
                problems.push(wconverge_catalog::Problem {
                    code: wconverge_catalog::DiagnosticCode::NotImported,
                    resource: Some(resource.reference.clone()),
                    location: resource.source.clone(),
                    message: format!(
                        "exported by node `{node}`, and `{}` => `{path}` is in none of the \
                         directories this node imports into",
                        attribute.name
                    ),
                    help: Some(
                        "add its directory to `directories` of [imports] in the policy if \
                         this node must take it from other nodes"
                            .to_owned(),
                    ),
                });
            }
        }
    }
    problems
}

/// Whether manifest text may read facts: it names `facts`, a top-scope variable
/// (`$::os`) or a variable that starts like one of Facter's own names (`$osfamily`).
/// One pass over the text's `$` signs (a manifest of 10 MB was read once per name).
fn names_facts(text: &str) -> bool {
    if text.contains("facts") {
        return true;
    }
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        if rest.starts_with("::")
            || wconverge_engine::FACTER_NAMES
                .iter()
                .any(|name| rest.starts_with(name))
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::names_facts;

    #[test]
    fn text_names_facts_by_facts_a_top_scope_variable_or_a_facter_name() {
        for reads in [
            "$facts['os']['family']",
            "notify { $::osfamily: }",
            "if $osfamily == 'Debian' {}",
            "$kernel",
        ] {
            assert!(names_facts(reads), "{reads}");
        }
        for reads_none in [
            "file { '/srv/${title}': content => \"$x\" }",
            "no variables at all",
            "a dollar at the end $",
            "$",
        ] {
            assert!(!names_facts(reads_none), "{reads_none}");
        }
    }
}
