//! The evaluator: walks the syntax tree top to bottom (classes when they are
//! included), building resources, defaults, overrides, collectors and relationships,
//! then evaluates defined types and collectors until nothing new appears, and
//! finally resolves every relationship and writes the catalog.
//!
//! This file holds the evaluator's state and its top level (`Evaluator::run`); its
//! methods live in rooms by concern: `expr` (expressions and operators), `scope`
//! (variables), `resources` (declarations, defaults, overrides), `collectors`, `classes`
//! (classes, defined types, nodes), `calls` (functions, lambdas, templates), `budget`
//! (work and size limits), `catalog_output` (the catalog), `exports`, `declared`, `node`,
//! `lazy` (`lazy { }` when compiling) and `run` (lazy values and types' checks evaluated
//! during the run, by an evaluator made for it); `ids` has the types of the positions in
//! its collections.

use crate::diagnostic::{Diagnostic, DiagnosticCode, Severity, Span};
use crate::eval::value::{Val, flatten_into, numeric_string};
use crate::syntax::*;
use crate::{KnownTypes, Source};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use wconverge_catalog::{self as catalog, METAPARAMETERS, display_type_name};

// The evaluator's library: functions, Puppet's data types as values, declared types,
// Hiera and the values themselves. They and the evaluator call each other (a function
// evaluates a lambda, a type checks a value, Hiera interpolates with `lookup`): the one
// cycle of the language, kept inside `eval`.
pub(crate) mod functions;
pub(crate) mod hiera;
pub(crate) mod ptype;
pub(crate) mod stdlib;
pub mod types;
pub(crate) mod value;

mod arity;
mod budget;
mod calls;
mod catalog_output;
mod classes;
mod collectors;
mod declared;
mod erb_host;
mod exports;
mod expr;
mod ids;
mod lazy;
mod node;
mod resources;
pub(crate) mod rich;
mod run;
mod scope;

use ids::{ClassId, CollectorId, DefineId, FunctionId, ResourceId, ScopeId};
pub(crate) use run::evaluate_code;
pub use run::{check_lazy, evaluate_lazy, evaluate_lazy_truth, run_node_block};

/// The type whose lazy `block` may write node attributes during the run.
pub use wconverge_catalog::NODE_BLOCK;

/// A defined type instance may declare another at most this deep.
pub const MAX_DEFINE_DEPTH: usize = 100;
/// Defined types and collectors are evaluated in rounds until nothing new appears.
pub const MAX_ROUNDS: usize = 1_000;
/// A compile declares at most this many resources (classes and instances included): four
/// times the benchmark's 50,000, about 1 GiB of memory.
pub const MAX_RESOURCES: usize = 200_000;
/// The longest string a manifest may build.
pub const MAX_STRING_BYTES: usize = 16 << 20;
/// The largest value one expression may build, in elements (a string counting one per
/// eight bytes), whatever it nests: some 40 MiB.
pub const MAX_VALUE_SIZE: u64 = 1_000_000;
/// The work of a whole compile: expressions evaluated, lambdas called (each counting
/// [`LAMBDA_WORK`]), regular expressions compiled ([`REGEX_WORK`]), resources a collector
/// looks at, and the size of the values built, iterated, copied and compared
/// ([`COPY_WORK`] per element for the last two). The 50,000-resource benchmark does about 610,000; this bounds a compile to some
/// seconds and a few hundred MiB.
pub const MAX_COMPILE_WORK: u64 = 25_000_000;
/// What one lambda call counts as: its scope, kept to the end of the compile, costs
/// some hundreds of bytes and a few microseconds.
const LAMBDA_WORK: u64 = 100;
/// What each element of a value counts as when it is copied (a variable read), or
/// compared and searched: a copy allocates it again.
const COPY_WORK: u64 = 4;
/// What compiling a regular expression counts as: up to a MiB and some milliseconds.
const REGEX_WORK: u64 = 100_000;
/// The most relationship edges a catalog may have (each costs about 400 bytes).
pub const MAX_EDGES: usize = 250_000;
/// `include` chains nest at most this deep.
pub const MAX_CLASS_DEPTH: usize = 50;

/// Puppet metaparameters wconverge does not have.
const UNSUPPORTED_METAPARAMETERS: &[&str] = &["alias", "audit", "loglevel", "schedule", "stage"];

