//! The methods of Ruby's core classes that templates call, with Ruby's results, and
//! Puppet's `scope`. A method outside this list is an error naming it and its class.

use super::Error;
use super::parse::Block;
use super::run::{RVal, Run, number};
use std::cmp::Ordering;

/// Calls `name` on `receiver` (none: a function of the template).
pub(super) fn call(
    run: &mut Run<'_>,
    receiver: Option<RVal>,
    name: &str,
    args: Vec<RVal>,
    block: Option<&Block>,
    line: u32,
) -> Result<RVal, Error> {
    let Some(receiver) = receiver else {
        if let Some(result) = run.call_def(name, &args, line) {
            return result;
        }
        return function(run, name, args, line);
    };
    let no_method = |receiver: &RVal| {
        Error::new(
            format!(
                "undefined method `{name}' for {} (Ruby the templates here may not use, or a \
                 value of another class than the template expects)",
                receiver.class()
            ),
            line,
        )
    };
    // Methods of every object.
    match (name, args.as_slice()) {
        ("nil?", []) => return Ok(RVal::Bool(receiver == RVal::Nil)),
        ("to_s", []) => return Ok(RVal::Str(receiver.to_s())),
        ("inspect", []) => return Ok(RVal::Str(receiver.inspect())),
        ("is_a?" | "kind_of?", [RVal::Class(class)]) => {
            return Ok(RVal::Bool(receiver.is_a(class)));
        }
        ("instance_of?", [RVal::Class(class)]) => return Ok(RVal::Bool(receiver.class() == class)),
        ("class", []) => return Ok(RVal::Class(receiver.class().to_owned())),
        ("==" | "eql?" | "equal?", [other]) => return Ok(RVal::Bool(receiver.equals(other))),
        ("!=", [other]) => return Ok(RVal::Bool(!receiver.equals(other))),
        ("frozen?", []) => return Ok(RVal::Bool(true)),
        ("dup" | "clone" | "freeze" | "itself", []) => return Ok(receiver),
        ("respond_to?", [RVal::Sym(method) | RVal::Str(method)]) => {
            return Ok(RVal::Bool(responds(&receiver, method)));
        }
        ("then" | "yield_self", []) if block.is_some() => {
            return run.call_block(block.expect("just seen"), vec![receiver], line);
        }
        _ => {}
    }
    match receiver {
        RVal::Scope => scope(run, name, args, line),
        RVal::Nil => match (name, args.as_slice()) {
            ("to_a", []) => Ok(RVal::Array(Vec::new())),
            ("to_i", []) => Ok(RVal::Int(0)),
            ("to_f", []) => Ok(RVal::Float(0.0)),
            ("&", [_]) => Ok(RVal::Bool(false)),
            _ => Err(no_method(&RVal::Nil)),
        },
        RVal::Bool(b) => match (name, args.as_slice()) {
            ("&", [other]) => Ok(RVal::Bool(b && other.truthy())),
            ("|", [other]) => Ok(RVal::Bool(b || other.truthy())),
            ("!", []) => Ok(RVal::Bool(!b)),
            _ => Err(no_method(&RVal::Bool(b))),
        },
        RVal::Int(_) | RVal::Float(_) => numeric(run, receiver, name, args, block, line),
        RVal::Str(text) => string(run, text, name, args, block, line),
        RVal::Sym(symbol) => match (name, args.as_slice()) {
            ("to_sym", []) => Ok(RVal::Sym(symbol)),
            ("to_proc", []) => Err(no_method(&RVal::Sym(symbol))),
            ("length" | "size", []) => Ok(RVal::Int(symbol.chars().count() as i64)),
            _ => string(run, symbol, name, args, block, line).map(|value| match value {
                RVal::Str(text) if matches!(name, "upcase" | "downcase" | "capitalize") => {
                    RVal::Sym(text)
                }
                other => other,
            }),
        },
        RVal::Array(items) => {
            super::methods_collections::array(run, items, name, args, block, line)
        }
        RVal::Hash(entries) => {
            super::methods_collections::hash(run, entries, name, args, block, line)
        }
        RVal::Range(from, to) => {
            let items = (from..=to).map(RVal::Int).collect::<Vec<_>>();
            if items.len() > 1_000_000 {
                return Err(Error::new("a range of more than 1,000,000 integers", line));
            }
            match name {
                "first" if args.is_empty() => Ok(RVal::Int(from)),
                "last" if args.is_empty() => Ok(RVal::Int(to)),
                "include?" | "member?" | "cover?" => Ok(RVal::Bool(
                    matches!(args.first(), Some(RVal::Int(i)) if from <= *i && *i <= to),
                )),
                _ => super::methods_collections::array(run, items, name, args, block, line),
            }
        }
        RVal::Class(class) => match (class.as_str(), name, args.as_slice()) {
            ("Regexp", "escape" | "quote", [RVal::Str(text)]) => Ok(RVal::Str(regexp_escape(text))),
            ("Regexp", "new", [RVal::Str(text)]) => Ok(RVal::Regex(text.clone())),
            ("Array", "new", []) => Ok(RVal::Array(Vec::new())),
            ("Hash", "new", []) => Ok(RVal::Hash(Vec::new())),
            ("String", "new", []) => Ok(RVal::Str(String::new())),
            _ => Err(Error::new(
                format!("undefined method `{name}' for {class}"),
                line,
            )),
        },
        RVal::Regex(pattern) => match (name, args.as_slice()) {
            ("match" | "=~" | "match?", [RVal::Str(text)]) => {
                let matched = regex(&pattern, line)?.is_match(text);
                Ok(if name == "match?" {
                    RVal::Bool(matched)
                } else if matched {
                    RVal::Bool(true)
                } else {
                    RVal::Nil
                })
            }
            ("source", []) => Ok(RVal::Str(pattern)),
            _ => Err(no_method(&RVal::Regex(pattern))),
        },
        other => Err(no_method(&other)),
    }
}

