//! The functions a manifest may call: the catalog functions (`include`, `contain`,
//! `require`, `realize`, `tag`, `defined`), logging (`notice`...`fail`), iteration with
//! lambdas (`each`, `map`, `filter`, `reduce`) and a few for strings and collections.

use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::{Severity, Span};
use crate::eval::Evaluator;
use crate::eval::ptype::PType;
use crate::eval::value::{Val, flatten_into};
use crate::syntax::Lambda;

mod ordering;
use ordering::{each_string_deep, sort, sort_with};

pub(crate) const FUNCTIONS: &[&str] = &[
    "include",
    "contain",
    "require",
    "realize",
    "tag",
    "tagged",
    "defined",
    "notice",
    "info",
    "debug",
    "warning",
    "err",
    "fail",
    "each",
    "map",
    "filter",
    "reduce",
    "select",
    "reject",
    "collect",
    "any",
    "all",
    "group_by",
    "partition",
    "slice",
    "alert",
    "crit",
    "emerg",
    "break",
    "next",
    "return",
    "with",
    "new",
    "split",
    "join",
    "upcase",
    "downcase",
    "capitalize",
    "strip",
    "length",
    "size",
    "keys",
    "values",
    "flatten",
    "unique",
    "sort",
    "empty",
    "sensitive",
    "lookup",
    "hiera",
    "hiera_array",
    "hiera_hash",
    "hiera_include",
    "epp",
    "inline_epp",
    "template",
    "inline_template",
];

/// Whether `name` is a function wconverge itself provides.
pub(crate) fn is_builtin(name: &str) -> bool {
    FUNCTIONS.contains(&name) || crate::eval::stdlib::has(name)
}

