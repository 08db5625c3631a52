//! Resolving a directory once, by descriptor.
//!
//! A path is walked from `/` one component at a time: each component is opened with
//! `O_PATH | O_NOFOLLOW` relative to the descriptor of the directory before it, and its
//! type and owner are read from that descriptor with `fstat`. A symbolic link is
//! followed only when root or wconverge's own user owns it (whoever owns a link decides
//! where it leads, and another user may point it anywhere at any moment); its target is
//! read from the link's own descriptor. The walk ends with a descriptor of the directory
//! and the path it was reached by, after the links it followed: the path is what the
//! policy is checked against, and the descriptor is what a plugin gets. Nothing is ever
//! resolved a second time by name, so a link swapped in after the check leads nowhere.

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// The most symbolic links one walk follows, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// The most components one walk visits (a link may expand into many).
const MAX_COMPONENTS: usize = 4096;

/// A directory reached by a walk.
#[derive(Debug)]
pub struct Walked {
    /// An `O_PATH` descriptor of the directory.
    pub fd: OwnedFd,
    /// The path it was reached by, after the links the walk followed.
    pub canonical: PathBuf,
}

/// Whether a directory with this owner and mode can be written by someone other than
/// root and this process's user.
pub fn shared(uid: u32, mode: u32) -> bool {
    !trusted_owner(uid) || mode & 0o022 != 0
}

/// Root and this process's user: the owners whose links are followed.
pub fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

/// Why a walk stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkError {
    /// `prefix` does not exist.
    Missing(PathBuf),
    /// `prefix` exists but is not a directory (or a link to one).
    NotDirectory(PathBuf),
    /// `link` is a symbolic link owned by `uid`, which is neither root nor this user.
    ForeignLink { link: PathBuf, uid: u32 },
    /// `link` is a symbolic link that another user could have put where it is: `why`.
    MovableLink { link: PathBuf, why: String },
    /// More than [`MAX_LINKS`] links, or a loop.
    TooManyLinks(PathBuf),
    /// A directory on the way is writable by another user (only for walks that
    /// require private ancestors).
    SharedAncestor { dir: PathBuf, uid: u32, mode: u32 },
    /// The system refused: `prefix` and the error.
    Io(PathBuf, rustix::io::Errno),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Missing(prefix) => write!(f, "`{}` does not exist", prefix.display()),
            WalkError::NotDirectory(prefix) => {
                write!(f, "`{}` is not a directory", prefix.display())
            }
            WalkError::ForeignLink { link, uid } => write!(
                f,
                "`{}` is a symlink owned by uid {uid}; wconverge does not follow a link that \
                 neither root nor its own user owns (its owner can point it anywhere)",
                link.display()
            ),
            WalkError::MovableLink { link, why } => write!(
                f,
                "`{}` is a symlink {why}; wconverge does not follow it (another user could have \
                 put it there)",
                link.display()
            ),
            WalkError::TooManyLinks(prefix) => write!(
                f,
                "`{}` leads through more than {MAX_LINKS} symlinks",
                prefix.display()
            ),
            WalkError::SharedAncestor { dir, uid, mode } => write!(
                f,
                "`{}` (owner uid {uid}, mode {:04o}) can be written by other users",
                dir.display(),
                mode & 0o7777
            ),
            WalkError::Io(prefix, errno) => {
                write!(f, "cannot open `{}`: {errno}", prefix.display())
            }
        }
    }
}

/// What a walk demands of the directories on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ancestors {
    /// Any directory may be passed through; only links are checked.
    Any,
    /// Every directory, the last included, must belong to root or this user and be
    /// writable by no one else (sticky directories such as `/tmp` excepted, where no one
    /// may rename what another owns).
    Private,
}

