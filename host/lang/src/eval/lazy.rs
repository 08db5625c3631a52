//! `lazy { expr }`: kept unevaluated in the catalog with the variables it reads, and
//! evaluated by the host during the run (DESIGN section 3; block guards, section 4).
//!
//! A lazy expression may compute (operators, conditionals, functions, lambdas) but not
//! change the catalog: no resources, defaults, overrides, collectors, relationships,
//! classes, tags or realizing, which the run phase could not honour.

use super::Evaluator;
use crate::diagnostic::{Diagnostic, Span};
use crate::syntax::{Expr, ExprKind, InterpPart};
use crate::value::{LazyVal, Val};
use crate::{KnownTypes, Source};
use wconverge_catalog::{Lazy, Value};

/// Functions that change the catalog, refused in a lazy expression.
const CATALOG_FUNCTIONS: [&str; 5] = ["include", "contain", "require", "realize", "tag"];

/// What a walk of a lazy expression finds.
#[derive(Default)]
struct Found {
    /// Variables read from outside the expression, in order of first use.
    variables: Vec<(String, Span)>,
    /// Constructs that would change the catalog.
    forbidden: Vec<(Span, &'static str)>,
}

fn walk_all(exprs: &[Expr], bound: &mut Vec<String>, found: &mut Found) {
    for expr in exprs {
        walk(expr, bound, found);
    }
}

fn walk(expr: &Expr, bound: &mut Vec<String>, found: &mut Found) {
    match &expr.kind {
        ExprKind::Var(name) => {
            let numbered = name.parse::<usize>().is_ok();
            if !numbered
                && !bound.contains(name)
                && !found.variables.iter().any(|(known, _)| known == name)
            {
                found.variables.push((name.clone(), expr.span));
            }
        }
        ExprKind::Str(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Bool(_)
        | ExprKind::Undef
        | ExprKind::Default
        | ExprKind::Regex(_)
        | ExprKind::Bare(_)
        | ExprKind::TypeRef(_) => {}
        ExprKind::Interp(parts) => {
            for part in parts {
                if let InterpPart::Expr(inner) = part {
                    walk(inner, bound, found);
                }
            }
        }
        ExprKind::Array(items) => walk_all(items, bound, found),
        ExprKind::Hash(entries) => {
            for (key, value) in entries {
                walk(key, bound, found);
                walk(value, bound, found);
            }
        }
        ExprKind::Access(target, keys) => {
            walk(target, bound, found);
            walk_all(keys, bound, found);
        }
        ExprKind::Not(inner) | ExprKind::Neg(inner) => walk(inner, bound, found),
        ExprKind::Binary(_, left, right) => {
            walk(left, bound, found);
            walk(right, bound, found);
        }
        ExprKind::Assign(name, value) => {
            walk(value, bound, found);
            bound.push(name.clone());
        }
        ExprKind::If {
            cond,
            then,
            otherwise,
        }
        | ExprKind::Unless {
            cond,
            then,
            otherwise,
        } => {
            walk(cond, bound, found);
            walk_all(then, bound, found);
            if let Some(otherwise) = otherwise {
                walk_all(otherwise, bound, found);
            }
        }
        ExprKind::Case { subject, arms } => {
            walk(subject, bound, found);
            for arm in arms {
                walk_all(&arm.options, bound, found);
                walk_all(&arm.body, bound, found);
            }
        }
        ExprKind::Selector { subject, arms } => {
            walk(subject, bound, found);
            for (option, value) in arms {
                walk(option, bound, found);
                walk(value, bound, found);
            }
        }
        ExprKind::Call { name, args, lambda } => {
            if CATALOG_FUNCTIONS.contains(&name.as_str()) {
                found
                    .forbidden
                    .push((expr.span, "a function that changes the catalog"));
            }
            walk_all(args, bound, found);
            if let Some(lambda) = lambda {
                let depth = bound.len();
                bound.extend(lambda.params.iter().map(|(name, _)| name.clone()));
                walk_all(&lambda.body, bound, found);
                bound.truncate(depth);
            }
        }
        ExprKind::Resource(_) => found.forbidden.push((expr.span, "a resource")),
        ExprKind::Defaults { .. } => found.forbidden.push((expr.span, "a resource default")),
        ExprKind::Override { .. } => found.forbidden.push((expr.span, "an override")),
        ExprKind::Collector(_) => found.forbidden.push((expr.span, "a collector")),
        ExprKind::Relation(..) => found.forbidden.push((expr.span, "a relationship")),
        ExprKind::Definition => found.forbidden.push((expr.span, "a definition")),
        ExprKind::Lazy(inner) => walk(inner, bound, found),
    }
}

impl Evaluator<'_> {
    /// `lazy { inner }`: the expression's text and the values of the variables it reads.
    pub(super) fn lazy(&mut self, inner: &Expr, span: Span) -> Val {
        let mut found = Found::default();
        walk(inner, &mut Vec::new(), &mut found);
        for (at, what) in &found.forbidden {
            self.error(
                "lazy-changes-catalog",
                *at,
                format!("{what} cannot be inside `lazy {{ }}`"),
            )
            .help = Some(
                "a lazy value is computed during the run, when the catalog is fixed; compute \
                 values in it, and declare resources outside it"
                    .into(),
            );
        }
        let variables = found
            .variables
            .into_iter()
            .map(|(name, at)| {
                let value = self.lookup(&name, at);
                (name, value)
            })
            .collect();
        let source = &self.sources[inner.span.file as usize].text;
        let expression = source
            .get(inner.span.start as usize..inner.span.end as usize)
            .unwrap_or_default()
            .to_owned();
        Val::Lazy(Box::new(LazyVal {
            expression,
            variables,
            location: self.location(span),
        }))
    }
}

/// Checks that a lazy value from a catalog parses as one expression that changes
/// nothing; the error names where it was written and what is wrong.
pub fn check_lazy(lazy: &Lazy) -> Result<(), String> {
    crate::run_on_big_stack(|| parse_lazy(lazy).map(|_| ()))
}

/// Evaluates a lazy value with the variables it captured.
pub fn evaluate_lazy(lazy: &Lazy) -> Result<Value, String> {
    crate::run_on_big_stack(|| evaluate_here(lazy))
}

fn parse_lazy(lazy: &Lazy) -> Result<(crate::syntax::Program, Expr), String> {
    let at = &lazy.location;
    let sources = [Source::new(at.to_string(), lazy.expression.clone())];
    let (mut program, diagnostics) = crate::parse_all(&sources);
    if let Some(error) = diagnostics.iter().find(|d| d.is_error()) {
        return Err(format!(
            "the lazy block at {at} does not parse: {}",
            error.message
        ));
    }
    let mut statements = std::mem::take(&mut program.files[0]);
    if statements.len() != 1 || !program.classes.is_empty() || !program.defines.is_empty() {
        return Err(format!(
            "the lazy block at {at} must be one expression, not {} statements",
            statements.len()
        ));
    }
    let expr = statements.remove(0);
    let mut found = Found::default();
    walk(&expr, &mut Vec::new(), &mut found);
    if let Some((_, what)) = found.forbidden.first() {
        return Err(format!(
            "the lazy block at {at} contains {what}, which cannot be evaluated during the run"
        ));
    }
    Ok((program, expr))
}

fn evaluate_here(lazy: &Lazy) -> Result<Value, String> {
    let at = &lazy.location;
    let (program, expr) = parse_lazy(lazy)?;
    let sources = [Source::new(at.to_string(), lazy.expression.clone())];
    let types = KnownTypes::new();
    let mut evaluator = Evaluator::new(program, &sources, &types, "");
    for (name, value) in &lazy.variables {
        evaluator.scopes[super::TOP]
            .vars
            .insert(name.clone(), (Val::from_catalog(value), expr.span));
    }
    let value = evaluator.eval(&expr);
    let errors: Vec<&Diagnostic> = evaluator
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .collect();
    if let Some(error) = errors.first() {
        return Err(format!("the lazy block at {at} failed: {}", error.message));
    }
    if !evaluator.resources.is_empty() {
        return Err(format!(
            "the lazy block at {at} declared resources, which the run cannot add"
        ));
    }
    value
        .to_catalog()
        .map_err(|message| format!("the lazy block at {at} returned a value that {message}"))
}