const RELATIONSHIP_METAPARAMETERS: &[&str] = &["require", "before", "notify", "subscribe"];

/// The top scope, the first of `Evaluator::scopes`.
const TOP: ScopeId = ScopeId::new(0);

struct Scope {
    parent: Option<ScopeId>,
    /// A class's scope (`$class::x` reads through these to inherited classes).
    class: bool,
    vars: HashMap<String, (Val, Span)>,
    /// Variables whose value's expression reported an error: reading one counts as that
    /// error again, so what is built from it reports nothing more (a failed `lookup`
    /// is one error, not also "unknown class `role::`" where its value was used).
    failed: Vec<String>,
    defaults: Vec<DefaultEntry>,
}

struct DefaultEntry {
    type_name: String,
    attribute: std::rc::Rc<str>,
    value: Val,
    span: Span,
    /// When it was set, on the scale of `Evaluator::seq`.
    seq: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Plugin,
    Define(DefineId),
    Class(ClassId),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Realized,
    Virtual,
    Exported,
}

#[derive(Clone, Debug)]
struct Attr {
    name: std::rc::Rc<str>,
    value: Val,
    span: Span,
    /// Set by a resource default: an override may replace it.
    from_default: bool,
}

struct Res {
    type_name: String,
    title: String,
    kind: Kind,
    status: Status,
    attrs: Vec<Attr>,
    span: Span,
    /// The class or defined type instance that contains it.
    container: Option<ResourceId>,
    /// The class whose body declared it (for the override rules).
    declared_in: Option<String>,
    /// Sorts resources in manifest order, define contents where the define is.
    order: Vec<u32>,
    /// Tags given by `tag()` inside a class or defined type.
    function_tags: Vec<String>,
    evaluated: bool,
    depth: usize,
    /// Declared with `@@`: what `<<| |>>` collects, even once realized.
    exported: bool,
    /// Top-scope defaults set after this sequence number do not apply to what this
    /// resource's body declares (a defined type is evaluated after the main code).
    horizon: u32,
    /// Declared from the node's scope (or below it): a defined type's body then sees
    /// the node's variables, as in Puppet.
    below_node: bool,
    /// Collected from another node's exports: which node, and what it said of it.
    foreign: Option<Box<Foreign>>,
}

/// What another node exported of a resource this compile collected.
struct Foreign {
    node: String,
    tags: Vec<String>,
    source: Option<catalog::SourceLocation>,
}

impl Res {
    fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|attr| &*attr.name == name)
    }

    fn reference(&self) -> String {
        format!("{}['{}']", display_type_name(&self.type_name), self.title)
    }
}

/// An attribute operation with its value evaluated.
#[derive(Clone)]
struct Op {
    name: std::rc::Rc<str>,
    value: Val,
    span: Span,
    append: bool,
}

#[derive(Clone)]
enum Operand {
    Refs(Vec<(String, String)>),
    Collector(CollectorId),
}

struct Relation {
    lhs: Operand,
    rhs: Operand,
    op: RelOp,
    span: Span,
}

/// Every resource of `sources` before every resource of `targets` (and notifying them).
struct EdgeRequest {
    sources: Vec<ResourceId>,
    targets: Vec<ResourceId>,
    notify: bool,
    span: Span,
    /// Classes and defined type instances named on each side that contain nothing:
    /// ordering passes through them (`a -> Class['empty'] -> b` orders a before b).
    empty_sources: Vec<ResourceId>,
    empty_targets: Vec<ResourceId>,
}

struct PendingOverride {
    target: (String, String),
    ops: Vec<Op>,
    class_name: Option<String>,
    span: Span,
}

enum CQuery {
    All,
    And(Box<CQuery>, Box<CQuery>),
    Or(Box<CQuery>, Box<CQuery>),
    Compare {
        attribute: String,
        equal: bool,
        value: Val,
    },
}

struct CollectorState {
    type_name: String,
    exported: bool,
    query: CQuery,
    ops: Vec<Op>,
    matched: HashSet<ResourceId>,
    matched_list: Vec<ResourceId>,
    span: Span,
    /// An exported-resource collector has asked the store for other nodes' exports.
    fetched: bool,
}

#[derive(Clone)]
struct Ctx {
    scope: ScopeId,
    container: Option<ResourceId>,
    class_name: Option<String>,
    order: Vec<u32>,
    depth: usize,
    /// Top-scope defaults set after this point are not visible (see `Res::horizon`).
    horizon: u32,
}

