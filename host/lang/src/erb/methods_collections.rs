//! The methods of Ruby's arrays and hashes that templates call (`each`, `map`, `sort_by`,
//! `join`, `keys`...), with Ruby's results and orders.

use super::Error;
use super::parse::Block;
use super::run::{RVal, Run};
use std::cmp::Ordering;

/// Most elements a method builds (a `flatten` or `*` cannot take all memory).
const MAX_ITEMS: usize = 1_000_000;

fn need_block<'b>(block: Option<&'b Block>, name: &str, line: u32) -> Result<&'b Block, Error> {
    block.ok_or_else(|| {
        Error::new(
            format!("`{name}` without a block is not supported here"),
            line,
        )
    })
}

fn sort_values(items: &mut [RVal], line: u32) -> Result<(), Error> {
    sort_keyed(items, |item| item, line)
}

/// Sorts `items` by Ruby's `<=>` of their keys; values it cannot order are Ruby's
/// error ("comparison of String with 1 failed").
fn sort_keyed<T>(items: &mut [T], key: impl Fn(&T) -> &RVal, line: u32) -> Result<(), Error> {
    let mut failed = None;
    items.sort_by(|a, b| {
        let (a, b) = (key(a), key(b));
        a.compare(b).unwrap_or_else(|| {
            failed = Some(format!(
                "comparison of {} with {} failed",
                a.class(),
                b.inspect()
            ));
            Ordering::Equal
        })
    });
    match failed {
        Some(message) => Err(Error::new(message, line)),
        None => Ok(()),
    }
}

/// Sorts `items` by the keys a block gives them, as `sort_by` does.
fn sort_by_keys(
    run: &mut Run<'_>,
    items: Vec<RVal>,
    block: &Block,
    line: u32,
) -> Result<Vec<RVal>, Error> {
    let mut keyed = Vec::with_capacity(items.len());
    for item in items {
        let key = run.call_block(block, vec![item.clone()], line)?;
        keyed.push((key, item));
    }
    sort_keyed(&mut keyed, |(key, _)| key, line)?;
    Ok(keyed.into_iter().map(|(_, item)| item).collect())
}

fn flatten(
    items: Vec<RVal>,
    depth: Option<i64>,
    out: &mut Vec<RVal>,
    line: u32,
) -> Result<(), Error> {
    for item in items {
        match item {
            RVal::Array(inner) if depth.is_none_or(|d| d > 0) => {
                flatten(inner, depth.map(|d| d - 1), out, line)?;
            }
            other => {
                if out.len() >= MAX_ITEMS {
                    return Err(Error::new("an array of more than 1,000,000 elements", line));
                }
                out.push(other);
            }
        }
    }
    Ok(())
}

fn index_of(len: usize, index: i64) -> Option<usize> {
    let len = len as i64;
    let at = if index < 0 { index + len } else { index };
    (0..len).contains(&at).then_some(at as usize)
}

