//! Path operations as a plugin written for WASI makes them (wasi-libc's `*at` calls on a
//! directory of its grant), each answered with the errno the host gave: what the host
//! must answer as wasmtime-wasi does.
#![expect(
    unsafe_code,
    reason = "wasi-libc's *at functions take C strings and a descriptor"
)]

use std::ffi::CString;
use std::os::fd::AsRawFd;

/// Runs the operations in the directory `dir` (which holds `file`, `dir/` and
/// `outside`, a link to a directory outside the grant) and says how each ended.
pub(crate) fn run(dir: &str) -> Result<String, String> {
    let opened = std::fs::File::open(dir).map_err(|error| format!("opening `{dir}`: {error}"))?;
    let fd = opened.as_raw_fd();
    let text = |path: &str| CString::new(path).expect("no NUL");
    let answer = |result: i32| {
        if result == 0 {
            "ok".to_owned()
        } else {
            // SAFETY: wasi-libc's errno of this thread.
            errno_name(unsafe { *libc::__errno_location() })
        }
    };
    let link = |from: &str, to: &str| {
        // SAFETY: valid C strings and a descriptor this function holds open.
        answer(unsafe { libc::linkat(fd, text(from).as_ptr(), fd, text(to).as_ptr(), 0) })
    };
    let rename = |from: &str, to: &str| {
        // SAFETY: as above.
        answer(unsafe { libc::renameat(fd, text(from).as_ptr(), fd, text(to).as_ptr()) })
    };
    let touch = |path: &str, flags: i32| {
        let times = [
            libc::timespec {
                tv_sec: 1_000_000,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: 1_000_000,
                tv_nsec: 0,
            },
        ];
        // SAFETY: as above, and two timespecs.
        answer(unsafe { libc::utimensat(fd, text(path).as_ptr(), times.as_ptr(), flags) })
    };
    let unlink = |path: &str| {
        // SAFETY: as above.
        answer(unsafe { libc::unlinkat(fd, text(path).as_ptr(), 0) })
    };
    let rmdir = |path: &str| {
        // SAFETY: as above.
        answer(unsafe { libc::unlinkat(fd, text(path).as_ptr(), libc::AT_REMOVEDIR) })
    };
    let open = |path: &str| {
        // SAFETY: as above.
        let opened = unsafe { libc::openat(fd, text(path).as_ptr(), libc::O_RDONLY) };
        if opened >= 0 {
            // SAFETY: the descriptor just opened.
            unsafe { libc::close(opened) };
            return "ok".to_owned();
        }
        answer(opened)
    };
    let symlink = |to: &str| {
        // SAFETY: as above.
        answer(unsafe { libc::symlinkat(text("file").as_ptr(), fd, text(to).as_ptr()) })
    };
    let mkdir = |path: &str| {
        // SAFETY: as above.
        answer(unsafe { libc::mkdirat(fd, text(path).as_ptr(), 0o755) })
    };
    let results = [
        ("link file", link("file", "l3")),
        ("link outside/", link("outside/", "l4")),
        ("rename outside/", rename("outside/", "r1")),
        ("rename outside/.", rename("outside/.", "r2")),
        ("rename file/", rename("file/", "r3")),
        ("rename dir/", rename("dir/", "dir2")),
        ("rename to outside/.", rename("l3", "outside/.")),
        ("set-times-follow outside", touch("outside", 0)),
        ("set-times-follow outside/", touch("outside/", 0)),
        (
            "set-times-nofollow outside/",
            touch("outside/", libc::AT_SYMLINK_NOFOLLOW),
        ),
        (
            "set-times-nofollow outside",
            touch("outside", libc::AT_SYMLINK_NOFOLLOW),
        ),
        ("unlink outside/", unlink("outside/")),
        ("mkdir new/", mkdir("new/")),
        // Cases of WASI's test suite (path_link, unlink_file_trailing_slashes,
        // path_rename_dir_trailing_slashes), as wasmtime-wasi answers them here.
        ("link to l6/", link("file", "l6/")),
        ("link onto itself", link("file", "file")),
        ("link a directory", link("dir2", "l7")),
        ("rename to x/", rename("file", "x/")),
        ("unlink file/", unlink("file/")),
        ("rmdir new/", rmdir("new/")),
        // interesting_paths and path_symlink_trailing_slashes: a trailing slash names a
        // directory.
        ("open file/", open("file/")),
        ("open dir2/", open("dir2/")),
        ("symlink at missing/", symlink("missing/")),
        ("symlink at file/", symlink("file/")),
        ("symlink at dir2/", symlink("dir2/")),
        // wasi-libc never passes `symlink-follow` to `link-at`: asked of the interface.
        ("link-follow outside", link_following(dir)),
    ];
    Ok(results
        .iter()
        .map(|(operation, answer)| format!("{operation}={answer}"))
        .collect::<Vec<_>>()
        .join("; "))
}

/// `link-at` with `symlink-follow` of `outside`, a link out of the grant, through
/// WASI's own interface on the preopen that is `dir`.
fn link_following(dir: &str) -> String {
    use wasip2::filesystem::{preopens, types::PathFlags};
    let Some((descriptor, _)) = preopens::get_directories()
        .into_iter()
        .find(|(_, name)| name == dir)
    else {
        return format!("no preopen `{dir}`");
    };
    match descriptor.link_at(PathFlags::SYMLINK_FOLLOW, "outside", &descriptor, "l8") {
        Ok(()) => "ok".to_owned(),
        Err(code) => code.name().to_owned(),
    }
}

fn errno_name(errno: i32) -> String {
    match errno {
        libc::EACCES => "EACCES".to_owned(),
        libc::EBUSY => "EBUSY".to_owned(),
        libc::EEXIST => "EEXIST".to_owned(),
        libc::EINVAL => "EINVAL".to_owned(),
        libc::EISDIR => "EISDIR".to_owned(),
        libc::ENOENT => "ENOENT".to_owned(),
        libc::ENOTDIR => "ENOTDIR".to_owned(),
        libc::EPERM => "EPERM".to_owned(),
        other => format!("errno {other}"),
    }
}
