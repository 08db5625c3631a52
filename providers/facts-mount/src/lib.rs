//! The `mount` facts: `device`, `path`, `type` and `options` of every mounted file system,
//! from `/proc/mounts`.

use wconverge_sdk_facts::{FactSource, Group, Machine, export_fact_source};

struct Mounts;

const MOUNTS: &str = "/proc/mounts";

impl FactSource for Mounts {
    fn groups() -> Vec<String> {
        vec!["mount".to_owned()]
    }

    fn gather(_machine: Machine) -> Result<Vec<Group>, String> {
        let text = std::fs::read_to_string(MOUNTS)
            .map_err(|error| format!("cannot read {MOUNTS}: {error}"))?;
        Ok(vec![Group {
            name: "mount".to_owned(),
            records: mounts(&text),
        }])
    }
}

/// `/proc/mounts` escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let octal = rest.get(at + 1..at + 4);
        match octal.and_then(|digits| u8::from_str_radix(digits, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn mounts(text: &str) -> Vec<Vec<(String, String)>> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [device, path, kind, options, ..] = fields.as_slice() else {
                return None;
            };
            Some(vec![
                ("device".to_owned(), unescape(device)),
                ("path".to_owned(), unescape(path)),
                ("type".to_owned(), (*kind).to_owned()),
                ("options".to_owned(), (*options).to_owned()),
            ])
        })
        .collect()
}

export_fact_source!(Mounts);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_paths_are_decoded() {
        let records = mounts("/dev/sda1 /mnt/my\\040disk ext4 rw,relatime 0 0\n");
        assert_eq!(
            records[0][1],
            ("path".to_owned(), "/mnt/my disk".to_owned())
        );
        assert_eq!(records[0][2], ("type".to_owned(), "ext4".to_owned()));
    }
}
