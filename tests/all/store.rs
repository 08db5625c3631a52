//! The store nodes share. Three nodes (`--node`) of one machine directory
//! share a store: the backends export their `@@file`, a load-balancer node collects
//! them, a deactivated backend drops out of the next collection, and reports and facts
//! are listed. On the embedded SQLite store and on a real PostgreSQL server.

use crate::pg::Postgres;
use crate::support::{Machine, Run};
use std::path::Path;
use wconverge_catalog::{Attributes, Export, ExportQuery, Value};
use wconverge_store::{Location, Store};

/// Backends `web1` and `web2` export a file in `files/lb/` tagged `lb_backend`;
/// `lb` collects them. `db1` exports one outside `files/` (`../outside/db1`).
const SITE: &str = r#"
node 'web1', 'web2' {
  @@file { "@FILES@/lb/${clientcert}":
    content => "server ${clientcert}\n",
    tag     => 'lb_backend',
  }
  @@file { "@FILES@/lb/ignored-${clientcert}":
    content => "not collected\n",
  }
}
node 'db1' {
  @@file { "@FILES@/../outside/db1":
    content => "db1\n",
    tag     => 'lb_backend',
  }
}
node 'lb' {
  file { "@FILES@/lb": ensure => directory }
  File <<| tag == 'lb_backend' and title != '@FILES@/lb/web9' |>>
}
"#;

/// `wconverge ARGS... --policy POLICY --store STORE`, checked to exit with `code`.
fn run(machine: &Machine, store: &str, code: i32, args: &[&str]) -> Run {
    let mut all = args.to_vec();
    all.extend(["--store", store]);
    let run = machine.run(&all);
    assert_eq!(run.code, code, "wconverge {all:?}:\n{run:#?}");
    run
}

fn compile(machine: &Machine, store: &str, node: &str) -> Run {
    let site = machine.root().join("site.wcv");
    let policy = machine.root().join("policy.toml");
    run(
        machine,
        store,
        0,
        &[
            "compile",
            site.to_str().expect("utf-8"),
            "--node",
            node,
            "--policy",
            policy.to_str().expect("utf-8"),
        ],
    )
}

/// The test policy, importing from other nodes the files they export into `files/lb`.
fn fleet_policy(machine: &Machine) -> std::path::PathBuf {
    machine.policy(&format!(
        "[imports]\ntypes = [\"file\"]\ndirectories = [\"{}/lb\"]\n",
        machine.files_dir()
    ))
}

