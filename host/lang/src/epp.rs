//! EPP templates, rendered at compile time: `epp('NAME/file.epp', { params })` (the
//! file `NAME/templates/file.epp` of a module) and `inline_epp(text, { params })`.
//!
//! A template is text with tags: `<%= expression %>` prints a value, `<% code %>` is the
//! language's code (which may open a block that later text is inside of:
//! `<% $list.each |$x| { %>...<% } %>`), `<%# comment %>`, `<%%` and `%%>` print `<%`
//! and `%>`; `<%-` removes the spaces before it on its line and `-%>` the line break
//! after it. A first tag `<%- | String $x, $y = 1 | -%>` declares parameters, which the
//! call must then fit; without it, the keys of the hash given are the variables.
//!
//! The template is turned into tokens of the language without moving any: its text
//! outside the tags is blanked and lexed, so every token keeps its place in the
//! template (diagnostics point there), and the text between tags becomes calls that
//! print it. The whole is parsed as the body of a defined type whose parameters are the
//! template's, and evaluated in a scope of its own under top scope, as Puppet does.

use crate::Source;
use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::{Diagnostic, Span};
use crate::lexer::{Kw, P, Tok, Token};
use crate::syntax::DefineDef;

/// The name the parsed template's definition has (never visible).
const TEMPLATE: &str = "wconverge_epp_template";

/// What the template's text becomes: printed text, code, or a printed expression.
enum Segment {
    Text(String, usize),
    Code(usize, usize),
    Print(usize, usize),
}

