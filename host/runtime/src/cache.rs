//! The compiled-component cache: each component is compiled to native code once per
//! machine and engine configuration.
//!
//! Loading native code is `unsafe` in wasmtime's sense: bytes that someone else could
//! have written would run as native code. So the cache lives in a directory that only
//! the running user owns and can write, every entry carries the digest of its bytes,
//! and any entry that fails a check is rebuilt, never trusted.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8] = b"wconverge-cwasm-1\n";

/// Where compiled components are kept, if anywhere.
pub(crate) struct Cache {
    dir: Option<PathBuf>,
    /// Identifies the engine's code generation settings and wasmtime's version.
    engine_key: String,
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

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

impl Cache {
    /// A cache in `dir` (created owner-only if missing), or none. An existing directory
    /// that someone else owns or can write is not used, with a warning.
    pub(crate) fn new(dir: Option<&Path>, engine: &Engine) -> Cache {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        let engine_key = hex(&hasher.0.finalize()[..12]);
        let dir = dir.and_then(|dir| match prepare_dir(dir) {
            Ok(()) => Some(dir.to_path_buf()),
            Err(message) => {
                tracing::warn!("not using the component cache: {message}");
                None
            }
        });
        Cache { dir, engine_key }
    }

    /// The component for `wasm` (whose digest is `digest`), from the cache or compiled.
    pub(crate) fn component(
        &self,
        engine: &Engine,
        wasm: &[u8],
        digest: &str,
    ) -> wasmtime::Result<Component> {
        let Some(dir) = &self.dir else {
            return Component::new(engine, wasm);
        };
        let path = dir.join(format!("{digest}-{}.cwasm", self.engine_key));
        match read_trusted(&path) {
            Ok(Some(code)) => match deserialize(engine, &code) {
                Ok(component) => return Ok(component),
                Err(error) => tracing::warn!("rebuilding cache entry {}: {error}", path.display()),
            },
            Ok(None) => {}
            Err(message) => tracing::warn!("rebuilding cache entry {}: {message}", path.display()),
        }
        let component = Component::new(engine, wasm)?;
        match component.serialize() {
            Ok(code) => {
                if let Err(error) = write_entry(dir, &path, &code) {
                    tracing::warn!("cannot write cache entry {}: {error}", path.display());
                }
            }
            Err(error) => tracing::warn!("cannot serialize a compiled component: {error}"),
        }
        Ok(component)
    }
}

#[expect(
    unsafe_code,
    reason = "loading precompiled code is unsafe by wasmtime's contract"
)]
fn deserialize(engine: &Engine, code: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `code` was produced by `Component::serialize` of this program (the entry's
    // embedded digest matched, so it is the bytes we wrote) and read from a directory and
    // file that only this user owns and can write (`read_trusted`); wasmtime itself
    // checks the engine configuration and version recorded in it.
    unsafe { Component::deserialize(engine, code) }
}

fn prepare_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| format!("cannot create `{}`: {error}", dir.display()))?;
    }
    check_private(dir)
}

/// Owned by this user and writable by no one else.
fn check_private(path: &Path) -> Result<(), String> {
    let metadata = std::fs::symlink_metadata(path)
        .map_err(|error| format!("cannot stat `{}`: {error}", path.display()))?;
    let euid = rustix::process::geteuid().as_raw();
    if metadata.file_type().is_symlink() {
        return Err(format!("`{}` is a symlink", path.display()));
    }
    if metadata.uid() != euid {
        return Err(format!(
            "`{}` is owned by uid {}, not by this user (uid {euid})",
            path.display(),
            metadata.uid()
        ));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!(
            "`{}` can be written by others (mode {:o})",
            path.display(),
            metadata.mode() & 0o7777
        ));
    }
    Ok(())
}

/// The compiled code of an entry, if there is a trustworthy one.
fn read_trusted(path: &Path) -> Result<Option<Vec<u8>>, String> {
    if !path.exists() {
        return Ok(None);
    }
    check_private(path)?;
    let bytes = std::fs::read(path).map_err(|error| error.to_string())?;
    let header = MAGIC.len() + 64 + 1;
    if bytes.len() < header || !bytes.starts_with(MAGIC) {
        return Err("not a wconverge cache entry".to_owned());
    }
    let recorded = &bytes[MAGIC.len()..MAGIC.len() + 64];
    let code = &bytes[header..];
    if recorded != sha256_hex(code).as_bytes() {
        return Err("its digest does not match its content".to_owned());
    }
    Ok(Some(code.to_vec()))
}

fn write_entry(dir: &Path, path: &Path, code: &[u8]) -> std::io::Result<()> {
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("entry"),
        std::process::id()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(MAGIC)?;
    file.write_all(sha256_hex(code).as_bytes())?;
    file.write_all(b"\n")?;
    file.write_all(code)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tampered_entry_is_not_trusted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("entry.cwasm");
        write_entry(dir.path(), &path, b"native code").expect("written");
        assert_eq!(read_trusted(&path), Ok(Some(b"native code".to_vec())));
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).expect("tampered");
        assert_eq!(
            read_trusted(&path),
            Err("its digest does not match its content".to_owned())
        );
    }

    #[test]
    fn an_entry_others_can_write_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("entry.cwasm");
        write_entry(dir.path(), &path, b"native code").expect("written");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let error = read_trusted(&path).expect_err("world-writable");
        assert!(error.contains("can be written by others"), "{error}");
    }
}