/// Walks `path` (absolute) to a directory. `.` and `..` are taken as the kernel would,
/// `..` of a directory reached by descriptor being its parent on the walk.
pub fn walk(path: &Path, ancestors: Ancestors) -> Result<Walked, WalkError> {
    let root = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| WalkError::Io(PathBuf::from("/"), errno))?;
    let root_stat =
        rustix::fs::fstat(&root).map_err(|errno| WalkError::Io(PathBuf::from("/"), errno))?;
    let mut stack: Vec<(OwnedFd, OsString, u32, u32)> =
        vec![(root, OsString::new(), root_stat.st_uid, root_stat.st_mode)];
    check_ancestor(ancestors, &stack)?;
    let mut pending: std::collections::VecDeque<OsString> = components(path).collect();
    let mut links = 0usize;
    let mut visited = 0usize;
    while let Some(name) = pending.pop_front() {
        visited += 1;
        if visited > MAX_COMPONENTS {
            return Err(WalkError::TooManyLinks(current(&stack)));
        }
        if name == "." {
            continue;
        }
        if name == ".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let (dir, ..) = stack.last().expect("the root is never popped");
        let prefix = current(&stack).join(&name);
        let fd = rustix::fs::openat(
            dir.as_fd(),
            name.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| match errno {
            rustix::io::Errno::NOENT => WalkError::Missing(prefix.clone()),
            rustix::io::Errno::NOTDIR => WalkError::NotDirectory(prefix.clone()),
            errno => WalkError::Io(prefix.clone(), errno),
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| WalkError::Io(prefix.clone(), errno))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                stack.push((fd, name, stat.st_uid, stat.st_mode));
                check_ancestor(ancestors, &stack)?;
            }
            FileType::Symlink => {
                let (_, _, parent_uid, parent_mode) =
                    stack.last().expect("the root is never popped");
                link_trust(&stat, *parent_uid, *parent_mode, &prefix)?;
                links += 1;
                if links > MAX_LINKS {
                    return Err(WalkError::TooManyLinks(prefix));
                }
                // Read from the link's own descriptor: the link that was checked.
                let target = rustix::fs::readlinkat(&fd, "", Vec::new())
                    .map_err(|errno| WalkError::Io(prefix.clone(), errno))?;
                let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                if target.is_absolute() {
                    stack.truncate(1);
                }
                for component in components(&target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(component);
                }
            }
            _ => return Err(WalkError::NotDirectory(prefix)),
        }
    }
    let canonical = current(&stack);
    let (fd, _, _, _) = stack.pop().expect("the root is never popped");
    Ok(Walked { fd, canonical })
}

/// Whether the symbolic link `link` (its `stat`) in a directory of this owner and mode
/// may be followed: it must belong to root or this user (whoever owns a link decides
/// where it leads), have no other hard link (a copy placed elsewhere, where
/// `fs.protected_hardlinks` is off), and sit in a directory no other user can write (or
/// a sticky one, where no one may move what another owns), or another user could have
/// moved it there.
pub fn link_trust(
    stat: &rustix::fs::Stat,
    parent_uid: u32,
    parent_mode: u32,
    link: &Path,
) -> Result<(), WalkError> {
    if !trusted_owner(stat.st_uid) {
        return Err(WalkError::ForeignLink {
            link: link.to_path_buf(),
            uid: stat.st_uid,
        });
    }
    if stat.st_nlink > 1 {
        return Err(WalkError::MovableLink {
            link: link.to_path_buf(),
            why: format!("with {} hard links", stat.st_nlink),
        });
    }
    if could_be_moved_in(stat.st_uid, parent_uid, parent_mode) {
        return Err(WalkError::MovableLink {
            link: link.to_path_buf(),
            why: "in a directory other users can write".to_owned(),
        });
    }
    Ok(())
}

/// Whether an entry owned by `owner`, in a directory of this owner and mode, could have
/// been moved there by another user: anyone who may write a directory that is not
/// sticky can rename anything in it (a root-only file kept elsewhere in it, say) to any
/// name; in a sticky one (`/tmp`), only the directory's owner may move what others own.
/// An entry of the one other user who may write the directory is that user's own.
pub fn could_be_moved_in(owner: u32, parent_uid: u32, parent_mode: u32) -> bool {
    if !shared(parent_uid, parent_mode) {
        return false;
    }
    let sticky = parent_mode & 0o1000 != 0;
    if parent_mode & 0o022 != 0 && !sticky {
        return true;
    }
    !trusted_owner(parent_uid) && owner != parent_uid
}