/// Valid regular expressions this thread compiled, at most this many.
const SHARED_REGEXES: usize = 1024;

thread_local! {
    static COMPILED: std::cell::RefCell<HashMap<String, regex::Regex>> =
        std::cell::RefCell::new(HashMap::new());
}

pub(crate) struct Evaluator<'a> {
    /// Shared so that methods can walk definitions while mutating the evaluator; freed
    /// before the catalog is built.
    program: Rc<Program>,
    sources: &'a [Source],
    types: &'a KnownTypes,
    node: &'a str,
    diagnostics: Vec<Diagnostic>,
    /// Classes and defined types used and not defined (the module path may have them).
    missing: Vec<String>,
    /// Names whose module manifest exists and could not be read, with why.
    unreadable: HashMap<String, String>,
    /// The module of each file loaded from the module path (`$module_name`).
    module_files: HashMap<u32, String>,
    /// Where modules' manifests and Hiera's files come from.
    loader: &'a dyn crate::Loader,
    /// Other nodes' exported resources.
    exports: &'a dyn crate::Exports,
    /// This node's exported resources, made when the catalog is.
    exported: Vec<catalog::Export>,
    /// Whether a `<<| |>>` collector ran.
    collects_exports: bool,
    pub(crate) hiera: crate::eval::hiera::Hiera,
    /// Files read while evaluating (EPP templates), numbered after `sources`.
    extra_sources: Vec<Source>,
    /// Each template parsed, by the name it was asked for (`None`: it failed, reported).
    templates: HashMap<String, Option<(u32, Rc<crate::syntax::DefineDef>)>>,
    /// What the templates being rendered have printed so far, innermost last.
    epp_output: Vec<String>,
    /// ERB templates being rendered, one inside another (`scope.call_function('template',
    /// ...)`), at most `MAX_NESTING`.
    erb_depth: usize,
    /// How many of `diagnostics` are errors, plus each read of a variable whose value
    /// failed (`Scope::failed`): an expression whose operand reported one does not
    /// report its consequences too.
    errors: usize,
    classes: HashMap<String, ClassId>,
    defines: HashMap<String, DefineId>,
    /// Functions the manifests define, by name, to their position in the program.
    functions: HashMap<String, FunctionId>,
    /// How deep functions call functions now.
    function_depth: usize,
    /// `break()`, `next()` or `return()` under way: the blocks it crosses stop, until the
    /// iteration, lambda, function or body that ends it takes it.
    jump: Option<Jump>,
    /// How many lambdas are running now (`break` and `next` need one).
    lambda_depth: usize,
    scopes: Vec<Scope>,
    class_scopes: HashMap<String, ScopeId>,
    /// The matching node definition's scope, once its body runs: classes declared from
    /// then on see it.
    node_scope: Option<ScopeId>,
    resources: Vec<Res>,
    index: HashMap<(String, String), ResourceId>,
    /// Resources by their namevar where it differs from their title.
    aliases: HashMap<(String, String), ResourceId>,
    /// Data type aliases resolved so far, by lowercased name.
    pub(crate) type_aliases: HashMap<String, Result<crate::eval::ptype::PType, String>>,
    by_type: HashMap<String, Vec<ResourceId>>,
    pending_defines: VecDeque<ResourceId>,
    collectors: Vec<CollectorState>,
    overrides: Vec<PendingOverride>,
    relations: Vec<Relation>,
    realizes: Vec<((String, String), Span)>,
    class_stack: Vec<String>,
    ctx: Ctx,
    seq: u32,
    regexes: HashMap<String, Option<regex::Regex>>,
    captures: Vec<Val>,
    main_tags: Vec<String>,
    line_starts: Vec<crate::diagnostic::LineStarts>,
    resource_limit_reported: bool,
    /// The compile's work so far ([`MAX_COMPILE_WORK`]); past it, reported once, and
    /// every further expression is `undef`.
    work: u64,
    /// Work a lazy value's evaluation may still do (`None` when compiling): every
    /// expression costs one, every variable read its size.
    budget: Option<u64>,
    /// The node's attributes.
    attributes: node::NodeState<'a>,
    /// The types the manifests declare, ancestors folded in.
    declared_types: Vec<catalog::TypeSchema>,
    /// The objects the lambdas of `new` are initializing, innermost last: the lambda's
    /// parameter and the features set so far.
    initializing: Vec<(String, Vec<(String, Val)>)>,
}

