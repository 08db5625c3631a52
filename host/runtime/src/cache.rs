//! The compiled-component cache: each component is compiled to native code once per
//! machine and engine configuration.
//!
//! Loading native code is `unsafe` in wasmtime's sense: bytes that someone else could
//! have written would run as native code. So:
//! - the cache directory is walked from `/` by descriptor (`walk`, [`Ancestors::Private`]):
//!   it and every directory above it must belong to root or the running user and be
//!   writable by no one else (a sticky directory such as `/tmp` excepted); it is opened
//!   once and used only through that descriptor;
//! - an entry is opened without following links and without blocking, and used only if
//!   it is a regular file of the running user that no one else may write;
//! - an entry names the component it was compiled from (its sha256) and the engine
//!   (wasmtime's compatibility hash and wconverge's version), and carries the digest of
//!   its code: it is used only for that very component and engine, whatever its file
//!   name, and anything that fails a check is rebuilt, never trusted;
//! - a new entry is written to a temporary file created `O_EXCL | O_NOFOLLOW`, then
//!   renamed into place.

mod compiling;
use crate::digest::{hex, sha256_hex};
use crate::walk::{Ancestors, WalkError, walk};
pub use compiling::Compiled;
use compiling::Compiling;
use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Mode, OFlags};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8] = b"wconverge-cwasm-2\n";

/// The largest entry read: compiled code of the largest component wconverge loads
/// (512 MiB of WebAssembly) is well below it.
const MAX_ENTRY_BYTES: u64 = 2 << 30;

/// The most `validate` calls remembered as clean, per component: the oldest are
/// forgotten first. (Fewer in unit tests, which fill it.)
const MAX_VALIDATED: usize = if cfg!(test) { 64 } else { 4096 };

/// The most remembered `check` calls kept, of all components together: past it, the
/// least recently used are removed, down to three quarters of it. (Fewer in unit tests,
/// which fill it.)
const MAX_CHECKED: usize = if cfg!(test) { 8 } else { 8192 };

/// The most names a sweep of the cache directory reads: past it, it stops with a warning.
const MAX_SWEPT: usize = 1 << 20;

/// How long a remembered `check` counts as recently used: one used after this is
/// marked used again (its modification time set to now), so a sweep keeps it.
const RECENTLY_USED_SECONDS: i64 = 24 * 60 * 60;

/// Where compiled components are kept, if anywhere.
pub(crate) struct Cache {
    dir: Option<CacheDir>,
    /// Identifies the engine's code generation settings and wasmtime's version.
    engine_key: String,
    /// By component digest: the fingerprints of the `validate` calls that found nothing
    /// wrong, oldest first, as read from the entry once and added to since.
    validated: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
    /// Whether this process has swept the remembered checks (it does once, when it
    /// first writes one).
    swept: std::sync::atomic::AtomicBool,
    /// The components this process compiled (the cache had none for them), and the
    /// wall-clock time during which at least one was being compiled.
    compiling: Compiling,
}

/// The cache directory, walked and opened once.
struct CacheDir {
    path: PathBuf,
    fd: OwnedFd,
}