/// Ruby's `Regexp.escape`.
fn regexp_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '[' | ']' | '{' | '}' | '(' | ')' | '|' | '-' | '*' | '.' | '\\' | '?' | '+' | '^'
            | '$' | '#' => {
                out.push('\\');
                out.push(c);
            }
            ' ' => out.push_str("\\ "),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c => out.push(c),
        }
    }
    out
}

fn responds(value: &RVal, method: &str) -> bool {
    let common = ["nil?", "to_s", "inspect", "is_a?", "class"];
    if common.contains(&method) {
        return true;
    }
    match value {
        RVal::Str(_) => [
            "upcase",
            "downcase",
            "strip",
            "split",
            "empty?",
            "length",
            "size",
            "include?",
            "gsub",
            "sub",
            "to_i",
            "each_line",
            "lines",
        ]
        .contains(&method),
        RVal::Array(_) => [
            "each", "map", "join", "sort", "empty?", "length", "size", "include?", "first", "last",
            "flatten", "compact", "uniq",
        ]
        .contains(&method),
        RVal::Hash(_) => [
            "each",
            "each_pair",
            "keys",
            "values",
            "empty?",
            "length",
            "size",
            "include?",
            "has_key?",
            "key?",
            "sort",
            "map",
            "fetch",
        ]
        .contains(&method),
        RVal::Int(_) | RVal::Float(_) => {
            ["to_i", "to_f", "round", "abs", "times"].contains(&method)
        }
        _ => false,
    }
}

/// A function of the template, no receiver: Ruby's `Array()`, `Integer()`, `String()`,
/// `format`.
fn function(run: &mut Run<'_>, name: &str, args: Vec<RVal>, line: u32) -> Result<RVal, Error> {
    match (name, args.as_slice()) {
        ("Array", [value]) => Ok(match value {
            RVal::Nil => RVal::Array(Vec::new()),
            RVal::Array(_) => value.clone(),
            RVal::Hash(entries) => RVal::Array(
                entries
                    .iter()
                    .map(|(k, v)| RVal::Array(vec![k.clone(), v.clone()]))
                    .collect(),
            ),
            other => RVal::Array(vec![other.clone()]),
        }),
        ("String", [value]) => Ok(RVal::Str(value.to_s())),
        ("Integer", [value]) => match value {
            RVal::Int(_) => Ok(value.clone()),
            RVal::Float(f) => Ok(RVal::Int(f.trunc() as i64)),
            RVal::Str(text) => text
                .trim()
                .replace('_', "")
                .parse::<i64>()
                .map(RVal::Int)
                .map_err(|_| {
                    Error::new(
                        format!("invalid value for Integer(): {}", value.inspect()),
                        line,
                    )
                }),
            other => Err(Error::new(
                format!("can't convert {} into Integer", other.class()),
                line,
            )),
        },
        ("format" | "sprintf", [RVal::Str(template), rest @ ..]) => {
            Ok(RVal::Str(format_string(template, rest, line)?))
        }
        ("p" | "puts" | "print" | "pp", _) => Err(Error::new(
            format!(
                "`{name}` writes to the standard output of Ruby, not the template: use `<%= %>`"
            ),
            line,
        )),
        _ => {
            let _ = run;
            Err(Error::new(
                format!(
                    "undefined local variable or method `{name}' (a variable of the manifest is `@{name}`)"
                ),
                line,
            ))
        }
    }
}

