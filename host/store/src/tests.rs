//! The store on a real SQLite file in a temporary directory. The same behaviour on a
//! real PostgreSQL server is tested end to end (`tests/all/store.rs`).

use super::*;
use wconverge_catalog::{Attributes, Value};

fn store(dir: &tempfile::TempDir) -> Store {
    Store::open(&Location::Sqlite(dir.path().join("store.sqlite"))).expect("store")
}

fn export(type_name: &str, title: &str, tags: &[&str], attributes: Vec<(&str, Value)>) -> Export {
    Export {
        type_name: type_name.to_owned(),
        title: title.to_owned(),
        tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
        attributes: Attributes(
            attributes
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        ),
        source: None,
    }
}

fn compare(attribute: &str, equal: bool, value: Value) -> ExportQuery {
    ExportQuery::Compare {
        attribute: attribute.to_owned(),
        equal,
        value,
    }
}

fn text(value: &str) -> Value {
    Value::String(value.to_owned())
}

/// Every node's exports of a small fleet, and queries over them: the store's answer is
/// what evaluating the query on each export says.
#[test]
fn collections_are_what_the_query_says_of_each_export() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir);
    let mut all = Vec::new();
    for node in ["db1", "web1", "web2", "web3"] {
        let mut exports = Vec::new();
        for n in 0..5 {
            exports.push(export(
                "file",
                &format!("/etc/lb/{node}-{n}"),
                &["file", if n % 2 == 0 { "even" } else { "odd" }, node],
                vec![
                    ("port", Value::Integer(8000 + n)),
                    ("mode", text(if n < 3 { "0644" } else { "0600" })),
                    ("groups", Value::Array(vec![text("LB"), text(node)])),
                ],
            ));
        }
        exports.push(export(
            "host",
            node,
            &["host"],
            vec![("ip", text("10.0.0.1"))],
        ));
        assert!(store.replace_exports(node, &exports).expect("replace"));
        all.extend(exports.into_iter().map(|export| (node, export)));
    }
    let queries = [
        ExportQuery::All,
        compare("tag", true, text("EVEN")),
        compare("tag", false, text("even")),
        compare("port", true, Value::Float(8002.0)),
        compare("port", true, text("8002")),
        compare("groups", true, text("lb")),
        compare("groups", true, text("web2")),
        compare("title", true, text("/etc/lb/web3-4")),
        compare("missing", false, text("x")),
        compare("mode", true, Value::Undef),
        ExportQuery::And(
            Box::new(compare("tag", true, text("odd"))),
            Box::new(ExportQuery::Or(
                Box::new(compare("mode", true, text("0600"))),
                Box::new(compare("tag", true, text("db1"))),
            )),
        ),
    ];
    for query in &queries {
        for excluding in ["web1", "nobody"] {
            let mut expected: Vec<(String, String)> = all
                .iter()
                .filter(|(node, export)| {
                    *node != excluding && export.type_name == "file" && query.matches(export)
                })
                .map(|(node, export)| ((*node).to_owned(), export.title.clone()))
                .collect();
            expected.sort();
            let found: Vec<(String, String)> = store
                .collect("File", query, excluding)
                .expect("collect")
                .into_iter()
                .map(|collected| (collected.node, collected.export.title))
                .collect();
            assert_eq!(found, expected, "{query:?} excluding {excluding}");
        }
    }
    // The exports come back as they were stored.
    let found = store
        .collect("host", &compare("title", true, text("db1")), "web1")
        .expect("collect");
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].export,
        all.iter()
            .find(|(n, e)| *n == "db1" && e.type_name == "host")
            .expect("db1")
            .1
    );
}

#[test]
fn exports_are_replaced_whole_and_deactivated_nodes_are_not_collected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir);
    let one = vec![export("file", "/a", &["x"], vec![])];
    assert!(store.replace_exports("web1", &one).expect("first"));
    // The same exports again: nothing written.
    assert!(!store.replace_exports("web1", &one).expect("same"));
    let two = vec![
        export("file", "/b", &["x"], vec![]),
        export("file", "/c", &["x"], vec![]),
    ];
    assert!(store.replace_exports("web1", &two).expect("replace"));
    let titles = |store: &Store| -> Vec<String> {
        store
            .collect("file", &ExportQuery::All, "lb")
            .expect("collect")
            .into_iter()
            .map(|collected| collected.export.title)
            .collect()
    };
    assert_eq!(titles(&store), ["/b", "/c"]);
    assert!(store.deactivate("web1").expect("deactivate"));
    assert!(titles(&store).is_empty());
    assert!(!store.deactivate("never-seen").expect("unknown"));
    // A node that compiles again is active again, even with the same exports.
    assert!(store.replace_exports("web1", &two).expect("again"));
    assert_eq!(titles(&store), ["/b", "/c"]);
    assert!(store.replace_exports("web1", &[]).expect("none"));
    assert!(titles(&store).is_empty());
    let nodes = store.nodes().expect("nodes");
    assert_eq!(nodes.len(), 1);
    assert_eq!((nodes[0].name.as_str(), nodes[0].exports), ("web1", 0));
}

