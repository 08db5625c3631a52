//! The `hosts` provider of Puppet's `host` type: an entry of `/etc/hosts` (or the file
//! `target` names), the whole file replaced atomically at each change, as
//! `wconverge-file-core` replaces a file (a temporary file with the file's owner and
//! mode, renamed over it), so no reader ever sees half of it.

use wconverge_file_core::{read_entries, replace_entry, write_atomically};
use wconverge_sdk::metadata;
use wconverge_sdk::shown;
use wconverge_sdk::{
    Attribute, Change, DataType, PathAccess, Provider, ProviderInfo, Resource, Result, State,
    TypeSchema, Value, export_provider,
};

struct Hosts;

fn schema() -> TypeSchema {
    TypeSchema::new(
        "host",
        "An entry of /etc/hosts: a name, its address, its aliases. Provider `hosts`.",
    )
    .attribute(Attribute::new("name", DataType::String, "The canonical host name.").namevar())
    .attribute(Attribute::ensure_present("Whether the entry is there."))
    .attribute(Attribute::new(
        "ip",
        DataType::String,
        "Its address, IPv4 or IPv6.",
    ))
    .attribute(
        Attribute::new(
            "host_aliases",
            DataType::String,
            "Other names for the address.",
        )
        .many(),
    )
    .attribute(Attribute::new(
        "comment",
        DataType::String,
        "A comment at the end of the line.",
    ))
    .attribute(
        Attribute::new(
            "target",
            DataType::String,
            "The file (default /etc/hosts). Each entry is checked before it is written \
             against what glibc's hosts reader reads back as that one entry: an address, \
             host names that are not addresses, a printable comment.",
        )
        .default("/etc/hosts")
        .parameter()
        .path_access(PathAccess::ReadWrite),
    )
}

fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
        && !is_address_to_glibc(name)
}

/// Whether glibc reads `name` as an address before it looks for it as a name
/// (`inet_aton`: up to four parts, each a number in decimal, octal or `0x` hex): no
/// entry of a hosts file can name it.
fn is_address_to_glibc(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() <= 4
        && parts.iter().all(|part| {
            let hex = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X"));
            match hex {
                Some(digits) => digits.bytes().all(|b| b.is_ascii_hexdigit()),
                None => !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()),
            }
        })
}

/// The longest comment written: glibc reads lines of any length, but a comment is a
/// note, not a store.
const MAX_COMMENT: usize = 255;

/// Why `comment` cannot end an entry's line, if it cannot: one line of printable text
/// without spaces at its ends (the file does not keep them: it is read back trimmed).
fn comment_problem(comment: &str) -> Option<String> {
    let text = shown(comment);
    if comment.is_empty() || comment.len() > MAX_COMMENT {
        Some(format!("a comment is 1 to {MAX_COMMENT} bytes"))
    } else if comment.chars().any(char::is_control) || comment.contains(['\u{2028}', '\u{2029}']) {
        Some(format!(
            "comment `{text}` holds a control character or line break: a comment is one line \
             of printable text"
        ))
    } else if comment.trim() != comment {
        Some(format!(
            "comment `{text}` has spaces at an end, which the hosts file does not keep: remove \
             them"
        ))
    } else {
        None
    }
}

fn aliases(resource: &Resource) -> Vec<String> {
    resource.get_strings("host_aliases").unwrap_or_default()
}

/// A line's address, canonical name, aliases and comment, if it is an entry.
fn parse(line: &str) -> Option<(String, String, Vec<String>, Option<String>)> {
    let (entry, comment) = match line.split_once('#') {
        Some((entry, comment)) => (entry, Some(comment.trim().to_owned())),
        None => (line, None),
    };
    let mut fields = entry.split_whitespace();
    let ip = fields.next()?.to_owned();
    let name = fields.next()?.to_owned();
    Some((ip, name, fields.map(str::to_owned).collect(), comment))
}

/// The entry's line, as Puppet writes it: fields separated by tabs.
fn line(resource: &Resource) -> Result<String> {
    let mut line = format!(
        "{}\t{}",
        resource.require_str("ip")?,
        resource.require_str("name")?
    );
    for alias in aliases(resource) {
        line.push('\t');
        line.push_str(&alias);
    }
    if let Some(comment) = resource.get_str("comment") {
        line.push_str("\t# ");
        line.push_str(comment);
    }
    Ok(line)
}

