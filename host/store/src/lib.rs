//! The store nodes share: the resources each node exported, the
//! facts each node last sent, and the reports of their runs. One interface, two back
//! ends: SQLite (embedded, the default, a file in the state directory) and PostgreSQL
//! (a fleet's, as PuppetDB uses).
//!
//! An exported-resource collector's query runs in the database: each export is kept
//! with one row per value it can be matched on (its title, each tag, each attribute's
//! value or array member, reduced to a [`match_key`]), so a query is indexed lookups,
//! never a load of every export.
//!
//! The schema is versioned; [`Store::open`] applies the migrations a store lacks in one
//! transaction, and refuses a store whose schema is newer than this build knows.
//!
//! This crate knows nothing of wasmtime or plugins. It does its own IO, as the runtime
//! does: the SQLite file, and the password file and certificates of a PostgreSQL
//! connection, each opened once, without following a link, within a cap. Its
//! configuration (the `PG*` environment variables too) comes from the caller.

mod backend;
mod guarded;
mod location;
mod postgres_backend;
mod sqlite;

pub use guarded::{Guard, read_guarded};
pub use location::{Location, PostgresSettings};

use backend::{Backend, Cell, Param};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;
use wconverge_catalog::{Collected, Export, ExportQuery, match_key};

/// The schema this build reads and writes.
pub const SCHEMA_VERSION: i64 = 3;

/// A collection finds at most this many exports; more is an error.
pub const MAX_COLLECTED: usize = 100_000;
/// A node exports at most this many resources.
pub const MAX_EXPORTS: usize = 100_000;
/// A collector's query makes at most this many comparisons.
pub const MAX_COMPARISONS: usize = 64;
/// A listing of reports shows at most this many.
pub const MAX_LISTED_REPORTS: usize = 10_000;
/// A stored report or set of facts is at most this large.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;
/// An export is at most this large, as stored.
pub const MAX_EXPORT_BYTES: usize = 1 << 20;
/// A collection reads at most this many bytes of exports.
pub const MAX_COLLECTED_BYTES: usize = 256 << 20;
/// A listing of nodes shows at most this many.
pub const MAX_LISTED_NODES: usize = 100_000;
/// How long a statement may wait for a lock another run holds, or run.
pub const STATEMENT_DEADLINE: Duration = Duration::from_secs(30);
/// How long connecting to PostgreSQL may take.
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(10);

/// What went wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the store {store}: {message}")]
    Database { store: String, message: String },
    #[error(
        "the store {store} has schema version {found}, newer than this wconverge knows ({known}): \
         upgrade wconverge on this machine, or point `--store` at another store"
    )]
    TooNew {
        store: String,
        found: i64,
        known: i64,
    },
    #[error("{0}")]
    Invalid(String),
}

/// A node as the store knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    /// When it was deactivated (seconds since the epoch): its exports are collected no
    /// more.
    pub deactivated: Option<i64>,
    pub exports: usize,
    pub facts_at: Option<i64>,
}

/// A report's summary, as `wconverge reports` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSummary {
    pub id: i64,
    pub node: String,
    /// When the run ended, in seconds since the epoch.
    pub at: i64,
    /// `unchanged`, `changed`, `failed` (Puppet's words; a noop run changes nothing).
    pub status: String,
    /// The run's mode and counts, from its report; `None` for a report stored before the
    /// store kept them (schema version 2).
    pub figures: Option<RunFigures>,
}

/// What `wconverge reports` lists of a run besides its status: kept beside the report
/// when it is stored, so a listing never reads the reports themselves.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunFigures {
    /// `apply` or `noop`.
    pub mode: String,
    pub resources: u64,
    pub changed: u64,
    /// Noop: resources with changes that were not made.
    pub would_change: u64,
    pub failed: u64,
    pub skipped: u64,
    /// How long the run took, in milliseconds.
    pub duration_ms: f64,
}

impl RunFigures {
    /// The figures of a report as `reports show` prints it (its `mode`, `duration_ms` and
    /// `summary`); `None` if it has none of them.
    pub fn of_report(report: &str) -> Option<RunFigures> {
        let value: serde_json::Value = serde_json::from_str(report).ok()?;
        let summary = value.get("summary")?;
        let count = |name: &str| summary.get(name).and_then(serde_json::Value::as_u64);
        Some(RunFigures {
            mode: value.get("mode")?.as_str()?.to_owned(),
            resources: count("resources")?,
            changed: count("changed").unwrap_or(0),
            would_change: count("would_change").unwrap_or(0),
            failed: count("failed").unwrap_or(0),
            skipped: count("skipped").unwrap_or(0),
            duration_ms: value.get("duration_ms")?.as_f64()?,
        })
    }
}

