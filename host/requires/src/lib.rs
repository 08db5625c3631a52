//! Resource programs, with exactly the semantics of PlainBox's resource programs (from
//! Canonical's Checkbox): one Python-like expression per line over groups of fact
//! records.
//!
//! A program is one expression per non-empty line. Each expression names exactly one
//! group of fact records (`package`, `os`...) and reads their attributes
//! (`package.name`); it is evaluated once per record of its group and holds if it holds
//! for any record (an implicit `any()`), unless it is wrapped in `all(...)`, which asks
//! that it hold for every record. An error in one evaluation counts as false for that
//! record. Lines are joined by an implicit `and`. An unknown or empty group makes its
//! line false. Every value a record holds is a string; `int()`, `float()` and `bool()`
//! convert.
//!
//! The syntax is the subset of Python's expressions PlainBox allows: literals
//! (strings, numbers, `True`, `False`, lists, tuples), `and`/`or`/`not`, comparisons,
//! binary and unary operators, `in`, attribute access on the group variable, and the
//! calls `int()`, `float()`, `bool()` and `all()`. Everything else is refused before any
//! evaluation, with the line, the column and what to write instead.
#![warn(clippy::disallowed_methods)]

mod eval;
mod syntax;

use std::collections::BTreeMap;
use std::fmt;
use syntax::{Expr, Parser};

/// One fact record: string attributes, in the order the source gave them.
pub type Record = Vec<(String, String)>;

/// Fact records by group name (`package` → every installed package).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    pub groups: BTreeMap<String, Vec<Record>>,
}

/// A parsed, checked program.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    lines: Vec<Line>,
}

#[derive(Debug, Clone, PartialEq)]
struct Line {
    /// 1-based line number in the program text.
    number: usize,
    text: String,
    group: String,
    expr: Expr,
    /// Wrapped in `all(...)`: every record must satisfy it.
    all: bool,
}

/// Why a program is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramError {
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
    pub help: Option<String>,
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProgramError {}

/// What a program decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub holds: bool,
    /// The first line that did not hold: its number and text.
    pub failed: Option<(usize, String)>,
    /// The evaluation did more work than a program may and was stopped: the program
    /// does not hold, but because it was too expensive, not because the facts say so.
    pub exhausted: bool,
}

/// A program longer than this is refused.
const MAX_LINES: usize = 1000;

impl Program {
    /// Parses and checks every line; the errors of all lines are returned together.
    pub fn parse(text: &str) -> Result<Program, Vec<ProgramError>> {
        let mut lines = Vec::new();
        let mut errors = Vec::new();
        for (index, text) in text.lines().enumerate() {
            let number = index + 1;
            let trimmed = text.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if lines.len() + errors.len() >= MAX_LINES {
                errors.push(ProgramError {
                    line: number,
                    column: 1,
                    message: format!("a program has at most {MAX_LINES} lines"),
                    help: None,
                });
                break;
            }
            match Parser::line(number, text).and_then(|expr| checked(number, text, expr)) {
                Ok(line) => lines.push(line),
                Err(error) => errors.push(error),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        if lines.is_empty() {
            return Err(vec![ProgramError {
                line: 1,
                column: 1,
                message: "the program is empty".to_owned(),
                help: Some(
                    "a requirement needs at least one expression, like `package.name == 'fwts'`"
                        .to_owned(),
                ),
            }]);
        }
        Ok(Program { lines })
    }

    /// The groups the program reads, in order of first use.
    pub fn groups(&self) -> Vec<&str> {
        let mut groups: Vec<&str> = Vec::new();
        for line in &self.lines {
            if !groups.contains(&line.group.as_str()) {
                groups.push(&line.group);
            }
        }
        groups
    }

    /// Evaluates the program over `facts`.
    pub fn evaluate(&self, facts: &Facts) -> Verdict {
        let budget = std::cell::Cell::new(eval::BUDGET);
        for line in &self.lines {
            let records = facts
                .groups
                .get(&line.group)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let holds = |record: &Record| {
                eval::eval(&line.expr, record, &budget).is_some_and(|value| value.truthy())
            };
            let line_holds = !records.is_empty()
                && if line.all {
                    records.iter().all(holds)
                } else {
                    records.iter().any(holds)
                };
            if !line_holds {
                return Verdict {
                    holds: false,
                    failed: Some((line.number, line.text.trim().to_owned())),
                    exhausted: budget.get() == 0,
                };
            }
        }
        Verdict {
            holds: true,
            failed: None,
            exhausted: false,
        }
    }
}

/// The checks before any evaluation: exactly one group variable, used only as an
/// object with attributes, and `all()` only around a whole line.
fn checked(number: usize, text: &str, expr: Expr) -> Result<Line, ProgramError> {
    let (expr, all) = match expr {
        Expr::All(inner, _) => (*inner, true),
        other => (other, false),
    };
    let mut variables: Vec<String> = Vec::new();
    let mut problem: Option<ProgramError> = None;
    visit(&expr, &mut |node| match node {
        Expr::Attr(variable, _) if !variables.contains(variable) => {
            variables.push(variable.clone());
        }
        Expr::Name(name, column) => {
            problem.get_or_insert(ProgramError {
                line: number,
                column: *column,
                message: format!(
                    "`{name}` must be used as a group with attributes, like `{name}.name`"
                ),
                help: None,
            });
        }
        Expr::All(_, column) => {
            problem.get_or_insert(ProgramError {
                line: number,
                column: *column,
                message: "all() may only wrap a whole line".to_owned(),
                help: Some("write `all(package.name != 'x')` on a line of its own".to_owned()),
            });
        }
        _ => {}
    });
    if let Some(problem) = problem {
        return Err(problem);
    }
    let column = text.len() - text.trim_start().len() + 1;
    match variables.as_slice() {
        [group] => Ok(Line {
            number,
            text: text.to_owned(),
            group: group.clone(),
            expr,
            all,
        }),
        [] => Err(ProgramError {
            line: number,
            column,
            message: "the expression uses no group variable".to_owned(),
            help: Some(
                "each line reads one group, like `package.name == 'fwts'`; to always apply, \
                 leave the requirement out"
                    .to_owned(),
            ),
        }),
        several => Err(ProgramError {
            line: number,
            column,
            message: format!(
                "the expression uses {} group variables ({}); each line may use exactly one",
                several.len(),
                several.join(", ")
            ),
            help: Some(
                "split it into one line per group: lines are joined by an implicit `and`"
                    .to_owned(),
            ),
        }),
    }
}

fn visit(expr: &Expr, f: &mut impl FnMut(&Expr)) {
    f(expr);
    match expr {
        Expr::List(items) | Expr::Tuple(items) => items.iter().for_each(|item| visit(item, f)),
        Expr::Call(_, inner) | Expr::Not(inner) | Expr::Unary(_, inner) | Expr::All(inner, _) => {
            visit(inner, f)
        }
        Expr::And(left, right) | Expr::Or(left, right) | Expr::Binary(_, left, right) => {
            visit(left, f);
            visit(right, f);
        }
        Expr::Compare(first, rest) => {
            visit(first, f);
            rest.iter().for_each(|(_, item)| visit(item, f));
        }
        Expr::Str(_)
        | Expr::Int(_)
        | Expr::Float(_)
        | Expr::Bool(_)
        | Expr::Name(..)
        | Expr::Attr(..) => {}
    }
}

#[cfg(test)]
mod tests;
