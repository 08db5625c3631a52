//! ERB templates, rendered at compile time as Puppet renders them (`template('NAME/file.erb')`,
//! `inline_template(text)`), without running Ruby: the subset of Ruby module templates
//! use, interpreted here with Ruby's semantics.
//!
//! The template is split as Ruby's ERB splits it in Puppet's trim mode (`-`): text,
//! `<%= expression %>`, `<% code %>` (which may open a block that later text is inside
//! of), `<%# comment %>`, `<%%` for a literal `<%`; `<%-` at the start of a line removes
//! the blanks before it, `-%>` at the end of a line removes the line break. The code of
//! the whole template is then one Ruby program in which the text is printed where it
//! stands (`parse`), run against the variables of the scope that calls the template
//! (`run`): `@name`, `scope['name']`, `scope.lookupvar('class::name')`, and Puppet's
//! functions through `scope.function_NAME([args])` or `scope.call_function('NAME',
//! [args])`. Anything outside the subset is an error that names the construct and the
//! template's line, never a silent difference.

mod methods;
mod methods_collections;
mod parse;
mod run;

pub(crate) use parse::Program;
pub(crate) use run::{Host, RVal, render};

/// Longest template text rendered, and longest output (a loop could print without end).
pub(crate) const MAX_OUTPUT: usize = 16 << 20;

/// An error in a template: what, and the template's line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Error {
    pub(crate) message: String,
    pub(crate) line: u32,
}

impl Error {
    pub(crate) fn new(message: impl Into<String>, line: u32) -> Error {
        Error {
            message: message.into(),
            line,
        }
    }
}

/// A piece of the template, as ERB splits it.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Code(String, u32),
    Print(String, u32),
}

/// Splits `text` as Ruby's ERB does with trim mode `-` (its explicit scanner).
fn split(text: &str) -> Result<Vec<Part>, Error> {
    let mut parts = Vec::new();
    let mut pending = String::new();
    let mut rest = text;
    let mut line = 1u32;
    // Whether `rest` starts a line (where `<%-` may remove the blanks before it).
    let mut rest_starts_line = true;
    loop {
        let Some(open) = rest.find("<%") else {
            pending.push_str(rest);
            break;
        };
        let before = &rest[..open];
        let after = &rest[open + 2..];
        // `<%%` prints `<%`.
        if let Some(tail) = after.strip_prefix('%') {
            pending.push_str(before);
            pending.push_str("<%");
            line += count_lines(before);
            rest = tail;
            rest_starts_line = false;
            continue;
        }
        let mut text_before = before;
        if after.starts_with('-') {
            // `<%-` after nothing but blanks on its line: the blanks go.
            let line_start = before.rfind('\n').map(|at| at + 1);
            if (line_start.is_some() || rest_starts_line)
                && before[line_start.unwrap_or(0)..]
                    .chars()
                    .all(|c| c == ' ' || c == '\t')
            {
                text_before = &before[..line_start.unwrap_or(0)];
            }
        }
        pending.push_str(text_before);
        line += count_lines(before);
        let tag_line = line;
        let (kind, body_start) = match after.as_bytes().first() {
            Some(b'-') => ('c', 1),
            Some(b'=') => ('p', 1),
            Some(b'#') => ('#', 1),
            _ => ('c', 0),
        };
        let body_and_rest = &after[body_start..];
        let Some(close) = body_and_rest.find("%>") else {
            return Err(Error::new("a tag `<%` is never closed with `%>`", tag_line));
        };
        let mut body = &body_and_rest[..close];
        let mut tail = &body_and_rest[close + 2..];
        rest_starts_line = false;
        // `-%>` followed by a line break: the line break goes.
        if let Some(trimmed) = body.strip_suffix('-') {
            body = trimmed;
            if let Some(after_break) = tail.strip_prefix('\n') {
                tail = after_break;
                line += 1;
                rest_starts_line = true;
            } else if let Some(after_break) = tail.strip_prefix("\r\n") {
                tail = after_break;
                line += 1;
                rest_starts_line = true;
            }
        }
        if !pending.is_empty() {
            parts.push(Part::Text(std::mem::take(&mut pending)));
        }
        match kind {
            '#' => {}
            'p' => parts.push(Part::Print(body.to_owned(), tag_line)),
            _ => parts.push(Part::Code(body.to_owned(), tag_line)),
        }
        line += count_lines(body);
        rest = tail;
    }
    if !pending.is_empty() {
        parts.push(Part::Text(pending));
    }
    Ok(parts)
}

