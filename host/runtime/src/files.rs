//! A plugin's files, as wasmtime-wasi implements them, with every change it makes and
//! every change or escape the sandbox refuses recorded in the audit trail: a file opened
//! for writing, created, truncated, removed or renamed, a directory made or removed, a
//! link made, times set. Reads are not recorded one by one; the directory a call may
//! read is (see `Runtime::audit_directory`).
//!
//! Every method delegates to wasmtime-wasi's own implementation, which enforces the
//! grant's access (a read-only preopen refuses every change) and keeps every path
//! beneath its preopen. This layer only watches, with one exception: once the audit
//! log cannot be written, it refuses every change before wasmtime-wasi sees it (a run
//! whose trail is broken may not go on changing the machine unrecorded).
//!
//! The trail names host paths. wasmtime-wasi does not say where a descriptor is, so
//! this layer keeps that itself: the preopens are the grants' directories, and each
//! descriptor opened from one is that directory joined with the path it was opened by.

use crate::grants::Grant;
use crate::policy::PluginPolicy;
use crate::state::PluginState;
use crate::trail::{Decision, Event, Trail};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode as AsyncErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};
use wconverge_engine::Secrets;

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

/// Where each open descriptor of an instance is on the host, by resource index.
#[derive(Default)]
pub(crate) struct Paths(HashMap<u32, PathBuf>);

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
    paths: &'a mut Paths,
    grants: &'a [Arc<Grant>],
    actor: Actor<'a>,
}

fn view(state: &mut PluginState) -> View<'_> {
    let PluginState {
        wasi,
        table,
        paths,
        grants,
        policy,
        digest,
        subject,
        shared,
        ..
    } = state;
    View {
        fs: WasiFilesystemCtxView {
            ctx: wasi.filesystem(),
            table,
        },
        paths,
        grants,
        actor: Actor {
            policy,
            digest,
            subject: subject.as_ref(),
            trail: shared.trail(),
        },
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
fn refusal(error: &FsError) -> Option<&'static str> {
    match error.downcast_ref()? {
        AsyncErrorCode::NotPermitted | AsyncErrorCode::ReadOnly => Some(
            "not permitted: the directory is read-only in this call, or the path leads out of \
             the directories granted to it",
        ),
        AsyncErrorCode::Access => Some("access denied by the host"),
        _ => None,
    }
}