/// Feeds `Hash` output into SHA-256, for a hash that is stable across processes.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl Cache {
    /// A cache in `dir` (created owner-only if missing), or none. A directory that
    /// someone else owns or can write, or that lies below one, is not used, with a
    /// warning.
    pub(crate) fn new(dir: Option<&Path>, engine: &Engine) -> Cache {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        let engine_key = hex(&hasher.0.finalize()[..12]);
        let dir = dir.and_then(|dir| match open_dir(dir) {
            Ok(fd) => Some(CacheDir {
                path: dir.to_path_buf(),
                fd,
            }),
            Err(message) => {
                tracing::warn!("not using the component cache: {message}");
                None
            }
        });
        Cache {
            dir,
            engine_key,
            validated: std::sync::Mutex::default(),
            swept: std::sync::atomic::AtomicBool::new(false),
            compiling: Compiling::default(),
        }
    }

    /// Compiles `wasm`, counting it and its time.
    fn compile(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Component> {
        self.compiling.counted(|| Component::new(engine, wasm))
    }

    /// The component for `wasm` (whose digest is `digest`), from the cache or compiled.
    pub(crate) fn component(
        &self,
        engine: &Engine,
        wasm: &[u8],
        digest: &str,
    ) -> wasmtime::Result<Component> {
        let Some(dir) = &self.dir else {
            return self.compile(engine, wasm);
        };
        let name = format!("{digest}-{}.cwasm", self.engine_key);
        let shown = dir.path.join(&name);
        match read_trusted(&dir.fd, &name, digest, &self.engine_key) {
            Ok(Some(entry)) => match deserialize(engine, entry.code()) {
                Ok(component) => return Ok(component),
                Err(error) => tracing::warn!("rebuilding cache entry {}: {error}", shown.display()),
            },
            Ok(None) => {}
            Err(message) => tracing::warn!("rebuilding cache entry {}: {message}", shown.display()),
        }
        let component = self.compile(engine, wasm)?;
        match component.serialize() {
            Ok(code) => {
                if let Err(error) = write_entry(&dir.fd, &name, digest, &self.engine_key, &code) {
                    tracing::warn!("cannot write cache entry {}: {error}", shown.display());
                }
            }
            Err(error) => tracing::warn!("cannot serialize a compiled component: {error}"),
        }
        Ok(component)
    }
}

impl Cache {
    /// What a plugin told about itself when it was last loaded for this component,
    /// engine and `variant` (what of the policy shaped it), if a trustworthy entry has
    /// it: the same rules as compiled code (a private directory, this user's regular
    /// file, the component and engine named inside, the digest of the content).
    pub(crate) fn summary(&self, digest: &str, variant: &str) -> Option<Vec<u8>> {
        let (name, key) = self.summary_name(digest, variant);
        self.trusted((&name, digest, &key), MAX_ENTRY_BYTES, "rebuilding")
    }

    /// The content of the entry `name` for `component` and the engine line `key`, of
    /// at most `limit` bytes, if it is trustworthy; a warning saying what is `done`
    /// instead when it is there and is not.
    fn trusted(&self, entry: (&str, &str, &str), limit: u64, done: &str) -> Option<Vec<u8>> {
        self.trusted_entry(entry, limit, done).map(Entry::into_code)
    }

    /// [`Cache::trusted`], the entry as it was read.
    fn trusted_entry(
        &self,
        (name, component, key): (&str, &str, &str),
        limit: u64,
        done: &str,
    ) -> Option<Entry> {
        let dir = self.dir.as_ref()?;
        match read_trusted_within(&dir.fd, name, (component, key), limit) {
            Ok(found) => found,
            Err(message) => {
                tracing::warn!(
                    "{done} cache entry {}: {message}",
                    dir.path.join(name).display()
                );
                None
            }
        }
    }

    /// Keeps a plugin's summary for the next runs (see [`Cache::summary`]).
    pub(crate) fn store_summary(&self, digest: &str, variant: &str, bytes: &[u8]) {
        let Some(dir) = &self.dir else {
            return;
        };
        let (name, key) = self.summary_name(digest, variant);
        if let Err(error) = write_entry(&dir.fd, &name, digest, &key, bytes) {
            tracing::warn!(
                "cannot write cache entry {}: {error}",
                dir.path.join(&name).display()
            );
        }
    }

    /// Whether a `validate` call of the component `digest` whose input had this
    /// `fingerprint` (see `convert::fingerprint`) found nothing wrong in an earlier run:
    /// the same component on the same engine gives the same answer for the same input,
    /// so it need not be asked again. A call that found a problem or logged anything is
    /// never remembered, so those are shown on every run.
    pub(crate) fn validated(&self, digest: &str, fingerprint: &str) -> bool {
        if self.dir.is_none() {
            return false;
        }
        self.with_validated(digest, |known| {
            known.iter().any(|known| known == fingerprint)
        })
    }

