//! Functions of Puppet's core library for numbers, strings and data: `ceiling`, `floor`,
//! `round`, `chomp`, `chop`, `camelcase`, `compare`, `get`, `getvar`, `index` and
//! `type`, as Puppet's function reference documents them.

use super::*;
use crate::eval::ptype::PType;

/// The names this module provides.
pub(crate) const CORE: &[&str] = &[
    "ceiling",
    "floor",
    "round",
    "chomp",
    "chop",
    "camelcase",
    "compare",
    "get",
    "getvar",
    "index",
    "type",
    "lstrip",
    "rstrip",
    "unwrap",
    "match",
];

/// Calls `name`, one of [`CORE`].
pub(super) fn call(
    evaluator: &mut Evaluator<'_>,
    name: &str,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    match name {
        "ceiling" | "floor" | "round" => rounded(evaluator, name, args, span),
        "chomp" | "chop" | "camelcase" | "lstrip" | "rstrip" => {
            each_string(evaluator, name, args, span)
        }
        "unwrap" => match args.into_iter().next() {
            Some(Val::Sensitive(inner)) => *inner,
            Some(other) => other,
            None => error(evaluator, span, "unwrap", "takes a value".into()),
        },
        "match" => matched(evaluator, args, span),
        "compare" => compare(evaluator, args, span),
        "get" => get(evaluator, args, lambda, span),
        "getvar" => getvar(evaluator, args, span),
        "type" => type_of(evaluator, args, span),
        _ => index(evaluator, args, lambda, span),
    }
}

/// `ceiling`, `floor` and `round` of a number (an integer is itself): an integer;
/// `round` rounds halves away from zero (`round(2.5)` is 3, `round(-2.5)` is -3).
fn rounded(evaluator: &mut Evaluator<'_>, name: &str, args: Vec<Val>, span: Span) -> Val {
    let value = match args.as_slice() {
        [Val::Int(i)] => return Val::Int(*i),
        [Val::Float(f)] => match name {
            "ceiling" => f.ceil(),
            "floor" => f.floor(),
            _ => f.round(),
        },
        [other] => {
            return error(
                evaluator,
                span,
                name,
                format!("takes a number, not {}", other.type_name()),
            );
        }
        _ => return error(evaluator, span, name, "takes one number".into()),
    };
    if value.is_finite() && value.abs() < 9.2e18 {
        Val::Int(value as i64)
    } else {
        error(
            evaluator,
            span,
            name,
            format!("{value} is not a number an Integer can hold"),
        )
    }
}

/// `chomp` (the line ending at the end, `\n`, `\r\n` or `\r`), `chop` (the last
/// character, `\r\n` as one) and `camelcase` (`hello_world` is `HelloWorld`) of a
/// string, or of each string of an array.
fn each_string(evaluator: &mut Evaluator<'_>, name: &str, args: Vec<Val>, span: Span) -> Val {
    let apply = |text: &str| -> String {
        match name {
            "chomp" => text
                .strip_suffix("\r\n")
                .or_else(|| text.strip_suffix('\n'))
                .or_else(|| text.strip_suffix('\r'))
                .unwrap_or(text)
                .to_owned(),
            "lstrip" => text.trim_start().to_owned(),
            "rstrip" => text.trim_end().to_owned(),
            "chop" => match text.strip_suffix("\r\n") {
                Some(rest) => rest.to_owned(),
                None => {
                    let mut chars = text.chars();
                    chars.next_back();
                    chars.as_str().to_owned()
                }
            },
            _ => text
                .split('_')
                .map(|word| {
                    let mut chars = word.chars();
                    match chars.next() {
                        Some(first) => first.to_uppercase().chain(chars).collect(),
                        None => String::new(),
                    }
                })
                .collect(),
        }
    };
    match args.as_slice() {
        [Val::Str(text)] => Val::Str(apply(text)),
        [Val::Array(items)] => Val::Array(
            items
                .iter()
                .map(|item| match item {
                    Val::Str(text) => Val::Str(apply(text)),
                    other => other.clone(),
                })
                .collect(),
        ),
        _ => error(
            evaluator,
            span,
            name,
            "takes a string or an array of strings".into(),
        ),
    }
}

