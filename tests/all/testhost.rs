//! Test hosts: pristine Debian machines with systemd as PID 1, one per test. A root is
//! built once by debootstrap and cached in the CI cache directory, keyed by its package
//! list (a new list builds a new root); each host is a throwaway overlay over it, with
//! the wconverge binary under test copied in, booted by systemd-nspawn (no network but
//! its own loopback), commands run inside through nsenter, and stopped and removed when
//! dropped, whatever the test did.
//!
//! They need root, overlayfs, `debootstrap` and `systemd-nspawn` (`.ci/run` installs
//! Debian's `debootstrap` and `systemd-container` where missing); a test that cannot
//! have them fails, saying why. Only Debian's packages are downloaded, once a list.

use crate::support::Run;
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The packages of every test host, besides debootstrap's `minbase`: systemd, and what
/// a Debian standard install with an SSH server has of what the tests use (python3,
/// cron, openssh-server).
const PACKAGES: &[&str] = &[
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "cron",
    "openssh-server",
];

/// Debian's release and mirror.
const SUITE: &str = "bookworm";
const MIRROR: &str = "http://deb.debian.org/debian";

/// How long building a root, booting and stopping a host may take.
const BUILD_WITHIN: Duration = Duration::from_secs(900);
const BOOT_WITHIN: Duration = Duration::from_secs(90);
const STOP_WITHIN: Duration = Duration::from_secs(20);

/// The cached root for [`PACKAGES`], built if there is none: under the directory the CI
/// keeps between runs (`WCONVERGE_CI_CACHE`, else `~/.cache/wconverge-ci`).
fn cached_root() -> PathBuf {
    crate::converge::require_root();
    let cache = std::env::var_os("WCONVERGE_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/wconverge-ci")
        })
        .join("test-hosts");
    let key = sha2::Sha256::digest(format!("{SUITE} {MIRROR} minbase {}", PACKAGES.join(",")));
    let key: String = key[..8].iter().map(|byte| format!("{byte:02x}")).collect();
    let dir = cache.join(format!("{SUITE}-{key}"));
    let root = dir.join("root");
    std::fs::create_dir_all(&dir).expect("the test hosts' cache directory");
    // One build at a time, whatever the number of tests asking.
    let lock = std::fs::File::create(dir.join("lock")).expect("the build lock");
    let _lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .expect("the build lock is taken");
    if root.join(".complete").exists() {
        return root;
    }
    assert!(
        Path::new("/usr/sbin/debootstrap").exists(),
        "test hosts need debootstrap (Debian's package `debootstrap`; .ci/run installs it)"
    );
    let building = dir.join("root.building");
    let _ = std::fs::remove_dir_all(&building);
    let started = Instant::now();
    let built = Command::new("timeout")
        .arg(BUILD_WITHIN.as_secs().to_string())
        .arg("/usr/sbin/debootstrap")
        .args([
            "--variant=minbase",
            &format!("--include={}", PACKAGES.join(",")),
        ])
        .args([SUITE, building.to_str().expect("utf-8"), MIRROR])
        .output()
        .expect("debootstrap runs");
    assert!(
        built.status.success(),
        "debootstrap could not build a test host's root: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    std::fs::write(
        building.join(".complete"),
        format!("{:?}\n", started.elapsed()),
    )
    .expect("mark");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&building, &root).expect("the root in place");
    // Roots of other package lists (an older checkout's) are not kept: a root is
    // about 250 MB.
    for other in std::fs::read_dir(&cache).into_iter().flatten().flatten() {
        if other.path() != dir
            && other
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{SUITE}-"))
        {
            let _ = std::fs::remove_dir_all(other.path());
        }
    }
    root
}

