//! `wconverge agent`: runs `apply` every interval, corrects drift at its next run, says
//! how it goes (`agent status`), stops cleanly on SIGTERM (a run in progress finishes the
//! resources it is applying and applies nothing more), keeps its last good
//! configuration when SIGHUP finds a broken one, and goes on after a failed run.

use crate::support::{Machine, WCONVERGE};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// An agent running in the background, stopped when dropped (a failed test leaves none).
pub(crate) struct Agent {
    child: Option<Child>,
    log: PathBuf,
}

impl Agent {
    pub(crate) fn start(machine: &Machine, args: &[&str]) -> Agent {
        let log = machine
            .root()
            .join(format!("agent-{}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("log");
        let child = machine
            .command(WCONVERGE)
            .arg("agent")
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("agent started");
        Agent {
            child: Some(child),
            log,
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (at most `within`) until the log has `text`.
    pub(crate) fn wait_for(&self, text: &str, within: Duration) {
        let until = Instant::now() + within;
        while !self.log().contains(text) {
            assert!(
                Instant::now() < until,
                "no `{text}` in the agent's log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The agent's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub(crate) fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = self.child.as_ref().expect("running").id();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).expect("signal");
    }

    /// Waits (at most `within`) for the agent to exit; its exit code.
    pub(crate) fn exit(&mut self, within: Duration) -> i32 {
        let mut child = self.child.take().expect("running");
        let until = Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code().unwrap_or(-1);
            }
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the agent did not exit within {within:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Agent {
    /// SIGTERM, so that its run stops too (the agent waits for it), then SIGKILL after
    /// ten seconds.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn status(machine: &Machine) -> (i32, String) {
    let run = machine.run(&["agent", "status"]);
    (run.code, run.stdout)
}

pub(crate) fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8")
}

/// Waits (at most `within`) until `check` holds.
pub(crate) fn eventually(within: Duration, what: &str, check: impl Fn() -> bool) {
    let until = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < until, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_keeps_the_machine_converged_and_stops_on_sigterm() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.pp",
        "file { '@FILES@/managed': ensure => file, content => \"managed\\n\", mode => '0644' }\n",
    );
    let policy = machine.policy("");
    let managed = PathBuf::from(machine.file("managed"));
    let once = machine.run(&[
        "agent",
        "--once",
        text(&manifest),
        "--policy",
        text(&policy),
    ]);
    assert_eq!(once.code, 2, "one run, with changes: {once:#?}");
    assert_eq!(
        std::fs::read_to_string(&managed).expect("managed"),
        "managed\n"
    );
    let (code, said) = status(&machine);
    assert_eq!(code, 3, "not running: {said}");
    assert!(
        said.contains("last run: ") && said.contains(": changed (exit 2), 1 changed"),
        "{said}"
    );
    let mut agent = Agent::start(
        &machine,
        &[
            "--interval",
            "1s",
            text(&manifest),
            "--policy",
            text(&policy),
        ],
    );
    agent.wait_for("agent: run 1 ", Duration::from_secs(30));
    // Drift: the file removed, then its mode changed; each corrected at a next run.
    std::fs::remove_file(&managed).expect("drift");
    eventually(Duration::from_secs(30), "the file back", || {
        managed.exists()
    });
    std::fs::set_permissions(
        &managed,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .expect("chmod");
    eventually(Duration::from_secs(30), "the mode back", || {
        std::fs::metadata(&managed).is_ok_and(|meta| {
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777 == 0o644
        })
    });
    // The agent writes its state once a run has ended: counted at most a run later.
    let drift = || {
        let (code, said) = status(&machine);
        let count: u64 = said
            .split("drift corrected since it started: ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|count| count.parse().ok())
            .unwrap_or(0);
        (code, said, count)
    };
    eventually(Duration::from_secs(30), "two corrections counted", || {
        drift().2 >= 2
    });
    let (code, said, _) = drift();
    assert_eq!(code, 0, "running: {said}");
    assert!(said.contains("next run: "), "{said}");
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(20)), 0, "{}", agent.log());
    let (code, said) = status(&machine);
    assert_eq!(code, 3, "{said}");
    assert!(said.starts_with("agent: not running"), "{said}");
    // The runs' reports are in the store.
    let reports = machine.run(&["reports"]);
    assert!(reports.stdout.lines().count() >= 4, "{reports:#?}");
}

#[test]
fn sigterm_during_a_run_lets_the_resource_in_progress_finish_and_applies_nothing_more() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.pp",
        r#"exec { 'slow': command => "/bin/sh -c 'touch @FILES@/started; sleep 2; touch @FILES@/finished'", creates => '@FILES@/finished' }
-> file { '@FILES@/after': ensure => file }
"#,
    );
    let policy = machine.policy("");
    let mut agent = Agent::start(
        &machine,
        &[
            "--interval",
            "1h",
            text(&manifest),
            "--policy",
            text(&policy),
        ],
    );
    let started = PathBuf::from(machine.file("started"));
    eventually(Duration::from_secs(60), "the exec started", || {
        started.exists()
    });
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(60)), 0, "{}", agent.log());
    assert!(
        Path::new(&machine.file("finished")).exists(),
        "the exec in progress finished: {}",
        agent.log()
    );
    assert!(
        !Path::new(&machine.file("after")).exists(),
        "nothing applied after it: {}",
        agent.log()
    );
    let log = agent.log();
    assert!(
        log.contains("finishes the resources in progress and applies nothing more"),
        "{log}"
    );
    assert!(
        log.contains("failed"),
        "the resource not applied counts as failed: {log}"
    );
}

#[test]
fn sighup_with_a_broken_config_keeps_the_last_good_one_and_a_failed_run_is_tried_again() {
    let machine = Machine::new();
    let config = machine.root().join("wconverge.conf");
    std::fs::write(&config, "keep_reports = 5\n").expect("config");
    let manifest = machine.manifest("site.pp", "file { '@FILES@/a': ensure => file \n");
    let policy = machine.policy("");
    let mut agent = Agent::start(
        &machine,
        &[
            "--interval",
            "1s",
            "--config",
            text(&config),
            text(&manifest),
            "--policy",
            text(&policy),
        ],
    );
    // A manifest that does not compile: the run fails, nothing is changed, and the next
    // run tries again.
    agent.wait_for("agent: run 2 ", Duration::from_secs(30));
    assert!(agent.log().contains("not run (exit 1)"), "{}", agent.log());
    assert!(!Path::new(&machine.file("a")).exists());
    std::fs::write(&config, "keep_reports = 'many'\n").expect("broken config");
    agent.signal(nix::sys::signal::Signal::SIGHUP);
    agent.wait_for("the configuration is not reloaded", Duration::from_secs(10));
    std::fs::write(
        &manifest,
        format!("file {{ '{}': ensure => file }}\n", machine.file("a")),
    )
    .expect("fixed");
    // The runs go on with the last good config: the fixed manifest is applied (the
    // agent logs the run once it has ended).
    agent.wait_for("changed (exit 2), 1 changed", Duration::from_secs(30));
    assert!(Path::new(&machine.file("a")).exists(), "{}", agent.log());
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(20)), 0, "{}", agent.log());
}

