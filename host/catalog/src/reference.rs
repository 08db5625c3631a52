//! Resource references: `File[/etc/motd]`.

use std::fmt::{self, Write as _};

/// A reference to a resource by type and title, as relationships name it.
///
/// The type is stored lowercase (`file`, `apache::vhost`) and displayed capitalized per
/// segment (`File`, `Apache::Vhost`), as Puppet does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceRef {
    pub type_name: String,
    pub title: String,
}

impl ResourceRef {
    pub fn new(type_name: &str, title: &str) -> Self {
        ResourceRef {
            type_name: type_name.to_ascii_lowercase(),
            title: title.to_owned(),
        }
    }

    /// Parses `Type[title]`. The title is everything between the first `[` and the last
    /// `]`, so titles may contain brackets; quotes around it are removed.
    pub fn parse(text: &str) -> Result<ResourceRef, String> {
        let text = text.trim();
        let (type_part, rest) = text.split_once('[').ok_or_else(|| {
            format!("`{text}` is not a resource reference; write it as `Type[title]`")
        })?;
        let title = rest
            .strip_suffix(']')
            .ok_or_else(|| format!("`{text}` is not a resource reference; it must end with `]`"))?;
        let title = strip_quotes(title);
        let valid_type = !type_part.is_empty()
            && type_part.split("::").all(|segment| {
                let mut chars = segment.chars();
                chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                    && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        if !valid_type {
            return Err(format!(
                "`{type_part}` in `{text}` is not a type name; type names are words \
                 separated by `::`, like `File` or `Apache::Vhost`"
            ));
        }
        if title.is_empty() {
            return Err(format!("`{text}` has an empty title"));
        }
        Ok(ResourceRef::new(type_part, title))
    }
}

fn strip_quotes(title: &str) -> &str {
    for quote in ['\'', '"'] {
        if let Some(inner) = title
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner;
        }
    }
    title
}

/// `apache::vhost` as `Apache::Vhost`.
pub fn display_type_name(type_name: &str) -> String {
    let mut shown = String::with_capacity(type_name.len());
    let _ = write_type_name(&mut shown, type_name);
    shown
}

/// Writes `type_name` as [`display_type_name`] returns it, without making a string: a
/// run shows the reference of every resource it reports.
fn write_type_name(out: &mut impl fmt::Write, type_name: &str) -> fmt::Result {
    for (n, segment) in type_name.split("::").enumerate() {
        if n > 0 {
            out.write_str("::")?;
        }
        let mut chars = segment.chars();
        if let Some(first) = chars.next() {
            out.write_char(first.to_ascii_uppercase())?;
            out.write_str(chars.as_str())?;
        }
    }
    Ok(())
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_type_name(f, &self.type_name)?;
        f.write_char('[')?;
        f.write_str(&self.title)?;
        f.write_char(']')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_and_display_puppet_style() {
        let reference = ResourceRef::parse("File['/etc/motd']").expect("valid");
        assert_eq!(reference, ResourceRef::new("file", "/etc/motd"));
        assert_eq!(reference.to_string(), "File[/etc/motd]");
        let nested = ResourceRef::parse("apache::vhost[a[1]]").expect("valid");
        assert_eq!(nested.title, "a[1]");
        assert_eq!(nested.to_string(), "Apache::Vhost[a[1]]");
    }

    #[test]
    fn malformed_references_say_how_to_write_them() {
        assert!(
            ResourceRef::parse("motd")
                .expect_err("no brackets")
                .contains("write it as `Type[title]`")
        );
        assert!(
            ResourceRef::parse("9x[a]")
                .expect_err("bad type")
                .contains("is not a type name")
        );
        assert!(
            ResourceRef::parse("File[]")
                .expect_err("empty")
                .contains("empty title")
        );
    }
}
