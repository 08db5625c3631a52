//! Checks replayed rather than run again. A provider is a WebAssembly component: what a
//! `check` call returns is a function of the component, the engine, the resources passed
//! in and the answers its imports gave, and of nothing else, as long as it reads
//! nothing but what the host records. So a call that found every resource of its batch
//! in sync is remembered in the plugin cache with what it read (each `file-metadata`
//! `stat` and `sha256`, in order, with its answer), and the next run with the same
//! input asks the same questions again, natively, under the same grants and by the same
//! code: when every answer is the same, byte for byte, the call would return the same
//! states, and they are taken without making an instance or entering the plugin. One
//! answer that differs (a file's content, mode, owner or size, one file more or less)
//! and the call is made as usual.
//!
//! This is not `git`'s trust in a file's status: every read the plugin made is made
//! again (the file's status, and its content hashed, as the native floor reads it); only
//! the plugin's own computation is skipped, which those reads and the input determine.
//!
//! A call is remembered only when all of these hold:
//! - it was the first call of a fresh instance (an instance reused for the same grants
//!   could carry what an earlier call left in its memory);
//! - from the making of the instance to the end of the call, the plugin reached the host
//!   only through `file-metadata.stat` and `file-metadata.sha256`: any WASI function
//!   (files, clocks, random numbers, its environment, standard output), a launch, a log
//!   line or a change of metadata marks the call as not replayable
//!   ([`crate::state::PluginState::unrecorded`]);
//! - every resource was found in sync, and no state holds a sensitive value (the entry
//!   is a file on disk).
//!
//! The entry is kept as compiled code is (a private directory, this user's regular
//! file, the component and engine named inside, the digest of its content; one that
//! does not verify is not trusted), under a name made of the component, the engine and
//! the call's directories and first resource, so a changed catalog mostly replaces its
//! entry rather than adding one; past 8,192 entries the least recently used are swept
//! (`cache::sweep_checked`). Inside is the exact input's fingerprint (the plugin's policy
//! entry, each resource's type, title, attributes and context, the grants with the
//! directories they really are), checked before anything is replayed.

use crate::bindings::file_metadata::{FileKind, FileStat};
use crate::grants::Grant;
use crate::plugin::Plugin;
use crate::state::Phase;
use crate::{contract_error, convert, said};
use std::sync::Arc;
use wconverge_catalog::{TypeSchema, Value};
use wconverge_engine::{Checked, LogRecord, PluginError, PreparedResource};

/// What an entry starts with: its format.
const FORMAT: &[u8] = b"wconverge-replay 1\n";

/// The most bytes the reads of one call may take once recorded: a call that reads more
/// is not replayed (its reads are dropped as it goes past).
pub(crate) const MAX_READS_BYTES: usize = 4 << 20;

/// The longest path a recorded read may have (Linux's `PATH_MAX`).
pub(crate) const MAX_PATH: usize = 4096;

/// The largest entry read back: its reads, and the states of at most 1,024 resources.
pub(crate) const MAX_ENTRY_BYTES: usize = 2 * MAX_READS_BYTES;

/// The deepest value an entry may hold.
const MAX_DEPTH: usize = 64;

/// What a `file-metadata` read was.
const STAT: u8 = 1;
const SHA256: u8 = 2;

/// The reads of one call, as they were made: for each, its kind, its path and its
/// answer, encoded.
#[derive(Default)]
pub(crate) struct Reads {
    bytes: Vec<u8>,
}

impl Reads {
    /// Records a `stat`; false when the reads are past [`MAX_READS_BYTES`].
    pub(crate) fn stat(&mut self, path: &str, answer: &Result<Option<FileStat>, String>) -> bool {
        self.record(STAT, path, |out| put_stat(out, answer))
    }

    /// Records a `sha256`; false when the reads are past [`MAX_READS_BYTES`].
    pub(crate) fn sha256(&mut self, path: &str, answer: &Result<Option<String>, String>) -> bool {
        self.record(SHA256, path, |out| put_sha256(out, answer))
    }

    /// Records a read of `kind`: its path, then its answer as `put` encodes it.
    fn record(&mut self, kind: u8, path: &str, put: impl FnOnce(&mut Vec<u8>)) -> bool {
        self.bytes.push(kind);
        put_str(&mut self.bytes, path);
        put_answer(&mut self.bytes, put);
        self.bytes.len() <= MAX_READS_BYTES
    }
}

/// What identifies a call: the name of its entry, and the fingerprint of its exact input.
pub(crate) struct Key {
    pub(crate) slot: String,
    pub(crate) fingerprint: String,
}

