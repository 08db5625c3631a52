//! States read many at once (Puppet's prefetch): for a type whose schema sets
//! `batch_state`, the first of its resources to run reads the state of the resources of
//! its batch still to come, and plans each, in one call (one read of the package
//! database for all the packages of a run; one call for the files of a directory). A
//! resource found in sync then makes no call of its own.
//!
//! A batch is the resources of one type and provider whose path attributes ask for the
//! same directories (the parent of a `read-write` path, a `read` path itself), in run
//! order, at most [`MAX_BATCH`]: a batched call is granted no more than each of its
//! resources needs. The host checks that again, and splits what it would not grant as
//! one.
//!
//! After any resource changes the machine, what was read is dropped (and so is what was
//! being read meanwhile). Resources of batched types then read their own states (as in a
//! first run, where most resources change, a batch would be read for nothing) until one
//! is found in sync; each later read of a batch asks for twice as many as the one
//! before, back up to [`MAX_BATCH`].

use crate::prepared::{Prepared, PreparedResource};
use crate::{Checked, LogRecord, PluginHost};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use wconverge_catalog::PathAccess;

/// The most resources whose states one call reads.
pub(crate) const MAX_BATCH: usize = 1024;

/// What puts two resources in one batch: type, provider, and the directories they ask
/// for (each path attribute's name, access and the directory or path it names).
type BatchKey<'p> = (&'p str, &'p str, Vec<(&'p str, PathAccess, &'p str)>);

/// Hashes catalog indices (numbers this process made, not a manifest's strings) with a
/// multiplication rather than SipHash: the maps below are looked up a few times a
/// resource, under the lock the workers share.
#[derive(Default)]
struct IndexHasher(u64);

impl Hasher for IndexHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_usize(&mut self, index: usize) {
        self.write_u64(index as u64);
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type IndexMap<V> = HashMap<usize, V, BuildHasherDefault<IndexHasher>>;
type IndexSet = HashSet<usize, BuildHasherDefault<IndexHasher>>;

/// The batches of a run: for each, the run positions of its resources in order; and for
/// each run position, its batch.
struct Batches {
    members: Vec<Vec<usize>>,
    /// For each batch, where a claim starts looking: every member before it has had its
    /// turn (turns only ever come, so it only moves on, and claims cost their batch's
    /// length once in all, not once each).
    taken_before: Vec<usize>,
    /// For each run position, its batch if its resource is batched.
    at: Vec<Option<usize>>,
}

/// What was read, shared by the resources running at once: the read itself happens
/// outside the lock, so one resource reading a batch never holds up another.
#[derive(Default)]
pub(crate) struct Prefetched {
    inner: Mutex<Inner>,
    /// Signalled when a read ends.
    read: Condvar,
    /// Whether resources read their own states (`Inner::next` is 0), as a flag that a
    /// resource found in sync asks without taking the lock: set and cleared under it.
    own_reads: AtomicBool,
    /// For a run of some resources: those it applies, by catalog index (no other is
    /// read in a batch).
    selected: Option<Box<[bool]>>,
}

struct Inner {
    /// By catalog index.
    states: IndexMap<Result<Checked, crate::Failure>>,
    /// Built when the first resource of a batched type runs.
    batches: Option<Batches>,
    /// How many resources the next batch read asks for; 0: the next resource reads its
    /// own state.
    next: usize,
    /// Catalog indices a read under way is reading: if their turn comes first, they wait
    /// for it.
    in_flight: IndexSet,
    /// Catalog indices whose turn has come (their state is not read for them again).
    taken: IndexSet,
    /// Counts the changes of the machine: a read that began before one is not kept.
    generation: u64,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            states: IndexMap::default(),
            batches: None,
            next: MAX_BATCH,
            in_flight: IndexSet::default(),
            taken: IndexSet::default(),
            generation: 0,
        }
    }
}

/// The resources a read is to read (now in flight), and the generation it began in.
struct Claimed {
    batch: Vec<usize>,
    generation: u64,
}