/// Why a path could not be resolved beneath a directory.
#[derive(Debug)]
pub enum BeneathError {
    /// It leads out of the directory (`..` above it, an absolute link).
    Escape,
    /// A link that is not followed, and why.
    Untrusted(WalkError),
    /// The system said no.
    Errno(rustix::io::Errno),
}

impl From<rustix::io::Errno> for BeneathError {
    fn from(errno: rustix::io::Errno) -> Self {
        BeneathError::Errno(errno)
    }
}

/// Where a path beneath a directory leads: the directory that holds its last component
/// (`None`: the start itself), and that component's name (`.` for the directory itself),
/// with what `lstat` said of it when the resolution looked (`None` when it did not).
pub struct Beneath {
    pub parent: Option<OwnedFd>,
    pub name: OsString,
    pub entry: Option<rustix::fs::Stat>,
}

impl Beneath {
    /// The directory holding the last component.
    pub fn parent<'a>(&'a self, start: &'a impl AsFd) -> rustix::fd::BorrowedFd<'a> {
        self.parent
            .as_ref()
            .map_or_else(|| start.as_fd(), AsFd::as_fd)
    }
}

/// Resolves the relative `path` beneath the directory `start`, following only the links
/// [`link_trust`] allows and never leaving `start`; with `follow_last`, a link as the
/// last component is followed too. What the last component is, is left to the caller,
/// which opens it relative to the parent without following links; `shown` names `start`
/// in errors. The common case, one name in `start`, costs one `lstat`.
pub fn beneath(
    start: &impl AsFd,
    path: &str,
    follow_last: bool,
    shown: &Path,
) -> Result<Beneath, BeneathError> {
    if path.starts_with('/') {
        return Err(BeneathError::Escape);
    }
    // The usual case, an entry of `start` itself not to be followed: nothing to walk
    // (what the walk below returns for it, without making its list of components).
    if !follow_last && !path.is_empty() && !path.contains('/') && path != "." && path != ".." {
        return Ok(Beneath {
            parent: None,
            name: OsString::from(path),
            entry: None,
        });
    }
    // The directories walked into, below `start` (which is not in it).
    let mut stack: Vec<(OwnedFd, OsString, u32, u32)> = Vec::new();
    let mut pending: std::collections::VecDeque<OsString> = components(Path::new(path)).collect();
    let mut links = 0usize;
    let mut visited = 0usize;
    loop {
        let Some(name) = pending.pop_front() else {
            return Ok(Beneath {
                parent: stack.pop().map(|(fd, ..)| fd),
                name: OsString::from("."),
                entry: None,
            });
        };
        visited += 1;
        if visited > MAX_COMPONENTS {
            return Err(BeneathError::Errno(rustix::io::Errno::LOOP));
        }
        let last = pending.is_empty();
        if name == "." {
            continue;
        }
        if name == ".." {
            if stack.pop().is_none() {
                return Err(BeneathError::Escape);
            }
            continue;
        }
        let dir = stack
            .last()
            .map_or_else(|| start.as_fd(), |(fd, ..)| fd.as_fd());
        if last && !follow_last {
            return Ok(Beneath {
                parent: stack.pop().map(|(fd, ..)| fd),
                name,
                entry: None,
            });
        }
        let stat = match rustix::fs::statat(
            dir,
            name.as_os_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => stat,
            // Not there: the caller may create it.
            Err(rustix::io::Errno::NOENT) if last => {
                return Ok(Beneath {
                    parent: stack.pop().map(|(fd, ..)| fd),
                    name,
                    entry: None,
                });
            }
            Err(errno) => return Err(errno.into()),
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                // Looked at again through a descriptor of the link itself: the link
                // whose owner is checked is the link that is read.
                let fd = rustix::fs::openat(
                    dir,
                    name.as_os_str(),
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                let stat = rustix::fs::fstat(&fd)?;
                if FileType::from_raw_mode(stat.st_mode) != FileType::Symlink {
                    // Swapped since: resolve the name again.
                    pending.push_front(name);
                    continue;
                }
                let (dir_uid, dir_mode) = match stack.last() {
                    Some((_, _, uid, mode)) => (*uid, *mode),
                    None => {
                        let start = rustix::fs::fstat(start)?;
                        (start.st_uid, start.st_mode)
                    }
                };
                let mut link = shown.to_path_buf();
                for (_, part, ..) in &stack {
                    link.push(part);
                }
                link.push(&name);
                link_trust(&stat, dir_uid, dir_mode, &link).map_err(BeneathError::Untrusted)?;
                links += 1;
                if links > MAX_LINKS {
                    return Err(BeneathError::Errno(rustix::io::Errno::LOOP));
                }
                let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
                let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                if target.is_absolute() {
                    return Err(BeneathError::Escape);
                }
                for component in components(&target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(component);
                }
            }
            FileType::Directory if !last => {
                let fd = rustix::fs::openat(
                    dir,
                    name.as_os_str(),
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                let stat = rustix::fs::fstat(&fd)?;
                stack.push((fd, name, stat.st_uid, stat.st_mode));
            }
            _ if last => {
                return Ok(Beneath {
                    parent: stack.pop().map(|(fd, ..)| fd),
                    name,
                    entry: Some(stat),
                });
            }
            _ => return Err(BeneathError::Errno(rustix::io::Errno::NOTDIR)),
        }
    }
}

fn check_ancestor(
    ancestors: Ancestors,
    stack: &[(OwnedFd, OsString, u32, u32)],
) -> Result<(), WalkError> {
    let (_, _, uid, mode) = stack.last().expect("the root is never popped");
    let sticky = mode & 0o1000 != 0;
    if ancestors == Ancestors::Private && (!trusted_owner(*uid) || (mode & 0o022 != 0 && !sticky)) {
        return Err(WalkError::SharedAncestor {
            dir: current(stack),
            uid: *uid,
            mode: *mode,
        });
    }
    Ok(())
}

/// The path of the directory at the top of the walk.
fn current(stack: &[(OwnedFd, OsString, u32, u32)]) -> PathBuf {
    let mut path = PathBuf::from("/");
    for (_, name, ..) in &stack[1..] {
        path.push(name);
    }
    path
}

/// The names of a path, `.` and `..` kept as they are.
fn components(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|component| match component {
        Component::Normal(name) => Some(name.to_os_string()),
        Component::CurDir => Some(OsString::from(".")),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::Prefix(_) => None,
    })
}

