//! The parser: tokens to a syntax tree, recovering after an error so that every
//! independent syntax error in a file is reported.
//!
//! Expressions are parsed by precedence climbing with Puppet's precedence table
//! (relationship arrows lowest, then assignment, `or`, `and`, comparisons, `==`/`!=`,
//! shifts, `+`/`-`, `*`/`/`/`%`, matches, `in`, unary operators, and access,
//! selectors and method calls highest).
//!
//! Nesting is bounded by [`MAX_NESTING`]: deeper input is an error, never a stack
//! overflow.
//!
//! This file holds the parser's state and its handling of tokens; the grammar is in
//! `statements`, `definitions` and `expressions`.

use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::{Diagnostic, Span};
use crate::lexer::{Kw, P, Part, Tok, Token};
use crate::syntax::*;

mod definitions;
mod expressions;
mod statements;
/// Brackets, blocks and expressions nest at most this deep.
pub const MAX_NESTING: usize = 100;

/// Operators chained in one expression (`a + b + ...`, `a -> b -> ...`), at most.
pub const MAX_CHAIN: usize = 10_000;

/// Functions that may be called without parentheses at the start of a statement.
const STATEMENT_FUNCTIONS: &[&str] = &[
    "include", "require", "contain", "realize", "tag", "notice", "info", "warning", "debug", "err",
    "fail",
];

/// An error has been reported; the caller recovers.
struct Stop;

type PResult<T> = Result<T, Stop>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Top,
    Class,
    Other,
}

pub(crate) struct Parser<'p> {
    text: &'p str,
    tokens: Vec<Token>,
    pos: usize,
    diagnostics: &'p mut Vec<Diagnostic>,
    program: &'p mut Program,
    depth: usize,
    /// Names of the classes being parsed, for nested definitions' prefixes.
    namespace: Vec<String>,
    context: Vec<Context>,
    /// Blocks open around the current statement.
    open_blocks: usize,
    /// Parsing the tokens of one `${...}`, whose end is not the end of the file.
    in_interpolation: bool,
    /// Chained operators open around the current point, across nesting: each makes
    /// the tree one level deeper, so together they are bounded by `MAX_CHAIN`.
    chain_depth: usize,
    /// Where the tokens after `tokens` come from, when they are lexed as parsing goes:
    /// `tokens` then holds those of the top-level statement being parsed and
    /// [`LOOKAHEAD`] more.
    stream: Option<crate::lexer::Stream<'p>>,
    /// Attribute names, each kept once however often it is written: a manifest names
    /// the same few attributes in every resource, and the evaluator shares them too.
    names: std::collections::HashSet<std::rc::Rc<str>>,
}

/// How many tokens past the current one the parser looks at, at most.
const LOOKAHEAD: usize = 3;

/// Parses one file's tokens; definitions go into `program`, top-level statements are
/// returned.
pub(crate) fn parse_file(
    text: &str,
    tokens: Vec<Token>,
    program: &mut Program,
    diagnostics: &mut Vec<Diagnostic>,
) -> Block {
    Parser::new(text, tokens, None, program, diagnostics).statements(false)
}

/// Lexes and parses one file's text, lexing as parsing goes (the tokens of one top-level
/// statement at a time); the same tree and problems as [`crate::lexer::lex`] then
/// [`parse_file`].
pub(crate) fn parse_text(
    file: u32,
    text: &str,
    program: &mut Program,
    diagnostics: &mut Vec<Diagnostic>,
) -> Block {
    let stream = crate::lexer::Stream::new(file, text);
    let mut parser = Parser::new(text, Vec::new(), Some(stream), program, diagnostics);
    parser.fill();
    parser.statements(false)
}

impl<'p> Parser<'p> {
    fn new(
        text: &'p str,
        tokens: Vec<Token>,
        stream: Option<crate::lexer::Stream<'p>>,
        program: &'p mut Program,
        diagnostics: &'p mut Vec<Diagnostic>,
    ) -> Self {
        Parser {
            text,
            tokens,
            pos: 0,
            diagnostics,
            program,
            depth: 0,
            namespace: Vec::new(),
            context: vec![Context::Top],
            open_blocks: 0,
            in_interpolation: false,
            chain_depth: 0,
            stream,
            names: std::collections::HashSet::new(),
        }
    }