    /// Remembers a `validate` call that found nothing wrong (see [`Cache::validated`]).
    pub(crate) fn remember_validated(&self, digest: &str, fingerprint: &str) {
        let Some(dir) = &self.dir else {
            return;
        };
        // Written under the lock: a later list never loses to an earlier one.
        self.with_validated(digest, |known| {
            if known.iter().any(|known| known == fingerprint) {
                return;
            }
            known.push(fingerprint.to_owned());
            if known.len() > MAX_VALIDATED {
                known.drain(..known.len() - MAX_VALIDATED);
            }
            let (name, key) = self.validated_name(digest);
            if let Err(error) = write_entry_with(
                &dir.fd,
                &name,
                (digest, &key),
                known.join("\n").as_bytes(),
                Durability::Unsynced,
            ) {
                tracing::warn!(
                    "cannot write cache entry {}: {error}",
                    dir.path.join(&name).display()
                );
            }
        });
    }

    /// `work` on the calls remembered for `digest`, read from its entry the first time.
    fn with_validated<T>(&self, digest: &str, work: impl FnOnce(&mut Vec<String>) -> T) -> T {
        let mut validated = self.validated.lock().expect("validated lock");
        work(
            validated
                .entry(digest.to_owned())
                .or_insert_with(|| self.read_validated(digest)),
        )
    }

    fn read_validated(&self, digest: &str) -> Vec<String> {
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        let (name, key) = self.validated_name(digest);
        match read_trusted(&dir.fd, &name, digest, &key) {
            Ok(Some(entry)) => String::from_utf8_lossy(entry.code())
                .lines()
                .map(str::to_owned)
                .collect(),
            Ok(None) => Vec::new(),
            Err(message) => {
                tracing::warn!(
                    "rebuilding cache entry {}: {message}",
                    dir.path.join(&name).display()
                );
                Vec::new()
            }
        }
    }

    /// Whether entries are kept at all (a cache directory is in use).
    pub(crate) fn keeps(&self) -> bool {
        self.dir.is_some()
    }

    /// The `check` call remembered in the entry `slot` for the component `digest` (see
    /// `replay`), of at most `limit` bytes, if a trustworthy entry holds one: the same
    /// rules as compiled code. An
    /// entry last marked used more than a day ago is marked used now, so that sweeps,
    /// which remove the least recently used, keep it.
    pub(crate) fn remembered_check(&self, digest: &str, slot: &str, limit: u64) -> Option<Vec<u8>> {
        let dir = self.dir.as_ref()?;
        let (name, key) = self.checked_name(digest, slot);
        let entry = self.trusted_entry((&name, digest, &key), limit, "not replaying")?;
        if now_seconds().saturating_sub(entry.modified) > RECENTLY_USED_SECONDS {
            let now = rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_NOW,
            };
            let times = rustix::fs::Timestamps {
                last_access: now,
                last_modification: now,
            };
            // The directory is private: the name is still the file just read. Not
            // marked, it is only swept sooner.
            let _ = rustix::fs::utimensat(
                &dir.fd,
                name.as_str(),
                &times,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            );
        }
        Some(entry.into_code())
    }

    /// Remembers a `check` call in the entry `slot` (see [`Cache::remembered_check`]),
    /// unsynced: one lost in a crash, or torn and so failing its digest, costs one call.
    /// The first entry a process writes sweeps the remembered checks (see
    /// `sweep_checked`): a run that replays everything writes none, and lists nothing.
    pub(crate) fn remember_check(&self, digest: &str, slot: &str, bytes: &[u8]) {
        let Some(dir) = &self.dir else {
            return;
        };
        let (name, key) = self.checked_name(digest, slot);
        if let Err(error) =
            write_entry_with(&dir.fd, &name, (digest, &key), bytes, Durability::Unsynced)
        {
            tracing::warn!(
                "cannot write cache entry {}: {error}",
                dir.path.join(&name).display()
            );
        }
        if !self.swept.swap(true, std::sync::atomic::Ordering::Relaxed) {
            sweep_checked(dir, MAX_CHECKED);
        }
    }

    /// The file name of a remembered `check` call, and the engine line it records.
    fn checked_name(&self, digest: &str, slot: &str) -> (String, String) {
        (
            format!("{digest}-{}-{slot}.checked", self.engine_key),
            format!("{}/checked", self.engine_key),
        )
    }

    /// The file name of the `validate` calls remembered for a component, and the engine
    /// line it records (which says what it is, so it is never taken for anything else).
    fn validated_name(&self, digest: &str) -> (String, String) {
        (
            format!("{digest}-{}.validated", self.engine_key),
            format!("{}/validated", self.engine_key),
        )
    }

    /// The entry's file name, and the engine line it records (which also says it is a
    /// summary, so that it is never taken for compiled code).
    fn summary_name(&self, digest: &str, variant: &str) -> (String, String) {
        (
            format!("{digest}-{}-{variant}.summary", self.engine_key),
            format!("{}/summary/{variant}", self.engine_key),
        )
    }
}

