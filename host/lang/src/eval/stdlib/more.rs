//! More of Puppet's core functions: `call`, `convert_to`, `create_resources`, the
//! digests (`md5`, `sha1`, `digest`), `shellquote`, `tree_each` and `fqdn_rand`, each
//! with the results Puppet's function reference gives.

use super::error;
use crate::diagnostic::{DiagnosticCode, Severity, Span};
use crate::eval::Evaluator;
use crate::eval::value::{Val, flatten_into};
use crate::syntax::Lambda;

/// The functions this module has.
pub(crate) const MORE: &[&str] = &[
    "call",
    "convert_to",
    "create_resources",
    "md5",
    "sha1",
    "digest",
    "shellquote",
    "tree_each",
    "fqdn_rand",
    "strftime",
];

/// Calls `name`, one of [`MORE`].
pub(super) fn call(
    evaluator: &mut Evaluator<'_>,
    name: &str,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    match name {
        "call" => {
            let mut args = args.into_iter();
            let Some(Val::Str(function)) = args.next() else {
                return error(
                    evaluator,
                    span,
                    name,
                    "takes a function's name first".into(),
                );
            };
            evaluator.call_by_name(&function, args.collect(), lambda, span)
        }
        "convert_to" => {
            let mut args = args.into_iter();
            let value = args.next().unwrap_or(Val::Undef);
            let target = args.next().unwrap_or(Val::Undef);
            let mut new_args = vec![target, value];
            new_args.extend(args);
            crate::eval::functions::call(evaluator, "new", new_args, lambda, span)
        }
        "create_resources" => {
            create_resources(evaluator, args, span);
            Val::Undef
        }
        "md5" | "sha1" | "digest" => match args.first() {
            Some(Val::Str(text)) => Val::Str(hex_digest(name, text.as_bytes())),
            _ => error(evaluator, span, name, "takes a string".into()),
        },
        "shellquote" => {
            let mut words = Vec::new();
            for arg in args {
                flatten_into(arg, &mut words);
            }
            let words: Vec<String> = words.iter().map(Val::to_interpolated).collect();
            Val::Str(shellquote(&words))
        }
        "tree_each" => tree_each(evaluator, args, lambda, span),
        "strftime" => match crate::eval::rich::strftime(args) {
            Ok(text) => Val::Str(text),
            Err(message) => error(evaluator, span, "strftime", message),
        },
        _ => fqdn_rand(evaluator, args),
    }
}

