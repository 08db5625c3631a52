//! Text functions of the standard library: `regsubst`, `sprintf`, `versioncmp` and
//! base64.

use super::*;

/// `regsubst(target, pattern, replacement, flags)`: `G` replaces every match, `I`
/// ignores case; `\0`...`\9` in the replacement are the match and its groups. A target
/// that is an array has each of its strings replaced.
pub(super) fn regsubst(evaluator: &mut Evaluator<'_>, args: Vec<Val>, span: Span) -> Val {
    let mut args = args.into_iter();
    let (Some(target), Some(pattern), Some(Val::Str(replacement))) =
        (args.next(), args.next(), args.next())
    else {
        return error(
            evaluator,
            span,
            "regsubst",
            "takes a target, a pattern and a replacement".into(),
        );
    };
    let flags = match args.next() {
        Some(Val::Str(flags)) => flags,
        _ => String::new(),
    };
    let pattern = match pattern {
        Val::Str(pattern) | Val::Regex(pattern) => pattern,
        other => {
            return error(
                evaluator,
                span,
                "regsubst",
                format!(
                    "the pattern is a string or a regular expression, not {}",
                    other.type_name()
                ),
            );
        }
    };
    let pattern = if flags.contains('I') {
        format!("(?i){pattern}")
    } else {
        pattern
    };
    let Some(regex) = evaluator.regex(&pattern, span) else {
        return Val::Undef;
    };
    // Puppet's (Ruby's) `\1` is the regex crate's `${1}`; a `$` stays a `$`.
    let mut rust = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(char::is_ascii_digit) => {
                rust.push_str(&format!("${{{}}}", chars.next().unwrap_or('0')));
            }
            '\\' if chars.peek() == Some(&'\\') => {
                chars.next();
                rust.push('\\');
            }
            '$' => rust.push_str("$$"),
            other => rust.push(other),
        }
    }
    let global = flags.contains('G');
    let apply = |text: &str| -> String {
        if global {
            regex.replace_all(text, rust.as_str()).into_owned()
        } else {
            regex.replace(text, rust.as_str()).into_owned()
        }
    };
    match target {
        Val::Str(text) => Val::Str(apply(&text)),
        Val::Array(items) => Val::Array(
            items
                .into_iter()
                .map(|item| match item {
                    Val::Str(text) => Val::Str(apply(&text)),
                    other => other,
                })
                .collect(),
        ),
        other => error(
            evaluator,
            span,
            "regsubst",
            format!(
                "the target is a string or an array, not {}",
                other.type_name()
            ),
        ),
    }
}