/// `compare(a, b[, ignore_case])`: -1, 0 or 1, of two numbers, two strings (without
/// case unless the third argument is false), two versions (strings that look like them
/// compare as strings), or two timespans alike.
fn compare(evaluator: &mut Evaluator<'_>, args: Vec<Val>, span: Span) -> Val {
    let (a, b, ignore_case) = match args.as_slice() {
        [a, b] => (a, b, true),
        [a, b, Val::Bool(ignore_case)] => (a, b, *ignore_case),
        _ => {
            return error(
                evaluator,
                span,
                "compare",
                "takes two values and, for strings, whether to ignore case".into(),
            );
        }
    };
    let order = match (a, b) {
        (Val::Str(a), Val::Str(b)) if !ignore_case => a.cmp(b),
        (Val::Str(a), Val::Str(b)) => a.to_lowercase().cmp(&b.to_lowercase()),
        (a, b) => match a.compare(b) {
            Ok(order) => order,
            Err(message) => return error(evaluator, span, "compare", message),
        },
    };
    Val::Int(match order {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    })
}

/// The value at a dotted path (`'a.b.0'`: hash keys and array indexes) in `value`, or
/// `None` when a step finds nothing.
fn at_path(value: &Val, path: &str) -> Option<Val> {
    if path.is_empty() {
        return Some(value.clone());
    }
    path.split('.')
        .try_fold(value.clone(), |value, key| match value {
            Val::Hash(entries) => Val::hash_get(&entries, &Val::Str(key.to_owned())).cloned(),
            Val::Array(items) => crate::eval::element(&items, key.parse().ok()?).cloned(),
            _ => None,
        })
}

/// `get(value, 'a.b.0'[, default]) |$error| { ... }`: the value at the dotted path; the
/// default (or undef) when there is none; a step into a value that is no collection is
/// an error, or what the lambda returns for it.
fn get(evaluator: &mut Evaluator<'_>, args: Vec<Val>, lambda: Option<&Lambda>, span: Span) -> Val {
    let mut args = args.into_iter();
    let (Some(value), Some(Val::Str(path))) = (args.next(), args.next()) else {
        return error(
            evaluator,
            span,
            "get",
            "takes a value and a dotted path like 'a.b.0'".into(),
        );
    };
    let default = args.next().unwrap_or(Val::Undef);
    // As Puppet: what is not there is the default; a step into a value that is no
    // collection is an error, which the lambda is given (as its message) if there is one.
    let mut current = value;
    let mut walked: Vec<String> = Vec::new();
    for key in path.split('.').filter(|_| !path.is_empty()) {
        let next = match &current {
            Val::Hash(entries) => Val::hash_get(entries, &Val::Str(key.to_owned())).cloned(),
            Val::Array(items) => key
                .parse()
                .ok()
                .and_then(|index| crate::eval::element(items, index).cloned()),
            Val::Undef => None,
            other => {
                let message = format!(
                    "the given data does not contain a collection at [{}], got {}",
                    walked.join(", "),
                    other.type_name()
                );
                return match lambda {
                    Some(lambda) => evaluator.run_lambda(lambda, vec![Val::Str(message)]),
                    None => error(evaluator, span, "get", message),
                };
            }
        };
        let Some(next) = next else {
            return default;
        };
        walked.push(key.to_owned());
        current = next;
    }
    match current {
        Val::Undef => default,
        found => found,
    }
}

/// `getvar('name')`, `getvar('facts.os.family')`, `getvar('ntp::servers')`: the
/// variable (then the dotted path into it), or the default (undef) when there is none.
fn getvar(evaluator: &mut Evaluator<'_>, args: Vec<Val>, span: Span) -> Val {
    let mut args = args.into_iter();
    let Some(Val::Str(name)) = args.next() else {
        return error(
            evaluator,
            span,
            "getvar",
            "takes the name of a variable, like 'facts.os.family'".into(),
        );
    };
    let default = args.next().unwrap_or(Val::Undef);
    let (variable, path) = name.split_once('.').unwrap_or((&name, ""));
    let variable = variable.trim_start_matches('$');
    let value = if variable.contains("::") {
        evaluator.peek_qualified(variable)
    } else {
        evaluator.peek_variable(variable)
    };
    match value.and_then(|value| at_path(&value, path)) {
        Some(Val::Undef) | None => default,
        Some(found) => found,
    }
}