/// A booted test host.
pub(crate) struct TestHost {
    /// Holds `upper`, `work` and `root` (the overlay), removed last.
    dir: tempfile::TempDir,
    nspawn: Option<Child>,
    /// The container's PID 1, as the host sees it.
    leader: i32,
    /// The bridge its network is on, if any (else its own loopback only).
    bridge: Option<String>,
    /// Its machine name, short (`vb-NAME` names its interface on the bridge).
    name: String,
}

/// A network of test hosts: a bridge of the machine's with `address` (CIDR) on it,
/// removed when dropped.
pub(crate) struct Bridge {
    name: String,
}

impl Bridge {
    pub(crate) fn new(address: &str) -> Bridge {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let name = format!(
            "wcvb{}x{}",
            std::process::id() % 100_000,
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let bridge = Bridge { name };
        for args in [
            vec!["link", "add", bridge.name.as_str(), "type", "bridge"],
            vec!["addr", "add", address, "dev", bridge.name.as_str()],
            vec!["link", "set", bridge.name.as_str(), "up"],
        ] {
            let done = Command::new("ip").args(&args).output().expect("ip runs");
            assert!(done.status.success(), "ip {args:?}: {done:?}");
        }
        bridge
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.name])
            .output();
    }
}

impl TestHost {
    /// A pristine host, booted to `multi-user.target`, with `/usr/local/bin/wconverge`.
    pub(crate) fn boot() -> TestHost {
        TestHost::boot_with(None)
    }

    /// A pristine host on the network of `bridge` (see [`Bridge`]), at `address` (CIDR).
    pub(crate) fn boot_on(bridge: &Bridge, address: &str) -> TestHost {
        TestHost::boot_with(Some((bridge.name.clone(), address.to_owned())))
    }