/// Removes the least recently used remembered `check` calls (`*.checked`, of every
/// component and engine) when there are more than `most`, down to three quarters of
/// `most`: the names a catalog's directories and first resources give change with the
/// catalog, and each would otherwise stay. An entry is used when it is written or when
/// it is replayed (see [`Cache::remembered_check`]); what is removed costs one `check`
/// call if it is needed again.
fn sweep_checked(dir: &CacheDir, most: usize) {
    let listed = rustix::fs::openat(
        &dir.fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .and_then(rustix::fs::Dir::new);
    let mut listing = match listed {
        Ok(listing) => listing,
        Err(error) => {
            tracing::warn!(
                "cannot list cache directory {}: {error}",
                dir.path.display()
            );
            return;
        }
    };
    let mut names = Vec::new();
    for (read, entry) in (&mut listing).enumerate() {
        if read == MAX_SWEPT {
            tracing::warn!(
                "cache directory {} has more than {MAX_SWEPT} entries; its remembered checks \
                 were not swept: remove the directory to start afresh",
                dir.path.display()
            );
            return;
        }
        let Ok(entry) = entry else { break };
        let name = entry.file_name().to_bytes();
        if name.ends_with(b".checked") && !name.starts_with(b".") {
            names.push(entry.file_name().to_owned());
        }
    }
    if names.len() <= most {
        return;
    }
    let mut used: Vec<(i64, std::ffi::CString)> = names
        .into_iter()
        .filter_map(|name| {
            let stat = rustix::fs::statat(
                &dir.fd,
                name.as_c_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .ok()?;
            Some((stat.st_mtime, name))
        })
        .collect();
    used.sort();
    let remove = used.len().saturating_sub(most - most / 4);
    for (_, name) in used.into_iter().take(remove) {
        let _ = rustix::fs::unlinkat(&dir.fd, name.as_c_str(), rustix::fs::AtFlags::empty());
    }
    tracing::debug!(removed = remove, "swept the remembered checks of the cache");
}

/// The time now, in seconds since the epoch.
fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        })
}

#[expect(
    unsafe_code,
    reason = "loading precompiled code is unsafe by wasmtime's contract"
)]
fn deserialize(engine: &Engine, code: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `code` was produced by `Component::serialize` of this program: the entry
    // names this component and engine and its embedded digest matched (so it is the
    // bytes we wrote), and it was read through a descriptor of a directory, walked from
    // `/`, that only this user (or root) owns and can write, from a regular file of this
    // user that no one else can write (`read_trusted`); wasmtime itself checks the
    // engine configuration and version recorded in it.
    unsafe { Component::deserialize(engine, code) }
}

/// Walks to `dir` (from `/`, by descriptor; it and every directory above it must belong
/// to root or this user and be writable by no one else, a sticky one excepted),
/// creating what is missing of it owner-only, and opens it: a directory for this user's
/// private files (the cache, the run lock).
pub fn open_private_dir(dir: &Path) -> Result<OwnedFd, PrivateDirError> {
    open_dir(dir)
}

/// Why a private directory could not be used.
#[derive(Debug)]
pub enum PrivateDirError {
    /// It is missing and could not be created.
    Create {
        dir: std::path::PathBuf,
        error: std::io::Error,
    },
    /// The walk to it stopped: a directory others can write, a link another user owns,
    /// something that is not a directory.
    Walk(WalkError),
    /// It could not be opened.
    Open {
        dir: std::path::PathBuf,
        error: std::io::Error,
    },
}

