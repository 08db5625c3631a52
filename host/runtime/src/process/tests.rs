//! Tests of launching: the policy checks of a request, argument patterns, routing through the launcher, and the launch itself with its limits.

use super::*;
use crate::policy::Policy;
use std::time::Instant;

/// [`run`], then the launch cgroups kept for reuse are removed: a test process ends
/// without the runtime's end, which would remove them.
fn run_released(checked: Checked) -> Result<wit::Output, wit::LaunchError> {
    let output = run(checked);
    wconverge_launch::release_cgroups();
    output
}

fn exec_policy() -> PluginPolicy {
    Policy::builtin().plugin("sh").expect("sh").clone()
}

fn command(program: &str, args: &[&str]) -> wit::Command {
    wit::Command {
        program: program.to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        cwd: None,
        env: Vec::new(),
        user: None,
        group: None,
        umask: None,
        timeout_ms: None,
        stdin: None,
        architecture: None,
    }
}

fn refusal(result: Result<Checked, wit::LaunchError>) -> String {
    match result {
        Err(wit::LaunchError::Refused(message)) => message,
        Err(other) => panic!("not a refusal: {other:?}"),
        Ok(_) => panic!("allowed"),
    }
}

/// A launcher with fixed answers, to test what the host accepts from one.
struct Fixed {
    policy: PluginPolicy,
    route: Route,
}

impl Launcher for Fixed {
    fn policy(&self) -> &PluginPolicy {
        &self.policy
    }
    fn route(&self, _: &str, _: &[String], _: &str) -> Result<Route, String> {
        Ok(self.route.clone())
    }
}

fn routed(program: &str, args: &[&str]) -> LauncherSlot {
    Ok(std::sync::Arc::new(Fixed {
        policy: Policy::builtin()
            .plugin("launcher")
            .expect("launcher")
            .clone(),
        route: Route {
            program: program.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            how: "test".to_owned(),
            provided_by: "test".to_owned(),
        },
    }))
}

#[test]
fn a_launcher_may_wrap_the_command_line_but_not_rewrite_it() {
    let policy = exec_policy();
    let mut request = command("/bin/sh", &["-c", "uname -m"]);
    request.architecture = Some("i686".to_owned());
    let wrap = routed("/usr/bin/setarch", &["i686", "/bin/sh", "-c", "uname -m"]);
    let checked = check(&policy, Launch::Allowed, &request, || Some(&wrap)).expect("wraps");
    assert_eq!(checked.program, "/usr/bin/setarch");
    let rewrite = routed("/usr/bin/setarch", &["i686", "/bin/sh", "-c", "rm -rf /"]);
    let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&rewrite)));
    assert!(refused.contains("instead of wrapping it"), "{refused}");
    // Options before the original command line may not name another program.
    let smuggled = routed(
        "/usr/bin/setarch",
        &[
            "i686",
            "/usr/bin/python3",
            "-c",
            "x",
            "/bin/sh",
            "-c",
            "uname -m",
        ],
    );
    let refused = refusal(check(&policy, Launch::Allowed, &request, || {
        Some(&smuggled)
    }));
    assert!(refused.contains("instead of wrapping it"), "{refused}");
    // ...not even by a bare name that setarch would look up.
    let bare = routed(
        "/usr/bin/setarch",
        &["i686", "chmod", "/bin/sh", "-c", "uname -m"],
    );
    let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&bare)));
    assert!(refused.contains("instead of wrapping it"), "{refused}");
    // Another build must be the same program.
    let other = routed("/usr/bin/python3", &["-c", "uname -m"]);
    let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&other)));
    assert!(refused.contains("is another program"), "{refused}");
    // While only inspecting, the wrapper must be a query too.
    let refused = refusal(check(&policy, Launch::QueriesOnly, &request, || {
        Some(&wrap)
    }));
    assert!(refused.contains("only inspects"), "{refused}");
    let ungranted = routed("/usr/bin/qemu-i386", &["/bin/sh", "-c", "uname -m"]);
    let refused = refusal(check(&policy, Launch::Allowed, &request, || {
        Some(&ungranted)
    }));
    assert!(
        refused.contains("not on the allowlist of plugin `launcher`"),
        "{refused}"
    );
    let swapped = routed("/opt/other/sh", &["-c", "uname -m"]);
    let refused = refusal(check(&policy, Launch::Allowed, &request, || Some(&swapped)));
    assert!(
        refused.contains("not on the allowlist of plugin `sh`"),
        "{refused}"
    );
    let none: LauncherSlot = Err("the policy has no launcher".to_owned());
    match check(&policy, Launch::Allowed, &request, || Some(&none)) {
        Err(wit::LaunchError::Failed(message)) => {
            assert!(message.contains("the policy has no launcher"), "{message}")
        }
        _ => panic!("no launcher must fail the launch"),
    }
}

