//! Running a template's Ruby: Ruby's values (`nil`, strings, symbols, integers, floats,
//! arrays, hashes, ranges), its truth (only `nil` and `false` are false), its `to_s` and
//! `inspect`, local variables that blocks share, and a budget of steps and output.

use super::parse::{Block, Expr, Interp, Program, Stmt};
use super::{Error, MAX_OUTPUT};

/// What a template reads from the compile: variables and Puppet's functions.
pub(crate) trait Host {
    /// The variable `name` (`x`, or a class's `ntp::servers`) of the calling scope.
    fn variable(&mut self, name: &str) -> Option<RVal>;
    /// Puppet's function `name` called with `args`.
    fn call(&mut self, name: &str, args: Vec<RVal>) -> Result<RVal, String>;
}

/// A Ruby value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RVal {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Sym(String),
    Array(Vec<RVal>),
    Hash(Vec<(RVal, RVal)>),
    Regex(String),
    Range(i64, i64),
    /// A class named in the template (`String`, `Array`), for `is_a?` and `case`.
    Class(String),
    /// Puppet's `scope` object.
    Scope,
    /// A value of Puppet's that Ruby sees as an object: its class and its `to_s`.
    Other(&'static str, String),
}

/// Steps a template may take (expressions evaluated and block calls), at most.
const MAX_STEPS: u64 = 20_000_000;

/// Renders `program` with the variables and functions of `host`.
pub(crate) fn render(program: &Program, host: &mut dyn Host) -> Result<String, Error> {
    let mut run = Run {
        host,
        frames: vec![Frame::default()],
        ivars: Vec::new(),
        defs: Vec::new(),
        out: String::new(),
        steps: 0,
        next: None,
        blocks: 0,
    };
    run.statements(&program.body)?;
    Ok(run.out)
}

pub(super) struct Run<'h> {
    pub(super) host: &'h mut dyn Host,
    frames: Vec<Frame>,
    /// Instance variables the template set (`@x = ...`), over the manifest's.
    ivars: Vec<(String, RVal)>,
    /// Methods the template defined (`def name(params) ... end`).
    defs: Vec<(String, Vec<String>, Vec<Stmt>)>,
    out: String,
    steps: u64,
    /// A `next` on its way out of the block it is in, with the block's value.
    next: Option<RVal>,
    /// How many blocks are being called (where `next` may be).
    blocks: usize,
}

/// Local variables of a block, or of a method (whose body sees no other locals).
#[derive(Default)]
struct Frame {
    locals: Vec<(String, RVal)>,
    method: bool,
}

/// How deep template methods call each other, at most.
const MAX_CALL_DEPTH: usize = 100;

impl RVal {
    pub(crate) fn truthy(&self) -> bool {
        !matches!(self, RVal::Nil | RVal::Bool(false))
    }

    /// Ruby's class name of the value.
    pub(crate) fn class(&self) -> &str {
        match self {
            RVal::Nil => "NilClass",
            RVal::Bool(true) => "TrueClass",
            RVal::Bool(false) => "FalseClass",
            RVal::Int(_) => "Integer",
            RVal::Float(_) => "Float",
            RVal::Str(_) => "String",
            RVal::Sym(_) => "Symbol",
            RVal::Array(_) => "Array",
            RVal::Hash(_) => "Hash",
            RVal::Regex(_) => "Regexp",
            RVal::Range(..) => "Range",
            RVal::Class(_) => "Class",
            RVal::Scope => "Puppet::Parser::Scope",
            RVal::Other(class, _) => class,
        }
    }

    /// Whether the value is of the class `name` (or a class it inherits from).
    pub(crate) fn is_a(&self, name: &str) -> bool {
        let class = self.class();
        class == name
            || match name {
                "Object" | "BasicObject" | "Kernel" => true,
                "Numeric" | "Comparable" => {
                    matches!(self, RVal::Int(_) | RVal::Float(_))
                        || (name == "Comparable" && matches!(self, RVal::Str(_)))
                }
                "Fixnum" | "Bignum" => matches!(self, RVal::Int(_)),
                "Enumerable" => matches!(self, RVal::Array(_) | RVal::Hash(_) | RVal::Range(..)),
                _ => false,
            }
    }

    /// Ruby's `to_s`: what `<%= %>` prints.
    pub(crate) fn to_s(&self) -> String {
        match self {
            RVal::Nil => String::new(),
            RVal::Str(text) | RVal::Sym(text) => text.clone(),
            RVal::Regex(pattern) => format!("(?-mix:{pattern})"),
            RVal::Class(name) => name.clone(),
            RVal::Other(_, text) => text.clone(),
            other => other.inspect(),
        }
    }

