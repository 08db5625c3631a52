//! Where wconverge keeps its state and cache, and the run lock.

use anyhow::{Context, bail};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn home_based(xdg: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(xdg)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(fallback)))
        .map(|dir| dir.join("wconverge"))
}

/// The state directory: the flag, `$WCONVERGE_STATE_DIR`, `/var/lib/wconverge` for root,
/// `$XDG_STATE_HOME/wconverge` (or `~/.local/state/wconverge`) for anyone else.
pub(crate) fn state_dir(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = flag
        .or_else(|| std::env::var_os("WCONVERGE_STATE_DIR").map(PathBuf::from))
        .or_else(|| is_root().then(|| PathBuf::from("/var/lib/wconverge")))
        .or_else(|| home_based("XDG_STATE_HOME", ".local/state"));
    match dir {
        Some(dir) => Ok(dir),
        None => bail!("no state directory: set --state-dir or WCONVERGE_STATE_DIR"),
    }
}

/// The cache directory, chosen like the state directory; `None` if there is no home.
pub(crate) fn cache_dir(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.or_else(|| std::env::var_os("WCONVERGE_CACHE_DIR").map(PathBuf::from))
        .or_else(|| is_root().then(|| PathBuf::from("/var/cache/wconverge")))
        .or_else(|| home_based("XDG_CACHE_HOME", ".cache"))
}

/// Held for the whole of a run so two runs never interleave. The kernel releases it
/// when the process ends, however it ends: there is no stale lock to clean up.
pub(crate) struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    pub(crate) fn acquire(state_dir: &Path) -> anyhow::Result<RunLock> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir)
            .with_context(|| {
                format!(
                    "cannot create the state directory `{}`",
                    state_dir.display()
                )
            })?;
        let path = state_dir.join("run.lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot open the run lock `{}`", path.display()))?;
        if let Err(error) =
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            if error == rustix::io::Errno::WOULDBLOCK {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "another process".to_owned()
                } else {
                    format!("process {holder}")
                };
                bail!(
                    "another wconverge run ({holder}) holds the run lock `{}`; wait for it to finish",
                    path.display()
                );
            }
            return Err(error).with_context(|| format!("cannot lock `{}`", path.display()));
        }
        file.set_len(0)?;
        file.rewind()?;
        write!(file, "{}", std::process::id())?;
        Ok(RunLock { _file: file })
    }
}

/// This host's name, as the kernel knows it: the default node name for `node`
/// definitions.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