/// Puppet's `scope`: variables and functions.
fn scope(run: &mut Run<'_>, name: &str, args: Vec<RVal>, line: u32) -> Result<RVal, Error> {
    let variable = |run: &mut Run<'_>, wanted: &RVal| -> Result<RVal, Error> {
        let RVal::Str(wanted) = wanted else {
            return Err(Error::new(
                "a variable is named by a string: `scope['name']`",
                line,
            ));
        };
        Ok(run
            .host
            .variable(wanted.trim_start_matches("::"))
            .unwrap_or(RVal::Nil))
    };
    if let Some(function) = name.strip_prefix("function_") {
        // `scope.function_NAME([args])`: the arguments in one array, as Puppet 3 had them.
        let args = match args.as_slice() {
            [] => Vec::new(),
            [RVal::Array(items)] => items.clone(),
            _ => {
                return Err(Error::new(
                    format!(
                        "`scope.function_{function}` takes its arguments in one array: `scope.function_{function}(['a', 'b'])`"
                    ),
                    line,
                ));
            }
        };
        return run
            .host
            .call(function, args)
            .map_err(|message| Error::new(message, line));
    }
    match (name, args.as_slice()) {
        ("lookupvar" | "[]", [wanted]) => variable(run, wanted),
        ("include?" | "exist?" | "has_variable?", [RVal::Str(wanted)]) => Ok(RVal::Bool(
            run.host.variable(wanted.trim_start_matches("::")).is_some(),
        )),
        ("call_function", [RVal::Str(function), rest @ ..]) => {
            let args = match rest {
                [RVal::Array(items)] => items.clone(),
                other => other.to_vec(),
            };
            run.host
                .call(function, args)
                .map_err(|message| Error::new(message, line))
        }
        _ => Err(Error::new(
            format!(
                "`scope.{name}` is not available to templates here (they may read variables with `scope['name']` or `scope.lookupvar`, and call functions with `scope.call_function`)"
            ),
            line,
        )),
    }
}

fn numeric(
    run: &mut Run<'_>,
    receiver: RVal,
    name: &str,
    args: Vec<RVal>,
    block: Option<&Block>,
    line: u32,
) -> Result<RVal, Error> {
    let value = number(&receiver).unwrap_or(0.0);
    match (name, args.as_slice(), &receiver) {
        ("floor", [], RVal::Float(f)) => Ok(RVal::Int(f.floor() as i64)),
        ("to_i" | "to_int" | "truncate", [], RVal::Float(f)) => Ok(RVal::Int(f.trunc() as i64)),
        ("to_i" | "to_int" | "floor" | "ceil" | "round" | "truncate", [], RVal::Int(_)) => {
            Ok(receiver)
        }
        ("ceil", [], _) => Ok(RVal::Int(value.ceil() as i64)),
        ("round", [], _) => Ok(RVal::Int(value.round() as i64)),
        ("to_f", [], _) => Ok(RVal::Float(value)),
        ("abs", [], RVal::Int(i)) => i
            .checked_abs()
            .map(RVal::Int)
            .ok_or_else(|| Error::new("integer overflow", line)),
        ("abs", [], _) => Ok(RVal::Float(value.abs())),
        ("zero?", [], _) => Ok(RVal::Bool(value == 0.0)),
        ("positive?", [], _) => Ok(RVal::Bool(value > 0.0)),
        ("negative?", [], _) => Ok(RVal::Bool(value < 0.0)),
        ("even?", [], RVal::Int(i)) => Ok(RVal::Bool(i % 2 == 0)),
        ("odd?", [], RVal::Int(i)) => Ok(RVal::Bool(i % 2 != 0)),
        ("succ" | "next", [], RVal::Int(i)) => i
            .checked_add(1)
            .map(RVal::Int)
            .ok_or_else(|| Error::new("integer overflow", line)),
        ("times", [], RVal::Int(count)) => {
            let Some(block) = block else {
                return Err(Error::new("`times` takes a block", line));
            };
            for i in 0..(*count).min(1_000_000) {
                run.call_block(block, vec![RVal::Int(i)], line)?;
            }
            Ok(receiver)
        }
        (op, [other], _)
            if ["+", "-", "*", "/", "%", "<", ">", "<=", ">=", "<=>", "=="].contains(&op) =>
        {
            operator(run, op, receiver.clone(), other.clone(), line)
        }
        _ => Err(Error::new(
            format!("undefined method `{name}' for {}", receiver.class()),
            line,
        )),
    }
}