/// Why an evaluation during the run failed.
pub(super) enum RunFailure {
    /// Its first error, in the language's words.
    Error(String),
    /// It declared resources (which `lazy::walk` refuses before: never expected).
    DeclaredResources,
}

/// What an evaluation produced.
pub(crate) struct Evaluated {
    /// Only when no diagnostic is an error.
    pub(crate) catalog: Option<catalog::Catalog>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Classes and defined types used and not defined.
    pub(crate) missing: Vec<String>,
    /// The templates it read.
    pub(crate) templates: Vec<Source>,
    /// This node's exported resources.
    pub(crate) exports: Vec<catalog::Export>,
    /// Whether a `<<| |>>` collector ran.
    pub(crate) collects_exports: bool,
}

impl<'a> Evaluator<'a> {
    pub(crate) fn new(
        program: Program,
        sources: &'a [Source],
        types: &'a KnownTypes,
        node: &'a str,
    ) -> Self {
        Evaluator {
            program: Rc::new(program),
            sources,
            types,
            node,
            diagnostics: Vec::new(),
            missing: Vec::new(),
            unreadable: HashMap::new(),
            module_files: HashMap::new(),
            loader: &crate::NoModules,
            exports: &crate::NoExports,
            exported: Vec::new(),
            collects_exports: false,
            hiera: crate::eval::hiera::Hiera::default(),
            extra_sources: Vec::new(),
            templates: HashMap::new(),
            epp_output: Vec::new(),
            erb_depth: 0,
            errors: 0,
            classes: HashMap::new(),
            defines: HashMap::new(),
            functions: HashMap::new(),
            function_depth: 0,
            jump: None,
            lambda_depth: 0,
            scopes: vec![Scope {
                parent: None,
                class: false,
                vars: HashMap::new(),
                failed: Vec::new(),
                defaults: Vec::new(),
            }],
            class_scopes: HashMap::new(),
            node_scope: None,
            resources: Vec::new(),
            index: HashMap::new(),
            aliases: HashMap::new(),
            type_aliases: HashMap::new(),
            by_type: HashMap::new(),
            pending_defines: VecDeque::new(),
            collectors: Vec::new(),
            overrides: Vec::new(),
            relations: Vec::new(),
            realizes: Vec::new(),
            class_stack: Vec::new(),
            ctx: Ctx {
                scope: TOP,
                container: None,
                class_name: None,
                order: Vec::new(),
                depth: 0,
                horizon: u32::MAX,
            },
            seq: 0,
            regexes: HashMap::new(),
            captures: Vec::new(),
            main_tags: Vec::new(),
            resource_limit_reported: false,
            work: 0,
            attributes: node::NodeState::compiling(),
            declared_types: Vec::new(),
            initializing: Vec::new(),
            budget: None,
            line_starts: sources
                .iter()
                .map(|source| crate::diagnostic::LineStarts::new(&source.text))
                .collect(),
        }
    }

    /// Where this compile's modules come from: `loader` (templates, Hiera's files),
    /// `exports` (other nodes' exported resources), the module manifests that exist and
    /// could not be read (`unreadable`, with why), and the module of each loaded file.
    pub(crate) fn with_modules(
        &mut self,
        loader: &'a dyn crate::Loader,
        exports: &'a dyn crate::Exports,
        unreadable: HashMap<String, String>,
        module_files: HashMap<u32, String>,
    ) {
        self.loader = loader;
        self.exports = exports;
        self.unreadable = unreadable;
        self.module_files = module_files;
    }

    /// Whether the manifests declare a type named `name` (any case).
    pub(crate) fn declares_type(&self, name: &str) -> bool {
        self.declared_types
            .iter()
            .any(|declared| declared.name.eq_ignore_ascii_case(name))
    }

