//! Users and groups: `user` and `group` with the `useradd`
//! provider, through the built-in policy, on this machine's real account databases. The
//! tests remove every user and group they create when they end, failed or not.

use crate::support::{Machine, entry};
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// The shadow utilities lock the account files: the tests that change them take turns
/// (`attacker::LocalUser` too).
pub(crate) static ACCOUNTS: Mutex<()> = Mutex::new(());

/// Users and groups a test made, removed when it is dropped.
pub(crate) struct Accounts {
    users: Vec<String>,
    groups: Vec<String>,
    _turn: MutexGuard<'static, ()>,
}

impl Accounts {
    pub(crate) fn new() -> Accounts {
        Accounts {
            users: Vec::new(),
            groups: Vec::new(),
            _turn: ACCOUNTS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }

    pub(crate) fn user(&mut self, stem: &str) -> String {
        let name = format!("wcvu{}{stem}", std::process::id());
        self.users.push(name.clone());
        name
    }

    pub(crate) fn group(&mut self, stem: &str) -> String {
        let name = format!("wcvg{}{stem}", std::process::id());
        self.groups.push(name.clone());
        name
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        for user in &self.users {
            let _ = Command::new("userdel").args(["-r", user]).output();
        }
        for group in &self.groups {
            let _ = Command::new("groupdel").arg(group).output();
        }
    }
}

fn getent(database: &str, key: &str) -> Option<Vec<String>> {
    let output = Command::new("getent")
        .args([database, key])
        .output()
        .expect("getent");
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .split(':')
            .map(str::to_owned)
            .collect()
    })
}

#[test]
fn a_user_and_its_group_are_created_changed_and_removed() {
    let mut accounts = Accounts::new();
    let web = accounts.user("web");
    let team = accounts.group("team");
    let machine = Machine::new();
    let home = machine.root().join(format!("home-{web}"));
    let home = home.to_str().expect("utf-8");
    let manifest = |extra: &str, ensure: &str| {
        machine.manifest(
            "site.wcv",
            &format!(
                r#"
group {{ '{team}': gid => 47011 }}
user {{ '{web}':
  ensure     => {ensure},
  uid        => 47011,
  groups     => ['{team}'],
  home       => '{home}',
  managehome => true,
  password   => Sensitive('$6$salt$notarealhash'),
  {extra}
}}
"#
            ),
        )
    };
    let first = manifest(
        "shell => '/bin/sh', comment => 'Web server', expiry => '2031-01-01',",
        "present",
    );
    let report = machine.apply_with(&first, None, &[], 2);
    // The user's group is created first: its `groups` name it (autorequire).
    let order: Vec<&str> = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|entry| entry["resource"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        order,
        vec![format!("Group[{team}]"), format!("User[{web}]")]
    );
    let said = report.to_string();
    assert!(
        !said.contains("notarealhash"),
        "the hash is never shown: {said}"
    );
    let passwd = getent("passwd", &web).expect("the user exists");
    assert_eq!(passwd[2], "47011");
    assert_eq!(passwd[4..7], ["Web server", home, "/bin/sh"]);
    assert_eq!(
        getent("group", &team).expect("group")[2..],
        ["47011", web.as_str()]
    );
    let shadow = getent("shadow", &web).expect("shadow");
    assert_eq!(shadow[1], "$6$salt$notarealhash");
    assert_eq!(shadow[7], "22280", "2031-01-01 in days since 1970");
    assert!(Path::new(home).is_dir(), "managehome made it");
    machine.apply_with(&first, None, &[], 0);

    let second = manifest(
        "shell => '/bin/bash', comment => 'Web', expiry => 'absent',",
        "present",
    );
    let report = machine.apply_with(&second, None, &[], 2);
    let messages: Vec<&str> = entry(&report, &format!("User[{web}]"))["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|change| change["message"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        messages,
        vec![
            "shell changed '/bin/sh' to '/bin/bash'",
            "comment changed 'Web server' to 'Web'",
            "expiry changed '2031-01-01' to 'absent'",
        ]
    );
    assert_eq!(getent("passwd", &web).expect("user")[6], "/bin/bash");
    assert_eq!(getent("shadow", &web).expect("shadow")[7], "");
    machine.apply_with(&second, None, &[], 0);

    let remove = machine.manifest(
        "remove.wcv",
        &format!(
            "user {{ '{web}': ensure => absent, managehome => true }}\n\
             group {{ '{team}': ensure => absent }}\n"
        ),
    );
    machine.apply_with(&remove, None, &[], 2);
    assert_eq!(getent("passwd", &web), None);
    assert_eq!(getent("group", &team), None);
    assert!(!Path::new(home).exists(), "managehome removed it");
    machine.apply_with(&remove, None, &[], 0);
}

