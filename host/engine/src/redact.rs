//! Redaction: sensitive values never reach an output.
//!
//! The engine knows every sensitive string a resource carries (values wrapped as
//! sensitive in the catalog and all values of attributes the schema marks sensitive).
//! Whatever a plugin sends back about that resource (logs, errors, change messages) is
//! scrubbed of those strings before it goes into the report, whatever the plugin does.

/// What gets written in place of a secret.
pub(crate) const REDACTED: &str = "[redacted]";

/// The shortest line of a secret of several lines that is redacted on its own.
const MIN_LINE: usize = 4;

/// The sensitive strings of one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// The secrets of several resources together (a call about all of them).
    pub fn union<'a>(all: impl IntoIterator<Item = &'a Secrets>) -> Secrets {
        let mut secrets: Vec<String> = all.into_iter().flat_map(|one| one.0.clone()).collect();
        secrets.sort();
        secrets.dedup();
        // Longest first, as `new` leaves them, so a secret inside another is not
        // scrubbed first.
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        Secrets(secrets)
    }

    pub(crate) fn new(mut secrets: Vec<String>) -> Self {
        // A secret of several lines (a private key) also travels line by line: output
        // is logged a line at a time. Each line long enough to mean something is a
        // secret of its own.
        let lines: Vec<String> = secrets
            .iter()
            .filter(|secret| secret.contains('\n'))
            .flat_map(|secret| secret.lines())
            .map(|line| line.trim_end_matches('\r'))
            .filter(|line| line.trim().len() >= MIN_LINE)
            .map(str::to_owned)
            .collect();
        secrets.extend(lines);
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        secrets.dedup();
        Secrets(secrets)
    }

    /// Adds more secrets (those of a resource's guards).
    pub(crate) fn extend(&mut self, more: Vec<String>) {
        if !more.is_empty() {
            let mut all = std::mem::take(&mut self.0);
            all.extend(more);
            *self = Secrets::new(all);
        }
    }

    /// Whether `text` holds one of the secrets of at least [`MIN_LINE`] characters
    /// (shorter ones would be found in too much that is not secret).
    pub fn within(&self, text: &str) -> bool {
        self.0
            .iter()
            .any(|secret| secret.len() >= MIN_LINE && text.contains(secret.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops from the end of `bytes`, output that was cut at a cap, the start of a
    /// secret the cut split (which no later scrub could recognize).
    pub fn trim_cut(&self, bytes: &mut Vec<u8>) {
        let cut = self
            .0
            .iter()
            .filter_map(|secret| {
                let secret = secret.as_bytes();
                (1..secret.len())
                    .rev()
                    .find(|len| bytes.ends_with(&secret[..*len]))
            })
            .max();
        if let Some(cut) = cut {
            bytes.truncate(bytes.len() - cut);
        }
    }

    /// `text` with every secret replaced. A very short secret garbles unrelated text;
    /// that is the price of never leaking it.
    pub fn scrub(&self, text: &str) -> String {
        // Every place any secret occurs in the text as it is, merged where they overlap
        // (replacing one secret after another would leave the part of one that overlaps
        // another already replaced).
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for secret in &self.0 {
            ranges.extend(
                text.match_indices(secret.as_str())
                    .map(|(start, found)| (start, start + found.len())),
            );
        }
        if ranges.is_empty() {
            return text.to_owned();
        }
        ranges.sort_unstable();
        let mut scrubbed = String::with_capacity(text.len());
        let mut written = 0;
        let mut current: Option<(usize, usize)> = None;
        for (start, end) in ranges {
            match &mut current {
                Some((_, current_end)) if start <= *current_end => {
                    *current_end = (*current_end).max(end);
                }
                _ => {
                    if let Some((from, to)) = current.take() {
                        scrubbed.push_str(&text[written..from]);
                        scrubbed.push_str(REDACTED);
                        written = to;
                    }
                    current = Some((start, end));
                }
            }
        }
        if let Some((from, to)) = current {
            scrubbed.push_str(&text[written..from]);
            scrubbed.push_str(REDACTED);
            written = to;
        }
        scrubbed.push_str(&text[written..]);
        scrubbed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_of_every_secret_is_replaced() {
        let secrets = Secrets::new(vec!["hunter2".to_owned(), "hunter22".to_owned()]);
        assert_eq!(
            secrets.scrub("pw hunter22 and hunter2 again"),
            "pw [redacted] and [redacted] again"
        );
        assert_eq!(Secrets::default().scrub("plain"), "plain");
    }

    #[test]
    fn overlapping_secrets_are_redacted_whole() {
        let secrets = Secrets::new(vec![
            "OVERLAPSECRxx".to_owned(),
            "xxSECONDSECRETLONGER".to_owned(),
        ]);
        assert_eq!(
            secrets.scrub("a OVERLAPSECRxxSECONDSECRETLONGER b"),
            "a [redacted] b"
        );
    }

    #[test]
    fn each_line_of_a_secret_of_several_lines_is_a_secret() {
        let secrets = Secrets::new(vec!["TOPline1SECRET\nline2SECRETEND\n}".to_owned()]);
        assert_eq!(
            secrets.scrub("stdout: PW=TOPline1SECRET"),
            "stdout: PW=[redacted]"
        );
        assert_eq!(
            secrets.scrub("stdout: line2SECRETEND"),
            "stdout: [redacted]"
        );
        // A line too short to mean anything is left alone.
        assert_eq!(secrets.scrub("{ }"), "{ }");
    }

    #[test]
    fn the_start_of_a_secret_cut_off_at_the_end_is_dropped() {
        let secrets = Secrets::new(vec!["hunter2".to_owned()]);
        let mut cut = b"password: hunt".to_vec();
        secrets.trim_cut(&mut cut);
        assert_eq!(cut, b"password: ");
        let mut whole = b"nothing secret".to_vec();
        secrets.trim_cut(&mut whole);
        assert_eq!(whole, b"nothing secret");
    }
}
