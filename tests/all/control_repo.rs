//! A Puppet user's control repository on a pristine test host: modules in `.wcv` and
//! `.pp`, Hiera data bound to class parameters, an EPP template, a `puppet:///modules/`
//! source, a defined type declared twice and a `validate_cmd`, validated and applied
//! from the repository's root and from `manifests/` with relative paths only; then the
//! commands a Puppet user reaches for: `reports`, `facts`, `resource`, `apply -e`.

use crate::testhost::TestHost;

/// The repository, file by file, under `/root/control`.
const REPOSITORY: &[(&str, &str)] = &[
    (
        "manifests/site.wcv",
        "node default {\n  include \"role::${lookup('role')}\"\n}\n",
    ),
    (
        "hiera.yaml",
        "version: 5\nhierarchy:\n  - name: common\n    path: common.yaml\n",
    ),
    (
        "data/common.yaml",
        "role: web\nprofile::base::message: 'managed by wconverge'\n\
         profile::sshd::password_authentication: 'no'\n",
    ),
    (
        "modules/role/manifests/web.wcv",
        "class role::web {\n  include profile::base\n  include profile::sshd\n  \
         file { '/etc/wcv-vhosts': ensure => directory }\n  \
         profile::vhost { 'a': port => 8081 }\n  profile::vhost { 'b': port => 8082 }\n}\n",
    ),
    (
        "modules/profile/manifests/base.pp",
        "class profile::base(String $message) {\n  \
         file { '/etc/motd': content => epp('profile/motd.epp', { 'message' => $message }) }\n  \
         file { '/usr/local/share/wcv-banner': source => 'puppet:///modules/profile/banner' }\n  \
         exec { 'mark': command => '/usr/bin/touch /var/tmp/wcv-mark', \
         unless => '/usr/bin/test -e /var/tmp/wcv-mark' }\n}\n",
    ),
    (
        "modules/profile/manifests/sshd.wcv",
        "class profile::sshd(String $password_authentication) {\n  \
         file { '/etc/ssh/sshd_config.d/wcv.conf':\n    \
         content => \"PasswordAuthentication ${password_authentication}\\n\",\n    \
         validate_cmd => '/usr/sbin/sshd -t -f %',\n  }\n}\n",
    ),
    (
        "modules/profile/manifests/vhost.wcv",
        "define profile::vhost(Integer $port) {\n  \
         file { \"/etc/wcv-vhosts/${title}.conf\": content => \"listen ${port}\\n\" }\n}\n",
    ),
    (
        "modules/profile/templates/motd.epp",
        "<%- | String $message | -%>\n<%= $message %> on <%= $facts['os']['family'] %>\n",
    ),
    ("modules/profile/files/banner", "a banner from a module\n"),
    // A policy that grants the file plugin too little.
    (
        "narrow.toml",
        r#"[plugins.file]
source = "builtin"
directories = [{ path = "/etc/wcv-vhosts", access = "read-write" }]
programs = ["/usr/sbin/sshd"]

[plugins.sh]
source = "builtin"
provides = ["sh", "exec", "script"]
directories = [{ path = "/", access = "read" }]
programs = ["/usr/bin/*"]

[plugins.facts-os]
source = "builtin"
provides = []
directories = [{ path = "/etc", access = "read" }, { path = "/usr/lib", access = "read" }, { path = "/run", access = "read" }]

[plugins.facts-system]
source = "builtin"
provides = []
directories = [{ path = "/proc", access = "read" }, { path = "/sys", access = "read" }, { path = "/etc", access = "read" }, { path = "/run", access = "read" }]
"#,
    ),
];

