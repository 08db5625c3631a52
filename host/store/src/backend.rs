//! What the store needs of a database: statements with parameters, rows of cells,
//! transactions. Statements are written with PostgreSQL's `$N` parameters; the SQLite
//! back end rewrites them as `?N`.

/// A statement's parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// A cell of a row read back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

impl Cell {
    pub(crate) fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(value) => Some(*value),
            _ => None,
        }
    }
}

pub(crate) trait Backend {
    /// Runs statements without parameters or results (`BEGIN`, `COMMIT`).
    fn batch(&mut self, sql: &str) -> Result<(), String>;
    /// The statement that starts a transaction.
    fn begin_statement(&self) -> &'static str {
        "BEGIN"
    }
    fn begin(&mut self) -> Result<(), String> {
        let statement = self.begin_statement();
        self.batch(statement)
    }
    fn commit(&mut self) -> Result<(), String> {
        self.batch("COMMIT")
    }
    fn rollback(&mut self) -> Result<(), String> {
        self.batch("ROLLBACK")
    }
    /// Runs a statement; returns how many rows it changed.
    fn execute(&mut self, sql: &str, params: &[Param]) -> Result<u64, String>;
    /// Runs a query; returns its rows.
    fn query(&mut self, sql: &str, params: &[Param]) -> Result<Vec<Vec<Cell>>, String>;
    /// Within a transaction: keeps other processes from migrating at the same time.
    fn lock_schema(&mut self) -> Result<(), String>;
    /// The statements of each schema version, from version 1.
    fn migrations(&self) -> &'static [&'static [&'static str]];
}
