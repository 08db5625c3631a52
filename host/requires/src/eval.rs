//! Evaluating one expression against one record, with Python's semantics for the
//! values a resource program can make. Any error (a failed conversion, an ordering
//! between a string and a number, a missing attribute, an overflow) is `None`, which
//! the caller counts as false for that record, as PlainBox's documentation says.

use crate::Record;
use crate::syntax::{BinOp, Builtin, CmpOp, Expr, UnaryOp};
use std::borrow::Cow;
use std::cell::Cell;
use std::cmp::Ordering;

/// The largest value an expression may build, in [`weight`] units (`'x' * 10**9` is an
/// error).
const MAX_WEIGHT: u64 = 1 << 16;

/// The work one evaluation of a whole program may do: every expression evaluated costs
/// one, every value built its weight. Past it, the program is not evaluated further.
pub(crate) const BUDGET: u64 = 20_000_000;

/// What a value costs to build and keep: 1 per value, plus 1 per 8 bytes of text.
fn weight(value: &Value<'_>) -> u64 {
    match value {
        Value::Str(text) => 1 + text.len() as u64 / 8,
        Value::List(items) | Value::Tuple(items) => 1 + items.iter().map(weight).sum::<u64>(),
        _ => 1,
    }
}

/// Spends `cost` of the budget; `None` once it is spent.
fn spend(budget: &Cell<u64>, cost: u64) -> Option<()> {
    let left = budget.get();
    if left < cost {
        budget.set(0);
        return None;
    }
    budget.set(left - cost);
    Some(())
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Float(f64),
    Bool(bool),
    List(Vec<Value<'a>>),
    Tuple(Vec<Value<'a>>),
}

impl Value<'_> {
    /// Python's truth.
    pub(crate) fn truthy(&self) -> bool {
        match self {
            Value::Str(text) => !text.is_empty(),
            Value::Int(n) => *n != 0,
            Value::Float(f) => *f != 0.0,
            Value::Bool(b) => *b,
            Value::List(items) | Value::Tuple(items) => !items.is_empty(),
        }
    }

    /// The value as a number, if it is one (a bool is an int in Python).
    fn number(&self) -> Option<Number> {
        match self {
            Value::Int(n) => Some(Number::Int(*n)),
            Value::Bool(b) => Some(Number::Int(i64::from(*b))),
            Value::Float(f) => Some(Number::Float(*f)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn float(self) -> f64 {
        match self {
            Number::Int(n) => n as f64,
            Number::Float(f) => f,
        }
    }
}

/// Evaluates `expr` with `record` bound to the line's group variable.
pub(crate) fn eval<'a>(
    expr: &'a Expr,
    record: &'a Record,
    budget: &Cell<u64>,
) -> Option<Value<'a>> {
    spend(budget, 1)?;
    Some(match expr {
        Expr::Str(text) => Value::Str(Cow::Borrowed(text)),
        Expr::Int(n) => Value::Int(*n),
        Expr::Float(f) => Value::Float(*f),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::List(items) => Value::List(
            items
                .iter()
                .map(|item| eval(item, record, budget))
                .collect::<Option<_>>()?,
        ),
        Expr::Tuple(items) => Value::Tuple(
            items
                .iter()
                .map(|item| eval(item, record, budget))
                .collect::<Option<_>>()?,
        ),
        // The checker lets no bare name through.
        Expr::Name(..) | Expr::All(..) => return None,
        Expr::Attr(_, attribute) => Value::Str(Cow::Borrowed(attribute_of(record, attribute)?)),
        Expr::Call(builtin, argument) => call(*builtin, eval(argument, record, budget)?)?,
        Expr::Not(inner) => Value::Bool(!eval(inner, record, budget)?.truthy()),
        Expr::Unary(op, inner) => unary(*op, eval(inner, record, budget)?)?,
        Expr::And(left, right) => {
            let left = eval(left, record, budget)?;
            if left.truthy() {
                eval(right, record, budget)?
            } else {
                left
            }
        }
        Expr::Or(left, right) => {
            let left = eval(left, record, budget)?;
            if left.truthy() {
                left
            } else {
                eval(right, record, budget)?
            }
        }
        // The most common line by far, `package.name == 'fwts'`, compares without
        // building values.
        Expr::Compare(first, rest)
            if rest.len() == 1
                && matches!(rest[0], (CmpOp::Eq | CmpOp::Ne, Expr::Str(_)))
                && matches!(**first, Expr::Attr(..)) =>
        {
            let (Expr::Attr(_, attribute), (op, Expr::Str(literal))) = (&**first, &rest[0]) else {
                return None;
            };
            let value = attribute_of(record, attribute)?;
            Value::Bool((value == literal) == (*op == CmpOp::Eq))
        }
        // `x in [...]` looks through the literal without building it.
        Expr::Compare(first, rest)
            if rest.len() == 1
                && matches!(
                    rest[0],
                    (CmpOp::In | CmpOp::NotIn, Expr::List(_) | Expr::Tuple(_))
                ) =>
        {
            let left = eval(first, record, budget)?;
            let (op, Expr::List(items) | Expr::Tuple(items)) = (&rest[0].0, &rest[0].1) else {
                return None;
            };
            // Python builds the whole list first: an error in any item is an error.
            let mut found = false;
            for item in items {
                found |= equal(&left, &eval(item, record, budget)?);
            }
            Value::Bool(found == (*op == CmpOp::In))
        }
        Expr::Compare(first, rest) => {
            let mut left = eval(first, record, budget)?;
            for (op, right) in rest {
                let right = eval(right, record, budget)?;
                if !compare(*op, &left, &right)? {
                    return Some(Value::Bool(false));
                }
                left = right;
            }
            Value::Bool(true)
        }
        Expr::Binary(op, left, right) => {
            let value = binary(
                *op,
                eval(left, record, budget)?,
                eval(right, record, budget)?,
            )?;
            if matches!(value, Value::Str(_) | Value::List(_) | Value::Tuple(_)) {
                spend(budget, weight(&value))?;
            }
            value
        }
    })
}

/// A record's attribute; a missing one is an error (Python's AttributeError).
fn attribute_of<'a>(record: &'a Record, attribute: &str) -> Option<&'a str> {
    record
        .iter()
        .find(|(key, _)| key == attribute)
        .map(|(_, value)| value.as_str())
}

