//! The Ruby of a template, parsed: statements (the template's text and prints among
//! them), expressions with Ruby's precedence, blocks (`do |x| ... end`, `{ |x| ... }`),
//! `if`/`unless`/`elsif`/`else`, `case`/`when`, and modifiers (`x if y`).

use super::{Error, StrPiece, Tok};

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Program {
    pub(crate) body: Vec<Stmt>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stmt {
    Text(String),
    Print(Expr, u32),
    Expr(Expr, u32),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Block {
    /// Each parameter: a name, or names in parentheses (`|(k, v), i|`).
    pub(crate) params: Vec<Vec<String>>,
    pub(crate) body: Vec<Stmt>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    DStr(Vec<Interp>),
    Sym(String),
    Regex(String),
    Array(Vec<Expr>),
    Hash(Vec<(Expr, Expr)>),
    IVar(String),
    /// A local variable, or a method of no receiver (`scope`, a block's parameter).
    Name(String),
    Const(String),
    Call {
        receiver: Option<Box<Expr>>,
        name: String,
        args: Vec<Expr>,
        block: Option<Box<Block>>,
        line: u32,
    },
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>, u32),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    If(Box<Expr>, Vec<Stmt>, Vec<Stmt>),
    Case(Option<Box<Expr>>, Vec<(Vec<Expr>, Vec<Stmt>)>, Vec<Stmt>),
    Assign(String, Box<Expr>),
    /// `@name = value`: the template's own instance variable from here on.
    IAssign(String, Box<Expr>),
    /// `defined?(@name)`, `defined?(name)`.
    Defined(Box<Expr>),
    /// `def name(params) ... end`: a method of the template.
    Def(String, Vec<String>, Vec<Stmt>),
    IndexAssign(Box<Expr>, Vec<Expr>, Box<Expr>),
    OrAssign(String, Box<Expr>),
    Range(Box<Expr>, Box<Expr>, bool),
    /// `next` (with a value) in a block: the block's call ends there.
    Next(Option<Box<Expr>>),
    Splat(Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Interp {
    Lit(String),
    Code(Expr),
}

pub(super) fn parse(tokens: Vec<(Tok, u32)>) -> Result<Program, Error> {
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let body = parser.statements(&[])?;
    if !parser.at_eof() {
        return Err(parser.unexpected("the end of the template"));
    }
    Ok(Program { body })
}

struct Parser {
    tokens: Vec<(Tok, u32)>,
    pos: usize,
    depth: usize,
}

/// Words after a method name that end its call rather than start an argument.
const NOT_AN_ARGUMENT: &[&str] = &[
    "if", "unless", "and", "or", "not", "then", "do", "end", "while", "until", "rescue", "else",
    "elsif", "when", "in",
];

/// How deep expressions nest, at most.
const MAX_DEPTH: usize = 200;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.tokens[self.pos.min(self.tokens.len() - 1)].0
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        &self.tokens[(self.pos + ahead).min(self.tokens.len() - 1)].0
    }

    fn line(&self) -> u32 {
        self.tokens[self.pos.min(self.tokens.len() - 1)].1
    }

    fn bump(&mut self) -> Tok {
        let tok = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        tok
    }

    fn at_eof(&self) -> bool {
        *self.peek() == Tok::Eof
    }

    fn at_punct(&self, punct: &str) -> bool {
        matches!(self.peek(), Tok::Punct(p) if *p == punct)
    }

    fn at_word(&self, word: &str) -> bool {
        matches!(self.peek(), Tok::Ident(w) if w == word)
    }

    fn eat_punct(&mut self, punct: &str) -> bool {
        if self.at_punct(punct) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if self.at_word(word) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_punct(&mut self, punct: &str) -> Result<(), Error> {
        if self.eat_punct(punct) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{punct}`")))
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<(), Error> {
        if self.eat_word(word) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{word}`")))
        }
    }

    fn unexpected(&self, wanted: &str) -> Error {
        let found = match self.peek() {
            Tok::Eof => "the end of the template".to_owned(),
            Tok::Text(_) => "the template's text".to_owned(),
            Tok::Print => "`<%=`".to_owned(),
            Tok::EndPrint => "the end of `<%= ... %>`".to_owned(),
            Tok::Newline => "the end of the line".to_owned(),
            Tok::Ident(word) | Tok::Const(word) => format!("`{word}`"),
            Tok::IVar(name) => format!("`@{name}`"),
            Tok::Label(name) => format!("`{name}:`"),
            Tok::Punct(punct) => format!("`{punct}`"),
            other => format!("{other:?}"),
        };
        Error::new(format!("expected {wanted}, found {found}"), self.line())
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Tok::Newline) || self.at_punct(";") {
            self.bump();
        }
    }

    /// Statements up to one of the words `until` (not eaten) or the end.
    fn statements(&mut self, until: &[&str]) -> Result<Vec<Stmt>, Error> {
        let mut body = Vec::new();
        loop {
            self.skip_separators();
            match self.peek().clone() {
                Tok::Eof => break,
                Tok::Punct("}") if until.contains(&"}") => break,
                Tok::Ident(word) if until.contains(&word.as_str()) => break,
                Tok::Text(text) => {
                    self.bump();
                    body.push(Stmt::Text(text));
                }
                Tok::Print => {
                    let line = self.line();
                    self.bump();
                    let value = if matches!(self.peek(), Tok::EndPrint) {
                        Expr::Nil
                    } else {
                        self.statement_expr()?
                    };
                    while matches!(self.peek(), Tok::Newline) {
                        self.bump();
                    }
                    if !matches!(self.bump(), Tok::EndPrint) {
                        return Err(Error::new(
                            "`<%= ... %>` holds one expression; open blocks with `<% %>`",
                            line,
                        ));
                    }
                    body.push(Stmt::Print(value, line));
                }
                Tok::EndPrint => return Err(self.unexpected("an expression")),
                _ => {
                    let line = self.line();
                    let expr = self.statement_expr()?;
                    body.push(Stmt::Expr(expr, line));
                }
            }
        }
        Ok(body)
    }

    /// An expression with its modifiers: `x if y`, `x unless y`.
    fn statement_expr(&mut self) -> Result<Expr, Error> {
        let mut expr = self.not_expr()?;
        loop {
            if self.eat_word("if") {
                let cond = self.not_expr()?;
                expr = Expr::If(Box::new(cond), vec![Stmt::Expr(expr, 0)], Vec::new());
            } else if self.eat_word("unless") {
                let cond = self.not_expr()?;
                expr = Expr::If(Box::new(cond), Vec::new(), vec![Stmt::Expr(expr, 0)]);
            } else {
                return Ok(expr);
            }
        }
    }

    /// `not x`, `x and y`, `x or y` (the loosest).
    fn not_expr(&mut self) -> Result<Expr, Error> {
        let mut left = if self.eat_word("not") {
            Expr::Not(Box::new(self.not_expr()?))
        } else {
            self.expr()?
        };
        loop {
            if self.eat_word("and") {
                let right = if self.eat_word("not") {
                    Expr::Not(Box::new(self.expr()?))
                } else {
                    self.expr()?
                };
                left = Expr::And(Box::new(left), Box::new(right));
            } else if self.eat_word("or") {
                let right = self.expr()?;
                left = Expr::Or(Box::new(left), Box::new(right));
            } else {
                return Ok(left);
            }
        }
    }

    /// An expression: assignment, then the ternary and the binary operators.
    pub(super) fn expr(&mut self) -> Result<Expr, Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::new("expressions nest too deep", self.line()));
        }
        let result = self.assignment();
        self.depth -= 1;
        result
    }

    fn assignment(&mut self) -> Result<Expr, Error> {
        if let Tok::Ident(name) = self.peek().clone() {
            let op = match self.peek_at(1) {
                Tok::Punct(op @ ("=" | "||=" | "+=" | "-=" | "*=" | "<<=")) => Some(*op),
                _ => None,
            };
            if let Some(op) = op {
                self.bump();
                let line = self.line();
                self.bump();
                self.skip_newlines();
                let value = self.expr()?;
                return Ok(match op {
                    "=" => Expr::Assign(name, Box::new(value)),
                    "||=" => Expr::OrAssign(name, Box::new(value)),
                    _ => {
                        let binary = &op[..op.len() - 1];
                        let binary: &'static str = match binary {
                            "+" => "+",
                            "-" => "-",
                            "*" => "*",
                            _ => "<<",
                        };
                        Expr::Assign(
                            name.clone(),
                            Box::new(Expr::Binary(
                                binary,
                                Box::new(Expr::Name(name)),
                                Box::new(value),
                                line,
                            )),
                        )
                    }
                });
            }
        }
        if let Tok::IVar(name) = self.peek().clone()
            && matches!(self.peek_at(1), Tok::Punct("=" | "||="))
        {
            self.bump();
            let or = self.at_punct("||=");
            self.bump();
            self.skip_newlines();
            let value = self.expr()?;
            let value = if or {
                Expr::Or(Box::new(Expr::IVar(name.clone())), Box::new(value))
            } else {
                value
            };
            return Ok(Expr::IAssign(name, Box::new(value)));
        }
        let target = self.ternary()?;
        if (self.at_punct("=") || self.at_punct("||="))
            && let Expr::Call {
                receiver: Some(receiver),
                name,
                args,
                ..
            } = &target
            && name == "[]"
        {
            let or = self.at_punct("||=");
            self.bump();
            let value = self.expr()?;
            let value = if or {
                Expr::Or(Box::new(target.clone()), Box::new(value))
            } else {
                value
            };
            return Ok(Expr::IndexAssign(
                receiver.clone(),
                args.clone(),
                Box::new(value),
            ));
        }
        Ok(target)
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Tok::Newline) {
            self.bump();
        }
    }

    fn ternary(&mut self) -> Result<Expr, Error> {
        let cond = self.range()?;
        if self.eat_punct("?") {
            self.skip_newlines();
            let then = self.ternary()?;
            self.skip_newlines();
            if !self.eat_punct(":") {
                // `a ? b :c` lexes `:c` as a symbol.
                if let Tok::Sym(name) = self.peek().clone() {
                    self.bump();
                    let otherwise = Expr::Name(name);
                    return Ok(Expr::If(
                        Box::new(cond),
                        vec![Stmt::Expr(then, 0)],
                        vec![Stmt::Expr(otherwise, 0)],
                    ));
                }
                return Err(self.unexpected("`:` of `? :`"));
            }
            self.skip_newlines();
            let otherwise = self.ternary()?;
            return Ok(Expr::If(
                Box::new(cond),
                vec![Stmt::Expr(then, 0)],
                vec![Stmt::Expr(otherwise, 0)],
            ));
        }
        Ok(cond)
    }

    fn range(&mut self) -> Result<Expr, Error> {
        let left = self.binary(0)?;
        if self.at_punct("..") || self.at_punct("...") {
            let exclusive = self.at_punct("...");
            self.bump();
            let right = self.binary(0)?;
            return Ok(Expr::Range(Box::new(left), Box::new(right), exclusive));
        }
        Ok(left)
    }

    /// Binary operators from `level` up, Ruby's precedence.
    fn binary(&mut self, level: usize) -> Result<Expr, Error> {
        const LEVELS: &[&[&str]] = &[
            &["||"],
            &["&&"],
            &["<=>", "==", "===", "!=", "=~", "!~"],
            &["<", "<=", ">", ">="],
            &["|", "^"],
            &["&"],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        loop {
            let Tok::Punct(op) = self.peek().clone() else {
                return Ok(left);
            };
            if !LEVELS[level].contains(&op) {
                return Ok(left);
            }
            let line = self.line();
            self.bump();
            self.skip_newlines();
            let right = self.binary(level + 1)?;
            left = match op {
                "||" => Expr::Or(Box::new(left), Box::new(right)),
                "&&" => Expr::And(Box::new(left), Box::new(right)),
                "!=" => Expr::Not(Box::new(Expr::Binary(
                    "==",
                    Box::new(left),
                    Box::new(right),
                    line,
                ))),
                "!~" => Expr::Not(Box::new(Expr::Binary(
                    "=~",
                    Box::new(left),
                    Box::new(right),
                    line,
                ))),
                op => Expr::Binary(op, Box::new(left), Box::new(right), line),
            };
        }
    }

    fn unary(&mut self) -> Result<Expr, Error> {
        if self.eat_punct("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.at_punct("-") {
            self.bump();
            return Ok(match self.unary()? {
                Expr::Int(i) => Expr::Int(-i),
                Expr::Float(f) => Expr::Float(-f),
                other => Expr::Neg(Box::new(other)),
            });
        }
        if self.eat_punct("*") {
            return Ok(Expr::Splat(Box::new(self.unary()?)));
        }
        let base = self.primary()?;
        let base = if self.at_punct("**") {
            return Err(Error::new("`**` is not supported", self.line()));
        } else {
            base
        };
        self.postfix(base)
    }

    /// Method calls, indexes and blocks after a value.
    fn postfix(&mut self, mut expr: Expr) -> Result<Expr, Error> {
        loop {
            if self.at_punct(".") || self.at_punct("&.") {
                self.bump();
                self.skip_newlines();
                let line = self.line();
                let name = match self.bump() {
                    Tok::Ident(name) | Tok::Const(name) => name,
                    Tok::Label(name) => {
                        // `x.y:` cannot be; read as a name.
                        name
                    }
                    _ => return Err(self.unexpected("a method name after `.`")),
                };
                let args = self.call_args()?;
                let block = self.block()?;
                expr = Expr::Call {
                    receiver: Some(Box::new(expr)),
                    name,
                    args,
                    block,
                    line,
                };
                continue;
            }
            if self.at_punct("::") {
                return Err(Error::new(
                    "`::` (a constant's scope) is not supported",
                    self.line(),
                ));
            }
            if self.at_punct("[") && !self.space_before() {
                let line = self.line();
                self.bump();
                let args = self.list("]")?;
                expr = Expr::Call {
                    receiver: Some(Box::new(expr)),
                    name: "[]".to_owned(),
                    args,
                    block: None,
                    line,
                };
                continue;
            }
            return Ok(expr);
        }
    }

    fn space_before(&self) -> bool {
        false
    }

    /// `(args)` right after a method name, or none.
    fn call_args(&mut self) -> Result<Vec<Expr>, Error> {
        if self.at_punct("(") {
            self.bump();
            return self.list(")");
        }
        // A call without parentheses: `puts x`, `scope.function_warning ['x']`.
        if self.command_args_follow() {
            let mut args = vec![self.arg()?];
            while self.eat_punct(",") {
                self.skip_newlines();
                args.push(self.arg()?);
            }
            return Ok(args);
        }
        Ok(Vec::new())
    }

    fn command_args_follow(&self) -> bool {
        match self.peek() {
            Tok::Str(_)
            | Tok::DStr(_)
            | Tok::IVar(_)
            | Tok::Int(_)
            | Tok::Float(_)
            | Tok::Sym(_)
            | Tok::Regex(_)
            | Tok::Const(_) => true,
            Tok::Ident(word) => !NOT_AN_ARGUMENT.contains(&word.as_str()),
            _ => false,
        }
    }

    fn arg(&mut self) -> Result<Expr, Error> {
        if let Tok::Label(name) = self.peek().clone() {
            // `f(a: 1, b: 2)`: a hash.
            let mut entries = Vec::new();
            let mut key = name;
            loop {
                self.bump();
                self.skip_newlines();
                let value = self.expr()?;
                entries.push((Expr::Sym(key), value));
                if !(self.at_punct(",") && matches!(self.peek_at(1), Tok::Label(_))) {
                    break;
                }
                self.bump();
                let Tok::Label(next) = self.peek().clone() else {
                    break;
                };
                key = next;
            }
            return Ok(Expr::Hash(entries));
        }
        let value = self.expr()?;
        if self.at_punct("=>") {
            // `f('a' => 1)`: a hash without braces.
            let mut entries = Vec::new();
            let mut key = value;
            loop {
                self.expect_punct("=>")?;
                self.skip_newlines();
                let value = self.expr()?;
                entries.push((key, value));
                if !self.at_punct(",") || matches!(self.peek_at(1), Tok::Punct(")")) {
                    break;
                }
                self.bump();
                self.skip_newlines();
                key = self.expr()?;
            }
            return Ok(Expr::Hash(entries));
        }
        Ok(value)
    }

    /// Arguments or elements up to `close`, eaten.
    fn list(&mut self, close: &str) -> Result<Vec<Expr>, Error> {
        let mut items = Vec::new();
        loop {
            self.skip_newlines();
            if self.eat_punct(close) {
                return Ok(items);
            }
            items.push(self.arg()?);
            self.skip_newlines();
            if !self.eat_punct(",") {
                self.skip_newlines();
                self.expect_punct(close)?;
                return Ok(items);
            }
        }
    }

    /// `do |x| ... end` or `{ |x| ... }` after a call, or none.
    fn block(&mut self) -> Result<Option<Box<Block>>, Error> {
        let (close, brace) = if self.at_word("do") {
            ("end", false)
        } else if self.at_punct("{") {
            ("}", true)
        } else {
            return Ok(None);
        };
        self.bump();
        self.skip_newlines();
        let mut params = Vec::new();
        if self.eat_punct("|") {
            loop {
                if self.eat_punct("(") {
                    let mut names = Vec::new();
                    loop {
                        match self.bump() {
                            Tok::Ident(name) => names.push(name),
                            _ => return Err(self.unexpected("a block parameter")),
                        }
                        if !self.eat_punct(",") {
                            break;
                        }
                    }
                    self.expect_punct(")")?;
                    params.push(names);
                } else {
                    match self.bump() {
                        Tok::Ident(name) => params.push(vec![name]),
                        _ => return Err(self.unexpected("a block parameter")),
                    }
                }
                if !self.eat_punct(",") {
                    break;
                }
            }
            self.expect_punct("|")?;
        }
        let body = self.statements(&[close])?;
        if brace {
            self.expect_punct("}")?;
        } else {
            self.expect_word("end")?;
        }
        Ok(Some(Box::new(Block { params, body })))
    }

    fn primary(&mut self) -> Result<Expr, Error> {
        let line = self.line();
        match self.bump() {
            Tok::Int(i) => Ok(Expr::Int(i)),
            Tok::Float(f) => Ok(Expr::Float(f)),
            Tok::Str(s) => Ok(Expr::Str(s)),
            Tok::DStr(pieces) => {
                let mut parts = Vec::new();
                for piece in pieces {
                    match piece {
                        StrPiece::Lit(text) => parts.push(Interp::Lit(text)),
                        StrPiece::Code(tokens) => {
                            let mut inner = Parser {
                                tokens,
                                pos: 0,
                                depth: self.depth,
                            };
                            let expr = inner.statement_expr()?;
                            parts.push(Interp::Code(expr));
                        }
                    }
                }
                Ok(Expr::DStr(parts))
            }
            Tok::Sym(name) => Ok(Expr::Sym(name)),
            Tok::Regex(pattern) => Ok(Expr::Regex(pattern)),
            Tok::IVar(name) => Ok(Expr::IVar(name)),
            Tok::Const(name) => {
                if self.at_punct("(") {
                    let args = self.call_args()?;
                    return Ok(Expr::Call {
                        receiver: None,
                        name,
                        args,
                        block: None,
                        line,
                    });
                }
                Ok(Expr::Const(name))
            }
            Tok::Punct("(") => {
                self.skip_newlines();
                let inner = self.statement_expr()?;
                self.skip_newlines();
                self.expect_punct(")")?;
                Ok(inner)
            }
            Tok::Punct("[") => Ok(Expr::Array(self.list("]")?)),
            Tok::Punct("{") => {
                let mut entries = Vec::new();
                loop {
                    self.skip_newlines();
                    if self.eat_punct("}") {
                        break;
                    }
                    let key = if let Tok::Label(name) = self.peek().clone() {
                        self.bump();
                        Expr::Sym(name)
                    } else {
                        let key = self.expr()?;
                        self.expect_punct("=>")?;
                        key
                    };
                    self.skip_newlines();
                    let value = self.expr()?;
                    entries.push((key, value));
                    self.skip_newlines();
                    if !self.eat_punct(",") {
                        self.skip_newlines();
                        self.expect_punct("}")?;
                        break;
                    }
                }
                Ok(Expr::Hash(entries))
            }
            Tok::Ident(word) => self.word(word, line),
            other => {
                self.pos -= 1;
                let _ = other;
                Err(self.unexpected("a value"))
            }
        }
    }

    fn word(&mut self, word: String, line: u32) -> Result<Expr, Error> {
        match word.as_str() {
            "nil" => Ok(Expr::Nil),
            "true" => Ok(Expr::Bool(true)),
            "false" => Ok(Expr::Bool(false)),
            "if" | "unless" => {
                let cond = self.not_expr()?;
                self.eat_word("then");
                let then = self.statements(&["elsif", "else", "end"])?;
                let otherwise = self.if_rest()?;
                Ok(if word == "if" {
                    Expr::If(Box::new(cond), then, otherwise)
                } else {
                    Expr::If(Box::new(cond), otherwise, then)
                })
            }
            "case" => {
                let subject = if matches!(self.peek(), Tok::Newline) {
                    None
                } else {
                    Some(Box::new(self.expr()?))
                };
                self.skip_separators();
                let mut arms = Vec::new();
                let mut otherwise = Vec::new();
                loop {
                    self.skip_separators();
                    if self.eat_word("when") {
                        let mut options = vec![self.expr()?];
                        while self.eat_punct(",") {
                            self.skip_newlines();
                            options.push(self.expr()?);
                        }
                        self.eat_word("then");
                        let body = self.statements(&["when", "else", "end"])?;
                        arms.push((options, body));
                    } else if self.eat_word("else") {
                        otherwise = self.statements(&["end"])?;
                    } else {
                        self.expect_word("end")?;
                        break;
                    }
                }
                Ok(Expr::Case(subject, arms, otherwise))
            }
            "defined?" => {
                let parenthesized = self.eat_punct("(");
                let inner = self.expr()?;
                if parenthesized {
                    self.expect_punct(")")?;
                }
                Ok(Expr::Defined(Box::new(inner)))
            }
            "def" => {
                let name = match self.bump() {
                    Tok::Ident(name) => name,
                    _ => return Err(self.unexpected("a method's name after `def`")),
                };
                let mut params = Vec::new();
                if self.eat_punct("(") {
                    loop {
                        if self.eat_punct(")") {
                            break;
                        }
                        match self.bump() {
                            Tok::Ident(param) => params.push(param),
                            _ => return Err(self.unexpected("a parameter's name")),
                        }
                        if !self.eat_punct(",") {
                            self.expect_punct(")")?;
                            break;
                        }
                    }
                }
                let body = self.statements(&["end"])?;
                self.expect_word("end")?;
                Ok(Expr::Def(name, params, body))
            }
            "end" | "else" | "elsif" | "when" | "then" | "do" | "and" | "or" | "in" => {
                self.pos -= 1;
                Err(self.unexpected("a value"))
            }
            "next" => {
                let value = if matches!(self.peek(), Tok::Newline | Tok::Eof | Tok::EndPrint)
                    || self.at_word("if")
                    || self.at_word("unless")
                    || self.at_punct("}")
                    || self.at_word("end")
                {
                    None
                } else {
                    Some(Box::new(self.expr()?))
                };
                Ok(Expr::Next(value))
            }
            "while" | "until" | "for" | "class" | "module" | "begin" | "yield" | "lambda"
            | "proc" | "require" | "eval" | "system" | "exec" | "send" | "instance_eval"
            | "define_method" | "return" | "break" | "redo" | "retry" => Err(Error::new(
                format!("`{word}` is Ruby outside what templates here may use"),
                line,
            )),
            _ => {
                let args = self.call_args_of_word()?;
                let block = self.block()?;
                if args.is_none() && block.is_none() {
                    return Ok(Expr::Name(word));
                }
                Ok(Expr::Call {
                    receiver: None,
                    name: word,
                    args: args.unwrap_or_default(),
                    block,
                    line,
                })
            }
        }
    }

    /// `name(args)` (no space before the parenthesis) or `name args`.
    fn call_args_of_word(&mut self) -> Result<Option<Vec<Expr>>, Error> {
        if self.at_punct("(") {
            self.bump();
            return Ok(Some(self.list(")")?));
        }
        if matches!(self.peek(), Tok::Str(_) | Tok::DStr(_) | Tok::IVar(_)) {
            let mut args = vec![self.arg()?];
            while self.eat_punct(",") {
                args.push(self.arg()?);
            }
            return Ok(Some(args));
        }
        Ok(None)
    }

    fn if_rest(&mut self) -> Result<Vec<Stmt>, Error> {
        if self.eat_word("elsif") {
            let cond = self.not_expr()?;
            self.eat_word("then");
            let then = self.statements(&["elsif", "else", "end"])?;
            let otherwise = self.if_rest()?;
            return Ok(vec![Stmt::Expr(
                Expr::If(Box::new(cond), then, otherwise),
                0,
            )]);
        }
        if self.eat_word("else") {
            let otherwise = self.statements(&["end"])?;
            self.expect_word("end")?;
            return Ok(otherwise);
        }
        self.expect_word("end")?;
        Ok(Vec::new())
    }
}
