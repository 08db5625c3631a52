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

use crate::diagnostic::{Diagnostic, Span};
use crate::lexer::{Kw, P, Part, Tok, Token};
use crate::syntax::*;

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
                    "syntax",
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
                "syntax",
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
            .push(Diagnostic::error("syntax", span, message).with_help(help));
        Stop
    }

    fn chain_limit(&mut self, span: Span) -> Stop {
        self.diagnostics.push(
            Diagnostic::error(
                "nesting-limit",
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
                    "nesting-limit",
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

    // ---- statements ----

    fn statements(&mut self, in_block: bool) -> Block {
        let mut block = Vec::new();
        loop {
            if !in_block {
                self.forget_parsed();
            }
            while self.eat(P::Semi) {}
            match self.peek() {
                Tok::Eof => break,
                Tok::Punct(P::RBrace) if in_block => break,
                _ => {}
            }
            let before = self.pos;
            let depth = self.depth;
            let chain_depth = self.chain_depth;
            let result = self.statement();
            self.chain_depth = chain_depth;
            match result {
                Ok(expr) => block.push(expr),
                Err(Stop) => {
                    // A failed statement may leave nesting levels entered.
                    self.depth = depth;
                    self.recover(before);
                }
            }
        }
        block
    }

    /// Skips the rest of a statement that failed to parse: first whatever brackets it
    /// opened, then to the next token that starts a line. A `}` that closes an
    /// enclosing block is left for that block.
    fn recover(&mut self, before: usize) {
        let mut depth: usize = 0;
        for token in &self.tokens[before..self.pos] {
            match token.tok {
                Tok::Punct(P::LBrace | P::LBrack | P::LParen | P::LCollect | P::LLCollect) => {
                    depth += 1;
                }
                Tok::Punct(P::RBrace | P::RBrack | P::RParen | P::RCollect | P::RRCollect) => {
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
        let mut moved = self.pos != before;
        loop {
            let token = self.token();
            match token.tok {
                Tok::Eof => return,
                Tok::Punct(P::LBrace | P::LBrack | P::LParen | P::LCollect | P::LLCollect) => {
                    depth += 1;
                }
                Tok::Punct(P::RBrace | P::RBrack | P::RParen | P::RCollect | P::RRCollect) => {
                    if depth == 0 {
                        if token.tok == Tok::Punct(P::RBrace) && self.open_blocks > 0 && moved {
                            return;
                        }
                    } else {
                        depth -= 1;
                        if depth == 0 {
                            self.bump();
                            return;
                        }
                    }
                }
                _ if depth == 0 && token.line_start && moved => return,
                _ => {}
            }
            self.bump();
            moved = true;
        }
    }

    fn block(&mut self, context: Context) -> PResult<Block> {
        let open = self.expect(P::LBrace, "to open a block")?;
        self.enter()?;
        self.context.push(context);
        self.open_blocks += 1;
        let block = self.statements(true);
        self.open_blocks -= 1;
        self.context.pop();
        self.leave();
        self.expect_close(P::RBrace, "to close the block", open)?;
        Ok(block)
    }

    fn statement(&mut self) -> PResult<Expr> {
        match self.peek() {
            Tok::Keyword(Kw::Class) if matches!(self.peek_at(1), Tok::Name(_)) => {
                return self.class_definition();
            }
            Tok::Keyword(Kw::Define) => return self.define_definition(),
            Tok::Keyword(Kw::Node) => return self.node_definition(),
            Tok::Keyword(Kw::Type) => return self.type_definition(),
            Tok::Keyword(Kw::Reserved)
                if self.source_word(self.span()) == "function"
                    && matches!(self.peek_at(1), Tok::Name(_)) =>
            {
                return self.function_definition();
            }
            _ => {}
        }
        let mut lhs = self.operand()?;
        loop {
            let op = match self.peek() {
                Tok::Punct(P::InEdge) => RelOp::Before,
                Tok::Punct(P::InEdgeSub) => RelOp::Notify,
                Tok::Punct(P::OutEdge) => RelOp::Require,
                Tok::Punct(P::OutEdgeSub) => RelOp::Subscribe,
                _ => break,
            };
            let op_span = self.bump();
            self.chain_depth += 1;
            if self.chain_depth > MAX_CHAIN {
                return Err(self.chain_limit(op_span));
            }
            let rhs = self.operand()?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Relation(Box::new(lhs), op, Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    /// One relationship operand: a resource, default or override expression, a
    /// statement-style call, or an ordinary expression.
    fn operand(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Punct(P::At) => {
                self.bump();
                return self.resource(Form::Virtual, start);
            }
            Tok::Punct(P::AtAt) => {
                self.bump();
                return self.resource(Form::Exported, start);
            }
            Tok::Name(_) | Tok::Keyword(Kw::Class) if *self.peek_at(1) == Tok::Punct(P::LBrace) => {
                return self.resource(Form::Regular, start);
            }
            Tok::TypeRef(name) if *self.peek_at(1) == Tok::Punct(P::LBrace) => {
                let type_span = self.bump();
                // `File { mode => ... }` sets defaults; `File { '/a': ... }` declares.
                if !self.attributes_follow(0) {
                    return self.resource_bodies(
                        Form::Regular,
                        start,
                        name.to_ascii_lowercase(),
                        type_span,
                    );
                }
                let ops = self.attribute_block()?;
                return Ok(Expr {
                    kind: ExprKind::Defaults {
                        type_name: name.to_ascii_lowercase(),
                        ops,
                    },
                    span: start.to(self.previous_span()),
                });
            }
            Tok::Name(name)
                if STATEMENT_FUNCTIONS.contains(&name.as_str())
                    && !self.call_parenthesis_follows()
                    && !self.tokens[(self.pos + 1).min(self.tokens.len() - 1)].line_start =>
            {
                self.bump();
                let mut args = vec![self.expr(BP_ASSIGN)?];
                while self.eat(P::Comma) {
                    args.push(self.expr(BP_ASSIGN)?);
                }
                return Ok(Expr {
                    kind: ExprKind::Call {
                        name,
                        args,
                        lambda: None,
                    },
                    span: start.to(self.previous_span()),
                });
            }
            Tok::Keyword(Kw::Reserved) => {
                let span = self.span();
                let word = self.source_word(span).to_owned();
                return Err(self.error(
                    span,
                    format!("`{word}` is a reserved word that wconverge does not support here"),
                    "rename it; if it names a variable or attribute, quote it or use `$`",
                ));
            }
            Tok::Keyword(Kw::Class) => {
                return Err(self.unexpected("a class name or `{` after `class`"));
            }
            _ => {}
        }
        let expr = self.expr(BP_ASSIGN)?;
        let overridable = match &expr.kind {
            ExprKind::Var(_) => true,
            ExprKind::Access(target, _) => {
                matches!(target.kind, ExprKind::TypeRef(_) | ExprKind::Var(_))
            }
            _ => false,
        };
        // `Resource[File] { mode => ... }` sets defaults for the type given.
        if self.at(P::LBrace)
            && self.attributes_follow(0)
            && let ExprKind::Access(target, keys) = &expr.kind
            && target.kind == ExprKind::TypeRef("Resource".to_owned())
            && let [key] = keys.as_slice()
            && let ExprKind::TypeRef(name) | ExprKind::Str(name) | ExprKind::Bare(name) = &key.kind
        {
            let type_name = name.to_ascii_lowercase();
            let ops = self.attribute_block()?;
            return Ok(Expr {
                kind: ExprKind::Defaults { type_name, ops },
                span: start.to(self.previous_span()),
            });
        }
        if overridable && self.at(P::LBrace) && !self.attributes_follow(0) {
            // `Resource[File] { '/a': ... }` declares a resource of the type given.
            if let ExprKind::Access(target, keys) = &expr.kind
                && target.kind == ExprKind::TypeRef("Resource".to_owned())
                && let [key] = keys.as_slice()
            {
                let type_name = match &key.kind {
                    ExprKind::TypeRef(name) | ExprKind::Str(name) | ExprKind::Bare(name) => {
                        name.to_ascii_lowercase()
                    }
                    _ => {
                        return Err(self.error(
                            key.span,
                            "the type in `Resource[...] { ... }` must be written out",
                            "write the type itself: `Resource[File]` or `Resource['file']`",
                        ));
                    }
                };
                return self.resource_bodies(Form::Regular, start, type_name, key.span);
            }
        }
        if overridable && self.at(P::LBrace) {
            let ops = self.attribute_block()?;
            let span = expr.span.to(self.previous_span());
            return Ok(Expr {
                kind: ExprKind::Override {
                    target: Box::new(expr),
                    ops,
                },
                span,
            });
        }
        Ok(expr)
    }

    /// `name(` with no space: an ordinary call. `notice ("x")` is a statement call
    /// whose first argument is in parentheses.
    fn call_parenthesis_follows(&self) -> bool {
        let next = &self.tokens[(self.pos + 1).min(self.tokens.len() - 1)];
        next.tok == Tok::Punct(P::LParen) && next.span.start == self.span().end
    }

    fn source_word(&self, span: Span) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or_default()
    }

    fn resource(&mut self, form: Form, start: Span) -> PResult<Expr> {
        let type_span = self.span();
        let type_name = match self.peek().clone() {
            Tok::Name(name) => name.trim_start_matches("::").to_owned(),
            Tok::Keyword(Kw::Class) => "class".to_owned(),
            Tok::TypeRef(name) => {
                return Err(self.error(
                    type_span,
                    format!("a resource type is written in lowercase: `{}`", name.to_ascii_lowercase()),
                    "`File { ... }` with a capital sets defaults; `file { 'title': ... }` declares a resource",
                ));
            }
            _ => return Err(self.unexpected("a resource type after `@`")),
        };
        self.bump();
        self.resource_bodies(form, start, type_name, type_span)
    }

    /// The bodies of a resource expression whose type has been read.
    fn resource_bodies(
        &mut self,
        form: Form,
        start: Span,
        type_name: String,
        type_span: Span,
    ) -> PResult<Expr> {
        let open = self.expect(P::LBrace, "after the resource type")?;
        self.enter()?;
        let mut bodies = Vec::new();
        loop {
            if self.at(P::RBrace) {
                break;
            }
            let title = self.expr(BP_ASSIGN)?;
            self.expect(P::Colon, "after the title")?;
            let ops = self.attribute_ops(&[P::Semi, P::RBrace])?;
            bodies.push(Body { title, ops });
            if !self.eat(P::Semi) {
                break;
            }
        }
        self.leave();
        self.expect_close(P::RBrace, "to close the resource", open)?;
        bodies.shrink_to_fit();
        if bodies.is_empty() {
            return Err(self.error(
                start.to(self.previous_span()),
                "a resource expression needs at least one body",
                "write a title and its attributes: `file { '/etc/motd': ensure => file }`",
            ));
        }
        Ok(Expr {
            kind: ExprKind::Resource(Box::new(ResourceExpr {
                form,
                type_name,
                type_span,
                bodies,
            })),
            span: start.to(self.previous_span()),
        })
    }

    /// `{ name => value, ... }` after a type, a reference or a collector.
    fn attribute_block(&mut self) -> PResult<Vec<AttrOp>> {
        let open = self.expect(P::LBrace, "to open the attributes")?;
        self.enter()?;
        let ops = self.attribute_ops(&[P::RBrace])?;
        self.leave();
        self.expect_close(P::RBrace, "to close the attributes", open)?;
        Ok(ops)
    }

    fn attribute_ops(&mut self, terminators: &[P]) -> PResult<Vec<AttrOp>> {
        let mut ops = Vec::new();
        loop {
            if terminators.iter().any(|t| self.at(*t)) {
                break;
            }
            let name_span = self.span();
            let name = match self.peek() {
                Tok::Name(name) if !name.contains("::") => match self.take() {
                    Tok::Name(name) => name,
                    // Just seen to be a name.
                    _ => String::new(),
                },
                Tok::Keyword(Kw::True | Kw::False) | Tok::Keyword(Kw::Reserved) => {
                    return Err(self.unexpected("an attribute name"));
                }
                Tok::Keyword(_) => keyword_text(&self.tokens[self.pos]).to_owned(),
                Tok::Punct(P::Star) => "*".to_owned(),
                _ => return Err(self.unexpected("an attribute name")),
            };
            self.bump();
            let kind = match self.peek() {
                Tok::Punct(P::FatArrow) if name == "*" => AttrOpKind::Splat,
                Tok::Punct(P::FatArrow) => AttrOpKind::Set,
                Tok::Punct(P::PlusArrow) if name != "*" => AttrOpKind::Append,
                _ => return Err(self.unexpected("`=>` after the attribute name")),
            };
            self.bump();
            let value = self.expr(BP_ASSIGN)?;
            let name = self.intern(name);
            ops.push(AttrOp {
                name,
                name_span,
                kind,
                value,
            });
            if !self.eat(P::Comma) {
                break;
            }
        }
        // Kept as long as the syntax tree: as long as it needs to be, no more.
        ops.shrink_to_fit();
        Ok(ops)
    }

    fn params(&mut self) -> PResult<Vec<Param>> {
        let mut params = Vec::new();
        if !self.eat(P::LParen) {
            return Ok(params);
        }
        loop {
            if self.at(P::RParen) {
                break;
            }
            // A data type before the name: a single name is enforced (a basic data type,
            // or a declared type the value is instantiated as); a parameterized one
            // (`Array[String]`) is accepted and not enforced yet.
            let (data_type, type_expr) = if matches!(self.peek(), Tok::TypeRef(_)) {
                let written = self.expr(BP_ASSIGN + 1)?;
                let name = match &written.kind {
                    ExprKind::TypeRef(name) => Some((name.clone(), written.span)),
                    _ => None,
                };
                (name, Some(written))
            } else {
                (None, None)
            };
            let span = self.span();
            let Tok::Var(name) = self.peek().clone() else {
                return Err(self.unexpected("a parameter like `$name`"));
            };
            self.bump();
            if name.contains("::") {
                return Err(self.error(
                    span,
                    format!("parameter `${name}` must be a simple name"),
                    "remove the `::` from the parameter name",
                ));
            }
            let default = if self.eat(P::Assign) {
                Some(self.expr(BP_ASSIGN + 1)?)
            } else {
                None
            };
            params.push(Param {
                name,
                span,
                data_type,
                type_expr,
                default,
            });
            if !self.eat(P::Comma) {
                break;
            }
        }
        self.expect(P::RParen, "to close the parameter list")?;
        Ok(params)
    }

    fn definition_name(&mut self, what: &str) -> PResult<(String, Span)> {
        let span = self.span();
        match self.peek().clone() {
            Tok::Name(name) => {
                self.bump();
                let name = name.trim_start_matches("::").to_owned();
                let full = match self.namespace.last() {
                    Some(outer) if !name.contains("::") => format!("{outer}::{name}"),
                    _ => name,
                };
                Ok((full, span))
            }
            _ => Err(self.unexpected(&format!("a lowercase {what} name"))),
        }
    }

    fn check_definition_place(
        &mut self,
        span: Span,
        what: &str,
        allowed_in_class: bool,
    ) -> PResult<()> {
        let context = *self.context.last().unwrap_or(&Context::Top);
        if context == Context::Top || (allowed_in_class && context == Context::Class) {
            return Ok(());
        }
        Err(self.error(
            span,
            format!(
                "a {what} definition may only appear at the top level of a file{}",
                if allowed_in_class {
                    " or inside a class"
                } else {
                    ""
                }
            ),
            "move the definition out of the block it is in",
        ))
    }

    fn class_definition(&mut self) -> PResult<Expr> {
        let start = self.bump();
        self.check_definition_place(start, "class", true)?;
        let (name, name_span) = self.definition_name("class")?;
        let params = self.params()?;
        let parent = if self.at_kw(Kw::Inherits) {
            self.bump();
            let span = self.span();
            match self.peek().clone() {
                Tok::Name(parent) => {
                    self.bump();
                    Some((parent.trim_start_matches("::").to_owned(), span))
                }
                _ => return Err(self.unexpected("the name of the parent class")),
            }
        } else {
            None
        };
        self.namespace.push(name.clone());
        let body = self.block(Context::Class);
        self.namespace.pop();
        let body = body?;
        self.program.classes.push(ClassDef {
            name,
            span: name_span,
            params,
            parent,
            body: std::cell::RefCell::new(body),
        });
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    fn define_definition(&mut self) -> PResult<Expr> {
        let (definition, start) = self.parameterized_definition("define", "defined type", true)?;
        self.program.defines.push(definition);
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    /// The keyword, name, parameters and body of a defined type or a function (whose
    /// `>> ReturnType` before the body is skipped: read, not checked).
    fn parameterized_definition(
        &mut self,
        keyword: &str,
        what: &str,
        allowed_in_class: bool,
    ) -> PResult<(DefineDef, Span)> {
        let start = self.bump();
        self.check_definition_place(start, keyword, allowed_in_class)?;
        let (name, name_span) = self.definition_name(what)?;
        let params = self.params()?;
        if keyword == "function" && self.eat(P::RShift) {
            // The return type: skipped up to the body's `{`, brackets balanced.
            let mut depth = 0usize;
            loop {
                match self.peek() {
                    Tok::Eof => return Err(self.unexpected("the body's `{`")),
                    Tok::Punct(P::LBrace) if depth == 0 => break,
                    Tok::Punct(P::LBrack | P::LParen | P::LBrace) => depth += 1,
                    Tok::Punct(P::RBrack | P::RParen | P::RBrace) => {
                        depth = depth.saturating_sub(1);
                    }
                    _ => {}
                }
                self.bump();
            }
        }
        let body = self.block(Context::Other)?;
        Ok((
            DefineDef {
                name,
                span: name_span,
                params,
                body,
            },
            start,
        ))
    }

    /// `function name($a, Integer $b = 1) >> ReturnType { body }`: Puppet's functions
    /// in the language; the value of the body's last expression is the function's. The
    /// return type is read and not checked.
    fn function_definition(&mut self) -> PResult<Expr> {
        let (definition, start) = self.parameterized_definition("function", "function", false)?;
        self.program.functions.push(definition);
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    /// `type Name inherits Parent { attr ...; has ...; invariant ...; abstract }`. Its
    /// words (`attr`, `has`, `invariant`, `abstract` and the settings) are keywords only
    /// here.
    fn type_definition(&mut self) -> PResult<Expr> {
        let start = self.bump();
        self.check_definition_place(start, "type", false)?;
        let span = self.span();
        let Tok::TypeRef(name) = self.peek().clone() else {
            return Err(self.unexpected("a capitalized type name like `User` or `MyApp::Config`"));
        };
        self.bump();
        let name = name.trim_start_matches("::").to_owned();
        // `type Port = Integer[0, 65535]`: Puppet's type alias.
        if self.eat(P::Assign) {
            let value = self.expr(BP_ASSIGN + 1)?;
            let end = value.span;
            self.program.aliases.push(AliasDef { name, span, value });
            return Ok(Expr {
                kind: ExprKind::Definition,
                span: start.to(end),
            });
        }
        let parent = if self.at_kw(Kw::Inherits) {
            self.bump();
            let parent_span = self.span();
            let Tok::TypeRef(parent) = self.peek().clone() else {
                return Err(self.unexpected("the name of the type it inherits"));
            };
            self.bump();
            Some((parent.trim_start_matches("::").to_owned(), parent_span))
        } else {
            None
        };
        let open = self.expect(P::LBrace, "to open the type's body")?;
        self.enter()?;
        let mut def = TypeDef {
            name,
            span,
            parent,
            features: Vec::new(),
            invariants: Vec::new(),
            is_abstract: false,
        };
        loop {
            while self.eat(P::Semi) || self.eat(P::Comma) {}
            if self.at(P::RBrace) || matches!(self.peek(), Tok::Eof) {
                break;
            }
            let word_span = self.span();
            let Tok::Name(word) = self.peek().clone() else {
                return Err(self.unexpected("`attr`, `has`, `invariant` or `abstract`"));
            };
            match word.as_str() {
                "attr" | "has" => {
                    self.bump();
                    def.features.push(self.feature(word == "has")?);
                }
                "invariant" => {
                    self.bump();
                    let title = match self.peek().clone() {
                        Tok::Str(title) => {
                            self.bump();
                            Some(title)
                        }
                        _ => None,
                    };
                    let source = self.code()?;
                    def.invariants.push(InvariantDef {
                        title,
                        span: word_span,
                        source,
                    });
                }
                "abstract" => {
                    self.bump();
                    def.is_abstract = true;
                }
                _ => {
                    return Err(self.error(
                        word_span,
                        format!("`{word}` cannot start a statement in a type declaration"),
                        "a type's body holds `attr NAME, Type { ... }`, `has NAME, Type { ... }`, \
                         `invariant \"title\" { ... }` and `abstract`",
                    ));
                }
            }
        }
        self.leave();
        self.expect_close(P::RBrace, "to close the type's body", open)?;
        self.program.types.push(def);
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    /// `NAME (, Type)? ({ settings })?` after `attr` or `has`.
    fn feature(&mut self, has: bool) -> PResult<FeatureDef> {
        let span = self.span();
        let name = match self.peek().clone() {
            Tok::Name(name) if !name.contains("::") => name,
            Tok::Keyword(Kw::True | Kw::False | Kw::Reserved) => {
                return Err(self.unexpected("a feature name"));
            }
            Tok::Keyword(_) => keyword_text(self.token()).to_owned(),
            _ => return Err(self.unexpected("a feature name")),
        };
        self.bump();
        let data_type = if self.eat(P::Comma) {
            let type_span = self.span();
            let spec = match self.peek().clone() {
                Tok::TypeRef(type_name) if type_name == "Enum" => {
                    self.bump();
                    TypeSpec::Enum(self.enum_cases()?)
                }
                Tok::TypeRef(type_name) => {
                    self.bump();
                    TypeSpec::Named(type_name.trim_start_matches("::").to_owned())
                }
                Tok::Name(word) if word == "enum" => {
                    self.bump();
                    TypeSpec::Enum(self.enum_cases()?)
                }
                _ => {
                    return Err(self.unexpected(
                        "a data type: `Integer`, `Float`, `String`, `Boolean`, `enum[a, b]` or \
                         a declared type",
                    ));
                }
            };
            Some((spec, type_span.to(self.previous_span())))
        } else {
            None
        };
        if has && data_type.is_none() {
            return Err(self.error(
                span,
                format!("`has {name}` needs the type it refers to"),
                "write `has roles, UserRole`",
            ));
        }
        let mut settings = Vec::new();
        if self.at(P::LBrace) {
            let open = self.bump();
            self.enter()?;
            loop {
                if self.at(P::RBrace) {
                    break;
                }
                let setting_span = self.span();
                let setting = match self.peek().clone() {
                    Tok::Name(setting) => setting,
                    Tok::Keyword(Kw::Default) => "default".to_owned(),
                    _ => {
                        return Err(
                            self.unexpected("a setting like `min`, `max`, `default` or `check`")
                        );
                    }
                };
                self.bump();
                self.expect(P::FatArrow, "after the setting's name")?;
                let value = if matches!(setting.as_str(), "check" | "validate" | "derived") {
                    SettingValue::Code(self.code()?)
                } else {
                    SettingValue::Expr(self.expr(BP_ASSIGN)?)
                };
                settings.push(Setting {
                    name: setting,
                    span: setting_span,
                    value,
                });
                if !self.eat(P::Comma) {
                    break;
                }
            }
            self.leave();
            self.expect_close(P::RBrace, "to close the feature's settings", open)?;
        }
        Ok(FeatureDef {
            has,
            name,
            span,
            data_type,
            settings,
        })
    }

    /// `[a, b, 'c']` after `enum`.
    fn enum_cases(&mut self) -> PResult<Vec<String>> {
        self.expect(P::LBrack, "to open the enum's cases")?;
        let mut cases = Vec::new();
        loop {
            match self.peek().clone() {
                Tok::Name(case) | Tok::Str(case) => {
                    self.bump();
                    cases.push(case);
                }
                Tok::Punct(P::RBrack) => break,
                _ => return Err(self.unexpected("a case of the enum: a name or a string")),
            }
            if !self.eat(P::Comma) {
                break;
            }
        }
        self.expect(P::RBrack, "to close the enum's cases")?;
        if cases.is_empty() {
            let span = self.previous_span();
            return Err(self.error(
                span,
                "an enum needs at least one case",
                "write `enum[a, b]`",
            ));
        }
        Ok(cases)
    }

    /// A check, a derivation or an invariant: a block (`{ ... }`), a lambda
    /// (`|$x| { ... }`) or an expression; parsed now (so errors point here) and kept as
    /// its source text, which the host evaluates.
    fn code(&mut self) -> PResult<String> {
        let start = self.span();
        if self.at(P::LBrace) {
            self.block(Context::Other)?;
        } else if self.at(P::Pipe) {
            self.lambda()?;
        } else {
            self.expr(BP_ASSIGN)?;
        }
        let span = start.to(self.previous_span());
        Ok(self.source_word(span).to_owned())
    }

    fn node_definition(&mut self) -> PResult<Expr> {
        let start = self.bump();
        self.check_definition_place(start, "node", false)?;
        let mut matches = Vec::new();
        loop {
            let span = self.span();
            let host = match self.peek().clone() {
                Tok::Str(name) => {
                    self.bump();
                    HostMatch::Name(name)
                }
                Tok::Regex(pattern) => {
                    self.bump();
                    HostMatch::Regex(pattern)
                }
                Tok::Keyword(Kw::Default) => {
                    self.bump();
                    HostMatch::Default
                }
                Tok::Name(_) | Tok::Int(_) | Tok::Float(_) => {
                    // `web01.example.com` lexes as names, numbers and dots.
                    let mut name = String::new();
                    loop {
                        match self.peek().clone() {
                            Tok::Name(part) => name.push_str(&part),
                            Tok::Int(_) | Tok::Float(_) => {
                                let token = self.token().span;
                                name.push_str(self.source_word(token));
                            }
                            _ => break,
                        }
                        self.bump();
                        if !(self.at(P::Dot) && self.adjacent()) {
                            break;
                        }
                        self.bump();
                        name.push('.');
                    }
                    HostMatch::Name(name)
                }
                _ => return Err(self.unexpected("a node name, a regular expression or `default`")),
            };
            if let HostMatch::Name(name) = &host
                && !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                return Err(self.error(
                    span,
                    format!("`{name}` is not a valid node name"),
                    "node names use only a-z, A-Z, 0-9, `_`, `-` and `.`; use a regular expression for patterns",
                ));
            }
            matches.push((host, span.to(self.previous_span())));
            if !self.eat(P::Comma) || self.at(P::LBrace) {
                break;
            }
        }
        if self.at_kw(Kw::Inherits) {
            let span = self.span();
            return Err(self.error(
                span,
                "node inheritance is not supported",
                "put what the nodes share in a class and `include` it in each node",
            ));
        }
        let body = self.block(Context::Other)?;
        self.program.nodes.push(NodeDef {
            matches,
            span: start,
            body,
        });
        Ok(Expr {
            kind: ExprKind::Definition,
            span: start,
        })
    }

    // ---- expressions ----

    fn expr(&mut self, min_bp: u8) -> PResult<Expr> {
        self.enter()?;
        let chain_depth = self.chain_depth;
        let result = self.expr_inner(min_bp);
        self.chain_depth = chain_depth;
        self.leave();
        result
    }

    fn expr_inner(&mut self, min_bp: u8) -> PResult<Expr> {
        let mut lhs = self.prefix()?;
        // Operators chained to the left (`a + b + c`, `$x[0][1]`) nest the tree without
        // recursing here; they are counted instead (`expr` restores the count).
        loop {
            self.chain_depth += 1;
            if self.chain_depth > MAX_CHAIN {
                let span = self.span();
                return Err(self.chain_limit(span));
            }
            // Postfix operators bind tightest.
            if self.at(P::LBrack) && self.adjacent() {
                self.bump();
                let mut keys = Vec::new();
                loop {
                    if self.at(P::RBrack) {
                        break;
                    }
                    keys.push(self.expr(BP_ASSIGN)?);
                    if !self.eat(P::Comma) {
                        break;
                    }
                }
                self.expect(P::RBrack, "to close the access")?;
                if keys.is_empty() {
                    let span = lhs.span.to(self.previous_span());
                    return Err(self.error(
                        span,
                        "an access needs at least one key",
                        "write `$x[key]` or `File['title']`",
                    ));
                }
                let span = lhs.span.to(self.previous_span());
                lhs = Expr {
                    kind: ExprKind::Access(Box::new(lhs), keys),
                    span,
                };
                continue;
            }
            if self.at(P::Question) {
                self.bump();
                lhs = self.selector(lhs)?;
                continue;
            }
            if self.at(P::Dot) {
                self.bump();
                // `$node.default` and `$node.override`: the layers node attributes are
                // written to.
                if matches!(&lhs.kind, ExprKind::Var(name) if name == "node") {
                    let layer = match self.peek() {
                        Tok::Name(name) if name == "override" => Some(NodeLayer::Override),
                        Tok::Keyword(Kw::Default) => Some(NodeLayer::Default),
                        _ => None,
                    };
                    if let Some(layer) = layer {
                        self.bump();
                        let span = lhs.span.to(self.previous_span());
                        lhs = Expr {
                            kind: ExprKind::NodeLayer(layer),
                            span,
                        };
                        continue;
                    }
                }
                let Tok::Name(name) = self.peek().clone() else {
                    return Err(self.unexpected("a function name after `.`"));
                };
                self.bump();
                let mut args = vec![lhs];
                if self.at(P::LParen) && self.adjacent() {
                    args.extend(self.call_args()?);
                } else if name == "new" && self.at(P::LBrace) {
                    // `MyType.new { attr => value }`: the hash of the features.
                    args.push(self.primary()?);
                }
                let lambda = self.lambda()?;
                let span = args[0].span.to(self.previous_span());
                lhs = Expr {
                    kind: ExprKind::Call { name, args, lambda },
                    span,
                };
                continue;
            }
            let Some((op, bp)) = infix(self.peek()) else {
                break;
            };
            if bp < min_bp {
                break;
            }
            let op_span = self.bump();
            if op == Infix::Append
                || (op == Infix::Assign
                    && matches!(&lhs.kind, ExprKind::Access(target, keys)
                        if keys.len() == 1
                            && matches!(&target.kind, ExprKind::Var(name)
                                if name != "node" && name != "facts")))
            {
                // `$t[feature] = value` and `$t[feature] += value`: the lambda of `new`
                // initializing its object.
                let ExprKind::Access(target, mut keys) = lhs.kind else {
                    return Err(self.error(
                        op_span,
                        "`+=` appends only to a feature of an object that `new` initializes",
                        "write `new(MyType) |$t| { $t[groups] += 'wheel' }`",
                    ));
                };
                let ExprKind::Var(var) = target.kind else {
                    return Err(self.error(
                        op_span,
                        "`+=` appends only to a feature of an object that `new` initializes",
                        "write `new(MyType) |$t| { $t[groups] += 'wheel' }`",
                    ));
                };
                if keys.len() != 1 {
                    return Err(self.error(
                        op_span,
                        "a feature is written with one key",
                        "write `$t[feature] = value`",
                    ));
                }
                let key = keys.remove(0);
                let rhs = self.expr(bp)?;
                let span = lhs.span.to(rhs.span);
                lhs = Expr {
                    kind: ExprKind::FeatureWrite {
                        var,
                        key: Box::new(key),
                        append: op == Infix::Append,
                        value: Box::new(rhs),
                    },
                    span,
                };
                continue;
            }
            if op == Infix::Assign {
                if let Some((layer, keys)) = node_write_target(&lhs) {
                    if keys.is_empty() {
                        return Err(self.error(
                            lhs.span,
                            "a whole layer of node attributes cannot be assigned",
                            "write a key: `$node.default['app']['port'] = 8080`",
                        ));
                    }
                    let rhs = self.expr(bp)?;
                    let span = lhs.span.to(rhs.span);
                    lhs = Expr {
                        kind: ExprKind::NodeWrite {
                            layer,
                            keys,
                            value: Box::new(rhs),
                        },
                        span,
                    };
                    continue;
                }
                let ExprKind::Var(name) = &lhs.kind else {
                    let root = access_root(&lhs);
                    let (message, help) = match root {
                        Some("node") => (
                            "node attributes are written through a precedence",
                            "write `$node.default['key'] = value` (or `$node.override[...]`); \
                             `$node[...]` reads",
                        ),
                        Some("facts") => (
                            "`$facts` is read-only",
                            "facts come from the machine; keep your own values in a variable or \
                             a node attribute",
                        ),
                        _ => (
                            "only a variable can be assigned to",
                            "write `$name = value`",
                        ),
                    };
                    return Err(self.error(op_span, message, help));
                };
                if name.contains("::") {
                    return Err(self.error(
                        lhs.span,
                        format!("cannot assign to `${name}`, a variable of another scope"),
                        "assign to a simple name in this scope",
                    ));
                }
                let name = name.clone();
                let rhs = self.expr(bp)?; // right associative
                let span = lhs.span.to(rhs.span);
                lhs = Expr {
                    kind: ExprKind::Assign(name, Box::new(rhs)),
                    span,
                };
                continue;
            }
            let Infix::Binary(op) = op else {
                unreachable!("assignment handled above")
            };
            let rhs = self.expr(bp + 1)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    fn prefix(&mut self) -> PResult<Expr> {
        let start = self.span();
        if self.eat(P::Not) {
            let operand = self.expr(BP_UNARY)?;
            let span = start.to(operand.span);
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(operand)),
                span,
            });
        }
        if self.eat(P::Minus) {
            let operand = self.expr(BP_UNARY)?;
            let span = start.to(operand.span);
            return Ok(Expr {
                kind: ExprKind::Neg(Box::new(operand)),
                span,
            });
        }
        self.primary()
    }

    fn primary(&mut self) -> PResult<Expr> {
        let span = self.span();
        let simple = |kind| Ok(Expr { kind, span });
        // Every arm that gets a token holding text moves past it.
        match self.take_text() {
            Tok::Int(value) => {
                self.bump();
                simple(ExprKind::Int(value))
            }
            Tok::Float(value) => {
                self.bump();
                simple(ExprKind::Float(value))
            }
            Tok::Str(value) => {
                self.bump();
                simple(ExprKind::Str(value))
            }
            Tok::Regex(value) => {
                self.bump();
                simple(ExprKind::Regex(value))
            }
            Tok::Keyword(Kw::True) => {
                self.bump();
                simple(ExprKind::Bool(true))
            }
            Tok::Keyword(Kw::False) => {
                self.bump();
                simple(ExprKind::Bool(false))
            }
            Tok::Keyword(Kw::Undef) => {
                self.bump();
                simple(ExprKind::Undef)
            }
            Tok::Keyword(Kw::Default) => {
                self.bump();
                simple(ExprKind::Default)
            }
            Tok::Var(name) => {
                self.bump();
                simple(ExprKind::Var(name))
            }
            Tok::Interp(parts) => {
                self.bump();
                let parts = self.interpolation(parts)?;
                simple(ExprKind::Interp(parts))
            }
            // `lazy { expr }`: where a value is expected, `lazy` before a brace is never a
            // resource declaration.
            Tok::Name(name) if name == "lazy" && *self.peek_at(1) == Tok::Punct(P::LBrace) => {
                self.bump();
                let open = self.bump();
                let inner = self.expr(BP_ASSIGN)?;
                self.expect_close(P::RBrace, "to close the lazy block", open)?;
                Ok(Expr {
                    kind: ExprKind::Lazy(Box::new(inner)),
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Name(name) => {
                self.bump();
                if self.at(P::LParen) && self.adjacent() {
                    let args = self.call_args()?;
                    let lambda = self.lambda()?;
                    return Ok(Expr {
                        kind: ExprKind::Call { name, args, lambda },
                        span: span.to(self.previous_span()),
                    });
                }
                simple(ExprKind::Bare(name))
            }
            Tok::TypeRef(name) => {
                self.bump();
                if self.at(P::LCollect) || self.at(P::LLCollect) {
                    return self.collector(name, span);
                }
                // `Sensitive('secret')`, Puppet's way to mark a value sensitive, and the
                // conversions `Integer('0x10')`, `String(5)`, `Array($x)`...: `new` of
                // the type.
                let conversion = matches!(
                    name.as_str(),
                    "Integer" | "Float" | "Numeric" | "String" | "Boolean" | "Array" | "Hash"
                );
                if (name == "Sensitive" || conversion) && self.at(P::LParen) && self.adjacent() {
                    let args = self.call_args()?;
                    let lambda = if conversion { self.lambda()? } else { None };
                    return Ok(Expr {
                        kind: ExprKind::Call {
                            name: if conversion {
                                format!("new_{}", name.to_ascii_lowercase())
                            } else {
                                "sensitive".to_owned()
                            },
                            args,
                            lambda,
                        },
                        span: span.to(self.previous_span()),
                    });
                }
                simple(ExprKind::TypeRef(name))
            }
            Tok::Punct(P::LBrack) => {
                self.bump();
                let mut items = Vec::new();
                loop {
                    if self.at(P::RBrack) {
                        break;
                    }
                    items.push(self.expr(BP_ASSIGN)?);
                    if !self.eat(P::Comma) {
                        break;
                    }
                }
                self.expect_close(P::RBrack, "to close the array", span)?;
                Ok(Expr {
                    kind: ExprKind::Array(items),
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Punct(P::LBrace) => {
                self.bump();
                let mut entries = Vec::new();
                loop {
                    if self.at(P::RBrace) {
                        break;
                    }
                    let key = self.expr(BP_ASSIGN)?;
                    self.expect(P::FatArrow, "between a hash key and its value")?;
                    let value = self.expr(BP_ASSIGN)?;
                    entries.push((key, value));
                    if !self.eat(P::Comma) {
                        break;
                    }
                }
                self.expect_close(P::RBrace, "to close the hash", span)?;
                Ok(Expr {
                    kind: ExprKind::Hash(entries),
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Punct(P::LParen) => {
                self.bump();
                let inner = self.expr(BP_ASSIGN)?;
                if matches!(
                    self.peek(),
                    Tok::Punct(P::InEdge | P::InEdgeSub | P::OutEdge | P::OutEdgeSub)
                ) {
                    let at = self.span();
                    return Err(self.error(
                        at,
                        "a relationship cannot be inside parentheses",
                        "write the relationship as a statement of its own",
                    ));
                }
                self.expect_close(P::RParen, "to close the parenthesis", span)?;
                Ok(Expr {
                    kind: inner.kind,
                    span: span.to(self.previous_span()),
                })
            }
            Tok::Keyword(Kw::If) => self.if_expr(false),
            Tok::Keyword(Kw::Unless) => self.if_expr(true),
            Tok::Keyword(Kw::Case) => self.case_expr(),
            _ => Err(self.unexpected("an expression")),
        }
    }

    fn interpolation(&mut self, parts: Vec<Part>) -> PResult<Vec<InterpPart>> {
        let mut out = Vec::new();
        for part in parts {
            match part {
                Part::Lit(text) => out.push(InterpPart::Lit(text)),
                Part::Expr(mut tokens) => {
                    // `${name}` and `${name['k']}` name a variable, as in Puppet.
                    let is_call =
                        matches!(tokens.get(1).map(|t| &t.tok), Some(Tok::Punct(P::LParen)));
                    // `${1}` and `${1[0]}` (not `${5.then ...}`, a method call on 5).
                    let alone = matches!(
                        tokens.get(1).map(|t| &t.tok),
                        None | Some(Tok::Eof | Tok::Punct(P::LBrack))
                    );
                    if let Some(first) = tokens.first_mut()
                        && !is_call
                    {
                        match &first.tok {
                            Tok::Name(name) => first.tok = Tok::Var(name.clone()),
                            // `${node['app']['port']}`: the node's attributes.
                            Tok::Keyword(Kw::Node) => first.tok = Tok::Var("node".to_owned()),
                            // `${1}` is the regular expression's first group, not 1.
                            Tok::Int(_) => {
                                let digits = self
                                    .text
                                    .get(first.span.start as usize..first.span.end as usize)
                                    .unwrap_or_default();
                                // `${0755}` stays the number: match variables are
                                // written without leading zeros.
                                if alone
                                    && !digits.is_empty()
                                    && digits.bytes().all(|byte| byte.is_ascii_digit())
                                    && (digits == "0" || !digits.starts_with('0'))
                                {
                                    first.tok = Tok::Var(digits.to_owned());
                                }
                            }
                            _ => {}
                        }
                    }
                    let empty_span = tokens[0].span;
                    if tokens[0].tok == Tok::Eof {
                        return Err(self.error(
                            empty_span,
                            "empty interpolation `${}`",
                            "put an expression between the braces, or remove them",
                        ));
                    }
                    let mut inner =
                        Parser::new(self.text, tokens, None, self.program, self.diagnostics);
                    inner.depth = self.depth;
                    inner.context = vec![Context::Other];
                    inner.in_interpolation = true;
                    inner.chain_depth = self.chain_depth;
                    let expr = inner.expr(BP_ASSIGN)?;
                    if *inner.peek() != Tok::Eof {
                        return Err(inner.unexpected("`}` to end the interpolation"));
                    }
                    out.push(InterpPart::Expr(expr));
                }
            }
        }
        Ok(out)
    }

    fn call_args(&mut self) -> PResult<Vec<Expr>> {
        self.expect(P::LParen, "to start the arguments")?;
        let mut args = Vec::new();
        loop {
            if self.at(P::RParen) {
                break;
            }
            args.push(self.expr(BP_ASSIGN)?);
            if !self.eat(P::Comma) {
                break;
            }
        }
        self.expect(P::RParen, "to close the arguments")?;
        Ok(args)
    }

    fn lambda(&mut self) -> PResult<Option<Box<Lambda>>> {
        if !self.at(P::Pipe) {
            return Ok(None);
        }
        self.bump();
        let mut params = Vec::new();
        loop {
            if self.at(P::Pipe) {
                break;
            }
            if matches!(self.peek(), Tok::TypeRef(_)) {
                self.expr(BP_UNARY)?;
            }
            let span = self.span();
            let Tok::Var(name) = self.peek().clone() else {
                return Err(self.unexpected("a lambda parameter like `$item`"));
            };
            self.bump();
            params.push((name, span));
            if !self.eat(P::Comma) {
                break;
            }
        }
        self.expect(P::Pipe, "to close the lambda parameters")?;
        let body = self.block(Context::Other)?;
        Ok(Some(Box::new(Lambda { params, body })))
    }

    fn selector(&mut self, subject: Expr) -> PResult<Expr> {
        self.expect(P::LBrace, "to open the selector")?;
        self.enter()?;
        let mut arms = Vec::new();
        loop {
            if self.at(P::RBrace) {
                break;
            }
            let option = self.expr(BP_ASSIGN)?;
            self.expect(P::FatArrow, "between a selector option and its value")?;
            let value = self.expr(BP_ASSIGN)?;
            arms.push((option, value));
            if !self.eat(P::Comma) {
                break;
            }
        }
        self.leave();
        self.expect(P::RBrace, "to close the selector")?;
        let span = subject.span.to(self.previous_span());
        Ok(Expr {
            kind: ExprKind::Selector {
                subject: Box::new(subject),
                arms,
            },
            span,
        })
    }

    fn if_expr(&mut self, unless: bool) -> PResult<Expr> {
        let start = self.bump();
        let cond = self.expr(BP_ASSIGN)?;
        let then = self.block(Context::Other)?;
        let otherwise = if self.at_kw(Kw::Elsif) {
            if unless {
                let span = self.span();
                return Err(self.error(
                    span,
                    "`unless` cannot have an `elsif`",
                    "rewrite it as an `if` with the condition negated",
                ));
            }
            // `elsif` is an `if` in the `else` branch.
            self.tokens[self.pos].tok = Tok::Keyword(Kw::If);
            let nested = self.if_expr(false)?;
            Some(vec![nested])
        } else if self.at_kw(Kw::Else) {
            self.bump();
            Some(self.block(Context::Other)?)
        } else {
            None
        };
        let span = start.to(self.previous_span());
        let kind = if unless {
            ExprKind::Unless {
                cond: Box::new(cond),
                then,
                otherwise,
            }
        } else {
            ExprKind::If {
                cond: Box::new(cond),
                then,
                otherwise,
            }
        };
        Ok(Expr { kind, span })
    }

    fn case_expr(&mut self) -> PResult<Expr> {
        let start = self.bump();
        let subject = self.expr(BP_ASSIGN)?;
        self.expect(P::LBrace, "to open the case")?;
        self.enter()?;
        let mut arms = Vec::new();
        while !self.at(P::RBrace) && *self.peek() != Tok::Eof {
            let mut options = vec![self.expr(BP_ASSIGN)?];
            while self.eat(P::Comma) {
                options.push(self.expr(BP_ASSIGN)?);
            }
            self.expect(P::Colon, "after the case options")?;
            let body = self.block(Context::Other)?;
            arms.push(CaseArm { options, body });
        }
        self.leave();
        self.expect(P::RBrace, "to close the case")?;
        Ok(Expr {
            kind: ExprKind::Case {
                subject: Box::new(subject),
                arms,
            },
            span: start.to(self.previous_span()),
        })
    }

    fn collector(&mut self, type_name: String, start: Span) -> PResult<Expr> {
        let exported = self.at(P::LLCollect);
        self.bump();
        let close = if exported { P::RRCollect } else { P::RCollect };
        let query = if self.at(close) {
            None
        } else {
            Some(self.query(0)?)
        };
        self.expect(close, "to close the collector's query")?;
        // `{ attr => value }` after a collector overrides what it collects.
        let ops = if self.at(P::LBrace) && self.looks_like_attributes() {
            self.attribute_block()?
        } else {
            Vec::new()
        };
        Ok(Expr {
            kind: ExprKind::Collector(Box::new(Collector {
                type_name: type_name.to_ascii_lowercase(),
                exported,
                query,
                ops,
            })),
            span: start.to(self.previous_span()),
        })
    }

    fn looks_like_attributes(&self) -> bool {
        self.attributes_follow(0) && *self.peek_at(1) != Tok::Punct(P::RBrace)
    }

    /// Does the `{` at `offset` from here open attribute operations (or nothing), rather
    /// than resource bodies (`title: ...`)?
    fn attributes_follow(&self, offset: usize) -> bool {
        *self.peek_at(offset + 1) == Tok::Punct(P::RBrace)
            || (matches!(
                self.peek_at(offset + 1),
                Tok::Name(_) | Tok::Keyword(_) | Tok::Punct(P::Star)
            ) && matches!(
                self.peek_at(offset + 2),
                Tok::Punct(P::FatArrow | P::PlusArrow)
            ))
    }

    fn query(&mut self, min_bp: u8) -> PResult<Query> {
        self.enter()?;
        let result = self.query_inner(min_bp);
        self.leave();
        result
    }

    fn query_inner(&mut self, min_bp: u8) -> PResult<Query> {
        let mut lhs = if self.eat(P::LParen) {
            let inner = self.query(0)?;
            self.expect(P::RParen, "to close the parenthesis")?;
            inner
        } else {
            let attribute = match self.peek().clone() {
                Tok::Name(name) => name,
                Tok::Keyword(Kw::True | Kw::False | Kw::Reserved) => {
                    return Err(self.unexpected("an attribute name"));
                }
                Tok::Keyword(_) => keyword_text(self.token()).to_owned(),
                _ => return Err(self.unexpected("an attribute name in the query")),
            };
            self.bump();
            let equal = match self.peek() {
                Tok::Punct(P::Eq) => true,
                Tok::Punct(P::Ne) => false,
                _ => {
                    return Err(
                        self.unexpected("`==` or `!=` (the only comparisons a query allows)")
                    );
                }
            };
            self.bump();
            let value_span = self.span();
            let value = match self.peek().clone() {
                Tok::Var(name) => ExprKind::Var(name),
                Tok::Str(text) => ExprKind::Str(text),
                Tok::Interp(parts) => ExprKind::Interp(self.interpolation(parts)?),
                Tok::Keyword(Kw::True) => ExprKind::Bool(true),
                Tok::Keyword(Kw::False) => ExprKind::Bool(false),
                Tok::Int(value) => ExprKind::Int(value),
                Tok::Float(value) => ExprKind::Float(value),
                Tok::Name(name) => ExprKind::Bare(name),
                _ => {
                    let span = self.span();
                    let found = describe(self.peek());
                    return Err(self.error(
                        span,
                        format!(
                            "a query compares with a string, number, boolean, name or variable, not {found}"
                        ),
                        "arrays, hashes and expressions cannot be query values; join one comparison per value with `or`",
                    ));
                }
            };
            self.bump();
            Query::Compare {
                attribute,
                equal,
                value: Expr {
                    kind: value,
                    span: value_span,
                },
            }
        };
        loop {
            let (is_and, bp) = match self.peek() {
                Tok::Keyword(Kw::Or) => (false, 1),
                Tok::Keyword(Kw::And) => (true, 2),
                _ => break,
            };
            if bp < min_bp {
                break;
            }
            self.bump();
            let rhs = self.query(bp + 1)?;
            lhs = if is_and {
                Query::And(Box::new(lhs), Box::new(rhs))
            } else {
                Query::Or(Box::new(lhs), Box::new(rhs))
            };
        }
        Ok(lhs)
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