/// The digest `name` names, in lower-case hexadecimal; `digest` is Puppet's default
/// algorithm, SHA-256.
fn hex_digest(name: &str, bytes: &[u8]) -> String {
    let digest: Vec<u8> = match name {
        "md5" => {
            use md5::Digest;
            md5::Md5::digest(bytes).to_vec()
        }
        "sha1" => {
            use sha1::Digest;
            sha1::Sha1::digest(bytes).to_vec()
        }
        _ => {
            use sha2::Digest;
            sha2::Sha256::digest(bytes).to_vec()
        }
    };
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Puppet's `shellquote`: each word as a shell reads it back, unquoted when it is all
/// safe characters, else in the quotes that need the fewest escapes.
pub(crate) fn shellquote(words: &[String]) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%_+=:,./-".contains(c);
    let dangerous = |c: char| "!\"`$\\".contains(c);
    words
        .iter()
        .map(|word| {
            if !word.is_empty() && word.chars().all(safe) {
                word.clone()
            } else if !word.chars().any(dangerous) {
                format!("\"{word}\"")
            } else if !word.contains('\'') {
                format!("'{word}'")
            } else {
                let mut quoted = String::from("\"");
                for c in word.chars() {
                    if dangerous(c) {
                        quoted.push('\\');
                    }
                    quoted.push(c);
                }
                quoted.push('"');
                quoted
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `create_resources(type, { title => attributes }, defaults)`: declares each resource,
/// as many resource expressions would (a title declared already is an error).
fn create_resources(evaluator: &mut Evaluator<'_>, args: Vec<Val>, span: Span) {
    let mut args = args.into_iter();
    let (Some(Val::Str(type_name)), Some(Val::Hash(entries))) = (args.next(), args.next()) else {
        error(
            evaluator,
            span,
            "create_resources",
            "takes a type's name and a hash of titles to attributes".into(),
        );
        return;
    };
    let defaults = match args.next() {
        Some(Val::Hash(defaults)) => defaults,
        _ => Vec::new(),
    };
    let type_name = type_name.trim_start_matches("::").to_ascii_lowercase();
    if type_name == "class" {
        evaluator
            .report(
                Severity::Error,
                DiagnosticCode::BadArgument,
                span,
                "`create_resources('class', ...)` is not supported".into(),
            )
            .help = Some(
            "declare each class with `class { 'name': param => value }`, or with `include` \
             and Hiera"
                .into(),
        );
        return;
    }
    for (title, attributes) in entries {
        let mut attributes = match attributes {
            Val::Hash(attributes) => attributes,
            _ => Vec::new(),
        };
        for (key, value) in &defaults {
            if !attributes.iter().any(|(existing, _)| existing == key) {
                attributes.push((key.clone(), value.clone()));
            }
        }
        let title = title.to_interpolated();
        if evaluator.is_declared(&type_name, &title) {
            evaluator
                .report(
                    Severity::Error,
                    DiagnosticCode::DuplicateTitle,
                    span,
                    format!(
                        "`create_resources` declares `{}` again",
                        Val::reference(&type_name, &title).to_display()
                    ),
                )
                .help = Some(
                "declare it once; `ensure_resources` declares only what is not declared".into(),
            );
            continue;
        }
        evaluator.ensure_resource(&type_name, &title, attributes, span);
    }
}

/// `tree_each(value, options) |$path, $value| { }`: the tree itself, then every container
/// and value in it, depth first (or breadth first), each with its path (the keys and
/// indexes that lead to it); without a lambda, the list of `[path, value]`.
fn tree_each(
    evaluator: &mut Evaluator<'_>,
    args: Vec<Val>,
    lambda: Option<&Lambda>,
    span: Span,
) -> Val {
    let mut args = args.into_iter();
    let tree = args.next().unwrap_or(Val::Undef);
    let options = match args.next() {
        Some(Val::Hash(options)) => options,
        None => Vec::new(),
        Some(other) => {
            return error(
                evaluator,
                span,
                "tree_each",
                format!("takes its options as a hash, not {}", other.type_name()),
            );
        }
    };
    let option = |name: &str| {
        options
            .iter()
            .find(|(key, _)| *key == Val::Str(name.to_owned()))
            .map(|(_, value)| value.clone())
    };
    let breadth = matches!(option("order"), Some(Val::Str(order)) if order == "breadth_first");
    let containers = !matches!(option("include_containers"), Some(Val::Bool(false)));
    let values = !matches!(option("include_values"), Some(Val::Bool(false)));
    let root = !matches!(option("include_root"), Some(Val::Bool(false)));
    if !matches!(tree, Val::Array(_) | Val::Hash(_)) {
        return error(
            evaluator,
            span,
            "tree_each",
            "takes an array or a hash".into(),
        );
    }
    let mut visited: Vec<(Vec<Val>, Val)> = Vec::new();
    let mut queue: std::collections::VecDeque<(Vec<Val>, Val)> =
        std::collections::VecDeque::from([(Vec::new(), tree)]);
    while let Some((path, value)) = if breadth {
        queue.pop_front()
    } else {
        queue.pop_back()
    } {
        if !evaluator.count_work(1, span) {
            return Val::Undef;
        }
        let children: Vec<(Val, Val)> = match &value {
            Val::Array(items) => items
                .iter()
                .enumerate()
                .map(|(at, item)| (Val::Int(at as i64), item.clone()))
                .collect(),
            Val::Hash(entries) => entries.clone(),
            _ => Vec::new(),
        };
        let container = matches!(value, Val::Array(_) | Val::Hash(_));
        let wanted = if path.is_empty() {
            root && containers
        } else if container {
            containers
        } else {
            values
        };
        let mut next: Vec<(Vec<Val>, Val)> = children
            .into_iter()
            .map(|(key, child)| {
                let mut child_path = path.clone();
                child_path.push(key);
                (child_path, child)
            })
            .collect();
        if wanted {
            visited.push((path, value));
        }
        if !breadth {
            next.reverse();
        }
        queue.extend(next);
    }
    let Some(lambda) = lambda else {
        return Val::Array(
            visited
                .into_iter()
                .map(|(path, value)| Val::Array(vec![Val::Array(path), value]))
                .collect(),
        );
    };
    for (path, value) in visited {
        // `|$path, $value|`, or `|$value|` alone, as Puppet gives them.
        let call = if lambda.params.len() >= 2 {
            vec![Val::Array(path), value]
        } else {
            vec![value]
        };
        evaluator.run_lambda(lambda, call);
        if evaluator.iteration_ends() {
            break;
        }
    }
    Val::Undef
}

/// `fqdn_rand(max, seed, downcase)`: the number Puppet gives this node, from 0 to
/// max - 1: Ruby's Mersenne Twister seeded with the MD5 of `fqdn:max:seed`.
fn fqdn_rand(evaluator: &mut Evaluator<'_>, args: Vec<Val>) -> Val {
    let mut args = args.into_iter();
    let max = match args.next() {
        Some(Val::Int(max)) => max,
        Some(Val::Str(text)) => super::super::value::numeric_string(&text)
            .and_then(|value| match value {
                Val::Int(max) => Some(max),
                _ => None,
            })
            .unwrap_or(0),
        _ => 0,
    };
    let seed = args
        .next()
        .map(|seed| seed.to_interpolated())
        .unwrap_or_default();
    let downcase = args.next().is_some_and(|flag| flag.truthy());
    let fqdn = evaluator
        .peek_variable("facts")
        .and_then(|facts| match facts {
            Val::Hash(entries) => entries
                .into_iter()
                .find(|(key, _)| *key == Val::Str("networking".into()))
                .and_then(|(_, networking)| match networking {
                    Val::Hash(entries) => entries
                        .into_iter()
                        .find(|(key, _)| *key == Val::Str("fqdn".into()))
                        .map(|(_, fqdn)| fqdn.to_interpolated()),
                    _ => None,
                }),
            _ => None,
        })
        .unwrap_or_default();
    let fqdn = if downcase { fqdn.to_lowercase() } else { fqdn };
    if max <= 0 {
        return Val::Int(0);
    }
    let text = format!("{fqdn}:{max}:{seed}");
    use md5::Digest;
    let digest = md5::Md5::digest(text.as_bytes());
    // The digest as Ruby's integer, in 32-bit words from the least significant.
    let key: Vec<u32> = digest
        .chunks(4)
        .rev()
        .map(|word| u32::from_be_bytes([word[0], word[1], word[2], word[3]]))
        .collect();
    let mut key = key;
    while key.len() > 1 && key.last() == Some(&0) {
        key.pop();
    }
    let mut twister = Twister::by_array(&key);
    Val::Int(twister.below(u64::try_from(max).unwrap_or(0)) as i64)
}

/// Ruby's MT19937.
struct Twister {
    state: [u32; 624],
    index: usize,
}

impl Twister {
    fn new(seed: u32) -> Twister {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            state[i] = 1_812_433_253u32
                .wrapping_mul(state[i - 1] ^ (state[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Twister { state, index: 624 }
    }

    fn by_array(key: &[u32]) -> Twister {
        let mut twister = Twister::new(19_650_218);
        let state = &mut twister.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624.max(key.len()) {
            state[i] = (state[i] ^ (state[i - 1] ^ (state[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                state[0] = state[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            state[i] = (state[i]
                ^ (state[i - 1] ^ (state[i - 1] >> 30)).wrapping_mul(1_566_083_941))
            .wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                state[0] = state[623];
                i = 1;
            }
        }
        state[0] = 0x8000_0000;
        twister
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for k in 0..624 {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % 624] & 0x7fff_ffff);
                let mut value = self.state[(k + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    value ^= 0x9908_b0df;
                }
                self.state[k] = value;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Ruby's `rand(max)` for an integer: bits masked to the limit, retried above it.
    fn below(&mut self, max: u64) -> u64 {
        let limit = max - 1;
        if limit == 0 {
            return 0;
        }
        let mut mask = limit;
        for shift in [1, 2, 4, 8, 16, 32] {
            mask |= mask >> shift;
        }
        loop {
            let mut value = 0u64;
            let mut over = false;
            for word in (0..2).rev() {
                if (mask >> (word * 32)) & 0xffff_ffff != 0 {
                    value |= u64::from(self.next_u32()) << (word * 32);
                    value &= mask;
                    if limit < value {
                        over = true;
                        break;
                    }
                }
            }
            if !over {
                return value;
            }
        }
    }
}