impl std::fmt::Display for PrivateDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrivateDirError::Create { dir, error } => {
                write!(f, "cannot create `{}`: {error}", dir.display())
            }
            PrivateDirError::Walk(error) => error.fmt(f),
            PrivateDirError::Open { dir, error } => {
                write!(f, "cannot open `{}`: {error}", dir.display())
            }
        }
    }
}

impl std::error::Error for PrivateDirError {}

fn open_dir(dir: &Path) -> Result<OwnedFd, PrivateDirError> {
    let walked = match walk(dir, Ancestors::Private) {
        Err(WalkError::Missing(_)) => {
            std::os::unix::fs::DirBuilderExt::mode(
                std::fs::DirBuilder::new().recursive(true),
                0o700,
            )
            .create(dir)
            .map_err(|error| PrivateDirError::Create {
                dir: dir.to_path_buf(),
                error,
            })?;
            walk(dir, Ancestors::Private)
        }
        walked => walked,
    }
    .map_err(PrivateDirError::Walk)?;
    crate::walk::open_directory(&walked).map_err(|error| PrivateDirError::Open {
        dir: dir.to_path_buf(),
        error: error.into(),
    })
}

/// The header of an entry: what it is, for which component and engine, and the digest
/// of the code after it.
fn header(component: &str, engine_key: &str, code: &[u8]) -> Vec<u8> {
    let mut header = MAGIC.to_vec();
    for line in [component, engine_key, &sha256_hex(code)] {
        header.extend_from_slice(line.as_bytes());
        header.push(b'\n');
    }
    header
}

/// An entry read and checked: its bytes, the code after the header.
#[derive(Debug, PartialEq)]
struct Entry {
    bytes: Vec<u8>,
    code_starts: usize,
    /// When the file was last modified, in seconds since the epoch.
    modified: i64,
}

impl Entry {
    fn code(&self) -> &[u8] {
        &self.bytes[self.code_starts..]
    }

    fn into_code(mut self) -> Vec<u8> {
        self.bytes.drain(..self.code_starts);
        self.bytes
    }
}

/// Why an entry is not trusted (and is rebuilt): each rule of the module's list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Untrusted {
    Symlink,
    Unopened(rustix::io::Errno),
    Unstated(rustix::io::Errno),
    Unread(std::io::ErrorKind),
    NotRegular(FileType),
    Owner { uid: u32, euid: u32 },
    Writable { mode: u32 },
    TooLarge { size: u64, limit: u64 },
    NotAnEntry,
    OtherComponent { recorded: String, wanted: String },
    OtherEngine,
    Digest,
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Untrusted::Symlink => f.write_str("it is a symlink"),
            Untrusted::Unopened(error) => write!(f, "cannot open it: {error}"),
            Untrusted::Unstated(error) => write!(f, "cannot stat it: {error}"),
            Untrusted::Unread(kind) => write!(f, "cannot read it: {}", std::io::Error::from(*kind)),
            Untrusted::NotRegular(kind) => {
                write!(
                    f,
                    "it is {}, not a regular file",
                    crate::walk::kind_name(*kind)
                )
            }
            Untrusted::Owner { uid, euid } => {
                write!(f, "it is owned by uid {uid}, not by this user (uid {euid})")
            }
            Untrusted::Writable { mode } => {
                write!(f, "it can be written by others (mode {mode:o})")
            }
            Untrusted::TooLarge { size, limit } => {
                write!(
                    f,
                    "it has {size} bytes, more than such an entry may ({limit})"
                )
            }
            Untrusted::NotAnEntry => {
                f.write_str("it is not a wconverge cache entry of this version")
            }
            Untrusted::OtherComponent { recorded, wanted } => {
                write!(
                    f,
                    "it was compiled from component sha256 {recorded}, not {wanted}"
                )
            }
            Untrusted::OtherEngine => f.write_str("it was compiled for another engine"),
            Untrusted::Digest => f.write_str("its digest does not match its content"),
        }
    }
}