/// A stored report: its summary and the JSON report.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReport {
    pub summary: ReportSummary,
    pub report: String,
}

/// The store: one connection, used by one thread at a time.
pub struct Store {
    backend: Mutex<Box<dyn Backend + Send>>,
    /// How messages name it: the SQLite file, or PostgreSQL's host and database (never
    /// a password).
    shown: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("store", &self.shown).finish()
    }
}

impl Store {
    /// Opens (creating an SQLite file if there is none) and migrates the store.
    pub fn open(location: &Location) -> Result<Store, StoreError> {
        let shown = location.to_string();
        let backend: Box<dyn Backend + Send> = match location {
            Location::Sqlite(path) => {
                Box::new(
                    sqlite::Sqlite::open(path).map_err(|message| StoreError::Database {
                        store: shown.clone(),
                        message,
                    })?,
                )
            }
            Location::Postgres(settings) => Box::new(
                postgres_backend::Postgres::connect(settings).map_err(|message| {
                    StoreError::Database {
                        store: shown.clone(),
                        message,
                    }
                })?,
            ),
        };
        let store = Store {
            backend: Mutex::new(backend),
            shown,
        };
        store.migrate()?;
        Ok(store)
    }

    /// How messages name this store.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn fail(&self, message: String) -> StoreError {
        StoreError::Database {
            store: self.shown.clone(),
            message,
        }
    }

    /// The connection, for one thread at a time.
    fn connection(&self) -> std::sync::MutexGuard<'_, Box<dyn Backend + Send>> {
        self.backend
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `work` in one transaction: committed if it returns `Ok`, rolled back if not.
    fn transaction<T>(
        &self,
        work: impl FnOnce(&mut dyn Backend) -> Result<T, String>,
    ) -> Result<T, StoreError> {
        let mut backend = self.connection();
        backend.begin().map_err(|message| self.fail(message))?;
        match work(backend.as_mut()) {
            Ok(value) => {
                backend.commit().map_err(|message| self.fail(message))?;
                Ok(value)
            }
            Err(message) => {
                let _ = backend.rollback();
                Err(self.fail(message))
            }
        }
    }

    fn read<T>(
        &self,
        work: impl FnOnce(&mut dyn Backend) -> Result<T, String>,
    ) -> Result<T, StoreError> {
        let mut backend = self.connection();
        work(backend.as_mut()).map_err(|message| self.fail(message))
    }

    fn migrate(&self) -> Result<(), StoreError> {
        // A store of this version (every run but the first) is only read here: no
        // write lock, no transaction to commit.
        let current = self.read(|db| {
            Ok(
                match db
                    .query("SELECT version FROM wconverge_schema", &[])
                    .ok()
                    .and_then(|rows| rows.into_iter().next())
                    .and_then(|row| row.into_iter().next())
                {
                    Some(Cell::Int(version)) => Some(version),
                    _ => None,
                },
            )
        })?;
        if current == Some(SCHEMA_VERSION) {
            return Ok(());
        }
        let found = self.transaction(|db| {
            db.lock_schema()?;
            db.execute(
                "CREATE TABLE IF NOT EXISTS wconverge_schema (version BIGINT NOT NULL)",
                &[],
            )?;
            let rows = db.query("SELECT version FROM wconverge_schema", &[])?;
            let found = match rows.first().and_then(|row| row.first()) {
                Some(Cell::Int(version)) => *version,
                _ => {
                    db.execute(
                        "INSERT INTO wconverge_schema (version) VALUES ($1)",
                        &[Param::Int(0)],
                    )?;
                    0
                }
            };
            if found > SCHEMA_VERSION {
                return Ok(found);
            }
            for (version, statements) in db.migrations().iter().enumerate() {
                let version = i64::try_from(version).unwrap_or(i64::MAX) + 1;
                if version <= found {
                    continue;
                }
                for statement in *statements {
                    db.execute(statement, &[])?;
                }
                db.execute(
                    "UPDATE wconverge_schema SET version = $1",
                    &[Param::Int(version)],
                )?;
            }
            Ok(found)
        })?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                store: self.shown.clone(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        Ok(())
    }

    /// The schema version the store has now.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.read(|db| {
            let rows = db.query("SELECT version FROM wconverge_schema", &[])?;
            match rows.first().and_then(|row| row.first()) {
                Some(Cell::Int(version)) => Ok(*version),
                _ => Err("it has no schema version".to_owned()),
            }
        })
    }

    /// Replaces `node`'s exports with `exports`, in one transaction, and makes the node
    /// active again (a node that compiles is alive). Returns whether anything changed:
    /// exports equal to those stored are not written again.
    pub fn replace_exports(&self, node: &str, exports: &[Export]) -> Result<bool, StoreError> {
        if exports.len() > MAX_EXPORTS {
            return Err(StoreError::Invalid(format!(
                "node `{node}` exports {} resources; a node may export at most {MAX_EXPORTS}",
                exports.len()
            )));
        }
        let bodies: Vec<String> = exports
            .iter()
            .map(|export| serde_json::to_string(export).map_err(|error| error.to_string()))
            .collect::<Result<_, _>>()
            .map_err(StoreError::Invalid)?;
        if let Some((export, body)) = exports
            .iter()
            .zip(&bodies)
            .find(|(_, body)| body.len() > MAX_EXPORT_BYTES)
        {
            return Err(StoreError::Invalid(format!(
                "`{}` of node `{node}` takes {} bytes as exported; an export may take at most \
                 {MAX_EXPORT_BYTES} (1 MiB)",
                wconverge_catalog::ResourceRef::new(&export.type_name, &export.title),
                body.len()
            )));
        }
        let digest = digest_of(&bodies);
        // A run that exports what it exported last time writes nothing.
        let unchanged = self.read(|db| {
            let rows = db.query(
                "SELECT exports_digest, deactivated FROM nodes WHERE name = $1",
                &[Param::Text(node.to_owned())],
            )?;
            Ok(matches!(
                rows.first().map(Vec::as_slice),
                Some([Cell::Text(stored), Cell::Null]) if *stored == digest
            ))
        })?;
        if unchanged {
            return Ok(false);
        }
        self.transaction(|db| {
            upsert_node(db, node)?;
            // Concurrent runs of one node queue here: the row lock (PostgreSQL) or the
            // write lock (SQLite) is held until this transaction ends.
            db.execute(
                "UPDATE nodes SET exports_digest = $2, deactivated = NULL, exports_at = $3 \
                 WHERE name = $1",
                &[
                    Param::Text(node.to_owned()),
                    Param::Text(digest.clone()),
                    Param::Int(now()),
                ],
            )?;
            db.execute(
                "DELETE FROM export_values WHERE export IN (SELECT id FROM exports WHERE node = $1)",
                &[Param::Text(node.to_owned())],
            )?;
            db.execute(
                "DELETE FROM exports WHERE node = $1",
                &[Param::Text(node.to_owned())],
            )?;
            insert_exports(db, node, exports, bodies)?;
            Ok(true)
        })
    }

    /// The exports of `type_name` that match `query`, of every active node but
    /// `excluding` (the collecting node, whose own exports come from its compile), in
    /// the order of their nodes' names and titles.
    pub fn collect(
        &self,
        type_name: &str,
        query: &ExportQuery,
        excluding: &str,
    ) -> Result<Vec<Collected>, StoreError> {
        if query.comparisons() > MAX_COMPARISONS {
            return Err(StoreError::Invalid(format!(
                "the collector's query makes {} comparisons; at most {MAX_COMPARISONS} are allowed",
                query.comparisons()
            )));
        }
        let mut params = vec![
            Param::Text(type_name.to_lowercase()),
            Param::Text(excluding.to_owned()),
        ];
        let mut condition = String::new();
        write_condition(query, &mut condition, &mut params);
        let limit = MAX_COLLECTED + 1;
        // An export larger than any compile writes is read as its size alone, and
        // refused below.
        let sql = format!(
            "SELECT e.node, e.title, CASE WHEN length(e.body) <= {MAX_EXPORT_BYTES} THEN e.body \
             ELSE NULL END FROM exports e JOIN nodes n ON n.name = e.node \
             WHERE e.type = $1 AND e.node <> $2 AND n.deactivated IS NULL AND ({condition}) \
             ORDER BY e.node, e.title LIMIT {limit}"
        );
        let rows = self.read(|db| db.query(&sql, &params))?;
        if rows.len() > MAX_COLLECTED {
            return Err(StoreError::Invalid(format!(
                "the collector of `{type_name}` matches more than {MAX_COLLECTED} exported \
                 resources (the limit); narrow its query"
            )));
        }
        let mut read = 0usize;
        let mut collected = Vec::with_capacity(rows.len());
        for row in rows {
            let Ok([Cell::Text(node), Cell::Text(title), body]) = <[Cell; 3]>::try_from(row) else {
                return Err(self.fail("an export row has an unexpected shape".to_owned()));
            };
            let Cell::Text(body) = body else {
                return Err(self.fail(format!(
                    "an export of node `{node}` is larger than any compile writes \
                     ({MAX_EXPORT_BYTES} bytes): the store was written by something other \
                     than wconverge"
                )));
            };
            read += body.len();
            if read > MAX_COLLECTED_BYTES {
                return Err(StoreError::Invalid(format!(
                    "the collector of `{type_name}` reads more than {MAX_COLLECTED_BYTES} bytes \
                     of exports (the limit); narrow its query"
                )));
            }
            let export: Export = serde_json::from_str(&body).map_err(|error| {
                self.fail(format!("an export of node `{node}` is unreadable: {error}"))
            })?;
            // What the row was found by must be what it holds: a row written by
            // anything but this code could say one thing to the index and another to
            // the collector.
            if !export.type_name.eq_ignore_ascii_case(type_name)
                || export.title != title
                || !query.matches(&export)
            {
                return Err(self.fail(format!(
                    "an export of node `{node}` (`{title}`) does not hold what it is indexed \
                     by: the store was written by something other than wconverge"
                )));
            }
            collected.push(Collected { node, export });
        }
        Ok(collected)
    }

    /// Deactivates `node`: its exports are collected no more, until it compiles again.
    /// `false` if the store does not know the node.
    pub fn deactivate(&self, node: &str) -> Result<bool, StoreError> {
        self.transaction(|db| {
            let changed = db.execute(
                "UPDATE nodes SET deactivated = $2 WHERE name = $1",
                &[Param::Text(node.to_owned()), Param::Int(now())],
            )?;
            Ok(changed > 0)
        })
    }

    /// Every node the store knows, by name.
    pub fn nodes(&self) -> Result<Vec<Node>, StoreError> {
        self.read(|db| {
            let rows = db.query(
                &format!(
                    "SELECT n.name, n.deactivated, n.facts_at, \
                     (SELECT COUNT(*) FROM exports e WHERE e.node = n.name) \
                     FROM nodes n ORDER BY n.name LIMIT {}",
                    MAX_LISTED_NODES + 1
                ),
                &[],
            )?;
            if rows.len() > MAX_LISTED_NODES {
                return Err(format!(
                    "it knows more than {MAX_LISTED_NODES} nodes, the most a listing shows"
                ));
            }
            rows.into_iter()
                .map(|row| match <[Cell; 4]>::try_from(row) {
                    Ok([Cell::Text(name), deactivated, facts_at, Cell::Int(exports)]) => Ok(Node {
                        name,
                        deactivated: deactivated.int(),
                        facts_at: facts_at.int(),
                        exports: usize::try_from(exports).unwrap_or(0),
                    }),
                    _ => Err("a node row has an unexpected shape".to_owned()),
                })
                .collect()
        })
    }

    /// Stores `node`'s facts (JSON), replacing those it sent before.
    pub fn store_facts(&self, node: &str, facts: &str) -> Result<(), StoreError> {
        check_size("the facts", facts)?;
        self.transaction(|db| {
            upsert_node(db, node)?;
            db.execute(
                "UPDATE nodes SET facts = $2, facts_at = $3 WHERE name = $1",
                &[
                    Param::Text(node.to_owned()),
                    Param::Text(facts.to_owned()),
                    Param::Int(now()),
                ],
            )?;
            Ok(())
        })
    }

    /// `node`'s last facts (JSON) and when they were stored; `None` if it sent none.
    pub fn facts(&self, node: &str) -> Result<Option<(String, i64)>, StoreError> {
        self.read(|db| {
            let rows = db.query(
                "SELECT facts, facts_at FROM nodes WHERE name = $1",
                &[Param::Text(node.to_owned())],
            )?;
            Ok(match rows.into_iter().next().map(<[Cell; 2]>::try_from) {
                Some(Ok([Cell::Text(facts), Cell::Int(at)])) => Some((facts, at)),
                _ => None,
            })
        })
    }

    /// Stores a report of `node`'s run that ended at `at` (seconds since the epoch), with
    /// its `figures` (read from the report when the caller has none at hand, as for a
    /// spooled one); returns its id.
    pub fn store_report(
        &self,
        node: &str,
        at: i64,
        (status, figures): (&str, Option<&RunFigures>),
        report: &str,
    ) -> Result<i64, StoreError> {
        check_size("the report", report)?;
        let read;
        let figures = match figures {
            Some(figures) => Some(figures),
            None => {
                read = RunFigures::of_report(report);
                read.as_ref()
            }
        };
        let figures = figures
            .and_then(|figures| serde_json::to_string(figures).ok())
            .unwrap_or_default();
        self.transaction(|db| {
            upsert_node(db, node)?;
            let rows = db.query(
                "INSERT INTO reports (node, at, status, body, figures) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
                &[
                    Param::Text(node.to_owned()),
                    Param::Int(at),
                    Param::Text(status.to_owned()),
                    Param::Text(report.to_owned()),
                    Param::Text(figures.clone()),
                ],
            )?;
            match rows.first().and_then(|row| row.first()) {
                Some(Cell::Int(id)) => Ok(*id),
                _ => Err("an insert returned no id".to_owned()),
            }
        })
    }

    /// Reports, newest first, of `node` (or every node), ended at or after `since`; more
    /// than [`MAX_LISTED_REPORTS`] is an error.
    pub fn reports(
        &self,
        node: Option<&str>,
        since: Option<i64>,
    ) -> Result<Vec<ReportSummary>, StoreError> {
        let params = vec![
            Param::Text(node.unwrap_or_default().to_owned()),
            Param::Int(i64::from(node.is_some())),
            Param::Int(since.unwrap_or(i64::MIN)),
        ];
        let sql = format!(
            "SELECT id, node, at, status, figures FROM reports \
             WHERE (CAST($2 AS BIGINT) = 0 OR node = $1) AND at >= $3 ORDER BY at DESC, id DESC LIMIT {}",
            MAX_LISTED_REPORTS + 1
        );
        let rows = self.read(|db| db.query(&sql, &params))?;
        if rows.len() > MAX_LISTED_REPORTS {
            return Err(StoreError::Invalid(format!(
                "more than {MAX_LISTED_REPORTS} reports match, the most a listing shows: \
                 narrow it with `--node` or `--since`"
            )));
        }
        rows.into_iter()
            .map(summary_of)
            .collect::<Result<_, _>>()
            .map_err(|message| self.fail(message))
    }

    /// One report; `None` if there is none with this id.
    pub fn report(&self, id: i64) -> Result<Option<StoredReport>, StoreError> {
        self.read(|db| {
            let mut rows = db.query(
                "SELECT id, node, at, status, figures, body FROM reports WHERE id = $1",
                &[Param::Int(id)],
            )?;
            let Some(mut row) = rows.pop() else {
                return Ok(None);
            };
            let Some(Cell::Text(report)) = row.pop() else {
                return Err("a report row has an unexpected shape".to_owned());
            };
            Ok(Some(StoredReport {
                summary: summary_of(row)?,
                report,
            }))
        })
    }

    /// Removes `node`'s reports that ended before `before`; returns how many. Each node
    /// prunes its own: one node's retention (or clock) never removes another's.
    pub fn prune_reports(&self, node: &str, before: i64) -> Result<u64, StoreError> {
        self.transaction(|db| {
            db.execute(
                "DELETE FROM reports WHERE node = $1 AND at < $2",
                &[Param::Text(node.to_owned()), Param::Int(before)],
            )
        })
    }
}

