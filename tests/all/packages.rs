//! Packages: `package` with the `dpkg` provider (a local
//! `.deb`) and the `apt` provider (a repository), through the built-in policy, on this
//! machine's real dpkg database. The tests build their packages with `dpkg-deb` and
//! purge them when they end, failed or not.

use crate::support::{Machine, entry};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// dpkg allows one writer at a time: the tests that install take turns.
pub(crate) static DPKG: Mutex<()> = Mutex::new(());

/// Packages a test built, purged (and its apt source removed) when it is dropped.
struct Packages {
    dir: tempfile::TempDir,
    names: Vec<String>,
    source_list: Option<PathBuf>,
    _turn: MutexGuard<'static, ()>,
}

impl Packages {
    fn new() -> Packages {
        let turn = DPKG
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Packages {
            dir: tempfile::Builder::new()
                .prefix("wcvt-debs-")
                .tempdir()
                .expect("a temporary directory"),
            names: Vec::new(),
            source_list: None,
            _turn: turn,
        }
    }

    /// A package name no other test or run uses.
    fn name(&mut self, stem: &str) -> String {
        let name = format!("wcvt-{}-{stem}", std::process::id());
        if !self.names.contains(&name) {
            self.names.push(name.clone());
        }
        name
    }

    /// Builds `name` at `version`: `/usr/share/NAME/version` says the version, and
    /// `/etc/NAME.conf` is a configuration file (kept by `absent`, gone with `purged`).
    fn build(&self, name: &str, version: &str) -> String {
        let root = self.dir.path().join(format!("{name}-{version}"));
        std::fs::create_dir_all(root.join("DEBIAN")).expect("DEBIAN");
        std::fs::create_dir_all(root.join(format!("usr/share/{name}"))).expect("share");
        std::fs::create_dir_all(root.join("etc")).expect("etc");
        std::fs::write(
            root.join("DEBIAN/control"),
            format!(
                "Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: wconverge \
                 tests <tests@example.invalid>\nDescription: a package the wconverge tests \
                 install and remove\n"
            ),
        )
        .expect("control");
        std::fs::write(root.join("DEBIAN/conffiles"), format!("/etc/{name}.conf\n"))
            .expect("conffiles");
        std::fs::write(root.join(format!("etc/{name}.conf")), "setting = 1\n").expect("conf");
        std::fs::write(root.join(format!("usr/share/{name}/version")), version).expect("file");
        let deb = self.dir.path().join(format!("{name}_{version}_all.deb"));
        let built = Command::new("dpkg-deb")
            .args(["--build", "--root-owner-group"])
            .arg(&root)
            .arg(&deb)
            .output()
            .expect("dpkg-deb runs");
        assert!(built.status.success(), "{built:?}");
        deb.to_str().expect("utf-8").to_owned()
    }

    /// A repository of every `.deb` built so far, known to apt (read by a restricted
    /// `apt-get update` of that source alone).
    fn repository(&mut self) {
        let repo = self.dir.path();
        let scanned = Command::new("sh")
            .arg("-c")
            .arg("dpkg-scanpackages --multiversion . /dev/null > Packages 2>/dev/null")
            .current_dir(repo)
            .status()
            .expect("dpkg-scanpackages");
        assert!(scanned.success());
        let list = PathBuf::from(format!(
            "/etc/apt/sources.list.d/wcvt-{}.list",
            std::process::id()
        ));
        std::fs::write(
            &list,
            format!("deb [trusted=yes] file:{} ./\n", repo.display()),
        )
        .expect("source list");
        self.source_list = Some(list.clone());
        let updated = Command::new("apt-get")
            .args(["update", "-q", "-o"])
            .arg(format!("Dir::Etc::sourcelist={}", list.display()))
            .args([
                "-o",
                "Dir::Etc::sourceparts=-",
                "-o",
                "APT::Get::List-Cleanup=0",
            ])
            .output()
            .expect("apt-get update");
        assert!(updated.status.success(), "{updated:?}");
    }

    /// What dpkg says of `name`: its version and status, or `None`.
    fn installed(name: &str) -> Option<(String, String)> {
        let output = Command::new("dpkg-query")
            .args(["-W", "-f", "${Version}\t${db:Status-Abbrev}", name])
            .output()
            .expect("dpkg-query");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (version, status) = text.split_once('\t')?;
        Some((version.to_owned(), status.trim().to_owned()))
    }
}

