//! The lexer: source text to tokens, with byte spans and a note of which tokens start
//! a new line (the parser uses it to recover after a syntax error).
//!
//! Double-quoted strings are lexed into parts here: literal text, and the tokens of
//! each `${...}` interpolation, so the parser can parse them as expressions.

use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::{Diagnostic, Span};

/// Interpolations nest at most this deep: `"${"${"..."}"}"`.
const MAX_INTERPOLATION_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// A lowercase name, possibly qualified: `file`, `apache::vhost`, `::foo`.
    Name(String),
    /// A capitalized name: `File`, `Apache::Vhost`.
    TypeRef(String),
    /// `$name`, without the dollar sign.
    Var(String),
    Int(i64),
    Float(f64),
    /// A string with nothing to interpolate.
    Str(String),
    /// A double-quoted string with interpolations.
    Interp(Vec<Part>),
    Regex(String),
    Keyword(Kw),
    Punct(P),
    Eof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kw {
    If,
    Elsif,
    Else,
    Unless,
    Case,
    Class,
    Define,
    Node,
    Inherits,
    True,
    False,
    Undef,
    Default,
    And,
    Or,
    In,
    /// `type`, which starts a type declaration.
    Type,
    /// Reserved words wconverge does not implement yet: `function`, `import`...
    Reserved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum P {
    LBrace,
    RBrace,
    LBrack,
    RBrack,
    LParen,
    RParen,
    Comma,
    Semi,
    Colon,
    FatArrow,   // =>
    PlusArrow,  // +>
    PlusAssign, // +=
    InEdge,     // ->
    InEdgeSub,  // ~>
    OutEdge,    // <-
    OutEdgeSub, // <~
    LCollect,   // <|
    RCollect,   // |>
    LLCollect,  // <<|
    RRCollect,  // |>>
    Eq,         // ==
    Ne,         // !=
    Match,      // =~
    NoMatch,    // !~
    Ge,
    Le,
    Gt,
    Lt,
    LShift,
    RShift,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Not,
    Assign,
    Question,
    At,
    AtAt,
    Dot,
    Pipe,
}

impl P {
    pub(crate) fn text(self) -> &'static str {
        match self {
            P::LBrace => "{",
            P::RBrace => "}",
            P::LBrack => "[",
            P::RBrack => "]",
            P::LParen => "(",
            P::RParen => ")",
            P::Comma => ",",
            P::Semi => ";",
            P::Colon => ":",
            P::FatArrow => "=>",
            P::PlusArrow => "+>",
            P::PlusAssign => "+=",
            P::InEdge => "->",
            P::InEdgeSub => "~>",
            P::OutEdge => "<-",
            P::OutEdgeSub => "<~",
            P::LCollect => "<|",
            P::RCollect => "|>",
            P::LLCollect => "<<|",
            P::RRCollect => "|>>",
            P::Eq => "==",
            P::Ne => "!=",
            P::Match => "=~",
            P::NoMatch => "!~",
            P::Ge => ">=",
            P::Le => "<=",
            P::Gt => ">",
            P::Lt => "<",
            P::LShift => "<<",
            P::RShift => ">>",
            P::Plus => "+",
            P::Minus => "-",
            P::Star => "*",
            P::Slash => "/",
            P::Percent => "%",
            P::Not => "!",
            P::Assign => "=",
            P::Question => "?",
            P::At => "@",
            P::AtAt => "@@",
            P::Dot => ".",
            P::Pipe => "|",
        }
    }
}