pub(crate) fn call(
    evaluator: &mut Evaluator<'_>,
    name: &str,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    let iteration = matches!(
        name,
        "each"
            | "map"
            | "filter"
            | "reduce"
            | "select"
            | "reject"
            | "collect"
            | "any"
            | "all"
            | "group_by"
            | "partition"
            | "slice"
            | "with"
            | "new"
            | "lookup"
            | "sort"
    );
    let iteration = iteration || crate::eval::stdlib::takes_lambda(name);
    if lambda.is_some()
        && !iteration
        && (FUNCTIONS.contains(&name) || crate::eval::stdlib::has(name))
    {
        evaluator.report(
            Severity::Error,
            DiagnosticCode::UnexpectedLambda,
            span,
            format!("`{name}` does not take a lambda"),
        );
        return Val::Undef;
    }
    if !crate::eval::arity::fits(evaluator, name, args.len(), span) {
        return Val::Undef;
    }
    if crate::eval::stdlib::has(name) {
        return crate::eval::stdlib::call(evaluator, name, args, lambda, span)
            .unwrap_or(Val::Undef);
    }
    match name {
        "include" | "contain" | "require" => {
            let names = evaluator.class_names(args, span);
            Val::Array(evaluator.include(names, name, span))
        }
        "realize" => {
            evaluator.realize_refs(args, span);
            Val::Undef
        }
        "tag" => {
            let mut flat = Vec::new();
            for arg in args {
                flatten_into(arg, &mut flat);
            }
            let tags = flat.into_iter().map(|tag| tag.to_interpolated()).collect();
            evaluator.add_tags(tags, span);
            Val::Undef
        }
        "tagged" => {
            let mut flat = Vec::new();
            for arg in args {
                flatten_into(arg, &mut flat);
            }
            let wanted: Vec<String> = flat
                .iter()
                .map(|tag| tag.to_interpolated().to_ascii_lowercase())
                .collect();
            Val::Bool(evaluator.tagged(&wanted))
        }
        "defined" => {
            Val::Bool(!args.is_empty() && args.iter().all(|arg| evaluator.is_defined(arg)))
        }
        "notice" | "info" | "debug" | "warning" | "err" | "alert" | "crit" | "emerg" => {
            let message = args
                .iter()
                .map(Val::to_interpolated)
                .collect::<Vec<_>>()
                .join(" ");
            // Puppet's `err` does not stop the compile: a warning, as `warning` is.
            let (severity, code) = match name {
                "warning" => (Severity::Warning, DiagnosticCode::Warning),
                "err" | "alert" | "crit" | "emerg" => (Severity::Warning, DiagnosticCode::Err),
                "info" => (Severity::Notice, DiagnosticCode::Info),
                "debug" => (Severity::Notice, DiagnosticCode::Debug),
                _ => (Severity::Notice, DiagnosticCode::Notice),
            };
            evaluator.report(severity, code, span, message);
            Val::Undef
        }
        "fail" => {
            let message = args
                .iter()
                .map(Val::to_interpolated)
                .collect::<Vec<_>>()
                .join(" ");
            evaluator.report(
                Severity::Error,
                DiagnosticCode::Fail,
                span,
                format!("the manifest failed: {message}"),
            );
            Val::Undef
        }
        "break" | "next" | "return" => {
            evaluator.jump_by(name, args, span);
            Val::Undef
        }
        "each" | "map" | "filter" | "reduce" | "reject" | "any" | "all" | "group_by"
        | "partition" => iterate(evaluator, name, args, lambda, span),
        "slice" => slice(evaluator, args, lambda, span),
        // With a lambda, its answer orders two elements (`compare($b, $a)`).
        "sort" if lambda.is_some() => sort_with(evaluator, args, lambda.expect("just seen"), span),
        // Puppet's types ARM's names for `filter` and `map`, and `filter`'s complement.
        "select" => iterate(evaluator, "filter", args, lambda, span),
        "collect" => iterate(evaluator, "map", args, lambda, span),
        // `with(a, b) |$x, $y| { ... }`: the lambda called once with the arguments.
        "with" => match lambda {
            Some(lambda) => evaluator.run_lambda(lambda, args),
            None => arity(evaluator, name, "a lambda: `with($x) |$y| { ... }`", span),
        },
        // `Integer.new('12')`, `new(String, 5)`: the core types' conversions.
        "new"
            if matches!(
                args.first(),
                Some(Val::Ref { type_name, title: None })
                    if matches!(type_name.as_str(), "integer" | "float" | "numeric" | "string" | "boolean" | "array" | "hash" | "binary" | "semver" | "timespan" | "timestamp")
            ) =>
        {
            let mut args = args;
            let Val::Ref { type_name, .. } = args.remove(0) else {
                return Val::Undef;
            };
            crate::eval::stdlib::call(evaluator, &format!("new_{type_name}"), args, lambda, span)
                .unwrap_or(Val::Undef)
        }
        // `Optional[Integer].new('5')`: the type it makes optional makes the value.
        "new"
            if matches!(
                args.first(),
                Some(Val::Type(ptype)) if matches!(**ptype, PType::Optional(_) | PType::NotUndef(Some(_)))
            ) =>
        {
            let mut args = args;
            let Val::Type(ptype) = args.remove(0) else {
                return Val::Undef;
            };
            let (PType::Optional(inner) | PType::NotUndef(Some(inner))) = *ptype else {
                return Val::Undef;
            };
            let written = inner.written();
            let inner = if written.contains('[') {
                Val::Type(inner)
            } else {
                Val::Ref {
                    type_name: written.to_ascii_lowercase(),
                    title: None,
                }
            };
            args.insert(0, inner);
            call(evaluator, "new", args, lambda, span)
        }
        "new" => evaluator.instantiate(args, lambda, span),
        "lookup" => lookup(evaluator, args, lambda, span),
        "epp" | "inline_epp" => {
            let mut args = args.into_iter();
            let (Some(Val::Str(first)), params) = (args.next(), args.next()) else {
                return arity(
                    evaluator,
                    name,
                    if name == "epp" {
                        "a template's path (`'NAME/file.epp'`, the module NAME's templates/file.epp) and a hash of parameters"
                    } else {
                        "the template's text and a hash of parameters"
                    },
                    span,
                );
            };
            let params = match params {
                None | Some(Val::Undef) => Vec::new(),
                Some(Val::Hash(params)) => params,
                Some(other) => {
                    evaluator.report(
                        Severity::Error,
                        DiagnosticCode::BadArgument,
                        span,
                        format!(
                            "`{name}` takes its parameters as a hash, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    );
                    return Val::Undef;
                }
            };
            if name == "inline_epp" {
                let key = format!("inline_epp\u{0}{first}");
                return evaluator.render_epp(
                    &key,
                    "inline_epp",
                    |_| Some(crate::Source::new("inline_epp", first.clone())),
                    params,
                    span,
                );
            }
            let path = first.clone();
            evaluator.render_epp(
                &path,
                &path,
                |evaluator| template_source(evaluator, "epp", &path, span),
                params,
                span,
            )
        }
        "wconverge_epp_text" | "wconverge_epp_print" => {
            for arg in &args {
                evaluator.epp_print(arg, span);
            }
            Val::Undef
        }
        "template" | "inline_template" => evaluator.render_erb(name, args, span),
        "hiera" | "hiera_array" | "hiera_hash" | "hiera_include" => {
            let (merge, instead) = match name {
                "hiera" => ("first", "lookup('key')"),
                "hiera_array" => ("unique", "lookup('key', Array, 'unique')"),
                "hiera_hash" => ("hash", "lookup('key', Hash, 'hash')"),
                _ => ("unique", "lookup('key', Array, 'unique').include"),
            };
            evaluator
                .report(
                    Severity::Warning,
                    DiagnosticCode::Deprecated,
                    span,
                    format!("`{name}()` is deprecated"),
                )
                .help = Some(format!("write `{instead}`"));
            let mut args = args.into_iter();
            let key = args.next().unwrap_or(Val::Undef);
            let default = args.next();
            let found = lookup(
                evaluator,
                vec![key, Val::Undef, Val::Str(merge.to_owned())]
                    .into_iter()
                    .chain(default)
                    .collect(),
                None,
                span,
            );
            if name == "hiera_include" {
                let names = evaluator.class_names(vec![found], span);
                evaluator.include(names, "include", span);
                Val::Undef
            } else {
                found
            }
        }
        "sensitive" => match args.into_iter().next() {
            Some(value) => Val::Sensitive(Box::new(value)),
            None => arity(evaluator, name, "one argument", span),
        },
        _ => pure(evaluator, name, args, span),
    }
}

/// The source of `epp('NAME/path')`: `path` in module NAME's templates, through the
/// loader; `None` when it cannot be had (reported).
pub(crate) fn template_source(
    evaluator: &mut Evaluator<'_>,
    function: &str,
    path: &str,
    span: Span,
) -> Option<crate::Source> {
    let code = if function == "epp" {
        DiagnosticCode::Epp
    } else {
        DiagnosticCode::Erb
    };
    let Some((module, file)) = path.split_once('/') else {
        evaluator
            .report(
                Severity::Error,
                code,
                span,
                format!("`{function}('{path}')`: the path names no module"),
            )
            .help = Some(format!(
            "write `{function}('NAME/file')` for templates/file of module NAME"
        ));
        return None;
    };
    match evaluator.loader().template(module, file) {
        Some(Ok(source)) => Some(source),
        Some(Err(why)) => {
            evaluator.report(
                Severity::Error,
                code,
                span,
                format!("`{function}('{path}')`: {why}"),
            );
            None
        }
        None => {
            evaluator
                .report(
                    Severity::Error,
                    code,
                    span,
                    format!("`{function}('{path}')`: no module `{module}` in the module path has `templates/{file}`"),
                )
                .help = Some("check the module's name, the file's path in its templates directory, and `--modulepath`".into());
            None
        }
    }
}

/// `lookup(name)`, `lookup(name, type, merge, default)`, `lookup(name, options)`
/// (`default_value`, `merge`, `value_type`), `lookup(name) |$key| { default }`; a name
/// may be a list of names, tried in order.
fn lookup(
    evaluator: &mut Evaluator<'_>,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    let mut args = args.into_iter();
    let names = match args.next() {
        Some(Val::Str(name)) => vec![name],
        Some(Val::Array(names)) if names.iter().all(|name| matches!(name, Val::Str(_))) => names
            .into_iter()
            .map(|name| name.to_interpolated())
            .collect(),
        _ => {
            return arity(
                evaluator,
                "lookup",
                "a key (a string, or a list of them) first",
                span,
            );
        }
    };
    let rest: Vec<Val> = args.collect();
    let (merge, default) = match rest.as_slice() {
        [Val::Hash(options)] => (
            Val::hash_get(options, &Val::Str("merge".into()))
                .cloned()
                .unwrap_or(Val::Undef),
            Val::hash_get(options, &Val::Str("default_value".into())).cloned(),
        ),
        [_type, merge, default] => (merge.clone(), Some(default.clone())),
        [_type, merge] => (merge.clone(), None),
        [_] | [] => (Val::Undef, None),
        _ => return arity(evaluator, "lookup", "at most four arguments", span),
    };
    let merge = match crate::eval::hiera::Merge::parse(&merge) {
        Ok(merge) => merge,
        Err(why) => {
            evaluator.report(
                Severity::Error,
                DiagnosticCode::BadArgument,
                span,
                format!("`lookup`: {why}"),
            );
            return Val::Undef;
        }
    };
    for name in &names {
        match evaluator.hiera_lookup(name, merge, span) {
            Ok(Some(value)) => return value,
            Ok(None) => {}
            Err(()) => return Val::Undef,
        }
    }
    if let Some(lambda) = lambda {
        return evaluator.run_lambda(lambda, vec![Val::Str(names[0].clone())]);
    }
    if let Some(default) = default {
        return default;
    }
    evaluator
        .report(
            Severity::Error,
            DiagnosticCode::Lookup,
            span,
            format!(
                "`lookup` found no value for `{}` in Hiera's data",
                names.join("`, `")
            ),
        )
        .help = Some(
        "add the key to a data file of the hierarchy (hiera.yaml), or give `lookup` a default"
            .into(),
    );
    Val::Undef
}

/// Counting iterations (`5.each |$i| { }`) stop at this many steps.
const MAX_ITERATIONS: i64 = 1_000_000;

fn arity(evaluator: &mut Evaluator<'_>, name: &str, expected: &str, span: Span) -> Val {
    evaluator.report(
        Severity::Error,
        DiagnosticCode::BadArgument,
        span,
        format!("`{name}` takes {expected}"),
    );
    Val::Undef
}

fn pure(evaluator: &mut Evaluator<'_>, name: &str, args: Vec<Val>, span: Span) -> Val {
    let mut args = args.into_iter();
    let first = args.next();
    let second = args.next();
    match (name, first, second) {
        ("split", Some(Val::Str(text)), Some(Val::Str(separator))) => Val::Array(
            text.split(separator.as_str())
                .map(|part| Val::Str(part.to_owned()))
                .collect(),
        ),
        ("split", Some(Val::Str(text)), Some(Val::Regex(pattern))) => {
            match evaluator.regex(&pattern, span) {
                Some(regex) => Val::Array(
                    regex
                        .split(&text)
                        .map(|part| Val::Str(part.to_owned()))
                        .collect(),
                ),
                None => Val::Undef,
            }
        }
        ("join", Some(Val::Array(nested)), separator) => {
            let separator = separator.map(|s| s.to_interpolated()).unwrap_or_default();
            // Nested arrays are flattened first: `join([1, [2, [3]]], ',')` is `1,2,3`.
            let mut items = Vec::new();
            for item in nested {
                flatten_into(item, &mut items);
            }
            // Built piece by piece, and stopped at the longest string a manifest may build
            // (a long separator between many items would otherwise take any memory).
            let mut joined = String::new();
            for (idx, item) in items.iter().enumerate() {
                if idx > 0 {
                    joined.push_str(&separator);
                }
                let room = crate::eval::MAX_STRING_BYTES.saturating_sub(joined.len());
                if joined.len() > crate::eval::MAX_STRING_BYTES
                    || item.display_len_capped(2 * room + 64) >= 2 * room + 64
                {
                    evaluator.value_limit(
                        span,
                        format!(
                            "`join` builds a string of more than {} bytes (16 MiB), the limit",
                            crate::eval::MAX_STRING_BYTES
                        ),
                    );
                    return Val::Undef;
                }
                joined.push_str(&item.to_interpolated());
            }
            Val::Str(joined)
        }
        // On an array or a hash (keys and values), each string in it, at any depth.
        (
            "upcase" | "downcase" | "capitalize" | "strip",
            Some(value @ (Val::Array(_) | Val::Hash(_))),
            None,
        ) => each_string_deep(value, &|text| match name {
            "upcase" => text.to_uppercase(),
            "downcase" => text.to_lowercase(),
            "capitalize" => crate::eval::stdlib::capitalized(text),
            _ => text.trim().to_owned(),
        }),
        // A string sorts its characters.
        ("sort", Some(Val::Str(text)), None) => {
            let mut chars: Vec<char> = text.chars().collect();
            chars.sort_unstable();
            Val::Str(chars.into_iter().collect())
        }
        ("upcase", Some(Val::Str(text)), None) => Val::Str(text.to_uppercase()),
        ("downcase", Some(Val::Str(text)), None) => Val::Str(text.to_lowercase()),
        ("capitalize", Some(Val::Str(text)), None) => {
            Val::Str(crate::eval::stdlib::capitalized(&text))
        }
        ("strip", Some(Val::Str(text)), None) => Val::Str(text.trim().to_owned()),
        ("length" | "size", Some(value), None) => match value {
            Val::Str(text) => Val::Int(text.chars().count() as i64),
            Val::Rich(rich) if matches!(*rich, crate::eval::rich::Rich::Binary(_)) => {
                let crate::eval::rich::Rich::Binary(bytes) = *rich else {
                    return Val::Undef;
                };
                Val::Int(bytes.len() as i64)
            }
            Val::Array(items) => Val::Int(items.len() as i64),
            Val::Hash(entries) => Val::Int(entries.len() as i64),
            _ => arity(evaluator, name, "a string, an array or a hash", span),
        },
        ("empty", Some(value), None) => Val::Bool(match value {
            Val::Str(text) => text.is_empty(),
            Val::Array(items) => items.is_empty(),
            Val::Hash(entries) => entries.is_empty(),
            Val::Undef => true,
            _ => false,
        }),
        ("keys", Some(Val::Hash(entries)), None) => {
            Val::Array(entries.into_iter().map(|(key, _)| key).collect())
        }
        ("values", Some(Val::Hash(entries)), None) => {
            Val::Array(entries.into_iter().map(|(_, value)| value).collect())
        }
        ("flatten", Some(value), None) => {
            let mut out = Vec::new();
            flatten_into(value, &mut out);
            Val::Array(out)
        }
        ("unique", Some(Val::Array(items)), None) => {
            // By their structure, in one pass (comparing each with every other would take
            // a million squared steps for a million items).
            let mut seen = std::collections::HashSet::new();
            Val::Array(
                items
                    .into_iter()
                    .filter(|item| seen.insert(format!("{item:?}")))
                    .collect(),
            )
        }
        ("sort", Some(Val::Array(items)), None) => match sort(items) {
            Ok(sorted) => Val::Array(sorted),
            Err(message) => {
                evaluator.report(
                    Severity::Error,
                    DiagnosticCode::TypeMismatch,
                    span,
                    format!("`sort` {message}"),
                );
                Val::Undef
            }
        },
        (known, _, _) if FUNCTIONS.contains(&known) => {
            evaluator
                .report(
                    Severity::Error,
                    DiagnosticCode::BadArgument,
                    span,
                    format!("wrong arguments for `{name}`"),
                )
                .help = Some(format!(
                "see the language reference for `{name}` (docs/language.md)"
            ));
            Val::Undef
        }
        _ => {
            evaluator
                .report(
                    Severity::Error,
                    DiagnosticCode::UnknownFunction,
                    span,
                    format!("unknown function `{name}`"),
                )
                .help = Some(suggest(name));
            Val::Undef
        }
    }
}

fn iterate(
    evaluator: &mut Evaluator<'_>,
    name: &str,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    let Some(lambda) = lambda else {
        return arity(
            evaluator,
            name,
            "a lambda: `$list.each |$item| { ... }`",
            span,
        );
    };
    let mut args = args.into_iter();
    let collection = match args.next().unwrap_or(Val::Undef) {
        // `Integer[1, 3].each`: a type of integers with both bounds is iterable.
        Val::Type(ptype)
            if matches!(*ptype, PType::Integer(from, to)
                if from != i64::MIN && to != i64::MAX && from <= to
                    && to.saturating_sub(from) < MAX_ITERATIONS) =>
        {
            let PType::Integer(from, to) = *ptype else {
                return Val::Undef;
            };
            Val::Array((from..=to).map(Val::Int).collect())
        }
        other => other,
    };
    let is_hash = matches!(collection, Val::Hash(_));
    let n_params = lambda.params.len();
    // Every step is made ready before the first runs: the compile's work counts them.
    let n_steps = match &collection {
        Val::Array(items) => items.len() as u64,
        Val::Hash(entries) => entries.len() as u64,
        Val::Int(count) => u64::try_from(*count)
            .unwrap_or(0)
            .min(MAX_ITERATIONS as u64),
        _ => 0,
    };
    if !evaluator.count_work(n_steps, span) {
        return Val::Undef;
    }
    // Each element as the lambda's arguments: `|$value|`, `|$index, $value|`,
    // `|$key, $value|` or `|$pair|` for hashes.
    // Made one at a time, as the loop goes.
    let items: Box<dyn Iterator<Item = (Val, Vec<Val>)>> = match collection {
        Val::Array(items) => Box::new(items.into_iter().enumerate().map(move |(index, item)| {
            let call_args = if n_params >= 2 {
                vec![Val::Int(index as i64), item.clone()]
            } else {
                vec![item.clone()]
            };
            (item, call_args)
        })),
        Val::Hash(entries) => Box::new(entries.into_iter().map(move |(key, value)| {
            let pair = Val::Array(vec![key.clone(), value.clone()]);
            let call_args = if n_params >= 2 {
                vec![key, value]
            } else {
                vec![pair.clone()]
            };
            (pair, call_args)
        })),
        Val::Int(count) if (0..=MAX_ITERATIONS).contains(&count) => {
            Box::new((0..count).map(|i| (Val::Int(i), vec![Val::Int(i)])))
        }
        Val::Int(count) if count > MAX_ITERATIONS => {
            evaluator.report(
                Severity::Error,
                DiagnosticCode::IterationLimit,
                span,
                format!("`{name}` over {count} steps is more than the limit of {MAX_ITERATIONS}"),
            );
            return Val::Undef;
        }
        other => {
            evaluator.report(
                Severity::Error,
                DiagnosticCode::BadArgument,
                span,
                format!(
                    "`{name}` iterates over an array, a hash or a count, not {} `{}`",
                    other.type_name(),
                    other.to_display()
                ),
            );
            return Val::Undef;
        }
    };
    match name {
        "each" => {
            let mut original = Vec::new();
            let mut items = items;
            while let Some((item, call_args)) = items.next() {
                evaluator.run_lambda(lambda, call_args);
                original.push(item);
                if evaluator.iteration_ends() {
                    // `each` gives what it iterated over, all of it, as Puppet's does.
                    original.extend(items.map(|(item, _)| item));
                    break;
                }
            }
            Val::Array(original)
        }
        "map" => {
            // Measured as it grows: each result could be a copy of a large value.
            let mut total = 0;
            let mut mapped = Vec::new();
            for (_, call_args) in items {
                let value = evaluator.run_lambda(lambda, call_args);
                if evaluator.iteration_ends() {
                    break;
                }
                if !evaluator.grow(&mut total, &value, span) {
                    return Val::Undef;
                }
                mapped.push(value);
            }
            Val::Array(mapped)
        }
        // `any` and `all` stop at the first entry that decides.
        "any" | "all" => {
            let any = name == "any";
            for (_, call_args) in items {
                let holds = evaluator.run_lambda(lambda, call_args).truthy();
                if evaluator.iteration_ends() {
                    break;
                }
                if holds == any {
                    return Val::Bool(any);
                }
            }
            Val::Bool(!any)
        }
        // The entries the lambda is true for, then the others.
        "partition" => {
            let (mut yes, mut no) = (Vec::new(), Vec::new());
            for (item, call_args) in items {
                let holds = evaluator.run_lambda(lambda, call_args).truthy();
                if evaluator.iteration_ends() {
                    break;
                }
                if holds { yes.push(item) } else { no.push(item) }
            }
            Val::Array(vec![Val::Array(yes), Val::Array(no)])
        }
        // Each entry (a hash's as a `[key, value]` pair) under what the lambda returns.
        "group_by" => {
            let mut groups: Vec<(Val, Val)> = Vec::new();
            for (item, call_args) in items {
                let key = evaluator.run_lambda(lambda, call_args);
                if evaluator.iteration_ends() {
                    break;
                }
                match groups
                    .iter_mut()
                    .find(|(existing, _)| existing.equals(&key))
                {
                    Some((_, Val::Array(members))) => members.push(item),
                    _ => groups.push((key, Val::Array(vec![item]))),
                }
            }
            Val::Hash(groups)
        }
        "filter" | "reject" => {
            let keep = name == "filter";
            let mut chosen = Vec::new();
            for (item, call_args) in items {
                let holds = evaluator.run_lambda(lambda, call_args).truthy();
                if evaluator.iteration_ends() {
                    break;
                }
                if holds == keep {
                    chosen.push(item);
                }
            }
            let kept = chosen.into_iter();
            if is_hash {
                // A hash filters to a hash: each kept item is a `[key, value]` pair.
                Val::Hash(
                    kept.filter_map(|pair| match pair {
                        Val::Array(mut pair) if pair.len() == 2 => {
                            let value = pair.pop()?;
                            Some((pair.pop()?, value))
                        }
                        _ => None,
                    })
                    .collect(),
                )
            } else {
                Val::Array(kept.collect())
            }
        }
        _ => {
            let mut items = items.map(|(item, _)| item);
            let mut memo = match args.next() {
                Some(start) => start,
                None => items.next().unwrap_or(Val::Undef),
            };
            for item in items {
                let next = evaluator.run_lambda(lambda, vec![memo.clone(), item]);
                if evaluator.iteration_ends() {
                    break;
                }
                memo = next;
            }
            memo
        }
    }
}

/// `slice(collection, n)`: the entries (a hash's as `[key, value]` pairs) in chunks of
/// `n`, the last maybe shorter; with a lambda, each chunk to it (its elements as the
/// arguments when it takes several) and the collection back.
fn slice(
    evaluator: &mut Evaluator<'_>,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    let (items, size) = match args.as_slice() {
        [Val::Array(items), Val::Int(size)] if *size > 0 => (items.clone(), *size),
        [Val::Hash(entries), Val::Int(size)] if *size > 0 => (
            entries
                .iter()
                .map(|(key, value)| Val::Array(vec![key.clone(), value.clone()]))
                .collect(),
            *size,
        ),
        _ => {
            return arity(
                evaluator,
                "slice",
                "an array or hash and a chunk size of at least 1",
                span,
            );
        }
    };
    let chunks: Vec<Val> = items
        .chunks(usize::try_from(size).unwrap_or(usize::MAX))
        .map(|chunk| Val::Array(chunk.to_vec()))
        .collect();
    let Some(lambda) = lambda else {
        return Val::Array(chunks);
    };
    for chunk in &chunks {
        let call = match chunk {
            Val::Array(items) if lambda.params.len() > 1 => items.clone(),
            chunk => vec![chunk.clone()],
        };
        evaluator.run_lambda(lambda, call);
        if evaluator.iteration_ends() {
            break;
        }
    }
    args.into_iter().next().unwrap_or(Val::Undef)
}

/// What to say of an unknown function: the known ones whose names are close.
fn suggest(name: &str) -> String {
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut previous = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let current = row[j + 1];
                row[j + 1] = (previous + usize::from(ca != *cb))
                    .min(row[j] + 1)
                    .min(current + 1);
                previous = current;
            }
        }
        row[b.len()]
    }
    let mut close: Vec<&str> = FUNCTIONS
        .iter()
        .chain(crate::eval::stdlib::names())
        .filter(|known| !known.starts_with("new_") && !known.starts_with("wconverge_"))
        .filter(|known| distance(name, known) <= 2 || (name.len() > 3 && known.contains(name)))
        .copied()
        .collect();
    close.sort_unstable();
    close.dedup();
    if close.is_empty() {
        "functions are in docs/language.md, Functions; wconverge runs no Ruby, so a module's \
         Ruby functions (lib/puppet/functions) are not available"
            .to_owned()
    } else {
        format!(
            "did you mean {}?",
            close
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}
