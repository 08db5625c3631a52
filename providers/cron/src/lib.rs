//! The `crontab` provider of Puppet's `cron` type: a user's crontab, read with `crontab
//! -u USER -l` and written whole with `crontab -u USER -` (the program installs it
//! atomically, as cron expects), each job marked by the line `# Puppet Name: NAME` above
//! it, as Puppet marks them, so crontabs Puppet wrote are taken over unchanged.

use wconverge_sdk::process::Command;
use wconverge_sdk::shown;
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
        "A job of a user's crontab, marked by its name. Provider `crontab`. Each line is \
         checked before it is written against cron's grammar (one printable line within \
         cron's 998 bytes, no bare `%`, no command starting with `*`), and `crontab` itself \
         checks the whole.",
    )
    // Debian's crontabs, which `crontab` rewrites.
    .watches("/var/spool/cron/crontabs/{user}")
    .attribute(Attribute::new("name", DataType::String, "The job's name.").namevar())
    .attribute(Attribute::ensure_present(
        "Whether the job is in the crontab.",
    ))
    .attribute(Attribute::new(
        "command",
        DataType::String,
        "The command, as crontab text: one line; cron reads `\\%` as a percent sign and \
         `\\\\` as a backslash, and feeds what follows a bare `%` to the command as \
         standard input (refused here).",
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
    schema
        .attribute(
            Attribute::new(
                "line",
                DataType::String,
                "The job's lines, as they are in the crontab.",
            )
            .read_only(),
        )
        .attribute(
            Attribute::new(
                "schedule",
                DataType::String,
                "The job's schedule, as it is in the crontab.",
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

/// A job line's schedule (`@daily`, or five time fields joined by one space) and
/// command, split where cron splits it.
fn split_job(job: &str) -> (String, &str) {
    let fields = if job.starts_with('@') { 1 } else { 5 };
    let mut rest = job.trim_start_matches([' ', '\t']);
    let mut schedule = Vec::new();
    for _ in 0..fields {
        let end = rest.find([' ', '\t']).unwrap_or(rest.len());
        schedule.push(&rest[..end]);
        rest = rest[end..].trim_start_matches([' ', '\t']);
    }
    (schedule.join(" "), rest)
}

fn strings_value(strings: &[String]) -> Value {
    Value::Array(strings.iter().map(|s| Value::from(s.as_str())).collect())
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

/// The longest command and environment line cron takes: Debian's cron refuses a longer
/// command (`command too long`) and keeps environment values in buffers of the same
/// size.
const MAX_LINE: usize = 998;

/// The longest job name: it is only a comment, but one wconverge reads back.
const MAX_NAME: usize = 255;

/// Why `name` cannot name a job, if it cannot: it is written in the marker comment and
/// must read back byte for byte (the marker is read without spaces at its ends).
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Some(format!("a job's name is 1 to {MAX_NAME} bytes"));
    }
    if name.chars().any(char::is_control) || name.contains(['\u{2028}', '\u{2029}']) {
        return Some(format!(
            "job name `{}` holds a control character or line break: a name is one line of \
             printable text",
            shown(name)
        ));
    }
    if name.trim() != name {
        return Some(format!(
            "job name `{}` has spaces at an end, which the crontab does not keep: remove them",
            shown(name)
        ));
    }
    None
}

/// Why `command` cannot be a job's command, if it cannot: one line of printable text
/// (a tab allowed), no spaces at its ends (cron drops them), at most [`MAX_LINE`]
/// bytes, and every `%` written `\%` (cron ends the command at a bare `%` and feeds the
/// rest to it as standard input).
fn command_problem(command: &str) -> Option<String> {
    let text = shown(command);
    if command.is_empty() || command.len() > MAX_LINE {
        return Some(format!(
            "a command is 1 to {MAX_LINE} bytes (cron's limit); this one is {}",
            command.len()
        ));
    }
    if command.chars().any(|c| c.is_control() && c != '\t')
        || command.contains(['\u{2028}', '\u{2029}'])
    {
        return Some(format!(
            "command `{text}` holds a control character (a line break, NUL...): a command \
             is one line of printable text"
        ));
    }
    if command.trim() != command {
        return Some(format!(
            "command `{text}` has spaces at an end, which cron drops: remove them"
        ));
    }
    if command.starts_with('*') {
        return Some(format!(
            "command `{text}` starts with `*`, which cron takes for a sixth time field and \
             refuses: start it otherwise (`/usr/bin/env *...`, or a path)"
        ));
    }
    // Cron's own reading: a `\` escapes the character after it; only `\%` means `%`.
    let mut escaped = false;
    for c in command.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '%' => {
                return Some(format!(
                    "command `{text}` has a bare `%`: cron ends the command there and feeds \
                     the rest to it as standard input; write `\\%` for a percent sign, or \
                     pass input another way"
                ));
            }
            _ => {}
        }
    }
    None
}

/// Why `variable` cannot be an environment line, if it cannot: `NAME=value`, the name
/// letters, digits and `_`, the value printable, not empty, without spaces at its ends
/// (cron drops them) and, when it starts with a quote, quoted whole (cron removes the
/// quotes).
fn environment_problem(variable: &str) -> Option<String> {
    let text = shown(variable);
    let Some((name, value)) = variable.split_once('=') else {
        return Some(format!("environment `{text}` is not a line `NAME=value`"));
    };
    if name.is_empty()
        || name.starts_with(|c: char| c.is_ascii_digit())
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Some(format!(
            "environment `{text}`: a name is letters, digits and `_`, not starting with a \
             digit, right before the `=`"
        ));
    }
    if variable.len() > MAX_LINE {
        return Some(format!(
            "environment `{}...` is longer than {MAX_LINE} bytes (cron's limit)",
            shown(name)
        ));
    }
    if value.is_empty()
        || value.trim() != value
        || value.chars().any(char::is_control)
        || value.contains(['\u{2028}', '\u{2029}'])
    {
        return Some(format!(
            "environment `{text}`: the value is printable text, not empty, without spaces \
             at its ends (cron drops them; quote the value to keep them)"
        ));
    }
    for quote in ['"', '\''] {
        if value.starts_with(quote)
            && (value.len() < 2
                || !value.ends_with(quote)
                || value[1..value.len() - 1].contains(quote))
        {
            return Some(format!(
                "environment `{text}`: a value that starts with {quote} is quoted whole, \
                 with no {quote} inside (cron removes the quotes)"
            ));
        }
    }
    None
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
        problems.extend(name_problem(resource.get_str("name").unwrap_or_default()));
        let user = resource.get_str("user").unwrap_or_default();
        if !is_user(user) {
            problems.push(format!("`{user}` is not a user name"));
        }
        let present = resource.get_str("ensure") != Some("absent");
        match resource.get_str("command") {
            Some(command) => problems.extend(command_problem(command)),
            None if present => problems.push("a job needs a `command`".to_owned()),
            None => {}
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
        problems.extend(
            environment(resource)
                .iter()
                .filter_map(|variable| environment_problem(variable)),
        );
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let name = resource.require_str("name")?;
        let lines = read(resource.require_str("user")?)?;
        Ok(match find(&lines, name) {
            Some((start, end)) => {
                let entry = &lines[start + 1..end];
                let (variables, job) = match entry.split_last() {
                    Some((job, variables)) if !is_variable(job) => (variables, job.as_str()),
                    _ => (entry, ""),
                };
                let (schedule, command) = split_job(job);
                State::new()
                    .with("ensure", "present")
                    .with("line", entry.join("\n"))
                    .with("command", command)
                    .with("schedule", schedule)
                    .with(
                        "environment",
                        Value::Array(variables.iter().map(|v| Value::from(v.as_str())).collect()),
                    )
            }
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
        let wanted = entry(resource)?;
        if !exists {
            return Ok(vec![Change::created(format!(
                "added to {user}'s crontab: {}",
                wanted[1..].join("\n")
            ))]);
        }
        // Each attribute changes on its own, so a sensitive one is redacted whole,
        // its old value as well as its new.
        let mut changes = Vec::new();
        let found_environment = current.get_strings("environment").unwrap_or_default();
        let wanted_environment = environment(resource);
        if found_environment != wanted_environment {
            changes.push(Change::new(
                "environment",
                Some(strings_value(&found_environment)),
                Some(strings_value(&wanted_environment)),
                format!(
                    "environment changed '{}' to '{}'",
                    shown(&found_environment.join(" ")),
                    wanted_environment.join(" ")
                ),
            ));
        }
        let (schedule, command) = split_job(wanted.last().expect("an entry ends with its job"));
        let found_schedule = current.get_str("schedule").unwrap_or_default();
        if found_schedule != schedule {
            changes.push(Change::new(
                "line",
                None,
                None,
                format!(
                    "schedule changed '{}' to '{schedule}'",
                    shown(found_schedule)
                ),
            ));
        }
        let found_command = current.get_str("command").unwrap_or_default();
        if found_command != command {
            changes.push(Change::new(
                "command",
                Some(found_command.into()),
                Some(command.into()),
                format!("command changed '{}' to '{command}'", shown(found_command)),
            ));
        }
        Ok(changes)
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
    fn jobs_split_where_cron_splits_them() {
        assert_eq!(
            split_job("0  2 * * *\t/bin/x  y"),
            ("0 2 * * *".to_owned(), "/bin/x  y")
        );
        assert_eq!(split_job("@daily /bin/x"), ("@daily".to_owned(), "/bin/x"));
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
        for command in [
            "a\0* * * * * evil",
            "date +%Y",
            "a\\\\%b",
            " a",
            "a\u{2028}b",
            "a\u{85}",
        ] {
            assert_eq!(
                validate_of(job("x").with("command", command)),
                1,
                "{command:?}"
            );
        }
        assert_eq!(validate_of(job("x").with("command", "date +\\%Y\tx")), 0);
        assert_eq!(
            validate_of(job("x").with("command", "x".repeat(MAX_LINE + 1))),
            1
        );
        for variable in ["A=b\0c", "A= b", "A=", "A=\"b", "A='b'c'", "1A=b", "A B=c"] {
            assert_eq!(
                validate_of(job("x").with("environment", variable)),
                1,
                "{variable:?}"
            );
        }
        assert_eq!(validate_of(job("x").with("environment", "A=\"b c\"")), 0);
        for name in ["x ", " x", "x\0y", ""] {
            assert_eq!(validate_of(job(name)), 1, "{name:?}");
        }
    }

    fn validate_of(resource: Resource) -> usize {
        Cron::validate(&resource).len()
    }
}