/// The punctuation `rest` starts with: by its first byte, then the longest that fits
/// (`<<|` wins over `<<` and `<`).
fn punctuation(rest: &str) -> Option<(&'static str, P)> {
    let candidates: &[(&str, P)] = match rest.as_bytes().first()? {
        b'<' => &[
            ("<<|", P::LLCollect),
            ("<-", P::OutEdge),
            ("<~", P::OutEdgeSub),
            ("<|", P::LCollect),
            ("<=", P::Le),
            ("<<", P::LShift),
            ("<", P::Lt),
        ],
        b'|' => &[("|>>", P::RRCollect), ("|>", P::RCollect), ("|", P::Pipe)],
        b'=' => &[
            ("=>", P::FatArrow),
            ("==", P::Eq),
            ("=~", P::Match),
            ("=", P::Assign),
        ],
        b'+' => &[("+>", P::PlusArrow), ("+=", P::PlusAssign), ("+", P::Plus)],
        b'-' => &[("->", P::InEdge), ("-", P::Minus)],
        b'~' => &[("~>", P::InEdgeSub)],
        b'!' => &[("!=", P::Ne), ("!~", P::NoMatch), ("!", P::Not)],
        b'>' => &[(">=", P::Ge), (">>", P::RShift), (">", P::Gt)],
        b'@' => &[("@@", P::AtAt), ("@", P::At)],
        b'{' => &[("{", P::LBrace)],
        b'}' => &[("}", P::RBrace)],
        b'[' => &[("[", P::LBrack)],
        b']' => &[("]", P::RBrack)],
        b'(' => &[("(", P::LParen)],
        b')' => &[(")", P::RParen)],
        b',' => &[(",", P::Comma)],
        b';' => &[(";", P::Semi)],
        b':' => &[(":", P::Colon)],
        b'*' => &[("*", P::Star)],
        b'/' => &[("/", P::Slash)],
        b'%' => &[("%", P::Percent)],
        b'?' => &[("?", P::Question)],
        b'.' => &[(".", P::Dot)],
        _ => return None,
    };
    candidates
        .iter()
        .find(|(text, _)| rest.starts_with(text))
        .copied()
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Part {
    Lit(String),
    /// The tokens of one `${...}` or `$name` interpolation, ending with `Eof`.
    Expr(Vec<Token>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) span: Span,
    /// The token is the first on its line.
    pub(crate) line_start: bool,
}

pub(crate) fn keyword(word: &str) -> Option<Kw> {
    Some(match word {
        "if" => Kw::If,
        "elsif" => Kw::Elsif,
        "else" => Kw::Else,
        "unless" => Kw::Unless,
        "case" => Kw::Case,
        "class" => Kw::Class,
        "define" => Kw::Define,
        "node" => Kw::Node,
        "inherits" => Kw::Inherits,
        "true" => Kw::True,
        "false" => Kw::False,
        "undef" => Kw::Undef,
        "default" => Kw::Default,
        "and" => Kw::And,
        "or" => Kw::Or,
        "in" => Kw::In,
        "type" => Kw::Type,
        "function" | "import" | "private" | "plan" => Kw::Reserved,
        _ => return None,
    })
}

/// Lexes a whole file. Errors are reported and lexing goes on, so one bad character
/// does not hide the next problem.
pub(crate) fn lex(file: u32, text: &str, diagnostics: &mut Vec<Diagnostic>) -> Vec<Token> {
    let mut lexer = Lexer::new(file, text);
    let tokens = lexer.run(None);
    diagnostics.append(&mut lexer.diagnostics);
    tokens
}

/// The tokens of one file, lexed as the parser asks for them: the parser of a 10 MB
/// manifest holds the tokens of one top-level statement at a time, not its million
/// tokens at once. The sequence, and the problems reported, are those of [`lex`].
pub(crate) struct Stream<'a> {
    lexer: Lexer<'a>,
    state: RunState,
    done: bool,
}

impl<'a> Stream<'a> {
    pub(crate) fn new(file: u32, text: &'a str) -> Self {
        Stream {
            lexer: Lexer::new(file, text),
            state: RunState::default(),
            done: false,
        }
    }

    /// The next token; `Eof` at the end, and again after it.
    pub(crate) fn next(&mut self) -> Token {
        if self.done {
            let end = self.lexer.text.len();
            return Token {
                tok: Tok::Eof,
                span: self.lexer.span(end, end),
                line_start: true,
            };
        }
        let token = self.lexer.next_token(None, &mut self.state);
        self.done = token.tok == Tok::Eof;
        token
    }

    /// The problems found since the last call.
    pub(crate) fn problems(&mut self) -> std::vec::Drain<'_, Diagnostic> {
        self.lexer.diagnostics.drain(..)
    }
}

/// What lexing one token needs of those before it.
struct RunState {
    /// Inside `${`: how many braces are open within it.
    brace_depth: usize,
    /// The next token is the first of its line.
    line_start: bool,
    /// A `/` next would start a regular expression (the token before is no operand).
    regex_allowed: bool,
}

impl Default for RunState {
    fn default() -> Self {
        RunState {
            brace_depth: 0,
            line_start: true,
            regex_allowed: true,
        }
    }
}

struct Lexer<'a> {
    file: u32,
    text: &'a str,
    pos: usize,
    diagnostics: Vec<Diagnostic>,
    depth: usize,
    /// Where the next line starts when heredocs opened on this one: after their bodies.
    after_heredocs: Option<usize>,
    /// The escapes the double-quoted text being lexed honours (a heredoc's `/tn$`);
    /// `None` is a double-quoted string's: all of them.
    escapes: Option<String>,
}