impl Provider for Hosts {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("hosts", env!("CARGO_PKG_VERSION")).with_type(schema())
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = Vec::new();
        let name = resource.get_str("name").unwrap_or_default();
        for host in std::iter::once(name.to_owned()).chain(aliases(resource)) {
            if is_address_to_glibc(&host) {
                problems.push(format!(
                    "`{host}` is read as an address, not a name, by the programs that read \
                     the hosts file: a host name has a part that is not a number"
                ));
            } else if !is_host_name(&host) {
                problems.push(format!("`{host}` is not a host name"));
            }
        }
        match resource.get_str("ip") {
            Some(ip) if ip.parse::<std::net::IpAddr>().is_err() => {
                problems.push(format!("`{ip}` is not an IPv4 or IPv6 address"));
            }
            None if resource.get_str("ensure") != Some("absent") => {
                problems.push("a host entry needs an `ip`".to_owned());
            }
            _ => {}
        }
        if let Some(comment) = resource.get_str("comment") {
            problems.extend(comment_problem(comment));
        }
        let target = resource.get_str("target").unwrap_or_default();
        if !target.starts_with('/') || !target.ends_with("/hosts") {
            problems.push(format!(
                "target `{target}` must be a hosts file: an absolute path ending in `/hosts`"
            ));
        }
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let name = resource.require_str("name")?;
        let text = read_entries(resource.require_str("target")?)?;
        let found = text
            .lines()
            .filter_map(parse)
            .find(|(_, canonical, _, _)| canonical == name);
        Ok(match found {
            None => State::new().with("ensure", "absent"),
            Some((ip, _, aliases, comment)) => {
                let mut state = State::new().with("ensure", "present").with("ip", ip).with(
                    "host_aliases",
                    Value::Array(aliases.into_iter().map(Value::from).collect()),
                );
                if let Some(comment) = comment {
                    state.set("comment", comment);
                }
                state
            }
        })
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        let exists = current.get_str("ensure") == Some("present");
        let target = resource.require_str("target")?;
        if resource.get_str("ensure") == Some("absent") {
            return Ok(if exists {
                vec![Change::removed(format!("removed from {target}"))]
            } else {
                Vec::new()
            });
        }
        if !exists {
            return Ok(vec![Change::created(format!(
                "added to {target}: {}",
                line(resource)?.replace('\t', " ")
            ))]);
        }
        let mut changes = Vec::new();
        let ip = resource.require_str("ip")?;
        let found_ip = current.get_str("ip").unwrap_or_default();
        if ip != found_ip {
            changes.push(Change::new(
                "ip",
                Some(found_ip.into()),
                Some(ip.into()),
                format!("ip changed '{found_ip}' to '{ip}'"),
            ));
        }
        let wanted = aliases(resource);
        let found: Vec<String> = current.get_strings("host_aliases").unwrap_or_default();
        if resource.get("host_aliases").is_some() && wanted != found {
            changes.push(Change::new(
                "host_aliases",
                None,
                None,
                format!(
                    "host_aliases changed '{}' to '{}'",
                    found.join(" "),
                    wanted.join(" ")
                ),
            ));
        }
        if let Some(comment) = resource.get_str("comment")
            && current.get_str("comment") != Some(comment)
        {
            changes.push(Change::new(
                "comment",
                None,
                Some(comment.into()),
                format!("comment set to '{comment}'"),
            ));
        }
        Ok(changes)
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let name = resource.require_str("name")?;
        let target = resource.require_str("target")?;
        let text = read_entries(target)?;
        let present = resource.get_str("ensure") != Some("absent");
        let line = if present { Some(line(resource)?) } else { None };
        let content = replace_entry(
            &text,
            |existing| parse(existing).is_some_and(|(_, canonical, _, _)| canonical == name),
            line,
        );
        let existing = metadata::stat(target)?;
        // Only content: the file keeps its owner and mode.
        let as_file = Resource::new("file", target).with("path", target);
        write_atomically(&as_file, target, content.as_bytes(), existing.as_ref())
    }
}

export_provider!(Hosts);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_aliases_and_comments() {
        assert_eq!(
            parse("10.0.0.5\tdb.example.com db # primary"),
            Some((
                "10.0.0.5".to_owned(),
                "db.example.com".to_owned(),
                vec!["db".to_owned()],
                Some("primary".to_owned())
            ))
        );
        assert_eq!(parse("# only a comment"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn bad_names_and_addresses_are_refused() {
        let host = |name: &str, ip: &str| {
            Resource::new("host", name)
                .with("name", name)
                .with("ip", ip)
                .with("target", "/etc/hosts")
        };
        assert!(Hosts::validate(&host("db.example.com", "10.0.0.5")).is_empty());
        assert!(Hosts::validate(&host("db", "::1")).is_empty());
        assert_eq!(Hosts::validate(&host("-x", "10.0.0.5")).len(), 1);
        assert_eq!(Hosts::validate(&host("db", "10.0.0.500")).len(), 1);
        assert_eq!(Hosts::validate(&host("db\nevil", "10.0.0.5")).len(), 1);
        for address in ["7", "10.1", "0x7f.1", "1.2.3.4"] {
            assert_eq!(
                Hosts::validate(&host(address, "10.0.0.5")).len(),
                1,
                "{address}"
            );
        }
        assert!(Hosts::validate(&host("1password.example", "10.0.0.5")).is_empty());
        for comment in ["primary ", " primary", "a\0b", "a\u{2028}b", ""] {
            let with = host("db", "10.0.0.5").with("comment", comment);
            assert_eq!(Hosts::validate(&with).len(), 1, "{comment:?}");
        }
        let kept = host("db", "10.0.0.5").with("comment", "primary # db");
        assert!(Hosts::validate(&kept).is_empty());
    }
}