impl Key {
    pub(crate) fn of(policy_text: &str, grants: &[Arc<Grant>], batch: &[&PreparedResource]) -> Key {
        use sha2::Digest;
        let mut directories = Vec::new();
        for grant in grants {
            put_str(&mut directories, &grant.guest);
            put_str(&mut directories, &grant.canonical.to_string_lossy());
            put_str(&mut directories, &format!("{:?}", grant.access));
        }
        let mut slot = sha2::Sha256::new();
        slot.update(&directories);
        if let Some(first) = batch.first() {
            slot.update(first.type_name.as_bytes());
            slot.update([0]);
            slot.update(first.title.as_bytes());
        }
        let mut fingerprint = sha2::Sha256::new();
        fingerprint.update(b"check\n");
        fingerprint.update(&directories);
        fingerprint.update(crate::convert::fingerprint(policy_text, batch).as_bytes());
        Key {
            slot: crate::digest::hex(&slot.finalize()[..16]),
            fingerprint: crate::digest::hex(&fingerprint.finalize()),
        }
    }
}

impl crate::Runtime {
    /// One `check` call for `batch` (resources that need exactly `grants`), on an
    /// instance with those grants read-only; or its replay, when an earlier run
    /// remembered a call with the same input that found every resource in sync and each
    /// of its reads gives the same answer now (see `replay`).
    pub(crate) fn check_batch(
        &self,
        plugin: &Plugin,
        schema: &TypeSchema,
        grants: &[Arc<Grant>],
        batch: &[&PreparedResource],
        logs: &mut Vec<LogRecord>,
    ) -> Result<Vec<Result<Checked, String>>, PluginError> {
        let directories = || {
            grants
                .iter()
                .map(|grant| grant.guest.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let what = format!(" of type `{}`", schema.name);
        // A batch with secrets is never remembered: what the plugin found of them (a
        // digest of a sensitive content, say) is not written to disk.
        let key = (self.cache.keeps()
            && batch.iter().all(|resource| resource.secrets().is_empty()))
        .then(|| Key::of(plugin.policy_text(), grants, batch));
        // Where the check begins, and (below) where it ends: a debug log shows which
        // checks ran at once.
        tracing::debug!(
            plugin = %plugin.policy.name,
            directories = %directories(),
            "check begins"
        );
        if let Some(key) = &key
            && let Some(states) = self.replayed(plugin, (grants, batch, &what), key)
        {
            tracing::debug!(
                plugin = %plugin.policy.name,
                resources = batch.len(),
                directories = %directories(),
                "check replayed"
            );
            return Ok(states
                .into_iter()
                .map(|state| {
                    Ok(Checked {
                        state,
                        changes: Vec::new(),
                    })
                })
                .collect());
        }
        let called = self.call_many(
            plugin,
            (Phase::Inspect, grants, key.is_some()),
            batch,
            &what,
            ("check", |exports, store, wits| {
                exports.provider()?.call_check(store, wits)
            }),
            logs,
        );
        tracing::debug!(
            plugin = %plugin.policy.name,
            resources = batch.len(),
            directories = %directories(),
            "check"
        );
        let (results, reads) = called?;
        let checked = results
            .into_iter()
            .zip(batch)
            .map(|(checked, resource)| match checked {
                Ok(checked) => {
                    let state = convert::state_from_wit(checked.current, schema)
                        .map_err(|message| contract_error(plugin, message))?;
                    let changes = convert::changes_from_wit(&checked.changes, schema, &|text| {
                        said(resource, text)
                    })
                    .map_err(|message| contract_error(plugin, message))?;
                    Ok(Ok(Checked { state, changes }))
                }
                Err(message) => Ok(Err(said(resource, &message))),
            })
            .collect::<Result<Vec<_>, PluginError>>()?;
        // A call that logged or printed is not among them: `log` and WASI's standard
        // output mark the instance, so it has no reads.
        if let (Some(key), Some(reads)) = (key, reads) {
            self.remember_check(plugin, &key, &reads, &checked);
        }
        Ok(checked)
    }

    /// The states of `batch` from the call remembered for `key`, if there is one and
    /// each of its reads, made again now for the same grants, gives the same answer.
    pub(crate) fn replayed(
        &self,
        plugin: &Plugin,
        (grants, batch, what): (&[Arc<Grant>], &[&PreparedResource], &str),
        key: &Key,
    ) -> Option<Vec<wconverge_engine::State>> {
        let bytes =
            self.cache
                .remembered_check(&plugin.digest, &key.slot, MAX_ENTRY_BYTES as u64)?;
        let remembered = remembered(&bytes, &key.fingerprint, batch.len())?;
        let mut state = plugin.state(
            &self.shared,
            Phase::Inspect,
            grants,
            wasmtime_wasi::WasiCtxBuilder::new().build(),
        );
        // The subject the call would have, for what the audit trail records.
        state.subject = Some(crate::batch_subject(batch, what));
        state.begin_call();
        state.held.replace(Some(Vec::new()));
        let same = each_read(remembered.reads, |read| match read {
            // Interrupted: the call, if it is made, says so.
            _ if crate::interrupted().is_some() => false,
            Read::Stat { path, answer } => same_stat(
                &crate::bindings::file_metadata::Host::stat(&mut state, path.to_owned()),
                answer,
            ),
            Read::Sha256 { path, answer } => same_sha256(
                &crate::bindings::file_metadata::Host::sha256(&mut state, path.to_owned()),
                answer,
            ),
        });
        match same {
            Ok(true) => {
                // The refusals its reads met, as the call would have recorded them.
                if let Some(trail) = self.shared.trail() {
                    for event in state.held.take().unwrap_or_default() {
                        let _ = trail.record(event);
                    }
                }
                Some(remembered.states)
            }
            Ok(false) => None,
            Err(Malformed) => {
                tracing::warn!(
                    plugin = %plugin.policy.name,
                    "a remembered check's reads do not parse; the check is made"
                );
                None
            }
        }
    }

    /// Remembers a `check` call that found every resource in sync, with what it read.
    pub(crate) fn remember_check(
        &self,
        plugin: &Plugin,
        key: &Key,
        reads: &Reads,
        checked: &[Result<Checked, String>],
    ) {
        let mut states = Vec::with_capacity(checked.len());
        for one in checked {
            match one {
                Ok(checked) if checked.changes.is_empty() => states.push(checked.state.as_slice()),
                _ => return,
            }
        }
        if let Some(entry) = entry(&key.fingerprint, reads, &states) {
            self.cache.remember_check(&plugin.digest, &key.slot, &entry);
        }
    }
}

/// A remembered call, as read from its entry.
pub(crate) struct Remembered<'e> {
    pub(crate) reads: &'e [u8],
    pub(crate) states: Vec<Vec<(String, Value)>>,
}

/// The entry for a call with `fingerprint` that read `reads` and found `states`; `None`
/// when a state holds a sensitive value.
pub(crate) fn entry(
    fingerprint: &str,
    reads: &Reads,
    states: &[&[(String, Value)]],
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(FORMAT.len() + 128 + reads.bytes.len() + 64 * states.len());
    out.extend_from_slice(FORMAT);
    put_str(&mut out, fingerprint);
    put_len(&mut out, reads.bytes.len());
    out.extend_from_slice(&reads.bytes);
    put_len(&mut out, states.len());
    for state in states {
        put_len(&mut out, state.len());
        for (name, value) in *state {
            put_str(&mut out, name);
            put_value(&mut out, value)?;
        }
    }
    (out.len() <= MAX_ENTRY_BYTES).then_some(out)
}

/// What `bytes` remembers for a call with `fingerprint` and `resources` resources;
/// `None` when it is for another input or not an entry of this format.
pub(crate) fn remembered<'e>(
    bytes: &'e [u8],
    fingerprint: &str,
    resources: usize,
) -> Option<Remembered<'e>> {
    let mut reader = Reader {
        rest: bytes.strip_prefix(FORMAT)?,
    };
    if reader.str()? != fingerprint {
        return None;
    }
    let reads_len = reader.len()?;
    let reads = reader.take(reads_len)?;
    let count = reader.len()?;
    if count != resources {
        return None;
    }
    let mut states = Vec::with_capacity(count);
    for _ in 0..count {
        states.push(reader.pairs(0)?);
    }
    reader
        .rest
        .is_empty()
        .then_some(Remembered { reads, states })
}

