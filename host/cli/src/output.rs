//! Everything the CLI prints. Reports and listings go to stdout, problems to stderr. A
//! stream that cannot be written loses what would have gone there, and nothing else: a
//! closed stdout (`wconverge apply | head`) ends the output quietly, as ripgrep does, but
//! not the command, so an `apply` still converges, finishes its audit trail and exits
//! with its run's code (see [`stdout_lost`]). Nothing here uses `eprintln!`, which panics
//! when stderr is closed.

mod plugins;

pub(crate) use plugins::{
    TypeProvider, declared_type_detail, plugin_inspect, plugins_audit, plugins_list, type_detail,
    types_list,
};

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use wconverge_catalog::{Problem, TypeSchema, display_type_name};
use wconverge_engine::Prepared;
use wconverge_engine::report::{DiffReport, Report, ResourceReport, Status};
use wconverge_runtime::{PluginKind, PluginSummary, Suitability};

/// Whether `c` must not reach a terminal as it is: a control character other than
/// newline and tab (escape sequences start with one), or a bidirectional formatting
/// character (which reorders what is shown).
fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            // Soft hyphen, Arabic letter mark, Mongolian vowel separator; zero-width and
            // direction marks; line and paragraph separators; embeddings and overrides;
            // word joiner and invisible operators; isolates and deprecated format
            // characters; the byte order mark; interlinear annotations; tags. Invisible,
            // they make two different names look alike, or reorder what is shown.
            '\u{00ad}'
                | '\u{061c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// `text` made inert for a terminal: what [`needs_escape`] finds is written as an escape
/// (`\x1b`, `\r`, `\u{202e}`), so nothing a plugin, a program, a manifest or a file name
/// holds can move the cursor, hide or recolour text, write the clipboard or fake a
/// line of wconverge's. Everything the CLI writes for people goes through it; JSON
/// escapes control characters itself.
pub(crate) fn inert(text: &str) -> std::borrow::Cow<'_, str> {
    // Most output is plain ASCII: printable bytes, newlines and tabs need no look at
    // characters.
    if plain(text) || !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\r' => shown.push_str("\\r"),
            c if needs_escape(c) && (c as u32) < 0x80 => {
                shown.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => shown.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => shown.push(c),
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// Whether `text` holds only printable ASCII, newlines and tabs. Looked at in blocks of
/// 64 bytes, each as a whole (no early exit within a block), which the compiler turns into
/// a few vector instructions: the JSON of a large catalog passes through here.
fn plain(text: &str) -> bool {
    text.as_bytes().chunks(64).all(|block| {
        block.iter().fold(true, |plain, &byte| {
            plain & (matches!(byte, b' '..=b'~') | (byte == b'\n') | (byte == b'\t'))
        })
    })
}

/// A message that may hold several lines, with every line after the first indented by
/// `indent`, so none can pass for a line of wconverge's own (a summary, a warning).
fn continued(message: &str, indent: &str) -> String {
    message.replace('\n', &format!("\n{indent}"))
}

/// Why stdout was given up, once a write to it failed.
static STDOUT_LOST: std::sync::OnceLock<std::io::ErrorKind> = std::sync::OnceLock::new();

/// Why stdout was given up, if it was: nothing was written to it after that, and the
/// command went on (an `apply` whose report no one reads still converges the machine and
/// finishes its audit trail). A closed pipe (`wconverge apply | head`) is the reader's
/// choice; any other failure means output was lost.
pub(crate) fn stdout_lost() -> Option<std::io::ErrorKind> {
    STDOUT_LOST.get().copied()
}

/// Writes to stdout, unless a write to it failed before.
fn out(text: &str) {
    if stdout_lost().is_some() {
        return;
    }
    let text = inert(text);
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    if let Err(error) = written {
        stdout_failed(&error);
    }
}

/// Gives stdout up after `error`, saying why on stderr unless the reader closed it.
fn stdout_failed(error: &std::io::Error) {
    if STDOUT_LOST.set(error.kind()).is_ok() && error.kind() != std::io::ErrorKind::BrokenPipe {
        err(&format!(
            "wconverge: cannot write to stdout: {error}; nothing more is written there"
        ));
    }
}

/// Made inert as it is written, for output too big to hold whole: what `write` gets is
/// passed on once it ends on a whole character (a multi-byte one may come in pieces).
struct InertWriter<W: Write> {
    inner: W,
    /// The start of a character whose other bytes have not come yet.
    pending: Vec<u8>,
}

/// How many bytes of `bytes` are whole UTF-8 characters: all but the start of one cut at
/// the end; an error if they are not UTF-8.
fn whole_characters(bytes: &[u8]) -> std::io::Result<usize> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.len()),
        Err(error) if error.error_len().is_none() => Ok(error.valid_up_to()),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "output that is not UTF-8",
        )),
    }
}

