//! Where wconverge keeps its state and cache, and the run lock.

use anyhow::{Context, bail};
use std::io::{Read, Seek, Write};
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
        Some(dir) => absolute(&dir),
        None => bail!("no state directory: set --state-dir or WCONVERGE_STATE_DIR"),
    }
}

/// `dir` as the working directory sees it (`st` is `$PWD/st`, never `/st`): the
/// directories are opened component by component from `/`.
pub(crate) fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(dir).with_context(|| {
        format!(
            "cannot tell where `{}` is: the working directory is gone",
            dir.display()
        )
    })
}

/// The cache directory, chosen like the state directory; `None` if there is no home.
pub(crate) fn cache_dir(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.or_else(|| std::env::var_os("WCONVERGE_CACHE_DIR").map(PathBuf::from))
        .or_else(|| is_root().then(|| PathBuf::from("/var/cache/wconverge")))
        .or_else(|| home_based("XDG_CACHE_HOME", ".cache"))
        .and_then(|dir| absolute(&dir).ok())
}

/// Held for the whole of a run so two runs never interleave. The kernel releases it
/// when the process ends, however it ends: there is no stale lock to clean up.
pub(crate) struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    /// Takes the lock `run.lock` in `state_dir`, which must be private to this user (it
    /// and every directory above it writable by no one else): another user who could
    /// plant a link or a FIFO there would have root truncate a file of their choice, or
    /// block the run.
    pub(crate) fn acquire(state_dir: &Path) -> anyhow::Result<RunLock> {
        use rustix::fs::{FileType, Mode, OFlags};
        let dir = wconverge_runtime::open_private_dir(state_dir).map_err(|why| {
            anyhow::anyhow!(
                "cannot use the state directory `{}`: {why}",
                state_dir.display()
            )
        })?;
        let path = state_dir.join("run.lock");
        let fd = rustix::fs::openat(
            &dir,
            "run.lock",
            OFlags::RDWR
                | OFlags::CREATE
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::NOCTTY
                | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .with_context(|| format!("cannot open the run lock `{}`", path.display()))?;
        let stat = rustix::fs::fstat(&fd)
            .with_context(|| format!("cannot open the run lock `{}`", path.display()))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
            || stat.st_uid != rustix::process::geteuid().as_raw()
            || stat.st_nlink != 1
        {
            bail!(
                "the run lock `{}` must be a regular file of this user with no other link; \
                 remove it",
                path.display()
            );
        }
        let mut file = std::fs::File::from(fd);
        if let Err(error) =
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            if error == rustix::io::Errno::WOULDBLOCK {
                let mut holder = String::new();
                let _ = (&file).take(64).read_to_string(&mut holder);
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
    // The kernel's own file, read as every input is: a regular file, within a cap (a
    // host name is at most 64 bytes).
    wconverge_runtime::read_regular(Path::new("/proc/sys/kernel/hostname"), 256)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Writes `bytes` to `name` in the private directory `dir`, replacing it whole (a new
/// file renamed over the old one).
pub(crate) fn write_private(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let directory = wconverge_runtime::open_private_dir(dir).map_err(std::io::Error::other)?;
    let temporary = format!(".{name}.{}", std::process::id());
    let fd = rustix::fs::openat(
        &directory,
        temporary.as_str(),
        rustix::fs::OFlags::WRONLY
            | rustix::fs::OFlags::CREATE
            | rustix::fs::OFlags::TRUNC
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.sync_all()?;
    rustix::fs::renameat(&directory, temporary.as_str(), &directory, name)?;
    Ok(())
}
