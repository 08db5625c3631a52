//! Values during evaluation, with Puppet's equality, ordering, arithmetic and string
//! conversion.

use std::cmp::Ordering;
use std::fmt::Write as _;
use wconverge_catalog::{Lazy, MAX_DEPTH, ResourceRef, SourceLocation, Value, display_type_name};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Undef,
    Default,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// The pattern of a regular expression.
    Regex(String),
    Array(Vec<Val>),
    /// A hash in insertion order.
    Hash(Vec<(Val, Val)>),
    /// A type (`File`, title `None`) or a reference (`File['/etc/motd']`).
    Ref {
        type_name: String,
        title: Option<String>,
    },
    Sensitive(Box<Val>),
    /// A parameterized data type (`Array[String]`, `Integer[1, 10]`); a bare one is a
    /// `Ref` without a title.
    Type(Box<crate::eval::ptype::PType>),
    /// `lazy { expr }`: evaluated during the run, not now.
    Lazy(Box<LazyVal>),
    /// `Binary`, `SemVer`, `Timespan` or `Timestamp`.
    Rich(Box<crate::eval::rich::Rich>),
}

/// A lazy value during compilation: the expression's text, the variables it reads with
/// their values here, and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LazyVal {
    pub(crate) expression: String,
    pub(crate) variables: Vec<(String, Val)>,
    pub(crate) location: SourceLocation,
    /// Where it writes a node attribute, if it does (only a `node_block` may).
    pub(crate) node_write: Option<crate::diagnostic::Span>,
}

