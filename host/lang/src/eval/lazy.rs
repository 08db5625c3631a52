//! `lazy { expr }`: kept unevaluated in the catalog with the variables it reads, and
//! evaluated by the host during the run (DESIGN section 3; block guards, section 4).
//!
//! A lazy expression may compute (operators, conditionals, functions, lambdas) but not
//! change the catalog: no resources, defaults, overrides, collectors, relationships,
//! classes, tags or realizing, which the run phase could not honour.

use super::Evaluator;
use super::node::NodeState;
use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::Span;
use crate::syntax::{Expr, ExprKind};
use crate::value::{LazyVal, Val};
use crate::{KnownTypes, Source};
use wconverge_catalog::{Lazy, LazyUse, NodeAttributes, Value};

/// Functions that change or read the catalog, refused in a lazy expression (during the
/// run there is no catalog to change or read).
const CATALOG_FUNCTIONS: &[&str] = &[
    "include",
    "contain",
    "require",
    "realize",
    "tag",
    "defined",
    "tagged",
    "lookup",
    "hiera",
    "hiera_array",
    "hiera_hash",
    "hiera_include",
];

const UNKNOWN_FUNCTION: &str = "an unknown function";

/// The work a lazy value's evaluation may do: expressions evaluated plus the size of the
/// values read from variables. It bounds the time and memory a catalog's lazy value can
/// take on the machine that applies it.
pub(crate) const LAZY_BUDGET: u64 = 1_000_000;

/// The size of `value` in nodes and bytes, counted up to `cap`.
pub(crate) fn size_capped(value: &Val, cap: u64) -> u64 {
    let mut size = 0u64;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        size += 1;
        match value {
            Val::Str(text) | Val::Regex(text) => size += text.len() as u64 / 8,
            Val::Array(items) => stack.extend(items),
            Val::Hash(entries) => {
                for (key, value) in entries {
                    stack.push(key);
                    stack.push(value);
                }
            }
            Val::Sensitive(inner) => stack.push(inner),
            _ => {}
        }
        if size >= cap {
            return cap;
        }
    }
    size
}

/// What a walk of a lazy expression finds.
#[derive(Default)]
struct Found {
    /// Variables read from outside the expression, in order of first use.
    variables: Vec<(String, Span)>,
    /// Constructs that would change the catalog.
    forbidden: Vec<(Span, &'static str)>,
    /// Variables the expression assigns: local to it, unless also read from outside.
    assigned: Vec<String>,
    /// Writes of node attributes (allowed only in a `node_block`'s body).
    node_writes: Vec<Span>,
    /// Whether it reads `$facts`.
    reads_facts: bool,
}

fn walk(expr: &Expr, bound: &mut Vec<String>, found: &mut Found) {
    match &expr.kind {
        // `$node` and `$facts` are read during the run: the node's attributes then, and
        // the facts of the machine that applies the catalog.
        ExprKind::Var(name) if name == "node" => {}
        ExprKind::Var(name) if name == "facts" => found.reads_facts = true,
        ExprKind::NodeWrite { .. } => found.node_writes.push(expr.span),
        ExprKind::Var(name) => {
            if name.parse::<usize>().is_ok() {
                found.forbidden.push((
                    expr.span,
                    "a match variable (it is not kept for the run; assign it to a variable first)",
                ));
            } else if !bound.contains(name)
                && !found.variables.iter().any(|(known, _)| known == name)
            {
                found.variables.push((name.clone(), expr.span));
            }
        }
        ExprKind::Assign(name, _) => found.assigned.push(name.clone()),
        ExprKind::Call { name, lambda, .. } => {
            if CATALOG_FUNCTIONS.contains(&name.as_str()) {
                found
                    .forbidden
                    .push((expr.span, "a function that changes or reads the catalog"));
            } else if !crate::functions::FUNCTIONS.contains(&name.as_str()) {
                // Found now rather than when the run evaluates it.
                found.forbidden.push((expr.span, UNKNOWN_FUNCTION));
            }
            if let Some(lambda) = lambda {
                let depth = bound.len();
                bound.extend(lambda.params.iter().map(|(name, _)| name.clone()));
                for statement in &lambda.body {
                    walk(statement, bound, found);
                }
                bound.truncate(depth);
            }
        }
        ExprKind::Resource(_) => found.forbidden.push((expr.span, "a resource")),
        ExprKind::Defaults { .. } => found.forbidden.push((expr.span, "a resource default")),
        ExprKind::Override { .. } => found.forbidden.push((expr.span, "an override")),
        ExprKind::Collector(_) => found.forbidden.push((expr.span, "a collector")),
        ExprKind::Relation(..) => found.forbidden.push((expr.span, "a relationship")),
        ExprKind::Definition => found.forbidden.push((expr.span, "a definition")),
        ExprKind::Lazy(_) => {
            found.forbidden.push((expr.span, "a lazy value"));
            return;
        }
        _ => {}
    }
    for child in super::children(expr) {
        walk(child, bound, found);
    }
}

impl Evaluator<'_> {
    /// `lazy { inner }`: the expression's text and the values of the variables it reads.
    pub(super) fn lazy(&mut self, inner: &Expr, span: Span) -> Val {
        let mut found = Found::default();
        walk(inner, &mut Vec::new(), &mut found);
        for (at, what) in &found.forbidden {
            let help = if *what == UNKNOWN_FUNCTION {
                format!(
                    "the functions are: {}",
                    crate::functions::FUNCTIONS.join(", ")
                )
            } else {
                "a lazy value is computed during the run, when the catalog is fixed; compute \
                 values in it, and declare resources outside it"
                    .to_owned()
            };
            self.error(
                DiagnosticCode::LazyChangesCatalog,
                *at,
                format!("{what} cannot be inside `lazy {{ }}`"),
            )
            .help = Some(help);
        }
        let mut variables = Vec::new();
        for (name, at) in found.variables {
            // A variable the block assigns is its own, unless it also exists here.
            if found.assigned.contains(&name) && self.peek_variable(&name).is_none() {
                continue;
            }
            let value = self.lookup(&name, at);
            if value.contains_lazy() {
                self.error(
                    DiagnosticCode::LazyInLazy,
                    at,
                    format!("`${name}` holds a lazy value, which another lazy value cannot read"),
                )
                .help = Some("write the expression inside this lazy block instead".into());
            }
            if let Err(message) = value.to_catalog() {
                self.error(
                    DiagnosticCode::LazyVariable,
                    at,
                    format!("`${name}` cannot be kept for the run: {message}"),
                )
                .help = Some("read it into a string, number, boolean, array or hash first".into());
            }
            variables.push((name, value));
        }
        let source = &self.source_of(inner.span.file).text;
        let expression = source
            .get(inner.span.start as usize..inner.span.end as usize)
            .unwrap_or_default()
            .to_owned();
        Val::Lazy(Box::new(LazyVal {
            expression,
            variables,
            location: self.location(span),
            node_write: found.node_writes.first().copied(),
        }))
    }
}

