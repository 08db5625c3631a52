//! authorized_keys as sshd reads it (sshd(8), "AUTHORIZED_KEYS FILE FORMAT", and
//! OpenSSH's reader): which values a line may carry so that sshd reads it back as
//! exactly the key, options and comment wconverge wrote, and how a line is split into
//! them the way sshd splits it. Values are checked against allowlists, not blocklists.

use wconverge_sdk::shown;

/// The key types the `type` attribute takes.
pub(crate) const KEY_TYPES: [&str; 8] = [
    "ssh-rsa",
    "ssh-dss",
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// sshd's options without a value (matched without regard to case, as sshd does).
const FLAGS: [&str; 14] = [
    "agent-forwarding",
    "cert-authority",
    "no-agent-forwarding",
    "no-port-forwarding",
    "no-pty",
    "no-user-rc",
    "no-x11-forwarding",
    "port-forwarding",
    "pty",
    "no-touch-required",
    "verify-required",
    "restrict",
    "user-rc",
    "x11-forwarding",
];

/// sshd's options that take a quoted value.
const VALUED: [&str; 8] = [
    "command",
    "environment",
    "expiry-time",
    "from",
    "permitlisten",
    "permitopen",
    "principals",
    "tunnel",
];

/// The longest name (comment) and option wconverge writes: sshd reads lines of up to
/// 8 kB, keys included.
const MAX_NAME: usize = 255;
const MAX_OPTION: usize = 2048;

/// Punctuation a key's name may hold besides letters, digits and single spaces: no
/// quote, no backslash, nothing sshd or wconverge's own reader would split at.
const NAME_PUNCTUATION: &str = "@._-+:=/,()[]<>'!?&~^%${}|;*#`";

/// Why `name` cannot be a key's name (its comment), if it cannot: sshd ignores the
/// comment, but wconverge identifies the line by it and must read it back byte for byte.
pub(crate) fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Some(format!(
            "a key's name is 1 to {MAX_NAME} bytes; `{}` is {}",
            shown(name),
            name.len()
        ));
    }
    if name.starts_with(' ') || name.ends_with(' ') || name.contains("  ") {
        return Some(format!(
            "key name `{}` has a space at either end or two in a row: the file would not \
             keep it byte for byte; write single spaces between words",
            shown(name)
        ));
    }
    let bad = name
        .chars()
        .find(|c| !(c.is_alphanumeric() || *c == ' ' || NAME_PUNCTUATION.contains(*c)));
    bad.map(|c| {
        format!(
            "key name `{}` holds `{}`: a name is letters, digits, single spaces and \
             `{NAME_PUNCTUATION}`",
            shown(name),
            shown(&c.to_string())
        )
    })
}

/// Why `option` cannot be written before a key, if it cannot: an option sshd knows,
/// `name` or `name="value"`, the value printable ASCII in which a `"` is written `\"`
/// and a `\` only before a `"` (sshd's reader takes `\"` for a quote and ends the
/// options at a space outside quotes, so anything else could move where they end).
pub(crate) fn option_problem(option: &str) -> Option<String> {
    if option.len() > MAX_OPTION {
        return Some(format!(
            "option `{}...` is longer than {MAX_OPTION} bytes",
            shown(&option.chars().take(40).collect::<String>())
        ));
    }
    let (name, value) = match option.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (option, None),
    };
    let lower = name.to_ascii_lowercase();
    let text = shown(option);
    if FLAGS.contains(&lower.as_str()) {
        return value.map(|_| format!("option `{text}`: `{name}` takes no value"));
    }
    if !VALUED.contains(&lower.as_str()) {
        return Some(format!(
            "option `{text}` is not one sshd knows: `{}`, or `{}=\"...\"`",
            FLAGS.join("`, `"),
            VALUED.join("=\"...\"`, `")
        ));
    }
    let Some(value) = value else {
        return Some(format!("option `{text}` needs a value: `{name}=\"...\"`"));
    };
    let Some(inner) = value
        .strip_prefix('"')
        .and_then(|value| value.strip_suffix('"'))
    else {
        return Some(format!(
            "option `{text}`: the value is written in double quotes, `{name}=\"...\"`"
        ));
    };
    let bytes = inner.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' if bytes.get(at + 1) == Some(&b'"') => at += 2,
            b'\\' => {
                return Some(format!(
                    "option `{text}`: a `\\` in a value may only escape a quote (`\\\"`); \
                     sshd would read anything else differently"
                ));
            }
            b'"' => {
                return Some(format!(
                    "option `{text}`: a quote inside the value is written `\\\"`"
                ));
            }
            0x20..=0x7e => at += 1,
            _ => {
                return Some(format!(
                    "option `{text}`: a value is printable ASCII (no control character, \
                     tab or non-ASCII letter)"
                ));
            }
        }
    }
    None
}