fn summary_of(row: Vec<Cell>) -> Result<ReportSummary, String> {
    match <[Cell; 5]>::try_from(row) {
        Ok(
            [
                Cell::Int(id),
                Cell::Text(node),
                Cell::Int(at),
                Cell::Text(status),
                Cell::Text(figures),
            ],
        ) => Ok(ReportSummary {
            id,
            node,
            at,
            status,
            figures: serde_json::from_str(&figures).ok(),
        }),
        _ => Err("a report row has an unexpected shape".to_owned()),
    }
}

fn check_size(what: &str, text: &str) -> Result<(), StoreError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(StoreError::Invalid(format!(
            "{what} has {} bytes; the store keeps at most {MAX_DOCUMENT_BYTES} ({} MiB)",
            text.len(),
            MAX_DOCUMENT_BYTES >> 20
        )));
    }
    Ok(())
}

fn upsert_node(db: &mut dyn Backend, node: &str) -> Result<(), String> {
    db.execute(
        "INSERT INTO nodes (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
        &[Param::Text(node.to_owned())],
    )?;
    Ok(())
}

/// Inserts a node's exports and their match keys, many rows to a statement: a few
/// statements whatever the number of exports (each is a round trip to PostgreSQL).
fn insert_exports(
    db: &mut dyn Backend,
    node: &str,
    exports: &[Export],
    bodies: Vec<String>,
) -> Result<(), String> {
    const EXPORTS: usize = 200;
    const KEYS: usize = 300;
    let mut ids: std::collections::HashMap<(String, String), i64> =
        std::collections::HashMap::with_capacity(exports.len());
    let mut bodies = bodies.into_iter();
    for chunk in exports.chunks(EXPORTS) {
        let mut sql = String::from("INSERT INTO exports (node, type, title, body) VALUES ");
        let mut params = Vec::with_capacity(chunk.len() * 3 + 1);
        params.push(Param::Text(node.to_owned()));
        for (n, export) in chunk.iter().enumerate() {
            if n > 0 {
                sql.push_str(", ");
            }
            let at = params.len();
            let _ = write!(sql, "($1, ${}, ${}, ${})", at + 1, at + 2, at + 3);
            params.push(Param::Text(export.type_name.to_lowercase()));
            params.push(Param::Text(export.title.clone()));
            params.push(Param::Text(bodies.next().unwrap_or_default()));
        }
        sql.push_str(" RETURNING id, type, title");
        for row in db.query(&sql, &params)? {
            match <[Cell; 3]>::try_from(row) {
                Ok([Cell::Int(id), Cell::Text(type_name), Cell::Text(title)]) => {
                    ids.insert((type_name, title), id);
                }
                _ => return Err("an insert returned an unexpected row".to_owned()),
            }
        }
    }
    let mut keys = Vec::new();
    for export in exports {
        let Some(&id) = ids.get(&(export.type_name.to_lowercase(), export.title.clone())) else {
            return Err("an insert returned no id for an export".to_owned());
        };
        keys.extend(
            export
                .match_keys()
                .into_iter()
                .map(|(attribute, key)| (id, attribute, key)),
        );
    }
    for chunk in keys.chunks(KEYS) {
        let mut sql = String::from("INSERT INTO export_values (export, attribute, key) VALUES ");
        let mut params = Vec::with_capacity(chunk.len() * 3);
        for (n, (id, attribute, key)) in chunk.iter().enumerate() {
            if n > 0 {
                sql.push_str(", ");
            }
            let at = params.len();
            let _ = write!(sql, "(${}, ${}, ${})", at + 1, at + 2, at + 3);
            params.push(Param::Int(*id));
            params.push(Param::Text(attribute.clone()));
            params.push(Param::Text(key.clone()));
        }
        db.execute(&sql, &params)?;
    }
    Ok(())
}