    /// Where templates and Hiera's files come from.
    pub(crate) fn loader(&self) -> &'a dyn crate::Loader {
        self.loader
    }

    /// An evaluator for one lazy value (or a type's check) during the run: `program` is
    /// what its text parsed to, nothing of a compile; it reads `node` and may do
    /// [`lazy::LAZY_BUDGET`] of work, and its own assignments go into a scope of its own
    /// below the top scope, where [`Evaluator::bind_captured`] puts what it captured.
    pub(super) fn for_run(
        program: Program,
        sources: &'a [Source],
        types: &'a KnownTypes,
        node: node::NodeState<'a>,
    ) -> Self {
        let mut evaluator = Evaluator::new(program, sources, types, "");
        evaluator.budget = Some(lazy::LAZY_BUDGET);
        evaluator.attributes = node;
        let local = evaluator.new_scope(Some(TOP));
        evaluator.ctx.scope = local;
        evaluator
    }

    /// What a run's evaluation came to: the node's attributes as it left them, or why it
    /// failed (its first error).
    pub(super) fn finish_run(mut self) -> Result<node::NodeState<'a>, RunFailure> {
        let state = std::mem::replace(&mut self.attributes, node::NodeState::compiling());
        if let Some(error) = self.diagnostics.iter().find(|d| d.is_error()) {
            return Err(RunFailure::Error(error.message.clone()));
        }
        if !self.resources.is_empty() {
            return Err(RunFailure::DeclaredResources);
        }
        Ok(state)
    }

    fn error(
        &mut self,
        code: DiagnosticCode,
        span: Span,
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        self.errors += 1;
        self.diagnostics
            .push(Diagnostic::error(code, span, message));
        self.diagnostics.last_mut().expect("just pushed")
    }

    /// Sets `$facts` in the top scope; assigning it again is an error like any variable.
    /// Sets the top scope's variables that are not the manifests': `$facts`, each fact
    /// (but the lists of records) as a variable of its own (`$::osfamily`, `$::os`),
    /// `$trusted`, `$server_facts`, `$environment`, `$clientcert` and `$module_name`, as
    /// `puppet apply` does.
    pub(crate) fn set_facts(&mut self, facts: &catalog::Value) {
        let nowhere = Span::new(0, 0, 0);
        let facts = Val::from_catalog(facts);
        let get = |name: &str| match &facts {
            Val::Hash(entries) => Val::hash_get(entries, &Val::Str(name.to_owned())).cloned(),
            _ => None,
        };
        let mut top: Vec<(String, Val)> = Vec::new();
        if let Val::Hash(entries) = &facts {
            for (name, value) in entries {
                if let (Val::Str(name), false) = (name, matches!(value, Val::Array(_))) {
                    top.push((name.clone(), value.clone()));
                }
            }
        }
        let node = self.node.to_owned();
        let (hostname, domain) = node.split_once('.').unwrap_or((&node, ""));
        let text = |text: &str| Val::Str(text.to_owned());
        let trusted = Val::Hash(vec![
            (text("authenticated"), text("local")),
            (text("certname"), text(&node)),
            (text("domain"), text(domain)),
            (text("extensions"), Val::Hash(Vec::new())),
            (text("hostname"), text(hostname)),
        ]);
        let server_facts = Val::Hash(vec![
            (text("environment"), text("production")),
            (
                text("serverip"),
                get("ipaddress").unwrap_or_else(|| text("127.0.0.1")),
            ),
            (
                text("servername"),
                get("fqdn").unwrap_or_else(|| text(&node)),
            ),
            (text("serverversion"), text(env!("CARGO_PKG_VERSION"))),
        ]);
        top.push(("facts".to_owned(), facts.clone()));
        top.push(("trusted".to_owned(), trusted));
        top.push(("server_facts".to_owned(), server_facts));
        top.push(("environment".to_owned(), text("production")));
        top.push(("clientcert".to_owned(), text(&node)));
        // Puppet's built-in variable: `undef` outside a module's classes.
        top.push(("module_name".to_owned(), Val::Undef));
        for (name, value) in top {
            self.scopes[TOP].vars.insert(name, (value, nowhere));
        }
    }

    /// Evaluates everything: the catalog (none if there is an error), the diagnostics,
    /// and the classes and defined types that were used and not defined.
    pub(crate) fn run(mut self) -> Evaluated {
        self.load_definitions();
        // The top-level statements run once: each file's are freed once they have run,
        // so that what the defined types and collectors declare next reuses their memory.
        let files = match Rc::get_mut(&mut self.program) {
            Some(program) => std::mem::take(&mut program.files),
            None => self.program.files.clone(),
        };
        for file in files {
            self.block(&file);
            self.end_body();
        }
        self.evaluate_node();
        self.generate();
        // After the defined types' bodies, which read and write node attributes too.
        self.stale_reads();
        // The syntax tree is not needed any more; free it before the catalog is built.
        self.program = Rc::new(Program::default());
        let catalog = self.finish();
        let failed = self.diagnostics.iter().any(Diagnostic::is_error);
        Evaluated {
            catalog: if failed { None } else { Some(catalog) },
            diagnostics: self.diagnostics,
            missing: self.missing,
            templates: self.extra_sources,
            exports: self.exported,
            collects_exports: self.collects_exports,
        }
    }

    fn block(&mut self, block: &[Expr]) -> Val {
        let mut last = Val::Undef;
        for expr in block {
            last = match &expr.kind {
                // A collector standing alone: it realizes and overrides, with no value.
                ExprKind::Collector(collector) => {
                    self.collector(collector, expr.span);
                    Val::Undef
                }
                _ => self.eval(expr),
            };
            // `break()`, `next()` or `return()`: nothing after it in the block runs.
            if self.jump.is_some() {
                break;
            }
        }
        last
    }

    /// After a lambda of an iteration ran: whether the iteration stops, at a `break()`
    /// (taken here) or a `return()` (left for the function it returns from).
    pub(crate) fn iteration_ends(&mut self) -> bool {
        match self.jump {
            Some(Jump::Break) => {
                self.jump = None;
                true
            }
            Some(Jump::Return(_)) => true,
            _ => false,
        }
    }

    /// `break()`, `next(value)` or `return(value)`: the blocks they are in stop. `break`
    /// and `next` belong in a lambda, `return` in a function, a lambda, or a class's or
    /// defined type's body (or the manifest's top level, which it ends).
    pub(crate) fn jump_by(&mut self, name: &str, args: Vec<Val>, span: Span) {
        let value = args.into_iter().next().unwrap_or(Val::Undef);
        if name != "return" && self.lambda_depth == 0 {
            self.error(
                DiagnosticCode::BadArgument,
                span,
                format!("`{name}()` is outside a lambda"),
            )
            .help = Some(
                if name == "break" {
                    "`break()` ends the iteration its lambda runs in: \
                     `$list.each |$x| { if $x == 3 { break() } }`"
                } else {
                    "`next(value)` ends one call of an iteration's lambda with that value: \
                     `$list.map |$x| { if $x == 2 { next(0) } $x }`"
                }
                .to_owned(),
            );
            return;
        }
        self.jump = Some(match name {
            "break" => Jump::Break,
            "next" => Jump::Next(value),
            _ => Jump::Return(value),
        });
    }

    /// Ends a body (a class's, a defined type's, the manifest's) that a `return()` left:
    /// its value is dropped; `break()` and `next()` never get this far (they need a
    /// lambda).
    pub(super) fn end_body(&mut self) {
        self.jump = None;
    }
}