/// Opens the walked directory for reading (a real descriptor, not `O_PATH`).
pub fn open_directory(walked: &Walked) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        &walked.fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Whether `name` is one plain file name: not empty, no `/`, not `.` or `..`.
pub fn plain_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && name != "." && name != ".."
}

/// Whether `path` is absolute, with no empty, `.` or `..` component, and no NUL. One
/// pass to find the slashes: it is asked for each read a plugin makes.
pub fn normal_absolute(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    if path == "/" {
        return true;
    }
    let mut start = 1;
    for (at, byte) in path.bytes().enumerate().skip(1) {
        match byte {
            0 => return false,
            b'/' => {
                if !plain_name(&path[start..at]) {
                    return false;
                }
                start = at + 1;
            }
            _ => {}
        }
    }
    plain_name(&path[start..])
}

/// Who other than root may change the file `stat` describes, if anyone (its owner, its
/// group, everyone). With `sticky_is_safe`, a sticky directory counts as safe: what is
/// in it can be replaced only by its owner, which is to be checked on its own.
pub fn judged(stat: &rustix::fs::Stat, sticky_is_safe: bool) -> Option<String> {
    use rustix::fs::FileType;
    let mode = stat.st_mode & 0o7777;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if stat.st_uid != 0 {
        return Some(format!("belongs to uid {}", stat.st_uid));
    }
    // A link's own mode means nothing; its owner decides where it leads.
    if kind == FileType::Symlink
        || (sticky_is_safe && kind == FileType::Directory && mode & 0o1000 != 0)
    {
        return None;
    }
    if mode & 0o002 != 0 {
        return Some(format!("can be written by every user (mode {mode:04o})"));
    }
    if mode & 0o020 != 0 && stat.st_gid != 0 {
        return Some(format!(
            "can be written by group {} (gid {}, mode {mode:04o})",
            nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(stat.st_gid))
                .ok()
                .flatten()
                .map_or_else(|| stat.st_gid.to_string(), |group| group.name),
            stat.st_gid
        ));
    }
    None
}