/// `sprintf`: `%s`, `%d`/`%i`, `%f` (with a precision), `%x`, `%X`, `%o`, `%b`, `%e`,
/// `%%`, with the flags `-`, `0`, `+`, ` ` and a width.
pub(super) fn sprintf(evaluator: &mut Evaluator<'_>, args: Vec<Val>, span: Span) -> Val {
    let mut args = args.into_iter();
    let Some(Val::Str(format)) = args.next() else {
        return error(
            evaluator,
            span,
            "sprintf",
            "takes a format string first".into(),
        );
    };
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut flags = String::new();
        while let Some(&flag) = chars.peek().filter(|c| "-0+ #".contains(**c)) {
            flags.push(flag);
            chars.next();
        }
        let mut width = String::new();
        while let Some(&digit) = chars.peek().filter(|c| c.is_ascii_digit()) {
            width.push(digit);
            chars.next();
        }
        let mut precision: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut digits = String::new();
            while let Some(&digit) = chars.peek().filter(|c| c.is_ascii_digit()) {
                digits.push(digit);
                chars.next();
            }
            precision = Some(digits.parse().unwrap_or(0));
        }
        let Some(conversion) = chars.next() else {
            return error(
                evaluator,
                span,
                "sprintf",
                "the format ends in the middle of a `%`".into(),
            );
        };
        if conversion == '%' {
            out.push('%');
            continue;
        }
        let value = args.next().unwrap_or(Val::Undef);
        let numeric = number(Some(&value));
        let body = match (conversion, &numeric) {
            ('s', _) => {
                let text = value.to_interpolated();
                match precision {
                    Some(p) => text.chars().take(p).collect(),
                    None => text,
                }
            }
            ('d' | 'i', Some(n)) => {
                let i = match n {
                    Val::Int(i) => *i,
                    Val::Float(f) => f.trunc() as i64,
                    _ => 0,
                };
                let sign = if i >= 0 && flags.contains('+') {
                    "+"
                } else if i >= 0 && flags.contains(' ') {
                    " "
                } else {
                    ""
                };
                format!("{sign}{i}")
            }
            ('f' | 'e' | 'E', Some(n)) => {
                let f = match n {
                    Val::Int(i) => *i as f64,
                    Val::Float(f) => *f,
                    _ => 0.0,
                };
                let p = precision.unwrap_or(6);
                let sign = if f >= 0.0 && flags.contains('+') {
                    "+"
                } else {
                    ""
                };
                match conversion {
                    'f' => format!("{sign}{f:.p$}"),
                    'e' => format!("{sign}{f:.p$e}"),
                    _ => format!("{sign}{f:.p$E}"),
                }
            }
            ('x' | 'X' | 'o' | 'b', Some(Val::Int(i))) => match conversion {
                'x' => format!("{i:x}"),
                'X' => format!("{i:X}"),
                'o' => format!("{i:o}"),
                _ => format!("{i:b}"),
            },
            _ => {
                return error(
                    evaluator,
                    span,
                    "sprintf",
                    format!(
                        "`%{conversion}` cannot format {} `{}`",
                        value.type_name(),
                        value.to_display()
                    ),
                );
            }
        };
        let width: usize = width.parse().unwrap_or(0);
        let len = body.chars().count();
        if len >= width {
            out.push_str(&body);
        } else if flags.contains('-') {
            out.push_str(&body);
            out.push_str(&" ".repeat(width - len));
        } else if flags.contains('0') && conversion != 's' {
            let (sign, digits) = match body.strip_prefix(['-', '+']) {
                Some(digits) => (&body[..1], digits),
                None => ("", body.as_str()),
            };
            out.push_str(sign);
            out.push_str(&"0".repeat(width - len));
            out.push_str(digits);
        } else {
            out.push_str(&" ".repeat(width - len));
            out.push_str(&body);
        }
        if out.len() > crate::eval::MAX_STRING_BYTES {
            evaluator.value_limit(
                span,
                "`sprintf` builds a string of more than 16 MiB, the limit".into(),
            );
            return Val::Undef;
        }
    }
    Val::Str(out)
}

/// Puppet's `versioncmp`: the versions split at `.` and `-` (and where digits meet
/// letters), numbers compared as numbers, the rest as text; `1.10` is after `1.9`.
pub(crate) fn versioncmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(version: &str) -> Vec<String> {
        let mut parts = Vec::new();
        let mut current = String::new();
        for c in version.chars() {
            if c == '.' || c == '-' {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                parts.push(c.to_string());
                continue;
            }
            if let Some(last) = current.chars().last()
                && last.is_ascii_digit() != c.is_ascii_digit()
            {
                parts.push(std::mem::take(&mut current));
            }
            current.push(c);
        }
        if !current.is_empty() {
            parts.push(current);
        }
        parts
    }
    let (left, right) = (parts(a), parts(b));
    for (x, y) in left.iter().zip(&right) {
        if x == y {
            continue;
        }
        let order = match (x.parse::<u128>(), y.parse::<u128>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            // A separator sorts before anything else; `-` before `.`.
            _ if x == "-" => std::cmp::Ordering::Less,
            _ if y == "-" => std::cmp::Ordering::Greater,
            _ if x == "." => std::cmp::Ordering::Less,
            _ if y == "." => std::cmp::Ordering::Greater,
            _ => x.cmp(y),
        };
        if order.is_ne() {
            return order;
        }
    }
    left.len().cmp(&right.len())
}

pub(super) const BASE64: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for (idx, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if idx <= chunk.len() {
                out.push(char::from(BASE64[(n >> shift) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut buffer = 0u32;
    let mut bits = 0;
    for c in text.bytes().filter(|c| !c.is_ascii_whitespace()) {
        if c == b'=' {
            break;
        }
        let value = BASE64.iter().position(|b| *b == c)? as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}