/// How `break()`, `next()` and `return()` leave the blocks they are in.
#[derive(Debug, Clone)]
pub(crate) enum Jump {
    /// Ends the iteration the lambda runs in.
    Break,
    /// Ends this call of the lambda, with its value.
    Next(Val),
    /// Ends the function (or body), with its value.
    Return(Val),
}

/// What `[index]` or `[start, count]` selects in a sequence of `len` elements.
enum Selection {
    /// One element; past the end when out of range.
    One(usize),
    /// Elements `from..to`, clamped to the sequence.
    Range(usize, usize),
}

/// The element of `items` at `index` as Puppet indexes (a negative index counts from the
/// end), if there is one.
pub(crate) fn element(items: &[Val], index: i64) -> Option<&Val> {
    match select(items.len(), &[Val::Int(index)])? {
        Selection::One(at) => items.get(at),
        Selection::Range(..) => None,
    }
}

/// Puppet's indexing: a negative index counts from the end; a negative count ends that
/// far from the end. `None` when the keys are not one or two integers.
fn select(len: usize, keys: &[Val]) -> Option<Selection> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let from_end = |at: i64| if at < 0 { len.saturating_add(at) } else { at };
    match keys {
        [Val::Int(index)] => Some(Selection::One(
            usize::try_from(from_end(*index)).unwrap_or(usize::MAX),
        )),
        [Val::Int(start), Val::Int(count)] => {
            let start = from_end(*start).clamp(0, len);
            let end = if *count < 0 {
                len.saturating_add(*count).saturating_add(1)
            } else {
                start.saturating_add(*count)
            }
            .clamp(start, len);
            // Both are within 0..=len, which came from a usize.
            Some(Selection::Range(start as usize, end as usize))
        }
        _ => None,
    }
}

