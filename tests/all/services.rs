//! Services: `service` with the `debian` provider (a real
//! daemon under an `/etc/init.d` script the test installs), the `base` provider (the
//! commands a resource gives) and, where PID 1 is systemd, the `systemd` provider.
//! Through the built-in policy; every script, link, unit and daemon is removed when a
//! test ends, failed or not.

use crate::support::{Machine, entry};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A daemon's control script: `start` runs `sleep` in the background with a pid file,
/// `stop` stops it, `status` says whether it runs. An init script with an LSB header
/// when `name` is given (update-rc.d reads it).
fn control_script(pidfile: &Path, name: Option<&str>) -> String {
    let header = name.map_or_else(String::new, |name| {
        format!(
            "### BEGIN INIT INFO\n# Provides:          {name}\n# Required-Start:    $local_fs\n\
             # Required-Stop:     $local_fs\n# Default-Start:     2 3 4 5\n\
             # Default-Stop:      0 1 6\n# Short-Description: a wconverge test daemon\n\
             ### END INIT INFO\n"
        )
    });
    format!(
        "#!/bin/sh\n{header}PIDFILE={pidfile}\ncase \"$1\" in\n  \
         start) start-stop-daemon --start --quiet --background --make-pidfile --pidfile $PIDFILE --exec /bin/sleep -- 3600 ;;\n  \
         stop) start-stop-daemon --stop --quiet --oknodo --pidfile $PIDFILE --remove-pidfile --retry 5 ;;\n  \
         restart) \"$0\" stop && \"$0\" start ;;\n  \
         status) start-stop-daemon --status --pidfile $PIDFILE ;;\n  \
         *) echo \"usage: $0 start|stop|restart|status\" >&2; exit 3 ;;\nesac\n",
        pidfile = pidfile.display()
    )
}

/// The daemon's pid, if its pid file names a live `sleep`.
fn daemon(pidfile: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    cmdline.starts_with(b"/bin/sleep\0").then_some(pid)
}

/// An init script installed in /etc/init.d, removed (with its links and its daemon)
/// when dropped.
struct InitScript {
    name: String,
    pidfile: PathBuf,
}

impl InitScript {
    fn install() -> InitScript {
        crate::converge::require_root();
        let name = format!("wcvt{}d", std::process::id());
        let pidfile = PathBuf::from(format!("/run/{name}.pid"));
        let path = format!("/etc/init.d/{name}");
        std::fs::write(&path, control_script(&pidfile, Some(&name))).expect("init script");
        std::process::Command::new("chmod")
            .args(["755", &path])
            .status()
            .expect("chmod");
        InitScript { name, pidfile }
    }

    /// The names in /etc/rc2.d that are this service's links.
    fn links(&self) -> Vec<String> {
        let mut links: Vec<String> = std::fs::read_dir("/etc/rc2.d")
            .expect("rc2.d")
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|entry| entry.len() == self.name.len() + 3 && entry.ends_with(&self.name))
            .map(|entry| entry[..1].to_owned())
            .collect();
        links.sort();
        links
    }
}

