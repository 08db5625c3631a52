//! The evaluator: walks the syntax tree top to bottom (classes when they are
//! included), building resources, defaults, overrides, collectors and relationships,
//! then evaluates defined types and collectors until nothing new appears, and
//! finally resolves every relationship and writes the catalog.

use crate::diagnostic::{Diagnostic, Severity, Span};
use crate::syntax::*;
use crate::value::{Val, flatten_into, numeric_string};
use crate::{KnownTypes, Source};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use wconverge_catalog::{self as catalog, METAPARAMETERS, display_type_name};

mod catalog_output;
mod declared;
mod exports;
mod lazy;
mod node;

pub(crate) use lazy::evaluate_code;
pub use lazy::{check_lazy, evaluate_lazy, evaluate_lazy_truth, run_node_block};

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

type ScopeId = usize;
const TOP: ScopeId = 0;

struct Scope {
    parent: Option<ScopeId>,
    /// A class's scope (`$class::x` reads through these to inherited classes).
    class: bool,
    vars: HashMap<String, (Val, Span)>,
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
    Define(usize),
    Class(usize),
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
    container: Option<usize>,
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
    Collector(usize),
}

struct Relation {
    lhs: Operand,
    rhs: Operand,
    op: RelOp,
    span: Span,
}

/// Every resource of `sources` before every resource of `targets` (and notifying them).
struct EdgeRequest {
    sources: Vec<usize>,
    targets: Vec<usize>,
    notify: bool,
    span: Span,
    /// Classes and defined type instances named on each side that contain nothing:
    /// ordering passes through them (`a -> Class['empty'] -> b` orders a before b).
    empty_sources: Vec<usize>,
    empty_targets: Vec<usize>,
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
    matched: HashSet<usize>,
    matched_list: Vec<usize>,
    span: Span,
    /// An exported-resource collector has asked the store for other nodes' exports.
    fetched: bool,
}

#[derive(Clone)]
struct Ctx {
    scope: ScopeId,
    container: Option<usize>,
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
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Classes and defined types used and not defined (the module path may have them).
    missing: Vec<String>,
    /// Names whose module manifest exists and could not be read, with why.
    pub(crate) unreadable: HashMap<String, String>,
    /// The module of each file loaded from the module path (`$module_name`).
    pub(crate) module_files: HashMap<u32, String>,
    /// Where modules' manifests and Hiera's files come from.
    pub(crate) loader: &'a dyn crate::Loader,
    /// Other nodes' exported resources.
    pub(crate) exports: &'a dyn crate::Exports,
    /// This node's exported resources, made when the catalog is.
    exported: Vec<catalog::Export>,
    /// Whether a `<<| |>>` collector ran.
    collects_exports: bool,
    pub(crate) hiera: crate::hiera::Hiera,
    /// Files read while evaluating (EPP templates), numbered after `sources`.
    pub(crate) extra_sources: Vec<Source>,
    /// Each template parsed, by the name it was asked for (`None`: it failed, reported).
    templates: HashMap<String, Option<(u32, Rc<crate::syntax::DefineDef>)>>,
    /// What the templates being rendered have printed so far, innermost last.
    epp_output: Vec<String>,
    /// How many of `diagnostics` are errors: an expression whose operand reported one
    /// does not report its consequences too.
    errors: usize,
    classes: HashMap<String, usize>,
    defines: HashMap<String, usize>,
    /// Functions the manifests define, by name, to their index in the program.
    functions: HashMap<String, usize>,
    /// How deep functions call functions now.
    function_depth: usize,
    scopes: Vec<Scope>,
    class_scopes: HashMap<String, ScopeId>,
    /// The matching node definition's scope, once its body runs: classes declared from
    /// then on see it.
    node_scope: Option<ScopeId>,
    resources: Vec<Res>,
    index: HashMap<(String, String), usize>,
    /// Resources by their namevar where it differs from their title.
    aliases: HashMap<(String, String), usize>,
    /// Data type aliases resolved so far, by lowercased name.
    pub(crate) type_aliases: HashMap<String, Result<crate::ptype::PType, String>>,
    by_type: HashMap<String, Vec<usize>>,
    pending_defines: VecDeque<usize>,
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
    pub(crate) budget: Option<u64>,
    /// The node's attributes.
    pub(crate) attributes: node::NodeState<'a>,
    /// The types the manifests declare, ancestors folded in.
    pub(crate) declared_types: Vec<catalog::TypeSchema>,
    /// The objects the lambdas of `new` are initializing, innermost last: the lambda's
    /// parameter and the features set so far.
    pub(crate) initializing: Vec<(String, Vec<(String, Val)>)>,
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
            hiera: crate::hiera::Hiera::default(),
            extra_sources: Vec::new(),
            templates: HashMap::new(),
            epp_output: Vec::new(),
            errors: 0,
            classes: HashMap::new(),
            defines: HashMap::new(),
            functions: HashMap::new(),
            function_depth: 0,
            scopes: vec![Scope {
                parent: None,
                class: false,
                vars: HashMap::new(),
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

    fn error(&mut self, code: &str, span: Span, message: impl Into<String>) -> &mut Diagnostic {
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

    fn load_definitions(&mut self) {
        self.load_types();
        let program = Rc::clone(&self.program);
        let mut first: HashMap<String, Span> = HashMap::new();
        for (idx, class) in program.classes.iter().enumerate() {
            if let Some(previous) = first.insert(format!("class {}", class.name), class.span) {
                self.error(
                    "duplicate-definition",
                    class.span,
                    format!("class `{}` is defined twice", class.name),
                )
                .with_related_mut(previous, "first defined here")
                .help = Some("rename one of the classes, or merge them".into());
                continue;
            }
            self.classes.insert(class.name.clone(), idx);
            self.check_params(&class.params, &format!("class `{}`", class.name));
        }
        for (idx, function) in program.functions.iter().enumerate() {
            if let Some(previous) =
                first.insert(format!("function {}", function.name), function.span)
            {
                self.error(
                    "duplicate-definition",
                    function.span,
                    format!("function `{}` is defined twice", function.name),
                )
                .with_related_mut(previous, "first defined here")
                .help = Some("rename one of the functions, or merge them".into());
                continue;
            }
            if crate::functions::is_builtin(&function.name) {
                self.error(
                    "function-shadows-builtin",
                    function.span,
                    format!("`{}` is a built-in function", function.name),
                )
                .help = Some("give it a name of its module's namespace: `mymodule::name`".into());
                continue;
            }
            self.functions.insert(function.name.clone(), idx);
            self.check_params(&function.params, &format!("function `{}`", function.name));
        }
        for (idx, define) in program.defines.iter().enumerate() {
            if let Some(previous) = first.insert(format!("define {}", define.name), define.span) {
                self.error(
                    "duplicate-definition",
                    define.span,
                    format!("defined type `{}` is defined twice", define.name),
                )
                .with_related_mut(previous, "first defined here")
                .help = Some("rename one of the defined types, or merge them".into());
                continue;
            }
            if self.types.contains(&define.name) {
                self.error(
                    "define-shadows-type",
                    define.span,
                    format!(
                        "defined type `{}` has the name of a type a plugin provides",
                        define.name
                    ),
                )
                .help = Some(
                    "the plugin's type would always be chosen; rename the defined type".into(),
                );
                continue;
            }
            self.defines.insert(define.name.clone(), idx);
            self.check_params(&define.params, &format!("defined type `{}`", define.name));
        }
    }

    fn check_params(&mut self, params: &[Param], owner: &str) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for param in params {
            if let Some(assign) = param.default.as_ref().and_then(find_assignment) {
                self.error(
                    "assignment-in-default",
                    assign,
                    format!(
                        "the default of `${}` in {owner} assigns a variable",
                        param.name
                    ),
                )
                .help = Some(
                    "a parameter's default may not create variables; compute the value without `=`"
                        .into(),
                );
            }
            if let Some(previous) = seen.insert(&param.name, param.span) {
                self.error(
                    "duplicate-parameter",
                    param.span,
                    format!("parameter `${}` of {owner} is declared twice", param.name),
                )
                .with_related_mut(previous, "first declared here");
            }
            if METAPARAMETERS.contains(&param.name.as_str())
                || ["title", "name"].contains(&param.name.as_str())
            {
                self.error("reserved-parameter", param.span, format!("parameter `${}` of {owner} has a reserved name", param.name))
                    .help = Some("`title`, `name` and the metaparameters are set for every resource; rename the parameter".into());
            }
        }
    }

    fn evaluate_node(&mut self) {
        let program = Rc::clone(&self.program);
        if program.nodes.is_empty() {
            return;
        }
        let mut seen: HashMap<String, Span> = HashMap::new();
        for definition in &program.nodes {
            for (host, span) in &definition.matches {
                let key = match host {
                    HostMatch::Name(name) => format!("name {}", name.to_ascii_lowercase()),
                    HostMatch::Regex(pattern) => format!("regex {pattern}"),
                    HostMatch::Default => "default".to_owned(),
                };
                if let Some(first) = seen.insert(key, *span) {
                    self.error("duplicate-node", *span, "this node match is given twice")
                        .with_related_mut(first, "first given here")
                        .help = Some("merge the two node definitions".into());
                }
            }
        }
        let node = self.node.to_ascii_lowercase();
        let mut chosen = None;
        'exact: for definition in &program.nodes {
            for (host, _) in &definition.matches {
                if let HostMatch::Name(name) = host
                    && name.to_ascii_lowercase() == node
                {
                    chosen = Some(definition);
                    break 'exact;
                }
            }
        }
        if chosen.is_none() {
            'regex: for definition in &program.nodes {
                for (host, span) in &definition.matches {
                    // The match's groups are `$0`, `$1`... in the node's body.
                    if let HostMatch::Regex(pattern) = host
                        && self.regex_match(pattern, self.node, *span)
                    {
                        chosen = Some(definition);
                        break 'regex;
                    }
                }
            }
        }
        if chosen.is_none() {
            chosen = program.nodes.iter().find(|definition| {
                definition
                    .matches
                    .iter()
                    .any(|(host, _)| *host == HostMatch::Default)
            });
        }
        let Some(definition) = chosen else {
            let span = program.nodes[0].span;
            self.error(
                "no-node-match",
                span,
                format!("no node definition matches the node `{}`", self.node),
            )
            .help = Some(
                "add a `node default { }` definition, or pass the node's name with `--node NAME`"
                    .into(),
            );
            return;
        };
        let scope = self.new_scope(Some(TOP));
        self.node_scope = Some(scope);
        let ctx = Ctx {
            scope,
            ..self.ctx.clone()
        };
        let saved = std::mem::replace(&mut self.ctx, ctx);
        self.block(&definition.body);
        self.ctx = saved;
    }

    fn new_scope(&mut self, parent: Option<ScopeId>) -> ScopeId {
        self.scopes.push(Scope {
            parent,
            class: false,
            vars: HashMap::new(),
            defaults: Vec::new(),
        });
        self.scopes.len() - 1
    }

    fn next_order(&mut self) -> Vec<u32> {
        self.seq += 1;
        let mut order = self.ctx.order.clone();
        order.push(self.seq);
        order
    }

