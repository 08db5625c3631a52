//! `lazy { expr }` as the compiler sees it: kept unevaluated in the catalog with the
//! variables it reads, and checked to change nothing (`run` evaluates it during the
//! run, each time checked again the same way).
//!
//! A lazy expression may compute (operators, conditionals, functions, lambdas) but not
//! change the catalog: no resources, defaults, overrides, collectors, relationships,
//! classes, tags or realizing, which the run phase could not honour.

use super::Evaluator;
use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::Span;
use crate::eval::value::{LazyVal, Val};
use crate::syntax::{Expr, ExprKind};

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
pub(super) struct Found {
    /// Variables read from outside the expression, in order of first use.
    pub(super) variables: Vec<(String, Span)>,
    /// Constructs that would change the catalog.
    pub(super) forbidden: Vec<(Span, &'static str)>,
    /// Variables the expression assigns: local to it, unless also read from outside.
    pub(super) assigned: Vec<String>,
    /// Writes of node attributes (allowed only in a `node_block`'s body).
    pub(super) node_writes: Vec<Span>,
    /// Whether it reads `$facts`.
    pub(super) reads_facts: bool,
}

pub(super) fn walk(expr: &Expr, bound: &mut Vec<String>, found: &mut Found) {
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
        ExprKind::AssignList(targets, _) => {
            fn names(targets: &[Expr], into: &mut Vec<String>) {
                for target in targets {
                    match &target.kind {
                        ExprKind::Var(name) => into.push(name.clone()),
                        ExprKind::Array(inner) => names(inner, into),
                        _ => {}
                    }
                }
            }
            names(targets, &mut found.assigned);
        }
        ExprKind::Call { name, lambda, .. } => {
            if CATALOG_FUNCTIONS.contains(&name.as_str()) {
                found
                    .forbidden
                    .push((expr.span, "a function that changes or reads the catalog"));
            } else if !crate::eval::functions::FUNCTIONS.contains(&name.as_str()) {
                // Found now rather than when the run evaluates it.
                found.forbidden.push((expr.span, UNKNOWN_FUNCTION));
            }
            if let Some(lambda) = lambda {
                let depth = bound.len();
                bound.extend(lambda.params.iter().map(|param| param.name.clone()));
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
                    crate::eval::functions::FUNCTIONS.join(", ")
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