/// The titles of the `file` resources of a catalog (`compile`'s output).
fn files_of(compiled: &Run) -> Vec<String> {
    let mut titles: Vec<String> = compiled.json()["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter(|resource| resource["type"] == "file")
        .map(|resource| resource["title"].as_str().expect("title").to_owned())
        .collect();
    titles.sort();
    titles
}

/// The scenario on `store`: every acceptance point of the store that holds for both
/// back ends.
fn three_nodes_share(machine: &Machine, store: &str) {
    machine.manifest("site.wcv", SITE);
    let policy = fleet_policy(machine);
    let lb_dir = machine.file("lb");
    let site = machine.root().join("site.wcv");
    for node in ["web1", "web2"] {
        compile(machine, store, node);
    }
    // The load balancer collects both backends' tagged exports, not the untagged ones.
    let collected = files_of(&compile(machine, store, "lb"));
    assert_eq!(
        collected,
        [
            lb_dir.clone(),
            format!("{lb_dir}/web1"),
            format!("{lb_dir}/web2")
        ]
    );
    let apply = |node: &str, code: i32| {
        run(
            machine,
            store,
            code,
            &[
                "apply",
                site.to_str().expect("utf-8"),
                "--node",
                node,
                "--policy",
                policy.to_str().expect("utf-8"),
            ],
        )
    };
    let applied = apply("lb", 2);
    assert_eq!(
        std::fs::read_to_string(format!("{lb_dir}/web2")).expect("collected file"),
        "server web2\n",
        "{applied:#?}"
    );
    assert!(
        applied
            .stdout
            .contains(&format!("File[{lb_dir}/web2] (exported by node web2): ")),
        "a collected resource is marked with its node: {applied:#?}"
    );
    // A node's exports are its own: compiling `lb` twice collects nothing twice, and
    // an export of `lb` itself would come from its compile, not the store.
    assert_eq!(files_of(&compile(machine, store, "lb")), collected);
    // A backend deactivated drops out of the next collection.
    let said = run(machine, store, 0, &["store", "deactivate", "web2"]);
    assert!(said.stdout.contains("node `web2` deactivated"), "{said:#?}");
    assert_eq!(
        files_of(&compile(machine, store, "lb")),
        [lb_dir.clone(), format!("{lb_dir}/web1")]
    );
    let listed = run(machine, store, 0, &["store", "nodes"]).stdout;
    assert!(
        listed.contains("web2  exports=2") && listed.contains("deactivated="),
        "{listed}"
    );
    // It is back once it compiles again.
    compile(machine, store, "web2");
    assert_eq!(files_of(&compile(machine, store, "lb")), collected);
    // Reports: the lb's run, listed and shown; another run of a backend.
    apply("web1", 0);
    let reports = run(machine, store, 0, &["reports", "--format", "json"]).json();
    let reports = reports.as_array().expect("a list");
    assert_eq!(reports.len(), 2, "{reports:#?}");
    assert_eq!(reports[0]["node"], "web1");
    assert_eq!(reports[1]["node"], "lb");
    assert_eq!(reports[1]["status"], "changed");
    assert_eq!(reports[1]["mode"], "apply");
    assert_eq!(reports[1]["changed"], 3);
    assert!(reports[1]["duration_ms"].as_f64().is_some(), "{reports:#?}");
    let lb_only = run(
        machine,
        store,
        0,
        &["reports", "--node", "lb", "--since", "1h"],
    )
    .stdout;
    // A heading, then the one report of lb with its figures.
    let lines: Vec<Vec<&str>> = lb_only
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 2, "{lb_only}");
    assert_eq!(
        lines[0][..4],
        ["ID", "ENDED", "NODE", "STATUS"],
        "{lb_only}"
    );
    assert_eq!(
        lines[1][2..7],
        ["lb", "changed", "apply", "3", "3"],
        "{lb_only}"
    );
    let id = reports[1]["id"].to_string();
    let shown = run(machine, store, 0, &["reports", "show", &id]).json();
    assert_eq!(shown["node"], "lb");
    assert_eq!(shown["summary"]["changed"], 3);
    let resources = shown["resources"].as_array().expect("resources");
    assert!(
        resources.iter().any(
            |resource| resource["resource"] == format!("File[{lb_dir}/web2]")
                && resource["source"]["file"]
                    .as_str()
                    .is_some_and(|file| file.starts_with("node web2: "))
        ),
        "{shown:#}"
    );
    let missing = run(machine, store, 1, &["reports", "show", "999999"]);
    assert!(missing.stderr.contains("no report 999999"), "{missing:#?}");
    // Facts: a run against a named store sends them; `facts --node` reads them back.
    let facts = run(
        machine,
        store,
        0,
        &["facts", "--raw", "--node", "lb", "--format", "json"],
    )
    .json();
    assert!(facts["identity"].is_array(), "{facts:#}");
    let none = run(machine, store, 1, &["facts", "--node", "web2"]);
    assert!(none.stderr.contains("no facts of node `web2`"), "{none:#?}");
}

