//! Diagnostics: what went wrong, where (file, line, column), and what to do about it.
//!
//! Diagnostics are values; [`render`] turns one into the text a person reads, with
//! the source line and a marker under the offending span.

use crate::Source;
use std::fmt::Write as _;
pub(crate) use wconverge_catalog::DiagnosticCode;

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// Index of the file in the sources handed to the compiler.
    pub file: u32,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub(crate) fn new(file: u32, start: usize, end: usize) -> Span {
        // Sources are capped well below 4 GiB by `compile`, so offsets fit.
        Span {
            file,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }

    /// The span from the start of `self` to the end of `other` (same file).
    pub(crate) fn to(self, other: Span) -> Span {
        if other.file != self.file {
            return self;
        }
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
    /// Output of `notice`, `info` and `debug` in a manifest.
    Notice,
}

/// One problem found in the manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// What kind of problem it is, from the registry (`docs/diagnostics.md`); printed
    /// as `wcv::duplicate-title`.
    pub code: DiagnosticCode,
    pub message: String,
    pub span: Span,
    /// What the marker under the span says.
    pub label: Option<String>,
    /// Other places that explain this one, such as the first declaration of a duplicate.
    pub related: Vec<(Span, String)>,
    /// What to do.
    pub help: Option<String>,
}

impl Diagnostic {
    pub(crate) fn error(
        code: DiagnosticCode,
        span: Span,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            span,
            label: None,
            related: Vec::new(),
            help: None,
        }
    }

    pub(crate) fn with_severity(mut self, severity: Severity) -> Diagnostic {
        self.severity = severity;
        self
    }

    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub(crate) fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = Some(label.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Line and column (both from 1; the column counts characters) of a byte offset.
pub fn line_column(text: &str, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(text.len());
    let offset = (0..=offset)
        .rev()
        .find(|at| text.is_char_boundary(*at))
        .unwrap_or(0);
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

/// Where each line of a text starts, to find a line from an offset in O(log n).
pub(crate) struct LineStarts(Vec<u32>);

impl LineStarts {
    pub(crate) fn new(text: &str) -> LineStarts {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, byte)| *byte == b'\n')
                .map(|(at, _)| u32::try_from(at + 1).unwrap_or(u32::MAX)),
        );
        LineStarts(starts)
    }

    /// The same as [`line_column`], without scanning the text before the line.
    pub(crate) fn line_column(&self, text: &str, offset: u32) -> (u32, u32) {
        let line_idx = self
            .0
            .partition_point(|start| *start <= offset)
            .saturating_sub(1);
        let line_start = self.0.get(line_idx).copied().unwrap_or(0) as usize;
        let end = (offset as usize).min(text.len());
        let column = text
            .get(line_start..end)
            .map_or(1, |before| before.chars().count() + 1);
        (
            u32::try_from(line_idx + 1).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
        )
    }
}

/// The diagnostic as text: a headline, `--> file:line:column`, the source line with a
/// marker, related places, and the help line. No colour, no terminal width: the same
/// text goes to a terminal, a log or a snapshot.
pub fn render(diagnostic: &Diagnostic, sources: &[Source]) -> String {
    let mut out = String::new();
    let severity = match diagnostic.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Notice => "notice",
    };
    let _ = writeln!(
        out,
        "{severity}[{}]: {}",
        diagnostic.code, diagnostic.message
    );
    // The gutter is as wide as the longest line number shown.
    let width = std::iter::once(diagnostic.span)
        .chain(diagnostic.related.iter().map(|(span, _)| *span))
        .filter_map(|span| {
            let source = sources.get(span.file as usize)?;
            Some(line_column(&source.text, span.start).0.to_string().len())
        })
        .max()
        .unwrap_or(1);
    let marker = if diagnostic.severity == Severity::Error {
        '^'
    } else {
        '-'
    };
    let primary = Snippet {
        span: diagnostic.span,
        marker,
        label: diagnostic.label.as_deref(),
        arrow: "-->",
    };
    primary.write(&mut out, sources, width);
    for (span, label) in &diagnostic.related {
        let related = Snippet {
            span: *span,
            marker: '-',
            label: Some(label),
            arrow: ":::",
        };
        related.write(&mut out, sources, width);
    }
    if let Some(help) = &diagnostic.help {
        let _ = writeln!(out, "{:width$} = help: {help}", "");
    }
    out
}

/// A problem found before the run (of the schema, a provider's check, the graph) as a
/// diagnostic is rendered: its place in a manifest of `sources` shown with its line, when
/// it has one there; otherwise its location, as the catalog gives it. Only the sources of
/// this compile are shown: a catalog's locations are never read from disk (a catalog
/// could name any file of the machine).
pub fn render_problem(problem: &wconverge_catalog::Problem, sources: &[Source]) -> String {
    let message = match &problem.resource {
        Some(resource) => format!("{resource}: {}", problem.message),
        None => problem.message.clone(),
    };
    let span = problem.location.as_ref().and_then(|location| {
        let file = sources
            .iter()
            .position(|source| source.name == location.file)?;
        let text = &sources[file].text;
        let start = offset_of(text, location.line, location.column.unwrap_or(1))?;
        // The word at the place (a title, a type's name), up to a separator.
        let word = text[start..]
            .find(|c: char| c.is_whitespace() || ":,;{}()".contains(c))
            .unwrap_or(text.len() - start);
        Some(Span::new(
            u32::try_from(file).ok()?,
            start,
            start + word.max(1).min(text.len() - start),
        ))
    });
    if let Some(span) = span {
        return render(
            &Diagnostic {
                severity: Severity::Error,
                code: problem.code,
                message,
                span,
                label: None,
                related: Vec::new(),
                help: problem.help.clone(),
            },
            sources,
        );
    }
    let mut out = format!("error[{}]: {message}\n", problem.code);
    if let Some(location) = &problem.location {
        let _ = writeln!(out, " --> {location}");
    }
    if let Some(help) = &problem.help {
        let _ = writeln!(out, "  = help: {help}");
    }
    out
}

