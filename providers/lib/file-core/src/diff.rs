//! The unified diff of a content change, as Puppet's `show_diff` prints it, so that a
//! noop run shows what would change and not only two digests.

use std::io::Read;

/// Files larger than this are not diffed.
const MAX_DIFF_INPUT: u64 = 256 * 1024;
/// The most lines of diff shown.
const MAX_DIFF_LINES: usize = 200;

/// The diff from the file at `path` to `desired`; `None` when the file cannot be read,
/// is too large or is not text.
pub(crate) fn unified(path: &str, desired: &str) -> Option<String> {
    let mut current = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_DIFF_INPUT + 1)
        .read_to_end(&mut current)
        .ok()?;
    if current.len() as u64 > MAX_DIFF_INPUT || desired.len() as u64 > MAX_DIFF_INPUT {
        return None;
    }
    let current = String::from_utf8(current).ok()?;
    if current.contains('\0') || desired.contains('\0') {
        return None;
    }
    Some(render(path, &current, desired))
}

fn render(path: &str, current: &str, desired: &str) -> String {
    let diff = similar::TextDiff::from_lines(current, desired);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= MAX_DIFF_LINES {
        return lines.join("\n");
    }
    format!(
        "{}\n... {} more lines of diff",
        lines[..MAX_DIFF_LINES].join("\n"),
        lines.len() - MAX_DIFF_LINES
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_is_shown_with_its_context() {
        let diff = render("/etc/motd", "a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(
            diff,
            "--- /etc/motd\n+++ /etc/motd\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c"
        );
    }

    #[test]
    fn a_long_diff_is_cut() {
        let old: String = (0..500).map(|n| format!("{n}\n")).collect();
        let diff = render("/x", &old, "");
        assert!(diff.ends_with("more lines of diff"), "{diff}");
        assert_eq!(diff.lines().count(), MAX_DIFF_LINES + 1);
    }
}