#[test]
fn three_nodes_share_a_sqlite_store() {
    let machine = Machine::new();
    let store = format!(
        "sqlite:{}",
        machine.root().join("state/fleet.sqlite").display()
    );
    three_nodes_share(&machine, &store);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(machine.root().join("state/fleet.sqlite"))
        .expect("the store file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn three_nodes_share_a_postgresql_store() {
    let postgres = Postgres::start();
    let machine = Machine::new();
    three_nodes_share(&machine, &postgres.url());
    // The schema is PostgreSQL's: one version row, the exports in their tables.
    assert_eq!(postgres.psql("SELECT version FROM wconverge_schema"), "3");
    assert_eq!(
        postgres.psql("SELECT count(*) FROM exports WHERE node = 'web1'"),
        "2"
    );
    // A store a newer wconverge migrated is refused, not written.
    postgres.psql("UPDATE wconverge_schema SET version = 99");
    let refused = run(&machine, &postgres.url(), 1, &["reports"]);
    assert!(
        refused
            .stderr
            .contains("schema version 99, newer than this wconverge knows (3)")
            && refused.stderr.contains("upgrade wconverge"),
        "{refused:#?}"
    );
}

#[test]
fn a_collected_file_outside_the_local_policy_is_refused_at_validation() {
    let machine = Machine::new();
    machine.manifest("site.wcv", SITE);
    let policy = fleet_policy(&machine);
    let store = format!(
        "sqlite:{}",
        machine.root().join("state/fleet.sqlite").display()
    );
    compile(&machine, &store, "db1");
    let outside = machine.root().join("outside");
    std::fs::create_dir(&outside).expect("outside/");
    let site = machine.root().join("site.wcv");
    let refused = run(
        &machine,
        &store,
        1,
        &[
            "apply",
            site.to_str().expect("utf-8"),
            "--node",
            "lb",
            "--policy",
            policy.to_str().expect("utf-8"),
        ],
    );
    let said = refused.all_output();
    assert!(said.contains("/outside/db1"), "{said}");
    assert!(
        said.contains("node db1"),
        "the export's origin is named: {said}"
    );
    assert!(
        !outside.join("db1").exists() && !Path::new(&machine.file("lb")).exists(),
        "nothing ran: {said}"
    );
}

#[test]
fn an_unreachable_store_fails_a_collecting_compile_and_warns_otherwise() {
    let machine = Machine::new();
    machine.manifest("site.wcv", SITE);
    fleet_policy(&machine);
    let nowhere = format!(
        "postgres://wconverge@/postgres?host={}",
        machine.root().join("no-server").display()
    );
    let site = machine.root().join("site.wcv");
    let policy = machine.root().join("policy.toml");
    let args = |node: &'static str| {
        vec![
            "compile".to_owned(),
            site.display().to_string(),
            "--node".to_owned(),
            node.to_owned(),
            "--policy".to_owned(),
            policy.display().to_string(),
        ]
    };
    let lb = args("lb");
    let failed = run(
        &machine,
        &nowhere,
        1,
        &lb.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(
        failed
            .stderr
            .contains("cannot collect the exported resources of other nodes"),
        "{failed:#?}"
    );
    assert!(
        failed.stderr.contains("site.wcv:"),
        "the collector is named: {failed:#?}"
    );
    assert!(failed.stdout.is_empty(), "no catalog: {failed:#?}");
    let web1 = args("web1");
    let warned = run(
        &machine,
        &nowhere,
        0,
        &web1.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(
        warned
            .stderr
            .contains("2 exported resources were not stored"),
        "{warned:#?}"
    );
}

#[test]
fn a_report_that_cannot_be_stored_is_spooled_and_sent_by_the_next_run() {
    let machine = Machine::new();
    let policy = fleet_policy(&machine);
    let catalog = machine.catalog(serde_json::json!([
        { "type": "file", "title": machine.file("motd"), "attributes": { "content": "hi\n" } }
    ]));
    let postgres = Postgres::start();
    let nowhere = format!(
        "postgres://wconverge@/postgres?host={}",
        machine.root().join("no-server").display()
    );
    let first = machine.apply(&catalog, &policy, &["--store", &nowhere]);
    assert_eq!(first.code, 2, "{first:#?}");
    assert!(first.stderr.contains("was not stored"), "{first:#?}");
    let spool = machine.root().join("state/spool");
    let spooled: Vec<_> = std::fs::read_dir(&spool).expect("spool").collect();
    assert_eq!(spooled.len(), 1, "{first:#?}");
    // A spooled file the store will never take is set aside; it holds up no other.
    std::fs::write(spool.join("000000000001-1.json"), "not a report").expect("garbage");
    let second = machine.apply(&catalog, &policy, &["--store", &postgres.url()]);
    assert_eq!(second.code, 0, "{second:#?}");
    assert!(second.stderr.contains("it is set aside"), "{second:#?}");
    let left: Vec<String> = std::fs::read_dir(&spool)
        .expect("spool")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(left, ["000000000001-1.bad"]);
    let statuses = postgres.psql("SELECT string_agg(status, ',' ORDER BY at, id) FROM reports");
    assert_eq!(statuses, "changed,unchanged");
    // Retention: the node's report older than `--keep-reports` goes when it stores the
    // next; another node's stays (each node prunes its own).
    postgres.psql(
        "INSERT INTO reports (node, at, status, body) SELECT node, 1000, 'changed', '{}' \
         FROM reports LIMIT 1",
    );
    postgres.psql(
        "INSERT INTO reports (node, at, status, body) VALUES ('other', 1000, 'changed', '{}')",
    );
    let third = machine.apply(
        &catalog,
        &policy,
        &["--store", &postgres.url(), "--keep-reports", "1"],
    );
    assert_eq!(third.code, 0, "{third:#?}");
    assert_eq!(
        postgres.psql("SELECT node FROM reports WHERE at = 1000"),
        "other"
    );
    assert_eq!(postgres.psql("SELECT count(*) FROM reports"), "4");
}

#[test]
fn a_node_compiles_centrally_from_its_stored_facts() {
    let machine = Machine::new();
    let policy = fleet_policy(&machine);
    let store_path = machine.root().join("state/fleet.sqlite");
    let store = format!("sqlite:{}", store_path.display());
    let manifest = machine.manifest(
        "release.wcv",
        "file { '@FILES@/release': content => $facts['os']['release']['full'] }\n",
    );
    // The node has sent no facts yet.
    let args = [
        "compile",
        manifest.to_str().expect("utf-8"),
        "--node",
        "far-away",
        "--facts-from-store",
        "--policy",
        policy.to_str().expect("utf-8"),
    ];
    let none = run(&machine, &store, 1, &args);
    assert!(
        none.stderr.contains("no facts of node `far-away`"),
        "{none:#?}"
    );
    // Facts as the node would send them, from another distribution than this machine's.
    std::fs::create_dir_all(machine.root().join("state")).expect("state/");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            machine.root().join("state"),
            std::fs::Permissions::from_mode(0o700),
        )
        .expect("chmod");
    }
    Store::open(&Location::Sqlite(store_path))
        .expect("store")
        .store_facts(
            "far-away",
            r#"{"os": [{"family": "redhat", "name": "rocky", "release": "9.3"}]}"#,
        )
        .expect("facts");
    let compiled = run(&machine, &store, 0, &args).json();
    assert_eq!(compiled["node"], "far-away");
    assert_eq!(compiled["resources"][0]["attributes"]["content"], "9.3");
}

