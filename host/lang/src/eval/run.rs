//! Lazy values during the run: each one parsed again from its text, checked again to
//! change nothing (as `lazy` checks it when compiling), and evaluated with the variables
//! it captured, the node's attributes and this machine's facts, under a budget
//! (`lazy::LAZY_BUDGET`). The checks and invariants of declared types are evaluated the
//! same way.
//!
//! It shares the expression evaluator with the compiler, on purpose: one implementation
//! of the language's operators, functions and lambdas, so a value computes the same
//! during the run as it would when compiling. Nothing of a compile is there: the
//! evaluator is made for the run ([`Evaluator::for_run`]: what the value's text parsed
//! to, and no manifests, modules, Hiera or other nodes' exports), and `lazy::walk`
//! refuses every construct that would reach the catalog before anything is evaluated.

use super::lazy::{Found, walk};
use super::node::NodeState;
use super::{Evaluator, RunFailure};
use crate::eval::value::Val;
use crate::syntax::{Expr, ExprKind, Program};
use crate::{KnownTypes, Source};
use wconverge_catalog::{Lazy, LazyUse, NodeAttributes, Value};

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

/// How messages name a lazy block.
fn block_label(lazy: &Lazy) -> String {
    format!("the lazy block at {}", lazy.location)
}

/// The expression as the value it was written as, so that it parses the same way.
fn wrapped(lazy: &Lazy) -> String {
    format!("$wconverge_lazy = lazy {{\n{}\n}}", lazy.expression)
}

/// The lazy value's expression, parsed as where it was written (with the rest of what
/// was parsed, nothing but its syntax), and what it reads of the run; an error if it is
/// not one expression or would change the catalog.
fn parse_lazy(lazy: &Lazy, label: &str) -> Result<(Program, Expr, LazyUse), String> {
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
    let mut evaluator = Evaluator::for_run(program, &sources, &types, node);
    for (name, value) in &lazy.variables {
        evaluator.bind_captured(name, Val::from_catalog(value), expr.span);
    }
    // The facts of the machine that runs it, whatever a catalog captured.
    evaluator.bind_captured("facts", Val::from_catalog(facts), expr.span);
    let value = evaluator.eval(&expr);
    match evaluator.finish_run() {
        Ok(state) => {
            let written = state.written();
            Ok((value, (state.into_written(), written)))
        }
        Err(RunFailure::Error(message)) => Err(format!("{label} failed: {message}")),
        Err(RunFailure::DeclaredResources) => Err(format!(
            "{label} declared resources, which the run cannot add"
        )),
    }
}
