//! The `crontab` provider of Puppet's `cron` type: a user's crontab, read with `crontab
//! -u USER -l` and written whole with `crontab -u USER -` (the program installs it
//! atomically, as cron expects), each job marked by the line `# Puppet Name: NAME` above
//! it, as Puppet marks them, so crontabs Puppet wrote are taken over unchanged.

use wconverge_sdk::process::Command;
use wconverge_sdk::{
    Attribute, Change, DataType, Error, Provider, ProviderInfo, Resource, Result, State,
    TypeSchema, Value, export_provider,
};

const CRONTAB: &str = "/usr/bin/crontab";
const MARKER: &str = "# Puppet Name: ";

struct Cron;

const TIME_FIELDS: [&str; 5] = ["minute", "hour", "monthday", "month", "weekday"];

fn schema() -> TypeSchema {
    let mut schema = TypeSchema::new(
        "cron",
        "A job of a user's crontab, marked by its name. Provider `crontab`.",
    )
    .attribute(Attribute::new("name", DataType::String, "The job's name.").namevar())
    .attribute(Attribute::ensure_present(
        "Whether the job is in the crontab.",
    ))
    .attribute(Attribute::new(
        "command",
        DataType::String,
        "The command cron runs (one line).",
    ))
    .attribute(
        Attribute::new("user", DataType::String, "Whose crontab (default root).")
            .default("root")
            .refers_to("user"),
    )
    .attribute(Attribute::new(
        "special",
        DataType::enumeration([
            "reboot", "yearly", "annually", "monthly", "weekly", "daily", "midnight", "hourly",
        ]),
        "A schedule by name (`@daily`), instead of the time fields.",
    ))
    .attribute(
        Attribute::new(
            "environment",
            DataType::String,
            "Lines `NAME=value` set for the job (written above it).",
        )
        .many(),
    );
    for field in TIME_FIELDS {
        schema = schema.attribute(
            Attribute::new(
                field,
                DataType::OneOf(vec![DataType::Integer, DataType::String]),
                "A cron time field (`*`, `5`, `1-5`, `*/10`, `mon`); an array is a list. \
                 `*` when not set.",
            )
            .many(),
        );
    }
    schema.attribute(
        Attribute::new(
            "line",
            DataType::String,
            "The job's line, as it is in the crontab.",
        )
        .read_only(),
    )
}