/// Twenty runs of one node at once, each replacing its exports with one of two sets,
/// while another connection collects: every collection sees one whole set, never a mix
/// or half of one.
#[test]
fn concurrent_runs_never_interleave_a_nodes_exports() {
    let postgres = Postgres::start();
    let location = Location::parse(&postgres.url(), None, &|_| None).expect("url");
    let sets: Vec<Vec<Export>> = ["a", "b"]
        .iter()
        .map(|set| {
            (0..10)
                .map(|n| Export {
                    type_name: "file".to_owned(),
                    title: format!("/{set}/{n}"),
                    tags: vec!["file".to_owned(), "backend".to_owned()],
                    attributes: Attributes(vec![(
                        "content".to_owned(),
                        Value::String((*set).to_owned()),
                    )]),
                    source: None,
                })
                .collect()
        })
        .collect();
    Store::open(&location)
        .expect("store")
        .replace_exports("web1", &sets[0])
        .expect("first");
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..20)
            .map(|n| {
                let location = location.clone();
                let sets = &sets;
                scope.spawn(move || {
                    let store = Store::open(&location).expect("store");
                    for round in 0..5 {
                        store
                            .replace_exports("web1", &sets[(n + round) % 2])
                            .expect("replace");
                    }
                })
            })
            .collect();
        let reader = scope.spawn(|| {
            let store = Store::open(&location).expect("store");
            let query = ExportQuery::Compare {
                attribute: "tag".to_owned(),
                equal: true,
                value: Value::String("backend".to_owned()),
            };
            let mut reads = 0;
            let mut during = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                let found = store.collect("file", &query, "lb").expect("collect");
                let titles: Vec<String> = found.into_iter().map(|c| c.export.title).collect();
                let whole = (0..10)
                    .map(|n| format!("/{}/{n}", &titles[0][1..2]))
                    .collect::<Vec<_>>();
                let mut sorted = titles.clone();
                sorted.sort();
                let mut expected = whole.clone();
                expected.sort();
                assert_eq!(sorted, expected, "a collection saw a mix: {titles:?}");
                // Made while writers were still replacing the sets.
                during += usize::from(!done.load(std::sync::atomic::Ordering::Relaxed));
                reads += 1;
                assert!(reads < 100_000, "the writers never finished");
            }
            (reads, during)
        });
        for writer in writers {
            writer.join().expect("a writer");
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (reads, during) = reader.join().expect("the reader");
        // Collections ran while the sets were being replaced.
        assert!(
            during > 0,
            "none of {reads} collections ran while the writers did"
        );
    });
    assert_eq!(
        postgres.psql("SELECT count(*) FROM exports WHERE node = 'web1'"),
        "10"
    );
    // Each export is found by its title, its two tags and its content.
    assert_eq!(postgres.psql("SELECT count(*) FROM export_values"), "40");
}