impl View<'_> {
    /// Where `fd` is, or what the guest knows of it.
    fn path_of(&self, fd: &Resource<Descriptor>, path: &str) -> PathBuf {
        match self.paths.0.get(&fd.rep()) {
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
                    reason: Some(why),
                    ..self.actor.event(operation, &target)
                });
                Err(AsyncErrorCode::Access.into())
            }
        }
    }

    /// Records what became of a change: allowed when it was made (or failed for a reason
    /// of the file's), denied when the sandbox refused it.
    fn record<T>(&self, operation: &'static str, target: &str, result: &FsResult<T>) {
        let Some(trail) = self.actor.trail else {
            return;
        };
        let refused = result.as_ref().err().and_then(refusal);
        if refused.is_none() && !trail.logs_allowed() {
            return;
        }
        let _ = trail.record(Event {
            decision: if refused.is_some() {
                Decision::Denied
            } else {
                Decision::Allowed
            },
            reason: refused.map(str::to_owned).or_else(|| {
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
        change: impl FnOnce(&mut WasiFilesystemCtxView<'_>) -> FsResult<T>,
    ) -> FsResult<T> {
        self.may_change(operation, &target)?;
        let result = change(&mut self.fs);
        self.record(operation, &target.display().to_string(), &result);
        result
    }
}

impl preopens::Host for View<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let directories = preopens::Host::get_directories(&mut self.fs)?;
        for (descriptor, guest) in &directories {
            if let Some(grant) = self.grants.iter().find(|grant| &grant.guest == guest) {
                self.paths
                    .0
                    .insert(descriptor.rep(), grant.canonical.clone());
            }
        }
        Ok(directories)
    }
}

impl fs::Host for View<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<fs::ErrorCode> {
        fs::Host::convert_error_code(&mut self.fs, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<streams::Error>,
    ) -> wasmtime::Result<Option<fs::ErrorCode>> {
        fs::Host::filesystem_error_code(&mut self.fs, err)
    }
}

impl fs::HostDescriptor for View<'_> {
    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        oflags: fs::OpenFlags,
        flags: fs::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let target = self.path_of(&fd, &path);
        let writes = flags.intersects(fs::DescriptorFlags::WRITE)
            || oflags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE);
        let opened = if writes {
            self.change("open-for-writing", target.clone(), |fs| {
                fs::HostDescriptor::open_at(fs, fd, path_flags, path, oflags, flags)
            })
        } else {
            let opened =
                fs::HostDescriptor::open_at(&mut self.fs, fd, path_flags, path, oflags, flags);
            if opened.as_ref().err().and_then(refusal).is_some() {
                self.record("open", &target.display().to_string(), &opened);
            }
            opened
        };
        if let Ok(descriptor) = &opened {
            self.paths.0.insert(descriptor.rep(), target);
        }
        opened
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.paths.0.remove(&fd.rep());
        fs::HostDescriptor::drop(&mut self.fs, fd)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.path_of(&fd, &path);
        self.change("create-directory", target, |fs| {
            fs::HostDescriptor::create_directory_at(fs, fd, path)
        })
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.path_of(&fd, &path);
        self.change("remove-directory", target, |fs| {
            fs::HostDescriptor::remove_directory_at(fs, fd, path)
        })
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.path_of(&fd, &path);
        self.change("remove-file", target, |fs| {
            fs::HostDescriptor::unlink_file_at(fs, fd, path)
        })
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let from = self.path_of(&fd, &old_path);
        let to = self.path_of(&new_fd, &new_path);
        let target = PathBuf::from(format!("{} -> {}", from.display(), to.display()));
        self.change("rename", target, |fs| {
            fs::HostDescriptor::rename_at(fs, fd, old_path, new_fd, new_path)
        })
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let link = self.path_of(&fd, &dest_path);
        let target = PathBuf::from(format!("{} -> {src_path}", link.display()));
        self.change("symlink", target, |fs| {
            fs::HostDescriptor::symlink_at(fs, fd, src_path, dest_path)
        })
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: fs::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let from = self.path_of(&fd, &old_path);
        let to = self.path_of(&new_descriptor, &new_path);
        let target = PathBuf::from(format!("{} -> {}", to.display(), from.display()));
        self.change("link", target, |fs| {
            fs::HostDescriptor::link_at(fs, fd, old_path_flags, old_path, new_descriptor, new_path)
        })
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let target = self.path_of(&fd, &path);
        self.change("set-times", target, |fs| {
            fs::HostDescriptor::set_times_at(fs, fd, path_flags, path, atim, mtim)
        })
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let target = self.path_of(&fd, "");
        self.change("set-times", target, |fs| {
            fs::HostDescriptor::set_times(fs, fd, atim, mtim)
        })
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: fs::Filesize) -> FsResult<()> {
        let target = self.path_of(&fd, "");
        self.change("truncate", target, |fs| {
            fs::HostDescriptor::set_size(fs, fd, size)
        })
    }

    // Everything below only delegates: reads, and writes through a descriptor that was
    // opened for writing (recorded when it was opened).

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
        len: fs::Filesize,
        advice: fs::Advice,
    ) -> FsResult<()> {
        fs::HostDescriptor::advise(&mut self.fs, fd, offset, len, advice)
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        fs::HostDescriptor::sync_data(&mut self.fs, fd)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorFlags> {
        fs::HostDescriptor::get_flags(&mut self.fs, fd)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorType> {
        fs::HostDescriptor::get_type(&mut self.fs, fd)
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: fs::Filesize,
        offset: fs::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        fs::HostDescriptor::read(&mut self.fs, fd, len, offset)
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: fs::Filesize,
    ) -> FsResult<fs::Filesize> {
        fs::HostDescriptor::write(&mut self.fs, fd, buf, offset)
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<fs::DirectoryEntryStream>> {
        fs::HostDescriptor::read_directory(&mut self.fs, fd)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        fs::HostDescriptor::sync(&mut self.fs, fd)
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorStat> {
        fs::HostDescriptor::stat(&mut self.fs, fd)
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::DescriptorStat> {
        fs::HostDescriptor::stat_at(&mut self.fs, fd, path_flags, path)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        fs::HostDescriptor::readlink_at(&mut self.fs, fd, path)
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::InputStream>> {
        fs::HostDescriptor::read_via_stream(&mut self.fs, fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::OutputStream>> {
        fs::HostDescriptor::write_via_stream(&mut self.fs, fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        fs::HostDescriptor::append_via_stream(&mut self.fs, fd)
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        fs::HostDescriptor::is_same_object(&mut self.fs, a, b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::MetadataHashValue> {
        fs::HostDescriptor::metadata_hash(&mut self.fs, fd)
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::MetadataHashValue> {
        fs::HostDescriptor::metadata_hash_at(&mut self.fs, fd, path_flags, path)
    }
}

impl fs::HostDirectoryEntryStream for View<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<fs::DirectoryEntryStream>,
    ) -> FsResult<Option<fs::DirectoryEntry>> {
        fs::HostDirectoryEntryStream::read_directory_entry(&mut self.fs, stream)
    }

    fn drop(&mut self, stream: Resource<fs::DirectoryEntryStream>) -> wasmtime::Result<()> {
        fs::HostDirectoryEntryStream::drop(&mut self.fs, stream)
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