/// Writes `query` as an SQL condition on the export `e`, its values as parameters.
fn write_condition(query: &ExportQuery, sql: &mut String, params: &mut Vec<Param>) {
    match query {
        ExportQuery::All => sql.push_str("1 = 1"),
        ExportQuery::And(a, b) | ExportQuery::Or(a, b) => {
            sql.push('(');
            write_condition(a, sql, params);
            sql.push_str(if matches!(query, ExportQuery::And(..)) {
                ") AND ("
            } else {
                ") OR ("
            });
            write_condition(b, sql, params);
            sql.push(')');
        }
        ExportQuery::Compare {
            attribute,
            equal,
            value,
        } => match match_key(value) {
            // Nothing equals `undef`: `== undef` matches nothing, `!= undef` everything.
            None => sql.push_str(if *equal { "1 = 0" } else { "1 = 1" }),
            Some(key) => {
                params.push(Param::Text(attribute.clone()));
                params.push(Param::Text(key));
                let _ = write!(
                    sql,
                    "e.id {}IN (SELECT v.export FROM export_values v WHERE v.attribute = ${} \
                     AND v.key = ${})",
                    if *equal { "" } else { "NOT " },
                    params.len() - 1,
                    params.len()
                );
            }
        },
    }
}

/// A digest of a node's exports, to skip writing the same exports again.
fn digest_of(bodies: &[String]) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    // Exports indexed with another format of match keys are written again.
    hasher.update(wconverge_catalog::MATCH_KEY_FORMAT.to_le_bytes());
    for body in bodies {
        hasher.update(body.len().to_le_bytes());
        hasher.update(body.as_bytes());
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
mod tests;