pub(super) fn array(
    run: &mut Run<'_>,
    items: Vec<RVal>,
    name: &str,
    args: Vec<RVal>,
    block: Option<&Block>,
    line: u32,
) -> Result<RVal, Error> {
    Ok(match (name, args.as_slice()) {
        ("each", []) => {
            let block = need_block(block, name, line)?;
            for item in &items {
                run.call_block(block, vec![item.clone()], line)?;
            }
            RVal::Array(items)
        }
        ("each_with_index", []) => {
            let block = need_block(block, name, line)?;
            for (at, item) in items.iter().enumerate() {
                run.call_block(block, vec![item.clone(), RVal::Int(at as i64)], line)?;
            }
            RVal::Array(items)
        }
        ("each_slice", [RVal::Int(size)]) if *size > 0 => {
            let slices: Vec<RVal> = items
                .chunks(*size as usize)
                .map(|chunk| RVal::Array(chunk.to_vec()))
                .collect();
            match block {
                Some(block) => {
                    for slice in slices {
                        run.call_block(block, vec![slice], line)?;
                    }
                    RVal::Nil
                }
                None => RVal::Array(slices),
            }
        }
        ("map" | "collect" | "flat_map" | "collect_concat", []) => {
            let block = need_block(block, name, line)?;
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let value = run.call_block(block, vec![item], line)?;
                match value {
                    RVal::Array(inner) if name.starts_with("flat") || name == "collect_concat" => {
                        out.extend(inner)
                    }
                    value => out.push(value),
                }
            }
            RVal::Array(out)
        }
        ("select" | "filter" | "reject" | "find_all", []) => {
            let block = need_block(block, name, line)?;
            let mut out = Vec::new();
            for item in items {
                let keep = run.call_block(block, vec![item.clone()], line)?.truthy();
                if keep != (name == "reject") {
                    out.push(item);
                }
            }
            RVal::Array(out)
        }
        ("find" | "detect", []) => {
            let block = need_block(block, name, line)?;
            for item in items {
                if run.call_block(block, vec![item.clone()], line)?.truthy() {
                    return Ok(item);
                }
            }
            RVal::Nil
        }
        ("any?" | "all?" | "none?", []) => {
            let mut results = Vec::new();
            for item in items {
                results.push(match block {
                    Some(block) => run.call_block(block, vec![item], line)?.truthy(),
                    None => item.truthy(),
                });
            }
            RVal::Bool(match name {
                "any?" => results.iter().any(|r| *r),
                "all?" => results.iter().all(|r| *r),
                _ => !results.iter().any(|r| *r),
            })
        }
        ("count", []) if block.is_some() => {
            let block = need_block(block, name, line)?;
            let mut count = 0;
            for item in items {
                if run.call_block(block, vec![item], line)?.truthy() {
                    count += 1;
                }
            }
            RVal::Int(count)
        }
        ("count", [value]) => {
            RVal::Int(items.iter().filter(|item| item.equals(value)).count() as i64)
        }
        ("length" | "size" | "count", []) => RVal::Int(items.len() as i64),
        ("empty?", []) => RVal::Bool(items.is_empty()),
        ("include?" | "member?", [value]) => {
            RVal::Bool(items.iter().any(|item| item.equals(value)))
        }
        ("index" | "find_index", [value]) => items
            .iter()
            .position(|item| item.equals(value))
            .map_or(RVal::Nil, |at| RVal::Int(at as i64)),
        ("first", []) => items.first().cloned().unwrap_or(RVal::Nil),
        ("last", []) => items.last().cloned().unwrap_or(RVal::Nil),
        ("first", [RVal::Int(n)]) => {
            RVal::Array(items.iter().take((*n).max(0) as usize).cloned().collect())
        }
        ("last", [RVal::Int(n)]) => {
            let n = ((*n).max(0) as usize).min(items.len());
            RVal::Array(items[items.len() - n..].to_vec())
        }
        ("join", []) => RVal::Str(joined(items, "", line)?),
        ("join", [RVal::Str(sep)]) => RVal::Str(joined(items, sep, line)?),
        ("join", [RVal::Nil]) => RVal::Str(joined(items, "", line)?),
        ("sort", []) if block.is_none() => {
            let mut items = items;
            sort_values(&mut items, line)?;
            RVal::Array(items)
        }
        ("sort_by", []) => RVal::Array(sort_by_keys(
            run,
            items,
            need_block(block, name, line)?,
            line,
        )?),
        ("min" | "max", []) => {
            let mut items = items;
            sort_values(&mut items, line)?;
            (if name == "min" {
                items.first()
            } else {
                items.last()
            })
            .cloned()
            .unwrap_or(RVal::Nil)
        }
        ("sum", []) => {
            let mut total = RVal::Int(0);
            for item in items {
                total = super::methods::operator(run, "+", total, item, line)?;
            }
            total
        }
        ("reverse", []) => RVal::Array(items.into_iter().rev().collect()),
        ("uniq", []) => {
            let mut out: Vec<RVal> = Vec::new();
            for item in items {
                let key = match block {
                    Some(block) => run.call_block(block, vec![item.clone()], line)?,
                    None => item.clone(),
                };
                let seen = match block {
                    Some(block) => {
                        let mut seen = false;
                        for kept in &out {
                            if run.call_block(block, vec![kept.clone()], line)?.eql(&key) {
                                seen = true;
                                break;
                            }
                        }
                        seen
                    }
                    None => out.iter().any(|kept| kept.eql(&key)),
                };
                if !seen {
                    out.push(item);
                }
            }
            RVal::Array(out)
        }
        ("compact", []) => RVal::Array(
            items
                .into_iter()
                .filter(|item| *item != RVal::Nil)
                .collect(),
        ),
        ("flatten", []) | ("flatten", [RVal::Int(_)]) => {
            let depth = match args.first() {
                Some(RVal::Int(d)) => Some(*d),
                _ => None,
            };
            let mut out = Vec::new();
            flatten(items, depth, &mut out, line)?;
            RVal::Array(out)
        }
        ("to_a" | "entries", []) => RVal::Array(items),
        ("to_h", []) => {
            let mut entries: Vec<(RVal, RVal)> = Vec::new();
            for item in items {
                let RVal::Array(pair) = item else {
                    return Err(Error::new(
                        "wrong element type (expected an array of two)",
                        line,
                    ));
                };
                let [key, value] = <[RVal; 2]>::try_from(pair)
                    .map_err(|_| Error::new("wrong array length (expected 2)", line))?;
                match entries.iter_mut().find(|(known, _)| known.eql(&key)) {
                    Some(slot) => slot.1 = value,
                    None => entries.push((key, value)),
                }
            }
            RVal::Hash(entries)
        }
        ("inject" | "reduce", init) => {
            let block = need_block(block, name, line)?;
            let mut items = items.into_iter();
            let mut memo = match init {
                [init] => init.clone(),
                _ => items.next().unwrap_or(RVal::Nil),
            };
            for item in items {
                memo = run.call_block(block, vec![memo, item], line)?;
            }
            memo
        }
        ("group_by" | "partition", []) => {
            let block = need_block(block, name, line)?;
            let mut groups: Vec<(RVal, Vec<RVal>)> = Vec::new();
            for item in items {
                let key = run.call_block(block, vec![item.clone()], line)?;
                let key = if name == "partition" {
                    RVal::Bool(key.truthy())
                } else {
                    key
                };
                match groups.iter_mut().find(|(known, _)| known.eql(&key)) {
                    Some(group) => group.1.push(item),
                    None => groups.push((key, vec![item])),
                }
            }
            if name == "partition" {
                let pick = |wanted: bool| {
                    groups
                        .iter()
                        .find(|(k, _)| *k == RVal::Bool(wanted))
                        .map_or(Vec::new(), |(_, v)| v.clone())
                };
                RVal::Array(vec![RVal::Array(pick(true)), RVal::Array(pick(false))])
            } else {
                RVal::Hash(
                    groups
                        .into_iter()
                        .map(|(k, v)| (k, RVal::Array(v)))
                        .collect(),
                )
            }
        }
        ("zip", [RVal::Array(other)]) => RVal::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(at, item)| {
                    RVal::Array(vec![item, other.get(at).cloned().unwrap_or(RVal::Nil)])
                })
                .collect(),
        ),
        ("push" | "<<", _) => {
            let mut items = items;
            items.extend(args);
            RVal::Array(items)
        }
        ("delete", [value]) => {
            let found = items.iter().any(|item| item.equals(value));
            if found { value.clone() } else { RVal::Nil }
        }
        ("[]" | "at", [RVal::Int(index)]) => {
            index_of(items.len(), *index).map_or(RVal::Nil, |at| items[at].clone())
        }
        ("[]", [RVal::Int(start), RVal::Int(count)]) => match index_of(items.len() + 1, *start) {
            Some(start) if *count >= 0 => RVal::Array(
                items
                    .iter()
                    .skip(start)
                    .take(*count as usize)
                    .cloned()
                    .collect(),
            ),
            _ => RVal::Nil,
        },
        ("[]", [RVal::Range(from, to)]) => match index_of(items.len() + 1, *from) {
            Some(start) => {
                let end = if *to < 0 {
                    (items.len() as i64).saturating_add(*to)
                } else {
                    *to
                };
                RVal::Array(
                    items
                        .iter()
                        .skip(start)
                        .take(
                            usize::try_from(end.saturating_sub(start as i64).saturating_add(1))
                                .unwrap_or(0),
                        )
                        .cloned()
                        .collect(),
                )
            }
            None => RVal::Nil,
        },
        ("*", [RVal::Str(sep)]) => RVal::Str(joined(items, sep, line)?),
        (op, [other]) if ["+", "-", "&", "|", "<=>"].contains(&op) => {
            return super::methods::operator(run, op, RVal::Array(items), other.clone(), line);
        }
        _ => {
            return Err(Error::new(
                format!("undefined method `{name}' for Array"),
                line,
            ));
        }
    })
}