/// The entry `name`, if there is a trustworthy one for `component` and this engine.
fn read_trusted(
    dir: &OwnedFd,
    name: &str,
    component: &str,
    engine_key: &str,
) -> Result<Option<Entry>, Untrusted> {
    read_trusted_within(dir, name, (component, engine_key), MAX_ENTRY_BYTES)
}

/// [`read_trusted`] for an entry of at most `limit` bytes.
fn read_trusted_within(
    dir: &OwnedFd,
    name: &str,
    (component, engine_key): (&str, &str),
    limit: u64,
) -> Result<Option<Entry>, Untrusted> {
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => return Err(Untrusted::Symlink),
        Err(error) => return Err(Untrusted::Unopened(error)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(Untrusted::Unstated)?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(Untrusted::NotRegular(kind));
    }
    let euid = rustix::process::geteuid().as_raw();
    if stat.st_uid != euid {
        return Err(Untrusted::Owner {
            uid: stat.st_uid,
            euid,
        });
    }
    if stat.st_mode & 0o022 != 0 {
        return Err(Untrusted::Writable {
            mode: stat.st_mode & 0o7777,
        });
    }
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if size > limit {
        return Err(Untrusted::TooLarge { size, limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    std::fs::File::from(fd)
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|error| Untrusted::Unread(error.kind()))?;
    // The code is used where it was read: a copy of compiled code is megabytes.
    let code_starts = parse_entry(&bytes, component, engine_key)?;
    Ok(Some(Entry {
        bytes,
        code_starts,
        modified: stat.st_mtime,
    }))
}

/// Where the code of an entry starts, the entry checked against the component and
/// engine it must be for.
fn parse_entry(bytes: &[u8], component: &str, engine_key: &str) -> Result<usize, Untrusted> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(Untrusted::NotAnEntry)?;
    let mut lines = rest.splitn(4, |byte| *byte == b'\n');
    let (Some(recorded_component), Some(recorded_engine), Some(recorded_code), Some(code)) =
        (lines.next(), lines.next(), lines.next(), lines.next())
    else {
        return Err(Untrusted::NotAnEntry);
    };
    if recorded_component != component.as_bytes() {
        return Err(Untrusted::OtherComponent {
            recorded: String::from_utf8_lossy(recorded_component).into_owned(),
            wanted: component.to_owned(),
        });
    }
    if recorded_engine != engine_key.as_bytes() {
        return Err(Untrusted::OtherEngine);
    }
    if recorded_code != sha256_hex(code).as_bytes() {
        return Err(Untrusted::Digest);
    }
    Ok(bytes.len() - code.len())
}

/// Writes the entry `name` through a temporary file created exclusively in the cache
/// directory, renamed into place.
fn write_entry(
    dir: &OwnedFd,
    name: &str,
    component: &str,
    engine_key: &str,
    code: &[u8],
) -> std::io::Result<()> {
    write_entry_with(dir, name, (component, engine_key), code, Durability::Synced)
}

/// Whether an entry is on disk before it is renamed into place.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    Synced,
    /// Not synced: an entry that is only worth a little work (one lost in a crash, or
    /// left torn and so failing its digest, costs that work again, nothing more).
    Unsynced,
}

