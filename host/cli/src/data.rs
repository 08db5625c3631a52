//! Hiera's data files and `hiera.yaml`, parsed into the catalog's values: YAML (with
//! anchors and aliases, whose expansion is bounded: a "billion laughs" file is refused,
//! not expanded) and JSON.

use wconverge_catalog::Value;
use yaml_rust2::Yaml;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A data file may hold at most this many values, aliases expanded.
pub(crate) const MAX_NODES: usize = 1_000_000;

/// A data file may be this large.
pub(crate) const MAX_DATA_BYTES: u64 = 64 << 20;

/// One YAML document as a value: `null` (or an empty file) is `undef`, keys are strings.
pub(crate) fn parse_yaml(text: &str) -> Result<Value, String> {
    let mut builder = Builder::default();
    Parser::new_from_str(text)
        .load(&mut builder, false)
        .map_err(|error| error.to_string())?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    Ok(builder.done.unwrap_or(Value::Undef))
}

/// A JSON document as a value.
pub(crate) fn parse_json(text: &str) -> Result<Value, String> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|error| error.to_string())?;
    Ok(from_json(json))
}

fn from_json(json: serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Undef,
        serde_json::Value::Bool(b) => Value::Boolean(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::Array(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(entries) => Value::Hash(
            entries
                .into_iter()
                .map(|(key, value)| (key, from_json(value)))
                .collect(),
        ),
    }
}

enum Frame {
    Sequence(usize, Vec<Value>),
    Mapping(usize, Vec<(String, Value)>, Option<String>),
}

/// Builds the value from the parser's events, counting every value (an alias counts
/// what it repeats) against [`MAX_NODES`].
#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: std::collections::HashMap<usize, (Value, usize)>,
    /// The size of each open collection so far, parallel to `stack`.
    sizes: Vec<usize>,
    nodes: usize,
    done: Option<Value>,
    error: Option<String>,
}

impl Builder {
    fn push(&mut self, value: Value, size: usize, anchor: usize) {
        if self.error.is_some() {
            return;
        }
        self.nodes = self.nodes.saturating_add(size);
        if self.nodes > MAX_NODES {
            self.error = Some(format!(
                "it holds more than {MAX_NODES} values (aliases expanded), the limit"
            ));
            return;
        }
        if anchor > 0 {
            self.anchors.insert(anchor, (value.clone(), size));
        }
        if let Some(open) = self.sizes.last_mut() {
            *open = open.saturating_add(size);
        }
        match self.stack.last_mut() {
            None => {
                if self.done.is_none() {
                    self.done = Some(value);
                }
            }
            Some(Frame::Sequence(_, items)) => items.push(value),
            Some(Frame::Mapping(_, entries, key)) => match key.take() {
                None => match value {
                    Value::String(text) => *key = Some(text),
                    Value::Integer(i) => *key = Some(i.to_string()),
                    Value::Float(f) => *key = Some(f.to_string()),
                    Value::Boolean(b) => *key = Some(b.to_string()),
                    Value::Undef => *key = Some(String::new()),
                    _ => self.error = Some("a key is a collection; keys are strings".to_owned()),
                },
                Some(name) => {
                    // `<<: *defaults` merges the hash it names, as YAML 1.1 says.
                    if name == "<<"
                        && let Value::Hash(merged) = value
                    {
                        for (key, value) in merged {
                            if !entries.iter().any(|(existing, _)| *existing == key) {
                                entries.push((key, value));
                            }
                        }
                    } else if let Some(slot) =
                        entries.iter_mut().find(|(existing, _)| *existing == name)
                    {
                        slot.1 = value;
                    } else {
                        entries.push((name, value));
                    }
                }
            },
        }
    }
}

fn scalar(text: String, style: TScalarStyle) -> Value {
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    match Yaml::from_str(&text) {
        Yaml::Integer(i) => Value::Integer(i),
        Yaml::Real(real) => real
            .parse::<f64>()
            .map_or(Value::String(text), Value::Float),
        Yaml::Boolean(b) => Value::Boolean(b),
        Yaml::Null => Value::Undef,
        _ => Value::String(text),
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, _mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match event {
            Event::Scalar(text, style, anchor, _) => self.push(scalar(text, style), 1, anchor),
            Event::SequenceStart(..) | Event::MappingStart(..)
                if self.stack.len() >= wconverge_catalog::MAX_DEPTH =>
            {
                self.error = Some(format!(
                    "it nests more than {} deep, the limit of a value",
                    wconverge_catalog::MAX_DEPTH
                ));
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Sequence(anchor, Vec::new()));
                self.sizes.push(1);
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Mapping(anchor, Vec::new(), None));
                self.sizes.push(1);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let size = self.sizes.pop().unwrap_or(1);
                // Its elements were counted as they came: `push` counts them again
                // with the collection, so take them off first.
                self.nodes = self.nodes.saturating_sub(size - 1);
                match self.stack.pop() {
                    Some(Frame::Sequence(anchor, items)) => {
                        self.push(Value::Array(items), size, anchor)
                    }
                    Some(Frame::Mapping(anchor, entries, _)) => {
                        self.push(Value::Hash(entries), size, anchor);
                    }
                    None => {}
                }
            }
            Event::Alias(anchor) => match self.anchors.get(&anchor).cloned() {
                Some((value, size)) => self.push(value, size, 0),
                None => self.error = Some("an alias names no anchor".to_owned()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_values_anchors_and_merge_keys() {
        let value = parse_yaml(
            "defaults: &d\n  port: 80\n  tls: false\nweb:\n  <<: *d\n  port: 8080\nlist: [a, 1, 2.5, ~, 'true', true]\n",
        )
        .expect("parses");
        let Value::Hash(entries) = value else {
            panic!("a hash")
        };
        assert_eq!(
            entries[1].1,
            Value::Hash(vec![
                ("port".into(), Value::Integer(8080)),
                ("tls".into(), Value::Boolean(false)),
            ])
        );
        assert_eq!(
            entries[2].1,
            Value::Array(vec![
                Value::String("a".into()),
                Value::Integer(1),
                Value::Float(2.5),
                Value::Undef,
                Value::String("true".into()),
                Value::Boolean(true),
            ])
        );
        assert_eq!(parse_yaml("").expect("empty"), Value::Undef);
        assert!(parse_yaml("a: [").is_err());
    }

    #[test]
    fn deep_nesting_is_refused() {
        // Deeper than a value may be, within the parser's own limit.
        let text = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let error = parse_yaml(&text).expect_err("too deep");
        assert!(error.contains("nests more than 128 deep"), "{error}");
        // Far deeper: the parser refuses it itself, without recursing that deep.
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_yaml(&text).is_err());
    }

    #[test]
    fn a_billion_laughs_is_refused_not_expanded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..10 {
            let previous = level - 1;
            let refs = vec![format!("*a{previous}"); 10].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        let error = parse_yaml(&text).expect_err("refused");
        assert!(error.contains("more than 1000000 values"), "{error}");
    }
}