#[test]
fn postgresql_over_tls_checks_the_server_and_presents_a_client_certificate() {
    let (postgres, tls) = Postgres::start_tls();
    let machine = Machine::new();
    let policy = fleet_policy(&machine);
    let catalog = machine.catalog(serde_json::json!([]));
    let url = |ca: &Path, client: bool| {
        let mut url = format!("{}?sslrootcert={}", postgres.tcp_url(), ca.display());
        if client {
            url.push_str(&format!(
                "&sslcert={}&sslkey={}",
                tls.client_cert.display(),
                tls.client_key.display()
            ));
        }
        url
    };
    let good = machine.apply(&catalog, &policy, &["--store", &url(&tls.ca, true)]);
    assert_eq!(good.code, 0, "{good:#?}");
    assert!(!good.stderr.contains("warning"), "{good:#?}");
    assert_eq!(postgres.psql("SELECT count(*) FROM reports"), "1");
    // A server whose certificate the given CA did not sign is refused.
    let wrong_ca = machine.apply(&catalog, &policy, &["--store", &url(&tls.other_ca, true)]);
    assert!(
        wrong_ca.stderr.contains("was not stored") && wrong_ca.stderr.contains("certificate"),
        "{wrong_ca:#?}"
    );
    // The server requires a client certificate.
    let no_client = machine.apply(&catalog, &policy, &["--store", &url(&tls.ca, false)]);
    assert!(
        no_client.stderr.contains("was not stored"),
        "{no_client:#?}"
    );
    // Without TLS, the server's rules refuse the connection.
    let plain = machine.apply(&catalog, &policy, &["--store", &postgres.tcp_url()]);
    assert!(plain.stderr.contains("was not stored"), "{plain:#?}");
    // The refused runs' reports wait in the spool; the next good run sends them.
    let again = machine.apply(&catalog, &policy, &["--store", &url(&tls.ca, true)]);
    assert_eq!(again.code, 0, "{again:#?}");
    assert_eq!(postgres.psql("SELECT count(*) FROM reports"), "5");
}

#[test]
fn a_password_on_the_command_line_is_refused() {
    let machine = Machine::new();
    let policy = fleet_policy(&machine);
    let catalog = machine.catalog(serde_json::json!([]));
    let refused = machine.apply(
        &catalog,
        &policy,
        &["--store", "postgres://wconverge:hunter2@db.example/fleet"],
    );
    assert_eq!(refused.code, 1, "{refused:#?}");
    assert!(
        refused.stderr.contains("store_password_file"),
        "{refused:#?}"
    );
    assert!(!refused.stderr.contains("hunter2"), "{refused:#?}");
}

