//! Manifests through the binary: `compile`, `validate`, `graph` and `apply` of `.wcv`
//! files, checking order and effects on real files and processes.

use crate::support::Machine;
use std::path::Path;

fn path(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(file).unwrap_or_else(|error| panic!("cannot read {file}: {error}"))
}

#[test]
fn manifest_applies_in_relationship_order_and_then_changes_nothing() {
    let machine = Machine::new();
    // Declared in the reverse of the order the relationships ask for.
    let manifest = machine.manifest(
        "site.wcv",
        r#"
$log = '@FILES@/order.log'
define step($after = undef) {
  exec { "step ${title}":
    command => "/bin/echo ${title} >> ${log}",
    creates => "@FILES@/done-${title}",
  }
  file { "@FILES@/done-${title}":
    ensure  => file,
    content => "${title}\n",
    require => Exec["step ${title}"],
  }
}
class last {
  step { 'four': }
}
step { 'three': }
step { 'two': }
step { 'one': }
include last
Step['one'] -> Step['two'] -> Step['three']
Step['three'] -> Class['last']
"#,
    );
    let policy = machine.policy("");
    let first = machine.apply(&manifest, &policy, &[]);
    assert_eq!(first.code, 2, "{first:#?}");
    assert_eq!(read(&machine.file("order.log")), "one\ntwo\nthree\nfour\n");
    assert_eq!(read(&machine.file("done-four")), "four\n");
    let second = machine.apply(&manifest, &policy, &[]);
    assert_eq!(second.code, 0, "{second:#?}");
    assert_eq!(read(&machine.file("order.log")), "one\ntwo\nthree\nfour\n");
}

#[test]
fn notify_arrow_refreshes_the_target_only_when_the_source_changes() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
file { '@FILES@/config': ensure => file, content => "port = 80\n" }
~> exec { 'reload':
  command     => '/bin/echo reloaded >> @FILES@/reloads',
  refreshonly => true,
}
"#,
    );
    let policy = machine.policy("");
    let first = machine.apply(&manifest, &policy, &[]);
    assert_eq!(first.code, 2, "{first:#?}");
    assert!(
        first.stdout.contains("Exec[reload]: refreshed"),
        "{first:#?}"
    );
    assert_eq!(read(&machine.file("reloads")), "reloaded\n");
    assert_eq!(machine.apply(&manifest, &policy, &[]).code, 0);
    assert_eq!(read(&machine.file("reloads")), "reloaded\n");
}

#[test]
fn defaults_collectors_and_overrides_shape_what_is_applied() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        r#"
File { mode => '0600' }
@file { ['@FILES@/a', '@FILES@/b']: ensure => file, content => "virtual\n", tag => 'keys' }
@file { '@FILES@/never': ensure => file }
File <| tag == 'keys' |> { content => "collected\n" }
"#,
    );
    let policy = machine.policy("");
    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 2, "{run:#?}");
    for name in ["a", "b"] {
        assert_eq!(read(&machine.file(name)), "collected\n");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(machine.file(name))
                .expect("file")
                .permissions(),
        );
        assert_eq!(mode & 0o7777, 0o600);
    }
    assert!(!Path::new(&machine.file("never")).exists());
}

