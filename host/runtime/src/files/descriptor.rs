//! The preopens (the grants, and `/` for everything outside them) and
//! `wasi:filesystem/types`' descriptors as the guest calls them: each path operation
//! finds its target (refusing one outside the grants), checks and records the change,
//! and makes it by descriptor; reads delegate to wasmtime-wasi.

use super::*;

impl preopens::Host for View<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let mut directories = preopens::Host::get_directories(&mut self.fs)?;
        for (descriptor, guest) in &directories {
            if let Some(grant) = self.grants.iter().find(|grant| &grant.guest == guest) {
                self.paths
                    .open
                    .insert(descriptor.rep(), grant.canonical.clone());
            }
        }
        if !self.grants.iter().any(|grant| grant.guest == "/")
            && let Some(nowhere) = nowhere()
        {
            let dir = Dir::new(nowhere, FsPerms::ReadOnly, OpenMode::READ, true);
            let descriptor = self.fs.table.push(Descriptor::Dir(dir))?;
            self.paths.open.insert(descriptor.rep(), PathBuf::from("/"));
            self.paths.outside.push(descriptor.rep());
            directories.push((descriptor, "/".to_owned()));
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

impl View<'_> {
    /// wasmtime-wasi's checks before a change that involves two directories: both
    /// writable (`not-permitted`), with the same access.
    fn same_writable_directories(
        &mut self,
        old: &Resource<Descriptor>,
        new: &Resource<Descriptor>,
    ) -> FsResult<()> {
        let (old, new) = (self.directory(old)?, self.directory(new)?);
        if old.perms.write_not_permitted()
            || new.perms.write_not_permitted()
            || old.perms != new.perms
        {
            return Err(AsyncErrorCode::NotPermitted.into());
        }
        Ok(())
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
        let writes = flags.intersects(fs::DescriptorFlags::WRITE)
            || oflags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE);
        let operation = if writes { "open-for-writing" } else { "open" };
        let target = self.target(&fd, &path, operation, writes)?;
        let opened = if writes {
            self.change("open-for-writing", target.clone(), |view| {
                view.open(&fd, path_flags, &path, oflags, flags, &target)
            })
        } else {
            let opened = self.open(&fd, path_flags, &path, oflags, flags, &target);
            if opened.as_ref().err().is_some_and(refusal) {
                self.record("open", &target.display().to_string(), &opened);
            }
            opened
        };
        let descriptor = self.fs.table.push(opened?)?;
        if oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE) {
            self.paths.created.insert(target.clone(), descriptor.rep());
        }
        self.paths.open.insert(descriptor.rep(), target);
        Ok(descriptor)
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        let rep = fd.rep();
        self.paths.open.remove(&rep);
        self.paths.outside.retain(|outside| *outside != rep);
        self.paths.directories.remove(&rep);
        self.paths.created.retain(|_, created| *created != rep);
        fs::HostDescriptor::drop(&mut self.fs, fd)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.target(&fd, &path, "create-directory", true)?;
        self.change("create-directory", target.clone(), |view| {
            let (dir, found) = view.parent_for_change(
                ("create-directory", Last::SlashesIgnored),
                &fd,
                &path,
                &target,
            )?;
            let parent = found.parent(&*dir.dir);
            // Private until the plugin sets its mode: no one else enters it meanwhile.
            rustix::fs::mkdirat(parent, &found.name, Mode::from_raw_mode(0o700))
                .map_err(std::io::Error::from)?;
            // Remembered by device and inode as this run's own: its owner and mode may be
            // set though it is root's in a directory another user can write. Only an
            // empty private directory of this user's, as opened, is taken for it: one
            // swapped in meanwhile would have to be that too, so nothing is given away
            // with it.
            if let Ok(made) = rustix::fs::openat(
                parent,
                &found.name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) && let Ok(stat) = rustix::fs::fstat(&made)
                && stat.st_uid == rustix::process::geteuid().as_raw()
                && stat.st_mode & 0o7777 == 0o700
                && is_empty(made)
            {
                view.paths.made_directory(&stat);
            }
            Ok(())
        })
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.target(&fd, &path, "remove-directory", true)?;
        self.change("remove-directory", target.clone(), |view| {
            let (dir, found) =
                view.parent_for_change(("remove-directory", Last::AsWritten), &fd, &path, &target)?;
            rustix::fs::unlinkat(found.parent(&*dir.dir), &found.name, AtFlags::REMOVEDIR)
                .map_err(|errno| std::io::Error::from(errno).into())
        })
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.target(&fd, &path, "remove-file", true)?;
        self.paths.created.remove(&target);
        self.change("remove-file", target.clone(), |view| {
            let (dir, found) =
                view.parent_for_change(("remove-file", Last::AsWritten), &fd, &path, &target)?;
            rustix::fs::unlinkat(found.parent(&*dir.dir), &found.name, AtFlags::empty())
                .map_err(std::io::Error::from)?;
            view.shared
                .changed_directory(found.parent(&*dir.dir), target.parent().unwrap_or(&target));
            Ok(())
        })
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let from = self.target(&fd, &old_path, "rename", true)?;
        let to = self.target(&new_fd, &new_path, "rename", true)?;
        self.same_writable_directories(&fd, &new_fd)?;
        // A file the plugin created is checked to be what lands at the new name: in a
        // directory another user can write, the name could have been swapped.
        let created = self
            .paths
            .created
            .get(&from)
            .and_then(|rep| self.identity(*rep));
        let new_dir = match self.fs.table.get(&new_fd)? {
            Descriptor::Dir(dir) => Some(Arc::clone(&dir.dir)),
            Descriptor::File(_) => None,
        };
        let target = PathBuf::from(format!("{} -> {}", from.display(), to.display()));
        // wasmtime-wasi's: a trailing slash on either name asks for a directory, which
        // the old name then carries.
        let old_named = if new_path.ends_with('/') && !old_path.ends_with('/') {
            format!("{old_path}/")
        } else {
            old_path.clone()
        };
        self.change("rename", target, |view| {
            let (old_dir, old) =
                view.parent_for_change(("rename", Last::SlashKept), &fd, &old_named, &from)?;
            let (new_dir, new) =
                view.parent_for_change(("rename", Last::SlashesIgnored), &new_fd, &new_path, &to)?;
            rustix::fs::renameat(
                old.parent(&*old_dir.dir),
                &old.name,
                new.parent(&*new_dir.dir),
                &new.name,
            )
            .map_err(std::io::Error::from)?;
            view.shared
                .changed_directory(new.parent(&*new_dir.dir), to.parent().unwrap_or(&to));
            view.shared
                .changed_directory(old.parent(&*old_dir.dir), from.parent().unwrap_or(&from));
            Ok(())
        })?;
        // A created file keeps its descriptor under its new name; nothing stays known
        // under the name that was replaced.
        self.paths.created.remove(&to);
        if let Some(rep) = self.paths.created.remove(&from) {
            self.paths.created.insert(to.clone(), rep);
        }
        if let (Some(created), Some(dir)) = (created, new_dir) {
            let landed = open_beneath(
                &dir,
                &new_path,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok()
            .and_then(|fd| rustix::fs::fstat(&fd).ok())
            .map(|stat| (stat.st_dev, stat.st_ino));
            if landed != Some(created) {
                return self.refuse(
                    "rename",
                    &to,
                    AsyncErrorCode::Access,
                    format!(
                        "`{}` was swapped for another file before it was renamed to `{}` \
                         (someone who may write that directory did it); `{}` does not hold \
                         what the plugin wrote",
                        from.display(),
                        to.display(),
                        to.display()
                    ),
                );
            }
        }
        Ok(())
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let link = self.target(&fd, &dest_path, "symlink", true)?;
        let target = PathBuf::from(format!("{} -> {src_path}", link.display()));
        self.change("symlink", target, |view| {
            view.symlink(&fd, &src_path, &dest_path, &link)
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
        let from = self.target(&fd, &old_path, "link", false)?;
        let to = self.target(&new_descriptor, &new_path, "link", true)?;
        let target = PathBuf::from(format!("{} -> {}", to.display(), from.display()));
        // wasmtime-wasi's answers, in its order: write access to both, no following of
        // the old name (`invalid`), and the same access on both sides.
        self.same_writable_directories(&fd, &new_descriptor)?;
        if old_path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW) {
            return Err(AsyncErrorCode::Invalid.into());
        }
        self.change("link", target, |view| {
            let (old_dir, old) =
                view.parent_for_change(("link", Last::AsWritten), &fd, &old_path, &from)?;
            let (new_dir, new) =
                view.parent_for_change(("link", Last::AsWritten), &new_descriptor, &new_path, &to)?;
            rustix::fs::linkat(
                old.parent(&*old_dir.dir),
                &old.name,
                new.parent(&*new_dir.dir),
                &new.name,
                AtFlags::empty(),
            )
            .map_err(|errno| std::io::Error::from(errno).into())
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
        let target = self.target(&fd, &path, "set-times", true)?;
        // With `symlink-follow` the times of what the path leads to change (never out of
        // the grant); else the entry's own.
        let rule = if path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW) {
            Last::Followed
        } else {
            Last::AsWritten
        };
        self.change("set-times", target.clone(), |view| {
            let (dir, found) = view.parent_for_change(("set-times", rule), &fd, &path, &target)?;
            let times = rustix::fs::Timestamps {
                last_access: timespec(atim),
                last_modification: timespec(mtim),
            };
            rustix::fs::utimensat(
                found.parent(&*dir.dir),
                &found.name,
                &times,
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|errno| std::io::Error::from(errno).into())
        })
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let target = self.target(&fd, "", "set-times", true)?;
        self.change("set-times", target, |view| {
            fs::HostDescriptor::set_times(&mut view.fs, fd, atim, mtim)
        })
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: fs::Filesize) -> FsResult<()> {
        let target = self.path_of(&fd, "");
        self.change("truncate", target, |view| {
            fs::HostDescriptor::set_size(&mut view.fs, fd, size)
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
        // wasmtime-wasi reads a whole directory into host memory when it is listed, so
        // each listing is counted first, against the instance's budget.
        let target = self.target(&fd, "", "list", false)?;
        let budget = self.actor.policy.limits.memory_bytes / 2;
        let cost = match self.fs.table.get(&fd)? {
            Descriptor::Dir(dir) => {
                listing_cost(&dir.dir, budget.saturating_sub(self.paths.listed))?
            }
            Descriptor::File(_) => return Err(AsyncErrorCode::NotDirectory.into()),
        };
        let Some(cost) = cost else {
            return self.refuse(
                "list",
                &target,
                AsyncErrorCode::InsufficientMemory,
                format!(
                    "listing `{}` would take more than the {} MiB of host memory plugin `{}` \
                     may hold in listings (half its memory limit; at most {MAX_ENTRIES} \
                     entries), with the listings it keeps open",
                    target.display(),
                    budget >> 20,
                    self.actor.policy.name
                ),
            );
        };
        let stream = fs::HostDescriptor::read_directory(&mut self.fs, fd)?;
        self.paths.listings.insert(stream.rep(), cost);
        self.paths.listed += cost;
        Ok(stream)
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
        self.target(&fd, &path, "stat", false)?;
        fs::HostDescriptor::stat_at(&mut self.fs, fd, path_flags, path)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let target = self.target(&fd, &path, "readlink", false)?;
        let dir = self.directory(&fd)?;
        let found = self.beneath("readlink", &dir, &fd, (&path, &target, false))?;
        let contents = rustix::fs::readlinkat(found.parent(&*dir.dir), &found.name, Vec::new())
            .map_err(std::io::Error::from)?;
        contents
            .into_string()
            .map_err(|_| AsyncErrorCode::IllegalByteSequence.into())
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
        let file = match self.fs.table.get(&fd)? {
            Descriptor::File(file) => file,
            Descriptor::Dir(_) => return Err(AsyncErrorCode::IsDirectory.into()),
        };
        if file.perms.write_not_permitted() {
            return Err(AsyncErrorCode::NotPermitted.into());
        }
        let stream: streams::OutputStream = Box::new(FileWriter {
            file: Arc::clone(&file.file),
            position: offset,
            failed: None,
        });
        Ok(self.fs.table.push(stream)?)
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
        self.target(&fd, &path, "stat", false)?;
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
        if let Some(cost) = self.paths.listings.remove(&stream.rep()) {
            self.paths.listed -= cost;
        }
        fs::HostDirectoryEntryStream::drop(&mut self.fs, stream)
    }
}

impl Paths {
    /// Whether the plugin made the directory whose status is `stat` itself.
    pub(crate) fn made(&self, stat: &rustix::fs::Stat) -> bool {
        let id = (stat.st_dev, stat.st_ino);
        FileType::from_raw_mode(stat.st_mode) == FileType::Directory
            && self.made_directories.contains(&id)
    }

    /// The plugin made the directory whose status is `stat`.
    pub(crate) fn made_directory(&mut self, stat: &rustix::fs::Stat) {
        if self.made_directories.len() == MAX_MADE_DIRECTORIES {
            self.made_directories.pop_front();
        }
        self.made_directories.push_back((stat.st_dev, stat.st_ino));
    }
}

/// Whether the directory open as `dir` holds nothing but `.` and `..` (read no further
/// than a third entry).
fn is_empty(dir: OwnedFd) -> bool {
    let Ok(entries) = rustix::fs::Dir::new(dir) else {
        return false;
    };
    let mut seen = 0;
    for entry in entries {
        let Ok(entry) = entry else {
            return false;
        };
        if !matches!(entry.file_name().to_bytes(), b"." | b"..") {
            return false;
        }
        seen += 1;
        if seen > 2 {
            return false;
        }
    }
    true
}