/// The config file names the store and where its password is; a password also comes
/// from PGPASSWORD or a pgpass file, never from the command line.
#[test]
fn the_config_file_names_the_store_and_the_password_comes_from_a_file() {
    use std::os::unix::fs::PermissionsExt;
    let postgres = Postgres::start_with_password("node1", "s3cret-pw");
    let machine = Machine::new();
    let policy = fleet_policy(&machine);
    let catalog = machine.catalog(serde_json::json!([]));
    let url = format!(
        "postgres://node1@/fleet?host={}",
        postgres.socket_dir().display()
    );
    let apply = |envs: &[(&str, &str)], args: &[&str]| {
        let mut command = machine.command(crate::support::WCONVERGE);
        command.args([
            "apply",
            catalog.to_str().expect("utf-8"),
            "--policy",
            policy.to_str().expect("utf-8"),
        ]);
        command.args(args);
        for (name, value) in envs {
            command.env(name, value);
        }
        Run::of(&mut command)
    };
    let private = |path: &Path, text: &str| {
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    };
    // No password: the server refuses, and the report waits in the spool.
    let refused = apply(&[], &["--store", &url]);
    assert!(refused.stderr.contains("was not stored"), "{refused:#?}");
    // The config file's store and password file.
    let password_file = machine.root().join("store.password");
    private(&password_file, "s3cret-pw\n");
    let config = machine.root().join("wconverge.conf");
    private(
        &config,
        &format!(
            "store = \"{url}\"\nstore_password_file = \"{}\"\nkeep_reports = 30\n",
            password_file.display()
        ),
    );
    let configured = apply(&[], &["--config", config.to_str().expect("utf-8")]);
    assert_eq!(configured.code, 0, "{configured:#?}");
    assert!(!configured.stderr.contains("warning"), "{configured:#?}");
    // The spooled report went too.
    assert_eq!(
        postgres.psql_in("fleet", "SELECT count(*) FROM reports"),
        "2"
    );
    // A pgpass file, matched on host (a socket is `localhost`), port, database, user.
    let pgpass = machine.root().join("pgpass");
    private(
        &pgpass,
        "otherhost:5432:*:node1:wrong\nlocalhost:5432:fleet:node1:s3cret-pw\n",
    );
    let from_pgpass = apply(
        &[("PGPASSFILE", pgpass.to_str().expect("utf-8"))],
        &["--store", &url],
    );
    assert_eq!(from_pgpass.code, 0, "{from_pgpass:#?}");
    assert!(!from_pgpass.stderr.contains("warning"), "{from_pgpass:#?}");
    let from_env = apply(&[("PGPASSWORD", "s3cret-pw")], &["--store", &url]);
    assert!(!from_env.stderr.contains("warning"), "{from_env:#?}");
    assert_eq!(
        postgres.psql_in("fleet", "SELECT count(*) FROM reports"),
        "4"
    );
    // A password file others can read is refused, saying so, and never printed.
    std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let exposed = apply(&[], &["--config", config.to_str().expect("utf-8")]);
    assert!(exposed.stderr.contains("chmod 600"), "{exposed:#?}");
    // A config file others may change is refused before anything runs.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let writable = apply(&[], &["--config", config.to_str().expect("utf-8")]);
    assert_eq!(writable.code, 1, "{writable:#?}");
    assert!(writable.stderr.contains("chmod go-w"), "{writable:#?}");
    for run in [
        &refused,
        &configured,
        &from_pgpass,
        &from_env,
        &exposed,
        &writable,
    ] {
        assert!(!run.all_output().contains("s3cret-pw"), "{run:#?}");
    }
}

/// A store file in a directory another user could write is never opened: that user
/// could swap the file (or a link) under root between runs.
#[test]
fn a_store_in_a_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let machine = Machine::new();
    let policy = fleet_policy(&machine);
    let catalog = machine.catalog(serde_json::json!([]));
    let shared = machine.root().join("shared");
    std::fs::create_dir(&shared).expect("shared/");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let store = format!("sqlite:{}", shared.join("store.sqlite").display());
    let run = machine.apply(&catalog, &policy, &["--store", &store]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("cannot use the store's directory")
            && run.stderr.contains("was not stored"),
        "{run:#?}"
    );
    assert!(!shared.join("store.sqlite").exists());
}

