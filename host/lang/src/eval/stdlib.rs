//! Puppet's core functions beyond the catalog and iteration ones (`regsubst`, `sprintf`,
//! `versioncmp`, `merge`, `dig`, `then`, conversions such as `Integer('0x10')`...), and
//! the most used functions of puppetlabs-stdlib (`pick`, `str2bool`, `ensure_packages`,
//! the legacy `is_*` and `validate_*`, which warn that they are deprecated).

use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::{Severity, Span};
use crate::eval::Evaluator;
use crate::eval::value::{Val, flatten_into, numeric_string};
use crate::syntax::Lambda;

mod core;
mod more;
mod text;

use text::*;
pub(crate) use text::{base64_decode, base64_encode};

/// The functions this module provides; `call` answers for these only.
pub(crate) const NAMES: &[&str] = &[
    "regsubst",
    "sprintf",
    "versioncmp",
    "merge",
    "abs",
    "min",
    "max",
    "dig",
    "then",
    "lest",
    "assert_type",
    "sha256",
    "base64",
    "step",
    "reverse_each",
    "new_integer",
    "new_float",
    "new_numeric",
    "new_string",
    "new_boolean",
    "new_array",
    "new_hash",
    "new_binary",
    "new_semver",
    "new_timespan",
    "new_timestamp",
    "pick",
    "pick_default",
    "str2bool",
    "bool2str",
    "concat",
    "delete",
    "has_key",
    "member",
    "ensure_resource",
    "ensure_resources",
    "ensure_packages",
    "is_string",
    "is_array",
    "is_hash",
    "is_integer",
    "is_numeric",
    "is_float",
    "is_bool",
    "is_absolute_path",
    "validate_string",
    "validate_array",
    "validate_hash",
    "validate_bool",
    "validate_integer",
    "validate_absolute_path",
    "validate_re",
];

/// Whether this module (or its `core` part) has the function `name`.
pub(crate) fn has(name: &str) -> bool {
    NAMES.contains(&name) || core::CORE.contains(&name) || more::MORE.contains(&name)
}

/// Every function this module has.
pub(crate) fn names() -> impl Iterator<Item = &'static &'static str> {
    NAMES.iter().chain(core::CORE).chain(more::MORE)
}

/// Whether a function of [`NAMES`] takes a lambda: the conversions (`Integer($x) |$i|
/// { ... }`), `then`, `lest`, `step` and `reverse_each`.
pub(crate) fn takes_lambda(name: &str) -> bool {
    name.starts_with("new_")
        || matches!(
            name,
            "then"
                | "lest"
                | "step"
                | "reverse_each"
                | "get"
                | "index"
                | "call"
                | "convert_to"
                | "tree_each"
                | "min"
                | "max"
        )
}

fn error(evaluator: &mut Evaluator<'_>, span: Span, name: &str, message: String) -> Val {
    evaluator
        .report(
            Severity::Error,
            DiagnosticCode::BadArgument,
            span,
            format!("`{name}`: {message}"),
        )
        .help = Some(format!("see `{name}` in docs/language.md, Functions"));
    Val::Undef
}

fn deprecated(evaluator: &mut Evaluator<'_>, span: Span, name: &str, instead: &str) {
    evaluator
        .report(
            Severity::Warning,
            DiagnosticCode::Deprecated,
            span,
            format!("`{name}()` is deprecated (puppetlabs-stdlib removed it)"),
        )
        .help = Some(format!("write {instead}"));
}