#[test]
fn the_policy_decides_what_runs() {
    let policy = exec_policy();
    assert!(check(&policy, Launch::Allowed, &command("/bin/sh", &[]), || None).is_ok());
    let relative = refusal(check(&policy, Launch::Allowed, &command("sh", &[]), || {
        None
    }));
    assert!(relative.contains("no PATH lookup"), "{relative}");
    let elsewhere = refusal(check(
        &policy,
        Launch::Allowed,
        &command("/tmp/x", &[]),
        || None,
    ));
    assert!(
        elsewhere.contains("not on the allowlist of plugin `sh`"),
        "{elsewhere}"
    );
    let inspecting = refusal(check(
        &policy,
        Launch::QueriesOnly,
        &command("/bin/sh", &[]),
        || None,
    ));
    assert!(inspecting.contains("only inspects"), "{inspecting}");
    let mut preload = command("/bin/sh", &[]);
    preload
        .env
        .push(("LD_PRELOAD".to_owned(), "/tmp/x.so".to_owned()));
    let refused = refusal(check(&policy, Launch::Allowed, &preload, || None));
    assert!(refused.contains("`LD_PRELOAD` may not be set"), "{refused}");
}

#[test]
fn a_launch_that_names_no_user_runs_as_the_policys_run_as() {
    let mut policy = exec_policy();
    policy.users = Principals::Only(vec!["root".to_owned()]);
    policy.run_as = Some("nobody".to_owned());
    let nobody = lookup_user("nobody").expect("a `nobody` user");
    let checked = check(&policy, Launch::Allowed, &command("/bin/sh", &[]), || None);
    if rustix::process::geteuid().is_root() {
        let checked = checked.expect("allowed");
        assert_eq!(checked.uid, Some(nobody.uid.as_raw()));
        assert_eq!(checked.gid, Some(nobody.gid.as_raw()));
    } else {
        // Not root: it cannot switch, and it does not run as itself instead.
        let refused = refusal(checked);
        assert!(
            refused.contains("cannot run `/bin/sh` as user `nobody`"),
            "{refused}"
        );
    }
    // A user the launch names still needs `users`.
    let mut named = command("/bin/sh", &[]);
    named.user = Some("nobody".to_owned());
    let refused = refusal(check(&policy, Launch::Allowed, &named, || None));
    assert!(
        refused.contains("may not run programs as user `nobody`"),
        "{refused}"
    );
}

#[test]
fn a_program_runs_with_an_empty_environment_and_its_input() {
    let mut request = command("/bin/sh", &["-c", "cat; echo \"[$HOME]\"; exit 3"]);
    request.stdin = Some(b"fed\n".to_vec());
    let output =
        run_released(check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"))
            .expect("ran");
    assert_eq!(output.status, wit::ExitStatus::Exited(3));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "fed\n[]\n");
}

#[test]
fn without_pidfds_threads_supervise_a_launch_alike() {
    wconverge_launch::use_pidfds(false);
    let mut request = command("/bin/sh", &["-c", "cat; echo out; echo err >&2; exit 4"]);
    request.stdin = Some(b"in\n".to_vec());
    let output =
        run_released(check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"));
    let mut slow = command("/bin/sh", &["-c", "sleep 30"]);
    slow.timeout_ms = Some(200);
    let timed =
        run_released(check(&exec_policy(), Launch::Allowed, &slow, || None).expect("allowed"));
    wconverge_launch::use_pidfds(true);
    let output = output.expect("ran");
    assert_eq!(output.status, wit::ExitStatus::Exited(4));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "in\nout\n");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "err\n");
    assert_eq!(timed.expect("ran").status, wit::ExitStatus::TimedOut);
}

