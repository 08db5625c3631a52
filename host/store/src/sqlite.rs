//! The embedded back end: one SQLite file, in the state directory (private to root),
//! `0600`, in write-ahead-log mode (readers never wait for a writer).

use crate::STATEMENT_DEADLINE;
use crate::backend::{Backend, Cell, Param};
use rusqlite::types::ValueRef;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

pub(crate) struct Sqlite {
    connection: rusqlite::Connection,
    /// When the statement running now must have finished, in milliseconds since the
    /// epoch: SQLite's progress handler interrupts it past then.
    deadline: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, deactivated BIGINT, exports_digest TEXT, \
     exports_at BIGINT, facts TEXT, facts_at BIGINT)",
        "CREATE TABLE exports (id INTEGER PRIMARY KEY AUTOINCREMENT, \
     node TEXT NOT NULL REFERENCES nodes (name), type TEXT NOT NULL, title TEXT NOT NULL, \
     body TEXT NOT NULL, UNIQUE (node, type, title))",
        "CREATE INDEX exports_by_type ON exports (type, node)",
        "CREATE TABLE export_values (export BIGINT NOT NULL REFERENCES exports (id) ON DELETE CASCADE, \
     attribute TEXT NOT NULL, key TEXT NOT NULL)",
        "CREATE INDEX export_values_by_key ON export_values (attribute, key, export)",
        "CREATE INDEX export_values_by_export ON export_values (export)",
        "CREATE TABLE reports (id INTEGER PRIMARY KEY AUTOINCREMENT, node TEXT NOT NULL, \
     at BIGINT NOT NULL, status TEXT NOT NULL, body TEXT NOT NULL)",
        "CREATE INDEX reports_by_node ON reports (node, at)",
        "CREATE INDEX reports_by_time ON reports (at)",
    ],
    // Version 2 is PostgreSQL's row-level security; one SQLite file is root's alone.
    &[],
    // Version 3: a report's mode, counts and duration beside it, for listings; '' for
    // the reports stored before.
    &["ALTER TABLE reports ADD COLUMN figures TEXT NOT NULL DEFAULT ''"],
];