#[test]
fn compile_prints_the_catalog_with_sources_tags_and_declared_edges() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        "class web {\n  notify { 'hello': message => 'hi' }\n}\ninclude web\nnotify { 'after': }\nClass['web'] -> Notify['after']\n",
    );
    let policy = machine.policy("");
    let run = machine.run(&[
        "compile",
        path(&manifest),
        "--policy",
        path(&policy),
        "--node",
        "web1",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    let catalog = run.json();
    assert_eq!(catalog["node"], "web1");
    let hello = &catalog["resources"][0];
    assert_eq!(hello["type"], "notify");
    assert_eq!(hello["attributes"]["message"], "hi");
    assert_eq!(
        hello["metaparams"]["tags"],
        serde_json::json!(["notify", "web"])
    );
    assert_eq!(hello["source"]["file"], path(&manifest));
    assert_eq!(hello["source"]["line"], 2);
    let edge = &catalog["edges"][0];
    assert_eq!(edge["source"], "Notify[hello]");
    assert_eq!(edge["target"], "Notify[after]");
    assert_eq!(edge["kind"], "before");
    assert_eq!(edge["declared"]["line"], 6);

    // The printed catalog applies as it is.
    let catalog_path = machine.root().join("compiled.json");
    std::fs::write(&catalog_path, &run.stdout).expect("catalog written");
    let applied = machine.apply(&catalog_path, &policy, &[]);
    assert_eq!(applied.code, 2, "{applied:#?}");
}

#[test]
fn a_syntax_error_changes_nothing_and_points_at_the_line() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        "file { '@FILES@/created': ensure => file }\nnotify { 'x': message => 'a' 'b' }\nnotify { 'y' }\n",
    );
    let policy = machine.policy("");
    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(!Path::new(&machine.file("created")).exists());
    let manifest_name = path(&manifest);
    assert!(
        run.stderr.contains(&format!("--> {manifest_name}:2:30")),
        "{run:#?}"
    );
    assert!(
        run.stderr.contains(&format!("--> {manifest_name}:3:14")),
        "{run:#?}"
    );
    assert!(
        run.stderr
            .contains("2 | notify { 'x': message => 'a' 'b' }"),
        "{run:#?}"
    );
    assert!(
        run.stderr
            .contains("error: 2 errors in the manifests; nothing was compiled or changed"),
        "{run:#?}"
    );
    assert!(run.stdout.is_empty(), "{run:#?}");
}

#[test]
fn schema_problems_name_the_manifest_line() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        "\nfile { '@FILES@/m': ensure => file, mode => 644 }\n",
    );
    let policy = machine.policy("");
    let run = machine.run(&["validate", path(&manifest), "--policy", path(&policy)]);
    assert_eq!(run.code, 1, "{run:#?}");
    // As the manifests' own diagnostics: the place, then its line with a marker.
    assert!(
        run.stderr
            .contains(&format!(" --> {}:2:8\n", path(&manifest))),
        "{run:#?}"
    );
    assert!(run.stderr.contains("2 | file { '"), "{run:#?}");
    assert!(run.stderr.contains("mode"), "{run:#?}");
}

#[test]
fn node_definitions_follow_the_node_flag() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        "node 'web1' { notify { 'web': } }\nnode /^db\\d+$/ { notify { 'db': } }\n",
    );
    let policy = machine.policy("");
    let compile = |node: &str| {
        machine.run(&[
            "compile",
            path(&manifest),
            "--policy",
            path(&policy),
            "--node",
            node,
        ])
    };
    assert_eq!(compile("web1").json()["resources"][0]["title"], "web");
    assert_eq!(compile("db12").json()["resources"][0]["title"], "db");
    let unmatched = compile("mail");
    assert_eq!(unmatched.code, 1);
    assert!(
        unmatched
            .stderr
            .contains("no node definition matches the node `mail`"),
        "{unmatched:#?}"
    );
}

#[test]
fn several_manifests_compile_together_in_order() {
    let machine = Machine::new();
    let first = machine.manifest("base.wcv", "$greeting = 'hi'\nclass motd { file { '@FILES@/motd': ensure => file, content => \"${::greeting}\\n\" } }\n");
    let second = machine.manifest("site.wcv", "include motd\n");
    let policy = machine.policy("");
    let run = machine.run(&[
        "apply",
        path(&first),
        path(&second),
        "--policy",
        path(&policy),
    ]);
    assert_eq!(run.code, 2, "{run:#?}");
    assert_eq!(read(&machine.file("motd")), "hi\n");
    let mixed = machine.run(&[
        "apply",
        path(&first),
        path(&policy),
        "--policy",
        path(&policy),
    ]);
    assert_eq!(mixed.code, 1);
    assert!(mixed.stderr.contains("not both"), "{mixed:#?}");
}

#[test]
fn graph_and_validate_accept_manifests() {
    let machine = Machine::new();
    let manifest = machine.manifest("site.wcv", "notify { 'a': } -> notify { 'b': }\n");
    let policy = machine.policy("");
    let graph = machine.run(&[
        "graph",
        path(&manifest),
        "--policy",
        path(&policy),
        "--format",
        "json",
    ]);
    assert_eq!(graph.code, 0, "{graph:#?}");
    assert!(
        graph.stdout.contains("Notify[a]") && graph.stdout.contains("Notify[b]"),
        "{graph:#?}"
    );
    let dot = machine.run(&["graph", path(&manifest), "--policy", path(&policy)]);
    assert!(
        dot.stdout.contains("\"Notify[a]\" -> \"Notify[b]\""),
        "{dot:#?}"
    );
    let validate = machine.run(&["validate", path(&manifest), "--policy", path(&policy)]);
    assert_eq!(validate.code, 0, "{validate:#?}");
    assert!(
        validate.stdout.contains("valid, 2 resources"),
        "{validate:#?}"
    );
}