impl<W: Write> Write for InertWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // `buf` itself, unless a character cut in two waits for its other bytes.
        let joined;
        let bytes = if self.pending.is_empty() {
            buf
        } else {
            joined = [std::mem::take(&mut self.pending).as_slice(), buf].concat();
            &joined
        };
        let whole = whole_characters(bytes)?;
        let text = std::str::from_utf8(&bytes[..whole]).expect("checked");
        self.inner.write_all(inert(text).as_bytes())?;
        // The start of a character cut at the end, kept for the next write.
        self.pending.extend_from_slice(&bytes[whole..]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub(crate) fn line(text: &str) {
    out(&format!("{text}\n"));
}

/// Text that ends its own lines.
pub(crate) fn text(text: &str) {
    out(text);
}

/// Text that ends its own lines, on standard error (made inert; a closed stderr loses
/// it).
pub(crate) fn text_to_stderr(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "{}", inert(text));
}

/// Standard error for `tracing`'s messages, made inert like everything else the CLI
/// writes (they quote paths and plugin names).
pub(crate) struct InertStderr;

impl Write for InertStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(inert(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// What the argument parser says (a usage error, help, the version), made inert: it
/// quotes the arguments it was given.
pub(crate) fn parser_message(error: &clap::Error) {
    let text = error.render().to_string();
    if error.use_stderr() {
        let _ = write!(std::io::stderr(), "{}", inert(&text));
    } else {
        out(&text);
    }
}

/// Writes a line to stderr, made inert. A stderr that cannot be written (a closed pipe:
/// `wconverge apply 2>&1 | head`) loses the line, but never stops the command midway,
/// as `eprintln!`'s panic would.
fn err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{}", inert(text));
}

pub(crate) fn warning(message: &str) {
    err(&format!("warning: {}", continued(message, "  ")));
}

/// Refusals made for a resource, held until the run's report is printed: a resource
/// that failed for the same reason says it already.
static HELD_REFUSALS: std::sync::Mutex<Vec<(String, String, String)>> =
    std::sync::Mutex::new(Vec::new());

/// The audit trail's console: a refusal for a resource is held (see
/// [`held_refusals`]), anything else is a warning now.
pub(crate) fn refusal(line: &wconverge_runtime::trail::ConsoleLine<'_>) {
    match line.resource {
        Some(resource) => HELD_REFUSALS.lock().expect("refusals lock").push((
            line.text.to_owned(),
            resource.to_owned(),
            line.reason.to_owned(),
        )),
        None => warning(line.text),
    }
}

/// Prints the refusals held so far, but those whose resource `report` shows failed
/// with that very reason.
pub(crate) fn held_refusals(report: Option<&Report>) {
    let held = std::mem::take(&mut *HELD_REFUSALS.lock().expect("refusals lock"));
    for (text, resource, reason) in held {
        let said = report.is_some_and(|report| {
            report.resources.iter().any(|reported| {
                reported.resource == resource
                    && reported
                        .error
                        .as_deref()
                        .is_some_and(|error| error.contains(&reason))
            })
        });
        if !said {
            warning(&text);
        }
    }
}

pub(crate) fn error(message: &str) {
    err(&format!("error: {}", continued(message, "  ")));
}

/// An error that ends a command, already rendered as diagnostics (a policy or a
/// catalog file that cannot be read as one): printed as it is.
#[derive(Debug)]
pub(crate) struct Shown(pub(crate) String);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.trim_end())
    }
}

impl std::error::Error for Shown {}

/// Prints an error that ends a command: a [`Shown`] one as it is, any other after
/// `error: `.
pub(crate) fn ending_error(error: &anyhow::Error) {
    match error.downcast_ref::<Shown>() {
        Some(shown) => err(&shown.to_string()),
        None => self::error(&format!("{error:#}")),
    }
}