    /// The attribute name, shared with its other occurrences.
    fn intern(&mut self, name: String) -> std::rc::Rc<str> {
        if let Some(existing) = self.names.get(name.as_str()) {
            return std::rc::Rc::clone(existing);
        }
        let name: std::rc::Rc<str> = name.into();
        self.names.insert(std::rc::Rc::clone(&name));
        name
    }

    /// Lexes up to [`LOOKAHEAD`] tokens past the current one (or to the end).
    fn fill(&mut self) {
        let Some(stream) = &mut self.stream else {
            return;
        };
        while self.tokens.len() <= self.pos + LOOKAHEAD
            && self.tokens.last().is_none_or(|token| token.tok != Tok::Eof)
        {
            self.tokens.push(stream.next());
            self.diagnostics.extend(stream.problems());
        }
    }

    /// The token `ahead` past the current one, lexed now if it was not yet (for the
    /// few forms that look past [`LOOKAHEAD`], up to a bracket that closes).
    fn peek_far(&mut self, ahead: usize) -> &Tok {
        if let Some(stream) = &mut self.stream {
            while self.tokens.len() <= self.pos + ahead
                && self.tokens.last().is_none_or(|token| token.tok != Tok::Eof)
            {
                self.tokens.push(stream.next());
                self.diagnostics.extend(stream.problems());
            }
        }
        self.peek_at(ahead)
    }

    /// Forgets the tokens before the previous one, between top-level statements: no
    /// parse looks back further than that.
    fn forget_parsed(&mut self) {
        if self.stream.is_some() && self.pos > 1 {
            self.tokens.drain(..self.pos - 1);
            self.pos = 1;
        }
    }

    /// Moves to the end of the file (skipping the rest, after an error that leaves
    /// nothing to parse sensibly); the rest is still lexed, for its problems.
    fn skip_to_end(&mut self) {
        if let Some(stream) = &mut self.stream {
            loop {
                let token = stream.next();
                self.diagnostics.extend(stream.problems());
                if token.tok == Tok::Eof {
                    if self.tokens.last().is_none_or(|last| last.tok != Tok::Eof) {
                        self.tokens.push(token);
                    }
                    break;
                }
            }
        }
        self.pos = self.tokens.len() - 1;
    }

    fn peek(&self) -> &Tok {
        &self.tokens[self.pos.min(self.tokens.len() - 1)].tok
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        &self.tokens[(self.pos + ahead).min(self.tokens.len() - 1)].tok
    }