#[test]
fn a_program_given_no_input_reads_its_end_at_once() {
    // `cat` reads until its input ends: with nothing to feed, the pipe is closed
    // before the wait, so it ends long before its timeout.
    let mut request = command("/bin/sh", &["-c", "cat; echo done"]);
    request.timeout_ms = Some(5_000);
    let started = Instant::now();
    let output =
        run_released(check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"))
            .expect("ran");
    assert_eq!(output.status, wit::ExitStatus::Exited(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "done\n");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_timeout_kills_the_whole_group() {
    let mut request = command("/bin/sh", &["-c", "sleep 30 & sleep 30"]);
    request.timeout_ms = Some(200);
    let started = Instant::now();
    let output =
        run_released(check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"))
            .expect("ran");
    assert_eq!(output.status, wit::ExitStatus::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn output_is_capped_and_marked_truncated() {
    let mut policy = exec_policy();
    policy.limits.output_bytes = 1000;
    let request = command("/bin/sh", &["-c", "yes | head -c 100000"]);
    let output = run_released(check(&policy, Launch::Allowed, &request, || None).expect("allowed"))
        .expect("ran");
    assert_eq!(output.stdout.len(), 1000);
    assert!(output.stdout_truncated);
    assert_eq!(output.status, wit::ExitStatus::Exited(0));
}

/// A policy that lets the `sh` plugin launch `program` too.
fn policy_with(program: &str) -> PluginPolicy {
    let mut policy = exec_policy();
    policy.programs.push(crate::policy::ProgramGrant {
        pattern: crate::policy::ProgramPattern::Exact(program.into()),
        args: None,
        query: false,
        others_may_write: false,
    });
    policy
}

fn check_in(
    programs: &Programs,
    policy: &PluginPolicy,
    request: &wit::Command,
) -> Result<Checked, wit::LaunchError> {
    check_scrubbed(
        policy,
        Launch::Allowed,
        request,
        || None,
        &|text| text.to_owned(),
        programs,
    )
}

/// Where `path` really is, after symlinks.
fn real(path: &str) -> Option<String> {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|real| real.to_str().map(str::to_owned))
}

/// The links in the directory of names, each slot's.
fn names_in(programs: &Programs) -> Vec<std::path::PathBuf> {
    let dir = programs.names_dir().expect("a directory for names");
    std::fs::read_dir(dir)
        .expect("names dir")
        .flat_map(|slot| std::fs::read_dir(slot.expect("slot").path()).expect("slot dir"))
        .map(|entry| entry.expect("entry").path())
        .collect()
}

#[test]
fn the_program_that_runs_is_the_file_that_was_checked_under_its_own_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let program = dir.path().join("tool");
    std::os::unix::fs::symlink("/bin/sh", &program).expect("link");
    let program = program.to_str().expect("utf-8").to_owned();
    let policy = policy_with(&program);
    let programs = Programs::new();
    let request = command(&program, &["-c", "cat /proc/$$/comm; echo \"$0\"; exit 3"]);
    let checked = check_in(&programs, &policy, &request).expect("allowed");
    assert_eq!(checked.resolved(), real("/bin/sh"));
    // The path now names another program: what was checked runs all the same.
    std::fs::remove_file(&program).expect("unlinked");
    std::os::unix::fs::symlink("/bin/false", &program).expect("relinked");
    let output = run_released(checked).expect("ran");
    assert_eq!(output.status, wit::ExitStatus::Exited(3));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("tool\n{program}\n")
    );
    assert_eq!(
        names_in(&programs).len(),
        1,
        "held with its name for the next launch"
    );
    // The next check finds the path changed: it opens what the path names now.
    let checked = check_in(&programs, &policy, &request).expect("allowed");
    assert_eq!(checked.resolved(), real("/bin/false"));
    let output = run_released(checked).expect("ran");
    assert_eq!(output.status, wit::ExitStatus::Exited(1), "`false` ran");
    let names = names_in(&programs);
    assert_eq!(
        names.len(),
        1,
        "the name of the file no longer held is gone: {names:?}"
    );
    assert_eq!(programs.held(), 1);
    // The shell again, its name removed behind the run's back (a cleaner of the
    // temporary directory): the file checked still runs, by its descriptor's number.
    std::fs::remove_file(&program).expect("unlinked");
    std::os::unix::fs::symlink("/bin/sh", &program).expect("relinked");
    let request = command(&program, &["-c", "cat /proc/$$/comm; exit 5"]);
    let checked = check_in(&programs, &policy, &request).expect("allowed");
    for link in names_in(&programs) {
        std::fs::remove_file(link).expect("name removed");
    }
    let output = run_released(checked).expect("ran");
    assert_eq!(output.status, wit::ExitStatus::Exited(5));
    let comm = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(comm.parse::<u32>().is_ok(), "named by its number: {comm}");
    let dir_of_names = programs.names_dir().expect("names").to_owned();
    drop(programs);
    assert!(!dir_of_names.exists());
}

#[test]
fn a_program_that_gets_no_input_reads_the_null_device() {
    let request = command(
        "/bin/sh",
        &["-c", "cat; test -c /proc/self/fd/0 && echo device"],
    );
    let output =
        run_released(check(&exec_policy(), Launch::Allowed, &request, || None).expect("allowed"))
            .expect("ran");
    assert_eq!(output.status, wit::ExitStatus::Exited(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "device\n");
}

/// Unmounts a bind mount when dropped, even when the test fails.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_held_program_is_opened_again_once_another_mount_covers_its_path() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let program = bin.join("tool");
    std::fs::copy("/bin/true", &program).expect("tool");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("mode");
    let program = program.to_str().expect("utf-8").to_owned();
    let programs = Programs::unnamed();
    let first = programs.pin(&program, false).expect("pinned");
    assert!(Arc::ptr_eq(
        &first,
        &programs.pin(&program, false).expect("pinned")
    ));
    // The same directory mounted over itself without exec: the same device and inode
    // through another mount.
    let mount = |args: &[&str]| {
        let status = std::process::Command::new("mount")
            .args(args)
            .arg(&bin)
            .arg(&bin)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount {args:?} (the tests run as root)");
    };
    mount(&["--bind"]);
    let _mounted = Mounted(bin.clone());
    let status = std::process::Command::new("mount")
        .args(["-o", "remount,bind,noexec"])
        .arg(&bin)
        .status()
        .expect("mount runs");
    assert!(status.success(), "remount noexec");
    let second = programs.pin(&program, false).expect("pinned");
    assert!(
        !Arc::ptr_eq(&first, &second),
        "the path now leads through another mount"
    );
}

#[test]
fn a_held_program_is_reused_until_its_file_changes() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let program = dir.path().join("tool");
    std::fs::write(&program, "#!/bin/sh\nexit 4\n").expect("script");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("mode");
    let program = program.to_str().expect("utf-8").to_owned();
    let programs = Programs::unnamed();
    let first = programs.pin(&program, false).expect("pinned");
    assert!(first.script());
    assert!(Arc::ptr_eq(
        &first,
        &programs.pin(&program, false).expect("pinned")
    ));
    // A change of mode (the change time moves): opened again.
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o750)).expect("mode");
    let second = programs.pin(&program, false).expect("pinned");
    assert!(!Arc::ptr_eq(&first, &second));
    // Written in place (same inode, other content): opened again, and judged again.
    let elf = std::fs::read("/bin/true").expect("true");
    std::fs::write(&program, elf).expect("rewritten");
    let third = programs.pin(&program, false).expect("pinned");
    assert!(!Arc::ptr_eq(&second, &third));
    assert!(!third.script());
    // No longer executable: refused, and nothing is held for it.
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o644)).expect("mode");
    assert!(matches!(
        programs.pin(&program, false),
        Err(wconverge_launch::Error::Failed(message)) if message.contains("not an executable file")
    ));
    assert_eq!(programs.held(), 0);
    std::fs::remove_file(&program).expect("removed");
    assert!(matches!(
        programs.pin(&program, false),
        Err(wconverge_launch::Error::NotFound(_))
    ));
}

#[test]
fn a_run_holds_a_bounded_number_of_programs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let programs = Programs::new();
    let mut pins = Vec::new();
    for index in 0..wconverge_launch::HELD_PROGRAMS + 3 {
        let program = dir.path().join(format!("tool-{index}"));
        std::os::unix::fs::symlink("/bin/true", &program).expect("link");
        pins.push(
            programs
                .pin(program.to_str().expect("utf-8"), false)
                .expect("pinned"),
        );
    }
    assert_eq!(programs.held(), wconverge_launch::HELD_PROGRAMS);
    assert_eq!(
        names_in(&programs).len(),
        wconverge_launch::HELD_PROGRAMS + 3
    );
    // Those not held lose their names when their launches are done.
    drop(pins);
    assert_eq!(names_in(&programs).len(), wconverge_launch::HELD_PROGRAMS);
}