/// Checks that a lazy value from a catalog parses as one expression that changes
/// nothing; the error names where it was written and what is wrong.
pub fn check_lazy(lazy: &Lazy) -> Result<LazyUse, String> {
    crate::run_on_big_stack(|| parse_lazy(lazy, &block_label(lazy)).map(|(_, _, used)| used))
}

/// Evaluates a lazy value with the variables it captured, reading `node`'s attributes
/// and this machine's `facts` (a hash of each group to its records; an empty hash is
/// enough for a value that does not read `$facts`).
pub fn evaluate_lazy(lazy: &Lazy, node: &NodeAttributes, facts: &Value) -> Result<Value, String> {
    crate::run_on_big_stack(|| {
        let at = &lazy.location;
        let (value, _) = evaluated(lazy, NodeState::running(node, false), facts);
        value?
            .to_catalog()
            .map_err(|message| format!("the lazy block at {at} returned a value that {message}"))
    })
}

/// Runs the body of a `node_block`: a lazy value that may write `node`'s attributes.
/// Returns what it wrote, in order (`$node.default['a'] = 1`); on an error nothing of
/// what it wrote is kept.
pub fn run_node_block(
    lazy: &Lazy,
    node: &mut NodeAttributes,
    facts: &Value,
) -> Result<Vec<String>, String> {
    crate::run_on_big_stack(|| {
        let (value, (attributes, written)) = evaluated(lazy, NodeState::running(node, true), facts);
        value?;
        if let Some(attributes) = attributes {
            *node = attributes;
        }
        Ok(written)
    })
}

/// How messages name a lazy block.
fn block_label(lazy: &Lazy) -> String {
    format!("the lazy block at {}", lazy.location)
}

fn parse_lazy(lazy: &Lazy, label: &str) -> Result<(crate::syntax::Program, Expr, LazyUse), String> {
    let at = &lazy.location;
    // Parsed as a value, as where it was written: `lazy { }` around it keeps a leading
    // `name {` from reading as a resource.
    let sources = [Source::new(at.to_string(), wrapped(lazy))];
    let (mut program, diagnostics) = crate::parse_all(&sources);
    if let Some(error) = diagnostics.iter().find(|d| d.is_error()) {
        return Err(format!("{label} does not parse: {}", error.message));
    }
    let mut statements = std::mem::take(&mut program.files[0]);
    let expr = match statements.pop() {
        Some(Expr {
            kind: ExprKind::Assign(_, value),
            ..
        }) if statements.is_empty()
            && program.classes.is_empty()
            && program.defines.is_empty()
            && program.nodes.is_empty() =>
        {
            match value.kind {
                ExprKind::Lazy(inner) => *inner,
                _ => return Err(format!("{label} must be one expression")),
            }
        }
        _ => return Err(format!("{label} must be one expression")),
    };
    let mut found = Found::default();
    walk(&expr, &mut Vec::new(), &mut found);
    if let Some((_, what)) = found.forbidden.first() {
        return Err(format!(
            "{label} contains {what}, which cannot be evaluated during the run"
        ));
    }
    let used = LazyUse {
        reads_facts: found.reads_facts,
    };
    Ok((program, expr, used))
}

