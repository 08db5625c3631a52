//! The expression syntax of a resource program line: the subset of Python's expressions
//! PlainBox allows, parsed with Python's precedence. Everything else is refused here,
//! with the column and what to write instead.

use crate::ProgramError;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    List(Vec<Expr>),
    Tuple(Vec<Expr>),
    /// A name; valid only as the object of an attribute access or a call's function.
    Name(String, usize),
    /// `variable.attribute`.
    Attr(String, String),
    /// `int(x)`, `float(x)`, `bool(x)`; `all(x)` is taken apart by the caller.
    Call(Builtin, Box<Expr>),
    Not(Box<Expr>),
    Unary(UnaryOp, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    /// `a < b <= c`: Python's chained comparison.
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `all(expr)`, only as a whole line.
    All(Box<Expr>, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Int,
    Float,
    Bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Neg,
    Pos,
    Invert,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Is,
    IsNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    Shl,
    Shr,
    BitAnd,
    BitOr,
    BitXor,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Str(String),
    Int(i64),
    Float(f64),
    Op(&'static str),
    End,
}

/// Nesting deeper than this is refused (a line is a requirement, not a program).
const MAX_NESTING: usize = 64;

/// A line with more operators and operands than this is refused: its tree would be too
/// deep to evaluate (`1 + 1 + ...` nests to the left).
const MAX_NODES: usize = 500;

const OPERATORS: [&str; 28] = [
    "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "&", "|", "^", "~",
    "<", ">", "(", ")", "[", "]", ",", ".", "=", "@", ":",
];

fn lex(line: usize, text: &str) -> Result<Vec<(Tok, usize)>, ProgramError> {
    let error = |column: usize, message: String, help: &str| ProgramError {
        line,
        column,
        message,
        help: (!help.is_empty()).then(|| help.to_owned()),
    };
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '#' {
            break;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '_'
                    || chars[i] == '.'
                    || ((chars[i] == '+' || chars[i] == '-')
                        && matches!(chars[i - 1], 'e' | 'E')
                        && !chars[start..i].iter().any(|c| matches!(c, 'x' | 'X'))))
            {
                i += 1;
            }
            let written: String = chars[start..i].iter().collect();
            let literal: String = written.chars().filter(|c| *c != '_').collect();
            let lower = literal.to_ascii_lowercase();
            // Python refuses `01`, `1__0` and `1_`.
            let leading_zero = lower.len() > 1
                && lower.starts_with('0')
                && lower[1..].chars().all(|c| c.is_ascii_digit())
                && lower[1..].chars().any(|c| c != '0');
            if leading_zero || written.contains("__") || written.ends_with('_') {
                return Err(error(
                    column,
                    format!("`{written}` is not a valid number"),
                    "write decimal numbers without leading zeros (0o17 for octal)",
                ));
            }
            let parsed = if let Some(hex) = lower.strip_prefix("0x") {
                i64::from_str_radix(hex, 16).ok().map(Tok::Int)
            } else if let Some(octal) = lower.strip_prefix("0o") {
                i64::from_str_radix(octal, 8).ok().map(Tok::Int)
            } else if let Some(binary) = lower.strip_prefix("0b") {
                i64::from_str_radix(binary, 2).ok().map(Tok::Int)
            } else if lower.contains(['.', 'e']) {
                lower.parse::<f64>().ok().map(Tok::Float)
            } else {
                lower.parse::<i64>().ok().map(Tok::Int)
            };
            match parsed {
                Some(token) => tokens.push((token, column)),
                None => {
                    return Err(error(
                        column,
                        format!("`{literal}` is not a number this evaluator reads"),
                        "numbers are decimal (42, 4.2, 1e3) or 0x, 0o, 0b integers of 64 bits",
                    ));
                }
            }
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            if matches!(chars.get(i), Some('\'' | '"')) {
                return Err(error(
                    column,
                    format!("string prefix `{name}` is not allowed"),
                    "write a plain quoted string",
                ));
            }
            tokens.push((Tok::Name(name), column));
            continue;
        }
        if c == '\'' || c == '"' {
            let quote = c;
            if chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote) {
                return Err(error(
                    column,
                    "triple-quoted strings are not allowed".to_owned(),
                    "a requirement is one line",
                ));
            }
            i += 1;
            let mut value = String::new();
            loop {
                let Some(&c) = chars.get(i) else {
                    return Err(error(
                        column,
                        "this string is not closed".to_owned(),
                        "close it with the quote it opened with",
                    ));
                };
                i += 1;
                if c == quote {
                    break;
                }
                if c != '\\' {
                    value.push(c);
                    continue;
                }
                let Some(&escaped) = chars.get(i) else {
                    continue;
                };
                i += 1;
                match escaped {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    'r' => value.push('\r'),
                    'a' => value.push('\u{7}'),
                    'b' => value.push('\u{8}'),
                    'f' => value.push('\u{c}'),
                    'v' => value.push('\u{b}'),
                    '\\' | '\'' | '"' => value.push(escaped),
                    '0'..='7' => {
                        // Up to three octal digits, as in Python.
                        let mut code = escaped.to_digit(8).unwrap_or(0);
                        let mut taken = 0;
                        while taken < 2
                            && let Some(digit) = chars.get(i).and_then(|c| c.to_digit(8))
                        {
                            code = code * 8 + digit;
                            i += 1;
                            taken += 1;
                        }
                        value.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    'N' => {
                        return Err(error(
                            i,
                            "`\\N{...}` escapes are not supported".to_owned(),
                            "write the character itself, or `\\u` and its code",
                        ));
                    }
                    'x' | 'u' | 'U' => {
                        let digits = match escaped {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = chars.iter().skip(i).take(digits).collect();
                        match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                            Some(decoded) if hex.len() == digits => {
                                value.push(decoded);
                                i += digits;
                            }
                            _ => {
                                return Err(error(
                                    i,
                                    format!("`\\{escaped}{hex}` is not a valid escape"),
                                    "",
                                ));
                            }
                        }
                    }
                    // Python keeps an unknown escape as written.
                    other => {
                        value.push('\\');
                        value.push(other);
                    }
                }
            }
            tokens.push((Tok::Str(value), column));
            continue;
        }
        let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
        match OPERATORS.iter().find(|op| rest.starts_with(**op)) {
            Some(op) => {
                i += op.len();
                tokens.push((Tok::Op(op), column));
            }
            None => {
                return Err(error(
                    column,
                    format!("`{c}` is not allowed in a resource expression"),
                    "",
                ));
            }
        }
    }
    tokens.push((Tok::End, chars.len() + 1));
    Ok(tokens)
}

