//! Starting a program as `posix_spawn` does, with the isolation wconverge needs.
//!
//! `std::process::Command` forks (copying wconverge's page tables, half a millisecond for
//! a process with wasmtime in it) as soon as anything must happen in the child before
//! the program runs, and wconverge needs several such things. So the child is made here
//! with `clone(CLONE_VM | CLONE_VFORK)`, as glibc's `posix_spawn` makes it: it shares
//! wconverge's memory, wconverge waits until it has run the program (or failed to), and
//! in between it makes only raw system calls on values prepared before:
//! - it joins the launch's cgroup, where there is one;
//! - standard input, output and error from the pipes, every other descriptor closed at
//!   exec (`close_range(CLOSE_RANGE_CLOEXEC)`), a default `SIGPIPE` and no signal
//!   blocked;
//! - the user and group (`setgroups`, `setresgid`, `setresuid`, as raw system calls: the
//!   C library's wrappers would ask every thread of wconverge to change too);
//! - a session of its own (no controlling terminal), `PDEATHSIG=SIGKILL` (after the user
//!   changes, which would clear it), then a check that wconverge still lives, and the
//!   child-subreaper attribute;
//! - the working directory and the umask; then `execve`.
//!
//! A step that fails leaves its `errno` where wconverge reads it (the memory is shared),
//! and the child exits 127.

#![expect(
    unsafe_code,
    reason = "clone(CLONE_VM | CLONE_VFORK) and the system calls of the child before exec"
)]

use std::ffi::{CString, c_char, c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};

/// What to run, and how.
pub(crate) struct Spawn {
    /// The file to execute (a path the kernel resolves in the child).
    pub(crate) path: CString,
    /// The arguments, `argv[0]` first.
    pub(crate) argv: Vec<CString>,
    /// The whole environment, each `NAME=value`.
    pub(crate) envp: Vec<CString>,
    pub(crate) cwd: Option<CString>,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    pub(crate) umask: Option<u32>,
    /// The cgroup the child is born in, or joins first of all.
    pub(crate) cgroup: Option<Cgroup>,
    /// Whether the program gets input: a pipe for it; else its standard input is
    /// `/dev/null` (it reads the end of its input at once).
    pub(crate) input: bool,
    /// The watchdog's: it is not killed when wconverge dies (no `PDEATHSIG`), and is no
    /// child subreaper.
    pub(crate) outlives_parent: bool,
}

/// A cgroup for a child: its directory (for `clone3`'s `CLONE_INTO_CGROUP`) and its
/// `cgroup.procs` (to join it where `clone3` cannot).
#[derive(Clone, Copy)]
pub(crate) struct Cgroup {
    pub(crate) dir: std::os::fd::RawFd,
    pub(crate) procs: std::os::fd::RawFd,
}

/// `CLONE_PIDFD` (Linux 5.2): `clone3` also returns a pidfd for the child (close-on-exec),
/// which spares a `pidfd_open` per launch.
const CLONE_PIDFD: u64 = 0x1000;