#[test]
fn membership_is_minimum_unless_inclusive_and_states_are_read_once() {
    let mut accounts = Accounts::new();
    let (one, two) = (accounts.group("one"), accounts.group("two"));
    let users: Vec<String> = (0..5).map(|n| accounts.user(&format!("m{n}"))).collect();
    let machine = Machine::new();
    let mut text = format!("group {{ ['{one}', '{two}']: }}\n");
    for user in &users {
        text.push_str(&format!("user {{ '{user}': groups => ['{one}'] }}\n"));
    }
    let manifest = machine.manifest("site.wcv", &text);
    machine.apply_with(&manifest, None, &[], 2);
    // Someone adds the first user to `two` by hand: minimum membership leaves it.
    let added = Command::new("gpasswd")
        .args(["-a", &users[0], &two])
        .output()
        .expect("gpasswd");
    assert!(added.status.success(), "{added:?}");
    let log = machine.root().join("audit.jsonl");
    machine.apply_with(
        &manifest,
        None,
        &["--audit-log", log.to_str().expect("utf-8")],
        0,
    );
    let launches = crate::support::launched(&log);
    // Two groups and five users: each database read once, the shadow database never.
    assert_eq!(
        launches,
        vec![
            "/usr/bin/getent group",
            "/usr/bin/getent passwd",
            "/usr/bin/getent group"
        ],
        "{launches:#?}"
    );

    let inclusive = machine.manifest(
        "inclusive.wcv",
        &format!(
            "user {{ '{}': groups => ['{one}'], membership => inclusive }}\n\
             group {{ '{one}': members => ['{}'] }}\n",
            users[0], users[1]
        ),
    );
    machine.apply_with(&inclusive, None, &[], 2);
    assert_eq!(
        getent("group", &two).expect("two")[3],
        "",
        "inclusive removed it"
    );
    let members = getent("group", &one).expect("one")[3].clone();
    assert_eq!(
        members.split(',').count(),
        5,
        "by default (Puppet's auth_membership => false) members are added, no one removed: \
         {members}"
    );
    machine.apply_with(&inclusive, None, &[], 0);
}

#[test]
fn account_values_that_would_be_options_never_reach_a_command_line() {
    let _accounts = Accounts::new();
    let machine = Machine::new();
    let manifest = machine.manifest(
        "hostile.wcv",
        r#"user { 'evil': name => '-ou0' }
user { 'gecos': name => 'wcvnobody', comment => '-p$6$x', shell => 'bin/sh' }
group { 'g': name => 'wcvg', members => ['-x'] }
"#,
    );
    machine.refused_before_any_launch(
        &manifest,
        &[
            "hostile.wcv:1:",
            "`-ou0` is not a user name",
            "hostile.wcv:2:",
            "comment `-p$6$x` may not hold `:` or a newline, nor start with `-`",
            "shell `bin/sh` must be an absolute path",
            "hostile.wcv:3:",
            "member `-x` is not a user name",
        ],
    );
    assert_eq!(getent("passwd", "wcvnobody"), None);
}