/// A file kind in words, with its article.
pub fn kind_name(kind: rustix::fs::FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a file of unknown kind",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_follows_this_users_links_and_names_the_real_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("inner")).expect("dirs");
        std::os::unix::fs::symlink("real/inner", dir.path().join("link")).expect("link");
        std::os::unix::fs::symlink("../../real", real.join("inner/up")).expect("link");
        let walked = walk(&dir.path().join("link/up/inner"), Ancestors::Any).expect("walked");
        assert_eq!(
            walked.canonical,
            std::fs::canonicalize(real.join("inner")).expect("canonical")
        );
        assert_eq!(
            walk(&dir.path().join("nothing/here"), Ancestors::Any).map(|w| w.canonical),
            Err(WalkError::Missing(
                std::fs::canonicalize(dir.path())
                    .expect("canonical")
                    .join("nothing")
            ))
        );
        std::fs::write(dir.path().join("file"), "x").expect("file");
        assert!(matches!(
            walk(&dir.path().join("file/x"), Ancestors::Any),
            Err(WalkError::NotDirectory(_))
        ));
    }

    #[test]
    fn a_loop_of_links_ends() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink("b", dir.path().join("a")).expect("link");
        std::os::unix::fs::symlink("a", dir.path().join("b")).expect("link");
        assert!(matches!(
            walk(&dir.path().join("a"), Ancestors::Any),
            Err(WalkError::TooManyLinks(_))
        ));
    }

    #[test]
    fn private_walks_refuse_directories_others_can_write() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let open = dir.path().join("open");
        std::fs::create_dir(&open).expect("dir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        std::fs::create_dir(open.join("cache")).expect("dir");
        assert!(walk(&open.join("cache"), Ancestors::Any).is_ok());
        assert!(matches!(
            walk(&open.join("cache"), Ancestors::Private),
            Err(WalkError::SharedAncestor { .. })
        ));
        // Sticky, as /tmp: others may not rename what is not theirs.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        assert!(walk(&open.join("cache"), Ancestors::Private).is_ok());
    }

    #[test]
    fn beneath_follows_this_users_links_inside_and_never_leaves() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("dirs");
        std::fs::write(dir.path().join("a/b/file"), "x").expect("file");
        std::os::unix::fs::symlink("a/b", dir.path().join("link")).expect("link");
        std::os::unix::fs::symlink("../..", dir.path().join("a/up")).expect("link");
        let start = std::fs::File::open(dir.path()).expect("open");
        let shown = dir.path();
        let found = beneath(&start, "link/file", true, shown).expect("found");
        assert_eq!(found.name, "file");
        assert!(found.entry.is_some_and(|stat| stat.st_size == 1));
        let not_followed = beneath(&start, "link", false, shown).expect("found");
        assert_eq!(not_followed.name, "link");
        assert!(not_followed.parent.is_none());
        assert!(matches!(
            beneath(&start, "a/up/x", true, shown),
            Err(BeneathError::Escape)
        ));
        assert!(matches!(
            beneath(&start, "../x", true, shown),
            Err(BeneathError::Escape)
        ));
        let missing = beneath(&start, "a/b/new", true, shown).expect("may be created");
        assert!(missing.entry.is_none());
    }

    #[test]
    fn normal_paths() {
        assert!(normal_absolute("/"));
        assert!(normal_absolute("/srv/app"));
        assert!(!normal_absolute("srv/app"));
        assert!(!normal_absolute("/srv/../etc"));
        assert!(!normal_absolute("/srv/./etc"));
        assert!(!normal_absolute("/srv//app"));
        assert!(!normal_absolute("/srv/app/"));
        assert!(!normal_absolute("/srv/.."));
        assert!(!normal_absolute("/srv/."));
        assert!(!normal_absolute("/./srv"));
        assert!(!normal_absolute("//srv"));
        assert!(!normal_absolute("/srv/a\0b"));
        assert!(!normal_absolute(""));
        assert!(normal_absolute("/srv/.app/..x/a.b"));
    }
}