/// `CLONE_INTO_CGROUP` (Linux 5.7): the child starts in the cgroup, with no migration
/// (moving a process between cgroups waits for an RCU grace period, a good part of a
/// millisecond).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The kernel's `struct clone_args` up to `cgroup`.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `clone3` with a child that runs `run(arg)` on the stack `args` names; returns the
/// child's pid, or `-errno`.
///
/// # Safety
/// `args` must describe a valid stack (16-byte aligned at its top) that outlives the
/// child's use of it, `run` must never return, and with `CLONE_VM` everything `arg`
/// points to must outlive the child's use of it.
#[cfg(target_arch = "x86_64")]
unsafe fn clone3(
    args: &mut CloneArgs,
    run: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> isize {
    let result: isize;
    // SAFETY: the caller's contract. In the child the kernel has switched to the new
    // stack and left every other register as it was, so r12 and r13 still hold `arg`
    // and `run`; the child calls `run`, which never returns (`ud2` if it did). The
    // parent only gets the result in rax; the syscall instruction clobbers rcx and r11.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 as isize => result,
            in("rdi") std::ptr::from_mut(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") run as usize,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    result
}

/// A program that runs, and the other ends of its standard streams.
pub(crate) struct Spawned {
    pub(crate) pid: i32,
    /// Its pidfd, where `clone3` made one with it.
    pub(crate) pidfd: Option<OwnedFd>,
    /// Where its input goes, when it gets any.
    pub(crate) stdin: Option<std::fs::File>,
    pub(crate) stdout: std::fs::File,
    pub(crate) stderr: std::fs::File,
}

/// The step of the child that failed, for the error.
#[derive(Clone, Copy)]
#[repr(i32)]
enum Step {
    None = 0,
    Cgroup,
    Streams,
    Signals,
    Groups,
    User,
    Session,
    Parent,
    Directory,
    Exec,
}

/// What the child reads and writes: everything prepared in the parent, as raw pointers
/// into memory the parent keeps alive until the child has run the program.
#[repr(C)]
struct Child {
    cgroup: c_int,
    streams: [c_int; 3],
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    uid: i64,
    gid: i64,
    umask: i64,
    parent: libc::pid_t,
    outlives_parent: c_int,
    errno: c_int,
    step: c_int,
}

/// What a failure to join the launch's cgroup says (see [`failed_to_join`]).
const JOINING: &str = "joining its cgroup";

/// Whether `error` says the child could not join its cgroup.
pub(crate) fn failed_to_join(error: &std::io::Error) -> bool {
    error.to_string().starts_with(JOINING)
}

/// The child's stack: posix_spawn's uses 32 KiB; the raw calls need far less.
const STACK: usize = 64 * 1024;

/// Starts `spawn`. An error means it did not run (`NotFound` when the file to execute
/// does not exist); the message names the step that failed.
pub(crate) fn spawn(spawn: &Spawn) -> std::io::Result<Spawned> {
    let pipe = || -> std::io::Result<(OwnedFd, OwnedFd)> {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(Into::into)
    };
    // No input: `/dev/null`, or where there is none to trust, a pipe whose other end
    // is closed at once.
    let null = if spawn.input { None } else { dev_null() };
    let (stdin_read, stdin_write) = if null.is_none() {
        let (read, write) = pipe()?;
        (Some(read), spawn.input.then_some(write))
    } else {
        (None, None)
    };
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let null_terminated = |strings: &[CString]| -> Vec<*const c_char> {
        strings
            .iter()
            .map(|string| string.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let argv = null_terminated(&spawn.argv);
    let envp = null_terminated(&spawn.envp);
    let mut child = Child {
        cgroup: -1,
        streams: [
            match (&stdin_read, null) {
                (Some(read), _) => read.as_raw_fd(),
                (None, null) => null.expect("no pipe only where /dev/null is used"),
            },
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ],
        path: spawn.path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: spawn
            .cwd
            .as_ref()
            .map_or(std::ptr::null(), |cwd| cwd.as_ptr()),
        uid: spawn.uid.map_or(-1, i64::from),
        gid: spawn.gid.map_or(-1, i64::from),
        umask: spawn.umask.map_or(-1, i64::from),
        parent: rustix::process::getpid().as_raw_nonzero().get(),
        outlives_parent: c_int::from(spawn.outlives_parent),
        errno: 0,
        step: Step::None as c_int,
    };
    // Only the child writes it before it reads it: no need to clear it first.
    let mut stack: Vec<u8> = Vec::with_capacity(STACK);
    let base = stack.as_mut_ptr();
    // The top of the stack, aligned to 16 bytes as every ABI wants.
    let top = (base as usize + STACK) & !15;
    let mut pid = -1;
    let mut pidfd: c_int = -1;
    let mut owned_pidfd: Option<OwnedFd> = None;
    #[cfg(target_arch = "x86_64")]
    if let Some(cgroup) = spawn.cgroup {
        let mut args = CloneArgs {
            flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP | CLONE_PIDFD,
            pidfd: std::ptr::from_mut(&mut pidfd) as u64,
            exit_signal: libc::SIGCHLD as u64,
            stack: base as u64,
            stack_size: (top - base as usize) as u64,
            cgroup: u64::try_from(cgroup.dir).unwrap_or(u64::MAX),
            ..CloneArgs::default()
        };
        // SAFETY: the stack is `stack`, aligned at its top; `stack`, `child`, `argv`,
        // `envp`, the strings, the descriptors and `pidfd` (where the kernel writes the
        // child's pidfd before either runs on) all outlive the child's use of them
        // (with CLONE_VFORK, clone3 returns only once the child has replaced itself
        // with the program or exited); `run_child` never returns.
        let result = unsafe { clone3(&mut args, run_child, (&raw mut child).cast::<c_void>()) };
        match result {
            // A kernel without clone3 or CLONE_INTO_CGROUP: the child joins instead.
            result if result == -(libc::ENOSYS as isize) || result == -(libc::E2BIG as isize) => {}
            result if result < 0 => {
                return Err(std::io::Error::new(
                    std::io::Error::from_raw_os_error(-result as i32).kind(),
                    format!(
                        "{JOINING}: {}",
                        std::io::Error::from_raw_os_error(-result as i32)
                    ),
                ));
            }
            result => {
                pid = result as libc::pid_t;
                if pidfd >= 0 {
                    // SAFETY: the child was made, so the descriptor clone3 wrote is this
                    // process's, owned by nothing else.
                    owned_pidfd = Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(pidfd) });
                }
            }
        }
    }
    if pid == -1 {
        child.cgroup = spawn.cgroup.map_or(-1, |cgroup| cgroup.procs);
        // SAFETY: as for clone3 above; glibc's clone runs `run_child` on the stack.
        pid = unsafe {
            libc::clone(
                run_child,
                top as *mut c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw mut child).cast::<c_void>(),
            )
        };
        if pid == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    drop(stack);
    if child.errno != 0 {
        // It exited without running the program: reap it.
        let mut status = 0;
        // SAFETY: `pid` is this process's child, and `status` a valid place to write.
        while unsafe { libc::waitpid(pid, &raw mut status, 0) } == -1
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        let error = std::io::Error::from_raw_os_error(child.errno);
        let step = match child.step {
            s if s == Step::Cgroup as c_int => JOINING,
            s if s == Step::Streams as c_int => "connecting its standard streams",
            s if s == Step::Signals as c_int => "resetting its signals",
            s if s == Step::Groups as c_int => "setting its groups",
            s if s == Step::User as c_int => "setting its user",
            s if s == Step::Session as c_int => "starting its session",
            s if s == Step::Parent as c_int => "tying it to wconverge",
            s if s == Step::Directory as c_int => "entering its working directory",
            _ => return Err(error),
        };
        return Err(std::io::Error::new(
            error.kind(),
            format!("{step}: {error}"),
        ));
    }
    drop((stdin_read, stdout_write, stderr_write));
    Ok(Spawned {
        pid,
        pidfd: owned_pidfd,
        stdin: stdin_write.map(std::fs::File::from),
        stdout: std::fs::File::from(stdout_read),
        stderr: std::fs::File::from(stderr_read),
    })
}

/// `/dev/null`, opened once (close-on-exec; the child's copy as its standard input has
/// no such flag), if it is the null device: not a link, not a file someone put there.
fn dev_null() -> Option<c_int> {
    use rustix::fs::{FileType, Mode, OFlags};
    static NULL: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    NULL.get_or_init(|| {
        let opened = rustix::fs::open(
            "/dev/null",
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let stat = rustix::fs::fstat(&opened).ok()?;
        let null = FileType::from_raw_mode(stat.st_mode) == FileType::CharacterDevice
            && rustix::fs::major(stat.st_rdev) == 1
            && rustix::fs::minor(stat.st_rdev) == 3;
        null.then_some(opened)
    })
    .as_ref()
    .map(AsRawFd::as_raw_fd)
}

/// The child, between clone and exec. It shares wconverge's memory and runs while
/// wconverge waits: it makes only raw system calls (no allocation, no lock, no C library
/// function that does more than enter the kernel; the user and group through
/// `syscall`, since the C library's `setuid` would signal wconverge's other threads), on
/// values prepared before, and `errno` it reads is the waiting thread's, which it may
/// use. It never returns: it runs the program or exits.
extern "C" fn run_child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Child` the parent prepared and keeps alive until this
    // process has run the program or exited; nothing else uses it meanwhile.
    let child = unsafe { &mut *arg.cast::<Child>() };
    let fail = |child: &mut Child, step: Step| -> ! {
        // SAFETY: reading errno and exiting without running any exit handler.
        unsafe {
            child.errno = (*libc::__errno_location()).max(1);
            child.step = step as c_int;
            libc::_exit(127)
        }
    };
    // SAFETY: every call below is a system call on descriptors, strings and arrays the
    // parent prepared (`Child`), each checked for failure; none allocates or locks.
    unsafe {
        // Into its cgroup first, while it still may (as root), so everything it starts
        // is there too.
        if child.cgroup >= 0 && libc::write(child.cgroup, b"0".as_ptr().cast::<c_void>(), 1) != 1 {
            fail(child, Step::Cgroup);
        }
        for (target, source) in child.streams.into_iter().enumerate() {
            // The result has no close-on-exec flag; the sources have it.
            if libc::dup2(source, target as c_int) == -1 {
                fail(child, Step::Streams);
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        if libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const none,
            std::ptr::null_mut::<libc::sigset_t>(),
            std::mem::size_of::<libc::c_ulong>(),
        ) == -1
        {
            fail(child, Step::Signals);
        }
        // Rust ignores SIGPIPE, and an ignored signal stays ignored across exec.
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        if libc::sigaction(libc::SIGPIPE, &raw const default, std::ptr::null_mut()) == -1 {
            fail(child, Step::Signals);
        }
        if child.gid >= 0 {
            if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) == -1
                && *libc::__errno_location() != libc::EPERM
            {
                fail(child, Step::Groups);
            }
            let gid = child.gid as libc::gid_t;
            if libc::syscall(libc::SYS_setresgid, gid, gid, gid) == -1 {
                fail(child, Step::Groups);
            }
        }
        if child.uid >= 0 {
            let uid = child.uid as libc::uid_t;
            if libc::syscall(libc::SYS_setresuid, uid, uid, uid) == -1 {
                fail(child, Step::User);
            }
        }
        if libc::setsid() == -1 {
            fail(child, Step::Session);
        }
        // After the user changed: a change of credentials clears it.
        if child.outlives_parent == 0 {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                fail(child, Step::Parent);
            }
            // wconverge died before the signal was armed: do not run orphaned.
            if libc::getppid() != child.parent {
                libc::_exit(127);
            }
            if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1 {
                fail(child, Step::Parent);
            }
        }
        if !child.cwd.is_null() && libc::chdir(child.cwd) == -1 {
            fail(child, Step::Directory);
        }
        if child.umask >= 0 {
            libc::umask(child.umask as libc::mode_t);
        }
        // Everything above standard error closes at exec, whatever wconverge holds or
        // inherited (a kernel without close_range leaves it to the close-on-exec flags
        // wconverge sets when it starts).
        let _ = libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        libc::execve(child.path, child.argv, child.envp);
        fail(child, Step::Exec)
    }
}

/// Waits for the child `pid` and returns its status as `std` reports it.
pub(crate) fn wait(pid: i32) -> std::io::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid place to write; waiting for a pid that is not this
        // process's child fails with ECHILD, which is reported.
        if unsafe { libc::waitpid(pid, &raw mut status, 0) } != -1 {
            return Ok(std::process::ExitStatus::from_raw(status));
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn cstrings(strings: &[&str]) -> Vec<CString> {
        strings
            .iter()
            .map(|string| CString::new(*string).expect("no NUL"))
            .collect()
    }

    #[test]
    fn a_program_runs_alone_in_its_session_with_its_streams_and_environment() {
        // Waited for here: no other test's launch may reap it meanwhile.
        let _reaping = crate::reaping::hold_reaping();
        let spawned = spawn(&Spawn {
            path: CString::new("/bin/sh").expect("path"),
            argv: cstrings(&[
                "sh",
                "-c",
                "read line; echo \"$line $A $(pwd)\"; echo err >&2; \
                 [ \"$(cut -d' ' -f6 /proc/$$/stat)\" = \"$$\" ] && echo own-session; exit 3",
            ]),
            envp: cstrings(&["A=b", "PATH=/usr/bin:/bin"]),
            cwd: Some(CString::new("/").expect("cwd")),
            uid: None,
            gid: None,
            umask: None,
            cgroup: None,
            input: true,
            outlives_parent: false,
        })
        .expect("spawned");
        let mut stdin = spawned.stdin.expect("a pipe for its input");
        stdin.write_all(b"hello\n").expect("input");
        drop(stdin);
        let mut out = String::new();
        let mut stdout = spawned.stdout;
        stdout.read_to_string(&mut out).expect("output");
        let mut err = String::new();
        let mut stderr = spawned.stderr;
        stderr.read_to_string(&mut err).expect("errors");
        let status = wait(spawned.pid).expect("status");
        assert_eq!(status.code(), Some(3));
        assert_eq!(out, "hello b /\nown-session\n");
        assert_eq!(err, "err\n");
    }

    #[test]
    fn a_missing_program_or_directory_is_an_error_before_anything_runs() {
        let missing = spawn(&Spawn {
            path: CString::new("/no/such/program").expect("path"),
            argv: cstrings(&["x"]),
            envp: Vec::new(),
            cwd: None,
            uid: None,
            gid: None,
            umask: None,
            cgroup: None,
            input: false,
            outlives_parent: false,
        });
        assert_eq!(
            missing.err().map(|error| error.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
        let error = spawn(&Spawn {
            path: CString::new("/bin/true").expect("path"),
            argv: cstrings(&["true"]),
            envp: Vec::new(),
            cwd: Some(CString::new("/no/such/directory").expect("cwd")),
            uid: None,
            gid: None,
            umask: None,
            cgroup: None,
            input: false,
            outlives_parent: false,
        })
        .err()
        .expect("no such directory");
        assert!(
            error
                .to_string()
                .starts_with("entering its working directory:"),
            "{error}"
        );
    }
}
