//! Heredocs: `@(TAG)`, `@("TAG")` (interpolated), with `:syntax` (`:json` is checked) and
//! `/escapes`, their margin (`|`) and trimmed last line break (`-`).

use super::*;

impl Lexer<'_> {
    /// `@(TAG)`, `@("TAG")` (interpolated), with `:syntax` and `/escapes` (`t`, `s`,
    /// `r`, `n`, `u`, `$`, `L`; `/` alone for all): the text of the lines after this
    /// one, up to the line holding the tag, whose `|` marks the margin removed from
    /// every line and whose `-` removes the last line break.
    pub(super) fn heredoc(&mut self, start: usize) -> Option<Tok> {
        let Some(close) = self.rest().find(')') else {
            self.pos = self.text.len();
            self.unterminated(start, start + 2, "heredoc `@(`", "close it: `@(END)`");
            return None;
        };
        let spec = self.text[self.pos + 2..self.pos + close].to_owned();
        self.pos += close + 1;
        if spec.contains('\n') {
            self.error(
                start,
                self.pos,
                "a heredoc's `@(...)` is on one line".to_owned(),
                "write `@(END)` or `@(\"END\"/tn)`",
            );
            return None;
        }
        let (tag_part, escapes) = match spec.split_once('/') {
            Some((tag, escapes)) => (
                tag,
                Some(if escapes.is_empty() {
                    "tsrnu$L".to_owned()
                } else {
                    escapes.to_owned()
                }),
            ),
            None => (spec.as_str(), None),
        };
        let syntax = tag_part
            .split_once(':')
            .map(|(_, syntax)| syntax.trim().to_owned());
        let tag_part = tag_part.split(':').next().unwrap_or_default().trim();
        let (tag, interpolate) = match tag_part.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
        {
            Some(tag) => (tag.to_owned(), true),
            None => (tag_part.to_owned(), false),
        };
        if tag.is_empty() {
            self.error(
                start,
                self.pos,
                "a heredoc needs a tag: `@(END)`".to_owned(),
                "name the line that ends it",
            );
            // Reported: the statement goes on with an empty text.
            return Some(Tok::Str(String::new()));
        }
        // The body starts on the next line, or after the bodies of heredocs this line
        // opened before.
        let body_start = match self.after_heredocs {
            Some(resume) => resume,
            None => match self.rest().find('\n') {
                Some(newline) => self.pos + newline + 1,
                None => self.text.len(),
            },
        };
        // The end: a line of the tag, after spaces, an optional `|` and an optional `-`.
        let mut line_start = body_start;
        let mut found = None;
        while line_start < self.text.len() {
            let line_end = self.text[line_start..]
                .find('\n')
                .map_or(self.text.len(), |at| line_start + at);
            let line = &self.text[line_start..line_end];
            let trimmed = line.trim_start();
            let mut margin = None;
            let mut rest = trimmed;
            if let Some(after) = rest.strip_prefix('|') {
                margin = Some(line.len() - trimmed.len());
                rest = after.trim_start();
            }
            let (trim, rest) = match rest.strip_prefix('-') {
                Some(after) => (true, after.trim_start()),
                None => (false, rest),
            };
            if rest.trim_end() == tag {
                found = Some((line_end, margin.unwrap_or(0), trim));
                break;
            }
            line_start = line_end + 1;
        }
        let Some((marker_end, margin, trim)) = found else {
            self.error(
                start,
                self.pos,
                format!("unterminated heredoc: no line `{tag}` ends it"),
                "end the text with a line holding the tag (`| END` keeps the margin of the `|`)",
            );
            self.after_heredocs = Some(self.text.len());
            return Some(Tok::Str(String::new()));
        };
        let body_end = line_start;
        self.after_heredocs = Some((marker_end + 1).min(self.text.len()));
        let resume = self.pos;
        let tok = if interpolate || escapes.is_some() {
            let saved_escapes = self.escapes.replace(escapes.clone().unwrap_or_default());
            let saved_after = self.after_heredocs;
            self.pos = body_start;
            let tok = if interpolate {
                self.interpolated(start, Some(body_end))
            } else {
                // Escapes without interpolation: the text, escaped, with `$` as it is.
                let mut text = String::new();
                while self.pos < body_end {
                    let at = self.pos;
                    let c = self.peek_char().unwrap_or(' ');
                    self.pos += c.len_utf8();
                    let next = self.peek_char().unwrap_or(' ');
                    if c == '\\' && heredoc_escapes(self.escapes.as_deref().unwrap_or(""), next) {
                        self.escape(at, &mut text);
                    } else {
                        text.push(c);
                    }
                }
                Some(Tok::Str(text))
            };
            self.escapes = saved_escapes;
            self.after_heredocs = saved_after;
            tok
        } else {
            Some(Tok::Str(self.text[body_start..body_end].to_owned()))
        };
        self.pos = resume;
        let tok = tok.map(|tok| heredoc_shape(tok, margin, trim));
        // `:json`: a text without interpolation is checked as Puppet checks it.
        if syntax.as_deref() == Some("json")
            && let Some(Tok::Str(text)) = &tok
            && let Err(error) = serde_json::from_str::<serde_json::Value>(text)
        {
            self.error(
                start,
                self.pos,
                format!("the heredoc's text is not valid JSON, as its `:json` says: {error}"),
                "fix the JSON, or remove `:json` from the heredoc's tag",
            );
        }
        tok
    }
}

/// A `/` starts a regular expression unless it follows something that ends a value,
/// where it divides. After `}` it starts one: a `case` option follows a block far more
/// often than a hash is divided.
/// Whether a heredoc whose `/` flags are `allowed` escapes `\` followed by `next`:
/// the flagged ones, `\\` once any is, a line break with `L`.
pub(super) fn heredoc_escapes(allowed: &str, next: char) -> bool {
    match next {
        '\\' => !allowed.is_empty(),
        '\n' => allowed.contains('L'),
        other => allowed.contains(other),
    }
}

/// A heredoc's text with its margin removed from every line and, with `-`, its last
/// line break.
fn heredoc_shape(tok: Tok, margin: usize, trim: bool) -> Tok {
    let strip = |text: &str, at_line_start: &mut bool| {
        let mut out = String::with_capacity(text.len());
        let mut skipped = 0;
        for c in text.chars() {
            if *at_line_start && skipped < margin && (c == ' ' || c == '\t') {
                skipped += 1;
                continue;
            }
            *at_line_start = c == '\n';
            if *at_line_start {
                skipped = 0;
            }
            out.push(c);
        }
        out
    };
    let mut at_line_start = true;
    match tok {
        Tok::Str(text) => {
            let mut text = strip(&text, &mut at_line_start);
            if trim && text.ends_with('\n') {
                text.pop();
            }
            Tok::Str(text)
        }
        Tok::Interp(parts) => {
            let mut shaped: Vec<Part> = parts
                .into_iter()
                .map(|part| match part {
                    Part::Lit(text) => Part::Lit(strip(&text, &mut at_line_start)),
                    expr => {
                        at_line_start = false;
                        expr
                    }
                })
                .collect();
            if trim
                && let Some(Part::Lit(text)) = shaped.last_mut()
                && text.ends_with('\n')
            {
                text.pop();
            }
            Tok::Interp(shaped)
        }
        other => other,
    }
}
