//! A Puppet code base carried over: a control repository (environment.conf, a role and
//! a profile in site-modules, two modules, Hiera data per OS family and per node, an EPP
//! template, a `source` file) applied by the real binary on this machine, then again
//! with nothing left to change.

use crate::support::Machine;
use std::path::Path;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
    std::fs::write(path, text).expect("written");
}

/// This machine's OS family as Facter spells it (`Debian`), from os-release.
fn os_family() -> String {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .expect("os-release");
    let field = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .map(|value| value.trim_matches('"').to_ascii_lowercase())
            .unwrap_or_default()
    };
    let names = format!("{} {}", field("ID"), field("ID_LIKE"));
    if names
        .split_whitespace()
        .any(|n| n == "debian" || n == "ubuntu")
    {
        "Debian".to_owned()
    } else if names
        .split_whitespace()
        .any(|n| ["rhel", "fedora", "centos"].contains(&n))
    {
        "RedHat".to_owned()
    } else {
        let id = field("ID");
        let mut chars = id.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default()
    }
}

#[test]
fn a_control_repository_with_modules_hiera_and_templates_converges() {
    let machine = Machine::new();
    let files = machine.files_dir();
    // Inside the directory the test policy grants `file`, which reads the module's
    // `source` file from there.
    let repo = machine.root().join("files/control");
    let family = os_family();
    write(
        &repo,
        "environment.conf",
        "modulepath = site-modules:modules:$basemodulepath\n",
    );
    write(
        &repo,
        "hiera.yaml",
        r#"---
version: 5
defaults:
  datadir: data
  data_hash: yaml_data
hierarchy:
  - name: "Per node"
    path: "nodes/%{trusted.certname}.yaml"
  - name: "Per OS family"
    path: "os/%{facts.os.family}.yaml"
  - name: "Common"
    path: "common.yaml"
"#,
    );
    write(
        &repo,
        "data/common.yaml",
        &format!(
            "---\nlookup_options:\n  profile::base::packages:\n    merge: unique\nprofile::base::root: '{files}'\nmotd::message: 'Managed by wconverge'\nntp::servers:\n  - 0.pool.ntp.org\nprofile::base::packages: [vim]\n"
        ),
    );
    write(
        &repo,
        &format!("data/os/{family}.yaml"),
        "---\nntp::driftfile: /var/lib/ntp/drift\nprofile::base::packages: [apt-transport-https]\n",
    );
    write(
        &repo,
        "data/nodes/web1.example.com.yaml",
        "---\nntp::servers:\n  - ntp1.example.com\n  - ntp2.example.com\nprofile::base::packages: [nginx]\n",
    );
    write(
        &repo,
        "manifests/site.pp",
        "node /^web\\d+\\./ {\n  include role::web\n}\nnode default {\n  fail(\"no role for ${trusted['certname']}\")\n}\n",
    );
    write(
        &repo,
        "site-modules/role/manifests/web.pp",
        "class role::web {\n  include profile::base\n}\n",
    );
    write(
        &repo,
        "site-modules/profile/manifests/base.pp",
        r#"class profile::base (
  Stdlib::Absolutepath $root,
  Array[String, 1] $packages,
) {
  class { 'ntp': config => "${root}/ntp.conf" }
  class { 'motd': path => "${root}/motd" }
  $list = join(sort($packages), "\n")
  file { "${root}/packages":
    ensure  => file,
    content => "${list}\n",
  }
}
"#,
    );
    // A module in Puppet's params pattern, with a template and a file of its own.
    write(
        &repo,
        "modules/ntp/manifests/params.pp",
        "class ntp::params {\n  $driftfile = '/var/lib/ntp/ntp.drift'\n  $servers = []\n}\n",
    );
    write(
        &repo,
        "modules/ntp/manifests/init.pp",
        r#"class ntp (
  Stdlib::Absolutepath $config,
  Array[Stdlib::Host] $servers = $ntp::params::servers,
  String $driftfile = $ntp::params::driftfile,
) inherits ntp::params {
  contain ntp::config
}
"#,
    );
    write(
        &repo,
        "modules/ntp/manifests/config.pp",
        r#"class ntp::config inherits ntp {
  file { $config:
    ensure  => file,
    mode    => '0644',
    content => epp('ntp/ntp.conf.epp', { 'servers' => $servers, 'driftfile' => $driftfile }),
  }
  file { "${config}.keys":
    ensure => file,
    source => 'puppet:///modules/ntp/keys',
  }
  file { "${config}.tickers":
    ensure  => file,
    content => template('ntp/step-tickers.erb'),
  }
}
"#,
    );
    // An ERB template, as modules written for Puppet 3 have them: the class's variables
    // as `@name`, another class's through `scope`, and a function.
    write(
        &repo,
        "modules/ntp/templates/step-tickers.erb",
        "# <%= @module_name %>\n<% @servers.each do |server| -%>\n<%= server %>\n<% end -%>\n<%= scope['ntp::driftfile'] %> <%= scope.call_function('upcase', ['ok']) %>\n",
    );
    write(
        &repo,
        "modules/ntp/templates/ntp.conf.epp",
        "<%- | Array[String] $servers, String $driftfile | -%>\n# ${module_name} on <%= $facts['os']['family'] %>\ndriftfile <%= $driftfile %>\n<% $servers.each |$server| { -%>\n<%= ntp::server_line($server) %>\n<% } -%>\n",
    );
    // A function of the module, in the language, named only inside the template.
    write(
        &repo,
        "modules/ntp/functions/server_line.pp",
        "function ntp::server_line(Stdlib::Host $server) >> String {\n  \"server ${server} iburst\"\n}\n",
    );
    write(&repo, "modules/ntp/files/keys", "1 M secret\n");
    write(
        &repo,
        "modules/motd/manifests/init.pp",
        "class motd (String $message, Stdlib::Absolutepath $path) {\n  file { $path: content => inline_epp(\"<%= \\$message %> (<%= \\$trusted['certname'] %>)\\n\", { 'message' => $message }) }\n}\n",
    );
    let policy = machine.policy("");
    let site = repo.join("manifests/site.pp");
    let apply = |node: &str| {
        machine.run(&[
            "apply",
            site.to_str().expect("utf-8"),
            "--node",
            node,
            "--policy",
            policy.to_str().expect("utf-8"),
        ])
    };
    let run = apply("web1.example.com");
    assert_eq!(run.code, 2, "{run:#?}");
    let read = |name: &str| std::fs::read_to_string(machine.file(name)).expect(name);
    assert_eq!(
        read("ntp.conf"),
        format!(
            "# ${{module_name}} on {family}\ndriftfile /var/lib/ntp/drift\nserver ntp1.example.com iburst\nserver ntp2.example.com iburst\n"
        ),
        "the node's servers, the family's drift file: {run:#?}"
    );
    assert_eq!(read("ntp.conf.keys"), "1 M secret\n");
    assert_eq!(
        read("ntp.conf.tickers"),
        "# ntp\nntp1.example.com\nntp2.example.com\n/var/lib/ntp/drift OK\n"
    );
    assert_eq!(read("motd"), "Managed by wconverge (web1.example.com)\n");
    assert_eq!(read("packages"), "apt-transport-https\nnginx\nvim\n");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(machine.file("ntp.conf"))
            .expect("stat")
            .permissions(),
    );
    assert_eq!(mode & 0o7777, 0o644);

    // Converged: the second run changes nothing.
    let again = apply("web1.example.com");
    assert_eq!(again.code, 0, "{again:#?}");

    // Another node: no node data, the common servers.
    let other = apply("web2.example.com");
    assert_eq!(other.code, 2, "{other:#?}");
    assert!(read("ntp.conf").contains("server 0.pool.ntp.org iburst\n"));
    assert!(!read("ntp.conf").contains("ntp1"));

    // A node no definition gives a role fails, saying why, and changes nothing.
    let before = read("ntp.conf");
    let refused = apply("db1.example.com");
    assert_eq!(refused.code, 1, "{refused:#?}");
    assert!(
        refused.stderr.contains("no role for db1.example.com"),
        "{refused:#?}"
    );
    assert_eq!(read("ntp.conf"), before);
}