fn string(
    run: &mut Run<'_>,
    text: String,
    name: &str,
    args: Vec<RVal>,
    block: Option<&Block>,
    line: u32,
) -> Result<RVal, Error> {
    let str_arg = |idx: usize| match args.get(idx) {
        Some(RVal::Str(text)) => Ok(text.clone()),
        Some(other) => Err(Error::new(
            format!("no implicit conversion of {} into String", other.class()),
            line,
        )),
        None => Err(Error::new(format!("`{name}` takes an argument"), line)),
    };
    Ok(match (name, args.as_slice()) {
        ("upcase", []) => RVal::Str(text.to_uppercase()),
        ("downcase", []) => RVal::Str(text.to_lowercase()),
        ("capitalize", []) => {
            let mut chars = text.chars();
            RVal::Str(match chars.next() {
                Some(first) => first
                    .to_uppercase()
                    .chain(chars.as_str().to_lowercase().chars())
                    .collect(),
                None => String::new(),
            })
        }
        ("swapcase", []) => RVal::Str(
            text.chars()
                .map(|c| {
                    if c.is_uppercase() {
                        c.to_lowercase().next().unwrap_or(c)
                    } else {
                        c.to_uppercase().next().unwrap_or(c)
                    }
                })
                .collect(),
        ),
        ("strip", []) => RVal::Str(
            text.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\0')
                .to_owned(),
        ),
        ("lstrip", []) => RVal::Str(
            text.trim_start_matches(|c: char| c.is_ascii_whitespace())
                .to_owned(),
        ),
        ("rstrip", []) => RVal::Str(
            text.trim_end_matches(|c: char| c.is_ascii_whitespace() || c == '\0')
                .to_owned(),
        ),
        ("chomp", []) => RVal::Str(
            text.strip_suffix("\r\n")
                .or_else(|| text.strip_suffix('\n'))
                .or_else(|| text.strip_suffix('\r'))
                .unwrap_or(&text)
                .to_owned(),
        ),
        ("chomp", [RVal::Str(suffix)]) => RVal::Str(
            text.strip_suffix(suffix.as_str())
                .unwrap_or(&text)
                .to_owned(),
        ),
        ("chop", []) => {
            let mut chars = text.chars();
            chars.next_back();
            RVal::Str(chars.as_str().to_owned())
        }
        ("length" | "size", []) => RVal::Int(text.chars().count() as i64),
        ("bytesize", []) => RVal::Int(text.len() as i64),
        ("empty?", []) => RVal::Bool(text.is_empty()),
        ("to_s" | "to_str", []) => RVal::Str(text),
        ("to_sym" | "intern", []) => RVal::Sym(text),
        ("to_i", []) => RVal::Int(leading_integer(&text)),
        ("to_f", []) => RVal::Float(leading_float(&text)),
        ("reverse", []) => RVal::Str(text.chars().rev().collect()),
        ("chars", []) => RVal::Array(text.chars().map(|c| RVal::Str(c.to_string())).collect()),
        ("lines" | "each_line", []) if block.is_none() || name == "lines" => RVal::Array(
            text.split_inclusive('\n')
                .map(|l| RVal::Str(l.to_owned()))
                .collect(),
        ),
        ("each_line", []) => {
            let block = block.expect("checked above");
            for piece in text.split_inclusive('\n') {
                run.call_block(block, vec![RVal::Str(piece.to_owned())], line)?;
            }
            RVal::Str(text)
        }
        ("include?", [_]) => RVal::Bool(text.contains(str_arg(0)?.as_str())),
        ("start_with?", _) => RVal::Bool(
            args.iter()
                .any(|prefix| matches!(prefix, RVal::Str(p) if text.starts_with(p.as_str()))),
        ),
        ("end_with?", _) => RVal::Bool(
            args.iter()
                .any(|suffix| matches!(suffix, RVal::Str(s) if text.ends_with(s.as_str()))),
        ),
        ("index", [_]) => text
            .find(str_arg(0)?.as_str())
            .map_or(RVal::Nil, |at| RVal::Int(text[..at].chars().count() as i64)),
        ("count", [_]) => {
            let set = str_arg(0)?;
            RVal::Int(text.chars().filter(|c| set.contains(*c)).count() as i64)
        }
        ("split", []) => RVal::Array(
            text.split_ascii_whitespace()
                .map(|w| RVal::Str(w.to_owned()))
                .collect(),
        ),
        ("split", [RVal::Str(sep)]) if sep == " " => RVal::Array(
            text.split_ascii_whitespace()
                .map(|w| RVal::Str(w.to_owned()))
                .collect(),
        ),
        ("split", [RVal::Str(sep)]) => {
            let mut pieces: Vec<RVal> = if sep.is_empty() {
                text.chars().map(|c| RVal::Str(c.to_string())).collect()
            } else {
                text.split(sep.as_str())
                    .map(|w| RVal::Str(w.to_owned()))
                    .collect()
            };
            while pieces.last() == Some(&RVal::Str(String::new())) {
                pieces.pop();
            }
            RVal::Array(pieces)
        }
        ("split", [RVal::Regex(pattern)]) => {
            let mut pieces: Vec<RVal> = regex(pattern, line)?
                .split(&text)
                .map(|w| RVal::Str(w.to_owned()))
                .collect();
            while pieces.last() == Some(&RVal::Str(String::new())) {
                pieces.pop();
            }
            RVal::Array(pieces)
        }
        ("gsub" | "sub", [pattern, RVal::Str(replacement)]) => {
            let pattern = match pattern {
                RVal::Regex(pattern) => pattern.clone(),
                RVal::Str(literal) => regex_escape(literal),
                other => {
                    return Err(Error::new(
                        format!("wrong argument type {} (expected Regexp)", other.class()),
                        line,
                    ));
                }
            };
            let regex = regex(&pattern, line)?;
            let replacement = ruby_replacement(replacement);
            RVal::Str(if name == "gsub" {
                regex.replace_all(&text, replacement.as_str()).into_owned()
            } else {
                regex.replace(&text, replacement.as_str()).into_owned()
            })
        }
        ("tr", [RVal::Str(from), RVal::Str(to)]) => {
            let from: Vec<char> = from.chars().collect();
            let to: Vec<char> = to.chars().collect();
            RVal::Str(
                text.chars()
                    .map(|c| match from.iter().position(|f| *f == c) {
                        Some(at) => to.get(at).or(to.last()).copied().unwrap_or(c),
                        None => c,
                    })
                    .collect(),
            )
        }
        ("squeeze", []) => {
            let mut out = String::new();
            for c in text.chars() {
                if !out.ends_with(c) {
                    out.push(c);
                }
            }
            RVal::Str(out)
        }
        ("center" | "ljust" | "rjust", [RVal::Int(width), rest @ ..]) => {
            let pad = match rest {
                [RVal::Str(pad)] if !pad.is_empty() => pad.clone(),
                _ => " ".to_owned(),
            };
            RVal::Str(justify(
                &text,
                name,
                usize::try_from(*width).unwrap_or(0).min(1 << 20),
                &pad,
            ))
        }
        ("match" | "=~", [RVal::Regex(pattern) | RVal::Str(pattern)]) => {
            let regex = regex(pattern, line)?;
            match regex.find(&text) {
                Some(found) if name == "=~" => {
                    RVal::Int(text[..found.start()].chars().count() as i64)
                }
                Some(found) => RVal::Str(found.as_str().to_owned()),
                None => RVal::Nil,
            }
        }
        ("match?", [RVal::Regex(pattern) | RVal::Str(pattern)]) => {
            RVal::Bool(regex(pattern, line)?.is_match(&text))
        }
        ("%", [value]) => RVal::Str(format_string(
            &text,
            &match value {
                RVal::Array(items) => items.clone(),
                other => vec![other.clone()],
            },
            line,
        )?),
        ("[]", [RVal::Int(index)]) => {
            let chars: Vec<char> = text.chars().collect();
            let len = chars.len() as i64;
            let at = if *index < 0 { index + len } else { *index };
            if (0..len).contains(&at) {
                RVal::Str(chars[at as usize].to_string())
            } else {
                RVal::Nil
            }
        }
        ("[]", [RVal::Int(start), RVal::Int(count)]) => {
            let chars: Vec<char> = text.chars().collect();
            let len = chars.len() as i64;
            let start = if *start < 0 { start + len } else { *start };
            if start < 0 || start > len || *count < 0 {
                RVal::Nil
            } else {
                let end = start.saturating_add(*count).min(len);
                RVal::Str(chars[start as usize..end as usize].iter().collect())
            }
        }
        ("[]", [RVal::Str(part)]) => {
            if text.contains(part.as_str()) {
                RVal::Str(part.clone())
            } else {
                RVal::Nil
            }
        }
        (op, [other]) if ["+", "*", "<", ">", "<=", ">=", "<=>", "==", "=~"].contains(&op) => {
            return operator(run, op, RVal::Str(text), other.clone(), line);
        }
        _ => {
            return Err(Error::new(
                format!("undefined method `{name}' for String"),
                line,
            ));
        }
    })
}