/// Claims the resources to read with the one at `position`: it and those of its batch
/// whose turn has not come, unread and not being read (before it in the run order too:
/// another worker may have started one and not asked yet), as many as `next` allows;
/// `None` when none is to be read in a batch now.
fn claim(
    inner: &mut Inner,
    (prepared, selected): (&Prepared, Option<&[bool]>),
    position: usize,
) -> Option<Claimed> {
    if inner.next == 0 {
        return None;
    }
    let order = prepared.graph.order();
    let next = inner.next;
    let Inner {
        batches,
        in_flight,
        states,
        taken,
        ..
    } = inner;
    let batches = batches.get_or_insert_with(|| batches_of(prepared, order, selected));
    let batch = batches.at.get(position).copied().flatten()?;
    let asking = order[position];
    let members = &batches.members[batch];
    let from = &mut batches.taken_before[batch];
    while members
        .get(*from)
        .is_some_and(|&member| order[member] != asking && taken.contains(&order[member]))
    {
        *from += 1;
    }
    let batch: Vec<usize> = members[*from..]
        .iter()
        .map(|&position| order[position])
        .filter(|&other| {
            (other == asking || !taken.contains(&other))
                && !in_flight.contains(&other)
                && !states.contains_key(&other)
        })
        .take(next)
        .collect();
    if batch.is_empty() {
        return None;
    }
    in_flight.extend(batch.iter().copied());
    inner.next = (next * 2).min(MAX_BATCH);
    Some(Claimed {
        batch,
        generation: inner.generation,
    })
}

impl Inner {
    fn end_read(&mut self, batch: &[usize]) {
        for idx in batch {
            self.in_flight.remove(idx);
        }
    }
}

/// A read under way: when the read unwinds, its resources are no longer in flight, so
/// those waiting for them go on (and the panic reaches the run).
struct Reading<'p> {
    prefetched: &'p Prefetched,
    batch: Vec<usize>,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let mut inner = self
            .prefetched
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.end_read(&self.batch);
        self.prefetched.read.notify_all();
    }
}

impl Prefetched {
    /// For a run of the resources `selected` names (all when `None`).
    pub(crate) fn for_selection(selected: Option<&[bool]>) -> Prefetched {
        Prefetched {
            selected: selected.map(Box::from),
            ..Prefetched::default()
        }
    }

    /// The state read (and the changes planned) for the resource at `position` of the
    /// run order, reading it (with those to come of its batch) if it was not; `None`
    /// when its type reads one at a time, when it reads its own this time, or when the
    /// batch could not be read.
    pub(crate) fn take(
        &self,
        prepared: &Prepared,
        host: &dyn PluginHost,
        position: usize,
        logs: &mut Vec<LogRecord>,
    ) -> Option<Result<Checked, crate::Failure>> {
        let order = prepared.graph.order();
        let idx = order[position];
        let resource = &prepared.resources[idx];
        if !batched(prepared, resource)
            || self
                .selected
                .as_ref()
                .is_some_and(|selected| !selected[idx])
        {
            return None;
        }
        let mut read_ahead = true;
        let mut inner = self.inner.lock().expect("prefetch lock");
        inner.taken.insert(idx);
        while inner.in_flight.contains(&idx) {
            // Another resource's call is reading this one's batch, and ends within its
            // plugin's time limit: its result is as good as this resource's own read,
            // and cheaper. Meanwhile this worker reads the next batch still unread, once
            // (so two workers read two batches at a time), then waits.
            if read_ahead {
                read_ahead = false;
                if let Some(claimed) = self.claim_ahead(&mut inner, prepared, position) {
                    drop(inner);
                    self.read(prepared, host, claimed, logs);
                    inner = self.inner.lock().expect("prefetch lock");
                    continue;
                }
            }
            inner = self.read.wait(inner).expect("prefetch lock");
        }
        if let Some(state) = inner.states.remove(&idx) {
            return Some(state);
        }
        let claimed = claim(&mut inner, (prepared, self.selected.as_deref()), position)?;
        drop(inner);
        self.read(prepared, host, claimed, logs);
        self.inner
            .lock()
            .expect("prefetch lock")
            .states
            .remove(&idx)
    }

    /// Claims the batch of the first resource after `position` in the run order whose
    /// turn has not come and whose state is neither read nor being read.
    fn claim_ahead(
        &self,
        inner: &mut Inner,
        prepared: &Prepared,
        position: usize,
    ) -> Option<Claimed> {
        let order = prepared.graph.order();
        let batches = inner.batches.as_ref()?;
        let ahead =
            (position + 1..order.len().min(position + 1 + 2 * MAX_BATCH)).find(|&other| {
                batches.at.get(other).is_some_and(Option::is_some)
                    && !inner.taken.contains(&order[other])
                    && !inner.in_flight.contains(&order[other])
                    && !inner.states.contains_key(&order[other])
            })?;
        claim(inner, (prepared, self.selected.as_deref()), ahead)
    }

