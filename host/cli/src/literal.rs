//! Values written as manifest code: what `wconverge facts` and `wconverge resource`
//! print, so what a user reads can be pasted into a manifest and means the same.

use wconverge_catalog::Value;

/// A string as a manifest literal: single-quoted (nothing is interpolated) when it holds
/// only printable characters, else double-quoted with each control character escaped
/// and `$` escaped so nothing is interpolated either.
pub(crate) fn string(text: &str) -> String {
    if text.chars().all(|c| !c.is_control()) {
        let mut quoted = String::with_capacity(text.len() + 2);
        quoted.push('\'');
        for c in text.chars() {
            if c == '\'' || c == '\\' {
                quoted.push('\\');
            }
            quoted.push(c);
        }
        quoted.push('\'');
        return quoted;
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' | '$' => {
                quoted.push('\\');
                quoted.push(c);
            }
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            c if c.is_control() => quoted.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// A value as a manifest literal, nested hashes and arrays indented by two spaces from
/// `indent`. A sensitive value is written `Sensitive('[redacted]')`: never its content.
pub(crate) fn value(value: &Value, indent: usize) -> String {
    let pad = " ".repeat(indent + 2);
    let close = " ".repeat(indent);
    match value {
        Value::Undef => "undef".to_owned(),
        Value::Boolean(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 => format!("{f:.1}"),
        Value::Float(f) => f.to_string(),
        Value::String(text) => string(text),
        Value::Sensitive(_) => "Sensitive('[redacted]')".to_owned(),
        Value::Array(items) if items.is_empty() => "[]".to_owned(),
        Value::Array(items) => {
            let simple = items
                .iter()
                .all(|item| !matches!(item, Value::Array(_) | Value::Hash(_)));
            let rendered: Vec<String> = items
                .iter()
                .map(|item| self::value(item, indent + 2))
                .collect();
            let one_line = format!("[{}]", rendered.join(", "));
            if simple && one_line.len() + indent <= 80 {
                return one_line;
            }
            format!(
                "[\n{}\n{close}]",
                rendered
                    .iter()
                    .map(|item| format!("{pad}{item},"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        }
        Value::Hash(entries) if entries.is_empty() => "{}".to_owned(),
        Value::Hash(entries) => {
            let width = entries
                .iter()
                .map(|(key, _)| string(key).len())
                .max()
                .unwrap_or(0);
            let lines: Vec<String> = entries
                .iter()
                .map(|(key, item)| {
                    let key = string(key);
                    format!("{pad}{key:<width$} => {},", self::value(item, indent + 2))
                })
                .collect();
            format!("{{\n{}\n{close}}}", lines.join("\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_so_nothing_is_interpolated_or_lost() {
        assert_eq!(string("Debian"), "'Debian'");
        assert_eq!(string("it's a \\ $x"), r"'it\'s a \\ $x'");
        assert_eq!(string("a\nb $x \"q\""), r#""a\nb \$x \"q\"""#);
        assert_eq!(string("\u{1b}[2J"), r#""\u{1b}[2J""#);
    }

    #[test]
    fn nested_values_are_indented_and_secrets_never_shown() {
        let facts = Value::Hash(vec![
            ("family".to_owned(), Value::String("Debian".to_owned())),
            (
                "release".to_owned(),
                Value::Hash(vec![("major".to_owned(), Value::String("12".to_owned()))]),
            ),
            (
                "list".to_owned(),
                Value::Array(vec![Value::Integer(1), Value::Boolean(true), Value::Undef]),
            ),
            (
                "token".to_owned(),
                Value::Sensitive(Box::new(Value::String("hunter2".to_owned()))),
            ),
        ]);
        assert_eq!(
            value(&facts, 0),
            "{\n  'family'  => 'Debian',\n  'release' => {\n    'major' => '12',\n  },\n  \
             'list'    => [1, true, undef],\n  'token'   => Sensitive('[redacted]'),\n}"
        );
    }
}