/// `problems` (of a catalog, or of a file not usable as a whole: a policy), each rendered
/// at its place (its line shown only from `sources`), and a last line saying what
/// happened.
pub(crate) fn shown_problems(
    problems: &[Problem],
    sources: &[wconverge_lang::Source],
    outcome: &str,
) -> Shown {
    // Each problem followed by a blank line.
    let mut text = String::new();
    for problem in problems {
        text.push_str(&wconverge_lang::render_problem(problem, sources));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push('\n');
    }
    text.push_str(&format!("error: {outcome}"));
    Shown(text)
}

/// `value` as pretty JSON and a newline, written as it is serialized: a catalog of many
/// resources is never whole in memory as text.
/// `value` as JSON on one line of standard output (JSON Lines: a stream of reports).
pub(crate) fn json_line(value: &impl Serialize) {
    json_as(value, false);
}

pub(crate) fn json(value: &impl Serialize) {
    json_as(value, true);
}

fn json_as(value: &impl Serialize, pretty: bool) {
    if stdout_lost().is_some() {
        return;
    }
    // Buffered before it is made inert: the serializer writes in small pieces.
    let mut writer = std::io::BufWriter::with_capacity(
        64 * 1024,
        InertWriter {
            inner: std::io::stdout().lock(),
            pending: Vec::new(),
        },
    );
    let written = if pretty {
        serde_json::to_writer_pretty(&mut writer, value)
    } else {
        serde_json::to_writer(&mut writer, value)
    };
    let written = written
        .map_err(std::io::Error::from)
        .and_then(|()| writer.write_all(b"\n"))
        .and_then(|()| writer.flush());
    if let Err(error) = written {
        stdout_failed(&error);
    }
}

/// Compiler diagnostics, then a count of the errors if there were any.
pub(crate) fn diagnostics(
    diagnostics: &[wconverge_lang::Diagnostic],
    sources: &[wconverge_lang::Source],
) {
    for diagnostic in diagnostics {
        err(&wconverge_lang::render(diagnostic, sources));
    }
    let n_errors = diagnostics.iter().filter(|d| d.is_error()).count();
    if n_errors > 0 {
        err(&format!(
            "error: {n_errors} error{} in the manifests; nothing was compiled or changed",
            if n_errors == 1 { "" } else { "s" }
        ));
    }
}

/// The problems found before a run, rendered as the manifests' diagnostics are (with
/// the line of `sources` each lies on, when it lies in one), then how many there are.
pub(crate) fn problems(problems: &[Problem], sources: &[wconverge_lang::Source]) {
    let n_problems = problems.len();
    err(&shown_problems(
        problems,
        sources,
        &format!(
            "the catalog has {n_problems} problem{}; nothing was changed",
            if n_problems == 1 { "" } else { "s" }
        ),
    )
    .to_string());
}