/// One line of authorized_keys, split as sshd splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    /// The options, as written (empty when there are none).
    pub(crate) options: String,
    pub(crate) key_type: String,
    /// The key, base64, as written.
    pub(crate) key: String,
    pub(crate) comment: String,
}

impl Line {
    /// The key's identity: the decoded key (its type is inside), or `None` when the
    /// base64 does not decode.
    pub(crate) fn identity(&self) -> Option<Vec<u8>> {
        decode_base64(&self.key)
    }
}

/// Whether a line is one sshd skips: empty, blank or a comment.
pub(crate) fn is_blank_or_comment(line: &str) -> bool {
    let line = line.trim_start_matches([' ', '\t']);
    line.is_empty() || line.starts_with('#') || line == "\r"
}

/// Whether `token` starts a line without options (sshd first tries to read a key at
/// the start of the line).
fn is_key_type(token: &str) -> bool {
    KEY_TYPES.contains(&token)
        || token.ends_with("-cert-v01@openssh.com")
        || token.starts_with("rsa-sha2-")
}

/// A line's options, type, key and comment, split as sshd does: options run to the
/// first space or tab outside double quotes (a `\"` does not open or close them).
pub(crate) fn parse(line: &str) -> Option<Line> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let rest = line.trim_start_matches([' ', '\t']);
    if is_blank_or_comment(rest) {
        return None;
    }
    let first = rest.split([' ', '\t']).next().unwrap_or_default();
    let (options, rest) = if is_key_type(first) {
        ("", rest)
    } else {
        let end = end_of_options(rest)?;
        (&rest[..end], rest[end..].trim_start_matches([' ', '\t']))
    };
    let (key_type, rest) = rest.split_once([' ', '\t'])?;
    let rest = rest.trim_start_matches([' ', '\t']);
    let (key, comment) = match rest.split_once([' ', '\t']) {
        Some((key, comment)) => (key, comment.trim_start_matches([' ', '\t'])),
        None => (rest, ""),
    };
    if key.is_empty() {
        return None;
    }
    Some(Line {
        options: options.to_owned(),
        key_type: key_type.to_owned(),
        key: key.to_owned(),
        comment: comment.to_owned(),
    })
}

/// Where the options at the start of `text` end, or `None` when a quote is left open.
fn end_of_options(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut quoted = false;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' if bytes.get(at + 1) == Some(&b'"') => at += 1,
            b'"' => quoted = !quoted,
            b' ' | b'\t' if !quoted => return Some(at),
            _ => {}
        }
        at += 1;
    }
    (!quoted).then_some(at)
}

/// The options of a line, split at the commas outside quotes.
pub(crate) fn split_options(options: &str) -> Vec<String> {
    let mut split = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = options.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'"') => {
                current.push(c);
                current.push(chars.next().expect("peeked"));
            }
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            ',' if !quoted => split.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        split.push(current);
    }
    split
}