impl Drop for InitScript {
    fn drop(&mut self) {
        let script = format!("/etc/init.d/{}", self.name);
        let _ = Command::new(&script).arg("stop").output();
        let _ = Command::new("update-rc.d")
            .args(["-f", &self.name, "remove"])
            .output();
        let _ = std::fs::remove_file(&script);
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

#[test]
fn an_init_script_daemon_is_started_enabled_restarted_on_refresh_and_stopped() {
    let script = InitScript::install();
    let name = script.name.clone();
    let machine = Machine::new();
    let manifest = |config: &str, ensure: &str, enable: bool| {
        machine.manifest(
            "site.wcv",
            &format!(
                "file {{ '@FILES@/daemon.conf': content => \"{config}\\n\" }}\n\
                 ~> service {{ '{name}': ensure => {ensure}, enable => {enable} }}\n"
            ),
        )
    };
    let reference = format!("Service[{name}]");

    let report = machine.apply_with(&manifest("v1", "running", true), None, &[], 2);
    // Where PID 1 is not systemd, Debian's init scripts are the provider.
    assert_eq!(
        entry(&report, &reference)["provider"],
        "debian",
        "{report:#}"
    );
    let first = daemon(&script.pidfile).expect("the daemon runs after the run");
    // Started in this run, it is not restarted too (Puppet unschedules the refresh).
    assert_eq!(
        entry(&report, &reference)["refresh"]["outcome"],
        "unscheduled",
        "{report:#}"
    );
    assert_eq!(script.links(), vec!["S"], "{report:#}");
    assert_eq!(
        entry(&report, &reference)["status"],
        "changed",
        "{report:#}"
    );

    let again = machine.apply_with(&manifest("v1", "running", true), None, &[], 0);
    assert_eq!(again["summary"]["changed"], 0);
    assert_eq!(daemon(&script.pidfile), Some(first), "left alone");

    let refreshed = machine.apply_with(&manifest("v2", "running", true), None, &[], 2);
    assert_eq!(
        entry(&refreshed, &reference)["refresh"]["outcome"],
        "refreshed",
        "{refreshed:#}"
    );
    let second = daemon(&script.pidfile).expect("it runs after the restart");
    assert_ne!(second, first, "a refresh restarts a running service");
    assert!(
        !Path::new(&format!("/proc/{first}")).exists(),
        "the old daemon is gone"
    );

    machine.apply_with(&manifest("v2", "stopped", false), None, &[], 2);
    assert_eq!(daemon(&script.pidfile), None);
    assert_eq!(script.links(), vec!["K"]);
    // A stopped service is not started by a refresh.
    machine.apply_with(&manifest("v3", "stopped", false), None, &[], 2);
    assert_eq!(daemon(&script.pidfile), None);
    machine.apply_with(&manifest("v3", "stopped", false), None, &[], 0);
}

#[test]
fn the_base_provider_runs_the_commands_given() {
    let machine = Machine::new();
    let pidfile = machine.root().join("base.pid");
    let ctl = machine.root().join("ctl.sh");
    std::fs::write(&ctl, control_script(&pidfile, None)).expect("control script");
    let ctl = ctl.display();
    let manifest = |config: &str, ensure: &str| {
        machine.manifest(
            "base.wcv",
            &format!(
                "file {{ '@FILES@/base.conf': content => \"{config}\\n\" }}\n\
                 ~> service {{ 'wcvtbase':\n  provider => base,\n  ensure => {ensure},\n  \
                 start => '/bin/sh {ctl} start',\n  stop => '/bin/sh {ctl} stop',\n  \
                 status => '/bin/sh {ctl} status',\n}}\n"
            ),
        )
    };
    struct Stop(PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            if let Some(pid) = daemon(&self.0) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
    let _stop = Stop(pidfile.clone());
    machine.apply_with(&manifest("v1", "running"), None, &[], 2);
    let first = daemon(&pidfile).expect("started");
    machine.apply_with(&manifest("v1", "running"), None, &[], 0);
    let report = machine.apply_with(&manifest("v2", "running"), None, &[], 2);
    let second = daemon(&pidfile).expect("restarted");
    assert_ne!(
        first, second,
        "no `restart`: a stop and a start; {report:#}"
    );
    machine.apply_with(&manifest("v2", "stopped"), None, &[], 2);
    assert_eq!(daemon(&pidfile), None);

    // A command the policy does not grant fails its resource with the rule, and nothing
    // runs.
    let marker = machine.file("ran");
    let outside = machine.manifest(
        "outside.wcv",
        &format!(
            "service {{ 'y': provider => base, ensure => running, start => '/opt/wcvt/bin/start {marker}', status => '/opt/wcvt/bin/status' }}\n"
        ),
    );
    let refused = machine.apply_with(&outside, None, &[], 4);
    let error = crate::support::first_error(&refused);
    assert!(error.contains("/opt/wcvt/bin/status"), "{error}");
    assert!(
        error.contains("is not on the allowlist of plugin `base`"),
        "{error}"
    );
    assert!(!Path::new(&marker).exists());

    let enable = machine.manifest(
        "enable.wcv",
        r#"
service { 'x': provider => base, start => '/bin/true', status => '/bin/true', enable => true }
"#,
    );
    let run = machine.run(&["apply", enable.to_str().expect("utf-8")]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("the base provider knows nothing of boot"),
        "{run:#?}"
    );
}

/// The systemd provider in a pristine test host whose PID 1 is systemd: a unit the
/// manifest writes (where packages put theirs: a unit file in /etc cannot be masked) is
/// started and enabled (a reboot keeps it running), restarted on
/// refresh with the definition its file holds now (systemd reloaded first, as Puppet's
/// provider does) and not when nothing changed, then stopped, disabled, masked and
/// unmasked; each state as `systemctl` reads it back matches the report.
#[test]
fn a_systemd_unit_is_started_enabled_and_restarted_on_refresh() {
    let mut host = crate::testhost::TestHost::boot();
    let unit = |version: &str| {
        format!(
            "file {{ '/usr/lib/systemd/system/wcvt.service':\n  content => \"[Unit]\\nDescription=a wconverge test daemon\\n[Service]\\nExecStart=/bin/sh -c 'echo {version} > /run/wcvt.version; exec sleep infinity'\\n[Install]\\nWantedBy=multi-user.target\\n\",\n}}\n"
        )
    };
    let manifest = |version: &str, service: &str| {
        format!(
            "{}~> service {{ 'wcvt.service': {service} }}\n",
            unit(version)
        )
    };
    let state = |host: &crate::testhost::TestHost| {
        let run = host.run(
            "systemctl is-active wcvt.service; systemctl is-enabled wcvt.service; \
             cat /run/wcvt.version 2>/dev/null; systemctl show --property=MainPID --value wcvt.service",
        );
        run.stdout.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let running = "ensure => running, enable => true";
    let report = host.apply("unit.wcv", &manifest("v1", running), 2);
    let service = crate::support::entry(&report, "Service[wcvt.service]");
    assert_eq!(service["status"], "changed", "{report:#}");
    assert_eq!(service["provider"], "systemd", "{report:#}");
    let first = state(&host);
    assert_eq!(first[..3], ["active", "enabled", "v1"], "{first:?}");
    // Nothing changed: no restart.
    host.apply("unit.wcv", &manifest("v1", running), 0);
    assert_eq!(state(&host), first, "not restarted when nothing changed");
    // Enabled: running again after a reboot.
    host.reboot();
    let rebooted = state(&host);
    assert_eq!(rebooted[..3], ["active", "enabled", "v1"], "{rebooted:?}");
    // The unit's file changes and notifies the service: the restart runs the new
    // definition.
    let report = host.apply("unit.wcv", &manifest("v2", running), 2);
    let refreshed = &crate::support::entry(&report, "Service[wcvt.service]")["refresh"];
    assert_eq!(refreshed["outcome"], "refreshed", "{report:#}");
    let second = state(&host);
    assert_eq!(second[..3], ["active", "enabled", "v2"], "{second:?}");
    assert_ne!(second[3], rebooted[3], "a new process");
    // Stopped and disabled, masked, unmasked.
    host.apply(
        "unit.wcv",
        &manifest("v2", "ensure => stopped, enable => false"),
        2,
    );
    assert_eq!(state(&host)[..2], ["inactive", "disabled"]);
    host.apply(
        "unit.wcv",
        &manifest("v2", "ensure => stopped, enable => mask"),
        2,
    );
    assert_eq!(state(&host)[..2], ["inactive", "masked"]);
    host.apply(
        "unit.wcv",
        &manifest("v2", "ensure => running, enable => true"),
        2,
    );
    assert_eq!(state(&host)[..3], ["active", "enabled", "v2"]);
    host.apply(
        "unit.wcv",
        &manifest("v2", "ensure => running, enable => true"),
        0,
    );
}

/// The README's web server role on a pristine test host whose PID 1 is systemd: its 7
/// changes, then none, `GET /` answered from inside the host, and `remove.wcv` leaves
/// the host as it was (its packages, users, groups and unit files compared).
#[test]
fn the_readmes_web_server_role_converges_on_a_pristine_host_and_goes_away() {
    let host = crate::testhost::TestHost::boot();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/webserver");
    let built = Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(examples.join("package"))
        .arg(host.path("/root/wcv-demo-web.deb"))
        .output()
        .expect("dpkg-deb");
    assert!(built.status.success(), "{built:?}");
    let site = std::fs::read_to_string(examples.join("site.wcv"))
        .expect("site.wcv")
        .replace("@DEB@", "/root/wcv-demo-web.deb");
    let remove = std::fs::read_to_string(examples.join("remove.wcv")).expect("remove.wcv");
    let snapshot = || {
        host.run(
            "dpkg-query -W -f '${Package} ${db:Status-Abbrev}\\n'; cat /etc/passwd /etc/group; \
             systemctl list-unit-files --no-legend --no-pager",
        )
        .stdout
    };
    let before = snapshot();
    let first = host.apply("site.wcv", &site, 2);
    assert_eq!(first["summary"]["changed"], 7, "{first:#}");
    host.apply("site.wcv", &site, 0);
    let page = host.run(
        "python3 -c \"import urllib.request; \
         print(urllib.request.urlopen('http://127.0.0.1:8080/', timeout=10).read().decode())\"",
    );
    assert!(
        page.stdout.contains("<h1>Hello from wconverge</h1>"),
        "{page:#?}"
    );
    host.apply("remove.wcv", &remove, 2);
    assert_eq!(snapshot(), before, "the host is as it was");
}