fn describe_resource(resource: &ResourceReport, show_diff: bool, verbose: bool) -> Vec<String> {
    let name = &match &resource.exported_by {
        Some(node) => format!("{} (exported by node {node})", resource.resource),
        None => resource.resource.clone(),
    };
    let mut lines = Vec::new();
    match resource.status {
        Status::Changed | Status::WouldChange => {
            let prefix = if resource.status == Status::WouldChange {
                "would change: "
            } else {
                ""
            };
            for change in &resource.changes {
                let mut line = format!("{name}: {prefix}{}", change.message);
                match &change.diff {
                    Some(DiffReport::Unified(text)) if show_diff => {
                        line.push('\n');
                        line.push_str(text.trim_end_matches('\n'));
                    }
                    Some(DiffReport::BeforeAfter { before, after }) if show_diff => {
                        line.push_str(&format!("\n- {before}\n+ {after}"));
                    }
                    _ => {}
                }
                lines.push(line);
            }
        }
        Status::Failed => lines.push(format!(
            "{name}: failed: {}",
            resource.error.as_deref().unwrap_or("no reason given")
        )),
        Status::SkippedFailedDependency => lines.push(format!(
            "{name}: skipped: {} failed",
            resource.failed_dependencies.join(", ")
        )),
        Status::SkippedByRequirement => lines.push(match &resource.requirement {
            Some(line) => format!("{name}: requirement not met: {line}"),
            None => format!(
                "{name}: skipped: the requirement of {} is not met",
                resource.unmet_dependencies.join(", ")
            ),
        }),
        // A guard that holds is how a converged run looks: said only when asked.
        Status::SkippedByGuard if !verbose => {}
        Status::SkippedByGuard => {
            if let Some(guard) = resource.guards.last() {
                let why = match (guard.succeeded, guard.exit_code) {
                    (true, _) if guard.interpreter == "host" => "was true",
                    (true, _) => "succeeded",
                    (false, _) if guard.interpreter == "host" => "was false",
                    (false, Some(127)) => "failed (exit code 127: command not found)",
                    (false, Some(code)) => &format!("failed (exit code {code})"),
                    (false, None) => &format!(
                        "failed (killed by signal {})",
                        guard.signal.unwrap_or_default()
                    ),
                };
                let inherited = if guard.inherited.is_empty() {
                    String::new()
                } else {
                    format!(", inheriting {}", guard.inherited.join(", "))
                };
                lines.push(format!(
                    "{name}: skipped by guard: {} `{}` {why} (interpreter `{}`{inherited})",
                    guard.metaparameter, guard.command, guard.interpreter
                ));
            }
        }
        Status::Unchanged => {}
    }
    if let Some(refresh) = &resource.refresh {
        let what = match refresh.outcome {
            "refreshed" => "refreshed",
            "would_refresh" => "would refresh",
            "unscheduled" => "not refreshed: its `ensure` changed in this run",
            _ => "refresh failed",
        };
        lines.push(format!(
            "{name}: {what} (notified by {})",
            refresh.triggered_by.join(", ")
        ));
    }
    for log in &resource.logs {
        if matches!(log.level, "notice" | "warning" | "error") {
            lines.push(format!("{name}: {}: {}", log.level, log.message));
        }
    }
    lines
}

/// The report as text: a line per change, failure and notice (and, `verbose`, per
/// guard that held), then the summary, whose time counts the `compiled` components'
/// compile too (the part `before` the run is not in the report's duration).
pub(crate) fn report_human(
    report: &Report,
    (show_diff, verbose): (bool, bool),
    (before, compiled): (std::time::Duration, wconverge_runtime::Compiled),
) {
    let mut text = String::new();
    for resource in &report.resources {
        for line in describe_resource(resource, show_diff, verbose) {
            // A diff, or a message a plugin wrote over several lines, is indented.
            text.push_str(&continued(&line, "    "));
            text.push('\n');
        }
    }
    let summary = &report.summary;
    let mut counts = vec![format!(
        "{} resource{}",
        summary.resources,
        if summary.resources == 1 { "" } else { "s" }
    )];
    let mut count = |n: usize, what: &str| {
        if n > 0 {
            counts.push(format!("{n} {what}"));
        }
    };
    if report.mode == "noop" {
        count(summary.would_change, "would change");
    } else {
        count(summary.changed, "changed");
    }
    count(summary.unchanged, "unchanged");
    count(summary.refreshed, "refreshed");
    count(summary.failed, "failed");
    count(summary.skipped, "skipped");
    count(summary.skipped_by_guard, "skipped by guard");
    count(summary.skipped_by_requirement, "requirement not met");
    let verb = if report.mode == "noop" {
        "noop run"
    } else {
        "applied"
    };
    let seconds = report.duration_ms / 1000.0 + before.as_secs_f64();
    let compiling = if compiled.components == 0 {
        String::new()
    } else {
        format!(
            " ({:.2} s of it compiling {} plugin{} into the cache)",
            compiled.time.as_secs_f64(),
            compiled.components,
            if compiled.components == 1 { "" } else { "s" }
        )
    };
    text.push_str(&format!(
        "{verb} in {seconds:.2} s{compiling}: {}\n",
        counts.join(", ")
    ));
    out(&text);
}

pub(crate) fn graph_dot(prepared: &Prepared) {
    let graph = &prepared.graph;
    let mut text = String::from("digraph wconverge {\n  rankdir=LR;\n");
    for &idx in graph.order() {
        text.push_str(&format!("  {:?};\n", graph.reference(idx).to_string()));
    }
    for &idx in graph.order() {
        for (target, kind) in graph.successors(idx) {
            let style = match kind {
                wconverge_catalog::EdgeKind::Notify => " [style=dashed, label=\"notify\"]",
                wconverge_catalog::EdgeKind::Before => "",
            };
            text.push_str(&format!(
                "  {:?} -> {:?}{style};\n",
                graph.reference(idx).to_string(),
                graph.reference(*target).to_string()
            ));
        }
    }
    text.push_str("}\n");
    out(&text);
}