/// Standard base64 with padding, strictly: `None` for anything else, so one key has
/// one spelling.
pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    fn sextet(byte: u8) -> Option<u32> {
        Some(match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = text.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (index, chunk) in bytes.chunks(4).enumerate() {
        let last = index == bytes.len() / 4 - 1;
        let padding = chunk.iter().rev().take_while(|b| **b == b'=').count();
        if padding > 2 || (padding > 0 && !last) {
            return None;
        }
        let mut bits = 0u32;
        for byte in &chunk[..4 - padding] {
            bits = bits << 6 | sextet(*byte)?;
        }
        bits <<= 6 * padding as u32;
        let decoded = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
        // Bits the padding leaves over must be zero: another spelling of the same key
        // otherwise.
        if (padding == 1 && decoded[2] != 0) || (padding == 2 && decoded[1] != 0) {
            return None;
        }
        out.extend_from_slice(&decoded[..3 - padding]);
    }
    Some(out)
}

/// Why `key` (base64) is not a public key of `key_type`, if it is not: the decoded
/// key starts with its own type name, which sshd compares with the line's.
pub(crate) fn key_problem(key_type: &str, key: &str) -> Option<String> {
    let Some(blob) = decode_base64(key) else {
        return Some(format!(
            "key `{}` is not base64 (letters, digits, `+`, `/`, padded with `=`)",
            shown(key)
        ));
    };
    let named = blob
        .get(..4)
        .map(|len| u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize)
        .and_then(|len| blob.get(4..4 + len));
    if named != Some(key_type.as_bytes()) {
        return Some(format!(
            "key is not a `{key_type}` key: the key names its own type, and sshd refuses a \
             line whose type and key disagree"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_as_sshd_splits_them() {
        let line = parse("from=\"10.0.0.0/8\",no-pty ssh-ed25519 AAAAC3Nz deploy@ci").unwrap();
        assert_eq!(line.options, "from=\"10.0.0.0/8\",no-pty");
        assert_eq!(line.key_type, "ssh-ed25519");
        assert_eq!(line.key, "AAAAC3Nz");
        assert_eq!(line.comment, "deploy@ci");
        assert_eq!(parse("# a comment"), None);
        assert_eq!(parse("   "), None);
        // A key type inside a quoted value is not where the key starts.
        let quoted = parse("command=\"echo ssh-ed25519 AAAA x\" ssh-rsa BBBB real").unwrap();
        assert_eq!(quoted.key, "BBBB");
        assert_eq!(quoted.comment, "real");
        // The attack: an escaped quote keeps the options open past the managed key.
        let attack =
            parse("command=\"exec /bin/sh #\\\" ssh-ed25519 LEGIT x\" ssh-ed25519 EVIL attacker")
                .unwrap();
        assert_eq!(attack.key, "EVIL");
    }

    #[test]
    fn options_are_sshds_and_values_cannot_move_where_they_end() {
        assert_eq!(option_problem("no-pty"), None);
        assert_eq!(option_problem("No-Pty"), None);
        assert_eq!(option_problem("from=\"10.0.0.0/8,192.168.0.0/16\""), None);
        assert_eq!(option_problem("command=\"echo \\\"hi\\\"\""), None);
        for bad in [
            "no-pty ssh-rsa AAAA evil",
            "command=\"x\" y",
            "from=10.0.0.1",
            "command=\"exec /bin/sh #\\\"",
            "command=\"a\\b\"",
            "command=\"a\tb\"",
            "command=\"a\0b\"",
            "command",
            "no-pty=\"x\"",
            "frob",
        ] {
            assert!(option_problem(bad).is_some(), "{bad:?} was accepted");
        }
        assert_eq!(
            split_options("command=\"a \\\",b\",no-pty"),
            vec!["command=\"a \\\",b\"", "no-pty"]
        );
    }

    #[test]
    fn names_are_kept_byte_for_byte() {
        assert_eq!(name_problem("deploy@ci"), None);
        assert_eq!(name_problem("José's laptop"), None);
        for bad in [
            "",
            "a  b",
            " a",
            "a ",
            "a\"b",
            "a\\b",
            "a\tb",
            "a\u{2028}b",
            "a\0",
        ] {
            assert!(name_problem(bad).is_some(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn base64_is_strict_and_keys_name_their_type() {
        assert_eq!(decode_base64("aGk="), Some(b"hi".to_vec()));
        assert_eq!(decode_base64("aGl="), None);
        assert_eq!(decode_base64("aG=k"), None);
        assert_eq!(decode_base64("aGk"), None);
        let ed25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIDM2LGkSJYrTSjy13nkVtwz5jftP2gqdf8k6fqE5RJ8n";
        assert_eq!(key_problem("ssh-ed25519", ed25519), None);
        assert!(key_problem("ssh-rsa", ed25519).is_some());
    }
}