fn write_entry_with(
    dir: &OwnedFd,
    name: &str,
    (component, engine_key): (&str, &str),
    code: &[u8],
    durability: Durability,
) -> std::io::Result<()> {
    let mut last = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
    for attempt in 0..8u32 {
        let temporary = format!(".{name}.{}.{attempt}.tmp", std::process::id());
        let fd = match rustix::fs::openat(
            dir,
            temporary.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::EXIST) => {
                last = rustix::io::Errno::EXIST.into();
                continue;
            }
            Err(errno) => return Err(errno.into()),
        };
        let mut file = std::fs::File::from(fd);
        let written = file
            .write_all(&header(component, engine_key, code))
            .and_then(|()| file.write_all(code))
            .and_then(|()| match durability {
                Durability::Synced => file.sync_all(),
                Durability::Unsynced => Ok(()),
            })
            .and_then(|()| {
                rustix::fs::renameat(dir, temporary.as_str(), dir, name).map_err(Into::into)
            });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(dir, temporary.as_str(), rustix::fs::AtFlags::empty());
        }
        return written;
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPONENT: &str = "aaaa";
    const ENGINE: &str = "engine";

    fn private_dir() -> (tempfile::TempDir, OwnedFd) {
        let dir = tempfile::tempdir().expect("temp dir");
        let fd = open_dir(dir.path()).expect("a private directory");
        (dir, fd)
    }

    #[test]
    fn a_tampered_entry_is_not_trusted() {
        let (dir, fd) = private_dir();
        write_entry(&fd, "entry", COMPONENT, ENGINE, b"native code").expect("written");
        assert_eq!(
            read_trusted(&fd, "entry", COMPONENT, ENGINE).map(|entry| entry.map(Entry::into_code)),
            Ok(Some(b"native code".to_vec()))
        );
        let path = dir.path().join("entry");
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).expect("tampered");
        assert_eq!(
            read_trusted(&fd, "entry", COMPONENT, ENGINE),
            Err(Untrusted::Digest)
        );
        assert_eq!(
            Untrusted::Digest.to_string(),
            "its digest does not match its content"
        );
    }

    #[test]
    fn clean_validate_calls_are_remembered_for_their_component_the_oldest_forgotten_first() {
        // Created owner-only.
        let dir = tempfile::tempdir().expect("temporary directory");
        let engine = Engine::default();
        let cache = Cache::new(Some(dir.path()), &engine);
        assert!(!cache.validated("aaaa", "first"));
        cache.remember_validated("aaaa", "first");
        assert!(cache.validated("aaaa", "first"));
        // Another run reads what this one remembered; another component has its own.
        let again = Cache::new(Some(dir.path()), &engine);
        assert!(again.validated("aaaa", "first"));
        assert!(!again.validated("bbbb", "first"));
        for n in 0..MAX_VALIDATED {
            again.remember_validated("aaaa", &format!("call {n}"));
        }
        let later = Cache::new(Some(dir.path()), &engine);
        assert!(!later.validated("aaaa", "first"), "the oldest is forgotten");
        assert!(later.validated("aaaa", "call 0"));
        assert!(later.validated("aaaa", &format!("call {}", MAX_VALIDATED - 1)));
        // Without a cache directory nothing is remembered.
        let none = Cache::new(None, &engine);
        none.remember_validated("aaaa", "first");
        assert!(!none.validated("aaaa", "first"));
    }

    #[test]
    fn an_entry_is_used_only_for_its_own_component_and_engine() {
        let (dir, fd) = private_dir();
        write_entry(&fd, "other", "bbbb", ENGINE, b"another plugin's code").expect("written");
        // Another component's valid entry under this component's name.
        std::fs::rename(dir.path().join("other"), dir.path().join("entry")).expect("renamed");
        assert_eq!(
            read_trusted(&fd, "entry", COMPONENT, ENGINE).map_err(|error| error.to_string()),
            Err("it was compiled from component sha256 bbbb, not aaaa".to_owned())
        );
        assert_eq!(
            read_trusted(&fd, "entry", "bbbb", "another engine"),
            Err(Untrusted::OtherEngine)
        );
    }

    #[test]
    fn an_entry_others_can_write_or_a_special_file_is_not_trusted_and_nothing_blocks() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, fd) = private_dir();
        write_entry(&fd, "entry", COMPONENT, ENGINE, b"native code").expect("written");
        let path = dir.path().join("entry");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let error = read_trusted(&fd, "entry", COMPONENT, ENGINE).expect_err("world-writable");
        assert_eq!(error, Untrusted::Writable { mode: 0o666 });
        assert_eq!(error.to_string(), "it can be written by others (mode 666)");
        // A FIFO with no writer would block a plain open forever.
        nix::unistd::mkfifo(
            &dir.path().join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("fifo");
        assert_eq!(
            read_trusted(&fd, "fifo", COMPONENT, ENGINE).map_err(|error| error.to_string()),
            Err("it is a FIFO, not a regular file".to_owned())
        );
        std::os::unix::fs::symlink(&path, dir.path().join("link")).expect("link");
        assert_eq!(
            read_trusted(&fd, "link", COMPONENT, ENGINE),
            Err(Untrusted::Symlink)
        );
    }

    #[test]
    fn a_cache_below_a_directory_others_can_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let open = dir.path().join("open");
        std::fs::create_dir(&open).expect("dir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let error = open_dir(&open.join("cache")).expect_err("shared ancestor");
        assert!(
            matches!(
                error,
                PrivateDirError::Walk(WalkError::SharedAncestor { .. })
            ),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("can be written by other users"),
            "{error}"
        );
    }

    #[test]
    fn a_summary_serves_only_its_component_engine_and_variant() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = Engine::default();
        let cache = Cache::new(Some(dir.path()), &engine);
        assert_eq!(cache.summary("aaaa", "v1"), None);
        cache.store_summary("aaaa", "v1", b"{\"types\": []}");
        assert_eq!(
            cache.summary("aaaa", "v1").as_deref(),
            Some(&b"{\"types\": []}"[..])
        );
        assert_eq!(
            cache.summary("aaaa", "v2"),
            None,
            "another list of provided types"
        );
        assert_eq!(cache.summary("bbbb", "v1"), None, "another component");
        // Renamed to pass for compiled code, it is not: the entry names what it is.
        let (summary, key) = cache.summary_name("aaaa", "v1");
        let compiled = format!("aaaa-{}.cwasm", cache.engine_key);
        let fd = open_dir(dir.path()).expect("private");
        rustix::fs::renameat(&fd, summary.as_str(), &fd, compiled.as_str()).expect("renamed");
        assert!(read_trusted(&fd, &compiled, "aaaa", &cache.engine_key).is_err());
        assert!(key.contains("/summary/"));
    }

    #[test]
    fn the_least_recently_used_remembered_checks_are_swept_past_the_most_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = Engine::default();
        let cache = Cache::new(Some(dir.path()), &engine);
        cache.store_summary("aaaa", "v1", b"a summary");
        for n in 0..12 {
            cache.remember_check("aaaa", &format!("slot{n:02}"), b"a call");
        }
        // Each made older than the next, all more than a day old.
        let day = std::time::Duration::from_secs(24 * 60 * 60);
        for n in 0..12 {
            let (name, _) = cache.checked_name("aaaa", &format!("slot{n:02}"));
            let file = std::fs::File::options()
                .write(true)
                .open(dir.path().join(name))
                .expect("entry");
            let age = day * (100 - n);
            file.set_modified(std::time::SystemTime::now() - age)
                .expect("modified");
        }
        // The oldest, replayed, is marked used now.
        let later = Cache::new(Some(dir.path()), &engine);
        assert_eq!(
            later.remembered_check("aaaa", "slot00", 1 << 20).as_deref(),
            Some(&b"a call"[..])
        );
        // A process that writes one sweeps: 13 entries, more than 8, down to 6.
        later.remember_check("bbbb", "slot12", b"another call");
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("listing")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .into_string()
                    .expect("name")
            })
            .filter(|name| name.ends_with(".checked"))
            .map(|name| name.rsplit('-').next().expect("slot").to_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "slot00.checked",
                "slot08.checked",
                "slot09.checked",
                "slot10.checked",
                "slot11.checked",
                "slot12.checked"
            ]
        );
        assert_eq!(
            later.summary("aaaa", "v1").as_deref(),
            Some(&b"a summary"[..])
        );
        // Below the most kept, a sweep removes nothing.
        let last = Cache::new(Some(dir.path()), &engine);
        last.remember_check("aaaa", "slot13", b"a call");
        assert_eq!(
            std::fs::read_dir(dir.path())
                .expect("listing")
                .filter(|entry| {
                    let name = entry.as_ref().expect("entry").file_name();
                    name.to_string_lossy().ends_with(".checked")
                })
                .count(),
            7
        );
    }
}
