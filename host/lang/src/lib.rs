//! The manifest language (**API boundary**: the language is documented in
//! `docs/language.md`): `.wcv` source text in, a catalog and diagnostics out.
//!
//! This crate reads no file and knows nothing of plugins or the engine: the caller
//! hands it source texts, the node's name and the resource types the plugins provide
//! ([`KnownTypes`]). [`compile`] never panics and returns a catalog only when there
//! are no errors.
#![warn(clippy::disallowed_methods)]

pub mod calendar;
mod code;
mod diagnostic;
mod epp;
mod erb;
mod eval;
mod lexer;
mod modules;
mod parser;
mod syntax;

pub use code::Language;
pub use diagnostic::{Diagnostic, Severity, Span, line_column, render, render_problem};
/// Declared types (`type Name { ... }`), checked by `instantiate`.
pub use eval::types;
pub use eval::{
    MAX_CLASS_DEPTH, MAX_COMPILE_WORK, MAX_DEFINE_DEPTH, MAX_EDGES, MAX_RESOURCES, MAX_ROUNDS,
    MAX_STRING_BYTES, MAX_VALUE_SIZE, NODE_BLOCK, check_lazy, evaluate_lazy, evaluate_lazy_truth,
    run_node_block,
};
pub use parser::{MAX_CHAIN, MAX_NESTING};

use crate::diagnostic::DiagnosticCode;
use std::collections::HashMap;
use wconverge_catalog::{Catalog, TypeSchema};

/// One manifest file: its name as the user wrote it, and its text.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub text: String,
}

impl Source {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source {
            name: name.into(),
            text: text.into(),
        }
    }
}

/// The resource types plugins provide, with their attribute names.
#[derive(Debug, Clone, Default)]
pub struct KnownTypes {
    types: HashMap<String, Vec<String>>,
    /// Each type's namevar, where it is not `name`.
    namevars: HashMap<String, String>,
}

impl KnownTypes {
    pub fn new() -> KnownTypes {
        KnownTypes::default()
    }

    pub fn from_schemas<'s>(schemas: impl IntoIterator<Item = &'s TypeSchema>) -> KnownTypes {
        let mut types = KnownTypes::new();
        for schema in schemas {
            types.insert(
                &schema.name,
                schema
                    .attributes
                    .iter()
                    .map(|attribute| attribute.name.as_str()),
            );
            if let Some(namevar) = schema.namevar() {
                types.set_namevar(&schema.name, &namevar.name);
            }
        }
        types
    }

    /// Adds a type's attributes. A type that several providers implement has the
    /// attributes of all of them: the engine checks each resource against its own
    /// provider's schema later.
    pub fn insert<'n>(&mut self, type_name: &str, attributes: impl IntoIterator<Item = &'n str>) {
        let known = self.types.entry(type_name.to_owned()).or_default();
        for attribute in attributes {
            if !known.iter().any(|existing| existing == attribute) {
                known.push(attribute.to_owned());
            }
        }
    }

    /// Names the attribute that identifies a type's resources besides the title
    /// (`path` for `file`); without it, `name` if the type has one.
    pub fn set_namevar(&mut self, type_name: &str, attribute: &str) {
        self.namevars
            .insert(type_name.to_owned(), attribute.to_owned());
    }

    /// The attribute that identifies a type's resources besides their title, if any.
    pub fn namevar(&self, type_name: &str) -> Option<&str> {
        if let Some(namevar) = self.namevars.get(type_name) {
            return Some(namevar);
        }
        self.attributes(type_name)?
            .iter()
            .find(|attribute| *attribute == "name")
            .map(String::as_str)
    }

    pub fn contains(&self, type_name: &str) -> bool {
        self.types.contains_key(type_name)
    }

    pub fn attributes(&self, type_name: &str) -> Option<&[String]> {
        self.types.get(type_name).map(Vec::as_slice)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }
}

/// What a compile produced.
#[derive(Debug)]
pub struct Compiled {
    /// The catalog, only when no diagnostic is an error.
    pub catalog: Option<Catalog>,
    /// Errors, warnings and notices, in the order they were found.
    pub diagnostics: Vec<Diagnostic>,
    /// The modules' manifests and the templates the compile loaded, after the sources it
    /// was given: the files its diagnostics' spans point into are those sources, then
    /// these.
    pub loaded: Vec<Source>,
    /// The resources this node exported (`@@`), for the store; complete only when the
    /// catalog is.
    pub exports: Vec<wconverge_catalog::Export>,
    /// Whether the manifests collect exported resources (`<<| |>>`), which needs the
    /// store.
    pub collects_exports: bool,
}