#[test]
fn a_control_repository_converges_a_pristine_host_from_its_root_and_from_manifests() {
    let host = TestHost::boot();
    for (path, content) in REPOSITORY {
        host.write(&format!("/root/control/{path}"), content);
    }
    let at = |dir: &str, command: &str| host.run(&format!("cd /root/control{dir} && {command}"));

    // Validated from the root and from `manifests/`: modules, Hiera and the source found.
    for (dir, manifest) in [("", "manifests/site.wcv"), ("/manifests", "site.wcv")] {
        let valid = at(dir, &format!("wconverge validate {manifest}"));
        assert_eq!(valid.code, 0, "from /root/control{dir}: {valid:#?}");
        assert!(valid.stdout.contains("valid, "), "{valid:#?}");
    }
    // `validate` sees the policy: what the run would be refused, before anything runs.
    let narrow = at(
        "",
        "wconverge validate manifests/site.wcv --policy narrow.toml",
    );
    assert_eq!(narrow.code, 1, "{narrow:#?}");
    assert!(
        narrow.stderr.contains(
            "error[wcv::not-granted]: File[/etc/motd]: the policy grants plugin `file` no \
             read-write access to `/etc`; add `{ path = \"/etc\", access = \"read-write\" }` \
             to `directories` of [plugins.file] in the policy"
        ),
        "{narrow:#?}"
    );
    assert!(
        narrow
            .stderr
            .contains("no read access to `/root/control/modules/profile/files`"),
        "the module's source is checked too: {narrow:#?}"
    );
    assert!(!host.path("/etc/wcv-vhosts").exists(), "nothing ran");

    let first = at("", "wconverge apply manifests/site.wcv --state-dir state");
    assert_eq!(first.code, 2, "{first:#?}");
    let read = |path: &str| std::fs::read_to_string(host.path(path)).expect(path);
    assert_eq!(read("/etc/motd"), "managed by wconverge on Debian\n");
    assert_eq!(
        read("/usr/local/share/wcv-banner"),
        "a banner from a module\n"
    );
    assert_eq!(read("/etc/wcv-vhosts/a.conf"), "listen 8081\n");
    assert_eq!(read("/etc/wcv-vhosts/b.conf"), "listen 8082\n");
    assert_eq!(
        read("/etc/ssh/sshd_config.d/wcv.conf"),
        "PasswordAuthentication no\n"
    );
    assert!(host.path("/root/control/state").is_dir(), "{first:#?}");

    // Converged: from `manifests/`, the summary alone (the guard that held is counted,
    // not printed).
    let again = at(
        "/manifests",
        "wconverge apply site.wcv --state-dir ../state",
    );
    assert_eq!(again.code, 0, "{again:#?}");
    assert_eq!(again.stdout.lines().count(), 1, "{again:#?}");
    assert!(again.stdout.contains("1 skipped by guard"), "{again:#?}");
    let verbose = at(
        "",
        "wconverge apply manifests/site.wcv --state-dir state -v",
    );
    assert!(
        verbose
            .stdout
            .contains("Exec[mark]: skipped by guard: unless"),
        "{verbose:#?}"
    );

    // A value sshd refuses never reaches its configuration.
    host.write(
        "/root/control/data/common.yaml",
        &REPOSITORY[2].1.replace("'no'", "'maybe'"),
    );
    let refused = at("", "wconverge apply manifests/site.wcv --state-dir state");
    assert_eq!(refused.code, 4, "{refused:#?}");
    assert!(
        refused.stdout.contains(
            "File[/etc/ssh/sshd_config.d/wcv.conf]: failed: validate_cmd `/usr/sbin/sshd -t \
             -f %` refused the new content (exited with 255); \
             `/etc/ssh/sshd_config.d/wcv.conf` was not changed"
        ),
        "{refused:#?}"
    );
    assert!(
        refused.stdout.contains("maybe"),
        "sshd's words: {refused:#?}"
    );
    assert_eq!(
        read("/etc/ssh/sshd_config.d/wcv.conf"),
        "PasswordAuthentication no\n"
    );
    let leftovers = host.run("ls -A /etc/ssh/sshd_config.d");
    assert_eq!(leftovers.stdout, "wcv.conf\n", "no candidate left behind");

    // A noop run is listed as one, with what it would change: it changed nothing.
    let noop = at(
        "",
        "wconverge apply manifests/site.wcv --state-dir state --noop",
    );
    assert!(noop.stdout.contains("would change"), "{noop:#?}");
    let reports = at("", "wconverge reports --state-dir state --format json");
    assert_eq!(reports.code, 0, "{reports:#?}");
    let reports = reports.json();
    let newest = &reports[0];
    assert_eq!(newest["mode"], "noop", "{reports:#}");
    assert_eq!(newest["status"], "unchanged", "{reports:#}");
    assert_eq!(newest["would_change"], 1, "{reports:#}");
    assert_eq!(reports[1]["mode"], "apply", "{reports:#}");
    assert_eq!(reports[1]["status"], "failed", "{reports:#}");
    assert_eq!(reports.as_array().map(Vec::len), Some(5), "{reports:#}");
    let listing = at("", "wconverge reports --state-dir state");
    assert!(listing.stdout.starts_with("ID "), "{listing:#?}");

    // Facts as manifests see them, one by its dotted name.
    let family = host.run("wconverge facts os.family");
    assert_eq!(family.stdout, "Debian\n", "{family:#?}");
    let virtual_ = host.run("wconverge facts virtual");
    assert_eq!(virtual_.stdout, "systemd_nspawn\n", "{virtual_:#?}");

    // The machine's own state as manifest code, which changes nothing when applied.
    let code =
        host.run("wconverge resource user root && wconverge resource package openssh-server");
    assert_eq!(code.code, 0, "{code:#?}");
    assert!(code.stdout.starts_with("user { 'root':\n"), "{code:#?}");
    assert!(
        code.stdout
            .contains("package { 'openssh-server':\n  ensure => '1:"),
        "{code:#?}"
    );
    let applied = host.apply("resources.pp", &code.stdout, 0);
    assert_eq!(applied["summary"]["unchanged"], 2, "{applied:#}");

    // Code given on the command line.
    let inline = host.run("wconverge apply -e \"notify { 'from the command line': }\"");
    assert_eq!(inline.code, 2, "{inline:#?}");
    assert!(
        inline
            .stdout
            .contains("Notify[from the command line]: notice: from the command line"),
        "{inline:#?}"
    );
}