impl Val {
    pub(crate) fn truthy(&self) -> bool {
        !matches!(self, Val::Undef | Val::Bool(false))
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Val::Undef => "Undef",
            Val::Default => "Default",
            Val::Bool(_) => "Boolean",
            Val::Int(_) => "Integer",
            Val::Float(_) => "Float",
            Val::Str(_) => "String",
            Val::Regex(_) => "Regexp",
            Val::Array(_) => "Array",
            Val::Hash(_) => "Hash",
            Val::Ref { title: None, .. } => "Type",
            Val::Ref { .. } => "Resource reference",
            Val::Sensitive(_) => "Sensitive",
            Val::Lazy(_) => "Lazy",
            Val::Type(_) => "Type",
            Val::Rich(rich) => rich.type_name(),
        }
    }

    pub(crate) fn reference(type_name: &str, title: &str) -> Val {
        Val::Ref {
            type_name: type_name.to_ascii_lowercase(),
            title: Some(title.to_owned()),
        }
    }

    /// About how long [`Val::to_display`] would be (never less), counted only up to
    /// `cap`: what a string built from the value would cost, known before it is built.
    pub(crate) fn display_len_capped(&self, cap: usize) -> usize {
        let mut len = 0usize;
        let mut stack = vec![self];
        while let Some(value) = stack.pop() {
            len = len.saturating_add(match value {
                // Quoted when nested, with every quote escaped: at most twice, plus two.
                Val::Str(text) | Val::Regex(text) => text.len().saturating_mul(2) + 2,
                Val::Array(items) => {
                    stack.extend(items);
                    2 + 2 * items.len()
                }
                Val::Hash(entries) => {
                    for (key, value) in entries {
                        stack.push(key);
                        stack.push(value);
                    }
                    2 + 6 * entries.len()
                }
                Val::Ref { type_name, title } => {
                    type_name.len() + title.as_ref().map_or(0, |title| title.len() + 4)
                }
                Val::Lazy(lazy) => lazy.expression.len() + 8,
                Val::Type(ptype) => ptype.written().len(),
                _ => 32,
            });
            if len >= cap {
                return cap;
            }
        }
        len
    }

    /// The value as a message shows it: `undef` by name, strings inside collections
    /// quoted (`[1, 'two']`), so that what was wrong is plain.
    pub(crate) fn to_display(&self) -> String {
        if *self == Val::Undef {
            return "undef".to_owned();
        }
        let mut out = String::new();
        self.write(&mut out, false, true);
        out
    }

    /// The value as interpolation and `notice` print it, as Puppet does: `undef` is
    /// empty, strings inside collections are not quoted (`[1, two, [3]]`,
    /// `{a => 1}`).
    pub(crate) fn to_interpolated(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, false, false);
        out
    }

    fn write(&self, out: &mut String, nested: bool, quote: bool) {
        match self {
            Val::Undef => {
                if nested {
                    out.push_str("undef");
                }
            }
            Val::Default => out.push_str("default"),
            Val::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Val::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Val::Float(f) => out.push_str(&float_text(*f)),
            Val::Str(s) if nested && quote => {
                out.push('\'');
                out.push_str(&s.replace('\'', "\\'"));
                out.push('\'');
            }
            Val::Str(s) => out.push_str(s),
            Val::Regex(pattern) => {
                let _ = write!(out, "/{pattern}/");
            }
            Val::Array(items) => {
                out.push('[');
                for (idx, item) in items.iter().enumerate() {
                    if idx > 0 {
                        out.push_str(", ");
                    }
                    item.write(out, true, quote);
                }
                out.push(']');
            }
            Val::Hash(entries) => {
                out.push('{');
                for (idx, (key, value)) in entries.iter().enumerate() {
                    if idx > 0 {
                        out.push_str(", ");
                    }
                    key.write(out, true, quote);
                    out.push_str(" => ");
                    value.write(out, true, quote);
                }
                out.push('}');
            }
            Val::Ref { type_name, title } => {
                // A data type of several words is written as Puppet writes it.
                let camel = match type_name.as_str() {
                    "notundef" => Some("NotUndef"),
                    "scalardata" => Some("ScalarData"),
                    "richdata" => Some("RichData"),
                    "semver" => Some("SemVer"),
                    "semverrange" => Some("SemVerRange"),
                    _ => None,
                };
                match camel {
                    Some(name) if title.is_none() => out.push_str(name),
                    _ => out.push_str(&display_type_name(type_name)),
                }
                if let Some(title) = title {
                    let _ = write!(out, "['{title}']");
                }
            }
            Val::Sensitive(_) => out.push_str("Sensitive [value redacted]"),
            Val::Lazy(lazy) => {
                let _ = write!(out, "lazy {{ {} }}", lazy.expression.trim());
            }
            Val::Type(ptype) => out.push_str(&ptype.written()),
            Val::Rich(rich) => out.push_str(&rich.text()),
        }
    }

    /// Puppet's `==` of two strings: without regard to case.
    pub(crate) fn str_equals(a: &str, b: &str) -> bool {
        // Two ASCII strings that differ apart from case differ in lower case too.
        a.eq_ignore_ascii_case(b)
            || (!(a.is_ascii() && b.is_ascii()) && a.to_lowercase() == b.to_lowercase())
    }

    /// Puppet's `==`: strings compare without regard to case, numbers by value.
    pub(crate) fn equals(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Str(a), Val::Str(b)) => Val::str_equals(a, b),
            (Val::Int(a), Val::Float(b)) | (Val::Float(b), Val::Int(a)) => (*a as f64) == *b,
            (Val::Array(a), Val::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.equals(y))
            }
            (Val::Hash(a), Val::Hash(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(key, value)| {
                        b.iter()
                            .find(|(other_key, _)| other_key.equals(key))
                            .is_some_and(|(_, other_value)| other_value.equals(value))
                    })
            }
            (
                Val::Ref {
                    type_name: ta,
                    title: a,
                },
                Val::Ref {
                    type_name: tb,
                    title: b,
                },
            ) => ta == tb && a == b,
            // Two ways to write one type: `Integer == Integer[default, default]`.
            (
                Val::Type(_) | Val::Ref { title: None, .. },
                Val::Type(_) | Val::Ref { title: None, .. },
            ) => crate::eval::ptype::PType::of(self) == crate::eval::ptype::PType::of(other),
            (a, b) => a == b,
        }
    }

    /// Puppet's `<`, `>`...: numbers with numbers, strings with strings (ignoring case).
    pub(crate) fn compare(&self, other: &Val) -> Result<Ordering, String> {
        match (self, other) {
            (Val::Int(a), Val::Int(b)) => Ok(a.cmp(b)),
            (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => {
                let (a, b) = (self.as_f64(), other.as_f64());
                a.partial_cmp(&b)
                    .ok_or_else(|| "cannot compare NaN".to_owned())
            }
            (Val::Str(a), Val::Str(b)) => Ok(a.to_lowercase().cmp(&b.to_lowercase())),
            (Val::Rich(a), Val::Rich(b)) if a.compare(b).is_some() => {
                Ok(a.compare(b).unwrap_or(Ordering::Equal))
            }
            (a, b) => Err(format!(
                "cannot compare {} `{}` with {} `{}`",
                a.type_name(),
                a.to_display(),
                b.type_name(),
                b.to_display()
            )),
        }
    }

    fn as_f64(&self) -> f64 {
        match self {
            Val::Int(i) => *i as f64,
            Val::Float(f) => *f,
            _ => f64::NAN,
        }
    }

    /// A hash lookup by Puppet equality of keys (case-sensitive for strings, as
    /// Puppet's hashes are).
    pub(crate) fn hash_get<'v>(entries: &'v [(Val, Val)], key: &Val) -> Option<&'v Val> {
        entries
            .iter()
            .find(|(existing, _)| existing == key)
            .map(|(_, value)| value)
    }

    /// Where a lazy value in this value writes node attributes, if one does.
    pub(crate) fn node_write(&self) -> Option<crate::diagnostic::Span> {
        match self {
            Val::Lazy(lazy) => lazy.node_write,
            Val::Array(items) => items.iter().find_map(Val::node_write),
            Val::Hash(entries) => entries.iter().find_map(|(_, value)| value.node_write()),
            Val::Sensitive(inner) => inner.node_write(),
            _ => None,
        }
    }

    /// Whether the value is or holds a lazy value.
    pub(crate) fn contains_lazy(&self) -> bool {
        match self {
            Val::Lazy(_) => true,
            Val::Array(items) => items.iter().any(Val::contains_lazy),
            Val::Hash(entries) => entries.iter().any(|(_, value)| value.contains_lazy()),
            Val::Sensitive(inner) => inner.contains_lazy(),
            _ => false,
        }
    }

    /// A catalog value as a value of the language (for lazy values' variables).
    pub(crate) fn from_catalog(value: &Value) -> Val {
        match value {
            Value::Undef => Val::Undef,
            Value::Boolean(b) => Val::Bool(*b),
            Value::Integer(i) => Val::Int(*i),
            Value::Float(f) => Val::Float(*f),
            Value::String(s) => Val::Str(s.clone()),
            Value::Array(items) => Val::Array(items.iter().map(Val::from_catalog).collect()),
            Value::Hash(entries) => Val::Hash(
                entries
                    .iter()
                    .map(|(key, value)| (Val::Str(key.clone()), Val::from_catalog(value)))
                    .collect(),
            ),
            Value::Sensitive(inner) => Val::Sensitive(Box::new(Val::from_catalog(inner))),
        }
    }

    /// The value for the catalog; `Err` names what cannot go there.
    pub(crate) fn to_catalog(&self) -> Result<Value, String> {
        self.to_catalog_at(1)
    }

    fn to_catalog_at(&self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "the value nests deeper than {MAX_DEPTH} levels, the most a catalog holds"
            ));
        }
        let nested = |value: &Val| value.to_catalog_at(depth + 1);
        Ok(match self {
            Val::Undef => Value::Undef,
            Val::Bool(b) => Value::Boolean(*b),
            Val::Int(i) => Value::Integer(*i),
            Val::Float(f) => Value::Float(*f),
            Val::Str(s) => Value::String(s.clone()),
            // Rich data goes into a catalog as its text, as Puppet's does without
            // `rich_data`.
            Val::Rich(rich) => Value::String(rich.text()),
            Val::Array(items) => Value::Array(items.iter().map(nested).collect::<Result<_, _>>()?),
            Val::Hash(entries)
                if entries.len() == 1
                    && matches!(&entries[0].0, Val::Str(key) if key == wconverge_catalog::LAZY_KEY) =>
            {
                return Err(format!(
                    "a hash whose one key is `{}` is reserved for lazy values; write `lazy {{ }}`",
                    wconverge_catalog::LAZY_KEY
                ));
            }
            Val::Hash(entries) => Value::Hash(
                entries
                    .iter()
                    .map(|(key, value)| {
                        let key = match key {
                            Val::Str(s) => s.clone(),
                            Val::Int(_) | Val::Float(_) | Val::Bool(_) => key.to_display(),
                            other => {
                                return Err(format!(
                                    "a hash key of type {} cannot go into the catalog",
                                    other.type_name()
                                ));
                            }
                        };
                        Ok((key, nested(value)?))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Val::Ref {
                type_name,
                title: Some(title),
            } => Value::String(ResourceRef::new(type_name, title).to_string()),
            Val::Sensitive(inner) => Value::Sensitive(Box::new(nested(inner)?)),
            Val::Lazy(lazy) => Lazy {
                expression: lazy.expression.clone(),
                variables: lazy
                    .variables
                    .iter()
                    .map(|(name, value)| Ok((name.clone(), nested(value)?)))
                    .collect::<Result<_, String>>()?,
                location: lazy.location.clone(),
            }
            .to_value(),
            Val::Ref {
                type_name,
                title: None,
            } => {
                let written = display_type_name(type_name);
                return Err(format!(
                    "`{written}` is a type (a capitalized name), where a value was expected; \
                     write a value: `{}` in lower case or quoted is a string",
                    type_name.to_ascii_lowercase()
                ));
            }
            Val::Type(ptype) => {
                return Err(format!(
                    "`{}` is a data type, where a value was expected",
                    ptype.written()
                ));
            }
            Val::Default | Val::Regex(_) => {
                return Err(format!(
                    "a value of type {} cannot be an attribute value",
                    self.type_name()
                ));
            }
        })
    }
}

pub(crate) fn float_text(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// A string that is a number in the language's syntax (`42`, `-7`, `0x2A`, `052`,
/// `4.2`, `1e3`) as that number, as Puppet converts strings in arithmetic.
pub(crate) fn numeric_string(text: &str) -> Option<Val> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let sign = |value: i64| {
        if negative {
            value.checked_neg()
        } else {
            Some(value)
        }
    };
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return i64::from_str_radix(hex, 16)
            .ok()
            .and_then(sign)
            .map(Val::Int);
    }
    if digits.is_empty() || !digits.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        return if digits.len() > 1 && digits.starts_with('0') {
            i64::from_str_radix(&digits[1..], 8)
                .ok()
                .and_then(sign)
                .map(Val::Int)
        } else {
            digits.parse::<i64>().ok().and_then(sign).map(Val::Int)
        };
    }
    // A float: digits, then a fraction or an exponent (or both); nothing else.
    let (mantissa, exponent) = match digits.find(['e', 'E']) {
        Some(at) => (&digits[..at], Some(&digits[at + 1..])),
        None => (digits, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let all_digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let exponent_ok = exponent
        .is_none_or(|exponent| all_digits(exponent.strip_prefix(['-', '+']).unwrap_or(exponent)));
    if !all_digits(whole)
        || !fraction.is_none_or(all_digits)
        || !exponent_ok
        || (fraction.is_none() && exponent.is_none())
    {
        return None;
    }
    let value: f64 = digits.parse().ok()?;
    value
        .is_finite()
        .then_some(Val::Float(if negative { -value } else { value }))
}

/// Flattens nested arrays into one list.
pub(crate) fn flatten_into(value: Val, out: &mut Vec<Val>) {
    match value {
        Val::Array(items) => {
            for item in items {
                flatten_into(item, out);
            }
        }
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_compare_without_case() {
        assert!(Val::Str("Present".into()).equals(&Val::Str("present".into())));
        assert!(Val::Int(1).equals(&Val::Float(1.0)));
        assert!(!Val::Str("1".into()).equals(&Val::Int(1)));
    }

    #[test]
    fn display_quotes_nested_strings() {
        let value = Val::Array(vec![Val::Int(1), Val::Str("a".into()), Val::Undef]);
        assert_eq!(value.to_display(), "[1, 'a', undef]");
        assert_eq!(Val::Float(2.0).to_display(), "2.0");
        assert_eq!(Val::Undef.to_display(), "undef");
    }

    #[test]
    fn interpolation_prints_nested_strings_bare_as_puppet() {
        let value = Val::Array(vec![
            Val::Int(1),
            Val::Str("two".into()),
            Val::Array(vec![Val::Int(3)]),
            Val::Undef,
        ]);
        assert_eq!(value.to_interpolated(), "[1, two, [3], undef]");
        let hash = Val::Hash(vec![(Val::Str("a".into()), Val::Str("x".into()))]);
        assert_eq!(hash.to_interpolated(), "{a => x}");
        assert_eq!(Val::Undef.to_interpolated(), "");
    }

    #[test]
    fn numeric_strings_are_the_language_s_numbers() {
        assert_eq!(numeric_string("5"), Some(Val::Int(5)));
        assert_eq!(numeric_string("-7"), Some(Val::Int(-7)));
        assert_eq!(numeric_string("0x10"), Some(Val::Int(16)));
        assert_eq!(numeric_string("0755"), Some(Val::Int(0o755)));
        assert_eq!(numeric_string("1.5"), Some(Val::Float(1.5)));
        assert_eq!(numeric_string("1e3"), Some(Val::Float(1000.0)));
        for text in [
            "", "-", "abc", "1.", ".5", "1x", "0x", "08", " 1", "1e", "1.5.2",
        ] {
            assert_eq!(numeric_string(text), None, "{text:?}");
        }
    }
}
