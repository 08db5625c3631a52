//! A plugin's files, as wasmtime-wasi implements them, with every change it makes and
//! every change or escape the sandbox refuses recorded in the audit trail: a file opened
//! for writing, created, truncated, removed or renamed, a directory made or removed, a
//! link made, times set. Reads are not recorded one by one; the directory a call may
//! read is (see `Runtime::audit_directory`).
//!
//! Every method but `open-at` delegates to wasmtime-wasi's own implementation, which
//! enforces the grant's access (a read-only preopen refuses every change) and keeps
//! every path beneath its preopen. This layer watches, and refuses a few things
//! wasmtime-wasi would allow:
//! - once the audit log cannot be written, every change, before wasmtime-wasi sees it
//!   (a run whose trail is broken may not go on changing the machine unrecorded);
//! - `open-at` is this layer's own: it resolves the path beneath the directory by
//!   descriptor (`walk::beneath`, following only the links `walk::link_trust` allows),
//!   opens the last name `O_NOFOLLOW | O_NONBLOCK`, then looks at what it opened. A
//!   FIFO, socket or device is refused, naming its kind, before it is opened and again
//!   after (opening or reading one could block the run forever, and no provider has
//!   business with them); a file another user could have moved into its directory is
//!   neither read nor changed; a file with other hard links is not opened for writing
//!   when its directory can be written by other users (the other link could be any file
//!   the link's maker could not change); a truncation happens only after those checks,
//!   on the opened descriptor;
//! - an instance may hold only [`MAX_OPEN`] descriptors at once, and directory listings
//!   (which wasmtime-wasi keeps whole in host memory) only up to half its memory limit.
//!
//! Everything outside the grants is a directory of its own, mounted at `/`: a path no
//! grant holds (`/etc/shadow`, or a relative path, which the guest resolves from `/`)
//! reaches the host instead of failing inside the guest, and is refused here with the
//! path and the directories the call was granted, in the call's log (which the report
//! shows with the resource) and in the audit trail. That directory is an empty one this
//! process made and removed, so it has no entries and none can be made in it, whatever
//! this layer does not intercept.
//!
//! A file the plugin created exclusively (`O_CREAT | O_EXCL`, never through a link) is
//! remembered with its descriptor, so `file-metadata` sets its mode and owner through
//! that descriptor rather than by name.
//!
//! The trail names host paths. wasmtime-wasi does not say where a descriptor is, so
//! this layer keeps that itself: the preopens are the grants' directories, and each
//! descriptor opened from one is that directory joined with the path it was opened by.

use crate::grants::Grant;
use crate::policy::{Access, PluginPolicy};
use crate::state::{Phase, PluginState};
use crate::trail::{Decision, Event, Trail};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode as AsyncErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};
use wasmtime_wasi::{FsPerms, OpenMode};
use wconverge_engine::Secrets;
use wconverge_engine::{Level, LogRecord};

mod descriptor;
mod last;
use last::Last;
/// Replaces wasmtime-wasi's `wasi:filesystem/types` and `wasi:filesystem/preopens` in a
/// linker that already has them.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<PluginState>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    fs::add_to_linker::<PluginState, Audited>(linker, view)?;
    preopens::add_to_linker::<PluginState, Audited>(linker, view)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The most descriptors (files and directories, preopens included) one instance may
/// hold open at once.
pub(crate) const MAX_OPEN: usize = 256;

/// What a directory listing costs in host memory per entry, besides its name: an
/// estimate, for the listing budget.
const ENTRY_COST: usize = 64;

/// The most entries one listing may have, whatever the budget.
const MAX_ENTRIES: usize = 1_000_000;

