//! `file_line`: one line in a text file, present or absent, as Puppet's `file_line`.
//!
//! ```text
//! file_line { 'sshd: no root login':
//!   path  => '/etc/ssh/sshd_config',
//!   line  => 'PermitRootLogin no',
//!   match => '^#?PermitRootLogin\s',
//! }
//! ```
//!
//! - `ensure => present` (the default): if `line` is in the file, nothing changes.
//!   Otherwise the lines that `match` (a regular expression) finds are replaced by
//!   `line` (the first one only, unless `multiple`), or, when none matches, `line` is
//!   appended.
//! - `ensure => absent`: every line equal to `line` is removed, or, with `match` and
//!   `match_for_absence`, every line `match` finds.
//!
//! The file is rewritten whole, beside itself, and renamed over the old one, keeping its
//! mode and owner: a reader sees the old file or the new one, never half of either. The
//! file must exist; this provider does not create it (declare a `file` for that).
//!
//! The policy grants this plugin the directories it may edit files in; for each
//! resource the host opens only the directory that holds `path`.

use wconverge_sdk::{
    Attribute, Change, DataType, PathAccess, Provider, ProviderInfo, Resource, Result, State,
    TypeSchema, Value, export_provider, metadata,
};

struct FileLine;

/// What the file holds now, and what it should hold.
struct Edit {
    current: String,
    wanted: String,
}

fn compile(pattern: &str) -> Result<regex_lite::Regex> {
    regex_lite::Regex::new(pattern)
        .map_err(|error| format!("`match` is not a valid regular expression: {error}").into())
}

/// The file's content after the resource is applied, computed from its content now.
fn edit(resource: &Resource, current: String) -> Result<Edit> {
    let line = resource.require_str("line")?;
    let absent = resource.get_str("ensure") == Some("absent");
    let pattern = resource.get_str("match").map(compile).transpose()?;
    let multiple = resource.get_bool("multiple").unwrap_or(false);
    let lines: Vec<&str> = current.lines().collect();
    let kept: Vec<String> = if absent {
        let by_match = resource.get_bool("match_for_absence").unwrap_or(false);
        lines
            .iter()
            .filter(|existing| match (&pattern, by_match) {
                (Some(pattern), true) => !pattern.is_match(existing),
                _ => **existing != line,
            })
            .map(|existing| (*existing).to_owned())
            .collect()
    } else if lines.contains(&line) {
        lines
            .iter()
            .map(|existing| (*existing).to_owned())
            .collect()
    } else {
        let mut replaced = 0;
        let mut kept: Vec<String> = lines
            .iter()
            .map(|existing| {
                let hit = pattern.as_ref().is_some_and(|p| p.is_match(existing));
                if hit && (replaced == 0 || multiple) {
                    replaced += 1;
                    line.to_owned()
                } else {
                    (*existing).to_owned()
                }
            })
            .collect();
        if replaced == 0 {
            kept.push(line.to_owned());
        }
        kept
    };
    let wanted = if kept.iter().map(String::as_str).eq(lines.iter().copied()) {
        current.clone()
    } else if kept.is_empty() {
        String::new()
    } else {
        kept.join("\n") + "\n"
    };
    Ok(Edit { current, wanted })
}

fn read(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => {
            format!("`{path}` does not exist; declare a `file` resource that creates it").into()
        }
        _ => format!("cannot read `{path}`: {error}").into(),
    })
}

impl Provider for FileLine {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("file_line", env!("CARGO_PKG_VERSION")).with_type(
            TypeSchema::new(
                "file_line",
                "One line in a text file, present or absent; the file must exist.",
            )
            .attribute(Attribute::new("name", DataType::String, "A name for the line.").namevar())
            .attribute(
                Attribute::new(
                    "ensure",
                    DataType::enumeration(["present", "absent"]),
                    "Whether the line is in the file.",
                )
                .default("present"),
            )
            .attribute(
                Attribute::new("path", DataType::String, "Absolute path of the file.")
                    .required()
                    .parameter()
                    .path_access(PathAccess::ReadWrite)
                    // Checks in wconverge's manifest language: the host evaluates them
                    // before the run, for a provider in any language.
                    .check(r#"{ if $it !~ /^\// { "`path` `${it}` is not an absolute path" } }"#),
            )
            .attribute(
                Attribute::new("line", DataType::String, "The line, without its newline.")
                    .required()
                    .check(r#"{ if $it =~ /\n/ { "`line` is one line: it may not contain a newline" } }"#),
            )
            .attribute(
                Attribute::new(
                    "match",
                    DataType::String,
                    "A regular expression: lines it finds are replaced by `line`.",
                )
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "multiple",
                    DataType::Boolean,
                    "Replace every line `match` finds, not only the first.",
                )
                .parameter()
                .default(false),
            )
            .attribute(
                Attribute::new(
                    "match_for_absence",
                    DataType::Boolean,
                    "With `ensure => absent`, remove the lines `match` finds.",
                )
                .parameter()
                .default(false),
            )
            .invariant(
                Some("`multiple` replaces the lines `match` finds: set `match` too"),
                "!($multiple and $match == undef)",
            ),
        )
    }

    fn validate(resource: &Resource) -> Vec<String> {
        // `line` and `path` are checked by the schema's checks; what they cannot say
        // (this provider's regular expressions) is checked here.
        let mut problems = Vec::new();
        if let Some(Err(error)) = resource.get_str("match").map(compile) {
            problems.push(error.message().to_owned());
        }
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let edit = edit(resource, read(resource.require_str("path")?)?)?;
        // The file is as wanted: the line is where `ensure` wants it.
        let as_wanted = edit.current == edit.wanted;
        let absent_wanted = resource.get_str("ensure") == Some("absent");
        let ensure = if as_wanted == absent_wanted {
            "absent"
        } else {
            "present"
        };
        Ok(State::new().with("ensure", ensure))
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        let wanted = resource.get_str("ensure").unwrap_or("present");
        let now = current.get_str("ensure").unwrap_or("absent");
        if now == wanted {
            return Ok(Vec::new());
        }
        let path = resource.require_str("path")?;
        let message = if wanted == "present" {
            format!("line added to {path}")
        } else {
            format!("line removed from {path}")
        };
        Ok(vec![Change::new(
            "ensure",
            Some(Value::from(now)),
            Some(Value::from(wanted)),
            message,
        )])
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let path = resource.require_str("path")?;
        let edit = edit(resource, read(path)?)?;
        let stat = metadata::stat(path)?
            .ok_or_else(|| format!("`{path}` disappeared while it was being edited"))?;
        // Write beside the file, give the copy the file's mode and owner, then rename
        // it over the file. wconverge applies one resource at a time, so one name will
        // do; a copy left by an interrupted run is replaced.
        let temporary = format!("{path}.wconverge-new");
        let _ = std::fs::remove_file(&temporary);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .and_then(|mut file| std::io::Write::write_all(&mut file, edit.wanted.as_bytes()))
            .map_err(|error| format!("cannot write `{temporary}`: {error}").into())
            .and_then(|()| metadata::set_mode(&temporary, stat.mode & 0o7777))
            .and_then(|()| {
                metadata::set_owner(&temporary, stat.owner.as_deref(), stat.group.as_deref())
            })
            .and_then(|()| {
                std::fs::rename(&temporary, path)
                    .map_err(|error| format!("cannot replace `{path}`: {error}").into())
            });
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written
    }
}

export_provider!(FileLine);
