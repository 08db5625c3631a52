//! The language as the engine runs it: [`Language`] implements `wconverge_catalog::Code`
//! (lazy values, `node_block` bodies, the checks and invariants of types), each on the
//! compiler's stack.

use crate::eval::types::{self, Declared};
use wconverge_catalog::{AttributeSchema, Code, Lazy, LazyUse, NodeAttributes, TypeSchema, Value};

/// The manifest language, for the engine: hand `&Language` to `wconverge_engine::prepare`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Language;

impl Code for Language {
    fn check_lazy(&self, lazy: &Lazy) -> Result<LazyUse, String> {
        crate::check_lazy(lazy)
    }

    fn evaluate_lazy(
        &self,
        lazy: &Lazy,
        node: &NodeAttributes,
        facts: &Value,
    ) -> Result<Value, String> {
        crate::evaluate_lazy(lazy, node, facts)
    }

    fn evaluate_lazy_truth(
        &self,
        lazy: &Lazy,
        node: &NodeAttributes,
        facts: &Value,
    ) -> Result<bool, String> {
        crate::evaluate_lazy_truth(lazy, node, facts)
    }

    fn run_node_block(
        &self,
        lazy: &Lazy,
        node: &mut NodeAttributes,
        facts: &Value,
    ) -> Result<Vec<String>, String> {
        crate::run_node_block(lazy, node, facts)
    }

    fn instantiate(
        &self,
        schema: &TypeSchema,
        attribute: &AttributeSchema,
        value: &Value,
        declared: &[TypeSchema],
    ) -> Result<Value, Vec<String>> {
        crate::run_on_big_stack(|| {
            types::check_feature(schema, attribute, value, &Declared::new(declared), 0)
        })
    }

    fn run_checks(
        &self,
        schema: &TypeSchema,
        attribute: &AttributeSchema,
        value: &Value,
    ) -> Vec<String> {
        crate::run_on_big_stack(|| types::run_checks(schema, attribute, value))
    }

    fn run_invariants(&self, schema: &TypeSchema, attributes: &[(String, Value)]) -> Vec<String> {
        crate::run_on_big_stack(|| types::run_invariants(schema, attributes))
    }

    fn spawn_on_big_stack<'scope>(
        &self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        name: &str,
        work: Box<dyn FnOnce() + Send + 'scope>,
    ) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, ()>> {
        crate::spawn_on_big_stack(scope, name, work)
    }
}
