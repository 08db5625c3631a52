//! The Debian package (`wconverge __package-deb`, what `cargo xtask deb` runs): built
//! from the binary under test, installed into a pristine test host with systemd, its
//! agent started converges the host and corrects a drift as it happens, and removing
//! the package leaves no unit and no process.

use crate::support::WCONVERGE;
use crate::testhost::TestHost;
use std::time::{Duration, Instant};

/// Waits (at most `within`) until `script` succeeds in the host.
fn until(host: &TestHost, within: Duration, what: &str, script: &str) {
    let deadline = Instant::now() + within;
    loop {
        if host.run(script).code == 0 {
            return;
        }
        if Instant::now() > deadline {
            let journal = host.run("journalctl -u wconverge-agent --no-pager | tail -30");
            panic!("not within {within:?}: {what}\n{}", journal.stdout);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_package_installs_converges_a_pristine_host_keeps_it_so_and_uninstalls_cleanly() {
    let out = tempfile::tempdir().expect("temporary directory");
    let built = std::process::Command::new(WCONVERGE)
        .args(["__package-deb", "--out"])
        .arg(out.path())
        .output()
        .expect("the package built");
    assert!(built.status.success(), "{built:#?}");
    let package = String::from_utf8(built.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    let contents = std::process::Command::new("dpkg-deb")
        .args(["--contents", &package])
        .output()
        .expect("dpkg-deb");
    let contents = String::from_utf8_lossy(&contents.stdout);
    for path in [
        "./usr/bin/wconverge",
        "./etc/wconverge/wconverge.conf",
        "./etc/wconverge/manifests/site.pp",
        "./lib/systemd/system/wconverge-agent.service",
        "./lib/systemd/system/wconverge-agent.timer",
        "./lib/systemd/system/wconverge-agent-once.service",
        "./usr/share/man/man1/wconverge.1.gz",
        "./usr/share/man/man1/wconverge-apply.1.gz",
        "./usr/share/man/man1/wconverge-agent.1.gz",
        "./usr/share/bash-completion/completions/wconverge",
        "./usr/share/zsh/vendor-completions/_wconverge",
        "./usr/share/fish/vendor_completions.d/wconverge.fish",
    ] {
        assert!(contents.contains(path), "{path} in:\n{contents}");
    }
    let host = TestHost::boot();
    std::fs::copy(&package, host.path("/root/wconverge.deb")).expect("copied in");
    let installed = host.run("dpkg -i /root/wconverge.deb");
    assert_eq!(installed.code, 0, "{installed:#?}");
    // Installed, nothing started yet.
    let active = host.run("systemctl is-active wconverge-agent.service");
    assert_ne!(active.code, 0, "{active:#?}");
    host.write(
        "/etc/wconverge/manifests/site.pp",
        "file { '/srv/managed': ensure => file, content => \"managed\\n\", mode => '0644' }\n",
    );
    // An hour between whole runs: drift is corrected by the watching agent.
    host.write("/etc/wconverge/wconverge.conf", "runinterval = \"1h\"\n");
    let started = host.run("systemctl start wconverge-agent.service");
    assert_eq!(started.code, 0, "{started:#?}");
    until(
        &host,
        Duration::from_secs(180),
        "the host converged",
        "test -f /srv/managed",
    );
    assert_eq!(
        std::fs::read_to_string(host.path("/srv/managed")).expect("managed"),
        "managed\n"
    );
    // Drift, corrected as it happens.
    let removed = host.run("rm /srv/managed");
    assert_eq!(removed.code, 0, "{removed:#?}");
    until(
        &host,
        Duration::from_secs(60),
        "the drift corrected",
        "test -f /srv/managed",
    );
    until(
        &host,
        Duration::from_secs(30),
        "the correction counted",
        "/usr/bin/wconverge agent status | grep -q 'watching for drift: 1 correction'",
    );
    let status = host.run("/usr/bin/wconverge agent status");
    assert_eq!(status.code, 0, "{status:#?}");
    assert!(status.stdout.starts_with("agent: running"), "{status:#?}");
    assert!(status.stdout.contains("runs: 1;"), "{status:#?}");
    let running = host.run("pgrep -f '^/usr/bin/wconverge agent'");
    assert_eq!(running.code, 0, "the agent's process is seen: {running:#?}");
    // Removed: the units stopped and gone, no agent left running.
    let removed = host.run("dpkg --purge wconverge");
    assert_eq!(removed.code, 0, "{removed:#?}");
    let units = host.run("systemctl list-unit-files 'wconverge*' --no-legend");
    assert!(units.stdout.trim().is_empty(), "{units:#?}");
    let left = host.run("pgrep -f '^/usr/bin/wconverge agent'");
    assert_ne!(left.code, 0, "no agent process left: {left:#?}");
    assert!(!host.path("/usr/bin/wconverge").exists());
    assert!(!host.path("/var/lib/wconverge").exists(), "purged");
}