fn count_lines(text: &str) -> u32 {
    u32::try_from(text.bytes().filter(|b| *b == b'\n').count()).unwrap_or(u32::MAX)
}

/// Parses a template into the program that renders it.
pub(crate) fn parse_template(text: &str) -> Result<Program, Error> {
    let parts = split(text)?;
    let tokens = lex_parts(&parts)?;
    parse::parse(tokens)
}

/// A token of the template's Ruby, with the template's text and prints among them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Text(String),
    Print,
    EndPrint,
    Ident(String),
    Const(String),
    IVar(String),
    /// `name:` in a hash or an argument list.
    Label(String),
    Int(i64),
    Float(f64),
    Str(String),
    /// A double-quoted string with `#{...}`: its literal pieces and the tokens inside.
    DStr(Vec<StrPiece>),
    Sym(String),
    Regex(String),
    Punct(&'static str),
    Newline,
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StrPiece {
    Lit(String),
    Code(Vec<(Tok, u32)>),
}

const KEYWORDS_THAT_START_A_VALUE: &[&str] = &[
    "if", "unless", "elsif", "else", "and", "or", "not", "then", "do", "return", "when", "in",
    "while", "until", "puts", "print",
];

fn lex_parts(parts: &[Part]) -> Result<Vec<(Tok, u32)>, Error> {
    let mut tokens = Vec::new();
    // Where the text is (a line its tags were not trimmed from, near enough to say).
    let mut at = 1;
    for part in parts {
        match part {
            Part::Text(text) => {
                tokens.push((Tok::Text(text.clone()), at));
                at += count_lines(text);
            }
            Part::Code(code, line) => {
                tokens.push((Tok::Newline, *line));
                lex(code, *line, &mut tokens)?;
                at = line + count_lines(code);
                tokens.push((Tok::Newline, at));
            }
            Part::Print(code, line) => {
                tokens.push((Tok::Print, *line));
                lex(code, *line, &mut tokens)?;
                at = line + count_lines(code);
                tokens.push((Tok::EndPrint, at));
            }
        }
    }
    tokens.push((Tok::Eof, at));
    Ok(tokens)
}

/// Punctuation, longest first.
const PUNCT: &[&str] = &[
    "**=", "...", "<=>", "===", "||=", "&&=", "<<=", "&.", "==", "!=", "=~", "!~", ">=", "<=",
    "&&", "||", "<<", ">>", "+=", "-=", "*=", "/=", "::", "..", "=>", "->", "(", ")", "[", "]",
    "{", "}", ",", ".", "+", "-", "*", "/", "%", "=", "<", ">", "!", "?", ":", ";", "|", "&", "^",
    "~",
];

fn lex(code: &str, first_line: u32, out: &mut Vec<(Tok, u32)>) -> Result<(), Error> {
    let chars: Vec<char> = code.chars().collect();
    let mut at = 0;
    let mut line = first_line;
    let mut space_before;
    while at < chars.len() {
        let c = chars[at];
        space_before = at > 0 && chars[at - 1].is_whitespace();
        if c == '\n' {
            out.push((Tok::Newline, line));
            line += 1;
            at += 1;
            continue;
        }
        if c.is_whitespace() {
            at += 1;
            continue;
        }
        if c == '\\' && chars.get(at + 1) == Some(&'\n') {
            at += 2;
            line += 1;
            continue;
        }
        if c == '#' {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
            continue;
        }
        let value_expected = match out.last() {
            None => true,
            Some((Tok::Punct(p), _)) => !matches!(*p, ")" | "]" | "}"),
            Some((Tok::Ident(word), _)) => {
                KEYWORDS_THAT_START_A_VALUE.contains(&word.as_str())
                    || (space_before && chars.get(at + 1).is_some_and(|n| !n.is_whitespace()))
            }
            Some((Tok::Newline | Tok::Print | Tok::Text(_), _)) => true,
            _ => false,
        };
        if c.is_ascii_digit() {
            let start = at;
            while at < chars.len() && (chars[at].is_ascii_digit() || chars[at] == '_') {
                at += 1;
            }
            let mut float = false;
            if at + 1 < chars.len() && chars[at] == '.' && chars[at + 1].is_ascii_digit() {
                float = true;
                at += 1;
                while at < chars.len() && chars[at].is_ascii_digit() {
                    at += 1;
                }
            }
            // `1e-5`, `2.5E3`
            if at < chars.len() && matches!(chars[at], 'e' | 'E') {
                let mut end = at + 1;
                if end < chars.len() && matches!(chars[end], '-' | '+') {
                    end += 1;
                }
                if end < chars.len() && chars[end].is_ascii_digit() {
                    float = true;
                    at = end;
                    while at < chars.len() && chars[at].is_ascii_digit() {
                        at += 1;
                    }
                }
            }
            let text: String = chars[start..at].iter().filter(|c| **c != '_').collect();
            out.push((
                if float {
                    Tok::Float(text.parse().map_err(|_| Error::new("a bad number", line))?)
                } else {
                    Tok::Int(
                        text.parse()
                            .map_err(|_| Error::new(format!("`{text}` is too large"), line))?,
                    )
                },
                line,
            ));
            continue;
        }
        if c.is_alphabetic() || c == '_' || c == '@' || c == '$' {
            let start = at;
            at += 1;
            if c == '@' && chars.get(at) == Some(&'@') {
                return Err(Error::new(
                    "class variables (`@@name`) are not supported",
                    line,
                ));
            }
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            // `empty?`, `delete!`: a method name's last character.
            if c != '@'
                && c != '$'
                && at < chars.len()
                && (chars[at] == '?' || chars[at] == '!')
                && chars.get(at + 1) != Some(&'=')
                && !(chars[at] == '?'
                    && chars.get(at + 1).is_some_and(|n| n.is_whitespace())
                    && !chars[start].is_lowercase())
            {
                at += 1;
            }
            let word: String = chars[start..at].iter().collect();
            // `key: value`
            if c != '@'
                && chars.get(at) == Some(&':')
                && chars.get(at + 1) != Some(&':')
                && chars.get(at + 1).is_none_or(|n| n.is_whitespace())
                && !matches!(out.last(), Some((Tok::Punct("?"), _)))
            {
                at += 1;
                out.push((Tok::Label(word), line));
                continue;
            }
            let tok = if let Some(name) = word.strip_prefix('@') {
                Tok::IVar(name.to_owned())
            } else if c == '$' {
                return Err(Error::new(
                    format!("global variables (`{word}`) are not supported"),
                    line,
                ));
            } else if c.is_uppercase() {
                Tok::Const(word)
            } else {
                Tok::Ident(word)
            };
            out.push((tok, line));
            continue;
        }
        if c == '\'' {
            let mut text = String::new();
            at += 1;
            loop {
                match chars.get(at) {
                    None => return Err(Error::new("a string is never closed", line)),
                    Some('\'') => break,
                    Some('\\') if matches!(chars.get(at + 1), Some('\'' | '\\')) => {
                        text.push(chars[at + 1]);
                        at += 2;
                    }
                    Some(ch) => {
                        if *ch == '\n' {
                            line += 1;
                        }
                        text.push(*ch);
                        at += 1;
                    }
                }
            }
            at += 1;
            out.push((Tok::Str(text), line));
            continue;
        }
        if c == '"'
            || (c == '%'
                && value_expected
                && chars
                    .get(at + 1)
                    .is_some_and(|n| matches!(n, 'w' | 'W' | 'q' | 'Q' | '{' | '(' | '[')))
        {
            if c == '%' {
                at = percent_literal(&chars, at, &mut line, out)?;
                continue;
            }
            let (pieces, next) = double_quoted(&chars, at + 1, '"', &mut line)?;
            at = next;
            out.push((Tok::DStr(pieces), line));
            continue;
        }
        if c == ':'
            && chars
                .get(at + 1)
                .is_some_and(|n| n.is_alphabetic() || *n == '_')
            && value_expected
        {
            let start = at + 1;
            at += 1;
            while at < chars.len()
                && (chars[at].is_alphanumeric() || chars[at] == '_' || chars[at] == '?')
            {
                at += 1;
            }
            out.push((Tok::Sym(chars[start..at].iter().collect()), line));
            continue;
        }
        if c == '/' && value_expected {
            let mut pattern = String::new();
            at += 1;
            loop {
                match chars.get(at) {
                    None => return Err(Error::new("a regular expression is never closed", line)),
                    Some('/') => break,
                    Some('\\') => {
                        pattern.push('\\');
                        if let Some(next) = chars.get(at + 1) {
                            pattern.push(*next);
                        }
                        at += 2;
                    }
                    Some(ch) => {
                        pattern.push(*ch);
                        at += 1;
                    }
                }
            }
            at += 1;
            let mut flags = String::new();
            while at < chars.len() && matches!(chars[at], 'i' | 'm' | 'x') {
                flags.push(chars[at]);
                at += 1;
            }
            if !flags.is_empty() {
                let flags = flags.replace('m', "s");
                pattern = format!("(?{flags}){pattern}");
            }
            out.push((Tok::Regex(pattern), line));
            continue;
        }
        let rest: String = chars[at..chars.len().min(at + 3)].iter().collect();
        let Some(punct) = PUNCT.iter().find(|p| rest.starts_with(**p)) else {
            return Err(Error::new(
                format!("`{c}` is not Ruby this interpreter reads"),
                line,
            ));
        };
        at += punct.chars().count();
        out.push((Tok::Punct(punct), line));
    }
    Ok(())
}

/// `%w{a b}` (words) and `%q{...}`/`%Q{...}`/`%{...}` (strings).
fn percent_literal(
    chars: &[char],
    start: usize,
    line: &mut u32,
    out: &mut Vec<(Tok, u32)>,
) -> Result<usize, Error> {
    let mut at = start + 1;
    let kind = if chars[at].is_alphabetic() {
        at += 1;
        chars[at - 1]
    } else {
        'Q'
    };
    let open = chars.get(at).copied().unwrap_or(' ');
    let close = match open {
        '{' => '}',
        '(' => ')',
        '[' => ']',
        '<' => '>',
        other => other,
    };
    at += 1;
    if kind == 'Q' {
        let (pieces, next) = double_quoted(chars, at, close, line)?;
        out.push((Tok::DStr(pieces), *line));
        return Ok(next);
    }
    let mut text = String::new();
    while at < chars.len() && chars[at] != close {
        if chars[at] == '\n' {
            *line += 1;
        }
        text.push(chars[at]);
        at += 1;
    }
    if at >= chars.len() {
        return Err(Error::new(
            format!("a `%{kind}` literal is never closed"),
            *line,
        ));
    }
    match kind {
        'w' | 'W' => {
            out.push((Tok::Punct("["), *line));
            for (idx, word) in text.split_whitespace().enumerate() {
                if idx > 0 {
                    out.push((Tok::Punct(","), *line));
                }
                out.push((Tok::Str(word.to_owned()), *line));
            }
            out.push((Tok::Punct("]"), *line));
        }
        _ => out.push((Tok::Str(text), *line)),
    }
    Ok(at + 1)
}

/// A double-quoted string from `at` (past the opening quote) up to `close`: its pieces
/// and where the string ends.
fn double_quoted(
    chars: &[char],
    mut at: usize,
    close: char,
    line: &mut u32,
) -> Result<(Vec<StrPiece>, usize), Error> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    loop {
        let Some(&c) = chars.get(at) else {
            return Err(Error::new("a string is never closed", *line));
        };
        if c == close {
            at += 1;
            break;
        }
        if c == '\\' {
            let next = chars.get(at + 1).copied().unwrap_or('\\');
            at += 2;
            match next {
                'n' => literal.push('\n'),
                't' => literal.push('\t'),
                'r' => literal.push('\r'),
                'e' => literal.push('\u{1b}'),
                's' => literal.push(' '),
                '0' => literal.push('\0'),
                '\n' => *line += 1,
                other => literal.push(other),
            }
            continue;
        }
        if c == '#' && chars.get(at + 1) == Some(&'{') {
            let mut depth = 0usize;
            let start = at + 2;
            let mut end = start;
            while end < chars.len() {
                match chars[end] {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    _ => {}
                }
                end += 1;
            }
            if end >= chars.len() {
                return Err(Error::new("`#{` is never closed in a string", *line));
            }
            let code: String = chars[start..end].iter().collect();
            let mut tokens = Vec::new();
            lex(&code, *line, &mut tokens)?;
            tokens.push((Tok::Eof, *line));
            if !literal.is_empty() {
                pieces.push(StrPiece::Lit(std::mem::take(&mut literal)));
            }
            pieces.push(StrPiece::Code(tokens));
            at = end + 1;
            continue;
        }
        if c == '\n' {
            *line += 1;
        }
        literal.push(c);
        at += 1;
    }
    if !literal.is_empty() || pieces.is_empty() {
        pieces.push(StrPiece::Lit(literal));
    }
    Ok((pieces, at))
}

#[cfg(test)]
mod tests;