/// The byte offset of `line` and `column` (both from 1; the column counts characters) in
/// `text`, if the text has that place.
fn offset_of(text: &str, line: u32, column: u32) -> Option<usize> {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(usize::try_from(line).ok()? - 2)
            .map(|(at, _)| at + 1)?
    };
    let line_text = text[line_start..].split('\n').next().unwrap_or_default();
    let within = line_text
        .char_indices()
        .nth(usize::try_from(column).ok()?.saturating_sub(1))
        .map_or(line_text.len(), |(at, _)| at);
    Some(line_start + within)
}

/// The longest line a diagnostic shows; a longer one (a generated file on one line) is
/// named by its place only.
const MAX_SHOWN_LINE_CHARS: usize = 1000;

struct Snippet<'a> {
    span: Span,
    marker: char,
    label: Option<&'a str>,
    arrow: &'a str,
}

impl Snippet<'_> {
    fn write(&self, out: &mut String, sources: &[Source], width: usize) {
        let Some(source) = sources.get(self.span.file as usize) else {
            return;
        };
        let (line, column) = line_column(&source.text, self.span.start);
        let _ = writeln!(
            out,
            "{:width$}{} {}:{line}:{column}",
            "", self.arrow, source.name
        );
        let line_text = source
            .text
            .split('\n')
            .nth(line as usize - 1)
            .unwrap_or_default()
            .trim_end_matches('\r');
        let line_chars = line_text.chars().count();
        if line_chars > MAX_SHOWN_LINE_CHARS {
            return;
        }
        let (end_line, end_column) = line_column(&source.text, self.span.end);
        let line_chars = u32::try_from(line_chars).unwrap_or(u32::MAX);
        let end_column = if end_line == line {
            end_column
        } else {
            line_chars + 1
        };
        let n_markers = end_column.saturating_sub(column).max(1) as usize;
        let indent: String = line_text
            .chars()
            .take(column as usize - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let markers: String = std::iter::repeat_n(self.marker, n_markers).collect();
        let _ = writeln!(out, "{:width$} |", "");
        let _ = writeln!(out, "{line:>width$} | {line_text}");
        match self.label {
            Some(label) => {
                let _ = writeln!(out, "{:width$} | {indent}{markers} {label}", "");
            }
            None => {
                let _ = writeln!(out, "{:width$} | {indent}{markers}", "");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_is_rendered_at_its_line_only_from_the_sources_of_the_compile() {
        let sources = [Source::new(
            "site.wcv".to_owned(),
            "# motd\nfile { 'motd': mode => 'x' }\n".to_owned(),
        )];
        let problem = |file: &str, line: u32, column: Option<u32>| {
            let mut problem = wconverge_catalog::Problem::new(
                DiagnosticCode::AttributeValue,
                "`mode` is not a mode",
            )
            .with_help("write it like '0644'");
            problem.resource = Some(wconverge_catalog::ResourceRef::new("File", "motd"));
            problem.location = Some(wconverge_catalog::SourceLocation {
                file: file.to_owned(),
                line,
                column,
            });
            problem
        };
        assert_eq!(
            render_problem(&problem("site.wcv", 2, Some(8)), &sources),
            "error[wcv::attribute-value]: File[motd]: `mode` is not a mode\n --> \
             site.wcv:2:8\n  |\n2 | file { 'motd': mode => 'x' }\n  |        ^^^^^^\n  = help: \
             write it like '0644'\n"
        );
        // A place past the end of its line is marked at the line's end; a line the file
        // does not have, or a file that is not a source of this compile, is named only.
        assert!(
            render_problem(&problem("site.wcv", 1, Some(40)), &sources)
                .contains("1 | # motd\n  |       ^\n")
        );
        for (file, line) in [("site.wcv", 9), ("/etc/shadow", 1)] {
            assert_eq!(
                render_problem(&problem(file, line, None), &sources),
                format!(
                    "error[wcv::attribute-value]: File[motd]: `mode` is not a mode\n --> \
                     {file}:{line}\n  = help: write it like '0644'\n"
                )
            );
        }
    }

    #[test]
    fn line_and_column_count_characters() {
        let text = "ab\ncé d";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 3), (2, 1));
        assert_eq!(line_column(text, 6), (2, 3));
    }

    #[test]
    fn line_starts_agree_with_scanning() {
        let text = "ab\ncé d\n\nlast";
        let starts = LineStarts::new(text);
        for offset in 0..=text.len() as u32 {
            if text.is_char_boundary(offset as usize) {
                assert_eq!(
                    starts.line_column(text, offset),
                    line_column(text, offset),
                    "{offset}"
                );
            }
        }
    }

    #[test]
    fn render_shows_the_line_and_a_marker() {
        let sources = vec![Source::new("site.wcv", "file { 'a':\n  bogus => 1,\n}\n")];
        let diagnostic =
            Diagnostic::error(DiagnosticCode::UnknownAttribute, Span::new(0, 14, 19), "no")
                .with_label("here")
                .with_help("remove it");
        assert_eq!(
            render(&diagnostic, &sources),
            "error[wcv::unknown-attribute]: no\n --> site.wcv:2:3\n  |\n2 |   bogus => 1,\n  |   ^^^^^ here\n  = help: remove it\n"
        );
    }
}
