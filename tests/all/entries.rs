//! Entries of shared files: `cron` (a user's crontab through
//! `crontab`), `host` (a hosts file replaced atomically) and `ssh_authorized_key` (a
//! user's authorized_keys, with the file type's rules in a directory the user owns).
//! The users are real, created for a test and removed after it with their crontab.

use crate::attacker::LocalUser;
use crate::support::{Machine, entry};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// `crontab`, which the `cron` type drives: Debian's `cron` package, installed when this
/// machine lacks it (the tests run as root).
pub(crate) fn crontab_available() {
    if Path::new("/usr/bin/crontab").exists() {
        return;
    }
    let installed = Command::new("apt-get")
        .args(["install", "-y", "-q", "cron"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .expect("apt-get runs");
    assert!(
        installed.status.success(),
        "the cron tests need crontab (Debian's cron package), and installing it failed: \
         {installed:?}"
    );
}

/// The user's crontab, removed when dropped (the test's users are removed, their
/// crontabs are not).
pub(crate) struct CrontabRemoved(pub(crate) String);

impl Drop for CrontabRemoved {
    fn drop(&mut self) {
        let _ = Command::new("crontab").args(["-u", &self.0, "-r"]).output();
    }
}

pub(crate) fn crontab_of(user: &str) -> String {
    let output = Command::new("crontab")
        .args(["-u", user, "-l"])
        .output()
        .expect("crontab");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn cron_jobs_are_added_changed_and_removed_in_a_users_crontab() {
    crontab_available();
    let user = LocalUser::create();
    let _remove = CrontabRemoved(user.name.clone());
    let name = &user.name;
    let machine = Machine::new();
    let manifest = |hour: &str, cleanup: &str| {
        machine.manifest(
            "cron.wcv",
            &format!(
                r#"
cron {{ 'backup':
  user        => '{name}',
  command     => '/usr/local/bin/backup --all',
  minute      => 0,
  hour        => {hour},
  environment => 'MAILTO=ops@example.com',
}}
cron {{ 'cleanup': user => '{name}', command => '/usr/bin/true', special => daily, ensure => {cleanup} }}
"#
            ),
        )
    };
    let report = machine.apply_with(&manifest("[2, 14]", "present"), None, &[], 2);
    assert_eq!(
        crontab_of(name),
        "# Puppet Name: backup\nMAILTO=ops@example.com\n0 2,14 * * * /usr/local/bin/backup --all\n\
         # Puppet Name: cleanup\n@daily /usr/bin/true\n",
        "{report:#}"
    );
    machine.apply_with(&manifest("[2, 14]", "present"), None, &[], 0);

    // A line the administrator adds by hand stays.
    let mut edited = crontab_of(name);
    edited.push_str("*/5 * * * * /usr/bin/hand-made\n");
    let mut install = Command::new("crontab")
        .args(["-u", name, "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("crontab");
    use std::io::Write;
    install
        .stdin
        .take()
        .expect("stdin")
        .write_all(edited.as_bytes())
        .expect("write");
    assert!(install.wait().expect("crontab").success());

    let report = machine.apply_with(&manifest("3", "absent"), None, &[], 2);
    assert_eq!(
        entry(&report, "Cron[backup]")["changes"][0]["message"],
        "schedule changed '0 2,14 * * *' to '0 3 * * *'"
    );
    assert_eq!(
        crontab_of(name),
        "# Puppet Name: backup\nMAILTO=ops@example.com\n0 3 * * * /usr/local/bin/backup --all\n\
         */5 * * * * /usr/bin/hand-made\n"
    );
    machine.apply_with(&manifest("3", "absent"), None, &[], 0);

    let hostile = machine.manifest(
        "hostile.wcv",
        &format!(
            "cron {{ 'x': user => '{name}', command => \"/bin/true\\n* * * * * /tmp/evil\" }}\n"
        ),
    );
    let run = machine.run(&["apply", hostile.to_str().expect("utf-8")]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("a command is one line of printable text"),
        "{run:#?}"
    );
    assert!(!crontab_of(name).contains("evil"));
}

#[test]
fn a_host_entry_is_kept_in_place_and_the_file_replaced_whole() {
    let machine = Machine::new();
    let hosts = machine.file("hosts");
    std::fs::write(
        &hosts,
        "127.0.0.1\tlocalhost\n# the database\n10.0.0.4\tdb.example.com db\n::1\tip6-localhost\n",
    )
    .expect("hosts");
    std::fs::set_permissions(&hosts, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let policy = machine.policy(&format!(
        "[plugins.hosts]\nsource = \"builtin\"\nprovides = [\"host\"]\ndirectories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
        machine.files_dir()
    ));
    let manifest = |db: &str, cache: &str| {
        machine.manifest(
            "hosts.wcv",
            &format!(
                r#"
host {{ 'db.example.com': ip => '{db}', host_aliases => ['db', 'postgres'], target => '@FILES@/hosts' }}
host {{ 'cache.example.com': ip => '10.0.0.9', comment => 'redis', target => '@FILES@/hosts', ensure => {cache} }}
"#
            ),
        )
    };
    machine.apply_with(&manifest("10.0.0.5", "present"), Some(&policy), &[], 2);
    assert_eq!(
        std::fs::read_to_string(&hosts).expect("hosts"),
        "127.0.0.1\tlocalhost\n# the database\n10.0.0.5\tdb.example.com\tdb\tpostgres\n\
         ::1\tip6-localhost\n10.0.0.9\tcache.example.com\t# redis\n"
    );
    assert_eq!(
        std::fs::metadata(&hosts)
            .expect("hosts")
            .permissions()
            .mode()
            & 0o777,
        0o644,
        "the file keeps its mode"
    );
    machine.apply_with(&manifest("10.0.0.5", "present"), Some(&policy), &[], 0);
    machine.apply_with(&manifest("10.0.0.5", "absent"), Some(&policy), &[], 2);
    assert!(
        !std::fs::read_to_string(&hosts)
            .expect("hosts")
            .contains("cache")
    );
    let leftovers: Vec<String> = std::fs::read_dir(machine.file(""))
        .expect("files")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.contains(".wcv-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn an_authorized_key_is_written_for_its_user_and_never_through_a_link() {
    let user = LocalUser::create();
    let machine = Machine::new();
    let home = machine.file(&user.name);
    let ssh = format!("{home}/.ssh");
    std::fs::create_dir_all(&ssh).expect(".ssh");
    for dir in [&home, &ssh] {
        std::os::unix::fs::chown(dir, Some(user.uid), Some(user.gid)).expect("chown");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let target = format!("{ssh}/authorized_keys");
    // What the user planted: authorized_keys as a link to a file of root's.
    let victim = machine.file("victim");
    std::fs::write(&victim, "root's\n").expect("victim");
    std::os::unix::fs::symlink(&victim, &target).expect("link");
    let policy = machine.policy(&format!(
        "[plugins.sshkeys]\nsource = \"builtin\"\nprovides = [\"ssh_authorized_key\", \"purge_ssh_keys\"]\ndirectories = [{{ path = \"{}\", access = \"read-write\" }}]\n\n\
         [plugins.useradd]\nsource = \"builtin\"\nprovides = [\"user\", \"group\"]\nenvironment = [\"PATH\"]\n\
         programs = [{{ path = \"/usr/bin/getent\", query = true, args = [[\"passwd\"], [\"group\"]] }}]\n",
        machine.files_dir()
    ));
    let name = &user.name;
    let manifest = machine.manifest(
        "keys.wcv",
        &format!(
            r#"
ssh_authorized_key {{ 'deploy@ci':
  user    => '{name}',
  type    => 'ssh-ed25519',
  key     => 'AAAAC3NzaC1lZDI1NTE5AAAAIKx1',
  options => ['no-pty', 'from="10.0.0.0/8"'],
  target  => '{target}',
}}
"#
        ),
    );
    let refused = machine.apply_with(&manifest, Some(&policy), &[], 4);
    assert!(
        crate::support::first_error(&refused).contains("is not a regular file"),
        "{refused:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "root's\n",
        "never written through the link"
    );
    // The administrator removes the link; the key is written.
    std::fs::remove_file(&target).expect("remove the link");
    machine.apply_with(&manifest, Some(&policy), &[], 2);
    let meta = std::fs::symlink_metadata(&target).expect("authorized_keys");
    assert!(meta.file_type().is_file());
    assert_eq!((meta.uid(), meta.mode() & 0o777), (user.uid, 0o600));
    assert_eq!(
        std::fs::read_to_string(&target).expect("keys"),
        "no-pty,from=\"10.0.0.0/8\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx1 deploy@ci\n"
    );
    machine.apply_with(&manifest, Some(&policy), &[], 0);

    // Without `target`: `~USER/.ssh/authorized_keys`, the home looked up when the
    // resource runs, as Puppet does.
    let moved = Command::new("usermod")
        .args(["-d", &home, name])
        .output()
        .expect("usermod");
    assert!(moved.status.success(), "{moved:?}");
    let default_target = machine.manifest(
        "default.wcv",
        &format!(
            r#"
ssh_authorized_key {{ 'laptop@home': user => '{name}', type => 'ssh-ed25519', key => 'AAAAC3NzaC1lZDI1NTE5AAAAIKx2' }}
"#
        ),
    );
    machine.apply_with(&default_target, Some(&policy), &[], 2);
    assert_eq!(
        std::fs::read_to_string(&target).expect("keys"),
        "no-pty,from=\"10.0.0.0/8\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx1 deploy@ci\n\
         ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx2 laptop@home\n"
    );
    machine.apply_with(&default_target, Some(&policy), &[], 0);

    // purge_ssh_keys: a key someone added by hand goes, the managed ones stay.
    let mut keys = std::fs::read_to_string(&target).expect("keys");
    keys.push_str("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAB intruder@elsewhere\n");
    std::fs::write(&target, keys).expect("add a key");
    let purging = machine.manifest(
        "purge.wcv",
        &format!(
            r#"
user {{ '{name}': purge_ssh_keys => true }}
ssh_authorized_key {{ 'laptop@home': user => '{name}', type => 'ssh-ed25519', key => 'AAAAC3NzaC1lZDI1NTE5AAAAIKx2' }}
"#
        ),
    );
    let report = machine.apply_with(&purging, Some(&policy), &[], 2);
    assert_eq!(
        std::fs::read_to_string(&target).expect("keys"),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx2 laptop@home\n",
        "{report:#}"
    );
    machine.apply_with(&purging, Some(&policy), &[], 0);

    // What purge_ssh_keys becomes can be declared too: keeping nothing empties the file.
    let declared = machine.manifest(
        "declared.wcv",
        &format!(
            r#"
purge_ssh_keys {{ '{name}': keep => [] }}
"#
        ),
    );
    machine.apply_with(&declared, Some(&policy), &[], 2);
    assert_eq!(std::fs::read_to_string(&target).expect("keys"), "");
}

/// A new ed25519 key pair at `path` (its comment the file's name): the public key, base64.
pub(crate) fn ed25519_key(path: &Path) -> String {
    let name = path
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", &name, "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen");
    assert!(made.status.success(), "{made:?}");
    let public = std::fs::read_to_string(path.with_extension("pub")).expect("public");
    public.split_whitespace().nth(1).expect("key").to_owned()
}

/// Keys are told apart by what they are, never by their names. A line someone appended
/// with a managed key's name and another key is removed by that key's resource; purge
/// removes every line whose key is not managed, whatever its comment, and any line sshd
/// might read as a key that wconverge cannot; blank lines and comments stay.
#[test]
fn a_foreign_key_carrying_a_managed_name_is_removed_and_purge_goes_by_key() {
    let machine = Machine::new();
    let files = machine.files_dir();
    let policy = machine.policy(&format!(
        "[plugins.sshkeys]\nsource = \"builtin\"\nprovides = [\"ssh_authorized_key\", \"purge_ssh_keys\"]\n\
         directories = [{{ path = \"{files}\", access = \"read-write\" }}]\n"
    ));
    let target = format!("{files}/authorized_keys");
    let key = |name: &str| ed25519_key(&machine.root().join(name));
    let (managed, other, stranger) = (key("managed"), key("other"), key("stranger"));
    let manifest = |purge: bool| {
        let mut text = format!(
            "ssh_authorized_key {{ 'deploy': user => 'root', type => 'ssh-ed25519', key => '{managed}', target => '{target}' }}\n"
        );
        if purge {
            text.push_str(&format!(
                "purge_ssh_keys {{ 'root': target => '{target}', keep => ['{managed}'], require => Ssh_authorized_key['deploy'] }}\n"
            ));
        }
        machine.manifest(if purge { "purge.wcv" } else { "key.wcv" }, &text)
    };
    machine.apply_with(&manifest(false), Some(&policy), &[], 2);
    let planted = format!(
        "ssh-ed25519 {managed} deploy\n# kept\n\nssh-ed25519 {other} deploy\n\
         no-pty ssh-ed25519 {stranger} laptop\nssh-ed25519 {managed} copy\nnot a key at all\n"
    );
    std::fs::write(&target, &planted).expect("planted");
    let report = machine.apply_with(&manifest(false), Some(&policy), &[], 2);
    assert_eq!(
        std::fs::read_to_string(&target).expect("keys"),
        format!(
            "ssh-ed25519 {managed} deploy\n# kept\n\nno-pty ssh-ed25519 {stranger} laptop\n\
             not a key at all\n"
        ),
        "the other key named `deploy` and the second line of the managed key went: {report:#}"
    );
    machine.apply_with(&manifest(false), Some(&policy), &[], 0);
    machine.apply_with(&manifest(true), Some(&policy), &[], 2);
    assert_eq!(
        std::fs::read_to_string(&target).expect("keys"),
        format!("ssh-ed25519 {managed} deploy\n# kept\n\n")
    );
    machine.apply_with(&manifest(true), Some(&policy), &[], 0);
    let listed = Command::new("ssh-keygen")
        .args(["-l", "-f", &target])
        .output()
        .expect("ssh-keygen");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.lines().count(), 1, "one key is left: {listed}");
    assert!(listed.contains(" deploy (ED25519)"), "{listed}");
}

/// The built-in policy lets `host` write `/etc/hosts` and no other file, though the
/// plugin may write in `/etc`: a target like `/etc/sudoers.d/hosts` (which would break
/// sudo) is refused before anything is written.
#[test]
fn a_host_entry_goes_only_to_the_file_the_policy_names() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "sudoers.wcv",
        "host { 'db': ip => '10.0.0.5', target => '/etc/sudoers.d/hosts' }\n",
    );
    let report = machine.apply_with(&manifest, None, &["--noop"], 4);
    let error = crate::support::first_error(&report);
    assert!(
        error.contains("the policy lets plugin `hosts` write only `/etc/hosts` (`files`)")
            && error.contains("/etc/sudoers.d/hosts"),
        "{error}"
    );
    assert!(!Path::new("/etc/sudoers.d/hosts").exists());
}

/// Users, groups, cron jobs, SSH keys and hosts entries on a pristine test host, as its
/// own programs read them: `getent` finds the account and the entry, the host's cron
/// daemon runs the job as the user, its sshd lets the managed key in and refuses a key
/// someone added once purge has run.
#[test]
fn accounts_jobs_keys_and_hosts_work_on_a_pristine_host() {
    let host = crate::testhost::TestHost::boot();
    let keys = tempfile::tempdir().expect("keys");
    let key = |name: &str| {
        let path = keys.path().join(name);
        let public = ed25519_key(&path);
        std::fs::copy(&path, host.path(&format!("/root/{name}"))).expect("key into the host");
        public
    };
    let (managed, stranger) = (key("managed"), key("stranger"));
    let manifest = format!(
        "group {{ 'wcvg': }}\n\
         user {{ 'wcvu': gid => 'wcvg', home => '/home/wcvu', managehome => true, shell => '/bin/sh', purge_ssh_keys => true }}\n\
         file {{ '/home/wcvu/.ssh': ensure => directory, owner => 'wcvu', mode => '0700' }}\n\
         ssh_authorized_key {{ 'deploy': user => 'wcvu', type => 'ssh-ed25519', key => '{managed}' }}\n\
         cron {{ 'stamp': user => 'wcvu', command => 'id -un >> /tmp/wcv-cron.out' }}\n\
         host {{ 'db.wcv.test': ip => '10.9.8.7', host_aliases => ['db'] }}\n"
    );
    host.apply("site.wcv", &manifest, 2);
    host.apply("site.wcv", &manifest, 0);
    let looked = host.run("getent passwd wcvu; getent group wcvg; getent hosts db.wcv.test db");
    assert!(
        looked.stdout.contains("wcvu:x:")
            && looked.stdout.contains("wcvg:x:")
            && looked.stdout.contains("10.9.8.7        db.wcv.test db"),
        "{looked:#?}"
    );
    let login = |key: &str| {
        host.run(&format!(
            "chmod 600 /root/{key}; ssh -F /dev/null -T -o BatchMode=yes -o IdentitiesOnly=yes \
             -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -i /root/{key} \
             wcvu@127.0.0.1 id -un"
        ))
    };
    let allowed = login("managed");
    assert_eq!(allowed.stdout.trim(), "wcvu", "{allowed:#?}");
    // Someone adds a key; purge takes it away, and sshd then refuses it.
    let added = host.run(&format!(
        "echo 'ssh-ed25519 {stranger} deploy' >> /home/wcvu/.ssh/authorized_keys"
    ));
    assert_eq!(added.code, 0, "{added:#?}");
    assert_eq!(
        login("stranger").stdout.trim(),
        "wcvu",
        "the added key works until purged"
    );
    host.apply("site.wcv", &manifest, 2);
    let refused = login("stranger");
    assert_eq!(refused.code, 255, "{refused:#?}");
    assert_eq!(login("managed").stdout.trim(), "wcvu");
    // The host's cron daemon runs the job as the user (within its next minute).
    let started = std::time::Instant::now();
    loop {
        let ran = host.run("cat /tmp/wcv-cron.out 2>/dev/null");
        if ran.stdout.lines().any(|line| line == "wcvu") {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(75),
            "cron did not run the job: {ran:#?}"
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