/// `join`: nested arrays joined too, each element's `to_s` (`nil` empty).
fn joined(items: Vec<RVal>, sep: &str, line: u32) -> Result<String, Error> {
    let mut flat = Vec::new();
    flatten(items, None, &mut flat, line)?;
    let mut out = String::new();
    for (at, item) in flat.iter().enumerate() {
        if at > 0 {
            out.push_str(sep);
        }
        out.push_str(&item.to_s());
        if out.len() > super::MAX_OUTPUT {
            return Err(Error::new("a string longer than 16 MiB (the limit)", line));
        }
    }
    Ok(out)
}

fn pairs(entries: &[(RVal, RVal)]) -> Vec<RVal> {
    entries
        .iter()
        .map(|(key, value)| RVal::Array(vec![key.clone(), value.clone()]))
        .collect()
}

pub(super) fn hash(
    run: &mut Run<'_>,
    entries: Vec<(RVal, RVal)>,
    name: &str,
    args: Vec<RVal>,
    block: Option<&Block>,
    line: u32,
) -> Result<RVal, Error> {
    Ok(match (name, args.as_slice()) {
        ("each" | "each_pair", []) => {
            let block = need_block(block, name, line)?;
            for (key, value) in &entries {
                run.call_block(
                    block,
                    vec![RVal::Array(vec![key.clone(), value.clone()])],
                    line,
                )?;
            }
            RVal::Hash(entries)
        }
        ("each_key" | "each_value", []) => {
            let block = need_block(block, name, line)?;
            for (key, value) in &entries {
                let item = if name == "each_key" { key } else { value };
                run.call_block(block, vec![item.clone()], line)?;
            }
            RVal::Hash(entries)
        }
        ("keys", []) => RVal::Array(entries.into_iter().map(|(key, _)| key).collect()),
        ("values", []) => RVal::Array(entries.into_iter().map(|(_, value)| value).collect()),
        ("length" | "size" | "count", []) => RVal::Int(entries.len() as i64),
        ("empty?", []) => RVal::Bool(entries.is_empty()),
        ("[]", [key]) => entries
            .into_iter()
            .find(|(known, _)| known.eql(key))
            .map_or(RVal::Nil, |(_, value)| value),
        ("fetch", [key, rest @ ..]) => match entries.iter().find(|(known, _)| known.eql(key)) {
            Some((_, value)) => value.clone(),
            None => match (rest, block) {
                ([default], _) => default.clone(),
                ([], Some(block)) => run.call_block(block, vec![key.clone()], line)?,
                _ => {
                    return Err(Error::new(
                        format!("key not found: {}", key.inspect()),
                        line,
                    ));
                }
            },
        },
        ("dig", keys) => {
            let mut current = RVal::Hash(entries);
            for key in keys {
                current = match (current, key) {
                    (RVal::Hash(entries), key) => entries
                        .into_iter()
                        .find(|(known, _)| known.eql(key))
                        .map_or(RVal::Nil, |(_, v)| v),
                    (RVal::Array(items), RVal::Int(index)) => {
                        index_of(items.len(), *index).map_or(RVal::Nil, |at| items[at].clone())
                    }
                    _ => RVal::Nil,
                };
            }
            current
        }
        ("key?" | "has_key?" | "include?" | "member?", [key]) => {
            RVal::Bool(entries.iter().any(|(known, _)| known.eql(key)))
        }
        ("value?" | "has_value?", [value]) => {
            RVal::Bool(entries.iter().any(|(_, known)| known.equals(value)))
        }
        ("merge", others) => {
            let mut merged = entries;
            for other in others {
                let RVal::Hash(other) = other else {
                    return Err(Error::new(
                        format!("no implicit conversion of {} into Hash", other.class()),
                        line,
                    ));
                };
                for (key, value) in other {
                    match merged.iter_mut().find(|(known, _)| known.eql(key)) {
                        Some(slot) => slot.1 = value.clone(),
                        None => merged.push((key.clone(), value.clone())),
                    }
                }
            }
            RVal::Hash(merged)
        }
        ("select" | "filter" | "reject", []) => {
            let block = need_block(block, name, line)?;
            let mut out = Vec::new();
            for (key, value) in entries {
                let keep = run
                    .call_block(block, vec![key.clone(), value.clone()], line)?
                    .truthy();
                if keep != (name == "reject") {
                    out.push((key, value));
                }
            }
            RVal::Hash(out)
        }
        ("delete", [key]) => entries
            .into_iter()
            .find(|(known, _)| known.eql(key))
            .map_or(RVal::Nil, |(_, value)| value),
        ("to_h" | "to_hash", []) => RVal::Hash(entries),
        ("to_a", []) => RVal::Array(pairs(&entries)),
        ("invert", []) => RVal::Hash(entries.into_iter().map(|(k, v)| (v, k)).collect()),
        ("sort", []) => {
            let mut items = pairs(&entries);
            sort_values(&mut items, line)?;
            RVal::Array(items)
        }
        ("==", [other]) => RVal::Bool(RVal::Hash(entries).equals(other)),
        _ => {
            // What Enumerable gives a hash: its `[key, value]` pairs.
            return array(run, pairs(&entries), name, args, block, line);
        }
    })
}