/// The exported resources of other nodes, from the store: what a `<<| |>>` collector
/// realizes besides the exports of this compile. The language itself reads nothing;
/// the caller implements this.
pub trait Exports: Sync {
    /// The exports of `type_name` that match `query`, of every active node but
    /// `excluding` (this one, whose exports come from this compile). `Err` says why the
    /// store cannot answer: the collector is then an error, never an empty collection.
    fn collect(
        &self,
        type_name: &str,
        query: &wconverge_catalog::ExportQuery,
        excluding: &str,
    ) -> Result<Vec<wconverge_catalog::Collected>, String>;
}

/// No store: only this compile's exports are collected.
pub struct NoExports;

impl Exports for NoExports {
    fn collect(
        &self,
        _type_name: &str,
        _query: &wconverge_catalog::ExportQuery,
        _excluding: &str,
    ) -> Result<Vec<wconverge_catalog::Collected>, String> {
        Ok(Vec::new())
    }
}

/// Files a compile reads on demand, from a module path: Puppet's autoloader. The
/// language itself reads nothing; the caller implements this.
pub trait Loader: Sync {
    /// Whether the module path has no module at all.
    fn is_empty(&self) -> bool;
    /// Whether a module of this name is in the module path.
    fn has_module(&self, module: &str) -> bool;
    /// The manifest where Puppet's autoloader looks for class or defined type `name`
    /// (`ntp` in `ntp/manifests/init.pp`, `ntp::server::config` in
    /// `ntp/manifests/server/config.pp`): `None` if there is none, `Err` (why) if it
    /// exists and cannot be read.
    fn manifest(&self, name: &str) -> Option<Result<Source, String>>;
    /// An EPP template of a module: `path` in its `templates/` directory; `None` when
    /// there is none.
    fn template(&self, module: &str, path: &str) -> Option<Result<Source, String>> {
        let _ = (module, path);
        None
    }
    /// Hiera: the `hiera.yaml` of the environment (`module` is `None`) or of a module,
    /// parsed; `None` when there is none.
    fn hiera_config(&self, module: Option<&str>) -> Option<Result<HieraFile, String>> {
        let _ = module;
        None
    }
    /// A Hiera data file of that layer, `path` relative to its `hiera.yaml`'s
    /// directory, parsed as `format` says; `None` when there is none.
    fn hiera_data(
        &self,
        module: Option<&str>,
        path: &str,
        format: DataFormat,
    ) -> Option<Result<HieraFile, String>> {
        let _ = (module, path, format);
        None
    }
}

/// A file of Hiera's, parsed: its name as messages show it, and its value.
#[derive(Debug, Clone)]
pub struct HieraFile {
    pub name: String,
    pub value: wconverge_catalog::Value,
}

/// The back end of a Hiera level: `yaml_data` or `json_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFormat {
    Yaml,
    Json,
}

/// No module path: nothing is loaded.
pub struct NoModules;

impl Loader for NoModules {
    fn is_empty(&self) -> bool {
        true
    }

    fn has_module(&self, _module: &str) -> bool {
        false
    }

    fn manifest(&self, _name: &str) -> Option<Result<Source, String>> {
        None
    }
}

/// A compile loads at most this many modules' manifests.
pub const MAX_LOADED_FILES: usize = 10_000;

/// A source larger than this is refused (spans are 32-bit).
const MAX_SOURCE_BYTES: usize = 512 << 20;

thread_local! {
    /// This thread has `COMPILER_STACK_BYTES` of stack.
    static ON_BIG_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The compiler runs on a thread of its own with this much stack, so that the deepest
/// input the nesting limits allow never overflows the caller's stack.
const COMPILER_STACK_BYTES: usize = 256 << 20;

/// What a compile is given besides its sources: the node's name (matched against `node`
/// definitions), the types it may declare resources of, and, where the caller has them,
/// the facts (`$facts`: a hash of each fact group; empty by default), the modules the
/// manifests may load classes, defined types, functions and data from (none by
/// default), and the exports of other nodes `<<| |>>` collects (none by default).
#[derive(Clone, Copy)]
pub struct CompileOptions<'a> {
    pub node: &'a str,
    pub types: &'a KnownTypes,
    pub facts: &'a wconverge_catalog::Value,
    pub loader: &'a dyn Loader,
    pub exports: &'a dyn Exports,
}

/// `$facts` when a compile is given none.
static NO_FACTS: wconverge_catalog::Value = wconverge_catalog::Value::Hash(Vec::new());

