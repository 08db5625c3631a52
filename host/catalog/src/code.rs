//! What running the code a catalog carries needs: its lazy values, `node_block` bodies,
//! and the checks and invariants of types, all written in the manifest language. The
//! engine calls it through [`Code`] and never evaluates code itself; the language
//! implements it (`wconverge_lang::Language`), and the CLI hands that to the engine.

use crate::{AttributeSchema, Lazy, NodeAttributes, TypeSchema, Value};

/// The type built into the engine whose `block` is code that writes node attributes.
pub const NODE_BLOCK: &str = "node_block";

/// What a lazy value uses of the run, found from its syntax tree when it is checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LazyUse {
    /// It reads `$facts`: the run gathers them before evaluating it.
    pub reads_facts: bool,
}

/// Evaluates the code a catalog carries. Every method may run deeply nested code, and
/// does so on a stack deep enough for it.
pub trait Code: Sync + std::fmt::Debug {
    /// Whether `lazy` is code the run can evaluate (it parses, is one expression, and
    /// uses nothing that would change the catalog), and what it uses.
    fn check_lazy(&self, lazy: &Lazy) -> Result<LazyUse, String>;

    /// Evaluates `lazy` against the node attributes and facts of this moment.
    fn evaluate_lazy(
        &self,
        lazy: &Lazy,
        node: &NodeAttributes,
        facts: &Value,
    ) -> Result<Value, String>;

    /// Whether `lazy`, used as a guard, holds (the language's truth).
    fn evaluate_lazy_truth(
        &self,
        lazy: &Lazy,
        node: &NodeAttributes,
        facts: &Value,
    ) -> Result<bool, String>;

    /// Runs a `node_block`'s body, which may write `node`; returns each write, in words.
    fn run_node_block(
        &self,
        lazy: &Lazy,
        node: &mut NodeAttributes,
        facts: &Value,
    ) -> Result<Vec<String>, String>;

    /// `value` of `attribute`, whose data type is a type the manifests declared (one of
    /// `declared`), instantiated: the object with its defaults, or every problem.
    fn instantiate(
        &self,
        schema: &TypeSchema,
        attribute: &AttributeSchema,
        value: &Value,
        declared: &[TypeSchema],
    ) -> Result<Value, Vec<String>>;

    /// What the checks `attribute` declares reject in `value`.
    fn run_checks(
        &self,
        schema: &TypeSchema,
        attribute: &AttributeSchema,
        value: &Value,
    ) -> Vec<String>;

    /// What the invariants of `schema` reject in a resource's attributes.
    fn run_invariants(&self, schema: &TypeSchema, attributes: &[(String, Value)]) -> Vec<String>;

    /// Starts `work` on a new thread of `scope` whose stack is deep enough for any code
    /// (so that the code it runs needs no thread of its own).
    fn spawn_on_big_stack<'scope>(
        &self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        name: &str,
        work: Box<dyn FnOnce() + Send + 'scope>,
    ) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, ()>>;
}
