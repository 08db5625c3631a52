//! The audit trail: every capability decision of a run (a directory opened for a plugin,
//! and with what access; a program launched; anything refused) as one JSON object per
//! line, in a file the operator chooses (`--audit-log FILE`). Refusals are also warnings
//! on the console. A plugin that floods refusals is cut short: after a few per plugin
//! the console says no more, after [`FILE_DENIALS`] the file neither, and the run ends
//! with a count of what was suppressed.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;

/// Refusals of one plugin shown on the console before the rest are only counted.
pub const CONSOLE_DENIALS: u64 = 5;
/// Refusals of one plugin written to the file before the rest are only counted.
pub const FILE_DENIALS: u64 = 1000;

/// What was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allowed,
    Denied,
}

/// One capability decision.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    pub plugin: String,
    /// The sha256 of the plugin's component.
    pub digest: String,
    /// The resource the call was for (`File[/etc/motd]`), or the guard of one; absent
    /// for a call about no resource (loading, facts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `load`, `open-directory`, `launch`, `stat`, `suppressed`.
    pub operation: &'static str,
    /// The directory, the command line (secrets redacted), the component file.
    pub target: String,
    /// For a directory: `read` or `read-write`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<&'static str>,
    /// For a launch: the file that was run, after symlinks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// For a launch the launcher wrapped: the command line that ran (`setarch i686 ...`),
    /// whose first element `resolved` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launched: Option<String>,
    pub decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `suppressed`: how many refusals were not written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl Event {
    /// An allowed decision of `plugin` about no resource; set the rest with `..`.
    pub fn new(plugin: &str, digest: &str, operation: &'static str, target: String) -> Event {
        Event {
            time: String::new(),
            plugin: plugin.to_owned(),
            digest: digest.to_owned(),
            resource: None,
            operation,
            target,
            access: None,
            resolved: None,
            launched: None,
            decision: Decision::Allowed,
            reason: None,
            count: None,
        }
    }
}

/// Where the console's warnings go.
pub type Console = Box<dyn Fn(&ConsoleLine<'_>) + Send + Sync>;

/// A warning for the console: its text, and for a refusal made for one resource, that
/// resource and the reason (a caller that reports the resource's failure with the same
/// reason need not say it twice).
#[derive(Debug)]
pub struct ConsoleLine<'a> {
    pub text: &'a str,
    pub resource: Option<&'a str>,
    pub reason: &'a str,
}

struct Sink {
    /// Opened for appending: each event is one `write`, so a crash loses nothing
    /// already decided and two writers never split a line.
    file: Option<std::fs::File>,
    /// Refusals per plugin so far.
    denials: BTreeMap<String, (u64, String)>,
    /// The first write error. From then on every allowed decision is refused (the run
    /// may not go on unrecorded), and the run ends in error.
    failed: Option<std::io::Error>,
}

/// The audit trail of one run.
pub struct Trail {
    sink: Mutex<Sink>,
    console: Console,
    /// Whether `sink` has a file (fixed when the trail is made): without one, nothing
    /// can fail, and asking needs no lock.
    has_file: bool,
}

impl Trail {
    /// A trail that writes to `file` (if any) and warns through `console`.
    pub fn new(file: Option<std::fs::File>, console: Console) -> Trail {
        Trail {
            has_file: file.is_some(),
            sink: Mutex::new(Sink {
                file,
                denials: BTreeMap::new(),
                failed: None,
            }),
            console,
        }
    }

    /// Whether allowed decisions are worth building an event for (they go only to the
    /// file; refusals also go to the console).
    pub(crate) fn logs_allowed(&self) -> bool {
        self.has_file
    }

    /// Why nothing more may be allowed: the file could not be written.
    pub(crate) fn broken(&self) -> Option<Unwritable> {
        if !self.has_file {
            return None;
        }
        let sink = self.sink.lock().expect("audit trail lock");
        sink.failed.as_ref().map(Unwritable::of)
    }

    /// Records one decision. An error says the file could not be written, now or before:
    /// an allowed decision must then be refused.
    pub(crate) fn record(&self, mut event: Event) -> Result<(), Unwritable> {
        event.time = now_rfc3339();
        let mut sink = self.sink.lock().expect("audit trail lock");
        let mut to_file = true;
        if event.decision == Decision::Denied {
            let seen = sink
                .denials
                .entry(event.plugin.clone())
                .or_insert_with(|| (0, event.digest.clone()));
            seen.0 += 1;
            let count = seen.0;
            to_file = count <= FILE_DENIALS;
            if count <= CONSOLE_DENIALS {
                let on = event
                    .resource
                    .as_deref()
                    .map_or_else(String::new, |resource| format!(", {resource}"));
                // The reason may quote what the plugin sent: no control characters
                // reach the terminal.
                let mut reason = String::new();
                for c in event.reason.as_deref().unwrap_or("not granted").chars() {
                    if c.is_control() {
                        reason.extend(c.escape_default());
                    } else {
                        reason.push(c);
                    }
                }
                (self.console)(&ConsoleLine {
                    text: &format!("refused (plugin `{}`{on}): {reason}", event.plugin),
                    resource: event.resource.as_deref(),
                    reason: &reason,
                });
            }
        }
        if to_file {
            sink.write(&event);
        }
        sink.failed
            .as_ref()
            .map_or(Ok(()), |error| Err(Unwritable::of(error)))
    }