impl Sqlite {
    /// Opens the store file at `path`, creating it `0600` if there is none. Its
    /// directory is the caller's to trust (the state directory, checked private); the
    /// file itself must be a regular file of this user that no one else can read.
    pub(crate) fn open(path: &Path) -> Result<Sqlite, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(open_flags())
            .open(path)
            .map_err(|error| format!("cannot open it: {error}"))?;
        let metadata = file
            .metadata()
            .map_err(|error| format!("cannot read what it is: {error}"))?;
        if !metadata.file_type().is_file() {
            return Err("it is not a regular file".to_owned());
        }
        if metadata.uid() != rustix::process::geteuid().as_raw() {
            return Err(format!(
                "it belongs to user {}, not to the user running wconverge; remove it or \
                 `chown` it",
                metadata.uid()
            ));
        }
        if metadata.mode() & 0o077 != 0 {
            return Err(format!(
                "others may read or write it (mode {:04o}); it holds every node's facts and \
                 reports: `chmod 600` it",
                metadata.mode() & 0o7777
            ));
        }
        drop(file);
        let connection = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
                | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(|error| error.to_string())?;
        // The busy timeout bounds a wait for another writer's lock; this bounds how long
        // a statement runs.
        let deadline = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let watched = std::sync::Arc::clone(&deadline);
        connection.progress_handler(
            10_000,
            Some(move || now_ms() > watched.load(std::sync::atomic::Ordering::Relaxed)),
        );
        connection
            .busy_timeout(STATEMENT_DEADLINE)
            .map_err(|error| error.to_string())?;
        // Write-ahead log: readers never wait; `NORMAL`: a commit is not synced (a crash
        // may lose the last runs' rows, never the file's consistency). The log is copied
        // and removed at close: kept for the next run (`NO_CKPT_ON_CLOSE`), each run
        // rebuilt its index from the whole log and copied all of it again (docs/store.md).
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
            )
            .map_err(|error| busy_or(&error))?;
        Ok(Sqlite {
            connection,
            deadline,
        })
    }

    /// Gives the next statement [`STATEMENT_DEADLINE`] to run.
    fn arm(&self) {
        let deadline = now_ms()
            .saturating_add(u64::try_from(STATEMENT_DEADLINE.as_millis()).unwrap_or(u64::MAX));
        self.deadline
            .store(deadline, std::sync::atomic::Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

fn open_flags() -> i32 {
    // Never follow a link planted where the store file should be, nor wait on a FIFO.
    (rustix::fs::OFlags::NOFOLLOW
        | rustix::fs::OFlags::CLOEXEC
        | rustix::fs::OFlags::NONBLOCK
        | rustix::fs::OFlags::NOCTTY)
        .bits() as i32
}

/// SQLite's message, or what a busy store means.
fn busy_or(error: &rusqlite::Error) -> String {
    match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => format!(
            "another run held it for {} s (the limit): {error}",
            STATEMENT_DEADLINE.as_secs()
        ),
        Some(rusqlite::ErrorCode::OperationInterrupted) => format!(
            "a statement ran for more than {} s (the limit)",
            STATEMENT_DEADLINE.as_secs()
        ),
        _ => error.to_string(),
    }
}

/// `$N` parameters as SQLite's `?N`.
fn rewrite(sql: &str) -> String {
    sql.replace('$', "?")
}

fn bind(params: &[Param]) -> Vec<rusqlite::types::Value> {
    params
        .iter()
        .map(|param| match param {
            Param::Text(text) => rusqlite::types::Value::Text(text.clone()),
            Param::Int(number) => rusqlite::types::Value::Integer(*number),
        })
        .collect()
}

impl Backend for Sqlite {
    fn batch(&mut self, sql: &str) -> Result<(), String> {
        self.arm();
        self.connection
            .execute_batch(sql)
            .map_err(|error| busy_or(&error))
    }

    fn begin_statement(&self) -> &'static str {
        // The write lock at once: two writers never deadlock upgrading their locks.
        "BEGIN IMMEDIATE"
    }

    fn execute(&mut self, sql: &str, params: &[Param]) -> Result<u64, String> {
        self.arm();
        let mut statement = self
            .connection
            .prepare_cached(&rewrite(sql))
            .map_err(|error| busy_or(&error))?;
        let changed = statement
            .execute(rusqlite::params_from_iter(bind(params)))
            .map_err(|error| busy_or(&error))?;
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &str, params: &[Param]) -> Result<Vec<Vec<Cell>>, String> {
        self.arm();
        let mut statement = self
            .connection
            .prepare_cached(&rewrite(sql))
            .map_err(|error| busy_or(&error))?;
        let columns = statement.column_count();
        let mut rows = statement
            .query(rusqlite::params_from_iter(bind(params)))
            .map_err(|error| busy_or(&error))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|error| busy_or(&error))? {
            let mut cells = Vec::with_capacity(columns);
            for column in 0..columns {
                cells.push(
                    match row.get_ref(column).map_err(|error| error.to_string())? {
                        ValueRef::Null => Cell::Null,
                        ValueRef::Integer(number) => Cell::Int(number),
                        ValueRef::Text(text) => {
                            Cell::Text(String::from_utf8_lossy(text).into_owned())
                        }
                        ValueRef::Real(_) | ValueRef::Blob(_) => {
                            return Err("a column holds a value of an unexpected type".to_owned());
                        }
                    },
                );
            }
            out.push(cells);
        }
        Ok(out)
    }

    fn lock_schema(&mut self) -> Result<(), String> {
        // `BEGIN IMMEDIATE` holds the file's write lock already.
        Ok(())
    }

    fn migrations(&self) -> &'static [&'static [&'static str]] {
        MIGRATIONS
    }
}