/// The span of an assignment anywhere in `expr`.
fn find_assignment(expr: &Expr) -> Option<Span> {
    if let ExprKind::Assign(..) | ExprKind::AssignList(..) = expr.kind {
        return Some(expr.span);
    }
    children(expr).into_iter().find_map(find_assignment)
}

/// The expressions directly inside `expr`, but not inside a lambda's body nor inside a
/// resource, default, override, collector or relationship.
pub(super) fn children(expr: &Expr) -> Vec<&Expr> {
    match &expr.kind {
        ExprKind::Assign(_, value) | ExprKind::AssignList(_, value) => vec![value],
        ExprKind::Lazy(inner) => vec![inner],
        ExprKind::NodeWrite { keys, value, .. } => keys.iter().chain([&**value]).collect(),
        ExprKind::FeatureWrite { key, value, .. } => vec![key, value],
        ExprKind::Interp(parts) => parts
            .iter()
            .filter_map(|part| match part {
                InterpPart::Expr(inner) => Some(inner),
                InterpPart::Lit(_) => None,
            })
            .collect(),
        ExprKind::Array(items) => items.iter().collect(),
        ExprKind::Hash(entries) => entries.iter().flat_map(|(k, v)| [k, v]).collect(),
        ExprKind::Access(target, keys) => std::iter::once(&**target).chain(keys).collect(),
        ExprKind::Not(inner) | ExprKind::Neg(inner) => vec![inner],
        ExprKind::Binary(_, lhs, rhs) => vec![lhs, rhs],
        ExprKind::If {
            cond,
            then,
            otherwise,
        }
        | ExprKind::Unless {
            cond,
            then,
            otherwise,
        } => std::iter::once(&**cond)
            .chain(then)
            .chain(otherwise.iter().flatten())
            .collect(),
        ExprKind::Case { subject, arms } => std::iter::once(&**subject)
            .chain(
                arms.iter()
                    .flat_map(|arm| arm.options.iter().chain(&arm.body)),
            )
            .collect(),
        ExprKind::Selector { subject, arms } => std::iter::once(&**subject)
            .chain(arms.iter().flat_map(|(option, value)| [option, value]))
            .collect(),
        ExprKind::Call { args, .. } => args.iter().collect(),
        _ => Vec::new(),
    }
}

/// The module and the file in it where Puppet's autoloader finds a class or defined
/// type: `ntp::server::config` is `manifests/server/config.wcv` (or `.pp`) of module
/// `ntp`.
/// The file is given without its extension.
fn autoload_path(name: &str) -> (&str, String) {
    match name.split_once("::") {
        Some((module, rest)) => (module, format!("manifests/{}", rest.replace("::", "/"))),
        None => (name, "manifests/init".to_owned()),
    }
}

fn op_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::LShift => "<<",
        BinOp::RShift => ">>",
        _ => "?",
    }
}

fn num(value: &Val) -> f64 {
    match value {
        Val::Int(i) => *i as f64,
        Val::Float(f) => *f,
        _ => f64::NAN,
    }
}

/// `+>`: the existing value, wrapped in an array if it is not one, with the new value
/// appended, flattened.
fn append(existing: Option<Val>, value: Val) -> Val {
    match existing {
        None | Some(Val::Undef) => value,
        Some(existing) => {
            let mut out = Vec::new();
            flatten_into(existing, &mut out);
            flatten_into(value, &mut out);
            Val::Array(out)
        }
    }
}

trait DiagnosticExt {
    fn with_related_mut(&mut self, span: Span, label: &str) -> &mut Self;
    fn with_label_mut(&mut self, label: &str) -> &mut Self;
}

impl DiagnosticExt for Diagnostic {
    fn with_related_mut(&mut self, span: Span, label: &str) -> &mut Self {
        self.related.push((span, label.to_owned()));
        self
    }

    fn with_label_mut(&mut self, label: &str) -> &mut Self {
        self.label = Some(label.to_owned());
        self
    }
}