    fn token(&self) -> &Token {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn span(&self) -> Span {
        self.token().span
    }

    fn previous_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1).min(self.tokens.len() - 1)].span
    }

    /// Moves past the current token; its span.
    fn bump(&mut self) -> Span {
        let span = self.span();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        self.fill();
        span
    }

    /// The current token, moved out of the token list (a name or a string goes into
    /// the tree as it is, not copied) and left as `Eof`: call it only to move past the
    /// token next. The parser never reads a token it has moved past, but for its span
    /// and (to recover) its punctuation.
    fn take(&mut self) -> Tok {
        let idx = self.pos.min(self.tokens.len() - 1);
        std::mem::replace(&mut self.tokens[idx].tok, Tok::Eof)
    }

    /// The current token, moved out when it holds text (a string, name, variable,
    /// regular expression or interpolation), else copied: for a `match` whose every arm
    /// that gets such a token moves past it.
    fn take_text(&mut self) -> Tok {
        match self.peek() {
            Tok::Name(_)
            | Tok::TypeRef(_)
            | Tok::Var(_)
            | Tok::Str(_)
            | Tok::Interp(_)
            | Tok::Regex(_) => self.take(),
            other => other.clone(),
        }
    }

    fn at(&self, punct: P) -> bool {
        *self.peek() == Tok::Punct(punct)
    }

    fn at_kw(&self, kw: Kw) -> bool {
        *self.peek() == Tok::Keyword(kw)
    }

    fn eat(&mut self, punct: P) -> bool {
        if self.at(punct) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// No whitespace between the previous token and this one: `$a[1]` is an access,
    /// `$a [1]` is not.
    fn adjacent(&self) -> bool {
        self.pos > 0 && self.tokens[self.pos - 1].span.end == self.span().start
    }

    fn expect(&mut self, punct: P, what: &str) -> PResult<Span> {
        if self.at(punct) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(&format!("`{}` {what}", punct.text())))
        }
    }

    /// Expects a closing bracket; at the end of the file, also points at the opening one.
    fn expect_close(&mut self, punct: P, what: &str, open: Span) -> PResult<Span> {
        let result = self.expect(punct, what);
        if result.is_err()
            && *self.peek() == Tok::Eof
            && let Some(last) = self.diagnostics.last_mut()
            && last.related.is_empty()
        {
            last.related.push((open, "opened here".to_owned()));
        }
        result
    }

    fn unexpected(&mut self, expected: &str) -> Stop {
        if self.in_interpolation && *self.peek() == Tok::Eof {
            let span = self.span();
            self.diagnostics.push(
                Diagnostic::error(
                    DiagnosticCode::Syntax,
                    span,
                    format!("expected {expected}, found the `}}` that ends the interpolation"),
                )
                .with_help("complete the expression inside `${...}`"),
            );
            return Stop;
        }
        let found = describe(self.peek());
        let span = self.span();
        // Two failed statements may stop at the same token; say it once.
        if self
            .diagnostics
            .last()
            .is_some_and(|last| last.span == span)
        {
            return Stop;
        }
        self.diagnostics.push(
            Diagnostic::error(
                DiagnosticCode::Syntax,
                span,
                format!("expected {expected}, found {found}"),
            )
            .with_label(format!("expected {expected} here"))
            .with_help(syntax_help(self.peek(), expected)),
        );
        Stop
    }

    fn error(&mut self, span: Span, message: impl Into<String>, help: &str) -> Stop {
        self.diagnostics
            .push(Diagnostic::error(DiagnosticCode::Syntax, span, message).with_help(help));
        Stop
    }

    fn chain_limit(&mut self, span: Span) -> Stop {
        self.diagnostics.push(
            Diagnostic::error(
                DiagnosticCode::NestingLimit,
                span,
                format!(
                    "more than {MAX_CHAIN} operators are chained in one expression (the limit)"
                ),
            )
            .with_help("split the expression into several statements"),
        );
        self.skip_to_end();
        Stop
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            let span = self.span();
            self.diagnostics.push(
                Diagnostic::error(
                    DiagnosticCode::NestingLimit,
                    span,
                    format!("nesting is deeper than the limit of {MAX_NESTING} levels"),
                )
                .with_help("flatten the expression, or build it in steps with variables"),
            );
            // Skip everything: the rest of this file cannot be parsed sensibly.
            self.skip_to_end();
            return Err(Stop);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }
}

const BP_ASSIGN: u8 = 2;
const BP_UNARY: u8 = 12;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Infix {
    Assign,
    /// `+=`: appends to a feature of an object `new` initializes.
    Append,
    Binary(BinOp),
}

fn infix(tok: &Tok) -> Option<(Infix, u8)> {
    let binary = |op, bp| Some((Infix::Binary(op), bp));
    match tok {
        Tok::Punct(P::Assign) => Some((Infix::Assign, BP_ASSIGN)),
        Tok::Punct(P::PlusAssign) => Some((Infix::Append, BP_ASSIGN)),
        Tok::Keyword(Kw::Or) => binary(BinOp::Or, 3),
        Tok::Keyword(Kw::And) => binary(BinOp::And, 4),
        Tok::Punct(P::Lt) => binary(BinOp::Lt, 5),
        Tok::Punct(P::Le) => binary(BinOp::Le, 5),
        Tok::Punct(P::Gt) => binary(BinOp::Gt, 5),
        Tok::Punct(P::Ge) => binary(BinOp::Ge, 5),
        Tok::Punct(P::Eq) => binary(BinOp::Eq, 6),
        Tok::Punct(P::Ne) => binary(BinOp::Ne, 6),
        Tok::Punct(P::LShift) => binary(BinOp::LShift, 7),
        Tok::Punct(P::RShift) => binary(BinOp::RShift, 7),
        Tok::Punct(P::Plus) => binary(BinOp::Add, 8),
        Tok::Punct(P::Minus) => binary(BinOp::Sub, 8),
        Tok::Punct(P::Star) => binary(BinOp::Mul, 9),
        Tok::Punct(P::Slash) => binary(BinOp::Div, 9),
        Tok::Punct(P::Percent) => binary(BinOp::Rem, 9),
        Tok::Punct(P::Match) => binary(BinOp::Match, 10),
        Tok::Punct(P::NoMatch) => binary(BinOp::NoMatch, 10),
        Tok::Keyword(Kw::In) => binary(BinOp::In, 11),
        _ => None,
    }
}

