//! A large catalog parsed on two cores: its resources cut in two between two of them,
//! the first part parsed on a thread of its own while the rest of the catalog is parsed
//! here. Nothing is trusted about the cut: the first part must parse whole as a list of
//! resources, which holds only when the cut lies between two elements of the array (a
//! cut inside a string or a nested value leaves that part unbalanced), and then the
//! catalog is exactly the rest with those resources put back in front. Anything else,
//! and the caller parses the catalog at once, as it always could.

use crate::{Catalog, Resource};

/// Below this size a catalog is parsed on one core: a thread costs more than it saves.
const PARALLEL_BYTES: usize = 256 * 1024;

/// How far past the middle a cut is looked for.
const CUT_SEARCH_BYTES: usize = 64 * 1024;

/// The catalog in `text`, parsed in two parts at once; `None` when it is small, when the
/// machine has one core, when its layout is not the usual one (`format_version` and
/// `node` before `resources`, each resource an object that starts with `type`) or when
/// either part does not parse (the caller's parse of the whole then says why).
pub(crate) fn parse_in_two(text: &str) -> Option<Catalog> {
    if text.len() < PARALLEL_BYTES
        || std::thread::available_parallelism().map_or(1, usize::from) < 2
    {
        return None;
    }
    let bytes = text.as_bytes();
    let open = resources_open(bytes)?;
    let cut = cut_near(bytes, open, open + (bytes.len() - open) / 2)?;
    // `text[open]` is `[` and `text[cut]` is `,`: both split the text on character
    // boundaries.
    let first = format!("[{}]", &text[open + 1..cut]);
    let rest = [&text[..=open], &text[cut + 1..]].concat();
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .name("wconverge-parse".to_owned())
            // As deep a stack as the main thread's, for a deeply nested value.
            .stack_size(8 << 20)
            .spawn_scoped(scope, || serde_json::from_str::<Vec<Resource>>(&first).ok())
            .ok()?;
        let catalog = serde_json::from_str::<Catalog>(&rest).ok();
        let mut resources = helper.join().ok()??;
        let mut catalog = catalog?;
        resources.append(&mut catalog.resources);
        catalog.resources = resources;
        Some(catalog)
    })
}

/// The offset of the `[` that opens the top-level `resources` array, when only
/// `format_version` (a number) and `node` (a string or `null`) come before it.
fn resources_open(bytes: &[u8]) -> Option<usize> {
    let mut at = whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        let (key, end) = string(bytes, whitespace(bytes, at))?;
        at = whitespace(bytes, end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = whitespace(bytes, at + 1);
        at = match key {
            b"resources" => return (bytes.get(at) == Some(&b'[')).then_some(at),
            b"format_version" => {
                let digits = bytes[at..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                (digits > 0).then_some(at + digits)?
            }
            b"node" if bytes[at..].starts_with(b"null") => at + 4,
            b"node" => string(bytes, at)?.1,
            _ => return None,
        };
        at = whitespace(bytes, at);
        if bytes.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
}

/// A string at `at` (its opening quote): its bytes as written (escapes not undone) and
/// the offset after its closing quote.
fn string(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match bytes.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some((&bytes[at + 1..i], i + 1)),
            _ => i += 1,
        }
    }
}