fn field(resource: &Resource, name: &str) -> String {
    match resource.get(name) {
        None => "*".to_owned(),
        Some(value) => value
            .as_list()
            .into_iter()
            .map(|item| match item {
                Value::Integer(n) => n.to_string(),
                other => other.as_str().unwrap_or("*").to_owned(),
            })
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// The entry's lines: the marker, its environment, the job.
fn entry(resource: &Resource) -> Result<Vec<String>> {
    let name = resource.require_str("name")?;
    let command = resource.require_str("command")?;
    let mut lines = vec![format!("{MARKER}{name}")];
    for variable in environment(resource) {
        lines.push(variable);
    }
    let schedule = match resource.get_str("special") {
        Some(special) => format!("@{special}"),
        None => TIME_FIELDS
            .iter()
            .map(|name| field(resource, name))
            .collect::<Vec<_>>()
            .join(" "),
    };
    lines.push(format!("{schedule} {command}"));
    Ok(lines)
}

fn environment(resource: &Resource) -> Vec<String> {
    resource.get_strings("environment").unwrap_or_default()
}

/// Where the job named `name` is in the crontab's lines: its marker, and the end of
/// its entry (the marker, the environment lines after it, and one job line).
fn find(lines: &[String], name: &str) -> Option<(usize, usize)> {
    let start = lines.iter().position(|line| {
        line.strip_prefix(MARKER)
            .is_some_and(|found| found.trim() == name)
    })?;
    let mut end = start + 1;
    while end < lines.len() && is_variable(&lines[end]) {
        end += 1;
    }
    Some((start, (end + 1).min(lines.len())))
}

fn is_variable(line: &str) -> bool {
    line.split_once('=').is_some_and(|(name, _)| {
        let name = name.trim();
        !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.bytes().next().is_some_and(|b| b.is_ascii_digit())
    })
}

fn read(user: &str) -> Result<Vec<String>> {
    let output = Command::new(CRONTAB).args(["-u", user, "-l"]).run()?;
    if !output.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        if said.contains("no crontab for") {
            return Ok(Vec::new());
        }
        return Err(Error::new(format!(
            "crontab -u {user} -l failed: {}",
            said.trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

fn write(user: &str, lines: &[String]) -> Result<()> {
    let mut text = lines.join("\n");
    text.push('\n');
    let output = Command::new(CRONTAB)
        .args(["-u", user, "-"])
        .stdin(text.into_bytes())
        .run()?;
    if output.success() {
        Ok(())
    } else {
        Err(Error::new(format!(
            "crontab -u {user} - failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

fn is_user(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.".contains(&b))
}

impl Provider for Cron {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("cron", env!("CARGO_PKG_VERSION")).with_type(schema())
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = Vec::new();
        let name = resource.get_str("name").unwrap_or_default();
        if name.contains(['\n', '\r']) || name.trim().is_empty() {
            problems.push("a job's name is one line of text".to_owned());
        }
        let user = resource.get_str("user").unwrap_or_default();
        if !is_user(user) {
            problems.push(format!("`{user}` is not a user name"));
        }
        let present = resource.get_str("ensure") != Some("absent");
        match resource.get_str("command") {
            Some(command) if command.contains('\n') || command.contains('\r') => {
                problems.push("command must be one line".to_owned());
            }
            None if present => problems.push("a job needs a `command`".to_owned()),
            _ => {}
        }
        for name in TIME_FIELDS {
            if let Some(given) = resource.get(name) {
                let items = given.as_list();
                let well_formed = !items.is_empty()
                    && items.iter().all(|item| match item {
                        Value::Integer(n) => *n >= 0,
                        Value::String(text) => !text.is_empty(),
                        _ => false,
                    });
                if !well_formed {
                    problems.push(format!(
                        "{name} must be a non-empty cron time field, or a non-empty list of them"
                    ));
                }
            }
            let value = field(resource, name);
            if !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"*/,-".contains(&b))
            {
                problems.push(format!("{name} `{value}` is not a cron time field"));
            }
            if resource.get(name).is_some() && resource.get("special").is_some() {
                problems.push(format!("set `special` or `{name}`, not both"));
            }
        }
        for variable in environment(resource) {
            if !is_variable(&variable) || variable.contains('\n') {
                problems.push(format!(
                    "environment `{variable}` is not a line `NAME=value`"
                ));
            }
        }
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let name = resource.require_str("name")?;
        let lines = read(resource.require_str("user")?)?;
        Ok(match find(&lines, name) {
            Some((start, end)) => State::new()
                .with("ensure", "present")
                .with("line", lines[start + 1..end].join("\n")),
            None => State::new().with("ensure", "absent"),
        })
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        let exists = current.get_str("ensure") == Some("present");
        let user = resource.require_str("user")?;
        if resource.get_str("ensure") == Some("absent") {
            return Ok(if exists {
                vec![Change::removed(format!("removed from {user}'s crontab"))]
            } else {
                Vec::new()
            });
        }
        let wanted = entry(resource)?[1..].join("\n");
        let found = current.get_str("line").unwrap_or_default();
        Ok(if !exists {
            vec![Change::created(format!(
                "added to {user}'s crontab: {wanted}"
            ))]
        } else if found != wanted {
            vec![Change::new(
                "line",
                Some(found.into()),
                Some(wanted.clone().into()),
                format!("changed '{found}' to '{wanted}'"),
            )]
        } else {
            Vec::new()
        })
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let name = resource.require_str("name")?;
        let user = resource.require_str("user")?;
        let mut lines = read(user)?;
        let found = find(&lines, name);
        if resource.get_str("ensure") == Some("absent") {
            if let Some((start, end)) = found {
                lines.drain(start..end);
            }
        } else {
            let entry = entry(resource)?;
            match found {
                Some((start, end)) => {
                    lines.splice(start..end, entry);
                }
                None => lines.extend(entry),
            }
        }
        write(user, &lines)
    }
}

export_provider!(Cron);

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str) -> Resource {
        Resource::new("cron", name)
            .with("name", name)
            .with("user", "root")
            .with("command", "/usr/local/bin/backup")
    }

    #[test]
    fn an_entry_is_its_marker_environment_and_line() {
        let resource = job("backup")
            .with("minute", 0)
            .with("hour", Value::Array(vec![2.into(), 14.into()]))
            .with("environment", "MAILTO=ops");
        assert_eq!(
            entry(&resource).expect("entry"),
            vec![
                "# Puppet Name: backup",
                "MAILTO=ops",
                "0 2,14 * * * /usr/local/bin/backup"
            ]
        );
        let lines: Vec<String> = [
            "# other",
            "# Puppet Name: backup",
            "MAILTO=ops",
            "0 2 * * * x",
            "5 * * * * y",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(find(&lines, "backup"), Some((1, 4)));
        assert_eq!(find(&lines, "nothing"), None);
    }

    #[test]
    fn hostile_values_are_refused() {
        assert_eq!(
            validate_of(job("x").with("command", "a\n* * * * * evil")),
            1
        );
        assert_eq!(validate_of(job("x").with("minute", "5 * * * * evil #")), 1);
        assert_eq!(validate_of(job("x").with("user", "-r")), 1);
        assert_eq!(validate_of(job("x").with("environment", "PATH")), 1);
        assert_eq!(validate_of(job("x")), 0);
    }

    fn validate_of(resource: Resource) -> usize {
        Cron::validate(&resource).len()
    }
}