    /// Ruby's `inspect` (3.1): `"a"`, `:a`, `[1, nil]`, `{"a"=>1}`.
    pub(crate) fn inspect(&self) -> String {
        match self {
            RVal::Nil => "nil".to_owned(),
            RVal::Bool(b) => b.to_string(),
            RVal::Int(i) => i.to_string(),
            RVal::Float(f) => float_to_s(*f),
            RVal::Str(text) => inspect_str(text),
            RVal::Sym(name) => {
                if name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '?')
                {
                    format!(":{name}")
                } else {
                    format!(":{}", inspect_str(name))
                }
            }
            RVal::Array(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(RVal::inspect)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            RVal::Hash(entries) => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(key, value)| format!("{}=>{}", key.inspect(), value.inspect()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            RVal::Regex(pattern) => format!("/{pattern}/"),
            RVal::Range(from, to) => format!("{from}..{to}"),
            RVal::Class(name) => name.clone(),
            RVal::Scope => "#<Puppet::Parser::Scope>".to_owned(),
            RVal::Other(_, text) => text.clone(),
        }
    }

    /// Ruby's `==`.
    pub(crate) fn equals(&self, other: &RVal) -> bool {
        match (self, other) {
            (RVal::Int(a), RVal::Float(b)) | (RVal::Float(b), RVal::Int(a)) => (*a as f64) == *b,
            (RVal::Array(a), RVal::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.equals(y))
            }
            (RVal::Hash(a), RVal::Hash(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(key, value)| {
                        b.iter().any(|(other_key, other_value)| {
                            other_key.eql(key) && other_value.equals(value)
                        })
                    })
            }
            (a, b) => a == b,
        }
    }

    /// Ruby's `eql?`, as hash keys compare (`1` is not `1.0`).
    pub(crate) fn eql(&self, other: &RVal) -> bool {
        match (self, other) {
            (RVal::Int(_), RVal::Float(_)) | (RVal::Float(_), RVal::Int(_)) => false,
            _ => self.equals(other),
        }
    }

    /// Ruby's `<=>`, or `None` where Ruby's sort fails.
    pub(crate) fn compare(&self, other: &RVal) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (RVal::Int(a), RVal::Int(b)) => Some(a.cmp(b)),
            (RVal::Int(_) | RVal::Float(_), RVal::Int(_) | RVal::Float(_)) => {
                number(self)?.partial_cmp(&number(other)?)
            }
            (RVal::Str(a), RVal::Str(b)) | (RVal::Sym(a), RVal::Sym(b)) => {
                Some(a.as_bytes().cmp(b.as_bytes()))
            }
            (RVal::Array(a), RVal::Array(b)) => {
                for (x, y) in a.iter().zip(b) {
                    match x.compare(y)? {
                        std::cmp::Ordering::Equal => continue,
                        other => return Some(other),
                    }
                }
                Some(a.len().cmp(&b.len()))
            }
            (RVal::Bool(a), RVal::Bool(b)) if a == b => Some(std::cmp::Ordering::Equal),
            (RVal::Nil, RVal::Nil) => Some(std::cmp::Ordering::Equal),
            _ => None,
        }
    }
}

pub(super) fn number(value: &RVal) -> Option<f64> {
    match value {
        RVal::Int(i) => Some(*i as f64),
        RVal::Float(f) => Some(*f),
        _ => None,
    }
}

