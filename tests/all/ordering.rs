//! What a manifest means under `apply --jobs`: resources without relationships behave as
//! if applied in manifest order (Puppet's `ordering = manifest`), and the relationships
//! types imply (Puppet's autorequire) are drawn whichever end the manifest declares
//! first. Tests that create users remove them when they end, failed or not.

use crate::accounts::Accounts;
use crate::support::{Machine, entry};
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// Commands and files interleaved, with no relationships: each command appends to one
/// log, some read what a file above them wrote, one removes a file a later command looks
/// for. Puppet 7.23's `puppet apply` of this very text (exit 2) applied it in manifest
/// order and logged `c one b two three two`: twenty runs at the default jobs and five at
/// `--jobs 8`, each from nothing, log the same and report in that order.
#[test]
fn resources_without_relationships_apply_in_manifest_order_at_the_default_jobs() {
    let text = r#"
exec { 'c': command => '/bin/sh -c "echo c >> @FILES@/log"' }
file { '@FILES@/one': content => "one\n" }
exec { 'a': command => '/bin/sh -c "/bin/cat @FILES@/one >> @FILES@/log"' }
exec { 'b': command => '/bin/sh -c "echo b >> @FILES@/log"' }
file { '@FILES@/two': content => "two\n" }
notify { 'between': message => 'nothing on the machine' }
file { '@FILES@/three': content => "three\n" }
exec { 'd': command => '/bin/sh -c "/bin/cat @FILES@/two @FILES@/three >> @FILES@/log"' }
exec { 'e': command => '/bin/rm @FILES@/one' }
file { '@FILES@/copy': source => '@FILES@/two' }
exec { 'f': command => '/bin/sh -c "test -e @FILES@/one || /bin/cat @FILES@/copy >> @FILES@/log"' }
"#;
    let declared = [
        "Exec[c]",
        "File[",
        "Exec[a]",
        "Exec[b]",
        "File[",
        "Notify[between]",
        "File[",
        "Exec[d]",
        "Exec[e]",
        "File[",
        "Exec[f]",
    ];
    for (run, jobs) in (0..25).map(|run| (run, if run < 20 { "" } else { "8" })) {
        let machine = Machine::new();
        let manifest = machine.manifest("site.wcv", text);
        let args: &[&str] = if jobs.is_empty() {
            &[]
        } else {
            &["--jobs", jobs]
        };
        let report = machine.apply_with(&manifest, Some(&machine.policy("")), args, 2);
        let log = std::fs::read_to_string(machine.file("log")).expect("log");
        assert_eq!(
            log, "c\none\nb\ntwo\nthree\ntwo\n",
            "run {run} (jobs {jobs:?}): {report:#}"
        );
        let order: Vec<&str> = report["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|resource| resource["resource"].as_str().expect("reference"))
            .collect();
        assert_eq!(order.len(), declared.len(), "{order:?}");
        for (seen, wanted) in order.iter().zip(declared) {
            assert!(seen.starts_with(wanted), "{order:?}");
        }
    }
}

/// The relationships of `wconverge graph --format json`, as `source -> target`.
fn edges(machine: &Machine, manifest: &std::path::Path) -> Vec<String> {
    let run = machine.run(&[
        "graph",
        manifest.to_str().expect("utf-8"),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    run.json()["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|edge| {
            format!(
                "{} -> {}",
                edge["source"].as_str().expect("source"),
                edge["target"].as_str().expect("target")
            )
        })
        .collect()
}

/// Puppet's autorequire table for the types that ship, each dependent declared before
/// what it requires: every row is an edge of the graph. Nothing is applied.
#[test]
fn every_autorequire_of_the_shipped_types_is_an_edge_of_the_graph() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
file { '/srv/wcvt/dir/f': owner => 'wcvtu', group => 'wcvtg', source => '/srv/wcvt/src' }
file { '/srv/wcvt/link': ensure => link, target => '/srv/wcvt/target' }
template { '/srv/wcvt/page': source => '/srv/wcvt/page.j2', owner => 'wcvtu', group => 'wcvtg' }
exec { 'tool': command => '/srv/wcvt/bin/tool --all', cwd => '/srv/wcvt/work', user => 'wcvtu', group => 'wcvtg', creates => '/srv/wcvt/made' }
bash { 'script': code => 'true', cwd => '/srv/wcvt/work', user => 'wcvtu' }
user { 'wcvtu': gid => 'wcvtg', groups => ['wcvtg2'], home => '/home/wcvtu' }
cron { 'job': user => 'wcvtu', command => '/usr/bin/true', special => daily }
ssh_authorized_key { 'in-home': user => 'wcvtu', type => 'ssh-ed25519', key => 'AAAAC3NzaC1lZDI1NTE5AAAAIKx1' }
ssh_authorized_key { 'elsewhere': user => 'wcvtu', type => 'ssh-ed25519', key => 'AAAAC3NzaC1lZDI1NTE5AAAAIKx2', target => '/home/shared/keys/authorized_keys' }
package { 'wcvt-pkg': provider => dpkg, source => '/srv/wcvt/pkg.deb' }
file { '/srv/wcvt/late': owner => 'wcvtu', before => User['wcvtu'] }
file { ['/srv/wcvt', '/srv/wcvt/dir', '/srv/wcvt/work', '/srv/wcvt/bin']: ensure => directory }
file { ['/srv/wcvt/src', '/srv/wcvt/target', '/srv/wcvt/page.j2', '/srv/wcvt/bin/tool', '/srv/wcvt/pkg.deb']: }
file { ['/home/wcvtu/.ssh', '/home/shared/keys']: ensure => directory }
group { ['wcvtg', 'wcvtg2']: }
"#,
    );
    let edges = edges(&machine, &manifest);
    let table = [
        // file: its nearest managed ancestor, owner, group, a local source, a link's target.
        "File[/srv/wcvt/dir] -> File[/srv/wcvt/dir/f]",
        "User[wcvtu] -> File[/srv/wcvt/dir/f]",
        "Group[wcvtg] -> File[/srv/wcvt/dir/f]",
        "File[/srv/wcvt/src] -> File[/srv/wcvt/dir/f]",
        "File[/srv/wcvt/target] -> File[/srv/wcvt/link]",
        "File[/srv/wcvt] -> File[/srv/wcvt/link]",
        // template: its directory, source, owner, group.
        "File[/srv/wcvt] -> Template[/srv/wcvt/page]",
        "File[/srv/wcvt/page.j2] -> Template[/srv/wcvt/page]",
        "User[wcvtu] -> Template[/srv/wcvt/page]",
        "Group[wcvtg] -> Template[/srv/wcvt/page]",
        // exec and the script types: the command's program, cwd, user, group.
        "File[/srv/wcvt/bin/tool] -> Exec[tool]",
        "File[/srv/wcvt/work] -> Exec[tool]",
        "User[wcvtu] -> Exec[tool]",
        "Group[wcvtg] -> Exec[tool]",
        "File[/srv/wcvt/work] -> Bash[script]",
        "User[wcvtu] -> Bash[script]",
        // user: its primary group and its groups.
        "Group[wcvtg] -> User[wcvtu]",
        "Group[wcvtg2] -> User[wcvtu]",
        // cron: its user.
        "User[wcvtu] -> Cron[job]",
        // ssh_authorized_key: its user, the directory of its target (by default in the
        // home the user resource declares).
        "User[wcvtu] -> Ssh_authorized_key[in-home]",
        "File[/home/wcvtu/.ssh] -> Ssh_authorized_key[in-home]",
        "File[/home/shared/keys] -> Ssh_authorized_key[elsewhere]",
        // package: a local source.
        "File[/srv/wcvt/pkg.deb] -> Package[wcvt-pkg]",
    ];
    for row in table {
        assert!(
            edges.iter().any(|edge| edge == row),
            "missing {row} in {edges:#?}"
        );
    }
    // An explicit relationship the other way wins: no cycle, no implied edge back.
    assert!(
        edges
            .iter()
            .any(|edge| edge == "File[/srv/wcvt/late] -> User[wcvtu]")
    );
    assert!(
        !edges
            .iter()
            .any(|edge| edge == "User[wcvtu] -> File[/srv/wcvt/late]")
    );
    // A path that only starts like another's is not beneath it, and `creates` names
    // what the command makes, not what it needs.
    assert!(
        !edges.iter().any(|edge| edge.contains("/srv/wcvt/made")),
        "{edges:#?}"
    );
}