pub(crate) struct Parser {
    line: usize,
    tokens: Vec<(Tok, usize)>,
    pos: usize,
    depth: usize,
    nodes: usize,
}

impl Parser {
    /// Parses one line into an expression (with `all()` taken apart).
    pub(crate) fn line(line: usize, text: &str) -> Result<Expr, ProgramError> {
        let mut parser = Parser {
            line,
            tokens: lex(line, text)?,
            pos: 0,
            depth: 0,
            nodes: 0,
        };
        let expr = parser.expr()?;
        if parser.peek() != &Tok::End {
            return Err(parser.unexpected("the end of the line"));
        }
        Ok(expr)
    }

    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].0
    }

    fn column(&self) -> usize {
        self.tokens[self.pos].1
    }

    fn bump(&mut self) -> Tok {
        let token = self.tokens[self.pos].0.clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        token
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Tok::Op(found) if *found == op)
    }

    fn is_name(&self, name: &str) -> bool {
        matches!(self.peek(), Tok::Name(found) if found == name)
    }

    fn error(&self, column: usize, message: impl Into<String>, help: &str) -> ProgramError {
        ProgramError {
            line: self.line,
            column,
            message: message.into(),
            help: (!help.is_empty()).then(|| help.to_owned()),
        }
    }

    fn unexpected(&self, wanted: &str) -> ProgramError {
        let found = match self.peek() {
            Tok::End => "the end of the line".to_owned(),
            Tok::Op("=") => {
                return self.error(
                    self.column(),
                    "assignment is not allowed",
                    "compare with `==`",
                );
            }
            Tok::Op(op) => format!("`{op}`"),
            Tok::Name(name) => format!("`{name}`"),
            Tok::Str(_) => "a string".to_owned(),
            Tok::Int(_) | Tok::Float(_) => "a number".to_owned(),
        };
        self.error(
            self.column(),
            format!("expected {wanted}, found {found}"),
            "",
        )
    }

    fn expect_op(&mut self, op: &str, wanted: &str) -> Result<(), ProgramError> {
        if self.is_op(op) {
            self.bump();
            Ok(())
        } else {
            Err(self.unexpected(wanted))
        }
    }

    /// Counts one more node of the line's tree.
    fn node(&mut self) -> Result<(), ProgramError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.error(
                self.column(),
                format!("the expression has more than {MAX_NODES} parts"),
                "split it into lines: lines are joined by an implicit `and`",
            ));
        }
        Ok(())
    }

    fn nested<T>(
        &mut self,
        parse: impl FnOnce(&mut Self) -> Result<T, ProgramError>,
    ) -> Result<T, ProgramError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(self.error(
                self.column(),
                format!("the expression nests deeper than {MAX_NESTING} levels"),
                "split it into lines",
            ));
        }
        let result = parse(self);
        self.depth -= 1;
        result
    }

    fn expr(&mut self) -> Result<Expr, ProgramError> {
        self.nested(|parser| {
            let column = parser.column();
            if parser.is_name("lambda") {
                return Err(parser.error(column, "lambdas are not allowed", ""));
            }
            let expr = parser.or()?;
            if parser.is_name("if") {
                return Err(parser.error(
                    parser.column(),
                    "conditional expressions are not allowed",
                    "use `and` and `or`, or one line per condition",
                ));
            }
            if parser.is_name("for") {
                return Err(parser.error(parser.column(), "comprehensions are not allowed", ""));
            }
            Ok(expr)
        })
    }

    fn or(&mut self) -> Result<Expr, ProgramError> {
        let mut left = self.and()?;
        while self.is_name("or") {
            self.bump();
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ProgramError> {
        let mut left = self.not()?;
        while self.is_name("and") {
            self.bump();
            let right = self.not()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ProgramError> {
        if self.is_name("not") {
            self.bump();
            let inner = self.nested(Self::not)?;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, ProgramError> {
        let first = self.bit_or()?;
        let mut rest = Vec::new();
        loop {
            let op = match self.peek() {
                Tok::Op("==") => CmpOp::Eq,
                Tok::Op("!=") => CmpOp::Ne,
                Tok::Op("<") => CmpOp::Lt,
                Tok::Op("<=") => CmpOp::Le,
                Tok::Op(">") => CmpOp::Gt,
                Tok::Op(">=") => CmpOp::Ge,
                Tok::Name(name) if name == "in" => CmpOp::In,
                Tok::Name(name) if name == "is" => CmpOp::Is,
                Tok::Name(name) if name == "not" => CmpOp::NotIn,
                _ => break,
            };
            self.bump();
            let op = match op {
                CmpOp::NotIn => {
                    if !self.is_name("in") {
                        return Err(self.unexpected("`in` after `not`"));
                    }
                    self.bump();
                    CmpOp::NotIn
                }
                CmpOp::Is if self.is_name("not") => {
                    self.bump();
                    CmpOp::IsNot
                }
                other => other,
            };
            rest.push((op, self.bit_or()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Expr::Compare(Box::new(first), rest)
        })
    }

    fn binary_level(
        &mut self,
        ops: &[(&str, BinOp)],
        next: fn(&mut Self) -> Result<Expr, ProgramError>,
    ) -> Result<Expr, ProgramError> {
        let mut left = next(self)?;
        while let Some(op) = ops
            .iter()
            .find(|(symbol, _)| self.is_op(symbol))
            .map(|(_, op)| *op)
        {
            self.bump();
            let right = next(self)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn bit_or(&mut self) -> Result<Expr, ProgramError> {
        self.binary_level(&[("|", BinOp::BitOr)], Self::bit_xor)
    }

    fn bit_xor(&mut self) -> Result<Expr, ProgramError> {
        self.binary_level(&[("^", BinOp::BitXor)], Self::bit_and)
    }

    fn bit_and(&mut self) -> Result<Expr, ProgramError> {
        self.binary_level(&[("&", BinOp::BitAnd)], Self::shift)
    }

    fn shift(&mut self) -> Result<Expr, ProgramError> {
        self.binary_level(&[("<<", BinOp::Shl), (">>", BinOp::Shr)], Self::sum)
    }

    fn sum(&mut self) -> Result<Expr, ProgramError> {
        self.binary_level(&[("+", BinOp::Add), ("-", BinOp::Sub)], Self::term)
    }

    fn term(&mut self) -> Result<Expr, ProgramError> {
        if self.is_op("@") {
            return Err(self.error(self.column(), "`@` is not allowed", ""));
        }
        self.binary_level(
            &[
                ("*", BinOp::Mul),
                ("//", BinOp::FloorDiv),
                ("/", BinOp::Div),
                ("%", BinOp::Mod),
            ],
            Self::unary,
        )
    }

    fn unary(&mut self) -> Result<Expr, ProgramError> {
        let op = match self.peek() {
            Tok::Op("-") => UnaryOp::Neg,
            Tok::Op("+") => UnaryOp::Pos,
            Tok::Op("~") => UnaryOp::Invert,
            _ => return self.power(),
        };
        self.bump();
        let inner = self.nested(Self::unary)?;
        Ok(Expr::Unary(op, Box::new(inner)))
    }

    fn power(&mut self) -> Result<Expr, ProgramError> {
        let base = self.primary()?;
        if self.is_op("**") {
            self.bump();
            let exponent = self.nested(Self::unary)?;
            return Ok(Expr::Binary(BinOp::Pow, Box::new(base), Box::new(exponent)));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Expr, ProgramError> {
        let column = self.column();
        let atom = self.atom()?;
        let mut expr = atom;
        loop {
            if self.is_op(".") {
                self.bump();
                let attribute = match self.bump() {
                    Tok::Name(attribute) => attribute,
                    _ => {
                        return Err(self.error(column, "expected an attribute name after `.`", ""));
                    }
                };
                expr = match expr {
                    Expr::Name(variable, _) => Expr::Attr(variable, attribute),
                    _ => {
                        return Err(self.error(
                            column,
                            "attribute access is allowed only on the group variable \
                             (`package.name`)",
                            "",
                        ));
                    }
                };
                if self.is_op("(") {
                    return Err(self.error(
                        column,
                        "method calls are not allowed",
                        "the allowed calls are int(), float(), bool() and all()",
                    ));
                }
                continue;
            }
            if self.is_op("(") {
                let Expr::Name(function, _) = &expr else {
                    return Err(self.error(column, "only a function name may be called", ""));
                };
                let function = function.clone();
                self.bump();
                let mut args = Vec::new();
                while !self.is_op(")") {
                    args.push(self.expr()?);
                    if !self.is_op(",") {
                        break;
                    }
                    self.bump();
                }
                self.expect_op(")", "`)` to close the call")?;
                let builtin = match function.as_str() {
                    "int" => Builtin::Int,
                    "float" => Builtin::Float,
                    "bool" => Builtin::Bool,
                    "all" => {
                        if args.len() != 1 {
                            return Err(self.error(column, "all() takes one expression", ""));
                        }
                        expr = Expr::All(Box::new(args.remove(0)), column);
                        continue;
                    }
                    other => {
                        return Err(self.error(
                            column,
                            format!("calling `{other}()` is not allowed"),
                            "the allowed calls are int(), float(), bool() and all()",
                        ));
                    }
                };
                if args.len() != 1 {
                    return Err(self.error(
                        column,
                        format!("{function}() takes exactly one argument here"),
                        "",
                    ));
                }
                expr = Expr::Call(builtin, Box::new(args.remove(0)));
                continue;
            }
            if self.is_op("[") {
                return Err(self.error(
                    self.column(),
                    "subscripts are not allowed",
                    "compare whole values, or use `in`",
                ));
            }
            return Ok(expr);
        }
    }

    fn atom(&mut self) -> Result<Expr, ProgramError> {
        self.node()?;
        let column = self.column();
        let token = self.peek().clone();
        if matches!(token, Tok::End) || matches!(token, Tok::Op(op) if op != "(" && op != "[") {
            return Err(self.unexpected("a value"));
        }
        self.bump();
        match token {
            Tok::Str(mut text) => {
                // Adjacent strings concatenate, as in Python.
                while let Tok::Str(more) = self.peek() {
                    text.push_str(more);
                    self.bump();
                }
                Ok(Expr::Str(text))
            }
            Tok::Int(value) => Ok(Expr::Int(value)),
            Tok::Float(value) => Ok(Expr::Float(value)),
            Tok::Name(name) => match name.as_str() {
                "True" => Ok(Expr::Bool(true)),
                "False" => Ok(Expr::Bool(false)),
                "None" => Err(self.error(column, "`None` is not allowed", "")),
                "import" | "from" => Err(self.error(column, "imports are not allowed", "")),
                "lambda" => Err(self.error(column, "lambdas are not allowed", "")),
                "and" | "or" | "not" | "in" | "is" | "if" | "else" | "for" | "yield" | "await"
                | "del" | "global" | "nonlocal" | "assert" | "pass" | "return" | "while"
                | "with" | "class" | "def" | "raise" | "try" | "except" | "finally" | "async"
                | "break" | "continue" | "elif" => {
                    Err(self.error(column, format!("`{name}` cannot start an expression"), ""))
                }
                _ => Ok(Expr::Name(name, column)),
            },
            Tok::Op("(") => {
                if self.is_op(")") {
                    self.bump();
                    return Ok(Expr::Tuple(Vec::new()));
                }
                let first = self.expr()?;
                if self.is_op(")") {
                    self.bump();
                    return Ok(first);
                }
                let mut items = vec![first];
                while self.is_op(",") {
                    self.bump();
                    if self.is_op(")") {
                        break;
                    }
                    items.push(self.expr()?);
                }
                self.expect_op(")", "`)` to close the tuple")?;
                Ok(Expr::Tuple(items))
            }
            Tok::Op("[") => {
                let mut items = Vec::new();
                while !self.is_op("]") {
                    items.push(self.expr()?);
                    if !self.is_op(",") {
                        break;
                    }
                    self.bump();
                }
                self.expect_op("]", "`]` to close the list")?;
                Ok(Expr::List(items))
            }
            Tok::Op(_) | Tok::End => Err(self.error(column, "expected a value", "")),
        }
    }
}