/// `index(collection, value)` or `index(collection) |$x| { ... }`: the first index (or
/// key) of the value, or of the first entry the lambda is true for; undef when none.
/// A string's index of a substring counts characters.
fn index(
    evaluator: &mut Evaluator<'_>,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    let mut args = args.into_iter();
    let collection = args.next().unwrap_or(Val::Undef);
    let wanted = args.next();
    match (collection, wanted, lambda) {
        (Val::Str(text), Some(Val::Str(part)), None) => text
            .find(&part)
            .map_or(Val::Undef, |at| Val::Int(text[..at].chars().count() as i64)),
        (Val::Array(items), Some(wanted), None) => items
            .iter()
            .position(|item| item.equals(&wanted))
            .map_or(Val::Undef, |at| Val::Int(at as i64)),
        (Val::Hash(entries), Some(wanted), None) => entries
            .iter()
            .find(|(_, value)| value.equals(&wanted))
            .map_or(Val::Undef, |(key, _)| key.clone()),
        (Val::Array(items), None, Some(lambda)) => {
            for (at, item) in items.into_iter().enumerate() {
                let call = if lambda.params.len() >= 2 {
                    vec![Val::Int(at as i64), item]
                } else {
                    vec![item]
                };
                let holds = evaluator.run_lambda(lambda, call).truthy();
                if evaluator.iteration_ends() {
                    break;
                }
                if holds {
                    return Val::Int(at as i64);
                }
            }
            Val::Undef
        }
        (Val::Hash(entries), None, Some(lambda)) => {
            for (key, value) in entries {
                let call = if lambda.params.len() >= 2 {
                    vec![key.clone(), value]
                } else {
                    vec![value]
                };
                let holds = evaluator.run_lambda(lambda, call).truthy();
                if evaluator.iteration_ends() {
                    break;
                }
                if holds {
                    return key;
                }
            }
            Val::Undef
        }
        _ => error(
            evaluator,
            span,
            "index",
            "takes a string and a substring, or an array or hash and a value (or a lambda)".into(),
        ),
    }
}

/// How much of a value `type` tells.
#[derive(Clone, Copy, PartialEq)]
enum Detail {
    /// Each number with its value, each array a `Tuple`, each hash a `Struct`.
    Detailed,
    /// Collections as `Array` and `Hash` of what their entries have in common, with
    /// their sizes.
    Reduced,
    /// As reduced, without values or sizes.
    Generalized,
}

/// `type(value[, 'detailed' | 'reduced' | 'generalized'])`: the data type of a value
/// (`type([2, 3.14])` is `Tuple[Integer[2, 2], Float[3.14, 3.14]]`, reduced
/// `Array[Numeric, 2, 2]`, generalized `Array[Numeric]`). Strings are `String`.
fn type_of(evaluator: &mut Evaluator<'_>, args: Vec<Val>, span: Span) -> Val {
    let detail = match args.get(1) {
        None => Detail::Detailed,
        Some(Val::Str(word)) if word == "detailed" => Detail::Detailed,
        Some(Val::Str(word)) if word == "reduced" => Detail::Reduced,
        Some(Val::Str(word)) if word == "generalized" => Detail::Generalized,
        Some(_) => {
            return error(
                evaluator,
                span,
                "type",
                "tells 'detailed', 'reduced' or 'generalized'".into(),
            );
        }
    };
    if args.is_empty() || args.len() > 2 {
        return error(evaluator, span, "type", "takes a value".into());
    }
    Val::Type(Box::new(inferred(&args[0], detail)))
}

/// The type of `value`, as told with `detail`.
fn inferred(value: &Val, detail: Detail) -> PType {
    let exact = detail != Detail::Generalized;
    match value {
        Val::Undef => PType::Undef,
        Val::Default => PType::Default,
        Val::Bool(_) => PType::Boolean,
        Val::Int(i) if exact => PType::Integer(*i, *i),
        Val::Int(_) => PType::Integer(i64::MIN, i64::MAX),
        Val::Float(f) if exact => PType::Float(*f, *f),
        Val::Float(_) => PType::Float(f64::NEG_INFINITY, f64::INFINITY),
        Val::Str(_) => PType::String(0, i64::MAX),
        Val::Regex(_) => PType::Regexp,
        Val::Sensitive(inner) => PType::Sensitive(Box::new(inferred(inner, detail))),
        Val::Type(inner) => PType::Type(Some(inner.clone())),
        Val::Array(items) if detail == Detail::Detailed => {
            PType::Tuple(items.iter().map(|item| inferred(item, detail)).collect())
        }
        Val::Array(items) => {
            let inner = common_of(items, detail);
            let size = items.len() as i64;
            if exact {
                PType::Array(Box::new(inner), size, size)
            } else {
                PType::Array(Box::new(inner), 0, i64::MAX)
            }
        }
        Val::Hash(entries)
            if detail == Detail::Detailed
                && entries.iter().all(|(key, _)| matches!(key, Val::Str(_))) =>
        {
            PType::Struct(
                entries
                    .iter()
                    .map(|(key, value)| (key.to_interpolated(), false, inferred(value, detail)))
                    .collect(),
            )
        }
        Val::Hash(entries) => {
            let keys: Vec<Val> = entries.iter().map(|(key, _)| key.clone()).collect();
            let values: Vec<Val> = entries.iter().map(|(_, value)| value.clone()).collect();
            let key = common_of(&keys, detail);
            let value = common_of(&values, detail);
            let size = entries.len() as i64;
            if exact {
                PType::Hash(Box::new(key), Box::new(value), size, size)
            } else {
                PType::Hash(Box::new(key), Box::new(value), 0, i64::MAX)
            }
        }
        _ => PType::Any,
    }
}