/// The dependents declared before what they require, on a machine where none of them
/// exist: with `--jobs 1` and the default, the first run converges (exit 2) and the
/// second changes nothing (exit 0). Puppet 7.23's `puppet apply` of the same program did
/// the same (exit 2, then 0), in the order the report lists.
#[test]
fn dependents_declared_first_converge_on_the_first_run_at_any_jobs() {
    for jobs in ["1", ""] {
        let mut accounts = Accounts::new();
        let user = accounts.user("ord");
        let group = accounts.group("ord");
        let machine = Machine::new();
        let manifest = machine.manifest(
            "site.wcv",
            &format!(
                r#"
file {{ '@FILES@/app/conf/app.ini': content => "x=1\n", owner => '{user}', group => '{group}', mode => '0640' }}
file {{ '@FILES@/app/conf/copy.ini': source => '@FILES@/app/seed.ini', owner => '{user}' }}
exec {{ 'build': command => '/bin/cp app.ini built.ini', cwd => '@FILES@/app/conf', creates => '@FILES@/app/conf/built.ini' }}
user {{ '{user}': gid => '{group}', home => '@FILES@/app', managehome => false }}
file {{ '@FILES@/app/conf': ensure => directory, owner => '{user}', group => '{group}', mode => '0750' }}
file {{ '@FILES@/app/seed.ini': content => "seed\n" }}
file {{ '@FILES@/app': ensure => directory, mode => '0755' }}
group {{ '{group}': }}
"#
            ),
        );
        let policy = machine.policy(
            r#"[plugins.useradd]
source = "builtin"
provides = ["user", "group"]
environment = ["PATH"]
programs = [
  { path = "/usr/bin/getent", query = true, args = [["passwd"], ["group"], ["shadow"]] },
  { path = "/usr/sbin/useradd", args = [["-g", "*", "-d", "*", "-M", "--", "*"]] },
  { path = "/usr/sbin/groupadd", args = [["--", "*"]] },
]"#,
        );
        let args: &[&str] = if jobs.is_empty() {
            &[]
        } else {
            &["--jobs", jobs]
        };
        let first = machine.apply_with(&manifest, Some(&policy), args, 2);
        assert_eq!(first["summary"]["failed"], 0, "jobs {jobs:?}: {first:#}");
        let files = machine.files_dir();
        let puppets_order = [
            format!("File[{files}/app]"),
            format!("File[{files}/app/seed.ini]"),
            format!("Group[{group}]"),
            format!("User[{user}]"),
            format!("File[{files}/app/conf]"),
            format!("File[{files}/app/conf/app.ini]"),
            format!("File[{files}/app/conf/copy.ini]"),
            "Exec[build]".to_owned(),
        ];
        let order: Vec<&str> = first["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|resource| resource["resource"].as_str().expect("reference"))
            .collect();
        assert_eq!(order, puppets_order, "jobs {jobs:?}");
        let second = machine.apply_with(&manifest, Some(&policy), args, 0);
        assert_eq!(second["summary"]["changed"], 0, "{second:#}");
        let conf = std::fs::metadata(machine.file("app/conf")).expect("conf");
        assert_eq!(conf.permissions().mode() & 0o7777, 0o750);
        let uid = std::process::Command::new("id")
            .args(["-u", &user])
            .output()
            .expect("id");
        let uid: u32 = String::from_utf8_lossy(&uid.stdout)
            .trim()
            .parse()
            .expect("uid");
        assert_eq!(conf.uid(), uid);
        assert_eq!(
            std::fs::read_to_string(machine.file("app/conf/built.ini")).expect("built"),
            "x=1\n"
        );
        assert_eq!(
            std::fs::read_to_string(machine.file("app/conf/copy.ini")).expect("copy"),
            "seed\n"
        );
        drop(accounts);
    }
}

/// A user, its `~/.ssh` directory (in a home the user's own, so another user can write
/// there) and its keys, declared keys first, on a machine where none of them exist: the
/// directory is made with its owner and mode, the keys land in it, and the next run
/// changes nothing.
#[test]
fn a_users_ssh_directory_and_keys_converge_from_nothing_in_one_run() {
    let mut accounts = Accounts::new();
    let user = accounts.user("ssh");
    let home = format!("/home/{user}");
    let _ = std::fs::remove_dir_all(&home);
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        &format!(
            r#"
ssh_authorized_key {{ 'laptop': user => '{user}', type => 'ssh-ed25519', key => 'AAAAC3NzaC1lZDI1NTE5AAAAIKx2' }}
file {{ '{home}/.ssh': ensure => directory, owner => '{user}', mode => '0700' }}
user {{ '{user}': home => '{home}', managehome => true }}
"#
        ),
    );
    for jobs in ["", "1"] {
        let args: &[&str] = if jobs.is_empty() {
            &[]
        } else {
            &["--jobs", jobs]
        };
        let first = machine.apply_with(&manifest, None, args, 2);
        assert_eq!(first["summary"]["failed"], 0, "{first:#}");
        assert_eq!(
            entry(&first, &format!("File[{home}/.ssh]"))["status"],
            "changed"
        );
        let second = machine.apply_with(&manifest, None, args, 0);
        assert_eq!(second["summary"]["changed"], 0, "{second:#}");
        let ssh = std::fs::metadata(format!("{home}/.ssh")).expect(".ssh");
        assert_eq!(ssh.permissions().mode() & 0o7777, 0o700);
        let home_meta = std::fs::metadata(&home).expect("home");
        assert_eq!(ssh.uid(), home_meta.uid(), "the user's, not root's");
        assert!(
            std::fs::read_to_string(format!("{home}/.ssh/authorized_keys"))
                .expect("keys")
                .contains("laptop")
        );
        // From nothing again, one at a time.
        let _ = std::process::Command::new("userdel")
            .args(["-r", &user])
            .output();
        let _ = std::fs::remove_dir_all(&home);
    }
}