    /// Reads what `claimed` claimed and keeps it, unless the machine changed meanwhile.
    fn read(
        &self,
        prepared: &Prepared,
        host: &dyn PluginHost,
        claimed: Claimed,
        logs: &mut Vec<LogRecord>,
    ) {
        let mut reading = Reading {
            prefetched: self,
            batch: claimed.batch,
        };
        let resources: Vec<&PreparedResource> = reading
            .batch
            .iter()
            .map(|&other| &prepared.resources[other])
            .collect();
        let call = host.check(&resources);
        logs.extend(call.logs);
        let mut inner = self.inner.lock().expect("prefetch lock");
        let batch = std::mem::take(&mut reading.batch);
        inner.end_read(&batch);
        self.read.notify_all();
        if inner.generation != claimed.generation {
            // The machine changed while it was read.
            return;
        }
        if let Ok(states) = call.outcome
            && states.len() == batch.len()
        {
            // Added to what other batches read: their resources are still to come.
            inner.states.extend(batch.into_iter().zip(states));
        }
    }

    /// How many times the machine changed (or began to change) so far in this run.
    pub(crate) fn generation(&self) -> u64 {
        self.inner.lock().expect("prefetch lock").generation
    }

    /// A resource that read its own state was found in sync: batches are worth reading
    /// again (two at first).
    pub(crate) fn in_sync(&self) {
        // Most resources of a run find batches read already: no lock for them.
        if !self.own_reads.load(Ordering::Acquire) {
            return;
        }
        let mut inner = self.inner.lock().expect("prefetch lock");
        if inner.next == 0 {
            inner.next = 2;
        }
        self.own_reads.store(false, Ordering::Release);
    }

    /// The machine changed (or is changing): what was read may be stale, and so may be
    /// what is being read.
    pub(crate) fn invalidate(&self) {
        let mut inner = self.inner.lock().expect("prefetch lock");
        inner.states.clear();
        inner.next = 0;
        self.own_reads.store(true, Ordering::Release);
        inner.generation += 1;
    }
}

/// Whether the resource's state is read in batches: its type asks for it, and it has no
/// lazy value (resolved only when it runs).
fn batched(prepared: &Prepared, resource: &PreparedResource) -> bool {
    resource.lazy.is_empty()
        && prepared
            .schema(resource)
            .is_some_and(|schema| schema.batch_state)
}

/// The batches of the run: run positions grouped by [`BatchKey`], each in run order.
fn batches_of(prepared: &Prepared, order: &[usize], selected: Option<&[bool]>) -> Batches {
    let mut index: HashMap<BatchKey<'_>, usize> = HashMap::new();
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut at = vec![None; order.len()];
    for (position, &idx) in order.iter().enumerate() {
        let resource = &prepared.resources[idx];
        if !batched(prepared, resource) || selected.is_some_and(|selected| !selected[idx]) {
            continue;
        }
        let key = batch_key(prepared, resource);
        let batch = *index.entry(key).or_insert_with(|| {
            batches.push(Vec::new());
            batches.len() - 1
        });
        at[position] = Some(batch);
        batches[batch].push(position);
    }
    Batches {
        taken_before: vec![0; batches.len()],
        members: batches,
        at,
    }
}

fn batch_key<'p>(prepared: &'p Prepared, resource: &'p PreparedResource) -> BatchKey<'p> {
    let paths = prepared
        .schema(resource)
        .map(|schema| {
            resource
                .paths(schema)
                .into_iter()
                .map(|(attribute, path)| {
                    let named = match attribute.path_access {
                        PathAccess::ReadWrite => path.rsplit_once('/').map_or(path, |(dir, _)| dir),
                        _ => path,
                    };
                    (attribute.name.as_str(), attribute.path_access, named)
                })
                .collect()
        })
        .unwrap_or_default();
    (
        resource.type_name.as_str(),
        resource.provider.as_str(),
        paths,
    )
}