fn call(builtin: Builtin, value: Value<'_>) -> Option<Value<'_>> {
    Some(match builtin {
        Builtin::Bool => Value::Bool(value.truthy()),
        Builtin::Int => Value::Int(match value {
            Value::Int(n) => n,
            Value::Bool(b) => i64::from(b),
            Value::Float(f) if f.is_finite() && f.abs() < 9.2e18 => f.trunc() as i64,
            Value::Str(text) => {
                let text = text.trim();
                let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
                if digits.is_empty()
                    || digits.starts_with('_')
                    || digits.ends_with('_')
                    || digits.contains("__")
                    || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
                {
                    return None;
                }
                text.replace('_', "").parse().ok()?
            }
            _ => return None,
        }),
        Builtin::Float => Value::Float(match value {
            Value::Int(n) => n as f64,
            Value::Bool(b) => f64::from(u8::from(b)),
            Value::Float(f) => f,
            Value::Str(text) => {
                let text = text.trim().to_ascii_lowercase();
                match text.trim_start_matches(['+', '-']) {
                    "inf" | "infinity" | "nan" => text.replace("infinity", "inf").parse().ok()?,
                    digits
                        if !digits.is_empty()
                            && digits.chars().all(|c| {
                                c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-')
                            }) =>
                    {
                        text.parse().ok()?
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }),
    })
}

fn unary(op: UnaryOp, value: Value<'_>) -> Option<Value<'_>> {
    let number = value.number()?;
    Some(match (op, number) {
        (UnaryOp::Neg, Number::Int(n)) => Value::Int(n.checked_neg()?),
        (UnaryOp::Neg, Number::Float(f)) => Value::Float(-f),
        (UnaryOp::Pos, Number::Int(n)) => Value::Int(n),
        (UnaryOp::Pos, Number::Float(f)) => Value::Float(f),
        (UnaryOp::Invert, Number::Int(n)) => Value::Int(!n),
        (UnaryOp::Invert, Number::Float(_)) => return None,
    })
}

fn equal(left: &Value<'_>, right: &Value<'_>) -> bool {
    match (left, right) {
        (Value::Str(a), Value::Str(b)) => a == b,
        (Value::List(a), Value::List(b)) | (Value::Tuple(a), Value::Tuple(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equal(x, y))
        }
        _ => match (left.number(), right.number()) {
            (Some(a), Some(b)) => compare_numbers(a, b) == Some(Ordering::Equal),
            _ => false,
        },
    }
}

/// Numbers compared exactly, as Python does (not through a lossy conversion).
fn compare_numbers(a: Number, b: Number) -> Option<Ordering> {
    let exact = |i: i64, f: f64| -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        if f >= 9_223_372_036_854_775_808.0 {
            return Some(Ordering::Less);
        }
        if f < -9_223_372_036_854_775_808.0 {
            return Some(Ordering::Greater);
        }
        let whole = f.floor();
        match i.cmp(&(whole as i64)) {
            Ordering::Equal if f > whole => Some(Ordering::Less),
            other => Some(other),
        }
    };
    match (a, b) {
        (Number::Int(a), Number::Int(b)) => Some(a.cmp(&b)),
        (Number::Int(a), Number::Float(b)) => exact(a, b),
        (Number::Float(a), Number::Int(b)) => exact(b, a).map(Ordering::reverse),
        (Number::Float(a), Number::Float(b)) => a.partial_cmp(&b),
    }
}

/// Python's ordering; `None` for types that have none between them (a TypeError).
fn order(left: &Value<'_>, right: &Value<'_>) -> Option<Option<Ordering>> {
    match (left, right) {
        (Value::Str(a), Value::Str(b)) => Some(Some(a.cmp(b))),
        (Value::List(a), Value::List(b)) | (Value::Tuple(a), Value::Tuple(b)) => {
            for (x, y) in a.iter().zip(b) {
                if !equal(x, y) {
                    return order(x, y);
                }
            }
            Some(Some(a.len().cmp(&b.len())))
        }
        // NaN orders with nothing: every comparison with it is false.
        _ => Some(compare_numbers(left.number()?, right.number()?)),
    }
}

fn compare(op: CmpOp, left: &Value<'_>, right: &Value<'_>) -> Option<bool> {
    let ordered = |test: fn(Ordering) -> bool| order(left, right).map(|o| o.is_some_and(test));
    Some(match op {
        CmpOp::Eq => equal(left, right),
        CmpOp::Ne => !equal(left, right),
        CmpOp::Lt => ordered(Ordering::is_lt)?,
        CmpOp::Le => ordered(Ordering::is_le)?,
        CmpOp::Gt => ordered(Ordering::is_gt)?,
        CmpOp::Ge => ordered(Ordering::is_ge)?,
        CmpOp::In => contains(right, left)?,
        CmpOp::NotIn => !contains(right, left)?,
        // Identity: only `True` and `False` are the same object whenever equal.
        CmpOp::Is => matches!((left, right), (Value::Bool(a), Value::Bool(b)) if a == b),
        CmpOp::IsNot => !matches!((left, right), (Value::Bool(a), Value::Bool(b)) if a == b),
    })
}

fn contains(container: &Value<'_>, item: &Value<'_>) -> Option<bool> {
    match (container, item) {
        (Value::List(items) | Value::Tuple(items), _) => Some(items.iter().any(|x| equal(x, item))),
        (Value::Str(text), Value::Str(part)) => Some(text.contains(part.as_ref())),
        _ => None,
    }
}

fn binary<'a>(op: BinOp, left: Value<'a>, right: Value<'a>) -> Option<Value<'a>> {
    match (op, &left, &right) {
        (BinOp::Add, Value::Str(a), Value::Str(b)) => (weight(&left) + weight(&right)
            <= MAX_WEIGHT)
            .then(|| Value::Str(Cow::Owned(format!("{a}{b}")))),
        (BinOp::Add, Value::List(a), Value::List(b)) => (weight(&left) + weight(&right)
            <= MAX_WEIGHT)
            .then(|| Value::List(a.iter().chain(b).cloned().collect())),
        (BinOp::Add, Value::Tuple(a), Value::Tuple(b)) => (weight(&left) + weight(&right)
            <= MAX_WEIGHT)
            .then(|| Value::Tuple(a.iter().chain(b).cloned().collect())),
        (BinOp::Mul, Value::Str(_) | Value::List(_) | Value::Tuple(_), _) => {
            repeat(&left, right.number()?)
        }
        (BinOp::Mul, _, Value::Str(_) | Value::List(_) | Value::Tuple(_)) => {
            repeat(&right, left.number()?)
        }
        _ => arithmetic(op, left.number()?, right.number()?),
    }
}

fn repeat<'a>(sequence: &Value<'a>, times: Number) -> Option<Value<'a>> {
    let Number::Int(times) = times else {
        return None;
    };
    let times = usize::try_from(times).unwrap_or(0);
    if weight(sequence).checked_mul(times as u64)? > MAX_WEIGHT {
        return None;
    }
    Some(match sequence {
        Value::Str(text) => Value::Str(Cow::Owned(text.repeat(times))),
        Value::List(items) | Value::Tuple(items) => {
            let repeated = items
                .iter()
                .cycle()
                .take(items.len() * times)
                .cloned()
                .collect();
            if matches!(sequence, Value::List(_)) {
                Value::List(repeated)
            } else {
                Value::Tuple(repeated)
            }
        }
        _ => return None,
    })
}

fn arithmetic<'a>(op: BinOp, left: Number, right: Number) -> Option<Value<'a>> {
    if let (Number::Int(a), Number::Int(b)) = (left, right) {
        return Some(match op {
            BinOp::Add => Value::Int(a.checked_add(b)?),
            BinOp::Sub => Value::Int(a.checked_sub(b)?),
            BinOp::Mul => Value::Int(a.checked_mul(b)?),
            BinOp::Div if b == 0 => return None,
            BinOp::Div => Value::Float(a as f64 / b as f64),
            BinOp::FloorDiv => Value::Int(floor_div(a, b)?),
            BinOp::Mod => Value::Int(a.checked_sub(floor_div(a, b)?.checked_mul(b)?)?),
            BinOp::Pow if b < 0 && a == 0 => return None,
            BinOp::Pow if b < 0 => Value::Float((a as f64).powf(b as f64)),
            BinOp::Pow => Value::Int(a.checked_pow(u32::try_from(b).ok()?)?),
            BinOp::Shl if !(0..64).contains(&b) => return None,
            BinOp::Shl => {
                let shifted = a.checked_shl(b as u32)?;
                if shifted >> b != a {
                    return None;
                }
                Value::Int(shifted)
            }
            BinOp::Shr if b < 0 => return None,
            BinOp::Shr => Value::Int(a >> b.min(63)),
            BinOp::BitAnd => Value::Int(a & b),
            BinOp::BitOr => Value::Int(a | b),
            BinOp::BitXor => Value::Int(a ^ b),
        });
    }
    let (a, b) = (left.float(), right.float());
    let result = match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div | BinOp::FloorDiv | BinOp::Mod if b == 0.0 => return None,
        BinOp::Div => a / b,
        BinOp::FloorDiv => float_divmod(a, b).0,
        BinOp::Mod => float_divmod(a, b).1,
        BinOp::Pow if a == 0.0 && b < 0.0 => return None,
        BinOp::Pow => a.powf(b),
        BinOp::Shl | BinOp::Shr | BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => return None,
    };
    // Python raises OverflowError where finite operands give an infinite result.
    if result.is_infinite() && a.is_finite() && b.is_finite() {
        return None;
    }
    Some(Value::Float(result))
}

/// Python's `divmod` on floats: the remainder has the sign of the divisor, and the
/// quotient is the floor of the exact one.
fn float_divmod(a: f64, b: f64) -> (f64, f64) {
    let mut remainder = a % b;
    let mut quotient = (a - remainder) / b;
    if remainder != 0.0 && ((b < 0.0) != (remainder < 0.0)) {
        remainder += b;
        quotient -= 1.0;
    }
    let mut floor = quotient.floor();
    if quotient - floor > 0.5 {
        floor += 1.0;
    }
    if remainder == 0.0 {
        remainder = 0.0_f64.copysign(b);
    }
    (floor, remainder)
}

/// Python's `//` on integers: rounds towards negative infinity.
fn floor_div(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let quotient = a.checked_div(b)?;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        quotient.checked_sub(1)
    } else {
        Some(quotient)
    }
}