/// `ensure => absent` where the directory does not exist is in sync; a noop run on a
/// pristine machine reports what a real run would do (files in directories a resource
/// before them creates) as pending changes and exits 2.
#[test]
fn absent_beneath_a_missing_directory_is_in_sync_and_noop_predicts_a_first_run() {
    let machine = Machine::new();
    let policy = machine.policy("");
    let absent = machine.manifest(
        "absent.wcv",
        "file { '@FILES@/no-such-dir/file': ensure => absent }\n",
    );
    let report = machine.apply_with(&absent, Some(&policy), &[], 0);
    assert_eq!(
        entry(
            &report,
            &format!("File[{}]", machine.file("no-such-dir/file"))
        )["status"],
        "unchanged",
        "{report:#}"
    );
    let first = machine.manifest(
        "first.wcv",
        r#"
file { '@FILES@/new/sub/file': content => "hello\n" }
file { ['@FILES@/new', '@FILES@/new/sub']: ensure => directory }
"#,
    );
    let noop = machine.apply_with(&first, Some(&policy), &["--noop"], 2);
    assert_eq!(noop["summary"]["failed"], 0, "{noop:#}");
    for resource in noop["resources"].as_array().expect("resources") {
        assert_eq!(resource["status"], "would_change", "{noop:#}");
    }
    assert!(!std::path::Path::new(&machine.file("new")).exists());
    // The real run does what the noop said.
    machine.apply_with(&first, Some(&policy), &[], 2);
    assert_eq!(
        std::fs::read_to_string(machine.file("new/sub/file")).expect("file"),
        "hello\n"
    );
    let _: Value = machine.apply_with(&first, Some(&policy), &["--noop"], 0);
}