impl Drop for Packages {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("dpkg").args(["-P", name]).output();
        }
        if let Some(list) = &self.source_list {
            let _ = std::fs::remove_file(list);
            let repo = self
                .dir
                .path()
                .to_string_lossy()
                .trim_start_matches('/')
                .replace('/', "_");
            if let Ok(entries) = std::fs::read_dir("/var/lib/apt/lists") {
                for entry in entries.flatten() {
                    if entry.file_name().to_string_lossy().contains(&repo) {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
        }
    }
}

fn message(report: &Value, resource: &str) -> String {
    entry(report, resource)["changes"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn dpkg_installs_upgrades_removes_and_purges_a_local_package() {
    let mut packages = Packages::new();
    let name = packages.name("local");
    let v1 = packages.build(&name, "1.0-1");
    let v2 = packages.build(&name, "2.0-1");
    let machine = Machine::new();
    let reference = format!("Package[{name}]");
    let manifest = |ensure: &str, source: &str| {
        machine.manifest(
            "site.wcv",
            &format!(
                "package {{ '{name}': ensure => '{ensure}', provider => dpkg, source => '{source}' }}\n"
            ),
        )
    };

    let noop = machine.apply_with(&manifest("1.0-1", &v1), None, &["--noop"], 2);
    assert_eq!(
        message(&noop, &reference),
        "installed 1.0-1 (it was purged)"
    );
    assert_eq!(Packages::installed(&name), None, "noop installs nothing");

    machine.apply_with(&manifest("1.0-1", &v1), None, &[], 2);
    assert_eq!(
        Packages::installed(&name),
        Some(("1.0-1".to_owned(), "ii".to_owned()))
    );
    machine.apply_with(&manifest("1.0-1", &v1), None, &[], 0);

    let upgrade = machine.apply_with(&manifest("latest", &v2), None, &[], 2);
    assert_eq!(
        message(&upgrade, &reference),
        "upgraded from 1.0-1 to 2.0-1"
    );
    assert_eq!(
        std::fs::read_to_string(format!("/usr/share/{name}/version")).expect("file"),
        "2.0-1"
    );
    machine.apply_with(&manifest("latest", &v2), None, &[], 0);

    // A refresh reinstalls it only with reinstall_on_refresh (Puppet's default: nothing).
    let refresh = |reinstall: bool, config: &str| {
        machine.manifest(
            "refresh.wcv",
            &format!(
                "file {{ '@FILES@/app.conf': content => \"{config}\\n\" }}\n\
                 ~> package {{ '{name}': ensure => latest, provider => dpkg, source => '{v2}', reinstall_on_refresh => {reinstall} }}\n"
            ),
        )
    };
    let shipped = format!("/usr/share/{name}/version");
    std::fs::write(&shipped, "changed by hand").expect("edit a packaged file");
    let report = machine.apply_with(&refresh(false, "a"), None, &[], 2);
    assert_eq!(
        entry(&report, &reference)["refresh"]["outcome"],
        "refreshed"
    );
    assert_eq!(
        std::fs::read_to_string(&shipped).expect("file"),
        "changed by hand"
    );
    machine.apply_with(&refresh(true, "b"), None, &[], 2);
    assert_eq!(
        std::fs::read_to_string(&shipped).expect("file"),
        "2.0-1",
        "reinstalled on refresh"
    );

    let wrong = machine.apply_with(&manifest("3.0-1", &v2), None, &[], 4);
    assert!(
        crate::support::first_error(&wrong).contains("holds version 2.0-1, not 3.0-1"),
        "{wrong:#}"
    );

    machine.apply_with(&manifest("absent", &v2), None, &[], 2);
    assert_eq!(
        Packages::installed(&name).map(|(_, status)| status),
        Some("rc".to_owned()),
        "removed, its configuration kept"
    );
    assert!(Path::new(&format!("/etc/{name}.conf")).exists());
    machine.apply_with(&manifest("absent", &v2), None, &[], 0);

    let purge = machine.apply_with(&manifest("purged", &v2), None, &[], 2);
    assert_eq!(message(&purge, &reference), "purged (it was absent)");
    assert_eq!(Packages::installed(&name), None);
    assert!(!Path::new(&format!("/etc/{name}.conf")).exists());
    machine.apply_with(&manifest("purged", &v2), None, &[], 0);
}

#[test]
fn apt_installs_a_version_the_latest_and_back_reading_the_database_once() {
    let mut packages = Packages::new();
    let web = packages.name("web");
    let tools = packages.name("tools");
    let extra = packages.name("extra");
    for name in [&web, &tools, &extra] {
        packages.build(name, "1.0-1");
        packages.build(name, "2.0-1");
    }
    packages.repository();
    let machine = Machine::new();
    let manifest = |web_ensure: &str| {
        machine.manifest(
            "site.wcv",
            &format!(
                "package {{ '{web}': ensure => '{web_ensure}' }}\n\
                 package {{ '{tools}': ensure => installed, install_options => ['--no-install-recommends'] }}\n\
                 package {{ '{extra}': ensure => '1.0-1' }}\n"
            ),
        )
    };
    let report = machine.apply_with(&manifest("1.0-1"), None, &[], 2);
    assert_eq!(report["summary"]["changed"], 3, "{report:#}");
    assert_eq!(
        Packages::installed(&web).map(|(v, _)| v),
        Some("1.0-1".to_owned())
    );
    assert_eq!(
        Packages::installed(&tools).map(|(v, _)| v),
        Some("2.0-1".to_owned())
    );

    // A no-op run reads the package database once for the three packages.
    let log = machine.root().join("audit.jsonl");
    let log_arg = log.to_str().expect("utf-8");
    machine.apply_with(&manifest("1.0-1"), None, &["--audit-log", log_arg], 0);
    let launches = crate::support::launched(&log);
    assert_eq!(launches.len(), 1, "{launches:#?}");
    assert!(
        launches[0].starts_with("/usr/bin/dpkg-query -W -f"),
        "{launches:#?}"
    );

    let report = machine.apply_with(&manifest("latest"), None, &[], 2);
    assert_eq!(
        message(&report, &format!("Package[{web}]")),
        "upgraded from 1.0-1 to 2.0-1"
    );
    machine.apply_with(&manifest("latest"), None, &[], 0);
    let report = machine.apply_with(&manifest("1.0-1"), None, &[], 2);
    assert_eq!(
        message(&report, &format!("Package[{web}]")),
        "changed from 2.0-1 to 1.0-1"
    );
    assert_eq!(
        Packages::installed(&web).map(|(v, _)| v),
        Some("1.0-1".to_owned())
    );

    let purge = machine.manifest(
        "purge.wcv",
        &format!("package {{ ['{web}', '{tools}', '{extra}']: ensure => purged }}\n"),
    );
    machine.apply_with(&purge, None, &[], 2);
    for name in [&web, &tools, &extra] {
        assert_eq!(Packages::installed(name), None, "{name}");
    }
    machine.apply_with(&purge, None, &[], 0);

    // apt-get would take a name no package has as a pattern (`e.tra` matches `extra`):
    // only a package known by that very name is installed.
    let pattern = extra.replace("extra", "e.tra");
    let pattern_manifest = machine.manifest(
        "pattern.wcv",
        &format!("package {{ '{pattern}': ensure => installed }}\n"),
    );
    let refused = machine.apply_with(&pattern_manifest, None, &[], 4);
    assert!(
        crate::support::first_error(&refused).contains("no package named"),
        "{refused:#}"
    );
    assert_eq!(
        Packages::installed(&extra),
        None,
        "nothing matching was installed"
    );
}

#[test]
fn a_package_name_that_would_be_an_option_never_reaches_a_command_line() {
    let packages = Packages::new();
    let machine = Machine::new();
    let marker = machine.file("pwned");
    let manifest = machine.manifest(
        "hostile.wcv",
        &format!(
            r#"package {{ 'evil': name => '-oAPT::Update::Pre-Invoke::=touch {marker}' }}
package {{ 'opts': name => 'nginx', install_options => ['-oDebug::pkgProblemResolver=1'] }}
"#
        ),
    );
    machine.refused_before_any_launch(
        &manifest,
        &[
            "hostile.wcv:1:",
            "is not a Debian package name",
            "hostile.wcv:2:",
            "install option `-oDebug::pkgProblemResolver=1` is not one wconverge passes",
            "nothing was changed",
        ],
    );
    assert!(!Path::new(&marker).exists());
    drop(packages);
}

#[test]
fn a_package_file_another_user_could_swap_is_never_installed() {
    let mut packages = Packages::new();
    let name = packages.name("swappable");
    let deb = packages.build(&name, "1.0-1");
    let user = crate::attacker::LocalUser::create();
    let machine = Machine::new();
    // In a directory the user owns: they could swap the file before dpkg reads it.
    let theirs = machine.root().join("theirs");
    std::fs::create_dir(&theirs).expect("dir");
    std::os::unix::fs::chown(&theirs, Some(user.uid), Some(user.gid)).expect("chown");
    let in_theirs = theirs.join("app.deb");
    std::fs::copy(&deb, &in_theirs).expect("copy");
    // Root's directory, but a file everyone may write.
    let writable = machine.root().join("writable.deb");
    std::fs::copy(&deb, &writable).expect("copy");
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    for (source, why) in [
        (&in_theirs, "can be written by other users"),
        (
            &writable,
            "must be a regular file of root's that only root can write",
        ),
    ] {
        let manifest = machine.manifest(
            "site.wcv",
            &format!(
                "package {{ '{name}': provider => dpkg, source => '{}' }}\n",
                source.display()
            ),
        );
        let report = machine.apply_with(&manifest, None, &[], 4);
        assert!(
            crate::support::first_error(&report).contains(why),
            "{report:#}"
        );
        assert_eq!(Packages::installed(&name), None);
    }
}

/// The apt provider on a pristine test host, from a local repository the test builds
/// (`dpkg-deb`, and the flat index apt reads, written here), served as a `file:`
/// source: install, a version pinned, `latest` once a newer version is in the
/// repository, purge; each checked with `dpkg-query` and idempotent.
#[test]
fn apt_installs_pins_upgrades_and_purges_from_a_local_repository() {
    use sha2::Digest;
    let host = crate::testhost::TestHost::boot();
    let repository = host.path("/srv/repo");
    std::fs::create_dir_all(&repository).expect("repository");
    let mut index = String::new();
    let mut publish = |version: &str| {
        let build = tempfile::tempdir().expect("build dir");
        let debian = build.path().join("pkg/DEBIAN");
        std::fs::create_dir_all(&debian).expect("DEBIAN");
        let control = format!(
            "Package: wcvt-pkg\nVersion: {version}\nArchitecture: all\n\
             Maintainer: wconverge <test@example.invalid>\nDescription: a wconverge test package\n"
        );
        std::fs::write(debian.join("control"), &control).expect("control");
        let file = format!("wcvt-pkg_{version}_all.deb");
        let built = std::process::Command::new("dpkg-deb")
            .args(["--build", "--root-owner-group"])
            .arg(build.path().join("pkg"))
            .arg(repository.join(&file))
            .output()
            .expect("dpkg-deb");
        assert!(built.status.success(), "{built:?}");
        let bytes = std::fs::read(repository.join(&file)).expect("deb");
        let digest: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        index.push_str(&format!(
            "{control}Filename: ./{file}\nSize: {}\nSHA256: {digest}\n\n",
            bytes.len()
        ));
        std::fs::write(repository.join("Packages"), &index).expect("Packages");
        let updated = host.run("apt-get update -q 2>&1");
        assert_eq!(updated.code, 0, "{updated:#?}");
    };
    host.write(
        "/etc/apt/sources.list.d/local.list",
        "deb [trusted=yes] file:/srv/repo ./\n",
    );
    publish("1.0");
    let installed = || {
        host.run("dpkg-query -W -f '${db:Status-Abbrev} ${Version}' wcvt-pkg 2>/dev/null")
            .stdout
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let package = |ensure: &str| format!("package {{ 'wcvt-pkg': ensure => '{ensure}' }}\n");
    host.apply("pkg.wcv", &package("installed"), 2);
    assert_eq!(installed(), "ii 1.0");
    host.apply("pkg.wcv", &package("installed"), 0);
    publish("1.1");
    publish("2.0");
    host.apply("pkg.wcv", &package("1.1"), 2);
    assert_eq!(installed(), "ii 1.1");
    host.apply("pkg.wcv", &package("1.1"), 0);
    host.apply("pkg.wcv", &package("latest"), 2);
    assert_eq!(installed(), "ii 2.0");
    host.apply("pkg.wcv", &package("latest"), 0);
    host.apply("pkg.wcv", &package("purged"), 2);
    assert_eq!(installed(), "", "purged: dpkg knows nothing of it");
    host.apply("pkg.wcv", &package("purged"), 0);
}