    fn boot_with(network: Option<(String, String)>) -> TestHost {
        let lower = cached_root();
        assert!(
            Path::new("/usr/bin/systemd-nspawn").exists(),
            "test hosts need systemd-nspawn (Debian's package `systemd-container`; .ci/run \
             installs it)"
        );
        let dir = tempfile::Builder::new()
            .prefix("wcv-host-")
            .tempdir_in("/var/tmp")
            .expect("a directory for the host");
        for sub in ["upper", "work", "root"] {
            std::fs::create_dir(dir.path().join(sub)).expect("overlay directories");
        }
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            dir.path().join("upper").display(),
            dir.path().join("work").display()
        );
        let mounted = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &options])
            .arg(dir.path().join("root"))
            .output()
            .expect("mount runs");
        assert!(
            mounted.status.success(),
            "test hosts need overlayfs: {}",
            String::from_utf8_lossy(&mounted.stderr)
        );
        let mut host = TestHost {
            dir,
            nspawn: None,
            leader: 0,
            bridge: network.as_ref().map(|(bridge, _)| bridge.clone()),
            name: {
                static NEXT: std::sync::atomic::AtomicUsize =
                    std::sync::atomic::AtomicUsize::new(0);
                format!(
                    "wh{}x{}",
                    std::process::id() % 100_000,
                    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                )
            },
        };
        let binary = host.path("/usr/local/bin/wconverge");
        std::fs::copy(crate::support::WCONVERGE, &binary).expect("wconverge copied in");
        if let Some((_, address)) = &network {
            // systemd-networkd gives the container's end its address at boot.
            host.write(
                "/etc/systemd/network/10-host0.network",
                &format!("[Match]\nName=host0\n[Network]\nAddress={address}\n"),
            );
            let wants = host.path("/etc/systemd/system/multi-user.target.wants");
            std::fs::create_dir_all(&wants).expect("wants");
            let _ = std::os::unix::fs::symlink(
                "/lib/systemd/system/systemd-networkd.service",
                wants.join("systemd-networkd.service"),
            );
        }
        host.start();
        host
    }

    /// Where `path` of the host is, seen from outside.
    pub(crate) fn path(&self, path: &str) -> PathBuf {
        self.dir
            .path()
            .join("root")
            .join(path.trim_start_matches('/'))
    }

    /// Writes `content` to `path` of the host (its directory made if missing).
    pub(crate) fn write(&self, path: &str, content: &str) {
        let outside = self.path(path);
        std::fs::create_dir_all(outside.parent().expect("a parent")).expect("directory");
        std::fs::write(outside, content).expect("written into the host");
    }

    /// Boots the host (again, after [`TestHost::stop`]) and waits until it is up.
    fn start(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("console.log")).expect("log");
        let child = Command::new("/usr/bin/systemd-nspawn")
            .arg("-D")
            .arg(self.dir.path().join("root"))
            .args(["--register=no", "--keep-unit", "--quiet", "-b"])
            // Its name makes the names of its network interfaces: short and its own.
            .arg(format!("--machine={}", self.name))
            .args(match &self.bridge {
                Some(bridge) => vec![format!("--network-bridge={bridge}")],
                None => vec!["--private-network".to_owned()],
            })
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("systemd-nspawn starts");
        let nspawn = child.id();
        self.nspawn = Some(child);
        let started = Instant::now();
        self.leader = loop {
            let children = std::fs::read_dir(format!("/proc/{nspawn}/task"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
                .flat_map(|list| {
                    list.split_whitespace()
                        .filter_map(|pid| pid.parse::<i32>().ok())
                        .collect::<Vec<_>>()
                })
                .find(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|comm| comm.trim() == "systemd")
                });
            if let Some(leader) = children {
                break leader;
            }
            if let Some(Ok(Some(status))) = self.nspawn.as_mut().map(Child::try_wait) {
                panic!(
                    "systemd-nspawn ended ({status}) before the test host started: {}",
                    self.console()
                );
            }
            assert!(
                started.elapsed() < BOOT_WITHIN,
                "the test host did not start systemd: {}",
                self.console()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // systemd answers on its bus once it has made it: asked again until then.
        loop {
            let up = self.run(&format!(
                "timeout {} systemctl is-system-running --wait",
                BOOT_WITHIN.as_secs()
            ));
            if matches!(up.stdout.trim(), "running" | "degraded") {
                break;
            }
            assert!(
                started.elapsed() < BOOT_WITHIN,
                "the test host did not come up: {up:#?}\n{}",
                self.console()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the host (as a power-off would), keeping its file system.
    fn stop(&mut self) {
        let Some(mut child) = self.nspawn.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let started = Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if started.elapsed() > STOP_WITHIN {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Powers the host off and boots it again: what survives a reboot.
    pub(crate) fn reboot(&mut self) {
        self.stop();
        self.start();
    }

    /// Runs `script` with `/bin/sh -c` as root inside the host.
    pub(crate) fn run(&self, script: &str) -> Run {
        Run::of(
            Command::new("nsenter")
                .args([
                    "-t",
                    &self.leader.to_string(),
                    "-m",
                    "-u",
                    "-i",
                    "-n",
                    "-p",
                    "--",
                ])
                .args(["/bin/sh", "-c", script])
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/bin")
                .env("HOME", "/root")
                .stdin(Stdio::null()),
        )
    }

    /// `wconverge apply MANIFEST --format json` inside the host (the manifest written to
    /// `/root/NAME`), checked to exit with `code`.
    pub(crate) fn apply(&self, name: &str, manifest: &str, code: i32) -> serde_json::Value {
        self.write(&format!("/root/{name}"), manifest);
        let run = self.run(&format!("wconverge apply /root/{name} --format json"));
        assert_eq!(
            run.code, code,
            "unexpected exit code in the test host:\n{run:#?}"
        );
        run.json()
    }

    fn console(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("console.log")).unwrap_or_default()
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        self.stop();
        let root = self.dir.path().join("root");
        let unmounted = Command::new("umount").arg(&root).status();
        if !unmounted.is_ok_and(|status| status.success()) {
            let _ = Command::new("umount").arg("-l").arg(&root).status();
        }
    }
}