#[test]
fn reports_and_facts_are_kept_listed_and_pruned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir);
    let old = store
        .store_report("web1", 1_000, ("changed", None), "{\"a\":1}")
        .expect("old");
    let new = store
        .store_report("web1", 2_000, ("unchanged", None), "{\"b\":2}")
        .expect("new");
    store
        .store_report("db1", 1_500, ("failed", None), "{}")
        .expect("db1");
    let listed: Vec<i64> = store
        .reports(None, None)
        .expect("all")
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0], new);
    let web1: Vec<i64> = store
        .reports(Some("web1"), None)
        .expect("web1")
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(web1, [new, old]);
    let recent: Vec<i64> = store
        .reports(None, Some(1_600))
        .expect("since")
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(recent, [new]);
    let shown = store.report(old).expect("show").expect("there");
    assert_eq!(
        (shown.report.as_str(), shown.summary.status.as_str()),
        ("{\"a\":1}", "changed")
    );
    // A node prunes its own reports only.
    assert_eq!(store.prune_reports("web1", 1_600).expect("prune"), 1);
    assert!(store.report(old).expect("gone").is_none());
    assert_eq!(store.reports(Some("db1"), None).expect("db1").len(), 1);
    assert!(store.facts("web1").expect("none yet").is_none());
    store.store_facts("web1", "{\"os\":[]}").expect("facts");
    assert_eq!(
        store.facts("web1").expect("facts").expect("some").0,
        "{\"os\":[]}"
    );
}

#[test]
fn a_store_newer_than_this_build_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.sqlite");
    drop(store(&dir));
    let connection = rusqlite::Connection::open(&path).expect("open");
    connection
        .execute(
            "UPDATE wconverge_schema SET version = ?1",
            [SCHEMA_VERSION + 1],
        )
        .expect("bump");
    drop(connection);
    let error = Store::open(&Location::Sqlite(path)).expect_err("newer");
    let message = error.to_string();
    let newer = format!("schema version {}, newer", SCHEMA_VERSION + 1);
    assert!(message.contains(&newer), "{message}");
    assert!(message.contains("upgrade wconverge"), "{message}");
}

#[test]
fn the_store_file_is_private_and_never_a_link() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir);
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let path = dir.path().join("store.sqlite");
    let mode = std::fs::metadata(&path)
        .expect("metadata")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(store);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let error = Store::open(&Location::Sqlite(path.clone())).expect_err("readable by others");
    assert!(error.to_string().contains("chmod 600"), "{error}");
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "").expect("target");
    let link = dir.path().join("link.sqlite");
    std::os::unix::fs::symlink(&target, &link).expect("link");
    let error = Store::open(&Location::Sqlite(link)).expect_err("a link");
    assert!(error.to_string().contains("cannot open it"), "{error}");
}

#[test]
fn limits_are_errors_that_name_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir);
    let mut query = compare("tag", true, text("a"));
    for _ in 0..MAX_COMPARISONS {
        query = ExportQuery::Or(Box::new(query), Box::new(compare("tag", true, text("b"))));
    }
    let error = store.collect("file", &query, "lb").expect_err("too many");
    assert!(
        error
            .to_string()
            .contains(&format!("at most {MAX_COMPARISONS}")),
        "{error}"
    );
    let large = "x".repeat(MAX_DOCUMENT_BYTES + 1);
    let error = store
        .store_report("web1", 1, ("changed", None), &large)
        .expect_err("too large");
    assert!(error.to_string().contains("64 MiB"), "{error}");
}

/// A row written by something other than this code: what the index says and what the
/// row holds disagree, or it is larger than any compile writes. Collecting it is an
/// error naming the node, never a resource the query did not ask for.
#[test]
fn rows_that_disagree_with_their_index_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(&dir);
    store
        .replace_exports("web1", &[export("file", "/a", &["backend"], vec![])])
        .expect("replace");
    let query = compare("tag", true, text("backend"));
    assert_eq!(store.collect("file", &query, "lb").expect("clean").len(), 1);
    let connection = rusqlite::Connection::open(dir.path().join("store.sqlite")).expect("open");
    let swapped = serde_json::to_string(&export("exec", "/a", &["backend"], vec![])).expect("json");
    connection
        .execute("UPDATE exports SET body = ?1", [&swapped])
        .expect("tamper");
    let error = store
        .collect("file", &query, "lb")
        .expect_err("another type");
    assert!(
        error.to_string().contains("node `web1`") && error.to_string().contains("indexed"),
        "{error}"
    );
    let huge = "x".repeat(MAX_EXPORT_BYTES + 1);
    connection
        .execute("UPDATE exports SET body = ?1", [&huge])
        .expect("tamper");
    let error = store.collect("file", &query, "lb").expect_err("too large");
    assert!(
        error.to_string().contains("larger than any compile writes"),
        "{error}"
    );
}