/// A node accepts from other nodes only what its policy imports (nothing by default):
/// an export outside `[imports]` is refused before any change, by `validate` and by
/// `apply`, naming the exporting node and where it declared the resource; what is
/// imported is marked with its node in the human and JSON output.
#[test]
fn an_export_the_node_does_not_import_is_refused_naming_its_node() {
    let machine = Machine::new();
    machine.manifest("site.wcv", SITE);
    let store = format!(
        "sqlite:{}",
        machine.root().join("state/fleet.sqlite").display()
    );
    fleet_policy(&machine);
    compile(&machine, &store, "web1");
    let site = machine.root().join("site.wcv");
    let lb = |command: &str, policy: &Path, code: i32, extra: &[&str]| {
        let mut args = vec![
            command,
            site.to_str().expect("utf-8"),
            "--node",
            "lb",
            "--policy",
            policy.to_str().expect("utf-8"),
        ];
        args.extend_from_slice(extra);
        run(&machine, &store, code, &args)
    };
    let nothing = machine.root().join("no-imports.toml");
    std::fs::copy(machine.policy(""), &nothing).expect("policy");
    for command in ["validate", "apply"] {
        let refused = lb(command, &nothing, 1, &[]).all_output();
        assert!(
            refused.contains("wcv::not-imported")
                && refused.contains("exported by node `web1`, and this node imports no `file`")
                && refused.contains("node web1: ")
                && refused.contains("site.wcv:3"),
            "{command}: {refused}"
        );
        assert!(!Path::new(&machine.file("lb")).exists(), "nothing changed");
    }
    // The type imported, but not where web3 writes.
    machine.manifest(
        "site.wcv",
        &format!(
            "{SITE}\nnode 'web3' {{\n  @@file {{ '@FILES@/elsewhere/web3': content => 'x', tag => 'lb_backend' }}\n}}\n"
        ),
    );
    compile(&machine, &store, "web3");
    let policy = fleet_policy(&machine);
    let refused = lb("validate", &policy, 1, &[]).all_output();
    assert!(
        refused.contains("exported by node `web3`, and `path` => ")
            && refused.contains("is in none of the directories this node imports into")
            && !refused.contains("`web1`"),
        "{refused}"
    );
    // Without web3, what is imported is applied, marked with its node in the JSON report.
    run(&machine, &store, 0, &["store", "deactivate", "web3"]);
    let applied = lb("apply", &policy, 2, &["--format", "json"]);
    let report = applied.json();
    let collected = crate::support::entry(&report, &format!("File[{}/web1]", machine.file("lb")));
    assert_eq!(collected["exported_by"], "web1", "{collected:#}");
}

/// With a role per node, a node writes only its own rows (PostgreSQL's row-level
/// security): node B, compiling as `--node web1`, cannot touch web1's exports, and
/// says why; as itself it publishes. The role that created the tables is not bound.
#[test]
fn a_node_replaces_only_its_own_exports_with_a_role_per_node() {
    let postgres = Postgres::start();
    let machine = Machine::new();
    machine.manifest("site.wcv", SITE);
    let policy = fleet_policy(&machine);
    // The owner makes the schema; the administrator gives each node a role.
    run(&machine, &postgres.url(), 0, &["reports"]);
    for role in ["web1", "nodeb"] {
        postgres.psql(&format!(
            "CREATE ROLE {role} LOGIN; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON nodes, exports, export_values, reports TO {role}; \
             GRANT SELECT ON wconverge_schema TO {role}; \
             GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"
        ));
    }
    let url_as = |role: &str| {
        postgres
            .url()
            .replace("postgres://wconverge@", &format!("postgres://{role}@"))
    };
    let compile_as = |role: &str, manifest: &Path, node: &str| {
        run(
            &machine,
            &url_as(role),
            0,
            &[
                "compile",
                manifest.to_str().expect("utf-8"),
                "--node",
                node,
                "--policy",
                policy.to_str().expect("utf-8"),
            ],
        )
    };
    let site = machine.root().join("site.wcv");
    compile_as("web1", &site, "web1");
    let exports_of = |node: &str| {
        postgres.psql(&format!(
            "SELECT title FROM exports WHERE node = '{node}' ORDER BY title"
        ))
    };
    let web1 = exports_of("web1");
    assert_eq!(web1.lines().count(), 2, "{web1}");
    let evil = machine.manifest(
        "evil.wcv",
        "node 'web1', 'nodeb' { @@file { '@FILES@/lb/evil': content => 'x', tag => 'lb_backend' } }\n",
    );
    let refused = compile_as("nodeb", &evil, "web1");
    assert!(
        refused.stderr.contains("were not stored") && refused.stderr.contains("row-level security"),
        "{refused:#?}"
    );
    assert_eq!(
        exports_of("web1"),
        web1,
        "web1's exports are as web1 left them"
    );
    compile_as("nodeb", &evil, "nodeb");
    assert_eq!(exports_of("nodeb").lines().count(), 1);
}

