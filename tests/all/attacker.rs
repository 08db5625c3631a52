//! A local attacker for the hardening tests: a real unprivileged user, created for one
//! test and removed after it whatever happens, and the programs it runs against the
//! files wconverge manages (races run as that user, for a bounded count).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A user created for one test; removed, with every process it still runs, when dropped.
pub(crate) struct LocalUser {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl LocalUser {
    /// Creates a system user with its own group, no home and no login shell.
    pub(crate) fn create() -> LocalUser {
        crate::converge::require_root();
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "wcvt{}x{}",
            std::process::id() % 1_000_000,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        // Not while a test changes accounts through wconverge (the files are locked).
        let turn = crate::accounts::ACCOUNTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let status = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "--user-group",
                &name,
            ])
            .status()
            .expect("useradd runs");
        drop(turn);
        assert!(status.success(), "useradd {name} failed: {status}");
        let entry = nix::unistd::User::from_name(&name)
            .expect("user lookup")
            .expect("the user just created");
        LocalUser {
            name,
            uid: entry.uid.as_raw(),
            gid: entry.gid.as_raw(),
        }
    }

    /// `program` with `args`, run as this user with an empty environment.
    pub(crate) fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null());
        std::os::unix::process::CommandExt::uid(&mut command, self.uid);
        std::os::unix::process::CommandExt::gid(&mut command, self.gid);
        command
    }

    /// Starts a Perl program as this user in `dir`; it runs until the returned handle
    /// is dropped.
    pub(crate) fn spawn_perl(&self, dir: &Path, program: &str, args: &[&str]) -> Attacker {
        let mut all = vec!["-e", program, "--"];
        all.extend_from_slice(args);
        let child = self
            .command("/usr/bin/perl", &all)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("perl starts");
        Attacker(Some(child))
    }

    /// Makes `path` (a file, directory or link) this user's.
    pub(crate) fn give(&self, path: &Path) {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid)).expect("lchown");
    }

    /// A directory under `parent`, this user's, that others may enter but not write.
    pub(crate) fn home_in(&self, parent: &Path) -> std::path::PathBuf {
        let home = parent.join("home");
        std::fs::create_dir(&home).expect("home");
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        self.give(&home);
        home
    }
}

impl Drop for LocalUser {
    fn drop(&mut self) {
        // Only this machine's processes: a test host's own users may have the same uid.
        let _ = Command::new("pkill")
            .args(["-KILL", "-U", &self.uid.to_string()])
            .args(["--ns", &std::process::id().to_string(), "--nslist", "pid"])
            .status();
        let _turn = crate::accounts::ACCOUNTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for _ in 0..50 {
            match Command::new("userdel").arg(&self.name).status() {
                Ok(status) if status.success() => return,
                // Busy while a killed process is still being reaped.
                _ => std::thread::sleep(std::time::Duration::from_millis(100)),
            }
        }
    }
}

/// A program the attacker runs; killed when dropped.
pub(crate) struct Attacker(Option<Child>);

impl Attacker {
    /// Stops it (`SIGTERM`, then `SIGKILL` if it lingers) and returns what it printed:
    /// an attacker that reports counts prints them when terminated, so its output
    /// never fills the pipe while it works.
    pub(crate) fn stop(mut self) -> String {
        let mut child = self.0.take().expect("running");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let started = std::time::Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if started.elapsed() > std::time::Duration::from_secs(5) {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let output = child.wait_with_output().expect("attacker output");
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `renameat2`'s number on this architecture, for `RENAME_EXCHANGE` from Perl.
pub(crate) fn renameat2_syscall() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "316"
    } else if cfg!(target_arch = "aarch64") {
        "276"
    } else {
        panic!("renameat2's syscall number is not known for this architecture")
    }
}

/// Lets everyone pass through `dir` (a test machine's root is private to root).
pub(crate) fn open_to_all(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).expect("chmod");
}

/// Numbers of the system calls the process-escape tests make from Perl, on this
/// architecture: `clone`, `prctl`, `ptrace`, `getpid`.
pub(crate) fn escape_syscalls() -> [&'static str; 4] {
    if cfg!(target_arch = "x86_64") {
        ["56", "157", "101", "39"]
    } else if cfg!(target_arch = "aarch64") {
        ["220", "167", "117", "172"]
    } else {
        panic!("the system call numbers are not known for this architecture")
    }
}