/// Removes the web server role (`examples/webserver/remove.wcv`) when dropped, so a
/// failed test leaves no user, package, service or file behind.
struct WebServerRole<'m> {
    machine: &'m Machine,
    remove: std::path::PathBuf,
}

impl WebServerRole<'_> {
    fn remove(&self) -> i32 {
        self.machine
            .run(&["apply", self.remove.to_str().expect("utf-8")])
            .code
    }
}

impl Drop for WebServerRole<'_> {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// The README's web server role on a machine where none of it exists (the test removes
/// it first, and again after): the first run makes its 7 changes (exit 2), the second
/// none (exit 0), and the server answers `GET /` with the page.
#[test]
fn the_readmes_web_server_role_converges_from_nothing_on_its_first_run() {
    // The account files and dpkg's database are changed by one test at a time.
    let _accounts = crate::accounts::ACCOUNTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let _dpkg = crate::packages::DPKG
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let examples =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/webserver");
    let machine = Machine::new();
    let role = WebServerRole {
        machine: &machine,
        remove: examples.join("remove.wcv"),
    };
    assert!(matches!(role.remove(), 0 | 2), "the role is removed first");
    let deb = machine.root().join("wcv-demo-web_1.0-1_all.deb");
    let built = std::process::Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(examples.join("package"))
        .arg(&deb)
        .output()
        .expect("dpkg-deb");
    assert!(built.status.success(), "{built:?}");
    let text = std::fs::read_to_string(examples.join("site.wcv"))
        .expect("site.wcv")
        .replace("@DEB@", deb.to_str().expect("utf-8"));
    let manifest = machine.manifest("site.wcv", &text);
    let first = machine.apply_with(&manifest, None, &[], 2);
    assert_eq!(first["summary"]["changed"], 7, "{first:#}");
    assert_eq!(first["summary"]["failed"], 0, "{first:#}");
    let second = machine.apply_with(&manifest, None, &[], 0);
    assert_eq!(second["summary"]["changed"], 0, "{second:#}");
    let page = (0..40)
        .find_map(|_| {
            use std::io::{Read, Write};
            let Ok(mut stream) = std::net::TcpStream::connect("127.0.0.1:8080") else {
                std::thread::sleep(std::time::Duration::from_millis(50));
                return None;
            };
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .ok()?;
            stream
                .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .ok()?;
            let mut response = String::new();
            stream.read_to_string(&mut response).ok()?;
            Some(response)
        })
        .expect("the server answers on 127.0.0.1:8080");
    assert!(page.contains("<h1>Hello from wconverge</h1>"), "{page}");
    drop(role);
    assert!(!std::path::Path::new("/srv/wcv-demo-web").exists());
}

/// One autorequire row run from nothing: `manifest` (with `@FILES@`, and `{user}`,
/// `{group}`, `{group2}`, `{deb}` for what the row makes) declares the dependent first,
/// and with `--jobs 1` and the default the first run converges (exit 2, no failure) and
/// the second changes nothing (exit 0); `check` then looks at the machine.
fn row_converges(row: &str, manifest: &str, check: impl Fn(&Machine, &str)) {
    for jobs in ["1", ""] {
        let mut accounts = Accounts::new();
        // After the account files' turn, as every test that takes both.
        let _dpkg = crate::packages::DPKG
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let user = accounts.user("row");
        let group = accounts.group("row");
        let group2 = accounts.group("row2");
        let _ = std::fs::remove_dir_all(format!("/home/{user}"));
        let machine = Machine::new();
        let text = manifest
            .replace("{user}", &user)
            .replace("{group}", &group)
            .replace("{group2}", &group2);
        let manifest = machine.manifest("site.wcv", &text);
        let args: &[&str] = if jobs.is_empty() {
            &[]
        } else {
            &["--jobs", jobs]
        };
        let first = machine.apply_with(&manifest, None, args, 2);
        assert_eq!(
            first["summary"]["failed"], 0,
            "{row}, jobs {jobs:?}: {first:#}"
        );
        let second = machine.apply_with(&manifest, None, args, 0);
        assert_eq!(second["summary"]["changed"], 0, "{row}: {second:#}");
        check(&machine, &user);
        drop(accounts);
    }
}

#[test]
fn a_link_declared_before_its_target_converges_from_nothing() {
    row_converges(
        "file -> its link's target",
        r#"
file { '@FILES@/link': ensure => link, target => '@FILES@/target' }
file { '@FILES@/target': content => "t\n" }
"#,
        |machine, _| {
            assert_eq!(
                std::fs::read_to_string(machine.file("link")).expect("through the link"),
                "t\n"
            );
        },
    );
}

#[test]
fn a_template_declared_before_its_source_owner_and_group_converges_from_nothing() {
    row_converges(
        "template -> source, owner, group",
        r#"
template { '@FILES@/page': source => '@FILES@/page.j2', owner => '{user}', group => '{group}', mode => '0640' }
file { '@FILES@/page.j2': content => "hello\n" }
user { '{user}': gid => '{group}', home => '/home/{user}', managehome => false }
group { '{group}': }
"#,
        |machine, _| {
            assert_eq!(
                std::fs::read_to_string(machine.file("page")).expect("page"),
                "hello\n"
            );
        },
    );
}

#[test]
fn a_command_declared_before_its_program_user_and_group_converges_from_nothing() {
    row_converges(
        "exec -> the command's program, user, group",
        r##"
exec { 'as the user': command => '/usr/bin/touch /home/{user}/made', user => '{user}', group => '{group}', creates => '/home/{user}/made' }
exec { '@FILES@/bin/tool': creates => '@FILES@/made' }
file { '@FILES@/bin/tool': content => "#!/bin/sh\necho made > @FILES@/made\n", mode => '0755' }
file { '@FILES@/bin': ensure => directory }
user { '{user}': gid => '{group}', home => '/home/{user}', managehome => true }
group { '{group}': }
"##,
        |machine, user| {
            assert_eq!(
                std::fs::read_to_string(machine.file("made")).expect("made"),
                "made\n"
            );
            let made = std::fs::metadata(format!("/home/{user}/made")).expect("made");
            let home = std::fs::metadata(format!("/home/{user}")).expect("home");
            assert_eq!(made.uid(), home.uid(), "made as the user");
        },
    );
}

#[test]
fn a_user_declared_before_its_groups_converges_from_nothing() {
    row_converges(
        "user -> gid, groups",
        r#"
user { '{user}': gid => '{group}', groups => ['{group2}'], home => '/home/{user}', managehome => false }
group { ['{group}', '{group2}']: }
"#,
        |_, user| {
            let groups = std::process::Command::new("id")
                .args(["-Gn", user])
                .output()
                .expect("id");
            let groups = String::from_utf8_lossy(&groups.stdout).into_owned();
            assert!(
                groups.contains("wcvg") && groups.split_whitespace().count() == 2,
                "{groups}"
            );
        },
    );
}

#[test]
fn a_cron_job_declared_before_its_user_converges_from_nothing() {
    row_converges(
        "cron -> user",
        r#"
cron { 'nightly': user => '{user}', command => '/usr/bin/true', special => daily }
user { '{user}': home => '/home/{user}', managehome => false }
"#,
        |_, user| {
            let listed = std::process::Command::new("crontab")
                .args(["-u", user, "-l"])
                .output()
                .expect("crontab");
            assert!(String::from_utf8_lossy(&listed.stdout).contains("/usr/bin/true"));
            let _ = std::process::Command::new("crontab")
                .args(["-u", user, "-r"])
                .output();
        },
    );
}

#[test]
fn a_package_declared_before_its_local_source_converges_from_nothing() {
    let name = format!("wcvt-{}-row", std::process::id());
    let debs = tempfile::Builder::new()
        .prefix("wcvt-debs-")
        .tempdir()
        .expect("temp dir");
    let root = debs.path().join("root");
    std::fs::create_dir_all(root.join("DEBIAN")).expect("DEBIAN");
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: wconverge tests \
             <tests@example.invalid>\nDescription: a package the wconverge tests build\n"
        ),
    )
    .expect("control");
    let deb = debs.path().join(format!("{name}.deb"));
    let built = std::process::Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(&root)
        .arg(&deb)
        .output()
        .expect("dpkg-deb");
    assert!(built.status.success(), "{built:?}");
    /// Purges the package when dropped, the test failed or not.
    struct Purged<'n>(&'n str);
    impl Drop for Purged<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("dpkg")
                .args(["--purge", self.0])
                .output();
        }
    }
    let purge = || drop(Purged(&name));
    purge();
    let _purged = Purged(&name);
    row_converges(
        "package -> a local source",
        &format!(
            "package {{ '{name}': provider => dpkg, source => '@FILES@/{name}.deb' }}\n\
             file {{ '@FILES@/{name}.deb': source => '{}' }}\n",
            deb.display()
        ),
        |_, _| {
            let status = std::process::Command::new("dpkg-query")
                .args(["-W", "-f", "${Status}", &name])
                .output()
                .expect("dpkg-query");
            assert_eq!(
                String::from_utf8_lossy(&status.stdout),
                "install ok installed"
            );
            purge();
        },
    );
}