/// Evaluates a lazy value used as a guard: whether it holds (Puppet's truth, so a value
/// that cannot go into a catalog, like a regular expression, still counts).
pub fn evaluate_lazy_truth(
    lazy: &Lazy,
    node: &NodeAttributes,
    facts: &Value,
) -> Result<bool, String> {
    crate::run_on_big_stack(|| {
        evaluated(lazy, NodeState::running(node, false), facts)
            .0
            .map(|value| value.truthy())
    })
}

/// The expression as the value it was written as, so that it parses the same way.
fn wrapped(lazy: &Lazy) -> String {
    format!("$wconverge_lazy = lazy {{\n{}\n}}", lazy.expression)
}

/// What a node block wrote: the attributes (if anything was written) and the writes.
type Written = (Option<NodeAttributes>, Vec<String>);

fn evaluated(lazy: &Lazy, node: NodeState<'_>, facts: &Value) -> (Result<Val, String>, Written) {
    match evaluate_in(lazy, node, facts, &block_label(lazy)) {
        Ok((value, written)) => (Ok(value), written),
        Err(message) => (Err(message), (None, Vec::new())),
    }
}

fn evaluate_in(
    lazy: &Lazy,
    node: NodeState<'_>,
    facts: &Value,
    label: &str,
) -> Result<(Val, Written), String> {
    let at = &lazy.location;
    let (program, expr, _) = parse_lazy(lazy, label)?;
    let sources = [Source::new(at.to_string(), wrapped(lazy))];
    let types = KnownTypes::new();
    let mut evaluator = Evaluator::new(program, &sources, &types, "");
    for (name, value) in &lazy.variables {
        let value = (Val::from_catalog(value), expr.span);
        match name.strip_prefix("::").unwrap_or(name).rsplit_once("::") {
            // `$class::name`: the class's scope, as where the block was written.
            Some((class, variable)) => {
                let scope = match evaluator.class_scopes.get(class) {
                    Some(scope) => *scope,
                    None => {
                        let scope = evaluator.new_scope(Some(super::TOP));
                        evaluator.class_scopes.insert(class.to_owned(), scope);
                        scope
                    }
                };
                evaluator.scopes[scope]
                    .vars
                    .insert(variable.to_owned(), value);
            }
            None => {
                let simple = name.strip_prefix("::").unwrap_or(name);
                evaluator.scopes[super::TOP]
                    .vars
                    .insert(simple.to_owned(), value);
            }
        }
    }
    // The facts of the machine that runs it, whatever a catalog captured.
    evaluator.scopes[super::TOP]
        .vars
        .insert("facts".to_owned(), (Val::from_catalog(facts), expr.span));
    // The block's own assignments go into a scope of its own.
    let local = evaluator.new_scope(Some(super::TOP));
    evaluator.ctx.scope = local;
    evaluator.budget = Some(LAZY_BUDGET);
    evaluator.attributes = node;
    let value = evaluator.eval(&expr);
    let state = std::mem::replace(&mut evaluator.attributes, NodeState::compiling());
    let written = state.written();
    let written = (state.into_written(), written);
    if let Some(error) = evaluator.diagnostics.iter().find(|d| d.is_error()) {
        return Err(format!("{label} failed: {}", error.message));
    }
    if !evaluator.resources.is_empty() {
        return Err(format!(
            "{label} declared resources, which the run cannot add"
        ));
    }
    Ok((value, written))
}

/// Evaluates `expression` (one expression of the restricted language a lazy value may
/// use: no resources, classes or catalog functions) with `variables` bound, and no node
/// attributes or facts; `label` names it in messages (`the check of \`port\``). The
/// host evaluates the checks and invariants of types this way.
pub(crate) fn evaluate_code(
    expression: String,
    variables: Vec<(String, Value)>,
    location: wconverge_catalog::SourceLocation,
    label: &str,
) -> Result<Val, String> {
    let lazy = Lazy {
        expression,
        variables,
        location,
    };
    let empty = NodeAttributes::default();
    crate::run_on_big_stack(|| {
        evaluate_in(
            &lazy,
            NodeState::running(&empty, false),
            &Value::Hash(Vec::new()),
            label,
        )
        .map(|(value, _)| value)
    })
}