/// What the host knows of an instance's open descriptors and listings.
#[derive(Default)]
pub(crate) struct Paths {
    /// Where each open descriptor is on the host, by resource index.
    open: HashMap<u32, PathBuf>,
    /// Files the plugin created exclusively and still holds: host path to descriptor.
    created: HashMap<PathBuf, u32>,
    /// The estimated host memory of each live listing, by resource index.
    listings: HashMap<u32, usize>,
    /// Their sum.
    listed: usize,
    /// What `fstat` said of directory descriptors, by resource index, in this call.
    directories: HashMap<u32, rustix::fs::Stat>,
    /// The descriptors that stand for everything outside the grants, by resource index.
    outside: Vec<u32>,
    /// Directories the plugin made in this instance, by device and inode: wconverge's
    /// own, not something another user moved in, though they belong to root in a
    /// directory that user can write until the plugin gives them their owner. At most
    /// [`MAX_MADE_DIRECTORIES`], the oldest forgotten first.
    made_directories: std::collections::VecDeque<(u64, u64)>,
}

/// How many directories an instance remembers it made.
const MAX_MADE_DIRECTORIES: usize = 4096;

impl Paths {
    /// The descriptor of a file the plugin created exclusively at `path` and still
    /// holds, if any.
    pub(crate) fn created(&self, path: &Path) -> Option<u32> {
        self.created.get(path).copied()
    }

    /// A new call: what was looked at in the last one may have changed.
    pub(crate) fn begin_call(&mut self) {
        self.directories.clear();
    }

    /// Whether the plugin holds descriptors or listings beyond its preopens: an idle
    /// instance that does is not kept (it would hold them while other resources run).
    pub(crate) fn holds_more_than(&self, preopens: usize) -> bool {
        self.open.len() > preopens + self.outside.len() || !self.listings.is_empty()
    }
}

/// Who is acting, for the trail's events.
pub(crate) struct Actor<'a> {
    pub(crate) policy: &'a PluginPolicy,
    pub(crate) digest: &'a str,
    pub(crate) subject: Option<&'a (String, Secrets)>,
    pub(crate) trail: Option<&'a Trail>,
}

impl Actor<'_> {
    pub(crate) fn scrub(&self, text: &str) -> String {
        match self.subject {
            Some((_, secrets)) => secrets.scrub(text),
            None => text.to_owned(),
        }
    }

    /// An event of this plugin about the current resource, allowed until said otherwise.
    pub(crate) fn event(&self, operation: &'static str, target: &str) -> Event {
        Event {
            resource: self.subject.map(|(name, _)| name.clone()),
            ..Event::new(
                &self.policy.name,
                self.digest,
                operation,
                self.scrub(target),
            )
        }
    }
}

pub(crate) struct Audited;

impl HasData for Audited {
    type Data<'a> = View<'a>;
}

pub(crate) struct View<'a> {
    fs: WasiFilesystemCtxView<'a>,
    shared: &'a crate::state::Shared,
    paths: &'a mut Paths,
    grants: &'a [Arc<Grant>],
    phase: Phase,
    actor: Actor<'a>,
    /// The call's log, where a refusal is explained with the resource it concerns.
    logs: &'a mut Vec<LogRecord>,
    /// Set when the last refusal was recorded with its reason, so it is not recorded
    /// again in general words.
    explained: bool,
}

fn view(state: &mut PluginState) -> View<'_> {
    // A file read through WASI is not recorded for a replay.
    state.unrecorded = true;
    let PluginState {
        wasi,
        table,
        paths,
        grants,
        policy,
        digest,
        subject,
        shared,
        logs,
        phase,
        ..
    } = state;
    View {
        fs: WasiFilesystemCtxView {
            ctx: wasi.filesystem(),
            table,
        },
        shared,
        paths,
        grants,
        phase: *phase,
        actor: Actor {
            policy,
            digest,
            subject: subject.as_ref(),
            trail: shared.trail(),
        },
        logs,
        explained: false,
    }
}