/// Each read of `reads` in turn: its kind (`STAT` or `SHA256`), its path and the answer
/// it got, encoded; `Err` when `reads` is not well formed.
pub(crate) fn each_read(
    reads: &[u8],
    mut visit: impl FnMut(Read<'_>) -> bool,
) -> Result<bool, Malformed> {
    let mut reader = Reader { rest: reads };
    while !reader.rest.is_empty() {
        let kind = reader.u8().ok_or(Malformed)?;
        let path = reader.str().ok_or(Malformed)?;
        let answer_len = reader.len().ok_or(Malformed)?;
        let answer = reader.take(answer_len).ok_or(Malformed)?;
        let read = match kind {
            STAT => Read::Stat { path, answer },
            SHA256 => Read::Sha256 { path, answer },
            _ => return Err(Malformed),
        };
        if !visit(read) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// An entry's reads that do not parse.
#[derive(Debug)]
pub(crate) struct Malformed;

/// One remembered read.
pub(crate) enum Read<'e> {
    Stat { path: &'e str, answer: &'e [u8] },
    Sha256 { path: &'e str, answer: &'e [u8] },
}

/// Whether `answer` is, encoded, exactly `recorded`.
pub(crate) fn same_stat(answer: &Result<Option<FileStat>, String>, recorded: &[u8]) -> bool {
    same(recorded, |out| put_stat(out, answer))
}

/// Whether `answer` is, encoded, exactly `recorded`.
pub(crate) fn same_sha256(answer: &Result<Option<String>, String>, recorded: &[u8]) -> bool {
    same(recorded, |out| put_sha256(out, answer))
}

/// Whether what `put` encodes is exactly `recorded`.
fn same(recorded: &[u8], put: impl FnOnce(&mut Vec<u8>)) -> bool {
    let mut out = Vec::with_capacity(recorded.len());
    put(&mut out);
    out == recorded
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_len(out, text.len());
    out.extend_from_slice(text.as_bytes());
}

fn put_option(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        None => out.push(0),
        Some(text) => {
            out.push(1);
            put_str(out, text);
        }
    }
}

/// An answer, preceded by its length.
fn put_answer(out: &mut Vec<u8>, answer: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    answer(out);
    let len = out.len() - at - 4;
    out[at..at + 4].copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_stat(out: &mut Vec<u8>, answer: &Result<Option<FileStat>, String>) {
    match answer {
        Err(message) => {
            out.push(0);
            put_str(out, message);
        }
        Ok(None) => out.push(1),
        Ok(Some(stat)) => {
            out.push(2);
            out.push(match stat.kind {
                FileKind::File => 0,
                FileKind::Directory => 1,
                FileKind::Symlink => 2,
                FileKind::Other => 3,
            });
            out.extend_from_slice(&stat.mode.to_le_bytes());
            out.extend_from_slice(&stat.uid.to_le_bytes());
            out.extend_from_slice(&stat.gid.to_le_bytes());
            put_option(out, stat.owner.as_deref());
            put_option(out, stat.group.as_deref());
            out.extend_from_slice(&stat.size.to_le_bytes());
        }
    }
}

fn put_sha256(out: &mut Vec<u8>, answer: &Result<Option<String>, String>) {
    match answer {
        Err(message) => {
            out.push(0);
            put_str(out, message);
        }
        Ok(None) => out.push(1),
        Ok(Some(digest)) => {
            out.push(2);
            put_str(out, digest);
        }
    }
}

/// `None` for a sensitive value, which is never written to disk.
fn put_value(out: &mut Vec<u8>, value: &Value) -> Option<()> {
    match value {
        Value::Undef => out.push(0),
        Value::Boolean(flag) => out.extend_from_slice(&[1, u8::from(*flag)]),
        Value::Integer(number) => {
            out.push(2);
            out.extend_from_slice(&number.to_le_bytes());
        }
        Value::Float(number) => {
            out.push(3);
            out.extend_from_slice(&number.to_bits().to_le_bytes());
        }
        Value::String(text) => {
            out.push(4);
            put_str(out, text);
        }
        Value::Array(items) => {
            out.push(5);
            put_len(out, items.len());
            for item in items {
                put_value(out, item)?;
            }
        }
        Value::Hash(entries) => {
            out.push(6);
            put_len(out, entries.len());
            for (key, item) in entries {
                put_str(out, key);
                put_value(out, item)?;
            }
        }
        Value::Sensitive(_) => return None,
    }
    Some(())
}

struct Reader<'e> {
    rest: &'e [u8],
}

impl<'e> Reader<'e> {
    fn take(&mut self, len: usize) -> Option<&'e [u8]> {
        if len > self.rest.len() {
            return None;
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn len(&mut self) -> Option<usize> {
        usize::try_from(u32::from_le_bytes(self.array()?)).ok()
    }

    fn str(&mut self) -> Option<&'e str> {
        let len = self.len()?;
        std::str::from_utf8(self.take(len)?).ok()
    }

    /// Names and values (a state's attributes, a hash's entries), their count first.
    fn pairs(&mut self, depth: usize) -> Option<Vec<(String, Value)>> {
        let len = self.len()?;
        // Each takes at least five bytes: a bound on how many there can be.
        if len > self.rest.len() / 5 {
            return None;
        }
        let mut pairs = Vec::with_capacity(len.min(64));
        for _ in 0..len {
            let name = self.str()?.to_owned();
            pairs.push((name, self.value(depth)?));
        }
        Some(pairs)
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        Some(match self.u8()? {
            0 => Value::Undef,
            1 => Value::Boolean(self.u8()? != 0),
            2 => Value::Integer(i64::from_le_bytes(self.array()?)),
            3 => Value::Float(f64::from_bits(u64::from_le_bytes(self.array()?))),
            4 => Value::String(self.str()?.to_owned()),
            5 => {
                let len = self.len()?;
                if len > self.rest.len() {
                    return None;
                }
                let mut items = Vec::with_capacity(len.min(64));
                for _ in 0..len {
                    items.push(self.value(depth + 1)?);
                }
                Value::Array(items)
            }
            6 => Value::Hash(self.pairs(depth + 1)?),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(size: u64) -> Result<Option<FileStat>, String> {
        Ok(Some(FileStat {
            kind: FileKind::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
            owner: Some("root".to_owned()),
            group: None,
            size,
        }))
    }

    #[test]
    fn an_entry_gives_back_its_reads_and_states_for_its_own_input_only() {
        let mut reads = Reads::default();
        reads.stat("/srv/a", &stat(6));
        reads.sha256("/srv/a", &Ok(Some("ab".repeat(32))));
        reads.stat("/srv/b", &Ok(None));
        reads.sha256("/srv/c", &Err("`/srv/c` is a symlink".to_owned()));
        let first = vec![
            ("ensure".to_owned(), Value::String("file".to_owned())),
            (
                "list".to_owned(),
                Value::Array(vec![
                    Value::Integer(-3),
                    Value::Float(0.5),
                    Value::Boolean(true),
                    Value::Undef,
                    Value::Hash(vec![("k".to_owned(), Value::String("v".to_owned()))]),
                ]),
            ),
        ];
        let second = vec![("ensure".to_owned(), Value::String("absent".to_owned()))];
        let bytes = entry("f1", &reads, &[&first, &second]).expect("no secret");
        let found = remembered(&bytes, "f1", 2).expect("its own input");
        assert_eq!(found.states, vec![first.clone(), second]);
        let mut seen = Vec::new();
        let whole = each_read(found.reads, |read| {
            seen.push(match read {
                Read::Stat { path, answer } => (
                    path.to_owned(),
                    same_stat(&stat(6), answer),
                    same_stat(&stat(7), answer),
                ),
                Read::Sha256 { path, answer } => (
                    path.to_owned(),
                    same_sha256(&Ok(Some("ab".repeat(32))), answer),
                    same_sha256(&Ok(None), answer),
                ),
            });
            true
        })
        .expect("well formed");
        assert!(whole);
        assert_eq!(
            seen,
            [
                ("/srv/a".to_owned(), true, false),
                ("/srv/a".to_owned(), true, false),
                ("/srv/b".to_owned(), false, false),
                ("/srv/c".to_owned(), false, false),
            ]
        );
        assert!(remembered(&bytes, "f2", 2).is_none(), "another input");
        assert!(remembered(&bytes, "f1", 1).is_none(), "another batch size");
        for cut in 0..bytes.len() {
            assert!(remembered(&bytes[..cut], "f1", 2).is_none(), "cut at {cut}");
        }
        let sensitive = vec![(
            "content".to_owned(),
            Value::Sensitive(Box::new(Value::String("secret".to_owned()))),
        )];
        assert!(
            entry("f1", &reads, &[&sensitive]).is_none(),
            "never on disk"
        );
    }

    #[test]
    fn reads_past_the_cap_say_so_and_an_entry_past_its_cap_is_not_made() {
        let mut reads = Reads::default();
        let path = format!("/{}", "p".repeat(MAX_PATH - 1));
        let mut count = 0;
        while reads.sha256(&path, &Ok(None)) {
            count += 1;
        }
        assert_eq!(count, MAX_READS_BYTES / (1 + 4 + MAX_PATH + 4 + 1));
        assert!(reads.bytes.len() > MAX_READS_BYTES);
        let state = vec![("big".to_owned(), Value::String("x".repeat(MAX_ENTRY_BYTES)))];
        assert!(entry("f", &Reads::default(), &[&state]).is_none());
    }

    #[test]
    fn a_value_nested_deeper_than_the_cap_is_refused() {
        let mut value = Value::Undef;
        for _ in 0..=MAX_DEPTH + 1 {
            value = Value::Array(vec![value]);
        }
        let state = vec![("deep".to_owned(), value)];
        let bytes = entry("f", &Reads::default(), &[&state]).expect("written");
        assert!(remembered(&bytes, "f", 1).is_none());
    }
}
