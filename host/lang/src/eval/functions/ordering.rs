//! Ordering and reshaping for the functions: `sort` (by Puppet's order, or a lambda's)
//! and the string functions applied through arrays and hashes.

use super::arity;
use crate::diagnostic::{DiagnosticCode, Severity, Span};
use crate::eval::Evaluator;
use crate::eval::value::Val;
use crate::syntax::Lambda;

/// Sorts numbers by value and strings by code point (`[A, B, a, b]`, as Puppet); anything
/// else, or a mix, is an error (the order would not be total).
pub(super) fn sort(mut items: Vec<Val>) -> Result<Vec<Val>, String> {
    if items.iter().all(|item| matches!(item, Val::Int(_))) {
        items.sort_by_key(|item| match item {
            Val::Int(i) => *i,
            _ => 0,
        });
    } else if items
        .iter()
        .all(|item| matches!(item, Val::Int(_) | Val::Float(_)))
    {
        let as_float = |item: &Val| match item {
            Val::Int(i) => *i as f64,
            Val::Float(f) => *f,
            _ => 0.0,
        };
        items.sort_by(|a, b| as_float(a).total_cmp(&as_float(b)));
    } else if items.iter().all(|item| matches!(item, Val::Str(_))) {
        // By code point, as Puppet (Ruby) compares strings: `[A, B, a, b]`.
        items.sort_by(|a, b| match (a, b) {
            (Val::Str(a), Val::Str(b)) => a.cmp(b),
            _ => std::cmp::Ordering::Equal,
        });
    } else {
        return Err("takes an array of numbers or of strings, not a mix".to_owned());
    }
    Ok(items)
}

/// `sort(values) |$a, $b| { ... }`: ordered by the lambda's answer, an integer.
pub(super) fn sort_with(
    evaluator: &mut Evaluator<'_>,
    args: Vec<Val>,
    lambda: &Lambda,
    span: Span,
) -> Val {
    let Some(Val::Array(mut items)) = args.into_iter().next() else {
        return arity(evaluator, "sort", "an array and a lambda", span);
    };
    let mut failed = None;
    items.sort_by(
        |a, b| match evaluator.run_lambda(lambda, vec![a.clone(), b.clone()]) {
            Val::Int(order) => order.cmp(&0),
            other => {
                failed.get_or_insert(other.type_name());
                std::cmp::Ordering::Equal
            }
        },
    );
    if let Some(kind) = failed {
        evaluator.report(
            Severity::Error,
            DiagnosticCode::BadArgument,
            span,
            format!("`sort`: the lambda orders two elements with an integer, not {kind}"),
        );
        return Val::Undef;
    }
    Val::Array(items)
}

/// `value` with `change` applied to each string in it (array elements, hash keys and
/// values, at any depth); other values as they are.
pub(super) fn each_string_deep(value: Val, change: &dyn Fn(&str) -> String) -> Val {
    match value {
        Val::Str(text) => Val::Str(change(&text)),
        Val::Array(items) => Val::Array(
            items
                .into_iter()
                .map(|item| each_string_deep(item, change))
                .collect(),
        ),
        Val::Hash(entries) => Val::Hash(
            entries
                .into_iter()
                .map(|(key, value)| {
                    (
                        each_string_deep(key, change),
                        each_string_deep(value, change),
                    )
                })
                .collect(),
        ),
        other => other,
    }
}