/// `base` joined with the guest's relative `path`, `..` taken lexically (wasmtime-wasi
/// has already refused any path that leaves its preopen, and the trail shows where the
/// plugin aimed).
fn join(base: &Path, path: &str) -> PathBuf {
    let mut joined = base.to_path_buf();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => joined.push(name),
            Component::ParentDir => {
                joined.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    joined
}

/// Whether an error is the sandbox's refusal rather than the file's state.
fn refusal(error: &FsError) -> bool {
    matches!(
        error.downcast_ref(),
        Some(AsyncErrorCode::NotPermitted | AsyncErrorCode::ReadOnly | AsyncErrorCode::Access)
    )
}

/// The directories a call was granted, with their access in its phase, in words:
/// "granted: `/etc/ssh` read-only".
pub(crate) fn granted(grants: &[Arc<Grant>], phase: Phase) -> String {
    if grants.is_empty() {
        return "granted: none".to_owned();
    }
    let each: Vec<String> = grants
        .iter()
        .map(|grant| {
            let access = if phase == Phase::Change && grant.access == Access::ReadWrite {
                "read-write"
            } else {
                "read-only"
            };
            let real = grant.canonical.display().to_string();
            if real == grant.guest {
                format!("`{real}` {access}")
            } else {
                format!("`{}` (`{real}`) {access}", grant.guest)
            }
        })
        .collect();
    format!("granted: {}", each.join(", "))
}

/// An empty directory that stays empty: made by this process, opened, and removed, so
/// nothing can be created in it. It backs the descriptor that stands for everything
/// outside a call's grants. `None` when it cannot be made (a read-only temporary
/// directory): paths outside the grants then fail inside the guest, unexplained, as
/// they would without it (warned once).
fn nowhere() -> Option<std::fs::File> {
    static NOWHERE: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    let made = NOWHERE.get_or_init(|| {
        make_nowhere()
            .inspect_err(|error| {
                tracing::warn!(
                    "cannot make the empty directory that stands for what is outside a \
                     plugin's grants ({error}); a plugin's access outside its grants will \
                     fail without the host's explanation"
                );
            })
            .ok()
    });
    let fd = rustix::io::fcntl_dupfd_cloexec(made.as_ref()?, 0).ok()?;
    Some(std::fs::File::from(fd))
}

/// How many names `make_nowhere` tries before it gives up.
const NOWHERE_ATTEMPTS: u32 = 16;

fn make_nowhere() -> std::io::Result<OwnedFd> {
    let temp = std::env::temp_dir();
    let parent = rustix::fs::open(
        &temp,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    for attempt in 0..NOWHERE_ATTEMPTS {
        let name = format!(
            ".wconverge-nowhere-{}-{nanos}-{attempt}",
            std::process::id()
        );
        match rustix::fs::mkdirat(&parent, name.as_str(), Mode::from_raw_mode(0o500)) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => continue,
            Err(errno) => return Err(errno.into()),
        }
        let opened = rustix::fs::openat(
            &parent,
            name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let removed = rustix::fs::unlinkat(&parent, name.as_str(), AtFlags::REMOVEDIR);
        let fd = opened?;
        removed?;
        // What was opened is the directory this process made (0500, so no one else
        // could have put an entry in it, and its sticky parent keeps others from
        // swapping it) and is gone from the tree: it can hold nothing, ever.
        let stat = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory
            || stat.st_uid != rustix::process::geteuid().as_raw()
            || stat.st_nlink != 0
        {
            return Err(std::io::Error::other(format!(
                "`{}` changed under it",
                temp.join(&name).display()
            )));
        }
        return Ok(fd);
    }
    Err(std::io::Error::other(format!(
        "{NOWHERE_ATTEMPTS} names in `{}` were taken",
        temp.display()
    )))
}

impl View<'_> {
    /// Where `path` beneath `fd` is on the host, for `operation`; refused, with the path
    /// and the call's grants, when `fd` stands for everything outside them.
    fn target(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        operation: &'static str,
        writes: bool,
    ) -> FsResult<PathBuf> {
        let target = self.path_of(fd, path);
        if self.paths.outside.contains(&fd.rep()) {
            return self.outside(operation, &target, writes);
        }
        Ok(target)
    }

    /// The directories this call was granted, with their access in it, in words.
    fn granted(&self) -> String {
        granted(self.grants, self.phase)
    }

    /// Why the sandbox refused a change at `target`, in words.
    fn refused_because(&self, target: &str, error: &FsError) -> String {
        match error.downcast_ref() {
            Some(AsyncErrorCode::Access) => "access denied by the host".to_owned(),
            _ => format!(
                "not permitted: `{target}` leads out of the directories granted to this call, \
                 or its directory is read-only in this call ({})",
                self.granted()
            ),
        }
    }

    /// Refuses what the plugin aimed at `target`, outside the directories of its call.
    fn outside<T>(&mut self, operation: &'static str, target: &Path, writes: bool) -> FsResult<T> {
        let name = &self.actor.policy.name;
        let reason = format!(
            "{} `{}` is outside the directories granted to this call ({}); a call gets the \
             directories its resource's path attributes need, where `directories` in \
             [plugins.{name}] allows them",
            if writes { "writing" } else { "reading" },
            target.display(),
            self.granted(),
        );
        let code = if writes {
            AsyncErrorCode::NotPermitted
        } else {
            AsyncErrorCode::Access
        };
        self.refuse(operation, target, code, reason)
    }

    /// Where `fd` is, or what the guest knows of it.
    fn path_of(&self, fd: &Resource<Descriptor>, path: &str) -> PathBuf {
        match self.paths.open.get(&fd.rep()) {
            Some(base) => join(base, path),
            None => join(Path::new("<unknown directory>"), path),
        }
    }

    /// Refuses a change when the trail that must record it cannot be written.
    fn may_change(&self, operation: &'static str, target: &Path) -> FsResult<()> {
        let Some(trail) = self.actor.trail else {
            return Ok(());
        };
        match trail.broken() {
            None => Ok(()),
            Some(why) => {
                let target = target.display().to_string();
                // Recorded on the console: the file is what failed.
                let _ = trail.record(Event {
                    decision: Decision::Denied,
                    reason: Some(why.to_string()),
                    ..self.actor.event(operation, &target)
                });
                Err(AsyncErrorCode::Access.into())
            }
        }
    }

    /// Records what became of a change: allowed when it was made (or failed for a reason
    /// of the file's), denied when the sandbox refused it.
    fn record<T>(&mut self, operation: &'static str, target: &str, result: &FsResult<T>) {
        if std::mem::take(&mut self.explained) && result.is_err() {
            return;
        }
        let refused = result
            .as_ref()
            .err()
            .filter(|error| refusal(error))
            .map(|error| self.refused_because(target, error));
        // Explained with the resource too, as `refuse` does.
        if let Some(reason) = &refused
            && self.logs.len() < 100
        {
            self.logs.push(LogRecord {
                level: Level::Warning,
                message: format!("host: {}", self.actor.scrub(reason)),
            });
        }
        let Some(trail) = self.actor.trail else {
            return;
        };
        if refused.is_none() && !trail.logs_allowed() {
            return;
        }
        let _ = trail.record(Event {
            decision: if refused.is_some() {
                Decision::Denied
            } else {
                Decision::Allowed
            },
            reason: refused.or_else(|| {
                result
                    .as_ref()
                    .err()
                    .and_then(|error| error.downcast_ref())
                    .map(|code| format!("granted; it failed: {code:?}"))
            }),
            ..self.actor.event(operation, target)
        });
    }

    /// A change at `path` under `fd`: checked, made by `change`, recorded.
    fn change<T>(
        &mut self,
        operation: &'static str,
        target: PathBuf,
        change: impl FnOnce(&mut Self) -> FsResult<T>,
    ) -> FsResult<T> {
        self.may_change(operation, &target)?;
        let result = change(self);
        self.record(operation, &target.display().to_string(), &result);
        result
    }

    /// Refuses with `code`, explaining why in the call's log (which the report shows
    /// with the resource) and in the audit trail.
    fn refuse<T>(
        &mut self,
        operation: &'static str,
        target: &Path,
        code: AsyncErrorCode,
        reason: String,
    ) -> FsResult<T> {
        let reason = self.actor.scrub(&reason);
        if let Some(trail) = self.actor.trail {
            // The console shows refusals whatever the file does.
            let _ = trail.record(Event {
                decision: Decision::Denied,
                reason: Some(reason.clone()),
                ..self.actor.event(operation, &target.display().to_string())
            });
        }
        if self.logs.len() < 100 {
            self.logs.push(LogRecord {
                level: Level::Warning,
                message: format!("host: {reason}"),
            });
        }
        self.explained = true;
        Err(code.into())
    }

    /// The device and inode of the file behind an open descriptor.
    fn identity(&self, rep: u32) -> Option<(u64, u64)> {
        let resource = Resource::<Descriptor>::new_borrow(rep);
        match self.fs.table.get(&resource).ok()? {
            Descriptor::File(file) => rustix::fs::fstat(&*file.file)
                .ok()
                .map(|stat| (stat.st_dev, stat.st_ino)),
            Descriptor::Dir(_) => None,
        }
    }

    /// What `fstat` says of the directory `fd` (`dir`), looked at once per call.
    fn directory_stat(
        &mut self,
        fd: &Resource<Descriptor>,
        dir: &std::fs::File,
    ) -> std::io::Result<rustix::fs::Stat> {
        if let Some(stat) = self.paths.directories.get(&fd.rep()) {
            return Ok(*stat);
        }
        let stat = rustix::fs::fstat(dir)?;
        self.paths.directories.insert(fd.rep(), stat);
        Ok(stat)
    }

    /// Opens `path` beneath the directory `fd`, as wasmtime-wasi would, with the checks
    /// of this layer (see the module's documentation).
    /// The directory a descriptor is.
    fn directory(&self, fd: &Resource<Descriptor>) -> FsResult<Dir> {
        match self.fs.table.get(fd)? {
            Descriptor::Dir(dir) => Ok(dir.clone()),
            Descriptor::File(_) => Err(AsyncErrorCode::NotDirectory.into()),
        }
    }

    /// `path` resolved beneath the directory `dir` (the descriptor `fd`) by descriptor,
    /// its last component not followed.
    fn beneath(
        &mut self,
        operation: &'static str,
        dir: &Dir,
        fd: &Resource<Descriptor>,
        (path, target, follow_last): (&str, &Path, bool),
    ) -> FsResult<crate::walk::Beneath> {
        let base = self.path_of(fd, "");
        match crate::walk::beneath(&*dir.dir, path, follow_last, &base) {
            Ok(found) => Ok(found),
            Err(crate::walk::BeneathError::Escape) => Err(AsyncErrorCode::NotPermitted.into()),
            Err(crate::walk::BeneathError::Untrusted(why)) => {
                self.refuse(operation, target, AsyncErrorCode::Access, why.to_string())
            }
            Err(crate::walk::BeneathError::Errno(errno)) => Err(std::io::Error::from(errno).into()),
        }
    }

    /// The directory that holds `path` beneath the directory `fd`, and its last name,
    /// resolved by descriptor (`walk::beneath`: links followed only where `link_trust`
    /// allows, never out of `fd`, the last name never), for a change there: the call
    /// then acts on that one name through that directory's descriptor. wasmtime-wasi's
    /// own calls would resolve the components before the last with cap-std, which
    /// follows any link that stays inside the grant, whoever made it.
    fn parent_for_change(
        &mut self,
        (operation, rule): (&'static str, Last),
        fd: &Resource<Descriptor>,
        path: &str,
        target: &Path,
    ) -> FsResult<(Dir, crate::walk::Beneath)> {
        let dir = self.directory(fd)?;
        if dir.perms.write_not_permitted() {
            return Err(AsyncErrorCode::NotPermitted.into());
        }
        let found = self.last_component(operation, &dir, fd, path, target, rule)?;
        Ok((dir, found))
    }

    fn open(
        &mut self,
        fd: &Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: &str,
        oflags: fs::OpenFlags,
        flags: fs::DescriptorFlags,
        target: &Path,
    ) -> FsResult<Descriptor> {
        let dir = match self.fs.table.get(fd)? {
            Descriptor::Dir(dir) => dir.clone(),
            Descriptor::File(_) => return Err(AsyncErrorCode::NotDirectory.into()),
        };
        if self.paths.open.len() >= MAX_OPEN {
            return self.refuse(
                "open",
                target,
                AsyncErrorCode::InsufficientMemory,
                format!(
                    "plugin `{}` holds {MAX_OPEN} open files and directories, the most one \
                     instance may hold; it must close some before it opens `{}`",
                    self.actor.policy.name,
                    target.display()
                ),
            );
        }
        if flags.intersects(
            fs::DescriptorFlags::FILE_INTEGRITY_SYNC
                | fs::DescriptorFlags::DATA_INTEGRITY_SYNC
                | fs::DescriptorFlags::REQUESTED_WRITE_SYNC,
        ) {
            return Err(AsyncErrorCode::Unsupported.into());
        }
        let create = oflags.contains(fs::OpenFlags::CREATE);
        let exclusive = create && oflags.contains(fs::OpenFlags::EXCLUSIVE);
        // A path that ends in `/` names a directory, as the kernel reads it: a file there
        // is `not-directory`, and nothing can be created there (`is-directory`, the
        // kernel's answer to `open("new/", O_CREAT)`).
        let names_directory = path.len() > 1 && (path.ends_with('/') || path.ends_with("/."));
        if names_directory && create {
            return Err(AsyncErrorCode::IsDirectory.into());
        }
        let truncate = oflags.contains(fs::OpenFlags::TRUNCATE);
        if oflags.contains(fs::OpenFlags::DIRECTORY) && (create || truncate) {
            return Err(AsyncErrorCode::Invalid.into());
        }
        // wasmtime-wasi's rules: a descriptor not opened for writing is opened for
        // reading, so the OS lets it be opened and the grant's access decides later.
        let write = create || truncate || flags.contains(fs::DescriptorFlags::WRITE);
        let read = flags.contains(fs::DescriptorFlags::READ) || !write;
        if write && dir.perms.write_not_permitted() {
            return Err(AsyncErrorCode::NotPermitted.into());
        }
        let mut open_mode = OpenMode::empty();
        open_mode.set(OpenMode::READ, read);
        open_mode.set(OpenMode::WRITE, write);
        let mut oflags_os = match (read, write) {
            (true, true) => OFlags::RDWR,
            (false, true) => OFlags::WRONLY,
            _ => OFlags::RDONLY,
        } | OFlags::CLOEXEC
            | OFlags::NONBLOCK
            | OFlags::NOCTTY;
        if create {
            oflags_os |= OFlags::CREATE;
        }
        if exclusive {
            oflags_os |= OFlags::EXCL | OFlags::NOFOLLOW;
        }
        if oflags.contains(fs::OpenFlags::DIRECTORY) || names_directory {
            oflags_os |= OFlags::DIRECTORY;
        }
        if !path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW) {
            oflags_os |= OFlags::NOFOLLOW;
        }
        // A new file starts private (0600): its maker sets the mode it should have, and no
        // one may open it in between (and keep reading what is written afterwards).
        let mode = if create {
            Mode::from_raw_mode(0o600)
        } else {
            Mode::empty()
        };
        // Resolved here, by descriptor, beneath the directory: a symlink is followed only
        // where `walk::link_trust` allows it (never one another user owns or could have
        // moved there), and never out of the directory.
        let follow =
            (path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW) || names_directory) && !exclusive;
        let base = self.path_of(fd, "");
        let found = match crate::walk::beneath(&*dir.dir, path, follow, &base) {
            Ok(found) => found,
            Err(crate::walk::BeneathError::Escape) => {
                return Err(AsyncErrorCode::NotPermitted.into());
            }
            Err(crate::walk::BeneathError::Untrusted(why)) => {
                return self.refuse("open", target, AsyncErrorCode::Access, why.to_string());
            }
            Err(crate::walk::BeneathError::Errno(errno)) => {
                return Err(std::io::Error::from(errno).into());
            }
        };
        let parent = found.parent(&*dir.dir);
        let name = found.name.as_os_str();
        // What is there, looked at without opening it: opening a device can do things (a
        // watchdog starts, a tape rewinds), so a special file is refused before. (Should
        // one be swapped in afterwards, the look at what was opened refuses it too.)
        let kind = found
            .entry
            .map(Ok)
            .unwrap_or_else(|| {
                rustix::fs::statat(parent, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            })
            .ok()
            .map(|stat| FileType::from_raw_mode(stat.st_mode));
        if let Some(
            kind @ (FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice),
        ) = kind
        {
            return self.refuse(
                "open",
                target,
                AsyncErrorCode::Access,
                special_file(target, kind),
            );
        }
        let file = rustix::fs::openat(parent, name, oflags_os | OFlags::NOFOLLOW, mode)
            .map_err(std::io::Error::from)?;
        let stat = rustix::fs::fstat(&file).map_err(std::io::Error::from)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                if write {
                    return Err(AsyncErrorCode::IsDirectory.into());
                }
                Ok(Descriptor::Dir(Dir::new(
                    std::fs::File::from(file),
                    dir.perms,
                    open_mode,
                    true,
                )))
            }
            FileType::RegularFile => {
                let parent_stat = match &found.parent {
                    Some(fd) => rustix::fs::fstat(fd).map_err(std::io::Error::from)?,
                    None => self.directory_stat(fd, &dir.dir)?,
                };
                if !exclusive && let Some(reason) = moved_in(&parent_stat, &stat, target) {
                    return self.refuse("open", target, AsyncErrorCode::Access, reason);
                }
                if write
                    && !exclusive
                    && let Some(reason) = other_links(&parent_stat, &stat, target)
                {
                    return self.refuse(
                        "open-for-writing",
                        target,
                        AsyncErrorCode::NotPermitted,
                        reason,
                    );
                }
                if truncate {
                    rustix::fs::ftruncate(&file, 0).map_err(std::io::Error::from)?;
                }
                // O_NONBLOCK stays: it means nothing to a regular file.
                Ok(Descriptor::File(File::new(
                    std::fs::File::from(file),
                    dir.perms,
                    open_mode,
                    true,
                )))
            }
            kind => self.refuse(
                "open",
                target,
                AsyncErrorCode::Access,
                special_file(target, kind),
            ),
        }
    }
}