impl<'a> Lexer<'a> {
    fn new(file: u32, text: &'a str) -> Self {
        Lexer {
            file,
            text,
            pos: 0,
            diagnostics: Vec::new(),
            depth: 0,
            after_heredocs: None,
            escapes: None,
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn peek_char(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn error(&mut self, start: usize, end: usize, message: String, help: &str) {
        let span = self.span(start, end.max(start));
        self.diagnostics
            .push(Diagnostic::error(DiagnosticCode::Syntax, span, message).with_help(help));
    }

    /// An opening (a quote, a slash, `/*`, `${`) with no end before the text ends.
    fn unterminated(&mut self, start: usize, end: usize, what: &str, help: &str) {
        self.error(start, end, format!("unterminated {what}"), help);
    }

    /// Lexes until the end of the text, or (inside `${`) until the matching `}`.
    fn run(&mut self, until_brace: Option<usize>) -> Vec<Token> {
        let mut tokens: Vec<Token> = Vec::new();
        let mut state = RunState::default();
        loop {
            let token = self.next_token(until_brace, &mut state);
            let end = token.tok == Tok::Eof;
            tokens.push(token);
            if end {
                return tokens;
            }
        }
    }

    /// The next token, `Eof` at the end of the text or (inside `${`) at the matching
    /// `}`; a character that makes no token is reported and skipped.
    fn next_token(&mut self, until_brace: Option<usize>, state: &mut RunState) -> Token {
        loop {
            // Whitespace and comments.
            loop {
                let rest = self.rest();
                // Spaces and tabs by their bytes; anything else by its character.
                match rest.as_bytes().first() {
                    Some(b' ' | b'\t' | b'\r') => {
                        self.pos += 1;
                        continue;
                    }
                    Some(byte) if byte.is_ascii_alphanumeric() => break,
                    _ => {}
                }
                let Some(c) = rest.chars().next() else { break };
                if c == '\n' {
                    state.line_start = true;
                    self.pos += 1;
                    // The bodies of the heredocs this line opened are not code.
                    if let Some(resume) = self.after_heredocs.take() {
                        self.pos = resume.max(self.pos);
                    }
                } else if c.is_whitespace() {
                    self.pos += c.len_utf8();
                } else if c == '#' {
                    self.pos += rest.find('\n').unwrap_or(rest.len());
                } else if let Some(comment) = rest.strip_prefix("/*") {
                    match comment.find("*/") {
                        Some(end) => {
                            if comment[..end].contains('\n') {
                                state.line_start = true;
                            }
                            self.pos += end + 4;
                        }
                        None => {
                            let start = self.pos;
                            self.pos = self.text.len();
                            self.unterminated(
                                start,
                                start + 2,
                                "comment",
                                "close the comment with `*/`",
                            );
                        }
                    }
                } else {
                    break;
                }
            }
            let start = self.pos;
            let Some(c) = self.peek_char() else {
                if let Some(open) = until_brace {
                    self.unterminated(
                        open,
                        open + 2,
                        "interpolation `${`",
                        "close the interpolation with `}` before the string ends",
                    );
                }
                return Token {
                    tok: Tok::Eof,
                    span: self.span(start, start),
                    line_start: true,
                };
            };
            if until_brace.is_some() {
                if c == '{' {
                    state.brace_depth += 1;
                } else if c == '}' {
                    if state.brace_depth == 0 {
                        self.pos += 1;
                        return Token {
                            tok: Tok::Eof,
                            span: self.span(start, start),
                            line_start: false,
                        };
                    }
                    state.brace_depth -= 1;
                }
            }
            if let Some(tok) = self.token(c, start, state.regex_allowed) {
                state.regex_allowed = regex_allowed(Some(&tok));
                let token = Token {
                    tok,
                    span: self.span(start, self.pos),
                    line_start: state.line_start,
                };
                state.line_start = false;
                return token;
            }
        }
    }

    fn token(&mut self, c: char, start: usize, regex_allowed: bool) -> Option<Tok> {
        if c == '$' {
            self.pos += 1;
            let name = self.qualified_name(|c| c.is_ascii_alphanumeric() || c == '_');
            if name.is_empty() {
                self.error(
                    start,
                    start + 1,
                    "`$` must be followed by a variable name".to_owned(),
                    "write a variable as `$name`",
                );
                return None;
            }
            return Some(Tok::Var(name));
        }
        if c.is_ascii_digit() {
            return self.number(start);
        }
        if c.is_ascii_lowercase() || c == '_' || (c == ':' && self.rest().starts_with("::")) {
            let name = self.qualified_name(|c| c.is_ascii_alphanumeric() || c == '_');
            if name.is_empty() || name == "::" {
                self.pos = start + 1;
                return Some(Tok::Punct(P::Colon));
            }
            if let Some(kw) = keyword(&name) {
                return Some(Tok::Keyword(kw));
            }
            return Some(Tok::Name(name));
        }
        if c.is_ascii_uppercase() {
            let name = self.qualified_name(|c| c.is_ascii_alphanumeric() || c == '_');
            return Some(Tok::TypeRef(name));
        }
        if c == '\'' {
            return self.single_quoted(start);
        }
        if c == '"' {
            return self.double_quoted(start);
        }
        if c == '/' && regex_allowed {
            return self.regex(start);
        }
        if c == '@' && self.rest().starts_with("@(") {
            return self.heredoc(start);
        }
        if let Some((text, punct)) = punctuation(self.rest()) {
            self.pos += text.len();
            return Some(Tok::Punct(punct));
        }
        self.pos += c.len_utf8();
        self.error(
            start,
            self.pos,
            format!("unexpected character `{}`", c.escape_default()),
            "remove it, or quote it in a string",
        );
        None
    }

    /// `word(::word)*`, with an optional leading `::`.
    fn qualified_name(&mut self, word_char: impl Fn(char) -> bool) -> String {
        let start = self.pos;
        loop {
            let rest = self.rest();
            if let Some(after) = rest.strip_prefix("::") {
                if after.chars().next().is_some_and(&word_char) {
                    self.pos += 2;
                    continue;
                }
                break;
            }
            match rest.chars().next() {
                Some(c) if word_char(c) => self.pos += c.len_utf8(),
                _ => break,
            }
        }
        self.text[start..self.pos].to_owned()
    }

    fn number(&mut self, start: usize) -> Option<Tok> {
        let rest = self.rest();
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let mut word = &rest[..len];
        // `$x[1].foo`: a dot not followed by a digit ends the number, and so does a
        // second dot (`192.168.0.1` in a node name is numbers joined by dots).
        if let Some(dot) = word.find('.') {
            if !word[dot + 1..].starts_with(|c: char| c.is_ascii_digit()) {
                word = &word[..dot];
            } else if let Some(second) = word[dot + 1..].find('.') {
                word = &word[..dot + 1 + second];
            }
        }
        let word = word.to_owned();
        self.pos += word.len();
        let parsed = if let Some(hex) = word.strip_prefix("0x").or_else(|| word.strip_prefix("0X"))
        {
            i64::from_str_radix(hex, 16).ok().map(Tok::Int)
        } else if word.contains(['.', 'e', 'E']) && !word.starts_with("0x") {
            word.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(Tok::Float)
        } else if word.len() > 1 && word.starts_with('0') {
            i64::from_str_radix(&word[1..], 8).ok().map(Tok::Int)
        } else {
            word.parse::<i64>().ok().map(Tok::Int)
        };
        if parsed.is_none() {
            self.error(
                start,
                self.pos,
                format!("`{word}` is not a number"),
                "write an integer (`42`, `0x2A`, `052`) or a float (`4.2`); quote it if it is text",
            );
            return Some(Tok::Int(0));
        }
        parsed
    }

    fn single_quoted(&mut self, start: usize) -> Option<Tok> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek_char() else {
                self.unterminated(start, start + 1, "string", "close the string with `'`");
                return Some(Tok::Str(out));
            };
            self.pos += c.len_utf8();
            match c {
                '\'' => return Some(Tok::Str(out)),
                '\\' => match self.peek_char() {
                    Some(next @ ('\\' | '\'')) => {
                        self.pos += 1;
                        out.push(next);
                    }
                    _ => out.push('\\'),
                },
                other => out.push(other),
            }
        }
    }

    fn double_quoted(&mut self, start: usize) -> Option<Tok> {
        self.pos += 1;
        // A string inside a heredoc's `${...}` has a string's escapes.
        let saved = self.escapes.take();
        let tok = self.interpolated(start, None);
        self.escapes = saved;
        tok
    }

    /// The parts of interpolated text: a double-quoted string's, up to its `"`, or a
    /// heredoc body's, up to `end`.
    fn interpolated(&mut self, start: usize, end: Option<usize>) -> Option<Tok> {
        let mut parts: Vec<Part> = Vec::new();
        let mut literal = String::new();
        loop {
            if end.is_some_and(|end| self.pos >= end) {
                break;
            }
            let Some(c) = self.peek_char() else {
                self.unterminated(start, start + 1, "string", "close the string with `\"`");
                break;
            };
            let at = self.pos;
            self.pos += c.len_utf8();
            match c {
                '"' if end.is_none() => break,
                '\\' => match &self.escapes {
                    None => self.escape(at, &mut literal),
                    Some(allowed) => {
                        let next = self.peek_char().unwrap_or(' ');
                        if heredoc_escapes(allowed, next) {
                            self.escape(at, &mut literal);
                        } else {
                            literal.push('\\');
                        }
                    }
                },
                '$' if self.rest().starts_with('{') => {
                    self.pos += 1;
                    if self.depth >= MAX_INTERPOLATION_DEPTH {
                        self.error(
                            at,
                            at + 2,
                            format!("interpolations nest more than {MAX_INTERPOLATION_DEPTH} deep"),
                            "compute the inner value in a variable first",
                        );
                        self.pos = self.text.len();
                        break;
                    }
                    self.depth += 1;
                    let tokens = self.run(Some(at));
                    self.depth -= 1;
                    if !literal.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Expr(tokens));
                }
                '$' if self.rest().starts_with("::")
                    || self
                        .peek_char()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    let name = self.qualified_name(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !literal.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut literal)));
                    }
                    let span = self.span(at, self.pos);
                    parts.push(Part::Expr(vec![
                        Token {
                            tok: Tok::Var(name),
                            span,
                            line_start: false,
                        },
                        Token {
                            tok: Tok::Eof,
                            span,
                            line_start: false,
                        },
                    ]));
                }
                other => literal.push(other),
            }
        }
        if parts.is_empty() {
            return Some(Tok::Str(literal));
        }
        if !literal.is_empty() {
            parts.push(Part::Lit(literal));
        }
        Some(Tok::Interp(parts))
    }

    fn escape(&mut self, at: usize, out: &mut String) {
        let Some(next) = self.peek_char() else {
            out.push('\\');
            return;
        };
        self.pos += next.len_utf8();
        match next {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            's' => out.push(' '),
            '$' => out.push('$'),
            '"' => out.push('"'),
            '\'' => out.push('\''),
            '\\' => out.push('\\'),
            '\n' => {}
            'u' => {
                let rest = self.rest();
                let (digits, consumed) = if let Some(braced) = rest.strip_prefix('{') {
                    let end = braced.find('}').unwrap_or(0);
                    (&braced[..end], end + 2)
                } else {
                    let end = rest
                        .char_indices()
                        .take(4)
                        .take_while(|(_, c)| c.is_ascii_hexdigit())
                        .count();
                    (&rest[..end], end)
                };
                let hex = !digits.is_empty() && digits.chars().all(|c| c.is_ascii_hexdigit());
                match u32::from_str_radix(digits, 16)
                    .ok()
                    .filter(|_| hex)
                    .and_then(char::from_u32)
                {
                    Some(c) => {
                        out.push(c);
                        self.pos += consumed;
                    }
                    _ => self.error(
                        at,
                        self.pos,
                        "invalid unicode escape".to_owned(),
                        "write `\\u{1F600}` or four hex digits `\\u00e9`",
                    ),
                }
            }
            other => {
                // Puppet keeps unknown escapes as written.
                out.push('\\');
                out.push(other);
            }
        }
    }

    fn regex(&mut self, start: usize) -> Option<Tok> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek_char() else {
                self.unterminated(start, start + 1, "regular expression", "close it with `/`");
                return Some(Tok::Regex(out));
            };
            if c == '\n' {
                self.unterminated(
                    start,
                    self.pos,
                    "regular expression",
                    "close it with `/` on the same line",
                );
                return Some(Tok::Regex(out));
            }
            self.pos += c.len_utf8();
            match c {
                '/' => return Some(Tok::Regex(out)),
                '\\' if self.peek_char() == Some('/') => {
                    self.pos += 1;
                    out.push('/');
                }
                other => out.push(other),
            }
        }
    }
}

fn regex_allowed(previous: Option<&Tok>) -> bool {
    !matches!(
        previous,
        Some(
            Tok::Name(_)
                | Tok::TypeRef(_)
                | Tok::Var(_)
                | Tok::Int(_)
                | Tok::Float(_)
                | Tok::Str(_)
                | Tok::Interp(_)
                | Tok::Regex(_)
                | Tok::Keyword(Kw::True | Kw::False | Kw::Undef | Kw::Default)
                | Tok::Punct(P::RParen | P::RBrack)
        )
    )
}

mod heredoc;
use heredoc::heredoc_escapes;
#[cfg(test)]
mod tests;