fn keyword_text(token: &Token) -> &'static str {
    match token.tok {
        Tok::Keyword(Kw::If) => "if",
        Tok::Keyword(Kw::Elsif) => "elsif",
        Tok::Keyword(Kw::Else) => "else",
        Tok::Keyword(Kw::Unless) => "unless",
        Tok::Keyword(Kw::Case) => "case",
        Tok::Keyword(Kw::Class) => "class",
        Tok::Keyword(Kw::Define) => "define",
        Tok::Keyword(Kw::Node) => "node",
        Tok::Keyword(Kw::Inherits) => "inherits",
        Tok::Keyword(Kw::Undef) => "undef",
        Tok::Keyword(Kw::Default) => "default",
        Tok::Keyword(Kw::And) => "and",
        Tok::Keyword(Kw::Or) => "or",
        Tok::Keyword(Kw::In) => "in",
        Tok::Keyword(Kw::Type) => "type",
        _ => "?",
    }
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Name(name) => format!("`{name}`"),
        Tok::TypeRef(name) => format!("`{name}`"),
        Tok::Var(name) => format!("`${name}`"),
        Tok::Int(value) => format!("the number `{value}`"),
        Tok::Float(value) => format!("the number `{value}`"),
        Tok::Str(_) | Tok::Interp(_) => "a string".to_owned(),
        Tok::Regex(_) => "a regular expression".to_owned(),
        Tok::Keyword(Kw::Reserved) => "a reserved word".to_owned(),
        Tok::Keyword(_) => "a keyword".to_owned(),
        Tok::Punct(punct) => format!("`{}`", punct.text()),
        Tok::Eof => "the end of the file".to_owned(),
    }
}

fn syntax_help(found: &Tok, expected: &str) -> String {
    let starts_value = matches!(
        found,
        Tok::Name(_) | Tok::Var(_) | Tok::Str(_) | Tok::Interp(_) | Tok::Int(_) | Tok::Float(_)
    );
    match found {
        Tok::Eof => "something is not closed: check the brackets and quotes above".to_owned(),
        Tok::Punct(P::PlusArrow) => {
            "`+>` appends only in defaults, overrides and collectors".to_owned()
        }
        Tok::Keyword(Kw::Type) => {
            "`type` starts a type declaration; as a string or a hash key, quote it: 'type'"
                .to_owned()
        }
        _ if expected.contains("after the title") => {
            "a resource body is a title, a colon, then attributes: `file { '/etc/motd': ensure => file }`".to_owned()
        }
        _ if starts_value && expected.starts_with("`}`") => {
            "a comma may be missing: separate attributes with commas, `name => value,`".to_owned()
        }
        _ if expected == "an expression" => {
            "a value is missing here: write a string, number, variable, array or hash".to_owned()
        }
        _ => format!("write {expected} here"),
    }
}

/// The layer and keys of `$node.default['a']['b']`, when `target` is such a path; each
/// access takes one key.
fn node_write_target(target: &Expr) -> Option<(NodeLayer, Vec<Expr>)> {
    match &target.kind {
        ExprKind::NodeLayer(layer) => Some((*layer, Vec::new())),
        ExprKind::Access(inner, keys) if keys.len() == 1 => {
            let (layer, mut path) = node_write_target(inner)?;
            path.push(keys[0].clone());
            Some((layer, path))
        }
        _ => None,
    }
}

/// The variable under `$name[k]...` (or `$name.method`), if `expr` is rooted at one.
fn access_root(expr: &Expr) -> Option<&str> {
    match &expr.kind {
        ExprKind::Var(name) => Some(name),
        ExprKind::Access(target, _) => access_root(target),
        ExprKind::Call { args, .. } => args.first().and_then(access_root),
        _ => None,
    }
}
