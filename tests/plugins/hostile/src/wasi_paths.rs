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
    // (wasi-libc never passes `symlink-follow` to `link-at`, so that case is not asked
    // here; the host answers it `invalid`, as wasmtime-wasi does.)
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
    ];
    Ok(results
        .iter()
        .map(|(operation, answer)| format!("{operation}={answer}"))
        .collect::<Vec<_>>()
        .join("; "))
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