/// Parses a template into the definition that renders it. `file` is the template's
/// index among the compile's files.
pub(crate) fn parse(
    file: u32,
    source: &Source,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<DefineDef> {
    let text = &source.text;
    let (segments, params, code_ranges) = match split(text) {
        Ok(split) => split,
        Err((at, message)) => {
            diagnostics.push(
                Diagnostic::error(
                    DiagnosticCode::EppSyntax,
                    Span::new(file, at, at + 2),
                    message,
                )
                .with_help("close every `<%` with `%>`; write `<%%` for a literal `<%`"),
            );
            return None;
        }
    };
    // Everything but code is blanked: the lexer sees the code where it is.
    let mut blanked: Vec<u8> = text
        .bytes()
        .map(|byte| if byte == b'\n' { b'\n' } else { b' ' })
        .collect();
    for (start, end) in &code_ranges {
        blanked[*start..*end].copy_from_slice(&text.as_bytes()[*start..*end]);
    }
    if let Some((start, end)) = params {
        blanked[start..end].copy_from_slice(&text.as_bytes()[start..end]);
        // The bars around the parameters.
        if let Some(open) = text[start..end].find('|') {
            blanked[start + open] = b' ';
        }
        if let Some(close) = text[start..end].rfind('|') {
            blanked[start + close] = b' ';
        }
    }
    let blanked = String::from_utf8(blanked).unwrap_or_default();
    let before = diagnostics.len();
    let tokens = crate::lexer::lex(file, &blanked, diagnostics);
    if diagnostics[before..].iter().any(Diagnostic::is_error) {
        return None;
    }
    let span_at = |at: usize| Span::new(file, at, at);
    let token = |tok: Tok, at: usize| Token {
        tok,
        span: span_at(at),
        line_start: false,
    };
    let within = |start: usize, end: usize| {
        tokens
            .iter()
            .filter(move |token| {
                token.tok != Tok::Eof
                    && (token.span.start as usize) >= start
                    && (token.span.start as usize) < end
            })
            .cloned()
    };
    let mut out = vec![
        token(Tok::Keyword(Kw::Define), 0),
        token(Tok::Name(TEMPLATE.to_owned()), 0),
        token(Tok::Punct(P::LParen), 0),
    ];
    if let Some((start, end)) = params {
        out.extend(within(start, end));
    }
    out.push(token(Tok::Punct(P::RParen), 0));
    out.push(token(Tok::Punct(P::LBrace), 0));
    for segment in segments {
        match segment {
            Segment::Text(content, at) => {
                out.push(token(Tok::Name("wconverge_epp_text".to_owned()), at));
                out.push(token(Tok::Punct(P::LParen), at));
                out.push(token(Tok::Str(content), at));
                out.push(token(Tok::Punct(P::RParen), at));
            }
            Segment::Code(start, end) => out.extend(within(start, end)),
            Segment::Print(start, end) => {
                out.push(token(Tok::Name("wconverge_epp_print".to_owned()), start));
                out.push(token(Tok::Punct(P::LParen), start));
                out.extend(within(start, end));
                out.push(token(Tok::Punct(P::RParen), end));
            }
        }
    }
    out.push(token(Tok::Punct(P::RBrace), text.len()));
    out.push(token(Tok::Eof, text.len()));
    let mut program = crate::syntax::Program::default();
    let before = diagnostics.len();
    crate::parser::parse_file(&blanked, out, &mut program, diagnostics);
    if diagnostics[before..].iter().any(Diagnostic::is_error) {
        return None;
    }
    program.defines.into_iter().next()
}

type Split = (Vec<Segment>, Option<(usize, usize)>, Vec<(usize, usize)>);

/// The template's segments, its parameter tag's range, and the ranges of its code.
fn split(text: &str) -> Result<Split, (usize, String)> {
    let mut segments = Vec::new();
    let mut code = Vec::new();
    let mut params = None;
    let mut pending = String::new();
    let mut pending_at = 0;
    let mut at = 0;
    let mut trim_newline = false;
    let mut only_blank_so_far = true;
    let bytes = text.as_bytes();
    while at < text.len() {
        if trim_newline {
            trim_newline = false;
            if text[at..].starts_with("\r\n") {
                at += 2;
                continue;
            }
            if bytes[at] == b'\n' {
                at += 1;
                continue;
            }
        }
        if text[at..].starts_with("<%%") {
            pending.push_str("<%");
            at += 3;
            continue;
        }
        if text[at..].starts_with("%%>") {
            pending.push_str("%>");
            at += 3;
            continue;
        }
        if !text[at..].starts_with("<%") {
            let ch = text[at..].chars().next().unwrap_or(' ');
            if pending.is_empty() {
                pending_at = at;
            }
            pending.push(ch);
            at += ch.len_utf8();
            continue;
        }
        // A tag.
        let open = at;
        let mut inner = at + 2;
        let trim_before = text[inner..].starts_with('-');
        if trim_before {
            inner += 1;
            // `<%-`: the spaces and tabs before the tag on its line go.
            let kept = pending.trim_end_matches([' ', '\t']).len();
            pending.truncate(kept);
        }
        let kind = match text[inner..].chars().next() {
            Some('=') => {
                inner += 1;
                '='
            }
            Some('#') => '#',
            _ => ' ',
        };
        let Some(close) = text[inner..].find("%>") else {
            return Err((open, "this `<%` is never closed with `%>`".to_owned()));
        };
        let mut end = inner + close;
        let after = end + 2;
        let trim_after = end > inner && bytes[end - 1] == b'-';
        if trim_after {
            end -= 1;
        }
        if !pending.is_empty() {
            if pending.trim().is_empty()
                && only_blank_so_far
                && kind == ' '
                && text[inner..end].trim_start().starts_with('|')
            {
                // Blank text before the parameter tag prints nothing.
            } else {
                only_blank_so_far &= pending.trim().is_empty();
                segments.push(Segment::Text(std::mem::take(&mut pending), pending_at));
            }
            pending.clear();
        }
        match kind {
            '#' => {}
            '=' => {
                code.push((inner, end));
                segments.push(Segment::Print(inner, end));
                only_blank_so_far = false;
            }
            _ => {
                let content = text[inner..end].trim_start();
                if content.starts_with('|') {
                    if !only_blank_so_far || params.is_some() {
                        return Err((
                            open,
                            "the parameter tag `<% |...| %>` must come first in the template"
                                .to_owned(),
                        ));
                    }
                    params = Some((inner, end));
                } else {
                    code.push((inner, end));
                    segments.push(Segment::Code(inner, end));
                }
                only_blank_so_far = false;
            }
        }
        at = after;
        trim_newline = trim_after;
    }
    if !pending.is_empty() {
        segments.push(Segment::Text(pending, pending_at));
    }
    Ok((segments, params, code))
}
