//! States read many at once (Puppet's prefetch): for a type whose schema sets
//! `batch_state`, the first of its resources to run reads the state of every resource of
//! its type and provider that has not run yet, in one call (one read of the package
//! database for all the packages of a run). After any resource changes the machine, what
//! was read is dropped, and the next resource reads again for those still to come.

use crate::validate::{Prepared, PreparedResource};
use crate::{LogRecord, PluginHost, State};
use std::collections::HashMap;

#[derive(Default)]
pub(crate) struct Prefetched {
    /// By catalog index.
    states: HashMap<usize, Result<State, String>>,
}

impl Prefetched {
    /// The state read for the resource at `position` of the run order, reading it (with
    /// those to come) if it was not; `None` when its type reads one at a time, or the
    /// batch could not be read (the resource then reads its own).
    pub(crate) fn take(
        &mut self,
        prepared: &Prepared,
        host: &dyn PluginHost,
        position: usize,
        logs: &mut Vec<LogRecord>,
    ) -> Option<Result<State, String>> {
        let order = prepared.graph.order();
        let idx = order[position];
        let resource = &prepared.resources[idx];
        if !batched(prepared, resource) {
            return None;
        }
        if let Some(state) = self.states.remove(&idx) {
            return Some(state);
        }
        let batch: Vec<usize> = order[position..]
            .iter()
            .copied()
            .filter(|&other| {
                let other_resource = &prepared.resources[other];
                other_resource.type_name == resource.type_name
                    && other_resource.provider == resource.provider
                    && batched(prepared, other_resource)
            })
            .collect();
        let resources: Vec<&PreparedResource> = batch
            .iter()
            .map(|&other| &prepared.resources[other])
            .collect();
        let call = host.current_states(&resources);
        logs.extend(call.logs);
        match call.outcome {
            Ok(states) if states.len() == batch.len() => {
                self.states = batch.into_iter().zip(states).collect();
                self.states.remove(&idx)
            }
            _ => None,
        }
    }

    /// The machine changed: what was read may be stale.
    pub(crate) fn invalidate(&mut self) {
        self.states.clear();
    }
}

/// Whether the resource's state is read in batches: its type asks for it, and it has no
/// lazy value (resolved only when it runs).
fn batched(prepared: &Prepared, resource: &PreparedResource) -> bool {
    resource.lazy.is_empty()
        && prepared
            .schema(resource)
            .is_some_and(|schema| schema.batch_state && schema.context.is_empty())
}