/// `openat2` beneath `dir`, as wasmtime-wasi does (retrying the `EAGAIN` a concurrent
/// rename anywhere on the machine may cause).
fn open_beneath(
    dir: &std::fs::File,
    path: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, std::io::Error> {
    let mut last = rustix::io::Errno::AGAIN;
    for _ in 0..4 {
        match rustix::fs::openat2(
            dir.as_fd(),
            path,
            flags,
            mode,
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Ok(fd),
            Err(rustix::io::Errno::AGAIN) => last = rustix::io::Errno::AGAIN,
            // A path that would leave the directory: what wasmtime-wasi reports for it.
            Err(rustix::io::Errno::XDEV) => return Err(rustix::io::Errno::PERM.into()),
            Err(errno) => return Err(errno.into()),
        }
    }
    Err(last.into())
}

/// Why the regular file (its `stat`), an entry of the directory `parent` (its `stat`),
/// may not be changed in place: it has other hard links, and other users can write
/// `parent`, so the other link could be any file of the machine. `None` when it may.
pub(crate) fn other_links(
    parent: &rustix::fs::Stat,
    stat: &rustix::fs::Stat,
    target: &Path,
) -> Option<String> {
    if stat.st_nlink <= 1 || !crate::walk::shared(parent.st_uid, parent.st_mode) {
        return None;
    }
    Some(format!(
        "`{}` has {} hard links and its directory can be written by other users; \
             wconverge does not change such a file in place (another link could be any file \
             of the machine): remove the other links, or let the file be replaced",
        target.display(),
        stat.st_nlink
    ))
}

/// Why a plugin may not touch the existing file (its `stat`) in the directory `parent`
/// (its `stat`): another user who may write that directory could have moved it there (a
/// root-only file kept elsewhere in it, renamed to the name a resource manages), so
/// reading it could put its content in a report or another file, and changing it would
/// change that file. `None` when it may.
pub(crate) fn moved_in(
    parent: &rustix::fs::Stat,
    stat: &rustix::fs::Stat,
    target: &Path,
) -> Option<String> {
    crate::walk::could_be_moved_in(stat.st_uid, parent.st_uid, parent.st_mode).then(|| {
        format!(
            "`{}` belongs to uid {} in a directory that {} can write, who could have moved \
             it there from elsewhere; wconverge neither reads it nor changes it in place \
             (give it to the directory's owner, or manage its content so that it is \
             replaced)",
            target.display(),
            stat.st_uid,
            writers(parent)
        )
    })
}

/// Who other than root and this user may write a directory, in words.
pub(crate) fn writers(dir: &rustix::fs::Stat) -> String {
    if dir.st_mode & 0o002 != 0 {
        "every user".to_owned()
    } else if dir.st_mode & 0o020 != 0 {
        format!("group {}", dir.st_gid)
    } else {
        format!("uid {}", dir.st_uid)
    }
}

/// What a directory listing would cost, or `None` past `budget` (bytes) or
/// [`MAX_ENTRIES`].
fn listing_cost(dir: &std::fs::File, budget: usize) -> FsResult<Option<usize>> {
    let fd = rustix::fs::openat(
        dir.as_fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let entries = rustix::fs::Dir::new(fd).map_err(std::io::Error::from)?;
    let mut cost = 0usize;
    let mut count = 0usize;
    for entry in entries {
        let entry = entry.map_err(std::io::Error::from)?;
        count += 1;
        cost += entry.file_name().to_bytes().len() + ENTRY_COST;
        if cost > budget || count > MAX_ENTRIES {
            return Ok(None);
        }
    }
    Ok(Some(cost))
}

/// A file's output stream that writes on the calling thread. wasmtime-wasi's hands
/// each write to a thread of its pool and back, which was the first cost of writing a
/// small file; a regular file's write does not wait on anyone (wconverge refuses FIFOs,
/// sockets and devices before they are opened).
struct FileWriter {
    file: Arc<std::fs::File>,
    position: u64,
    /// Reported at the next operation, as wasmtime-wasi's stream does.
    failed: Option<std::io::Error>,
}

/// The most one `write` may carry, as wasmtime-wasi's file streams allow.
const FILE_WRITE_PERMIT: usize = 64 * 1024;

impl FileWriter {
    fn failure(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        match self.failed.take() {
            Some(error) => Err(wasmtime_wasi::p2::StreamError::LastOperationFailed(
                error.into(),
            )),
            None => Ok(()),
        }
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for FileWriter {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::OutputStream for FileWriter {
    fn write(&mut self, bytes: bytes::Bytes) -> wasmtime_wasi::p2::StreamResult<()> {
        use std::os::unix::fs::FileExt;
        self.failure()?;
        if bytes.len() > FILE_WRITE_PERMIT {
            return Err(wasmtime_wasi::p2::StreamError::Trap(wasmtime::format_err!(
                "a write of {} bytes is more than the {FILE_WRITE_PERMIT} `check-write` permits",
                bytes.len()
            )));
        }
        match self.file.write_all_at(&bytes, self.position) {
            Ok(()) => {
                self.position = self.position.saturating_add(bytes.len() as u64);
                Ok(())
            }
            Err(error) => {
                self.failed = Some(error);
                Ok(())
            }
        }
    }

    fn flush(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        self.failure()
    }

    fn check_write(&mut self) -> wasmtime_wasi::p2::StreamResult<usize> {
        self.failure()?;
        Ok(FILE_WRITE_PERMIT)
    }
}

fn special_file(target: &Path, kind: FileType) -> String {
    format!(
        "`{}` is {}; wconverge opens only regular files and directories for plugins",
        target.display(),
        crate::walk::kind_name(kind)
    )
}

/// A WASI timestamp as `utimensat` takes it.
fn timespec(time: fs::NewTimestamp) -> rustix::fs::Timespec {
    match time {
        fs::NewTimestamp::NoChange => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        fs::NewTimestamp::Now => rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        fs::NewTimestamp::Timestamp(time) => rustix::fs::Timespec {
            tv_sec: i64::try_from(time.seconds).unwrap_or(i64::MAX),
            tv_nsec: i64::from(time.nanoseconds),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_lexically() {
        let base = Path::new("/etc/app");
        assert_eq!(join(base, "conf/a.ini"), Path::new("/etc/app/conf/a.ini"));
        assert_eq!(join(base, "./x/../y"), Path::new("/etc/app/y"));
        assert_eq!(join(base, ""), Path::new("/etc/app"));
        assert_eq!(join(base, "../../root/.ssh"), Path::new("/root/.ssh"));
    }
}