/// Ruby's `Float#to_s`: the shortest digits, `.0` on whole numbers, an exponent from
/// 1e16 up and below 1e-4.
pub(crate) fn float_to_s(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let exponent = f.abs().log10().floor() as i32;
    if !(-4..16).contains(&exponent) {
        let text = format!("{f:e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_owned()
        } else {
            format!("{mantissa}.0")
        };
        let exp: i32 = exp.parse().unwrap_or(0);
        return format!(
            "{mantissa}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    }
    let text = format!("{f}");
    if text.contains('.') {
        text
    } else {
        format!("{text}.0")
    }
}

fn inspect_str(text: &str) -> String {
    let mut out = String::from("\"");
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            '#' if matches!(chars.peek(), Some('{' | '$' | '@')) => out.push_str("\\#"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Run<'_> {
    pub(super) fn step(&mut self, line: u32) -> Result<(), Error> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Error::new(
                format!("the template took more than {MAX_STEPS} steps (the limit)"),
                line,
            ));
        }
        Ok(())
    }

    fn statements(&mut self, body: &[Stmt]) -> Result<RVal, Error> {
        let mut last = RVal::Nil;
        for stmt in body {
            last = match stmt {
                Stmt::Text(text) => {
                    self.print(text, 0)?;
                    RVal::Nil
                }
                Stmt::Print(expr, line) => {
                    let value = self.eval(expr).map_err(|error| at(error, *line))?;
                    let text = value.to_s();
                    self.print(&text, *line)?;
                    RVal::Nil
                }
                Stmt::Expr(expr, line) => self.eval(expr).map_err(|error| at(error, *line))?,
            };
            if self.next.is_some() {
                break;
            }
        }
        Ok(last)
    }

    fn print(&mut self, text: &str, line: u32) -> Result<(), Error> {
        if self.out.len() + text.len() > MAX_OUTPUT {
            return Err(Error::new(
                format!("the template prints more than {MAX_OUTPUT} bytes (16 MiB, the limit)"),
                line,
            ));
        }
        self.out.push_str(text);
        Ok(())
    }

    /// The frames a name is looked up in: up to the innermost method's.
    fn visible(&self) -> usize {
        self.frames
            .iter()
            .rposition(|frame| frame.method)
            .unwrap_or(0)
    }

    fn local(&self, name: &str) -> Option<&RVal> {
        self.frames[self.visible()..]
            .iter()
            .rev()
            .find_map(|frame| {
                frame
                    .locals
                    .iter()
                    .rev()
                    .find(|(known, _)| known == name)
                    .map(|(_, value)| value)
            })
    }

    fn set_local(&mut self, name: &str, value: RVal) {
        let from = self.visible();
        for frame in self.frames[from..].iter_mut().rev() {
            if let Some(slot) = frame.locals.iter_mut().find(|(known, _)| known == name) {
                slot.1 = value;
                return;
            }
        }
        if let Some(frame) = self.frames.last_mut() {
            frame.locals.push((name.to_owned(), value));
        }
    }

    fn ivar(&mut self, name: &str) -> Option<RVal> {
        match self.ivars.iter().find(|(known, _)| known == name) {
            Some((_, value)) => Some(value.clone()),
            None => self.host.variable(name),
        }
    }

    /// Calls the template's own method `name`, if it defined one.
    pub(super) fn call_def(
        &mut self,
        name: &str,
        args: &[RVal],
        line: u32,
    ) -> Option<Result<RVal, Error>> {
        let (_, params, body) = self.defs.iter().find(|(known, ..)| known == name)?.clone();
        if params.len() != args.len() {
            return Some(Err(Error::new(
                format!(
                    "wrong number of arguments (given {}, expected {})",
                    args.len(),
                    params.len()
                ),
                line,
            )));
        }
        if self.frames.len() > MAX_CALL_DEPTH {
            return Some(Err(Error::new(
                "methods call methods too deep (the limit is 100)",
                line,
            )));
        }
        self.frames.push(Frame {
            locals: params.into_iter().zip(args.iter().cloned()).collect(),
            method: true,
        });
        let result = self.statements(&body);
        self.frames.pop();
        Some(result)
    }

    /// Calls `block` with `args`, as Ruby yields: several parameters take an array apart.
    pub(super) fn call_block(
        &mut self,
        block: &Block,
        args: Vec<RVal>,
        line: u32,
    ) -> Result<RVal, Error> {
        self.step(line)?;
        let args = match args.as_slice() {
            [RVal::Array(items)] if block.params.len() > 1 => items.clone(),
            _ => args,
        };
        let mut frame = Frame::default();
        for (idx, names) in block.params.iter().enumerate() {
            let value = args.get(idx).cloned().unwrap_or(RVal::Nil);
            if names.len() == 1 {
                frame.locals.push((names[0].clone(), value));
            } else {
                let parts = match value {
                    RVal::Array(items) => items,
                    other => vec![other],
                };
                for (at, name) in names.iter().enumerate() {
                    frame
                        .locals
                        .push((name.clone(), parts.get(at).cloned().unwrap_or(RVal::Nil)));
                }
            }
        }
        self.frames.push(frame);
        self.blocks += 1;
        let result = self.statements(&block.body);
        self.blocks -= 1;
        self.frames.pop();
        match self.next.take() {
            Some(value) => result.map(|_| value),
            None => result,
        }
    }

    pub(super) fn eval(&mut self, expr: &Expr) -> Result<RVal, Error> {
        self.step(0)?;
        Ok(match expr {
            Expr::Nil => RVal::Nil,
            Expr::Bool(b) => RVal::Bool(*b),
            Expr::Int(i) => RVal::Int(*i),
            Expr::Float(f) => RVal::Float(*f),
            Expr::Str(text) => RVal::Str(text.clone()),
            Expr::Sym(name) => RVal::Sym(name.clone()),
            Expr::Regex(pattern) => RVal::Regex(pattern.clone()),
            Expr::DStr(parts) => {
                let mut text = String::new();
                for part in parts {
                    match part {
                        Interp::Lit(literal) => text.push_str(literal),
                        Interp::Code(code) => text.push_str(&self.eval(code)?.to_s()),
                    }
                    if text.len() > MAX_OUTPUT {
                        return Err(Error::new("a string longer than 16 MiB (the limit)", 0));
                    }
                }
                RVal::Str(text)
            }
            Expr::Array(items) => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Expr::Splat(inner) => match self.eval(inner)? {
                            RVal::Array(inner) => values.extend(inner),
                            RVal::Nil => {}
                            other => values.push(other),
                        },
                        item => values.push(self.eval(item)?),
                    }
                }
                RVal::Array(values)
            }
            Expr::Hash(entries) => {
                let mut values: Vec<(RVal, RVal)> = Vec::with_capacity(entries.len());
                for (key, value) in entries {
                    let key = self.eval(key)?;
                    let value = self.eval(value)?;
                    match values.iter_mut().find(|(known, _)| known.eql(&key)) {
                        Some(slot) => slot.1 = value,
                        None => values.push((key, value)),
                    }
                }
                RVal::Hash(values)
            }
            Expr::IVar(name) => self.ivar(name).unwrap_or(RVal::Nil),
            Expr::IAssign(name, value) => {
                let value = self.eval(value)?;
                match self.ivars.iter_mut().find(|(known, _)| known == name) {
                    Some(slot) => slot.1 = value.clone(),
                    None => self.ivars.push((name.clone(), value.clone())),
                }
                value
            }
            Expr::Defined(inner) => {
                let what = match &**inner {
                    Expr::IVar(name) => self.ivar(name).map(|_| "instance-variable"),
                    Expr::Name(name) if self.local(name).is_some() => Some("local-variable"),
                    Expr::Name(name) if self.defs.iter().any(|(known, ..)| known == name) => {
                        Some("method")
                    }
                    Expr::Name(_) => None,
                    // A call is defined when it can be made: what it is called on has it.
                    call @ Expr::Call { .. } => self.eval(call).ok().map(|_| "method"),
                    _ => Some("expression"),
                };
                what.map_or(RVal::Nil, |what| RVal::Str(what.to_owned()))
            }
            Expr::Def(name, params, body) => {
                self.defs.retain(|(known, ..)| known != name);
                self.defs.push((name.clone(), params.clone(), body.clone()));
                RVal::Sym(name.clone())
            }
            Expr::Name(name) => match self.local(name) {
                Some(value) => value.clone(),
                None if name == "scope" => RVal::Scope,
                None => super::methods::call(self, None, name, Vec::new(), None, 0)?,
            },
            Expr::Const(name) => RVal::Class(name.clone()),
            Expr::Call {
                receiver,
                name,
                args,
                block,
                line,
            } => {
                let receiver = match receiver {
                    Some(receiver) => Some(self.eval(receiver)?),
                    None => None,
                };
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    match arg {
                        Expr::Splat(inner) => match self.eval(inner)? {
                            RVal::Array(inner) => values.extend(inner),
                            other => values.push(other),
                        },
                        arg => values.push(self.eval(arg)?),
                    }
                }
                super::methods::call(self, receiver, name, values, block.as_deref(), *line)
                    .map_err(|error| at(error, *line))?
            }
            Expr::Not(inner) => RVal::Bool(!self.eval(inner)?.truthy()),
            Expr::Neg(inner) => match self.eval(inner)? {
                RVal::Int(i) => RVal::Int(
                    i.checked_neg()
                        .ok_or_else(|| Error::new("integer overflow", 0))?,
                ),
                RVal::Float(f) => RVal::Float(-f),
                other => {
                    return Err(Error::new(
                        format!("undefined method `-@' for {}", other.class()),
                        0,
                    ));
                }
            },
            Expr::Binary(op, left, right, line) => {
                let left_value = self.eval(left)?;
                let right_value = self.eval(right)?;
                let result = super::methods::operator(self, op, left_value, right_value, *line)?;
                // `list << x` changes the list where it is.
                if *op == "<<"
                    && let Expr::Name(name) = &**left
                    && self.local(name).is_some()
                {
                    self.set_local(name, result.clone());
                }
                result
            }
            Expr::And(left, right) => {
                let left = self.eval(left)?;
                if left.truthy() {
                    self.eval(right)?
                } else {
                    left
                }
            }
            Expr::Or(left, right) => {
                let left = self.eval(left)?;
                if left.truthy() {
                    left
                } else {
                    self.eval(right)?
                }
            }
            Expr::If(cond, then, otherwise) => {
                if self.eval(cond)?.truthy() {
                    self.statements(then)?
                } else {
                    self.statements(otherwise)?
                }
            }
            Expr::Case(subject, arms, otherwise) => {
                let subject = match subject {
                    Some(subject) => Some(self.eval(subject)?),
                    None => None,
                };
                for (options, body) in arms {
                    for option in options {
                        let option = self.eval(option)?;
                        let matched = match &subject {
                            Some(subject) => case_equal(self, &option, subject)?,
                            None => option.truthy(),
                        };
                        if matched {
                            return self.statements(body);
                        }
                    }
                }
                self.statements(otherwise)?
            }
            Expr::Assign(name, value) => {
                let value = self.eval(value)?;
                self.set_local(name, value.clone());
                value
            }
            Expr::OrAssign(name, value) => match self.local(name) {
                Some(current) if current.truthy() => current.clone(),
                _ => {
                    let value = self.eval(value)?;
                    self.set_local(name, value.clone());
                    value
                }
            },
            Expr::IndexAssign(receiver, keys, value) => {
                let current = match &**receiver {
                    Expr::Name(name) => self.local(name).cloned(),
                    Expr::IVar(name) => Some(self.ivar(name).unwrap_or(RVal::Nil)),
                    _ => {
                        return Err(Error::new(
                            "only a variable's elements can be set (`h[k] = v`)",
                            0,
                        ));
                    }
                };
                let Some(current) = current else {
                    return Err(Error::new("undefined local variable", 0));
                };
                let key = match keys.as_slice() {
                    [key] => self.eval(key)?,
                    _ => return Err(Error::new("`x[a] = v` takes one index", 0)),
                };
                let value = self.eval(value)?;
                let updated = match (current, key) {
                    (RVal::Hash(mut entries), key) => {
                        match entries.iter_mut().find(|(known, _)| known.eql(&key)) {
                            Some(slot) => slot.1 = value.clone(),
                            None => entries.push((key, value.clone())),
                        }
                        RVal::Hash(entries)
                    }
                    (RVal::Array(mut items), RVal::Int(index)) => {
                        let len = items.len() as i64;
                        let index = if index < 0 { index + len } else { index };
                        if !(0..=1_000_000).contains(&index) {
                            return Err(Error::new("an index out of range", 0));
                        }
                        let index = index as usize;
                        if index >= items.len() {
                            items.resize(index + 1, RVal::Nil);
                        }
                        items[index] = value.clone();
                        RVal::Array(items)
                    }
                    (other, _) => {
                        return Err(Error::new(
                            format!("undefined method `[]=' for {}", other.class()),
                            0,
                        ));
                    }
                };
                match &**receiver {
                    Expr::IVar(name) => {
                        match self.ivars.iter_mut().find(|(known, _)| known == name) {
                            Some(slot) => slot.1 = updated,
                            None => self.ivars.push((name.clone(), updated)),
                        }
                    }
                    Expr::Name(name) => self.set_local(name, updated),
                    _ => {}
                }
                value
            }
            Expr::Range(from, to, exclusive) => match (self.eval(from)?, self.eval(to)?) {
                (RVal::Int(from), RVal::Int(to)) => {
                    RVal::Range(from, if *exclusive { to.saturating_sub(1) } else { to })
                }
                _ => return Err(Error::new("ranges of integers only", 0)),
            },
            Expr::Splat(_) => {
                return Err(Error::new("`*` only in an argument list or an array", 0));
            }
            Expr::Next(value) => {
                if self.blocks == 0 {
                    return Err(Error::new("`next` outside a block", 0));
                }
                let value = match value {
                    Some(value) => self.eval(value)?,
                    None => RVal::Nil,
                };
                self.next = Some(value);
                RVal::Nil
            }
        })
    }
}

/// Ruby's `===` of a `case` option.
fn case_equal(run: &mut Run<'_>, option: &RVal, subject: &RVal) -> Result<bool, Error> {
    Ok(match option {
        RVal::Class(name) => subject.is_a(name),
        RVal::Regex(_) => {
            super::methods::operator(run, "=~", subject.clone(), option.clone(), 0)?.truthy()
        }
        RVal::Range(from, to) => matches!(subject, RVal::Int(i) if from <= i && i <= to),
        other => other.equals(subject),
    })
}

/// `error`, at `line` when it does not say its own.
fn at(mut error: Error, line: u32) -> Error {
    if error.line == 0 {
        error.line = line;
    }
    error
}