/// Calls `name` if this module has it.
pub(crate) fn call(
    evaluator: &mut Evaluator<'_>,
    name: &str,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Option<Val> {
    if !has(name) {
        return None;
    }
    if core::CORE.contains(&name) {
        return Some(core::call(evaluator, name, args, lambda, span));
    }
    if more::MORE.contains(&name) {
        return Some(more::call(evaluator, name, args, lambda, span));
    }
    let value = match name {
        "regsubst" => regsubst(evaluator, args, span),
        "sprintf" => sprintf(evaluator, args, span),
        "versioncmp" => match args.as_slice() {
            [Val::Str(a), Val::Str(b)] => Val::Int(match versioncmp(a, b) {
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
                std::cmp::Ordering::Greater => 1,
            }),
            _ => error(evaluator, span, name, "takes two version strings".into()),
        },
        "merge" => {
            let mut merged: Vec<(Val, Val)> = Vec::new();
            for arg in args {
                match arg {
                    Val::Hash(entries) => {
                        for (key, value) in entries {
                            match merged.iter_mut().find(|(existing, _)| *existing == key) {
                                Some(slot) => slot.1 = value,
                                None => merged.push((key, value)),
                            }
                        }
                    }
                    Val::Undef => {}
                    other => {
                        return Some(error(
                            evaluator,
                            span,
                            name,
                            format!("merges hashes, not {}", other.type_name()),
                        ));
                    }
                }
            }
            Val::Hash(merged)
        }
        "abs" => match number(args.first()) {
            Some(Val::Int(i)) => Val::Int(i.saturating_abs()),
            Some(Val::Float(f)) => Val::Float(f.abs()),
            _ => error(evaluator, span, name, "takes a number".into()),
        },
        "min" | "max" => {
            let mut flat = Vec::new();
            for arg in args {
                flatten_into(arg, &mut flat);
            }
            let mut best: Option<Val> = None;
            for item in flat {
                let item = number(Some(&item)).unwrap_or(item);
                best = Some(match best {
                    None => item,
                    Some(current) => {
                        // With a lambda, its answer orders them (`compare($a, $b)`).
                        let order = match lambda {
                            Some(lambda) => {
                                match evaluator
                                    .run_lambda(lambda, vec![item.clone(), current.clone()])
                                {
                                    Val::Int(order) => Ok(order.cmp(&0)),
                                    other => Err(format!(
                                        "the lambda orders two values with an integer, not {}",
                                        other.type_name()
                                    )),
                                }
                            }
                            None => item.compare(&current),
                        };
                        match order {
                            Ok(order) if (name == "min") == order.is_lt() && order.is_ne() => item,
                            Ok(_) => current,
                            Err(message) => return Some(error(evaluator, span, name, message)),
                        }
                    }
                });
            }
            best.unwrap_or(Val::Undef)
        }
        "dig" => {
            let mut args = args.into_iter();
            let mut value = args.next().unwrap_or(Val::Undef);
            for key in args {
                value = match (value, key) {
                    (Val::Hash(entries), key) => {
                        Val::hash_get(&entries, &key).cloned().unwrap_or(Val::Undef)
                    }
                    (Val::Array(items), Val::Int(index)) => crate::eval::element(&items, index)
                        .cloned()
                        .unwrap_or(Val::Undef),
                    (Val::Undef, _) => Val::Undef,
                    (other, _) => {
                        return Some(error(
                            evaluator,
                            span,
                            name,
                            format!("cannot dig into {}", other.type_name()),
                        ));
                    }
                };
            }
            value
        }
        "then" | "lest" => {
            let Some(lambda) = lambda else {
                return Some(error(evaluator, span, name, "takes a lambda".into()));
            };
            let value = args.into_iter().next().unwrap_or(Val::Undef);
            match (name, value) {
                ("then", Val::Undef) => Val::Undef,
                ("then", value) => evaluator.run_lambda(lambda, vec![value]),
                (_, Val::Undef) => evaluator.run_lambda(lambda, Vec::new()),
                (_, value) => value,
            }
        }
        "assert_type" => {
            let mut args = args.into_iter();
            let (Some(expected), Some(value)) = (args.next(), args.next()) else {
                return Some(error(
                    evaluator,
                    span,
                    name,
                    "takes a type and a value".into(),
                ));
            };
            match evaluator.value_matches_type(&value, &expected, span) {
                Some(true) => value,
                Some(false) => error(
                    evaluator,
                    span,
                    name,
                    format!(
                        "expected {}, got {} `{}`",
                        expected.to_display(),
                        value.type_name(),
                        value.to_display()
                    ),
                ),
                None => Val::Undef,
            }
        }
        "sha256" => match args.first() {
            Some(Val::Str(text)) => {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(text.as_bytes());
                Val::Str(digest.iter().map(|byte| format!("{byte:02x}")).collect())
            }
            _ => error(evaluator, span, name, "takes a string".into()),
        },
        "base64" => match args.as_slice() {
            [Val::Str(action), Val::Str(text)] if action == "encode" => {
                Val::Str(base64_encode(text.as_bytes()))
            }
            [Val::Str(action), Val::Str(text)] if action == "decode" => match base64_decode(text) {
                Some(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => Val::Str(text),
                    Err(_) => error(
                        evaluator,
                        span,
                        name,
                        "the decoded bytes are not UTF-8 text".into(),
                    ),
                },
                None => error(evaluator, span, name, "the text is not base64".into()),
            },
            _ => error(
                evaluator,
                span,
                name,
                "takes 'encode' or 'decode' and a string".into(),
            ),
        },
        "step" | "reverse_each" => {
            let mut args = args.into_iter();
            let items = match args.next() {
                Some(Val::Array(items)) => items,
                Some(Val::Int(count)) if (0..=1_000_000).contains(&count) => {
                    (0..count).map(Val::Int).collect()
                }
                Some(Val::Hash(entries)) => entries
                    .into_iter()
                    .map(|(k, v)| Val::Array(vec![k, v]))
                    .collect(),
                _ => {
                    return Some(error(
                        evaluator,
                        span,
                        name,
                        "takes an array, a hash or a count".into(),
                    ));
                }
            };
            let items: Vec<Val> = if name == "step" {
                let Some(Val::Int(step)) = args
                    .next()
                    .filter(|step| matches!(step, Val::Int(n) if *n > 0))
                else {
                    return Some(error(evaluator, span, name, "takes a step above 0".into()));
                };
                items
                    .into_iter()
                    .step_by(usize::try_from(step).unwrap_or(usize::MAX))
                    .collect()
            } else {
                items.into_iter().rev().collect()
            };
            match lambda {
                Some(lambda) => {
                    for item in &items {
                        evaluator.run_lambda(lambda, vec![item.clone()]);
                        if evaluator.iteration_ends() {
                            break;
                        }
                    }
                    Val::Array(items)
                }
                None => Val::Array(items),
            }
        }
        "new_integer" | "new_float" | "new_numeric" | "new_string" | "new_boolean"
        | "new_array" | "new_hash" | "new_binary" | "new_semver" | "new_timespan"
        | "new_timestamp" => {
            let converted = match name {
                "new_binary" | "new_semver" | "new_timespan" | "new_timestamp" => {
                    crate::eval::rich::construct(name, args)
                }
                _ => convert(name, args),
            };
            match converted {
                Ok(value) => match lambda {
                    Some(lambda) => evaluator.run_lambda(lambda, vec![value]),
                    None => value,
                },
                Err(message) => error(
                    evaluator,
                    span,
                    &format!("{}()", capitalized(&name[4..])),
                    message,
                ),
            }
        }
        "pick" | "pick_default" => {
            let count = args.len();
            let mut flat = Vec::new();
            for arg in args {
                flatten_into(arg, &mut flat);
            }
            match flat
                .into_iter()
                .find(|value| !matches!(value, Val::Undef) && *value != Val::Str(String::new()))
            {
                Some(value) => value,
                None if name == "pick_default" && count > 0 => Val::Str(String::new()),
                None => error(
                    evaluator,
                    span,
                    name,
                    "every value is undef or empty".into(),
                ),
            }
        }
        "str2bool" => match args.first() {
            Some(Val::Bool(b)) => Val::Bool(*b),
            Some(Val::Str(text)) => match text.to_ascii_lowercase().as_str() {
                "" | "0" | "f" | "n" | "false" | "no" | "undef" | "undefined" => Val::Bool(false),
                "1" | "t" | "y" | "true" | "yes" => Val::Bool(true),
                _ => error(
                    evaluator,
                    span,
                    name,
                    format!("`{text}` is not a boolean's text"),
                ),
            },
            _ => error(evaluator, span, name, "takes a string".into()),
        },
        "bool2str" => match args.as_slice() {
            [Val::Bool(b)] => Val::Str(b.to_string()),
            [Val::Bool(b), Val::Str(yes), Val::Str(no)] => {
                Val::Str(if *b { yes.clone() } else { no.clone() })
            }
            _ => error(
                evaluator,
                span,
                name,
                "takes a boolean, and optionally the texts for true and false".into(),
            ),
        },
        "concat" => {
            let mut out = Vec::new();
            for arg in args {
                match arg {
                    Val::Array(items) => out.extend(items),
                    other => out.push(other),
                }
            }
            Val::Array(out)
        }
        "delete" => match args.as_slice() {
            [Val::Array(items), remove] => Val::Array(
                items
                    .iter()
                    .filter(|item| match remove {
                        Val::Array(removed) => !removed.iter().any(|r| r.equals(item)),
                        remove => !remove.equals(item),
                    })
                    .cloned()
                    .collect(),
            ),
            [Val::Hash(entries), remove] => Val::Hash(
                entries
                    .iter()
                    .filter(|(key, _)| match remove {
                        Val::Array(removed) => !removed.contains(key),
                        remove => remove != key,
                    })
                    .cloned()
                    .collect(),
            ),
            [Val::Str(text), Val::Str(remove)] => Val::Str(text.replace(remove.as_str(), "")),
            _ => error(
                evaluator,
                span,
                name,
                "takes an array, a hash or a string, and what to delete".into(),
            ),
        },
        "has_key" => match args.as_slice() {
            [Val::Hash(entries), key] => {
                deprecated(evaluator, span, name, "`$key in $hash`");
                Val::Bool(entries.iter().any(|(existing, _)| existing == key))
            }
            _ => error(evaluator, span, name, "takes a hash and a key".into()),
        },
        "member" => match args.as_slice() {
            [Val::Array(items), Val::Array(wanted)] => {
                Val::Bool(wanted.iter().all(|w| items.iter().any(|i| i.equals(w))))
            }
            [Val::Array(items), wanted] => Val::Bool(items.iter().any(|i| i.equals(wanted))),
            _ => error(evaluator, span, name, "takes an array and a value".into()),
        },
        "ensure_resource" | "ensure_resources" | "ensure_packages" => {
            ensure(evaluator, name, args, span);
            Val::Undef
        }
        _ if name.starts_with("is_") => {
            deprecated(
                evaluator,
                span,
                name,
                "`$x =~ Type` (a match against a data type)",
            );
            let value = args.into_iter().next().unwrap_or(Val::Undef);
            Val::Bool(is_kind(&name[3..], &value))
        }
        _ => {
            deprecated(
                evaluator,
                span,
                name,
                "typed parameters, or `assert_type(Type, $x)`",
            );
            validate(evaluator, name, args, span);
            Val::Undef
        }
    };
    Some(value)
}

/// The text with its first character upper case.
pub(crate) fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn number(value: Option<&Val>) -> Option<Val> {
    match value? {
        Val::Int(i) => Some(Val::Int(*i)),
        Val::Float(f) => Some(Val::Float(*f)),
        Val::Str(text) => numeric_string(text),
        _ => None,
    }
}

/// What `is_string`, `is_integer`... of stdlib say of a value.
fn is_kind(kind: &str, value: &Val) -> bool {
    match kind {
        "string" => matches!(value, Val::Str(text) if numeric_string(text).is_none()),
        "array" => matches!(value, Val::Array(_)),
        "hash" => matches!(value, Val::Hash(_)),
        "integer" => {
            matches!(value, Val::Int(_))
                || matches!(value, Val::Str(t) if matches!(numeric_string(t), Some(Val::Int(_))))
        }
        "float" => {
            matches!(value, Val::Float(_))
                || matches!(value, Val::Str(t) if matches!(numeric_string(t), Some(Val::Float(_))))
        }
        "numeric" => {
            matches!(value, Val::Int(_) | Val::Float(_))
                || matches!(value, Val::Str(t) if numeric_string(t).is_some())
        }
        "bool" => matches!(value, Val::Bool(_)),
        "absolute_path" => matches!(value, Val::Str(path) if path.starts_with('/')),
        _ => false,
    }
}

fn validate(evaluator: &mut Evaluator<'_>, name: &str, args: Vec<Val>, span: Span) {
    let kind = &name["validate_".len()..];
    if kind == "re" {
        let mut args = args.into_iter();
        let (Some(Val::Str(text)), Some(patterns)) = (args.next(), args.next()) else {
            error(
                evaluator,
                span,
                name,
                "takes a string and a pattern (or a list of them)".into(),
            );
            return;
        };
        let message = args.next();
        let mut list = Vec::new();
        flatten_into(patterns, &mut list);
        let matched = list.iter().any(|pattern| match pattern {
            Val::Str(pattern) | Val::Regex(pattern) => evaluator
                .regex(pattern, span)
                .is_some_and(|regex| regex.is_match(&text)),
            _ => false,
        });
        if !matched {
            let message = message.map_or_else(
                || format!("`{text}` does not match {}", Val::Array(list).to_display()),
                |message| message.to_interpolated(),
            );
            evaluator.report(Severity::Error, DiagnosticCode::Validate, span, message);
        }
        return;
    }
    let check = if kind == "bool" { "bool" } else { kind };
    for value in args {
        let fits = match check {
            "string" => matches!(value, Val::Str(_) | Val::Undef),
            other => is_kind(other, &value),
        };
        if !fits {
            evaluator.report(
                Severity::Error,
                DiagnosticCode::Validate,
                span,
                format!(
                    "`{name}`: {} `{}` is not {}",
                    value.type_name(),
                    value.to_display(),
                    kind.replace('_', " ")
                ),
            );
        }
    }
}

/// `ensure_resource(type, title(s), attributes)`, `ensure_resources(type, { title =>
/// attributes })`, `ensure_packages(names or { name => attributes }, defaults)`: declares
/// what is not declared yet.
fn ensure(evaluator: &mut Evaluator<'_>, name: &str, args: Vec<Val>, span: Span) {
    let mut args = args.into_iter();
    // Type, title and attributes of each resource wanted.
    type Wanted = (String, String, Vec<(Val, Val)>);
    let mut wanted: Vec<Wanted> = Vec::new();
    match name {
        "ensure_packages" => {
            let packages = args.next().unwrap_or(Val::Undef);
            let defaults = match args.next() {
                Some(Val::Hash(defaults)) => defaults,
                _ => Vec::new(),
            };
            let with_defaults = |mut attributes: Vec<(Val, Val)>| {
                for (key, value) in &defaults {
                    if !attributes.iter().any(|(existing, _)| existing == key) {
                        attributes.push((key.clone(), value.clone()));
                    }
                }
                if !attributes
                    .iter()
                    .any(|(key, _)| *key == Val::Str("ensure".into()))
                {
                    attributes.push((Val::Str("ensure".into()), Val::Str("installed".into())));
                }
                attributes
            };
            match packages {
                Val::Hash(entries) => {
                    for (title, attributes) in entries {
                        let attributes = match attributes {
                            Val::Hash(attributes) => attributes,
                            _ => Vec::new(),
                        };
                        wanted.push((
                            "package".into(),
                            title.to_interpolated(),
                            with_defaults(attributes),
                        ));
                    }
                }
                other => {
                    let mut titles = Vec::new();
                    flatten_into(other, &mut titles);
                    for title in titles {
                        wanted.push((
                            "package".into(),
                            title.to_interpolated(),
                            with_defaults(Vec::new()),
                        ));
                    }
                }
            }
        }
        "ensure_resources" => {
            let (Some(Val::Str(type_name)), Some(Val::Hash(entries))) = (args.next(), args.next())
            else {
                error(
                    evaluator,
                    span,
                    name,
                    "takes a type and a hash of titles to attributes".into(),
                );
                return;
            };
            for (title, attributes) in entries {
                let attributes = match attributes {
                    Val::Hash(attributes) => attributes,
                    _ => Vec::new(),
                };
                wanted.push((
                    type_name.to_ascii_lowercase(),
                    title.to_interpolated(),
                    attributes,
                ));
            }
        }
        _ => {
            let (Some(Val::Str(type_name)), Some(titles)) = (args.next(), args.next()) else {
                error(
                    evaluator,
                    span,
                    name,
                    "takes a type, a title (or a list of them) and attributes".into(),
                );
                return;
            };
            let attributes = match args.next() {
                Some(Val::Hash(attributes)) => attributes,
                _ => Vec::new(),
            };
            let mut list = Vec::new();
            flatten_into(titles, &mut list);
            for title in list {
                wanted.push((
                    type_name.to_ascii_lowercase(),
                    title.to_interpolated(),
                    attributes.clone(),
                ));
            }
        }
    }
    for (type_name, title, attributes) in wanted {
        evaluator.ensure_resource(&type_name, &title, attributes, span);
    }
}

/// `0b101` (and `-0B1`): the binary form `Integer.new` reads besides the language's
/// decimal, octal and hexadecimal ones.
fn binary(text: &str) -> Option<Val> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let digits = rest
        .strip_prefix("0b")
        .or_else(|| rest.strip_prefix("0B"))?;
    let value = i64::from_str_radix(digits, 2).ok()?;
    Some(Val::Int(if negative { -value } else { value }))
}