    /// Ends the run: the counts of suppressed refusals, on the console and in the file.
    /// An error writing the file is returned here.
    pub fn finish(&self) -> std::io::Result<()> {
        let mut sink = self.sink.lock().expect("audit trail lock");
        let denials = std::mem::take(&mut sink.denials);
        for (plugin, (count, digest)) in denials {
            if count > CONSOLE_DENIALS {
                (self.console)(&ConsoleLine {
                    text: &format!(
                        "plugin `{plugin}` was refused {} more times; not shown",
                        count - CONSOLE_DENIALS
                    ),
                    resource: None,
                    reason: "",
                });
            }
            if count > FILE_DENIALS {
                let event = Event {
                    time: now_rfc3339(),
                    decision: Decision::Denied,
                    reason: Some("refused too often; these refusals were not written".to_owned()),
                    count: Some(count - FILE_DENIALS),
                    ..Event::new(&plugin, &digest, "suppressed", String::new())
                };
                sink.write(&event);
            }
        }
        match &sink.failed {
            Some(error) => Err(std::io::Error::new(error.kind(), error.to_string())),
            None => Ok(()),
        }
    }
}

impl Sink {
    /// Records the first write error, and takes back the `partial` bytes of a line that
    /// did reach the file.
    fn fail(&mut self, error: std::io::Error, partial: usize) {
        if let Some(file) = &self.file
            && partial > 0
            && let Ok(metadata) = file.metadata()
        {
            let _ = file.set_len(metadata.len().saturating_sub(partial as u64));
        }
        self.failed.get_or_insert(error);
    }
}

/// The audit log could not be written, in this call or before: nothing more may be
/// allowed in the run (a decision that cannot be recorded is refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unwritable {
    /// The write's error, in the system's words.
    error: String,
}

impl Unwritable {
    fn of(error: &std::io::Error) -> Unwritable {
        Unwritable {
            error: error.to_string(),
        }
    }
}

impl std::fmt::Display for Unwritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the audit log cannot be written ({}); nothing more is allowed in this run",
            self.error
        )
    }
}

impl std::error::Error for Unwritable {}

impl Sink {
    fn write(&mut self, event: &Event) {
        let Some(file) = &mut self.file else {
            return;
        };
        let mut line = serde_json::to_vec(event).expect("events serialize");
        line.push(b'\n');
        // One `write` normally takes the whole line; a full disk or a size limit may cut
        // it short. A part of a line is taken back, so the file holds whole lines only.
        let mut written = 0;
        while written < line.len() {
            match file.write(&line[written..]) {
                Ok(0) => {
                    self.fail(std::io::ErrorKind::WriteZero.into(), written);
                    return;
                }
                Ok(n) => written += n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    self.fail(error, written);
                    return;
                }
            }
        }
    }
}

/// Now, as `2026-11-22T12:34:56.789Z`.
fn now_rfc3339() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = since.as_secs();
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = u32::try_from(day_of_year - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn denied(plugin: &str) -> Event {
        Event {
            resource: Some("Hostile[x]".to_owned()),
            decision: Decision::Denied,
            reason: Some("not on the allowlist".to_owned()),
            ..Event::new(
                plugin,
                &"ab".repeat(32),
                "launch",
                "/bin/sh -c x".to_owned(),
            )
        }
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(now_rfc3339().len(), "2026-11-22T12:34:56.789Z".len());
    }

    #[test]
    fn a_flood_of_refusals_is_cut_short_and_counted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.jsonl");
        let file = std::fs::File::create(&path).expect("created");
        let console = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = Arc::clone(&console);
        let trail = Trail::new(
            Some(file),
            Box::new(move |line: &ConsoleLine<'_>| {
                seen.lock().expect("lock").push(line.text.to_owned());
            }),
        );
        for _ in 0..FILE_DENIALS + 7 {
            trail.record(denied("hostile")).expect("written");
        }
        trail.record(denied("other")).expect("written");
        trail.finish().expect("written");
        let console = console.lock().expect("lock");
        assert_eq!(
            console.len() as u64,
            CONSOLE_DENIALS + 1 + 1,
            "{console:#?}"
        );
        assert_eq!(
            console[0],
            "refused (plugin `hostile`, Hostile[x]): not on the allowlist"
        );
        assert!(
            console.contains(&format!(
                "plugin `hostile` was refused {} more times; not shown",
                FILE_DENIALS + 7 - CONSOLE_DENIALS
            )),
            "{console:#?}"
        );
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
            .collect();
        assert_eq!(lines.len() as u64, FILE_DENIALS + 1 + 1);
        let last = lines.last().expect("summary");
        assert_eq!(last["operation"], "suppressed");
        assert_eq!(last["plugin"], "hostile");
        assert_eq!(last["count"], 7);
        assert_eq!(lines[0]["decision"], "denied");
        assert_eq!(lines[0]["resource"], "Hostile[x]");
    }
}