#[test]
fn sighup_during_a_run_takes_the_new_configuration_for_the_next_runs() {
    let machine = Machine::new();
    let config = machine.root().join("wconverge.conf");
    std::fs::write(&config, "runinterval = \"1h\"\n").expect("config");
    let manifest = machine.manifest(
        "site.pp",
        "exec { 'slow': command => \"/bin/sh -c 'touch @FILES@/started; sleep 1'\" }\n",
    );
    let policy = machine.policy("");
    let mut agent = Agent::start(
        &machine,
        &[
            "--config",
            text(&config),
            text(&manifest),
            "--policy",
            text(&policy),
        ],
    );
    let started = PathBuf::from(machine.file("started"));
    eventually(Duration::from_secs(60), "the first run going", || {
        started.exists()
    });
    std::fs::write(&config, "runinterval = \"1s\"\n").expect("new config");
    agent.signal(nix::sys::signal::Signal::SIGHUP);
    // Every hour, as the agent started; every second once it took the new configuration.
    agent.wait_for("agent: run 2 ", Duration::from_secs(30));
    assert!(
        agent.log().contains("the configuration is reloaded"),
        "{}",
        agent.log()
    );
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(30)), 0, "{}", agent.log());
}

#[test]
fn with_the_store_down_the_runs_go_on_and_their_reports_are_sent_once_it_is_back() {
    let machine = Machine::new();
    let postgres = crate::pg::Postgres::start();
    let manifest = machine.manifest(
        "site.pp",
        "file { '@FILES@/managed': ensure => file, content => \"managed\\n\" }\n",
    );
    let policy = machine.policy("");
    let url = postgres.url();
    let mut agent = Agent::start(
        &machine,
        &[
            "--interval",
            "1s",
            "--store",
            &url,
            text(&manifest),
            "--policy",
            text(&policy),
        ],
    );
    agent.wait_for("agent: run 1 ", Duration::from_secs(60));
    let stored = || -> u64 {
        postgres
            .psql("SELECT count(*) FROM reports")
            .trim()
            .parse()
            .unwrap_or(0)
    };
    eventually(Duration::from_secs(30), "the first report stored", || {
        stored() >= 1
    });
    // Down: the runs go on (a removed file is still corrected) and keep their reports.
    postgres.stop();
    let managed = PathBuf::from(machine.file("managed"));
    std::fs::remove_file(&managed).expect("drift");
    let spool = machine.root().join("state/spool");
    let spooled = || std::fs::read_dir(&spool).map_or(0, |entries| entries.count());
    eventually(Duration::from_secs(60), "two reports spooled", || {
        spooled() >= 2
    });
    assert!(managed.exists(), "corrected with the store down");
    assert!(agent.log().contains("was not stored"), "{}", agent.log());
    // Back: the next run sends what waited, in order, then its own.
    postgres.start_again();
    eventually(Duration::from_secs(60), "the spool sent", || spooled() == 0);
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exit(Duration::from_secs(30)), 0, "{}", agent.log());
    let (_, said) = status(&machine);
    let runs: u64 = said
        .split("runs: ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|count| count.parse().ok())
        .expect("runs counted");
    assert_eq!(stored(), runs, "every run's report is stored: {said}");
    let statuses = postgres.psql("SELECT string_agg(status, ',' ORDER BY at, id) FROM reports");
    assert!(
        statuses.starts_with("changed,") && statuses.contains(",changed,"),
        "the first run, and the correction while the store was down: {statuses}"
    );
}