    // ---- expressions ----

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
        }
        last
    }

    fn eval(&mut self, expr: &Expr) -> Val {
        let span = expr.span;
        if self.budget.is_some() {
            if !self.spend(1, span) {
                return Val::Undef;
            }
        } else if !self.work(1, span) {
            return Val::Undef;
        }
        let value = self.eval_kind(expr);
        // What an expression builds is bounded: a string doubled in a loop, an array of
        // itself, cannot take the machine's memory.
        match &expr.kind {
            ExprKind::Array(_)
            | ExprKind::Hash(_)
            | ExprKind::Interp(_)
            | ExprKind::Binary(..)
            | ExprKind::Call { .. } => self.bounded(value, span),
            _ => value,
        }
    }

    /// Counts `cost` of the compile's work; once [`MAX_COMPILE_WORK`] is done, reports it
    /// (once) and answers false.
    pub(crate) fn work(&mut self, cost: u64, span: Span) -> bool {
        if self.work > MAX_COMPILE_WORK {
            return false;
        }
        self.work = self.work.saturating_add(cost);
        if self.work > MAX_COMPILE_WORK {
            self.error(
                "work-limit",
                span,
                format!(
                    "the manifests did more work than a compile may ({MAX_COMPILE_WORK} steps: \
                     expressions evaluated, lambdas called, regular expressions compiled, and \
                     the values built, copied and compared); the compile stopped here"
                ),
            )
            .help =
                Some("look for a loop that runs without end or builds ever larger values".into());
            return false;
        }
        true
    }

    /// Counts `cost` of the compile's work (nothing in a lazy value, which has a budget
    /// of its own); false once the compile has done all it may.
    pub(crate) fn count_work(&mut self, cost: u64, span: Span) -> bool {
        self.budget.is_some() || self.work(cost, span)
    }

    /// `value`, if it is within the size limits; else `undef`, with an error.
    fn bounded(&mut self, value: Val, span: Span) -> Val {
        match &value {
            Val::Str(text) if text.len() > MAX_STRING_BYTES => {
                self.value_limit(
                    span,
                    format!(
                        "this builds a string of {} bytes; a string may have at most \
                         {MAX_STRING_BYTES} (16 MiB)",
                        text.len()
                    ),
                );
                Val::Undef
            }
            Val::Array(_) | Val::Hash(_) => {
                let size = lazy::size_capped(&value, MAX_VALUE_SIZE + 1);
                if self.budget.is_none() && !self.work(size, span) {
                    return Val::Undef;
                }
                if size > MAX_VALUE_SIZE {
                    self.value_limit(
                        span,
                        format!(
                            "this builds a value of more than {MAX_VALUE_SIZE} elements (a \
                             string counting one per eight bytes), the limit"
                        ),
                    );
                    return Val::Undef;
                }
                value
            }
            _ => value,
        }
    }

    pub(crate) fn value_limit(&mut self, span: Span, message: String) {
        self.error("value-limit", span, message).help = Some(
            "look for a value that grows in a loop, or that contains itself more than once".into(),
        );
    }

    fn eval_kind(&mut self, expr: &Expr) -> Val {
        let span = expr.span;
        match &expr.kind {
            ExprKind::Str(text) | ExprKind::Bare(text) => Val::Str(text.clone()),
            ExprKind::Interp(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        InterpPart::Lit(text) => out.push_str(text),
                        InterpPart::Expr(inner) => {
                            let value = self.eval(inner);
                            if let Val::Lazy(_) = value {
                                self.error(
                                    "lazy-in-string",
                                    inner.span,
                                    "a lazy value has no text until the run",
                                )
                                .help = Some("interpolate inside the lazy block instead".into());
                            }
                            // Measured before it is written out: the estimate is at most
                            // twice the text, plus a little.
                            let room = MAX_STRING_BYTES.saturating_sub(out.len());
                            let most = 2 * room + 64;
                            let estimate = value.display_len_capped(most);
                            if estimate > room
                                && (estimate >= most || value.to_interpolated().len() > room)
                            {
                                self.value_limit(
                                    span,
                                    format!(
                                        "this builds a string of more than {MAX_STRING_BYTES} \
                                         bytes (16 MiB), the limit"
                                    ),
                                );
                                return Val::Undef;
                            }
                            out.push_str(&value.to_interpolated());
                        }
                    }
                }
                Val::Str(out)
            }
            ExprKind::Int(value) => Val::Int(*value),
            ExprKind::Float(value) => Val::Float(*value),
            ExprKind::Bool(value) => Val::Bool(*value),
            ExprKind::Undef => Val::Undef,
            ExprKind::Default => Val::Default,
            ExprKind::Regex(pattern) => {
                self.regex(pattern, span);
                Val::Regex(pattern.clone())
            }
            ExprKind::TypeRef(name) => Val::Ref {
                type_name: name.to_ascii_lowercase(),
                title: None,
            },
            ExprKind::Var(name) if name == "node" => self.node_read(&[], span),
            ExprKind::Var(name) => self.lookup(name, span),
            ExprKind::Array(items) => {
                let mut total = 0;
                let mut built = Vec::with_capacity(items.len());
                for item in items {
                    let value = self.eval(item);
                    if !self.grow(&mut total, &value, span) {
                        return Val::Undef;
                    }
                    built.push(value);
                }
                Val::Array(built)
            }
            ExprKind::Hash(entries) => {
                // Each key is compared with the ones before it.
                let n = entries.len() as u64;
                if self.budget.is_none() && !self.work(n * n.saturating_sub(1) / 2, span) {
                    return Val::Undef;
                }
                let mut out: Vec<(Val, Val)> = Vec::with_capacity(entries.len());
                let mut total = 0;
                for (key, value) in entries {
                    let key = self.eval(key);
                    let value = self.eval(value);
                    if !self.grow(&mut total, &key, span) || !self.grow(&mut total, &value, span) {
                        return Val::Undef;
                    }
                    match out.iter_mut().find(|(existing, _)| *existing == key) {
                        Some((_, existing)) => *existing = value,
                        None => out.push((key, value)),
                    }
                }
                Val::Hash(out)
            }
            ExprKind::Access(target, keys) => {
                if let Some(path) = node::read_keys(expr) {
                    self.node_read(&path, span)
                } else if let Some(layer) = node::layer_root(expr) {
                    self.node_layer_read(layer, span)
                } else {
                    self.access(target, keys, span)
                }
            }
            ExprKind::Not(operand) => Val::Bool(!self.eval(operand).truthy()),
            ExprKind::Neg(operand) => match (self.errors, self.eval(operand)) {
                (before, Val::Undef) if self.errors > before => Val::Undef,
                (_, operand) => self.negate(operand, span),
            },
            ExprKind::Binary(BinOp::And, lhs, rhs) => {
                Val::Bool(self.eval(lhs).truthy() && self.eval(rhs).truthy())
            }
            ExprKind::Binary(BinOp::Or, lhs, rhs) => {
                Val::Bool(self.eval(lhs).truthy() || self.eval(rhs).truthy())
            }
            ExprKind::Binary(op, lhs, rhs) => {
                let before = self.errors;
                let left = self.eval(lhs);
                let right = self.eval(rhs);
                if self.errors > before {
                    // Reported: not again as `undef + 1`.
                    return Val::Undef;
                }
                self.binary(*op, left, right, span)
            }
            ExprKind::Assign(name, value) => {
                let value = self.eval(value);
                self.assign(name, value.clone(), span);
                value
            }
            ExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                if self.eval(cond).truthy() {
                    self.block(then)
                } else if let Some(otherwise) = otherwise {
                    self.block(otherwise)
                } else {
                    Val::Undef
                }
            }
            ExprKind::Unless {
                cond,
                then,
                otherwise,
            } => {
                if !self.eval(cond).truthy() {
                    self.block(then)
                } else if let Some(otherwise) = otherwise {
                    self.block(otherwise)
                } else {
                    Val::Undef
                }
            }
            ExprKind::Case { subject, arms } => {
                let subject = self.eval(subject);
                let mut default_arm = None;
                for arm in arms {
                    for option in &arm.options {
                        if matches!(option.kind, ExprKind::Default) {
                            default_arm.get_or_insert(arm);
                            continue;
                        }
                        let option_value = self.eval(option);
                        if self.matches_option(&subject, &option_value, option.span) {
                            return self.block(&arm.body);
                        }
                    }
                }
                match default_arm {
                    Some(arm) => self.block(&arm.body),
                    None => Val::Undef,
                }
            }
            ExprKind::Selector { subject, arms } => {
                let subject = self.eval(subject);
                let mut default_value = None;
                for (option, value) in arms {
                    if matches!(option.kind, ExprKind::Default) {
                        default_value.get_or_insert(value);
                        continue;
                    }
                    let option_value = self.eval(option);
                    if self.matches_option(&subject, &option_value, option.span) {
                        return self.eval(value);
                    }
                }
                match default_value {
                    Some(value) => self.eval(value),
                    None => {
                        self.error(
                            "no-selector-match",
                            span,
                            format!(
                                "no option of the selector matches `{}`",
                                subject.to_display()
                            ),
                        )
                        .help = Some("add a `default => value` option".into());
                        Val::Undef
                    }
                }
            }
            ExprKind::Call { name, args, lambda } => self.call(name, args, lambda.as_deref(), span),
            ExprKind::Resource(resource) => self.resource_expr(resource, span),
            ExprKind::Defaults { type_name, ops } => {
                self.defaults_expr(type_name, ops, span);
                Val::Undef
            }
            ExprKind::Override { target, ops } => {
                self.override_expr(target, ops, span);
                Val::Undef
            }
            ExprKind::Collector(_) => {
                self.error("collector-value", span, "a collector has no value here")
                    .help = Some("a collector stands alone as a statement, or as a whole side of a relationship (`Package <| |> -> Service['x']`), never inside an array or an expression".into());
                Val::Undef
            }
            ExprKind::Relation(..) => match self.operand(expr) {
                Operand::Refs(refs) => Val::Array(
                    refs.into_iter()
                        .map(|(t, title)| Val::reference(&t, &title))
                        .collect(),
                ),
                Operand::Collector(_) => Val::Undef,
            },
            ExprKind::Definition => Val::Undef,
            ExprKind::Lazy(inner) => self.lazy(inner, span),
            ExprKind::NodeLayer(layer) => self.node_layer_read(*layer, span),
            ExprKind::NodeWrite { layer, keys, value } => {
                self.node_write(*layer, keys, value, span)
            }
            ExprKind::FeatureWrite {
                var,
                key,
                append,
                value,
            } => self.feature_write(var, key, *append, value, span),
        }
    }

    fn matches_option(&mut self, subject: &Val, option: &Val, span: Span) -> bool {
        match option {
            // `case $x { String: ... }`: a data type matches the values of that type.
            Val::Type(_) | Val::Ref { title: None, .. } => {
                self.value_matches_type(subject, option, span) == Some(true)
            }
            Val::Regex(pattern) => match subject {
                Val::Str(text) => self.regex_match(pattern, text, span),
                _ => false,
            },
            // As in Puppet 4: an array option matches an equal array, not any element
            // (list the values with commas for that).
            other => subject.equals(other),
        }
    }

    pub(crate) fn regex(&mut self, pattern: &str, span: Span) -> Option<regex::Regex> {
        if let Some(cached) = self.regexes.get(pattern) {
            return cached.clone();
        }
        // The checks of types run one small evaluator per value, each compiling the same
        // few patterns: this thread keeps the valid ones it compiled.
        if let Some(shared) = COMPILED.with_borrow(|compiled| compiled.get(pattern).cloned()) {
            self.regexes
                .insert(pattern.to_owned(), Some(shared.clone()));
            return Some(shared);
        }
        // Each pattern compiled costs time and up to a MiB, kept to the end.
        if self.budget.is_none() && !self.work(REGEX_WORK, span) {
            self.regexes.insert(pattern.to_owned(), None);
            return None;
        }
        let compiled = match regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
        {
            Ok(regex) => {
                COMPILED.with_borrow_mut(|compiled| {
                    if compiled.len() >= SHARED_REGEXES {
                        compiled.clear();
                    }
                    compiled.insert(pattern.to_owned(), regex.clone());
                });
                Some(regex)
            }
            Err(error) => {
                let message = error.to_string();
                let first = message.lines().last().unwrap_or_default().trim().to_owned();
                self.error(
                    "regex",
                    span,
                    format!("invalid regular expression `/{pattern}/`: {first}"),
                )
                .help = Some(
                    "fix the pattern; the syntax is Rust's `regex` crate, close to Perl's".into(),
                );
                None
            }
        };
        self.regexes.insert(pattern.to_owned(), compiled.clone());
        compiled
    }

    fn regex_match(&mut self, pattern: &str, text: &str, span: Span) -> bool {
        let Some(regex) = self.regex(pattern, span) else {
            return false;
        };
        match regex.captures(text) {
            Some(captures) => {
                self.captures = captures
                    .iter()
                    .map(|group| group.map_or(Val::Undef, |m| Val::Str(m.as_str().to_owned())))
                    .collect();
                true
            }
            None => {
                self.captures.clear();
                false
            }
        }
    }

    fn lookup(&mut self, name: &str, span: Span) -> Val {
        let value = self.lookup_value(name, span);
        if !self.charge_copy(&value, span) {
            return Val::Undef;
        }
        value
    }

    /// Counts what a copy of `value` costs (reading a variable or a node attribute copies
    /// it): against a lazy value's budget, or the compile's work, where each element
    /// counts [`COPY_WORK`]. False once there is no budget left.
    pub(crate) fn charge_copy(&mut self, value: &Val, span: Span) -> bool {
        match self.budget {
            Some(budget) => {
                let cost = lazy::size_capped(value, budget);
                self.spend(cost, span)
            }
            None => {
                let cap = MAX_COMPILE_WORK.saturating_sub(self.work) / COPY_WORK + 1;
                let cost = lazy::size_capped(value, cap);
                self.work(cost.saturating_mul(COPY_WORK), span)
            }
        }
    }

    /// Adds `value` to the `total` size of a value being built; false (with an error)
    /// once that passes [`MAX_VALUE_SIZE`]. A collection is measured as it grows, so a
    /// copy too many is refused before it is made, not after.
    pub(crate) fn grow(&mut self, total: &mut u64, value: &Val, span: Span) -> bool {
        *total += lazy::size_capped(value, MAX_VALUE_SIZE + 1);
        if *total > MAX_VALUE_SIZE {
            self.value_limit(
                span,
                format!(
                    "this builds a value of more than {MAX_VALUE_SIZE} elements (a string \
                     counting one per eight bytes), the limit"
                ),
            );
            return false;
        }
        true
    }

    fn lookup_value(&mut self, name: &str, span: Span) -> Val {
        if let Ok(group) = name.parse::<usize>() {
            return self.captures.get(group).cloned().unwrap_or(Val::Undef);
        }
        let (scope, simple) = if let Some(top) = name.strip_prefix("::") {
            if top.contains("::") {
                return self.qualified(top, span);
            }
            (Some(TOP), top)
        } else if name.contains("::") {
            return self.qualified(name, span);
        } else {
            (Some(self.ctx.scope), name)
        };
        let mut current = scope;
        while let Some(id) = current {
            if let Some((value, _)) = self.scopes[id].vars.get(simple) {
                return value.clone();
            }
            current = self.scopes[id].parent;
        }
        let in_define = self
            .ctx
            .container
            .is_some_and(|idx| matches!(self.resources[idx].kind, Kind::Define(_)));
        let help = if in_define {
            "a defined type's body sees its parameters, `$title`, `$name` and the top scope, not the scope that declared the instance; pass the value as a parameter"
        } else {
            "assign it before this line, or check its spelling; a class's variable is read as `$class::name` after the class is included"
        };
        self.error(
            "unknown-variable",
            span,
            format!("unknown variable `${name}`"),
        )
        .help = Some(help.into());
        Val::Undef
    }

    /// Spends `cost` of a lazy evaluation's budget; once it is spent, reports it (once)
    /// and every further expression is `undef`.
    fn spend(&mut self, cost: u64, span: Span) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        if budget == 0 {
            return false;
        }
        if cost >= budget {
            self.budget = Some(0);
            self.error(
                "lazy-budget",
                span,
                format!(
                    "it did more work than a lazy value may ({} steps and values read)",
                    lazy::LAZY_BUDGET
                ),
            )
            .help = Some("simplify the expression, or compute the value at compile time".into());
            return false;
        }
        self.budget = Some(budget - cost);
        true
    }

    /// The value of a simple variable visible here, without reporting anything.
    pub(crate) fn peek_variable(&self, name: &str) -> Option<Val> {
        if name.contains("::") {
            return None;
        }
        let mut current = Some(self.ctx.scope);
        while let Some(id) = current {
            if let Some((value, _)) = self.scopes[id].vars.get(name) {
                return Some(value.clone());
            }
            current = self.scopes[id].parent;
        }
        None
    }

    /// Evaluates `expr` in top scope (a type alias's definition).
    pub(crate) fn eval_at_top(&mut self, expr: &Expr) -> Val {
        let saved = std::mem::replace(&mut self.ctx.scope, TOP);
        let value = self.eval(expr);
        self.ctx.scope = saved;
        value
    }

    /// stdlib's `ensure_resource`: declares `type_name[title]` with `attributes` unless
    /// it is declared already (with other attributes, that is a duplicate, as in
    /// stdlib).
    pub(crate) fn ensure_resource(
        &mut self,
        type_name: &str,
        title: &str,
        attributes: Vec<(Val, Val)>,
        span: Span,
    ) {
        let key = (type_name.to_owned(), title.to_owned());
        if let Some(&existing) = self.index.get(&key).or(self.aliases.get(&key)) {
            let differs = attributes.iter().find(|(name, value)| {
                self.resources[existing]
                    .attr(&name.to_interpolated())
                    .is_none_or(|attr| !attr.value.equals(value))
            });
            if let Some((name, _)) = differs {
                let reference = self.resources[existing].reference();
                let first = self.resources[existing].span;
                self.error(
                    "duplicate-title",
                    span,
                    format!(
                        "`{reference}` is declared already, without `{}` as given here",
                        name.to_interpolated()
                    ),
                )
                .with_related_mut(first, "declared here")
                .help = Some("declare it once, with the attributes both need".into());
            }
            return;
        }
        let Some(kind) = self.kind_of(type_name) else {
            self.unknown_type(type_name, span);
            return;
        };
        let ops = attributes
            .into_iter()
            .map(|(name, value)| Op {
                name: name.to_interpolated().into(),
                value,
                span,
                append: false,
            })
            .collect();
        self.create(type_name, title, kind, ops, Status::Realized, span);
    }

    /// Whether the current scope is the node's or lies below it.
    fn reaches_node_scope(&self) -> bool {
        let Some(node) = self.node_scope else {
            return false;
        };
        let mut current = Some(self.ctx.scope);
        let mut steps = 0;
        while let Some(id) = current {
            if id == node {
                return true;
            }
            steps += 1;
            if steps > self.scopes.len() {
                return false;
            }
            current = self.scopes[id].parent;
        }
        false
    }

    /// The program being evaluated (its definitions).
    pub(crate) fn program_rc(&self) -> Rc<Program> {
        Rc::clone(&self.program)
    }

    /// A data type written in the language by wconverge itself (Stdlib's aliases),
    /// evaluated; it is a file of the compile of its own, so its errors have a place.
    pub(crate) fn builtin_type(
        &mut self,
        name: &str,
        text: &str,
        span: Span,
    ) -> Result<crate::ptype::PType, String> {
        let file = u32::try_from(self.sources.len() + self.extra_sources.len()).unwrap_or(u32::MAX);
        let source = Source::new(format!("<built-in {}>", display_type_name(name)), text);
        self.line_starts
            .push(crate::diagnostic::LineStarts::new(&source.text));
        let mut diagnostics = Vec::new();
        let tokens = crate::lexer::lex(file, text, &mut diagnostics);
        let mut program = Program::default();
        let block = crate::parser::parse_file(text, tokens, &mut program, &mut diagnostics);
        self.extra_sources.push(source);
        if diagnostics.iter().any(Diagnostic::is_error) {
            return Err(format!(
                "the built-in type `{}` does not parse",
                display_type_name(name)
            ));
        }
        let saved = std::mem::replace(&mut self.ctx.scope, TOP);
        let value = block.first().map_or(Val::Undef, |expr| self.eval(expr));
        self.ctx.scope = saved;
        let _ = span;
        crate::ptype::PType::of(&value).ok_or_else(|| {
            format!(
                "the built-in type `{}` is not a type",
                display_type_name(name)
            )
        })
    }

    /// A file of the compile: a source given, or one read while evaluating.
    pub(crate) fn source_of(&self, file: u32) -> &Source {
        let file = file as usize;
        match self.sources.get(file) {
            Some(source) => source,
            None => &self.extra_sources[file - self.sources.len()],
        }
    }

    /// Renders an EPP template: `key` identifies it (its path, or the text of an inline
    /// one), `name` is how messages call it, `source` reads it the first time, `given`
    /// are the parameters.
    pub(crate) fn render_epp(
        &mut self,
        key: &str,
        name: &str,
        source: impl FnOnce(&mut Self) -> Option<Source>,
        given: Vec<(Val, Val)>,
        span: Span,
    ) -> Val {
        let parsed = match self.templates.get(key) {
            Some(parsed) => parsed.clone(),
            None => {
                let parsed = source(self).and_then(|source| {
                    let file = u32::try_from(self.sources.len() + self.extra_sources.len())
                        .unwrap_or(u32::MAX);
                    self.line_starts
                        .push(crate::diagnostic::LineStarts::new(&source.text));
                    let mut diagnostics = Vec::new();
                    let parsed = crate::epp::parse(file, &source, &mut diagnostics);
                    self.extra_sources.push(source);
                    for diagnostic in diagnostics {
                        if diagnostic.is_error() {
                            self.errors += 1;
                        }
                        self.diagnostics.push(diagnostic);
                    }
                    parsed.map(|definition| (file, Rc::new(definition)))
                });
                self.templates.insert(key.to_owned(), parsed.clone());
                parsed
            }
        };
        let Some((_, template)) = parsed else {
            return Val::Undef;
        };
        if self.epp_output.len() >= crate::MAX_NESTING {
            self.error(
                "epp-depth",
                span,
                format!(
                    "templates render templates more than {} deep (the limit)",
                    crate::MAX_NESTING
                ),
            );
            return Val::Undef;
        }
        // The template sees its parameters and top scope, as in Puppet.
        let scope = self.new_scope(Some(TOP));
        let mut fits = true;
        if template.params.is_empty() {
            for (key, value) in given {
                match key {
                    Val::Str(key) => self.set_var(scope, &key, value, span),
                    other => {
                        self.error(
                            "epp-parameters",
                            span,
                            format!(
                                "template parameters are named by strings, not {} `{}`",
                                other.type_name(),
                                other.to_display()
                            ),
                        );
                        fits = false;
                    }
                }
            }
        } else {
            for (key, _) in &given {
                if !template
                    .params
                    .iter()
                    .any(|param| Val::Str(param.name.clone()) == *key)
                {
                    let names: Vec<String> = template
                        .params
                        .iter()
                        .map(|param| format!("${}", param.name))
                        .collect();
                    self.error(
                        "epp-parameters",
                        span,
                        format!(
                            "template `{name}` has no parameter `{}`",
                            key.to_interpolated()
                        ),
                    )
                    .help = Some(format!("its parameters: {}", names.join(", ")));
                    fits = false;
                }
            }
            let saved = std::mem::replace(&mut self.ctx.scope, scope);
            for param in &template.params {
                let value = Val::hash_get(&given, &Val::Str(param.name.clone())).cloned();
                let owner = format!("template `{name}`");
                let passed = format!("{{ '{}' => ... }}", param.name);
                let (value, fit) = self.parameter_value(param, value, &owner, &passed, span);
                fits &= fit;
                self.set_var(scope, &param.name, value, param.span);
            }
            self.ctx.scope = saved;
        }
        if !fits {
            return Val::Undef;
        }
        let saved = std::mem::replace(&mut self.ctx.scope, scope);
        self.epp_output.push(String::new());
        self.block(&template.body);
        let output = self.epp_output.pop().unwrap_or_default();
        self.ctx.scope = saved;
        Val::Str(output)
    }

    /// Prints into the template being rendered.
    pub(crate) fn epp_print(&mut self, value: &Val, span: Span) {
        let text = value.to_interpolated();
        let Some(output) = self.epp_output.last_mut() else {
            self.error(
                "epp-outside",
                span,
                "this prints into an EPP template, and none is being rendered",
            );
            return;
        };
        if output.len() + text.len() > MAX_STRING_BYTES {
            self.value_limit(
                span,
                format!(
                    "a template renders more than {MAX_STRING_BYTES} bytes (16 MiB), the limit"
                ),
            );
            return;
        }
        output.push_str(&text);
    }

    /// A top-scope variable (a fact, `$trusted`...), without reporting anything.
    pub(crate) fn top_variable(&self, name: &str) -> Option<Val> {
        self.scopes[TOP]
            .vars
            .get(name)
            .map(|(value, _)| value.clone())
    }

    /// Whether a variable is visible from here, without reporting anything.
    fn variable_exists(&self, name: &str) -> bool {
        if let Ok(group) = name.parse::<usize>() {
            return group < self.captures.len();
        }
        if name == "facts" || name == "node" {
            return true;
        }
        let (start, name) = match name.strip_prefix("::") {
            Some(top) => (TOP, top),
            None => (self.ctx.scope, name),
        };
        match name.rsplit_once("::") {
            Some((class, variable)) => self.class_variable(class, variable).is_some(),
            None => {
                let mut current = Some(start);
                while let Some(id) = current {
                    if self.scopes[id].vars.contains_key(name) {
                        return true;
                    }
                    current = self.scopes[id].parent;
                }
                false
            }
        }
    }

    /// A variable of class `class` (included), or of a class it inherits from, as
    /// `$class::variable` reads it.
    fn class_variable(&self, class: &str, variable: &str) -> Option<&Val> {
        let mut current = self.class_scopes.get(class).copied();
        while let Some(id) = current {
            if let Some((value, _)) = self.scopes[id].vars.get(variable) {
                return Some(value);
            }
            // Up through inherited classes only: not the node or top scope.
            current = self.scopes[id]
                .parent
                .filter(|parent| self.scopes[*parent].class);
        }
        None
    }

    fn qualified(&mut self, name: &str, span: Span) -> Val {
        let (class, variable) = name.rsplit_once("::").unwrap_or(("", name));
        if let Some(value) = self.class_variable(class, variable) {
            return value.clone();
        }
        if !self.class_scopes.contains_key(class) {
            self.error(
                "unknown-variable",
                span,
                format!("`${name}` reads a variable of class `{class}`, which is not included"),
            )
            .help = Some(format!("include `{class}` before this line"));
            return Val::Undef;
        }
        self.error(
            "unknown-variable",
            span,
            format!("class `{class}` has no variable `${variable}`"),
        );
        Val::Undef
    }

    fn assign(&mut self, name: &str, value: Val, span: Span) {
        if name.parse::<usize>().is_ok() {
            self.error(
                "assign-match-variable",
                span,
                format!("`${name}` holds a regular expression match and cannot be assigned"),
            );
            return;
        }
        let scope = self.ctx.scope;
        self.set_var(scope, name, value, span);
    }

    fn set_var(&mut self, scope: ScopeId, name: &str, value: Val, span: Span) {
        if name == "node" {
            self.error(
                "assign-node",
                span,
                "`$node` holds the node's attributes and cannot be assigned or shadowed",
            )
            .help = Some(
                "write an attribute with `$node.default['key'] = value`, or use another name"
                    .into(),
            );
            return;
        }
        // Not in any scope, as a parameter neither: it would hide the machine's facts.
        if matches!(name, "facts" | "trusted" | "server_facts") {
            self.error(
                "assign-facts",
                span,
                format!("`${name}` holds facts about this node and cannot be assigned or shadowed"),
            )
            .help = Some("use another name".into());
            return;
        }
        if let Some((_, previous)) = self.scopes[scope].vars.get(name) {
            let previous = *previous;
            if previous == Span::new(0, 0, 0) {
                // Set before any manifest: a fact, or a variable `puppet apply` sets.
                self.error(
                    "reassigned-variable",
                    span,
                    format!("`${name}` is a fact (or a variable set for every node) at top scope, and cannot be assigned there"),
                )
                .help = Some("use another name, or assign it inside a class".into());
                return;
            }
            self.error(
                "reassigned-variable",
                span,
                format!("`${name}` is already assigned in this scope"),
            )
            .with_related_mut(previous, "first assigned here")
            .help = Some("variables are assigned once per scope; use a new name".into());
            return;
        }
        self.scopes[scope]
            .vars
            .insert(name.to_owned(), (value, span));
    }

    /// Replaces the value of `name` in the nearest scope that has it (the object the
    /// lambda of `new` initializes, after a feature is written).
    pub(crate) fn rebind(&mut self, name: &str, value: Val) {
        let mut scope = Some(self.ctx.scope);
        while let Some(id) = scope {
            if let Some(entry) = self.scopes[id].vars.get_mut(name) {
                entry.0 = value;
                return;
            }
            scope = self.scopes[id].parent;
        }
    }

    fn access(&mut self, target: &Expr, keys: &[Expr], span: Span) -> Val {
        let before = self.errors;
        let target = self.eval(target);
        let keys: Vec<Val> = keys.iter().map(|key| self.eval(key)).collect();
        if self.errors > before {
            // Reported: not again as "cannot index undef".
            return Val::Undef;
        }
        match target {
            Val::Ref {
                type_name,
                title: None,
            } => self.type_access(&type_name, keys, span),
            Val::Ref {
                type_name,
                title: Some(title),
            } => {
                // `File['/etc/motd']['mode']` reads an attribute of a declared resource.
                let [Val::Str(attribute)] = keys.as_slice() else {
                    self.error(
                        "access",
                        span,
                        "a resource's attribute is read with one name: `File['a']['mode']`",
                    );
                    return Val::Undef;
                };
                match self.index.get(&(type_name.clone(), title.clone())) {
                    Some(&idx) => self.resources[idx]
                        .attr(attribute)
                        .map_or(Val::Undef, |attr| attr.value.clone()),
                    None => {
                        self.error(
                            "unknown-resource",
                            span,
                            format!(
                                "`{}` is not declared (yet)",
                                Val::reference(&type_name, &title).to_display()
                            ),
                        );
                        Val::Undef
                    }
                }
            }
            Val::Array(items) => {
                match select(items.len(), &keys) {
                    Some(Selection::One(at)) => items.get(at).cloned().unwrap_or(Val::Undef),
                    Some(Selection::Range(from, to)) => Val::Array(items[from..to].to_vec()),
                    None => {
                        self.error("access", span, "an array is indexed by an integer: `$list[0]`, or sliced: `$list[1, 2]`");
                        Val::Undef
                    }
                }
            }
            Val::Hash(entries) => {
                if keys.len() == 1 {
                    Val::hash_get(&entries, &keys[0])
                        .cloned()
                        .unwrap_or(Val::Undef)
                } else {
                    Val::Array(
                        keys.iter()
                            .map(|key| Val::hash_get(&entries, key).cloned().unwrap_or(Val::Undef))
                            .collect(),
                    )
                }
            }
            Val::Str(text) => {
                let chars: Vec<char> = text.chars().collect();
                match select(chars.len(), &keys) {
                    Some(Selection::One(at)) => chars
                        .get(at)
                        .map_or(Val::Undef, |c| Val::Str(c.to_string())),
                    Some(Selection::Range(from, to)) => Val::Str(chars[from..to].iter().collect()),
                    None => {
                        self.error(
                            "access",
                            span,
                            "a string is indexed by an integer: `$text[0]`",
                        );
                        Val::Undef
                    }
                }
            }
            other => {
                self.error("access", span, format!("cannot index {} `{}`", other.type_name(), other.to_display()))
                    .help = Some("only arrays, hashes, strings and types can be indexed; check the variable holds what you expect".into());
                Val::Undef
            }
        }
    }

    /// `File['a', 'b']`, `Class['foo']`, `Resource['file', 'a']`.
    fn type_access(&mut self, type_name: &str, keys: Vec<Val>, span: Span) -> Val {
        // A data type with parameters (`Array[String]`, `Integer[1, 10]`) is a value.
        if self.is_data_type(type_name) {
            return match crate::ptype::PType::named(type_name, &keys) {
                Ok(ptype) => Val::Type(Box::new(ptype)),
                Err(message) => {
                    self.error("bad-type", span, message).help =
                        Some("see Puppet's data types in docs/language.md, Types".into());
                    Val::Undef
                }
            };
        }
        let (type_name, keys) = if type_name == "resource" {
            let mut keys = keys.into_iter();
            match keys.next() {
                Some(Val::Str(name)) => (name.to_ascii_lowercase(), keys.collect::<Vec<_>>()),
                Some(Val::Ref {
                    type_name,
                    title: None,
                }) => (type_name, keys.collect()),
                _ => {
                    self.error(
                        "access",
                        span,
                        "`Resource[...]` takes a type first: `Resource['file', '/tmp/a']`",
                    );
                    return Val::Undef;
                }
            }
        } else {
            (type_name.to_owned(), keys)
        };
        let mut titles = Vec::new();
        for key in keys {
            flatten_into(key, &mut titles);
        }
        let mut refs = Vec::new();
        for title in titles {
            match title {
                Val::Str(title) if !title.is_empty() => {
                    let title = if type_name == "class" {
                        title.trim_start_matches("::").to_ascii_lowercase()
                    } else {
                        title
                    };
                    refs.push(Val::reference(&type_name, &title));
                }
                other => {
                    self.error(
                        "access",
                        span,
                        format!(
                            "a title must be a non-empty string, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
        if refs.len() == 1 {
            refs.pop().expect("one element")
        } else {
            Val::Array(refs)
        }
    }

    fn binary(&mut self, op: BinOp, left: Val, right: Val, span: Span) -> Val {
        use BinOp::*;
        // Comparing, searching and matching walk both operands (a regex over 16 MiB takes
        // a good part of a second), and `+` and `<<` copy them.
        if self.budget.is_none() {
            let cap = MAX_COMPILE_WORK.saturating_sub(self.work) / COPY_WORK + 1;
            let cost = lazy::size_capped(&left, cap) + lazy::size_capped(&right, cap);
            if !self.work(cost.saturating_mul(COPY_WORK), span) {
                return Val::Undef;
            }
        }
        let mismatch = |this: &mut Self, verb: &str| {
            this.error(
                "type-mismatch",
                span,
                format!(
                    "cannot {verb} {} `{}` and {} `{}`",
                    left.type_name(),
                    left.to_display(),
                    right.type_name(),
                    right.to_display()
                ),
            );
            Val::Undef
        };
        match op {
            Eq => Val::Bool(left.equals(&right)),
            Ne => Val::Bool(!left.equals(&right)),
            Lt | Le | Gt | Ge => match left.compare(&right) {
                Ok(ordering) => Val::Bool(match op {
                    Lt => ordering.is_lt(),
                    Le => ordering.is_le(),
                    Gt => ordering.is_gt(),
                    _ => ordering.is_ge(),
                }),
                Err(message) => {
                    self.error("type-mismatch", span, message);
                    Val::Undef
                }
            },
            Match | NoMatch if matches!(right, Val::Type(_) | Val::Ref { title: None, .. }) => {
                match self.value_matches_type(&left, &right, span) {
                    Some(matched) => Val::Bool(matched == (op == Match)),
                    None => Val::Undef,
                }
            }
            Match | NoMatch => {
                let Val::Str(text) = &left else {
                    return mismatch(self, "match");
                };
                let pattern = match &right {
                    Val::Regex(pattern) | Val::Str(pattern) => pattern.clone(),
                    _ => return mismatch(self, "match"),
                };
                let matched = self.regex_match(&pattern, text, span);
                Val::Bool(matched == (op == Match))
            }
            In => Val::Bool(match (&left, &right) {
                (Val::Str(needle), Val::Str(haystack)) => {
                    haystack.to_lowercase().contains(&needle.to_lowercase())
                }
                (Val::Regex(pattern), Val::Str(haystack)) => {
                    let pattern = pattern.clone();
                    self.regex_match(&pattern, haystack, span)
                }
                (Val::Regex(pattern), Val::Array(items)) => {
                    let pattern = pattern.clone();
                    items.iter().any(|item| matches!(item, Val::Str(text) if self.regex_match(&pattern, text, span)))
                }
                (needle, Val::Array(items)) => items.iter().any(|item| needle.equals(item)),
                (needle, Val::Hash(entries)) => entries.iter().any(|(key, _)| needle.equals(key)),
                _ => return mismatch(self, "search with `in` in"),
            }),
            Add | Sub | Mul | Div | Rem | LShift | RShift => self.arithmetic(op, left, right, span),
            And | Or => unreachable!("short-circuited in eval"),
        }
    }

    fn arithmetic(&mut self, op: BinOp, left: Val, right: Val, span: Span) -> Val {
        use BinOp::*;
        // Merging compares every key of one hash with every key of the other.
        if let (Add, Val::Hash(a), Val::Hash(b)) = (op, &left, &right)
            && self.budget.is_none()
            && !self.work((a.len() as u64).saturating_mul(b.len() as u64), span)
        {
            return Val::Undef;
        }
        // Strings that are numbers are numbers here, as in Puppet (`'5' + 2` is 7);
        // not where `+`, `-` and `<<` work on an array or a hash.
        let collection = matches!(left, Val::Array(_) | Val::Hash(_));
        let (left, right) = if collection {
            (left, right)
        } else {
            let symbol = op_symbol(op);
            let Some(left) = self.numeric_operand(left, symbol, span) else {
                return Val::Undef;
            };
            let Some(right) = self.numeric_operand(right, symbol, span) else {
                return Val::Undef;
            };
            (left, right)
        };
        let result: Result<Val, String> = match (op, left, right) {
            (op, Val::Int(a), Val::Int(b)) => {
                let value = match op {
                    Add => a.checked_add(b),
                    Sub => a.checked_sub(b),
                    Mul => a.checked_mul(b),
                    Div if b == 0 => {
                        self.error("arithmetic", span, "division by zero");
                        return Val::Undef;
                    }
                    // Rounded down, and the remainder takes the divisor's sign, as
                    // Puppet's (Ruby's) integers do: -7 / 2 is -4, -7 % 3 is 2.
                    Div => a.checked_div(b).map(|quotient| {
                        if a % b != 0 && ((a < 0) != (b < 0)) {
                            quotient - 1
                        } else {
                            quotient
                        }
                    }),
                    Rem if b == 0 => {
                        self.error("arithmetic", span, "division by zero");
                        return Val::Undef;
                    }
                    Rem => a.checked_rem(b).map(|remainder| {
                        if remainder != 0 && ((remainder < 0) != (b < 0)) {
                            remainder + b
                        } else {
                            remainder
                        }
                    }),
                    LShift => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
                    _ => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
                };
                value
                    .map(Val::Int)
                    .ok_or_else(|| "integer overflow".to_owned())
            }
            (
                op @ (Add | Sub | Mul | Div | Rem),
                a @ (Val::Int(_) | Val::Float(_)),
                b @ (Val::Int(_) | Val::Float(_)),
            ) => {
                let (a, b) = (num(&a), num(&b));
                let value = match op {
                    Add => a + b,
                    Sub => a - b,
                    Mul => a * b,
                    Div => a / b,
                    // Floored, as Ruby's: the sign of the divisor.
                    _ => a - b * (a / b).floor(),
                };
                if value.is_finite() {
                    Ok(Val::Float(value))
                } else {
                    Err("the result is not a finite number".to_owned())
                }
            }
            (Add, Val::Array(mut a), Val::Array(b)) => {
                a.extend(b);
                Ok(Val::Array(a))
            }
            (Add | LShift, Val::Array(mut a), other) => {
                a.push(other);
                Ok(Val::Array(a))
            }
            (Add, Val::Hash(mut a), Val::Hash(b)) => {
                for (key, value) in b {
                    match a.iter_mut().find(|(existing, _)| *existing == key) {
                        Some((_, existing)) => *existing = value,
                        None => a.push((key, value)),
                    }
                }
                Ok(Val::Hash(a))
            }
            (Sub, Val::Array(a), Val::Array(b)) => Ok(Val::Array(
                a.into_iter()
                    .filter(|item| !b.iter().any(|other| other.equals(item)))
                    .collect(),
            )),
            (Sub, Val::Array(a), other) => Ok(Val::Array(
                a.into_iter().filter(|item| !item.equals(&other)).collect(),
            )),
            (Sub, Val::Hash(a), Val::Array(keys)) => Ok(Val::Hash(
                a.into_iter()
                    .filter(|(key, _)| !keys.contains(key))
                    .collect(),
            )),
            (Sub, Val::Hash(a), Val::Hash(b)) => Ok(Val::Hash(
                a.into_iter()
                    .filter(|(key, _)| !b.iter().any(|(other, _)| other == key))
                    .collect(),
            )),
            (Sub, Val::Hash(a), key) => Ok(Val::Hash(
                a.into_iter()
                    .filter(|(existing, _)| *existing != key)
                    .collect(),
            )),
            (op, left, right) => Err(format!(
                "cannot apply `{}` to {} `{}` and {} `{}`{}",
                op_symbol(op),
                left.type_name(),
                left.to_display(),
                right.type_name(),
                right.to_display(),
                if matches!((&left, &right), (Val::Str(_), _) | (_, Val::Str(_))) {
                    "; join strings with interpolation: \"${a}${b}\""
                } else {
                    ""
                }
            )),
        };
        match result {
            Ok(value) => value,
            Err(message) => {
                self.error("arithmetic", span, message);
                Val::Undef
            }
        }
    }

    fn negate(&mut self, operand: Val, span: Span) -> Val {
        let Some(operand) = self.numeric_operand(operand, "-", span) else {
            return Val::Undef;
        };
        match operand {
            Val::Int(value) => value.checked_neg().map_or_else(
                || {
                    self.error("arithmetic", span, "integer overflow in negation");
                    Val::Undef
                },
                Val::Int,
            ),
            Val::Float(value) => Val::Float(-value),
            other => {
                self.error(
                    "type-mismatch",
                    span,
                    format!(
                        "cannot negate {} `{}`",
                        other.type_name(),
                        other.to_display()
                    ),
                );
                Val::Undef
            }
        }
    }

    /// An operand of arithmetic: a string that is a number becomes that number; a
    /// string that is not one is an error naming it.
    fn numeric_operand(&mut self, value: Val, symbol: &str, span: Span) -> Option<Val> {
        let Val::Str(text) = &value else {
            return Some(value);
        };
        match numeric_string(text) {
            Some(number) => Some(number),
            None => {
                self.error(
                    "arithmetic",
                    span,
                    format!("`{symbol}` needs numbers, and the string `{text}` is not one"),
                )
                .help = Some(
                    "join strings with interpolation (\"${a}${b}\"); a number in a string is \
                     written as in the language (`42`, `0x2A`, `4.2`)"
                        .into(),
                );
                None
            }
        }
    }

    // ---- resources ----

    fn kind_of(&self, type_name: &str) -> Option<Kind> {
        if type_name == "class" {
            return None;
        }
        if self.types.contains(type_name) {
            return Some(Kind::Plugin);
        }
        self.defines.get(type_name).map(|idx| Kind::Define(*idx))
    }

    fn unknown_type(&mut self, type_name: &str, span: Span) {
        self.missing.push(type_name.to_owned());
        let mut known: Vec<&str> = self.types.names().collect();
        known.extend(self.defines.keys().map(String::as_str));
        known.sort_unstable();
        self.error(
            "unknown-type",
            span,
            format!("unknown resource type `{type_name}`"),
        )
        .help = Some(format!(
            "no plugin of the policy provides it and no `define {type_name}` exists; known types: {}",
            known.join(", ")
        ));
    }

    /// Evaluates attribute operations; `* =>` is expanded, duplicates are reported.
    fn eval_ops(&mut self, ops: &[AttrOp], allow_append: bool, where_: &str) -> Vec<Op> {
        let mut out: Vec<Op> = Vec::with_capacity(ops.len());
        let mut splat_seen: Option<Span> = None;
        for op in ops {
            let value = self.eval(&op.value);
            match op.kind {
                AttrOpKind::Splat => {
                    if let Some(first) = splat_seen {
                        self.error(
                            "splat-twice",
                            op.name_span,
                            format!("`* =>` may appear only once in {where_}"),
                        )
                        .with_related_mut(first, "first used here")
                        .help = Some("merge the hashes with `+` into one `* =>`".into());
                        continue;
                    }
                    splat_seen = Some(op.name_span);
                    let entries = match value {
                        Val::Hash(entries) => entries,
                        Val::Undef => Vec::new(),
                        other => {
                            self.error(
                                "splat-not-hash",
                                op.value.span,
                                format!(
                                    "`* =>` needs a hash of attributes, not {} `{}`",
                                    other.type_name(),
                                    other.to_display()
                                ),
                            );
                            continue;
                        }
                    };
                    for (key, value) in entries {
                        let Val::Str(name) = key else {
                            self.error(
                                "splat-not-hash",
                                op.value.span,
                                format!(
                                    "`* =>` hash key `{}` is not an attribute name",
                                    key.to_display()
                                ),
                            );
                            continue;
                        };
                        self.push_op(
                            &mut out,
                            Op {
                                name: name.into(),
                                value,
                                span: op.value.span,
                                append: false,
                            },
                        );
                    }
                }
                AttrOpKind::Append if !allow_append => {
                    self.error(
                        "append-in-resource",
                        op.name_span,
                        format!("`+>` cannot be used in {where_}"),
                    )
                    .help = Some(format!(
                        "write `{} => ...`; `+>` appends only in defaults, overrides and collectors",
                        op.name
                    ));
                }
                kind => self.push_op(
                    &mut out,
                    Op {
                        name: op.name.clone(),
                        value,
                        span: op.name_span,
                        append: kind == AttrOpKind::Append,
                    },
                ),
            }
        }
        out
    }

    fn push_op(&mut self, out: &mut Vec<Op>, op: Op) {
        if let Some(first) = out.iter().find(|existing| existing.name == op.name) {
            let first = first.span;
            self.error(
                "duplicate-attribute",
                op.span,
                format!("attribute `{}` is set twice", op.name),
            )
            .with_related_mut(first, "first set here")
            .help = Some("keep one of the two settings".into());
            return;
        }
        out.push(op);
    }

    /// Is `name` an attribute of the type? Reports it if not.
    fn check_attribute(&mut self, type_name: &str, kind: Kind, name: &str, span: Span) -> bool {
        if matches!(kind, Kind::Class(_) | Kind::Define(_))
            && [
                "only_if",
                "not_if",
                "guard_interpreter",
                "requires",
                "provider",
            ]
            .contains(&name)
        {
            self.error(
                "unsupported-metaparameter",
                span,
                format!("`{name}` on a class or defined type instance is not supported"),
            )
            .help = Some(if name == "provider" {
                "put `provider` on the resources it should apply to, or in a resource default \
                 such as `Package { provider => 'apt' }`"
                    .to_owned()
            } else {
                format!("put `{name}` on the resources it should guard")
            });
            return false;
        }
        if METAPARAMETERS.contains(&name) {
            return true;
        }
        if UNSUPPORTED_METAPARAMETERS.contains(&name) {
            self.error(
                "unsupported-metaparameter",
                span,
                format!("`{name}` is a Puppet metaparameter that wconverge does not support"),
            )
            .help = Some(format!(
                "remove `{name}`; supported metaparameters: {}",
                METAPARAMETERS.join(", ")
            ));
            return false;
        }
        let program = Rc::clone(&self.program);
        let valid: Vec<&str> = match kind {
            Kind::Plugin => self
                .types
                .attributes(type_name)
                .map(|names| names.iter().map(String::as_str).collect())
                .unwrap_or_default(),
            Kind::Define(idx) => std::iter::once("name")
                .chain(
                    program.defines[idx]
                        .params
                        .iter()
                        .map(|param| param.name.as_str()),
                )
                .collect(),
            Kind::Class(idx) => program.classes[idx]
                .params
                .iter()
                .map(|param| param.name.as_str())
                .collect(),
        };
        if valid.contains(&name) {
            return true;
        }
        let what = match kind {
            Kind::Class(_) => format!("class `{type_name}`"),
            _ => format!("type `{}`", display_type_name(type_name)),
        };
        self.error(
            "unknown-attribute",
            span,
            format!("{what} has no attribute `{name}`"),
        )
        .with_label_mut("unknown attribute")
        .help = Some(if valid.is_empty() {
            format!("{what} takes no attributes besides the metaparameters")
        } else {
            format!("valid attributes: {}", valid.join(", "))
        });
        false
    }

    fn resource_expr(&mut self, resource: &ResourceExpr, _span: Span) -> Val {
        let kind = if resource.type_name == "class" {
            None
        } else {
            match self.kind_of(&resource.type_name) {
                Some(kind) => Some(kind),
                None => {
                    self.unknown_type(&resource.type_name, resource.type_span);
                    return Val::Undef;
                }
            }
        };
        if kind.is_none() && resource.form != Form::Regular {
            self.error(
                "virtual-class",
                resource.type_span,
                "a class cannot be virtual or exported",
            )
            .help = Some("remove the `@`".into());
            return Val::Undef;
        }
        struct Evaluated {
            titles: Vec<Val>,
            title_span: Span,
            ops: Vec<Op>,
        }
        let mut bodies = Vec::with_capacity(resource.bodies.len());
        for body in &resource.bodies {
            let before = self.errors;
            let title = self.eval(&body.title);
            if self.errors > before {
                // The title's error is reported; the resource would only add its own.
                continue;
            }
            let mut titles = Vec::new();
            flatten_into(title, &mut titles);
            let ops = self.eval_ops(&body.ops, false, "a resource body");
            bodies.push(Evaluated {
                titles,
                title_span: body.title.span,
                ops,
            });
        }
        let default_bodies: Vec<&Evaluated> = bodies
            .iter()
            .filter(|body| body.titles.contains(&Val::Default))
            .collect();
        if let [first, second, ..] = default_bodies.as_slice() {
            self.error(
                "duplicate-default-body",
                second.title_span,
                "a resource expression has two `default:` bodies",
            )
            .with_related_mut(first.title_span, "the first")
            .help = Some("merge them into one `default:` body".into());
        }
        let local_defaults: Vec<Op> = default_bodies
            .iter()
            .flat_map(|body| body.ops.iter().cloned())
            .collect();
        let mut refs = Vec::new();
        let mut seen_titles: HashMap<String, Span> = HashMap::new();
        for body in &bodies {
            for title in &body.titles {
                let title = match title {
                    Val::Default => continue,
                    Val::Str(title) if !title.is_empty() => title.clone(),
                    other => {
                        self.error(
                            "bad-title",
                            body.title_span,
                            format!(
                                "a title must be a non-empty string, not {} `{}`",
                                other.type_name(),
                                other.to_display()
                            ),
                        )
                        .help = Some("quote the title: `'name'`".into());
                        continue;
                    }
                };
                if let Some(first) = seen_titles.insert(title.clone(), body.title_span) {
                    self.error(
                        "duplicate-title",
                        body.title_span,
                        format!("title `{title}` appears twice in one resource expression"),
                    )
                    .with_related_mut(first, "first given here")
                    .help = Some("remove one of the two titles".into());
                    continue;
                }
                let mut ops: Vec<Op> = local_defaults
                    .iter()
                    .filter(|default| !body.ops.iter().any(|op| op.name == default.name))
                    .cloned()
                    .collect();
                ops.extend(body.ops.iter().cloned());
                match kind {
                    None => {
                        if let Some(idx) = self.declare_class(&title, Some(ops), body.title_span) {
                            refs.push(Val::reference("class", &self.resources[idx].title.clone()));
                        }
                    }
                    Some(kind) => {
                        let status = match resource.form {
                            Form::Regular => Status::Realized,
                            Form::Virtual => Status::Virtual,
                            Form::Exported => Status::Exported,
                        };
                        if self
                            .create(
                                &resource.type_name,
                                &title,
                                kind,
                                ops,
                                status,
                                body.title_span,
                            )
                            .is_some()
                        {
                            refs.push(Val::reference(&resource.type_name, &title));
                        }
                    }
                }
            }
        }
        Val::Array(refs)
    }

    fn create(
        &mut self,
        type_name: &str,
        title: &str,
        kind: Kind,
        ops: Vec<Op>,
        status: Status,
        span: Span,
    ) -> Option<usize> {
        let key = (type_name.to_owned(), title.to_owned());
        if let Some(&first) = self.aliases.get(&key) {
            self.alias_conflict(first, span, title);
            return None;
        }
        if let Some(&first) = self.index.get(&key) {
            let first_span = self.resources[first].span;
            let reference = self.resources[first].reference();
            self.error(
                "duplicate-title",
                span,
                format!("`{reference}` is declared twice"),
            )
            .with_label_mut("declared again here")
            .with_related_mut(first_span, "first declared here")
            .help = Some(
                "rename one of the two, or merge their attributes into one declaration".into(),
            );
            return None;
        }
        let mut attrs: Vec<Attr> = self
            .visible_defaults(type_name, self.ctx.scope)
            .into_iter()
            .map(|(name, value, span)| Attr {
                name,
                value,
                span,
                from_default: true,
            })
            .collect();
        for op in ops {
            if !self.check_op(type_name, kind, &op) {
                continue;
            }
            match attrs.iter_mut().find(|attr| attr.name == op.name) {
                Some(attr) => {
                    *attr = Attr {
                        name: op.name,
                        value: op.value,
                        span: op.span,
                        from_default: false,
                    }
                }
                None => attrs.push(Attr {
                    name: op.name,
                    value: op.value,
                    span: op.span,
                    from_default: false,
                }),
            }
        }
        if self.resources.len() >= MAX_RESOURCES {
            if !self.resource_limit_reported {
                self.resource_limit_reported = true;
                self.error("resource-limit", span, format!("the manifests declare more than {MAX_RESOURCES} resources (the limit)"))
                    .help = Some("a defined type that declares several instances of itself multiplies without end; check the recursion".into());
            }
            return None;
        }
        // The namevar identifies a resource as its title does (Puppet's alias): two
        // resources may not share either. Not `exec`'s command, which may repeat.
        let namevar = match kind {
            Kind::Define(_) => Some("name"),
            Kind::Plugin => self
                .types
                .namevar(type_name)
                .filter(|namevar| *namevar != "command"),
            Kind::Class(_) => None,
        };
        let alias = namevar.and_then(|namevar| match attrs.iter().find(|a| &*a.name == namevar) {
            Some(Attr {
                value: Val::Str(value),
                span,
                ..
            }) if value != title => Some((value.clone(), *span)),
            _ => None,
        });
        if let Some((value, value_span)) = &alias {
            let alias_key = (type_name.to_owned(), value.clone());
            if let Some(&first) = self.index.get(&alias_key).or(self.aliases.get(&alias_key)) {
                self.alias_conflict(first, *value_span, value);
                return None;
            }
        }
        // Kept until the catalog is built: exactly as many as it has.
        attrs.shrink_to_fit();
        let order = self.next_order();
        let horizon = self.ctx.horizon.min(order.last().copied().unwrap_or(0));
        let idx = self.resources.len();
        if let Some((value, _)) = alias {
            self.aliases.insert((type_name.to_owned(), value), idx);
        }
        self.resources.push(Res {
            type_name: type_name.to_owned(),
            title: title.to_owned(),
            kind,
            status,
            attrs,
            span,
            container: self.ctx.container,
            declared_in: self.ctx.class_name.clone(),
            order,
            function_tags: Vec::new(),
            evaluated: false,
            depth: self.ctx.depth,
            exported: status == Status::Exported,
            horizon,
            below_node: self.reaches_node_scope(),
            foreign: None,
        });
        self.index.insert(key, idx);
        self.index_by_type(type_name, idx);
        if status == Status::Realized && matches!(kind, Kind::Define(_)) {
            self.pending_defines.push_back(idx);
        }
        Some(idx)
    }

    /// Files resource `idx` under its type, for the collectors.
    fn index_by_type(&mut self, type_name: &str, idx: usize) {
        // Look up before inserting: `entry` would allocate the key for every resource.
        match self.by_type.get_mut(type_name) {
            Some(list) => list.push(idx),
            None => {
                self.by_type.insert(type_name.to_owned(), vec![idx]);
            }
        }
    }

    /// A resource identified by `identity` (its title or its namevar) like the earlier
    /// resource `first`.
    fn alias_conflict(&mut self, first: usize, span: Span, identity: &str) {
        let first_span = self.resources[first].span;
        let reference = self.resources[first].reference();
        let namevar = match self.resources[first].kind {
            Kind::Plugin => self
                .types
                .namevar(&self.resources[first].type_name)
                .unwrap_or("name")
                .to_owned(),
            _ => "name".to_owned(),
        };
        self.error(
            "duplicate-title",
            span,
            format!(
                "`{identity}` already identifies `{reference}`, by its title or its `{namevar}`"
            ),
        )
        .with_label_mut("identified again here")
        .with_related_mut(first_span, "first declared here")
        .help = Some(format!(
            "a resource's title and its `{namevar}` both identify it (Puppet's \"Cannot alias\"): \
             declare the thing once"
        ));
    }

    /// The defaults for `type_name` visible from `scope`, the nearest first.
    fn visible_defaults(
        &self,
        type_name: &str,
        scope: ScopeId,
    ) -> Vec<(std::rc::Rc<str>, Val, Span)> {
        let mut out: Vec<(std::rc::Rc<str>, Val, Span)> = Vec::new();
        let mut current = Some(scope);
        while let Some(id) = current {
            for entry in &self.scopes[id].defaults {
                // A defined type is evaluated after the main code: the top-scope
                // defaults set after its instance was declared are not for it.
                let too_late = id == TOP && entry.seq > self.ctx.horizon;
                if entry.type_name == type_name
                    && !too_late
                    && !out.iter().any(|(name, _, _)| *name == entry.attribute)
                {
                    out.push((entry.attribute.clone(), entry.value.clone(), entry.span));
                }
            }
            current = self.scopes[id].parent;
        }
        out
    }

    fn defaults_expr(&mut self, type_name: &str, ops: &[AttrOp], span: Span) {
        if type_name == "class" {
            self.error("class-defaults", span, "defaults cannot be set for classes")
                .help = Some("pass parameters to the class instead".into());
            return;
        }
        let Some(kind) = self.kind_of(type_name) else {
            self.unknown_type(type_name, span);
            return;
        };
        let ops = self.eval_ops(ops, true, "resource defaults");
        let scope = self.ctx.scope;
        for op in ops {
            if !self.check_op(type_name, kind, &op) {
                continue;
            }
            if let Some(first) = self.scopes[scope]
                .defaults
                .iter()
                .find(|entry| entry.type_name == type_name && entry.attribute == op.name)
            {
                let first = first.span;
                self.error(
                    "default-redefined",
                    op.span,
                    format!(
                        "the default for `{}` of `{}` is already set in this scope",
                        op.name,
                        display_type_name(type_name)
                    ),
                )
                .with_related_mut(first, "first set here")
                .help = Some(
                    "set each default once per scope; use `+>` in a nested scope to add to it"
                        .into(),
                );
                continue;
            }
            let value = if op.append {
                let outer = self.scopes[scope].parent.and_then(|parent| {
                    self.visible_defaults(type_name, parent)
                        .into_iter()
                        .find(|(name, _, _)| *name == op.name)
                        .map(|(_, value, _)| value)
                });
                append(outer, op.value)
            } else {
                op.value
            };
            self.seq += 1;
            self.scopes[scope].defaults.push(DefaultEntry {
                type_name: type_name.to_owned(),
                attribute: op.name,
                value,
                span: op.span,
                seq: self.seq,
            });
        }
    }

    fn override_expr(&mut self, target: &Expr, ops: &[AttrOp], span: Span) {
        let target_value = self.eval(target);
        let mut items = Vec::new();
        flatten_into(target_value, &mut items);
        let ops = self.eval_ops(ops, true, "an override");
        for item in items {
            let Val::Ref {
                type_name,
                title: Some(title),
            } = item
            else {
                self.error(
                    "override-target",
                    target.span,
                    format!(
                        "an override needs references to resources, like `File['a']`, not {} `{}`",
                        item.type_name(),
                        item.to_display()
                    ),
                );
                continue;
            };
            let key = (type_name, title);
            let class_name = self.ctx.class_name.clone();
            match self.index.get(&key).copied() {
                Some(idx) => self.apply_override(idx, &ops, class_name.as_deref(), false),
                None => self.overrides.push(PendingOverride {
                    target: key,
                    ops: ops.clone(),
                    class_name,
                    span,
                }),
            }
        }
    }

    /// Does `class` inherit (directly or not) from `ancestor`?
    fn inherits(&self, class: &str, ancestor: &str) -> bool {
        let mut current = class.to_owned();
        for _ in 0..=self.program.classes.len() {
            let Some(&idx) = self.classes.get(&current) else {
                return false;
            };
            let Some((parent, _)) = &self.program.classes[idx].parent else {
                return false;
            };
            if parent == ancestor {
                return true;
            }
            current.clone_from(parent);
        }
        false
    }

    fn apply_override(
        &mut self,
        idx: usize,
        ops: &[Op],
        class_name: Option<&str>,
        by_collector: bool,
    ) {
        let may_replace = by_collector
            || class_name.is_some_and(|class| {
                self.resources[idx]
                    .declared_in
                    .as_deref()
                    .is_some_and(|declared| self.inherits(class, declared))
            });
        let type_name = self.resources[idx].type_name.clone();
        let kind = self.resources[idx].kind;
        if let Some(first) = ops.first() {
            let reference = self.resources[idx].reference();
            match kind {
                Kind::Class(_) => {
                    self.error(
                        "override-class",
                        first.span,
                        format!("`{reference}` is a class; its parameters cannot be overridden"),
                    )
                    .help = Some(
                        "declare the class with its parameters: `class { 'name': param => value }`"
                            .into(),
                    );
                    return;
                }
                Kind::Define(_) if self.resources[idx].evaluated => {
                    self.error("override-too-late", first.span, format!("`{reference}` was already evaluated when this override was applied, so its body would not see it"))
                        .help = Some("set the value where the instance is declared, or override it from the main manifest".into());
                    return;
                }
                _ => {}
            }
        }
        for op in ops {
            if !self.check_op(&type_name, kind, op) {
                continue;
            }
            let existing = self.resources[idx].attr(&op.name).cloned();
            let reference = self.resources[idx].reference();
            let value = if op.append {
                if !may_replace {
                    self.error("override-append", op.span, format!("`+>` cannot append to `{}` of `{reference}` here", op.name))
                        .help = Some("outside a class that inherits the class declaring the resource, an override may only set attributes that have no value; `+>` would change one".into());
                    continue;
                }
                append(existing.map(|attr| attr.value), op.value.clone())
            } else {
                if let Some(existing) = &existing
                    && !existing.from_default
                    && existing.value != Val::Undef
                    && !may_replace
                {
                    self.error("override-set", op.span, format!("`{reference}` already has `{}` set", op.name))
                        .with_related_mut(existing.span, "set here")
                        .help = Some("outside a class that inherits the class declaring the resource, an override may only set attributes that have no value; move the override into an inheriting class or change the declaration".into());
                    continue;
                }
                op.value.clone()
            };
            let attr = Attr {
                name: op.name.clone(),
                value,
                span: op.span,
                from_default: false,
            };
            let attrs = &mut self.resources[idx].attrs;
            match attrs.iter_mut().find(|existing| existing.name == op.name) {
                Some(existing) => *existing = attr,
                None => attrs.push(attr),
            }
        }
    }

    fn collector(&mut self, collector: &Collector, span: Span) -> usize {
        if self.kind_of(&collector.type_name).is_none() {
            self.unknown_type(&collector.type_name, span);
        }
        let query = match &collector.query {
            Some(query) => self.compile_query(query),
            None => CQuery::All,
        };
        let ops = self.eval_ops(&collector.ops, true, "a collector");
        self.collectors.push(CollectorState {
            type_name: collector.type_name.clone(),
            exported: collector.exported,
            query,
            ops,
            matched: HashSet::new(),
            matched_list: Vec::new(),
            span,
            fetched: false,
        });
        self.collectors.len() - 1
    }

    fn compile_query(&mut self, query: &Query) -> CQuery {
        match query {
            Query::And(a, b) => CQuery::And(
                Box::new(self.compile_query(a)),
                Box::new(self.compile_query(b)),
            ),
            Query::Or(a, b) => CQuery::Or(
                Box::new(self.compile_query(a)),
                Box::new(self.compile_query(b)),
            ),
            Query::Compare {
                attribute,
                equal,
                value,
            } => CQuery::Compare {
                attribute: attribute.clone(),
                equal: *equal,
                value: self.eval(value),
            },
        }
    }

    fn query_matches(&self, query: &CQuery, idx: usize) -> bool {
        match query {
            CQuery::All => true,
            CQuery::And(a, b) => self.query_matches(a, idx) && self.query_matches(b, idx),
            CQuery::Or(a, b) => self.query_matches(a, idx) || self.query_matches(b, idx),
            CQuery::Compare {
                attribute,
                equal,
                value,
            } => {
                let res = &self.resources[idx];
                let found = match attribute.as_str() {
                    "title" => value.equals(&Val::Str(res.title.clone())),
                    "tag" => self
                        .tags_of(idx)
                        .iter()
                        .any(|tag| value.equals(&Val::Str(tag.clone()))),
                    name => match res.attr(name).map(|attr| &attr.value) {
                        Some(Val::Array(items)) => items.iter().any(|item| value.equals(item)),
                        Some(Val::Undef) | None => false,
                        Some(other) => value.equals(other),
                    },
                };
                found == *equal
            }
        }
    }

    fn run_collector(&mut self, collector_idx: usize) -> bool {
        let type_name = self.collectors[collector_idx].type_name.clone();
        if self.collectors[collector_idx].exported && !self.collectors[collector_idx].fetched {
            self.collectors[collector_idx].fetched = true;
            self.collects_exports = true;
            self.collect_foreign(collector_idx);
        }
        let candidates = self.by_type.get(&type_name).cloned().unwrap_or_default();
        // Every round looks at every candidate again: many collectors over many
        // resources is work.
        let span = self.collectors[collector_idx].span;
        if !self.count_work(candidates.len() as u64, span) {
            return false;
        }
        let mut progress = false;
        for idx in candidates {
            let state = &self.collectors[collector_idx];
            if state.matched.contains(&idx) {
                continue;
            }
            if state.exported && !self.resources[idx].exported {
                continue;
            }
            if !self.query_matches(&self.collectors[collector_idx].query, idx) {
                continue;
            }
            let state = &mut self.collectors[collector_idx];
            state.matched.insert(idx);
            state.matched_list.push(idx);
            let ops = state.ops.clone();
            self.realize(idx);
            self.apply_override(idx, &ops, None, true);
            progress = true;
        }
        progress
    }

    fn realize(&mut self, idx: usize) {
        let res = &mut self.resources[idx];
        if res.status != Status::Realized {
            res.status = Status::Realized;
            if matches!(res.kind, Kind::Define(_)) && !res.evaluated {
                self.pending_defines.push_back(idx);
            }
        }
    }

    // ---- classes and defined types ----

    fn declare_class(&mut self, name: &str, given: Option<Vec<Op>>, span: Span) -> Option<usize> {
        let name = name.trim_start_matches("::").to_ascii_lowercase();
        if self.class_stack.contains(&name) {
            let mut chain = self.class_stack.clone();
            chain.push(name.clone());
            self.error("include-cycle", span, format!("class `{name}` is included while it is being evaluated: {}", chain.join(" → ")))
                .help = Some("classes that include each other in a loop never finish; move what both need into a third class".into());
            return None;
        }
        if let Some(&idx) = self.index.get(&("class".to_owned(), name.clone())) {
            if given.is_some() {
                let first = self.resources[idx].span;
                self.error(
                    "duplicate-class",
                    span,
                    format!("class `{name}` is already declared"),
                )
                .with_related_mut(first, "first declared (or included) here")
                .help = Some(
                    "a class with parameters must be declared once, before any `include` of it"
                        .into(),
                );
            }
            return Some(idx);
        }
        if self.class_stack.len() >= MAX_CLASS_DEPTH {
            self.error(
                "class-depth-limit",
                span,
                format!("classes include each other more than {MAX_CLASS_DEPTH} deep (the limit)"),
            )
            .help = Some("flatten the chain of includes".into());
            return None;
        }
        let Some(&def_idx) = self.classes.get(&name) else {
            self.missing.push(name.clone());
            if let Some(why) = self.unreadable.get(&name).cloned() {
                self.error("unknown-class", span, format!("class `{name}`: {why}"))
                    .help = Some("make the module's manifest readable".into());
                return None;
            }
            let mut known: Vec<&str> = self.classes.keys().map(String::as_str).collect();
            known.sort_unstable();
            let (module, file) = autoload_path(&name);
            self.error("unknown-class", span, format!("unknown class `{name}`"))
                .help = Some(if known.is_empty() {
                format!(
                    "define it with `class {name} {{ ... }}`, or in `{file}` of module `{module}` in the module path (`--modulepath`)"
                )
            } else {
                format!(
                    "define it, or in `{file}` of module `{module}` in the module path (`--modulepath`); defined classes: {}",
                    known.join(", ")
                )
            });
            return None;
        };
        let program = Rc::clone(&self.program);
        let definition = &program.classes[def_idx];
        let mut parent_scope = TOP;
        if let Some((parent, parent_span)) = &definition.parent {
            if self.inherits(parent, &name) || *parent == name {
                self.error(
                    "circular-inheritance",
                    *parent_span,
                    format!("class `{name}` inherits from itself through `{parent}`"),
                )
                .help = Some("remove one `inherits` from the loop".into());
                return None;
            }
            // A parent already declared is not declared again, even while its body
            // runs: `class m { include m::config }` with `class m::config inherits m`
            // is Puppet's params pattern.
            let parent_key = (
                "class".to_owned(),
                parent.trim_start_matches("::").to_ascii_lowercase(),
            );
            if !self.index.contains_key(&parent_key) {
                self.class_stack.push(name.clone());
                let parent_idx = self.declare_class(parent, None, *parent_span);
                self.class_stack.pop();
                parent_idx?;
            }
            parent_scope = self
                .class_scopes
                .get(parent_key.1.as_str())
                .copied()
                .unwrap_or(TOP);
        } else if let Some(node_scope) = self.node_scope {
            // Declared from the node's body (top-level code ran before it): the node's
            // variables are visible, as in Puppet.
            parent_scope = node_scope;
        }
        let ops = given.unwrap_or_default();
        let kind = Kind::Class(def_idx);
        let mut attrs = Vec::new();
        for op in ops {
            if self.check_op(&name, kind, &op) {
                attrs.push(Attr {
                    name: op.name,
                    value: op.value,
                    span: op.span,
                    from_default: false,
                });
            }
        }
        let order = self.next_order();
        let idx = self.resources.len();
        self.resources.push(Res {
            type_name: "class".to_owned(),
            title: name.clone(),
            kind,
            status: Status::Realized,
            attrs,
            span,
            container: None,
            declared_in: None,
            order: order.clone(),
            function_tags: Vec::new(),
            evaluated: true,
            depth: self.ctx.depth,
            exported: false,
            horizon: self.ctx.horizon,
            below_node: false,
            foreign: None,
        });
        self.index.insert(("class".to_owned(), name.clone()), idx);
        let scope = self.new_scope(Some(parent_scope));
        self.scopes[scope].class = true;
        self.class_scopes.insert(name.clone(), scope);
        let ctx = Ctx {
            scope,
            container: Some(idx),
            class_name: Some(name.clone()),
            order,
            depth: self.ctx.depth,
            // A class is declared when it is included: every default set before that
            // applies, wherever the include is.
            horizon: u32::MAX,
        };
        let saved = std::mem::replace(&mut self.ctx, ctx);
        // A class's `$title` and `$name` are its name, as in Puppet.
        self.set_var(scope, "title", Val::Str(name.clone()), span);
        self.set_var(scope, "name", Val::Str(name.clone()), span);
        self.set_module_name(scope, definition.span);
        self.class_stack.push(name);
        // A body whose parameters are not what their types say is not evaluated: it
        // would only report the consequences.
        if self.bind_params(&definition.params, idx, scope) {
            // A class is evaluated once: its body is not needed again.
            let body = definition.body.take();
            self.block(&body);
        }
        self.class_stack.pop();
        self.ctx = saved;
        Some(idx)
    }

    /// The value a parameter of a class, defined type or template gets: the one given
    /// (unless `undef`), else its default, else an error naming `owner` and how a value
    /// is `passed`; then checked against its data type. False when it does not fit.
    fn parameter_value(
        &mut self,
        param: &Param,
        given: Option<Val>,
        owner: &str,
        passed: &str,
        span: Span,
    ) -> (Val, bool) {
        let value = match (given, &param.default) {
            (Some(value), _) if value != Val::Undef => value,
            (_, Some(default)) => self.eval(default),
            (Some(value), None) => value,
            (None, None) => {
                self.error(
                    "missing-parameter",
                    span,
                    format!("{owner} needs a value for parameter `${}`", param.name),
                )
                .with_related_mut(param.span, "parameter declared here")
                .help = Some(format!("pass `{passed}`, or give the parameter a default"));
                return (Val::Undef, false);
            }
        };
        match self.check_parameter_type(param, value, span) {
            Some(value) => (value, true),
            None => (Val::Undef, false),
        }
    }

    /// Whether a lowercased type name is one of Puppet's data types or an alias of one
    /// (not a resource type, nor a declared type of the types seed).
    fn is_data_type(&self, lower: &str) -> bool {
        crate::ptype::CORE.contains(&lower)
            || crate::ptype::STDLIB_ALIASES
                .iter()
                .any(|(name, _)| *name == lower)
            || self
                .program
                .aliases
                .iter()
                .any(|alias| alias.name.eq_ignore_ascii_case(lower))
    }

    /// A parameter's value checked against its data type: a basic type or a declared
    /// type (the types seed) as `typed_parameter` does, any other Puppet data type
    /// (`Array[String]`, `Stdlib::Port`, an alias) by matching. `None` when it does not
    /// fit (reported).
    fn check_parameter_type(&mut self, param: &Param, value: Val, span: Span) -> Option<Val> {
        if value == Val::Undef {
            return Some(value);
        }
        if let Some((type_name, type_span)) = &param.data_type {
            let basic = matches!(
                type_name.as_str(),
                "String" | "Integer" | "Float" | "Boolean"
            );
            if basic || !self.is_data_type(&type_name.to_ascii_lowercase()) {
                return self.typed_parameter(value, &param.name, type_name, *type_span, span);
            }
        }
        let Some(written) = &param.type_expr else {
            return Some(value);
        };
        let expected = self.eval_at_top(written);
        match self.value_matches_type(&value, &expected, written.span) {
            Some(true) => Some(value),
            Some(false) => {
                self.error(
                    "parameter-type",
                    span,
                    format!(
                        "parameter `${}` expects {}, got {} `{}`",
                        param.name,
                        expected.to_display(),
                        value.type_name(),
                        value.to_display()
                    ),
                )
                .with_related_mut(written.span, "the data type");
                None
            }
            None => None,
        }
    }

    /// `$module_name` in a class or defined type's scope: the module whose manifest
    /// defines it, or `undef` (as at top scope) for one the main manifests define.
    fn set_module_name(&mut self, scope: ScopeId, definition: Span) {
        let module = self
            .module_files
            .get(&definition.file)
            .map_or(Val::Undef, |module| Val::Str(module.clone()));
        self.scopes[scope]
            .vars
            .insert("module_name".to_owned(), (module, definition));
    }

    /// Binds the parameters of a class or defined type; false when a value does not
    /// fit its declared type (reported).
    fn bind_params(&mut self, params: &[Param], idx: usize, scope: ScopeId) -> bool {
        let mut fits = true;
        for param in params {
            let given = self.resources[idx]
                .attr(&param.name)
                .map(|attr| (attr.value.clone(), attr.span));
            // A class parameter not given is looked up in Hiera (`ntp::servers`)
            // before its default, as Puppet's automatic parameter lookup does.
            let given = match given {
                None if matches!(self.resources[idx].kind, Kind::Class(_)) => {
                    let key = format!("{}::{}", self.resources[idx].title, param.name);
                    let span = self.resources[idx].span;
                    match self.hiera_lookup(&key, None, span) {
                        Ok(found) => found.map(|value| (value, span)),
                        Err(()) => Some((Val::Undef, span)),
                    }
                }
                given => given,
            };
            let reference = format!("`{}`", self.resources[idx].reference());
            let span = self.resources[idx].span;
            let passed = format!("{} => ...", param.name);
            let (value, fit) = self.parameter_value(
                param,
                given.map(|(value, _)| value),
                &reference,
                &passed,
                span,
            );
            fits &= fit;
            self.set_var(scope, &param.name, value, param.span);
        }
        fits
    }

    fn evaluate_define(&mut self, idx: usize) {
        let Kind::Define(def_idx) = self.resources[idx].kind else {
            return;
        };
        if self.resources[idx].evaluated {
            return;
        }
        self.resources[idx].evaluated = true;
        let depth = self.resources[idx].depth;
        if depth >= MAX_DEFINE_DEPTH {
            let span = self.resources[idx].span;
            let type_name = self.resources[idx].type_name.clone();
            self.error("define-depth-limit", span, format!("defined type `{type_name}` is nested more than {MAX_DEFINE_DEPTH} deep (the limit)"))
                .help = Some("a defined type that declares an instance of itself never ends; give the recursion a condition that stops it".into());
            return;
        }
        let program = Rc::clone(&self.program);
        let definition = &program.defines[def_idx];
        // An instance declared from the node sees its variables, as a class does.
        let parent = match self.node_scope {
            Some(node) if self.resources[idx].below_node => node,
            _ => TOP,
        };
        let scope = self.new_scope(Some(parent));
        let title = self.resources[idx].title.clone();
        let span = self.resources[idx].span;
        let name = match self.resources[idx].attr("name") {
            Some(Attr {
                value: Val::Str(name),
                ..
            }) => name.clone(),
            _ => title.clone(),
        };
        self.set_var(scope, "title", Val::Str(title), span);
        self.set_var(scope, "name", Val::Str(name), span);
        self.set_module_name(scope, definition.span);
        let order = self.resources[idx].order.clone();
        let horizon = self.resources[idx].horizon;
        let saved = std::mem::replace(
            &mut self.ctx,
            Ctx {
                scope,
                container: Some(idx),
                class_name: None,
                order,
                depth: depth + 1,
                horizon,
            },
        );
        if self.bind_params(&definition.params, idx, scope) {
            self.block(&definition.body);
        }
        self.ctx = saved;
    }

    /// Defined types and collectors, in rounds until a round adds nothing.
    fn generate(&mut self) {
        for round in 0.. {
            if round >= MAX_ROUNDS {
                let span = self.collectors.first().map_or_else(
                    || {
                        self.resources
                            .last()
                            .map_or(Span::new(0, 0, 0), |res| res.span)
                    },
                    |c| c.span,
                );
                self.error("collector-round-limit", span, format!("collectors and defined types kept producing new resources after {MAX_ROUNDS} rounds (the limit)"))
                    .help = Some("a collector realizes resources whose evaluation creates more for it to collect; narrow the collector's query".into());
                return;
            }
            // As Puppet does: collectors, then overrides and realizations waiting
            // for their resource, then defined types, so that a defined type's
            // parameters include everything set on its instance.
            let mut progress = false;
            for collector_idx in 0..self.collectors.len() {
                progress |= self.run_collector(collector_idx);
            }
            progress |= self.apply_pending_overrides();
            progress |= self.apply_pending_realizes();
            // Only the instances waiting at the start of the round: those their bodies
            // declare wait for the next round, after collectors and overrides.
            let batch: Vec<usize> = self.pending_defines.drain(..).collect();
            for idx in batch {
                self.evaluate_define(idx);
                progress = true;
            }
            if !progress {
                return;
            }
        }
    }

    fn apply_pending_realizes(&mut self) -> bool {
        let pending = std::mem::take(&mut self.realizes);
        let mut progress = false;
        for (key, span) in pending {
            match self.index.get(&key).copied() {
                Some(idx) => {
                    self.realize(idx);
                    progress = true;
                }
                None => self.realizes.push((key, span)),
            }
        }
        progress
    }

    fn apply_pending_overrides(&mut self) -> bool {
        let pending = std::mem::take(&mut self.overrides);
        let mut progress = false;
        for pending in pending {
            match self.index.get(&pending.target).copied() {
                Some(idx) => {
                    self.apply_override(idx, &pending.ops, pending.class_name.as_deref(), false);
                    progress = true;
                }
                None => self.overrides.push(pending),
            }
        }
        progress
    }

    // ---- functions ----

    fn call(&mut self, name: &str, args: &[Expr], lambda: Option<&Lambda>, span: Span) -> Val {
        let before = self.errors;
        let values: Vec<Val> = args.iter().map(|arg| self.eval(arg)).collect();
        // An argument that failed (an unknown variable) was reported: the call would
        // only report its consequences, as if the user had written them (`fail()` with
        // empty holes in its message).
        if self.errors > before {
            return Val::Undef;
        }
        // Functions the manifests define, and the module path's (always namespaced):
        // most calls are of built-ins, which need none of this.
        if !self.functions.is_empty() || name.contains("::") {
            let key = name.trim_start_matches("::").to_ascii_lowercase();
            if let Some(&idx) = self.functions.get(&key) {
                return self.call_function(idx, values, lambda, span);
            }
            if key.contains("::") && !crate::functions::is_builtin(&key) {
                // A module's function: the module path may have it.
                self.missing.push(key);
            }
        }
        crate::functions::call(self, name, values, lambda, span)
    }

    /// Calls a function the manifests define: its parameters bound from the arguments
    /// in order (checked against their data types), its body evaluated in a scope of
    /// its own under top scope; the value of its last expression is the result.
    fn call_function(
        &mut self,
        idx: usize,
        args: Vec<Val>,
        lambda: Option<&Lambda>,
        span: Span,
    ) -> Val {
        let program = Rc::clone(&self.program);
        let function = &program.functions[idx];
        if lambda.is_some() {
            self.error(
                "unexpected-lambda",
                span,
                format!("function `{}` does not take a lambda", function.name),
            );
            return Val::Undef;
        }
        if args.len() > function.params.len() {
            self.error(
                "bad-argument",
                span,
                format!(
                    "function `{}` takes at most {} argument{}, not {}",
                    function.name,
                    function.params.len(),
                    if function.params.len() == 1 { "" } else { "s" },
                    args.len()
                ),
            )
            .with_related_mut(function.span, "defined here");
            return Val::Undef;
        }
        if self.function_depth >= MAX_DEFINE_DEPTH {
            self.error(
                "function-depth-limit",
                span,
                format!("functions call functions more than {MAX_DEFINE_DEPTH} deep (the limit)"),
            )
            .help = Some("a function that calls itself needs a condition that stops it".into());
            return Val::Undef;
        }
        let scope = self.new_scope(Some(TOP));
        let saved = std::mem::replace(&mut self.ctx.scope, scope);
        let owner = format!("function `{}`", function.name);
        let mut args = args.into_iter();
        let mut fits = true;
        for param in &function.params {
            let passed = format!("{}(...)", function.name);
            let (value, fit) = self.parameter_value(param, args.next(), &owner, &passed, span);
            fits &= fit;
            self.set_var(scope, &param.name, value, param.span);
        }
        let result = if fits {
            self.function_depth += 1;
            let result = self.block(&function.body);
            self.function_depth -= 1;
            result
        } else {
            Val::Undef
        };
        self.ctx.scope = saved;
        result
    }

    pub(crate) fn report(
        &mut self,
        severity: Severity,
        code: &str,
        span: Span,
        message: String,
    ) -> &mut Diagnostic {
        if severity == Severity::Error {
            self.errors += 1;
        }
        self.diagnostics
            .push(Diagnostic::error(code, span, message).with_severity(severity));
        self.diagnostics.last_mut().expect("just pushed")
    }

    pub(crate) fn class_names(&mut self, values: Vec<Val>, span: Span) -> Vec<String> {
        let mut flat = Vec::new();
        for value in values {
            flatten_into(value, &mut flat);
        }
        let mut names = Vec::new();
        for value in flat {
            match value {
                Val::Str(name) => names.push(name),
                Val::Ref {
                    type_name,
                    title: Some(title),
                } if type_name == "class" => names.push(title),
                other => {
                    self.error(
                        "bad-argument",
                        span,
                        format!(
                            "expected a class name, got {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
        names
    }

    pub(crate) fn include(&mut self, names: Vec<String>, how: &str, span: Span) -> Vec<Val> {
        let mut refs = Vec::new();
        for name in names {
            let Some(idx) = self.declare_class(&name, None, span) else {
                continue;
            };
            let title = self.resources[idx].title.clone();
            match how {
                "contain" => {
                    if let Some(container) = self.ctx.container
                        && container != idx
                        && self.resources[idx].container.is_none()
                    {
                        self.resources[idx].container = Some(container);
                    }
                }
                "require" => {
                    if let Some(container) = self.ctx.container {
                        let target = (
                            self.resources[container].type_name.clone(),
                            self.resources[container].title.clone(),
                        );
                        self.relations.push(Relation {
                            lhs: Operand::Refs(vec![("class".to_owned(), title.clone())]),
                            rhs: Operand::Refs(vec![target]),
                            op: RelOp::Before,
                            span,
                        });
                    }
                }
                _ => {}
            }
            refs.push(Val::reference("class", &title));
        }
        refs
    }

    pub(crate) fn realize_refs(&mut self, values: Vec<Val>, span: Span) {
        let mut flat = Vec::new();
        for value in values {
            flatten_into(value, &mut flat);
        }
        for value in flat {
            match value {
                Val::Ref {
                    type_name,
                    title: Some(title),
                } => {
                    let key = (type_name, title);
                    match self.index.get(&key).copied() {
                        Some(idx) => self.realize(idx),
                        None => self.realizes.push((key, span)),
                    }
                }
                other => {
                    self.error(
                        "bad-argument",
                        span,
                        format!(
                            "`realize` takes resource references, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
    }

    pub(crate) fn add_tags(&mut self, tags: Vec<String>, span: Span) {
        for tag in &tags {
            self.check_tag(tag, span);
        }
        match self.ctx.container {
            Some(container) => self.resources[container].function_tags.extend(tags),
            None => self.main_tags.extend(tags),
        }
    }

    /// Reports a tag that is not made of the characters tags allow.
    fn check_tag(&mut self, tag: &str, span: Span) {
        if !catalog_output::valid_tag(tag) {
            self.error("bad-tag", span, format!("`{tag}` is not a valid tag"))
                .help = Some("tags are made of letters, digits, `_`, `-`, `.` and `:`, and start with a letter, digit or `_`".into());
        }
    }

    /// Is the operation's attribute one of the type's? Metaparameter values that no
    /// later step reads as such (tags, `noop` on containers) are checked here, where
    /// they are given.
    fn check_op(&mut self, type_name: &str, kind: Kind, op: &Op) -> bool {
        if !self.check_attribute(type_name, kind, &op.name, op.span) {
            return false;
        }
        match &*op.name {
            "tag" => self.check_tag_attribute(&op.value, op.span),
            "noop" => self.check_noop(&op.value, op.span),
            _ => {}
        }
        true
    }

    /// `noop` on a class or defined type instance decides for what it contains; a
    /// value that is not a boolean must not be read as `false`.
    fn check_noop(&mut self, value: &Val, span: Span) {
        if !matches!(value, Val::Bool(_) | Val::Undef) {
            self.error(
                "bad-metaparameter",
                span,
                format!(
                    "`noop` must be true or false, not {} `{}`",
                    value.type_name(),
                    value.to_display()
                ),
            );
        }
    }

    /// Checks the values of a `tag` attribute where it is set.
    fn check_tag_attribute(&mut self, value: &Val, span: Span) {
        let mut flat = Vec::new();
        flatten_into(value.clone(), &mut flat);
        for item in flat {
            match item {
                Val::Str(tag) => self.check_tag(&tag, span),
                Val::Undef => {}
                other => {
                    self.error(
                        "bad-tag",
                        span,
                        format!(
                            "a tag is a string, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                }
            }
        }
    }

    /// Whether the current class or defined type (and what contains it) carries every
    /// one of `wanted`: Puppet's `tagged()`.
    pub(crate) fn tagged(&self, wanted: &[String]) -> bool {
        let mut tags = Vec::new();
        self.container_tags(self.ctx.container, &mut tags);
        wanted.iter().all(|tag| tags.contains(tag))
    }

    pub(crate) fn is_defined(&self, value: &Val) -> bool {
        match value {
            // `defined('$x')`: is the variable assigned, here or in a scope seen from here?
            Val::Str(name) if name.starts_with('$') => self.variable_exists(&name[1..]),
            Val::Str(name) => {
                let name = name.trim_start_matches("::").to_ascii_lowercase();
                self.classes.contains_key(&name)
                    || self.defines.contains_key(&name)
                    || self.types.contains(&name)
            }
            Val::Ref {
                type_name,
                title: None,
            } => self.defines.contains_key(type_name) || self.types.contains(type_name),
            Val::Ref {
                type_name,
                title: Some(title),
            } => self.index.contains_key(&(type_name.clone(), title.clone())),
            _ => false,
        }
    }

    /// Runs a lambda with its parameters bound in a new local scope.
    pub(crate) fn run_lambda(&mut self, lambda: &Lambda, args: Vec<Val>) -> Val {
        // Every call costs (its scope lives until the end), so an empty loop in a loop
        // cannot run for ever.
        if self.budget.is_none() {
            let span = lambda
                .params
                .first()
                .map_or(Span::new(0, 0, 0), |(_, span)| *span);
            if !self.work(LAMBDA_WORK, span) {
                return Val::Undef;
            }
        }
        if let Some(budget) = self.budget {
            let span = lambda
                .params
                .first()
                .map_or(Span::new(0, 0, 0), |(_, span)| *span);
            let cost = 4 + args
                .iter()
                .map(|arg| lazy::size_capped(arg, budget))
                .sum::<u64>();
            if !self.spend(cost, span) {
                return Val::Undef;
            }
        }
        let scope = self.new_scope(Some(self.ctx.scope));
        for ((name, span), value) in lambda.params.iter().zip(args) {
            self.set_var(scope, name, value, *span);
        }
        let saved_scope = std::mem::replace(&mut self.ctx.scope, scope);
        let result = self.block(&lambda.body);
        self.ctx.scope = saved_scope;
        result
    }

    /// Relationship operands: references, strings naming classes, arrays of them, or a
    /// collector.
    fn operand(&mut self, expr: &Expr) -> Operand {
        match &expr.kind {
            ExprKind::Relation(lhs, op, rhs) => {
                let left = self.operand(lhs);
                let right = self.operand(rhs);
                self.relations.push(Relation {
                    lhs: left,
                    rhs: right.clone(),
                    op: *op,
                    span: expr.span,
                });
                right
            }
            ExprKind::Collector(collector) => {
                Operand::Collector(self.collector(collector, expr.span))
            }
            _ => {
                let value = self.eval(expr);
                let mut flat = Vec::new();
                flatten_into(value, &mut flat);
                let mut refs = Vec::new();
                for item in flat {
                    match item {
                        Val::Undef => {}
                        Val::Ref {
                            type_name,
                            title: Some(title),
                        } => refs.push((type_name, title)),
                        Val::Str(name) => refs.push((
                            "class".to_owned(),
                            name.trim_start_matches("::").to_ascii_lowercase(),
                        )),
                        other => {
                            self.error("bad-operand", expr.span, format!("a relationship operand must be a resource reference, a class name or a collector, not {} `{}`", other.type_name(), other.to_display()));
                        }
                    }
                }
                Operand::Refs(refs)
            }
        }
    }
}

/// What `[index]` or `[start, count]` selects in a sequence of `len` elements.
enum Selection {
    /// One element; past the end when out of range.
    One(usize),
    /// Elements `from..to`, clamped to the sequence.
    Range(usize, usize),
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
    if let ExprKind::Assign(..) = expr.kind {
        return Some(expr.span);
    }
    children(expr).into_iter().find_map(find_assignment)
}

/// The expressions directly inside `expr`, but not inside a lambda's body nor inside a
/// resource, default, override, collector or relationship.
pub(super) fn children(expr: &Expr) -> Vec<&Expr> {
    match &expr.kind {
        ExprKind::Assign(_, value) => vec![value],
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
/// type: `ntp::server::config` is `manifests/server/config.pp` of module `ntp`.
fn autoload_path(name: &str) -> (&str, String) {
    match name.split_once("::") {
        Some((module, rest)) => (module, format!("manifests/{}.pp", rest.replace("::", "/"))),
        None => (name, "manifests/init.pp".to_owned()),
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