fn whitespace(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// A comma after `from` that looks like one between two resources: `}` before it, `{`
/// and then the key `"type"` after it (whitespace between). Inside a string the quote
/// would be escaped, so this is mostly between two objects; the parse of the parts says
/// whether it was between two resources.
fn cut_near(bytes: &[u8], open: usize, from: usize) -> Option<usize> {
    let end = bytes.len().min(from + CUT_SEARCH_BYTES);
    (from.max(open + 1)..end).find(|&comma| {
        bytes[comma] == b','
            && bytes[open + 1..comma]
                .iter()
                .rev()
                .find(|b| !b.is_ascii_whitespace())
                == Some(&b'}')
            && {
                let brace = whitespace(bytes, comma + 1);
                bytes.get(brace) == Some(&b'{')
                    && bytes[whitespace(bytes, brace + 1)..].starts_with(b"\"type\"")
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A catalog of `n` resources, written as a generator would (`type` first), each
    /// with a string holding what looks like a cut (escaped, as JSON writes it), and
    /// every seventh with a nested list of objects that start with `type`; compact, or
    /// as `Catalog::to_json` writes it.
    fn catalog_text(n: usize, pretty: bool) -> String {
        let resources: Vec<String> = (0..n)
            .map(|i| {
                let list = if i % 7 == 0 {
                    format!(r#","list":[{{"type":"a","n":{i}}},{{"type":"b","n":[{i},{i}]}}]"#)
                } else {
                    String::new()
                };
                format!(
                    r#"{{"type":"file","title":"/srv/r{i}","attributes":{{"content":"line {i}\n}}, {{\"type\": \"file\", \"title\": \"x\\\"\"}}\n","mode":"0644"{list}}}}}"#
                )
            })
            .collect();
        let text = format!(
            r#"{{"format_version":{},"node":"web\"1\\","resources":[{}],"edges":[{{"source":"File[/srv/r1]","target":"File[/srv/r2]","kind":"before"}}],"node_attributes":{{"default":{{"resources":[{{"type":"nested"}}]}}}}}}"#,
            crate::FORMAT_VERSION,
            resources.join(",")
        );
        if pretty {
            serde_json::from_str::<Catalog>(&text)
                .expect("a catalog")
                .to_json()
        } else {
            text
        }
    }

    #[test]
    fn a_large_catalog_parsed_in_two_is_the_catalog_parsed_at_once() {
        for pretty in [false, true] {
            let text = catalog_text(3_000, pretty);
            assert!(text.len() > PARALLEL_BYTES);
            let whole: Catalog = serde_json::from_str(&text).expect("parses");
            let open = resources_open(text.as_bytes()).expect("usual layout");
            assert!(text[open..].starts_with('['));
            let in_two = parse_in_two(&text).expect("cut between two resources");
            assert_eq!(in_two, whole);
            assert_eq!(in_two.resources.len(), 3_000);
        }
    }

    #[test]
    fn a_cut_inside_a_nested_value_or_a_string_is_never_taken() {
        let text = catalog_text(3_000, false);
        let bytes = text.as_bytes();
        let open = resources_open(bytes).expect("usual layout");
        // The comma inside the nested list of the resource at the middle looks like a
        // cut: the first part then does not parse, and nothing is returned for it.
        let nested = text[open + (text.len() - open) / 2..]
            .find("{\"type\":\"a\"")
            .map(|at| at + open + (text.len() - open) / 2)
            .expect("a nested list after the middle");
        let inside = cut_near(bytes, open, nested).expect("a cut after it");
        assert_eq!(&text[inside..inside + 2], ",{");
        assert!(
            serde_json::from_str::<Vec<Resource>>(&format!("[{}]", &text[open + 1..inside]))
                .is_err()
        );
        // A comma inside a string is never one: the quote after it is escaped.
        let in_string = text.find("}, {\\\"type").expect("the string");
        assert_ne!(cut_near(bytes, open, in_string), Some(in_string + 1));
    }

    #[test]
    fn an_unusual_layout_or_a_broken_catalog_is_left_to_the_parse_of_the_whole() {
        let text = catalog_text(3_000, false);
        // Another key before the resources: another layout, parsed at once.
        assert!(
            resources_open(b"{\"format_version\": 1, \"edges\": [], \"resources\": []}").is_none()
        );
        assert!(resources_open(b"[]").is_none());
        let spaced = "{ \"format_version\" : 1 , \"node\" : null , \"resources\" : [ ] }";
        assert_eq!(resources_open(spaced.as_bytes()), spaced.find('['));
        // A broken resource in either part: nothing, and the whole parse says where.
        let broken = text.replacen("\"mode\":\"0644\"", "\"mode\":", 1);
        assert!(parse_in_two(&broken).is_none());
        let last = text.rfind("\"mode\":\"0644\"").expect("the last resource");
        let broken = format!("{}\"mode\":{}", &text[..last], &text[last + 13..]);
        assert!(parse_in_two(&broken).is_none());
        assert!(crate::Catalog::from_json(&broken).is_err());
    }
}