/// The common type of the elements of a collection, as Puppet infers it: strings are a
/// range of lengths (`String[1, 2]`; one string alone is `String`), or an `Enum` of them
/// when reduced; integers a range, which generalizing drops; else what their generalized
/// types have in common.
fn common_of(items: &[Val], detail: Detail) -> PType {
    if items.len() > 1 && items.iter().all(|item| matches!(item, Val::Str(_))) {
        let texts: Vec<&str> = items
            .iter()
            .filter_map(|item| match item {
                Val::Str(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if detail == Detail::Reduced {
            let mut names: Vec<String> = Vec::new();
            for text in texts {
                if !names.iter().any(|name| name == text) {
                    names.push(text.to_owned());
                }
            }
            return PType::Enum(names);
        }
        let lengths = texts.iter().map(|text| text.chars().count() as i64);
        let (min, max) = lengths.fold((i64::MAX, 0), |(min, max), n| (min.min(n), max.max(n)));
        return PType::String(min, max);
    }
    if detail == Detail::Reduced
        && !items.is_empty()
        && items.iter().all(|item| matches!(item, Val::Int(_)))
    {
        let ints = items.iter().filter_map(|item| match item {
            Val::Int(i) => Some(*i),
            _ => None,
        });
        let (min, max) = ints.fold((i64::MAX, i64::MIN), |(min, max), i| {
            (min.min(i), max.max(i))
        });
        return PType::Integer(min, max);
    }
    common(items.iter().map(|item| inferred(item, Detail::Generalized)))
}

/// What generalized types have in common: the type itself when they are all one,
/// `Numeric` for integers and floats, `ScalarData` for data scalars, `Data` for data,
/// else `Any` (and `Any` for none at all, as Puppet's `Array[Any]` of `[]`... written
/// `Array`).
fn common(types: impl Iterator<Item = PType>) -> PType {
    let types: Vec<PType> = types.collect();
    let Some(first) = types.first() else {
        return PType::Any;
    };
    if types.iter().all(|ptype| ptype == first) {
        return first.clone();
    }
    let numeric = |ptype: &PType| matches!(ptype, PType::Integer(..) | PType::Float(..));
    if types.iter().all(numeric) {
        return PType::Numeric;
    }
    let scalar =
        |ptype: &PType| numeric(ptype) || matches!(ptype, PType::String(..) | PType::Boolean);
    if types.iter().all(scalar) {
        return PType::ScalarData;
    }
    let data = |ptype: &PType| {
        scalar(ptype) || matches!(ptype, PType::Undef | PType::Array(..) | PType::Hash(..))
    };
    if types.iter().all(data) {
        return PType::Data;
    }
    PType::Any
}

/// `match(string, pattern)`: the match and its groups (`['abc', 'b']`), or undef; of an
/// array of strings, each one's.
fn matched(evaluator: &mut Evaluator<'_>, args: Vec<Val>, span: Span) -> Val {
    let (target, pattern) = match args.as_slice() {
        [target, Val::Str(pattern) | Val::Regex(pattern)] => (target.clone(), pattern.clone()),
        _ => {
            return error(
                evaluator,
                span,
                "match",
                "takes a string (or an array of strings) and a pattern".into(),
            );
        }
    };
    let Some(regex) = evaluator.regex(&pattern, span) else {
        return Val::Undef;
    };
    let one = |text: &str| match regex.captures(text) {
        Some(captures) => Val::Array(
            captures
                .iter()
                .map(|group| group.map_or(Val::Undef, |group| Val::Str(group.as_str().to_owned())))
                .collect(),
        ),
        None => Val::Undef,
    };
    match target {
        Val::Str(text) => one(&text),
        Val::Array(items) => Val::Array(
            items
                .iter()
                .map(|item| match item {
                    Val::Str(text) => one(text),
                    _ => Val::Undef,
                })
                .collect(),
        ),
        other => error(
            evaluator,
            span,
            "match",
            format!("matches strings, not {}", other.type_name()),
        ),
    }
}