/// A fleet of three test hosts on a private network, sharing a PostgreSQL store on the
/// machine over TLS, each node its own role (a client certificate for it): web1 and
/// web2 export their backends, lb collects them into its configuration, and a node
/// retired with `store deactivate` leaves lb's configuration at lb's next run.
#[test]
fn three_test_hosts_share_a_store_over_the_network_with_a_role_each() {
    let network = format!("10.77.{}", 20 + std::process::id() % 200);
    let bridge = crate::testhost::Bridge::new(&format!("{network}.1/24"));
    let nodes = ["web1", "web2", "lb"];
    let (postgres, ca, clients) =
        Postgres::start_fleet(&format!("{network}.1"), &format!("{network}.0/24"), &nodes);
    // The owner makes the schema over the socket; each node gets a role of its own.
    let machine = Machine::new();
    run(&machine, &postgres.url(), 0, &["reports"]);
    for role in nodes {
        postgres.psql(&format!(
            "CREATE ROLE {role} LOGIN; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON nodes, exports, export_values, reports TO {role}; \
             GRANT SELECT ON wconverge_schema TO {role}; \
             GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"
        ));
    }
    let site = "node 'web1', 'web2' {\n\
                  @@file { \"/etc/lb/backends/${clientcert}\": content => \"server ${clientcert}\\n\", tag => 'lb_backend' }\n\
                }\n\
                node 'lb' {\n\
                  file { '/etc/lb': ensure => directory }\n\
                  file { '/etc/lb/backends': ensure => directory, recurse => true, purge => true }\n\
                  File <<| tag == 'lb_backend' |>>\n\
                }\n";
    let policy = format!(
        "{}\n[imports]\ntypes = [\"file\"]\ndirectories = [\"/etc/lb/backends\"]\n",
        wconverge_runtime::policy::DEFAULT_POLICY
    );
    let hosts: Vec<crate::testhost::TestHost> = nodes
        .iter()
        .zip(&clients)
        .enumerate()
        .map(|(index, (node, (cert, key)))| {
            let host = crate::testhost::TestHost::boot_on(
                &bridge,
                &format!("{network}.{}/24", 10 + index),
            );
            for (from, to) in [(&ca, "ca.pem"), (cert, "node.pem"), (key, "node.key")] {
                host.write(
                    &format!("/etc/wconverge/{to}"),
                    &std::fs::read_to_string(from).expect("certificate"),
                );
            }
            host.write("/etc/wconverge/policy.toml", &policy);
            host.write("/root/site.wcv", site);
            let private = host.run("chmod 600 /etc/wconverge/node.key");
            assert_eq!(private.code, 0, "{private:#?} on {node}");
            host
        })
        .collect();
    let apply = |index: usize, code: i32| {
        let node = nodes[index];
        let run = hosts[index].run(&format!(
            "wconverge apply /root/site.wcv --node {node} --policy /etc/wconverge/policy.toml \
             --format json --store 'postgres://{node}@{network}.1:{}/postgres?sslrootcert=/etc/wconverge/ca.pem&sslcert=/etc/wconverge/node.pem&sslkey=/etc/wconverge/node.key'",
            postgres.port()
        ));
        assert_eq!(run.code, code, "{node}: {run:#?}");
        run
    };
    apply(0, 0);
    apply(1, 0);
    let collected = apply(2, 2).json();
    let lb = &hosts[2];
    let backends = lb.run("cat /etc/lb/backends/web1 /etc/lb/backends/web2");
    assert_eq!(
        backends.stdout, "server web1\nserver web2\n",
        "{collected:#}"
    );
    assert_eq!(
        crate::support::entry(&collected, "File[/etc/lb/backends/web2]")["exported_by"],
        "web2"
    );
    apply(2, 0);
    // web2 retired: gone from lb's configuration at its next run.
    run(
        &machine,
        &postgres.url(),
        0,
        &["store", "deactivate", "web2"],
    );
    apply(2, 2);
    let left = lb.run("ls /etc/lb/backends");
    assert_eq!(left.stdout, "web1\n", "{left:#?}");
}