/// `Integer(...)`, `String(...)`...: Puppet's conversions with `new`.
fn convert(name: &str, args: Vec<Val>) -> Result<Val, String> {
    let mut args = args.into_iter();
    let value = args.next().unwrap_or(Val::Undef);
    let shown = || format!("{} `{}`", value.type_name(), value.to_display());
    match name {
        "new_integer" => match &value {
            Val::Int(_) => Ok(value),
            Val::Float(f) if f.is_finite() => Ok(Val::Int(f.trunc() as i64)),
            Val::Bool(b) => Ok(Val::Int(i64::from(*b))),
            Val::Str(text) => match args.next() {
                Some(Val::Int(radix)) if ![2, 8, 10, 16].contains(&radix) => Err(format!(
                    "the radix {radix} is not one Puppet reads: 2, 8, 10, 16 or `default`"
                )),
                Some(Val::Int(radix)) => i64::from_str_radix(
                    text.trim_start_matches("0x").trim_start_matches("0b"),
                    radix as u32,
                )
                .map(Val::Int)
                .map_err(|_| format!("`{text}` is not an integer in base {radix}")),
                _ => match numeric_string(text).or_else(|| binary(text)) {
                    Some(Val::Int(i)) => Ok(Val::Int(i)),
                    Some(Val::Float(f)) => Ok(Val::Int(f.trunc() as i64)),
                    _ => Err(format!("`{text}` is not an integer")),
                },
            },
            _ => Err(format!("cannot convert {} to an integer", shown())),
        },
        "new_float" | "new_numeric" => match &value {
            Val::Int(i) if name == "new_float" => Ok(Val::Float(*i as f64)),
            Val::Int(_) | Val::Float(_) => Ok(value),
            Val::Bool(b) => Ok(if name == "new_float" {
                Val::Float(f64::from(u8::from(*b)))
            } else {
                Val::Int(i64::from(*b))
            }),
            Val::Str(text) => match numeric_string(text) {
                Some(Val::Int(i)) if name == "new_float" => Ok(Val::Float(i as f64)),
                Some(number) => Ok(number),
                None => Err(format!("`{text}` is not a number")),
            },
            _ => Err(format!("cannot convert {} to a number", shown())),
        },
        // Puppet's default format quotes the strings inside a collection (`%p`), unlike
        // interpolation: `String([a, 1])` is `['a', 1]`, `"${[a, 1]}"` is `[a, 1]`.
        "new_string" => Ok(Val::Str(match value {
            Val::Array(_) | Val::Hash(_) => value.to_display(),
            _ => value.to_interpolated(),
        })),
        "new_boolean" => match &value {
            Val::Bool(_) => Ok(value),
            Val::Int(i) => Ok(Val::Bool(*i != 0)),
            Val::Float(f) => Ok(Val::Bool(*f != 0.0)),
            Val::Str(text) => match text.to_ascii_lowercase().as_str() {
                "true" | "yes" | "y" => Ok(Val::Bool(true)),
                "false" | "no" | "n" | "" => Ok(Val::Bool(false)),
                _ => Err(format!("`{text}` is not a boolean")),
            },
            _ => Err(format!("cannot convert {} to a boolean", shown())),
        },
        "new_array" => Ok(match value {
            Val::Array(items) => Val::Array(items),
            Val::Hash(entries) => Val::Array(
                entries
                    .into_iter()
                    .map(|(k, v)| Val::Array(vec![k, v]))
                    .collect(),
            ),
            Val::Undef => Val::Array(Vec::new()),
            other => Val::Array(vec![other]),
        }),
        _ => {
            match value {
                Val::Hash(entries) => Ok(Val::Hash(entries)),
                Val::Array(items) => {
                    let mut entries = Vec::new();
                    if items
                        .iter()
                        .all(|item| matches!(item, Val::Array(pair) if pair.len() == 2))
                    {
                        for item in items {
                            if let Val::Array(mut pair) = item {
                                let value = pair.pop().unwrap_or(Val::Undef);
                                let key = pair.pop().unwrap_or(Val::Undef);
                                entries.push((key, value));
                            }
                        }
                    } else if items.len() % 2 == 0 {
                        let mut items = items.into_iter();
                        while let (Some(key), Some(value)) = (items.next(), items.next()) {
                            entries.push((key, value));
                        }
                    } else {
                        return Err("an array becomes a hash when it holds pairs, or keys and values in turn".into());
                    }
                    Ok(Val::Hash(entries))
                }
                Val::Undef => Ok(Val::Hash(Vec::new())),
                other => Err(format!(
                    "cannot convert {} `{}` to a hash",
                    other.type_name(),
                    other.to_display()
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_puppet_s() {
        use std::cmp::Ordering::*;
        assert_eq!(versioncmp("1.10", "1.9"), Greater);
        assert_eq!(versioncmp("1.2.3", "1.2.3"), Equal);
        assert_eq!(versioncmp("2.0", "2.0.1"), Less);
        assert_eq!(versioncmp("1.0-rc1", "1.0-rc2"), Less);
        assert_eq!(versioncmp("7.23.0", "7.3.1"), Greater);
    }

    #[test]
    fn base64_round_trips() {
        for text in ["", "a", "ab", "abc", "hello, world"] {
            let encoded = base64_encode(text.as_bytes());
            assert_eq!(base64_decode(&encoded).as_deref(), Some(text.as_bytes()));
        }
        assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
    }
}