fn justify(text: &str, how: &str, width: usize, pad: &str) -> String {
    let len = text.chars().count();
    if len >= width {
        return text.to_owned();
    }
    let fill = |n: usize| pad.chars().cycle().take(n).collect::<String>();
    match how {
        "ljust" => format!("{text}{}", fill(width - len)),
        "rjust" => format!("{}{text}", fill(width - len)),
        _ => {
            let left = (width - len) / 2;
            format!("{}{text}{}", fill(left), fill(width - len - left))
        }
    }
}

pub(super) fn leading_integer(text: &str) -> i64 {
    let trimmed = text.trim_start();
    let mut end = 0;
    for (at, c) in trimmed.char_indices() {
        if c.is_ascii_digit() || (at == 0 && (c == '-' || c == '+')) || (c == '_' && at > 0) {
            end = at + c.len_utf8();
        } else {
            break;
        }
    }
    trimmed[..end].replace('_', "").parse().unwrap_or(0)
}

fn leading_float(text: &str) -> f64 {
    let trimmed = text.trim_start();
    let mut best = 0.0;
    for end in 1..=trimmed.len() {
        if !trimmed.is_char_boundary(end) {
            continue;
        }
        if let Ok(value) = trimmed[..end].parse::<f64>() {
            best = value;
        }
    }
    best
}