impl<'a> CompileOptions<'a> {
    /// For `node`, with `types`: no facts, modules or exports.
    pub fn new(node: &'a str, types: &'a KnownTypes) -> CompileOptions<'a> {
        CompileOptions {
            node,
            types,
            facts: &NO_FACTS,
            loader: &NoModules,
            exports: &NoExports,
        }
    }

    /// With `facts` as the read-only top-scope variable `$facts`.
    pub fn facts(self, facts: &'a wconverge_catalog::Value) -> CompileOptions<'a> {
        CompileOptions { facts, ..self }
    }

    /// Loading what the manifests use and do not define from the modules `loader` finds.
    pub fn modules(self, loader: &'a dyn Loader) -> CompileOptions<'a> {
        CompileOptions { loader, ..self }
    }

    /// With `<<| |>>` collecting the exports of other nodes from `exports` too.
    pub fn exports(self, exports: &'a dyn Exports) -> CompileOptions<'a> {
        CompileOptions { exports, ..self }
    }
}

/// Parses every source and, if there is no syntax error, evaluates them in order (then
/// the node definition matching the node) into a catalog.
pub fn compile(sources: &[Source], options: &CompileOptions<'_>) -> Compiled {
    let CompileOptions {
        node,
        types,
        facts,
        loader,
        exports,
    } = *options;
    run_on_big_stack(|| compile_here(sources, node, types, facts, loader, exports))
}

/// Parses only: the syntax diagnostics of every source.
pub fn check_syntax(sources: &[Source]) -> Vec<Diagnostic> {
    run_on_big_stack(|| parse_all(sources).1)
}

/// Starts `work` on a new thread of `scope` with the compiler's stack (so that what it
/// compiles or evaluates runs there, with no thread of its own).
pub fn spawn_on_big_stack<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    name: &str,
    work: impl FnOnce() -> T + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .stack_size(COMPILER_STACK_BYTES)
        .spawn_scoped(scope, || {
            ON_BIG_STACK.set(true);
            work()
        })
}

/// Runs `work` on a thread with the compiler's stack, or right here when this thread is
/// such a thread already. A caller that evaluates many lazy values (the run loop) runs
/// itself this way once, rather than pay for a thread per value.
pub fn run_on_big_stack<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    if ON_BIG_STACK.get() {
        return work();
    }
    std::thread::scope(
        |scope| match spawn_on_big_stack(scope, "wconverge-compile", work) {
            Ok(handle) => match handle.join() {
                Ok(value) => value,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(error) => panic!("cannot start the compiler thread: {error}"),
        },
    )
}

fn parse_all(sources: &[Source]) -> (syntax::Program, Vec<Diagnostic>) {
    let mut program = syntax::Program::default();
    let mut diagnostics = Vec::new();
    for (file_idx, source) in sources.iter().enumerate() {
        parse_one(file_idx, source, &mut program, &mut diagnostics);
    }
    (program, diagnostics)
}

fn parse_one(
    file_idx: usize,
    source: &Source,
    program: &mut syntax::Program,
    diagnostics: &mut Vec<Diagnostic>,
) {
    {
        let file = u32::try_from(file_idx).unwrap_or(u32::MAX);
        if source.text.len() > MAX_SOURCE_BYTES {
            diagnostics.push(
                Diagnostic::error(
                    DiagnosticCode::TooLarge,
                    Span::new(file, 0, 0),
                    format!(
                        "`{}` is larger than {} MiB",
                        source.name,
                        MAX_SOURCE_BYTES >> 20
                    ),
                )
                .with_help("split the manifest into several files"),
            );
            program.files.push(Vec::new());
            return;
        }
        let block = parser::parse_text(file, &source.text, program, diagnostics);
        program.files.push(block);
    }
}

fn compile_here(
    sources: &[Source],
    node: &str,
    types: &KnownTypes,
    facts: &wconverge_catalog::Value,
    loader: &dyn Loader,
    exports: &dyn Exports,
) -> Compiled {
    let mut modules = modules::Modules::new(sources, loader);
    // A class named only at run time (`include $role`) is loaded when the evaluation
    // asks for it, and the compile starts again with it: rarely more than once.
    loop {
        let (mut program, mut diagnostics) = parse_all(&modules.sources);
        modules.load_mentioned(&mut program, &mut diagnostics);
        if diagnostics.iter().any(Diagnostic::is_error) {
            return modules.compiled(None, diagnostics);
        }
        let mut evaluator = eval::Evaluator::new(program, &modules.sources, types, node);
        evaluator.set_facts(facts);
        evaluator.with_modules(
            loader,
            exports,
            modules.unreadable.clone(),
            modules.module_of_file(),
        );
        let mut evaluated = evaluator.run();
        if modules.load_missing(&evaluated.missing) {
            continue;
        }
        diagnostics.append(&mut evaluated.diagnostics);
        let mut compiled = modules.compiled(evaluated.catalog, diagnostics);
        compiled.loaded.extend(evaluated.templates);
        compiled.exports = evaluated.exports;
        compiled.collects_exports = evaluated.collects_exports;
        return compiled;
    }
}

#[cfg(test)]
mod tests;