#[test]
fn one_file_under_two_titles_is_refused() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        "file { 'config': path => '@FILES@/app.conf', content => \"one\\n\" }\nfile { '@FILES@/app.conf': content => \"two\\n\" }\n",
    );
    let policy = machine.policy("");
    let run = machine.apply(&manifest, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    // Refused when compiling: the title of one is the `path` of the other (Puppet's
    // "Cannot alias").
    assert!(
        run.stderr.contains(&format!("{}:2:8", path(&manifest)))
            && run.stderr.contains(&format!(
                "`{}` already identifies `File['config']`, by its title or its `path`",
                machine.file("app.conf")
            )),
        "{run:#?}"
    );
    assert!(!Path::new(&machine.file("app.conf")).exists());
}

#[test]
fn two_execs_may_run_the_same_command() {
    let machine = Machine::new();
    let manifest = machine.manifest(
        "site.wcv",
        "exec { 'reload after a': command => '/bin/true', refreshonly => true }\nexec { 'reload after b': command => '/bin/true', refreshonly => true }\n",
    );
    let policy = machine.policy("");
    let run = machine.run(&["validate", path(&manifest), "--policy", path(&policy)]);
    assert_eq!(run.code, 0, "{run:#?}");
}

/// A control repository used with relative paths only, as a Puppet user does: from its
/// root (`validate manifests/site.wcv`) and from `manifests/` (`validate site.wcv`), the
/// modules and a `puppet:///modules/` source are found; `--policy` and `--state-dir`
/// are relative to the working directory, not to `/`.
#[test]
fn a_control_repository_works_with_relative_paths_from_its_root_and_manifests() {
    let machine = Machine::new();
    let repo = machine.root().join("repo");
    std::fs::create_dir_all(repo.join("manifests")).expect("manifests/");
    std::fs::create_dir_all(repo.join("modules/motd/manifests")).expect("module");
    std::fs::create_dir_all(repo.join("modules/motd/files")).expect("files");
    std::fs::write(repo.join("modules/motd/files/motd"), "hello\n").expect("file");
    let target = machine.file("motd");
    std::fs::write(
        repo.join("modules/motd/manifests/init.pp"),
        format!(
            "class motd {{ file {{ '{target}': source => 'puppet:///modules/motd/motd' }} }}\n"
        ),
    )
    .expect("class");
    std::fs::write(repo.join("manifests/site.wcv"), "include motd\n").expect("site");
    std::fs::write(
        repo.join("policy.toml"),
        format!(
            "[plugins.file]\nsource = \"builtin\"\ndirectories = [{{ path = \"{}\", access = \"read-write\" }}, {{ path = \"{}\", access = \"read\" }}]\n",
            machine.files_dir(),
            repo.display()
        ),
    )
    .expect("policy");
    let wconverge = |dir: &std::path::Path, args: &[&str]| {
        let mut command = machine.command(crate::support::WCONVERGE);
        command
            .current_dir(dir)
            .env_remove("WCONVERGE_STATE_DIR")
            .args(args);
        crate::support::Run::of(&mut command)
    };
    for (dir, manifest) in [
        (repo.clone(), "manifests/site.wcv"),
        (repo.join("manifests"), "site.wcv"),
    ] {
        let run = wconverge(&dir, &["validate", manifest]);
        assert_eq!(run.code, 0, "from {}: {run:#?}", dir.display());
    }
    let run = wconverge(
        &repo,
        &[
            "apply",
            "manifests/site.wcv",
            "--policy",
            "policy.toml",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(run.code, 2, "{run:#?}");
    assert_eq!(std::fs::read_to_string(&target).expect("motd"), "hello\n");
    assert!(
        repo.join("state").is_dir(),
        "the state directory is where it was named"
    );
    let again = wconverge(
        &repo.join("manifests"),
        &[
            "apply",
            "site.wcv",
            "--policy",
            "../policy.toml",
            "--state-dir",
            "../state",
        ],
    );
    assert_eq!(again.code, 0, "{again:#?}");
}