pub(super) fn regex(pattern: &str, line: u32) -> Result<regex::Regex, Error> {
    // Ruby's `\A`, `\z`, `\Z` and `\h`, in Rust's syntax.
    let pattern = pattern.replace("\\Z", "\\z").replace("\\h", "[0-9a-fA-F]");
    regex::RegexBuilder::new(&pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|error| {
            Error::new(
                format!("a regular expression this interpreter cannot read: {error}"),
                line,
            )
        })
}

fn regex_escape(literal: &str) -> String {
    regex::escape(literal)
}

/// Ruby's `\1` and `\0` in a replacement, as the regex crate's `${1}`.
fn ruby_replacement(replacement: &str) -> String {
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek() {
                Some(d) if d.is_ascii_digit() => {
                    out.push_str(&format!("${{{d}}}"));
                    chars.next();
                }
                Some('\\') => {
                    out.push('\\');
                    chars.next();
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Ruby's `format`: `%s`, `%d`, `%f` with flags, width and precision, `%%`.
pub(super) fn format_string(template: &str, args: &[RVal], line: u32) -> Result<String, Error> {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        while let Some(&next) = chars.peek() {
            spec.push(next);
            chars.next();
            if next.is_ascii_alphabetic() || next == '%' {
                break;
            }
        }
        let conversion = spec.pop().unwrap_or('%');
        if conversion == '%' {
            out.push('%');
            continue;
        }
        let mut left = spec.contains('-');
        let zero = spec.starts_with('0') || spec.contains("-0");
        let body = spec.trim_start_matches(['-', '0', '+', ' ']);
        let (width, precision) = match body.split_once('.') {
            Some((w, p)) => (w.parse::<i64>().unwrap_or(0), p.parse::<usize>().ok()),
            None => (body.parse::<i64>().unwrap_or(0), None),
        };
        // `%*s`: the width is the next argument (a negative one pads on the right).
        let width = if body.starts_with('*') {
            match args.next() {
                Some(RVal::Int(width)) => *width,
                _ => return Err(Error::new("`*` in a format takes an integer width", line)),
            }
        } else {
            width
        };
        if width < 0 {
            left = true;
        }
        let width = usize::try_from(width.unsigned_abs())
            .unwrap_or(0)
            .min(1 << 20);
        let value = args.next().cloned().unwrap_or(RVal::Nil);
        let text = match conversion {
            's' => {
                let text = value.to_s();
                match precision {
                    Some(p) => text.chars().take(p).collect(),
                    None => text,
                }
            }
            'p' => value.inspect(),
            'd' | 'i' => match value {
                RVal::Int(i) => i.to_string(),
                RVal::Float(f) => (f.floor() as i64).to_string(),
                RVal::Str(text) => leading_integer(&text).to_string(),
                other => {
                    return Err(Error::new(
                        format!("can't convert {} into Integer", other.class()),
                        line,
                    ));
                }
            },
            'f' => format!(
                "{:.*}",
                precision.unwrap_or(6),
                number(&value).unwrap_or(0.0)
            ),
            'x' => format!(
                "{:x}",
                match value {
                    RVal::Int(i) => i,
                    _ => 0,
                }
            ),
            other => {
                return Err(Error::new(
                    format!("`%{other}` in a format is not supported"),
                    line,
                ));
            }
        };
        let len = text.chars().count();
        if len < width {
            let fill = width - len;
            if left {
                out.push_str(&text);
                out.push_str(&" ".repeat(fill));
            } else if zero && conversion != 's' {
                out.push_str(&"0".repeat(fill));
                out.push_str(&text);
            } else {
                out.push_str(&" ".repeat(fill));
                out.push_str(&text);
            }
        } else {
            out.push_str(&text);
        }
    }
    Ok(out)
}

/// A binary operator, as Ruby's classes define it.
pub(super) fn operator(
    run: &mut Run<'_>,
    op: &str,
    left: RVal,
    right: RVal,
    line: u32,
) -> Result<RVal, Error> {
    let _ = &run;
    let fail = |left: &RVal, right: &RVal| {
        Error::new(
            format!(
                "`{op}` of {} and {} is undefined in Ruby",
                left.class(),
                right.class()
            ),
            line,
        )
    };
    Ok(match (op, &left, &right) {
        ("==", _, _) => RVal::Bool(left.equals(&right)),
        ("===", RVal::Class(class), value) => RVal::Bool(value.is_a(class)),
        ("===", _, _) => RVal::Bool(left.equals(&right)),
        ("=~", RVal::Str(text), RVal::Regex(pattern))
        | ("=~", RVal::Regex(pattern), RVal::Str(text)) => match regex(pattern, line)?.find(text) {
            Some(found) => RVal::Int(text[..found.start()].chars().count() as i64),
            None => RVal::Nil,
        },
        ("=~", RVal::Nil, _) => RVal::Nil,
        ("<=>", _, _) => match left.compare(&right) {
            Some(Ordering::Less) => RVal::Int(-1),
            Some(Ordering::Equal) => RVal::Int(0),
            Some(Ordering::Greater) => RVal::Int(1),
            None => RVal::Nil,
        },
        ("<" | ">" | "<=" | ">=", _, _) => {
            let ordering = match (&left, &right) {
                (RVal::Int(_) | RVal::Float(_), RVal::Int(_) | RVal::Float(_))
                | (RVal::Str(_), RVal::Str(_)) => left.compare(&right),
                _ => None,
            }
            .ok_or_else(|| {
                Error::new(
                    format!(
                        "comparison of {} with {} failed",
                        left.class(),
                        right.inspect()
                    ),
                    line,
                )
            })?;
            RVal::Bool(match op {
                "<" => ordering == Ordering::Less,
                ">" => ordering == Ordering::Greater,
                "<=" => ordering != Ordering::Greater,
                _ => ordering != Ordering::Less,
            })
        }
        ("+", RVal::Str(a), RVal::Str(b)) => {
            if a.len() + b.len() > super::MAX_OUTPUT {
                return Err(Error::new("a string longer than 16 MiB (the limit)", line));
            }
            RVal::Str(format!("{a}{b}"))
        }
        ("+", RVal::Str(_), other) => {
            return Err(Error::new(
                format!("no implicit conversion of {} into String", other.class()),
                line,
            ));
        }
        ("*", RVal::Str(a), RVal::Int(n)) => {
            let n = usize::try_from(*n).map_err(|_| Error::new("negative argument", line))?;
            if a.len().saturating_mul(n) > super::MAX_OUTPUT {
                return Err(Error::new("a string longer than 16 MiB (the limit)", line));
            }
            RVal::Str(a.repeat(n))
        }
        ("%", RVal::Str(template), value) => RVal::Str(format_string(
            template,
            &match value {
                RVal::Array(items) => items.clone(),
                other => vec![other.clone()],
            },
            line,
        )?),
        ("<<", RVal::Str(a), value) => RVal::Str(format!(
            "{a}{}",
            match value {
                RVal::Int(code) => char::from_u32(u32::try_from(*code).unwrap_or(0))
                    .unwrap_or('\0')
                    .to_string(),
                other => other.to_s(),
            }
        )),
        ("+", RVal::Array(a), RVal::Array(b)) => RVal::Array(a.iter().chain(b).cloned().collect()),
        ("-", RVal::Array(a), RVal::Array(b)) => RVal::Array(
            a.iter()
                .filter(|x| !b.iter().any(|y| y.eql(x)))
                .cloned()
                .collect(),
        ),
        ("&", RVal::Array(a), RVal::Array(b)) => {
            let mut out: Vec<RVal> = Vec::new();
            for x in a {
                if b.iter().any(|y| y.eql(x)) && !out.iter().any(|y| y.eql(x)) {
                    out.push(x.clone());
                }
            }
            RVal::Array(out)
        }
        ("|", RVal::Array(a), RVal::Array(b)) => {
            let mut out: Vec<RVal> = Vec::new();
            for x in a.iter().chain(b) {
                if !out.iter().any(|y| y.eql(x)) {
                    out.push(x.clone());
                }
            }
            RVal::Array(out)
        }
        ("<<", RVal::Array(a), value) => {
            let mut a = a.clone();
            a.push(value.clone());
            RVal::Array(a)
        }
        ("*", RVal::Array(a), RVal::Str(sep)) => {
            RVal::Str(a.iter().map(RVal::to_s).collect::<Vec<_>>().join(sep))
        }
        (op @ ("+" | "-" | "*" | "/" | "%"), RVal::Int(a), RVal::Int(b)) => {
            let (a, b) = (*a, *b);
            if matches!(op, "/" | "%") && b == 0 {
                return Err(Error::new("divided by 0", line));
            }
            RVal::Int(
                match op {
                    "+" => a.checked_add(b),
                    "-" => a.checked_sub(b),
                    "*" => a.checked_mul(b),
                    "/" => floor_div(a, b),
                    _ => floor_div(a, b)
                        .and_then(|q| b.checked_mul(q))
                        .and_then(|m| a.checked_sub(m)),
                }
                .ok_or_else(|| Error::new("integer overflow", line))?,
            )
        }
        (
            op @ ("+" | "-" | "*" | "/" | "%"),
            RVal::Int(_) | RVal::Float(_),
            RVal::Int(_) | RVal::Float(_),
        ) => {
            let (a, b) = (number(&left).unwrap_or(0.0), number(&right).unwrap_or(0.0));
            RVal::Float(match op {
                "+" => a + b,
                "-" => a - b,
                "*" => a * b,
                "/" => a / b,
                _ => a - b * (a / b).floor(),
            })
        }
        ("+", RVal::Hash(_), _) | (_, RVal::Nil, _) => return Err(fail(&left, &right)),
        _ => return Err(fail(&left, &right)),
    })
}

/// Ruby's integer division, which rounds down; `None` where it overflows.
fn floor_div(a: i64, b: i64) -> Option<i64> {
    let quotient = a.checked_div(b)?;
    let remainder = a.checked_rem(b)?;
    Some(if remainder != 0 && ((a < 0) != (b < 0)) {
        quotient - 1
    } else {
        quotient
    })
}