#[derive(Serialize)]
struct GraphJson {
    /// Resources in application order.
    order: Vec<String>,
    edges: Vec<EdgeJson>,
}

#[derive(Serialize)]
struct EdgeJson {
    source: String,
    target: String,
    kind: wconverge_catalog::EdgeKind,
}

pub(crate) fn graph_json(prepared: &Prepared) {
    let graph = &prepared.graph;
    let order = graph
        .order()
        .iter()
        .map(|idx| graph.reference(*idx).to_string())
        .collect();
    let edges = graph
        .order()
        .iter()
        .flat_map(|&idx| {
            graph
                .successors(idx)
                .iter()
                .map(move |(target, kind)| EdgeJson {
                    source: graph.reference(idx).to_string(),
                    target: graph.reference(*target).to_string(),
                    kind: *kind,
                })
        })
        .collect();
    json(&GraphJson { order, edges });
}

/// A resource program's errors, each under its line with a marker at the column.
pub(crate) fn program_errors(errors: &[wconverge_requires::ProgramError], text: &str) {
    for error in errors {
        err(&format!(
            "error: line {}, column {}: {}",
            error.line, error.column, error.message
        ));
        if let Some(line) = text.lines().nth(error.line - 1) {
            err(&format!("  | {line}"));
            let before: String = line
                .chars()
                .take(error.column.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            err(&format!("  | {before}^"));
        }
        if let Some(help) = &error.help {
            err(&format!("  = help: {help}"));
        }
    }
    err(&format!(
        "error: the resource program is invalid ({} error{}); nothing was evaluated",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    ));
}

/// `true` or `false` on stdout; for `false`, the line that did not hold on stderr.
pub(crate) fn verdict(verdict: &wconverge_requires::Verdict) {
    out(if verdict.holds { "true\n" } else { "false\n" });
    if let Some((line, text)) = &verdict.failed {
        err(&format!("line {line} does not hold: `{text}`"));
    }
}

/// Facts as text: each group, then one line per record.
pub(crate) fn facts_human(groups: &wconverge_runtime::FactGroups) {
    let mut text = String::new();
    for (group, records) in groups {
        // A third-party plugin's names are escaped like its values, so they cannot
        // carry terminal control sequences.
        text.push_str(&format!(
            "{} ({} record{})\n",
            group.escape_debug(),
            records.len(),
            if records.len() == 1 { "" } else { "s" }
        ));
        for record in records {
            let fields: Vec<String> = record
                .iter()
                .map(|(key, value)| format!("{}={value:?}", key.escape_debug()))
                .collect();
            text.push_str(&format!("  {}\n", fields.join(" ")));
        }
    }
    out(&text);
}

#[cfg(test)]
mod tests {
    use super::{InertWriter, inert, plain};
    use std::io::Write;

    #[test]
    fn plain_text_is_printable_ascii_newlines_and_tabs_wherever_a_block_ends() {
        let base = "key: value\twith a tab\n".repeat(10);
        assert!(plain(&base));
        assert!(plain(""));
        for at in 0..base.len() {
            for odd in ["\u{1b}", "\r", "\u{7f}", "\u{e9}", "\u{202e}", "\0"] {
                let mut text = base.clone();
                text.replace_range(at..=at, odd);
                assert!(!plain(&text), "{odd:?} at {at}");
            }
        }
    }

    #[test]
    fn streamed_output_is_made_inert_as_a_whole_even_when_a_character_comes_in_pieces() {
        let text = "name: \u{202e}gnp.exe\u{1b}[2J, caf\u{e9}\n";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut writer = InertWriter {
                inner: Vec::new(),
                pending: Vec::new(),
            };
            writer.write_all(&bytes[..cut]).expect("write");
            writer.write_all(&bytes[cut..]).expect("write");
            assert_eq!(
                String::from_utf8(writer.inner).expect("UTF-8"),
                inert(text),
                "cut at {cut}"
            );
        }
        let mut writer = InertWriter {
            inner: Vec::new(),
            pending: Vec::new(),
        };
        assert!(writer.write_all(b"\xff\xfe").is_err());
    }
}
