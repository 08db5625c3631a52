//! Argument patterns: the command lines a policy allows a program to be launched with.
//!
//! An allowlisted program is only as safe as the arguments it gets: `tar
//! --checkpoint-action=exec=sh` or `find / -exec sh \;` run a shell through a program that
//! looks harmless. A program grant may therefore list patterns, and a launch must match
//! one of them as a whole. A pattern is a list of elements, each matching one argument:
//!
//! - a literal (`-x`, `install`) matches exactly that argument;
//! - `*` matches one operand: any argument that does not start with `-`, so an option
//!   can never take its place;
//! - an element with `*` inside (`--file=*`, `/srv/backup/*.tar`) matches an argument of
//!   that shape, where each `*` stands for at least one character other than `/` and is
//!   never `.` or `..`, so a path cannot climb out of the directory the pattern names;
//!   unless the element itself starts with `-`, the argument may not either;
//! - `...`, only as the last element, matches any number of further operands.

use std::fmt;

/// One element of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Element {
    Literal(String),
    /// `*`: one argument that is not an option.
    Operand,
    /// Literal pieces with a `*` between each two.
    Glob(Vec<String>),
    /// `...`: the rest, operands only.
    Rest,
}

/// The arguments one grant allows: a whole argument list, element by element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsPattern {
    elements: Vec<Element>,
}

fn is_operand(argument: &str) -> bool {
    !argument.starts_with('-')
}

impl ArgsPattern {
    /// Parses a pattern from the policy's list of elements.
    pub fn parse(elements: &[String]) -> Result<ArgsPattern, String> {
        let mut parsed = Vec::with_capacity(elements.len());
        for (index, element) in elements.iter().enumerate() {
            parsed.push(match element.as_str() {
                "*" => Element::Operand,
                "..." if index + 1 == elements.len() => Element::Rest,
                "..." => {
                    return Err(
                        "`...` may only be the last element of an argument pattern".to_owned()
                    );
                }
                text if text.contains('\0') => {
                    return Err("an argument pattern element contains a NUL byte".to_owned());
                }
                text if text.contains('*') => {
                    Element::Glob(text.split('*').map(str::to_owned).collect())
                }
                text => Element::Literal(text.to_owned()),
            });
        }
        Ok(ArgsPattern { elements: parsed })
    }

    /// The pattern with every element that names `from` or a path below it naming the
    /// same below `to` instead (`plugins test` moves a plugin's grants into a throwaway
    /// root).
    pub fn rebased(&self, from: &str, to: &str) -> ArgsPattern {
        let moved = |text: &str| -> Option<String> {
            let rest = text.strip_prefix(from)?;
            (rest.is_empty() || rest.starts_with('/')).then(|| format!("{to}{rest}"))
        };
        let elements = self
            .elements
            .iter()
            .map(|element| match element {
                Element::Literal(text) => {
                    Element::Literal(moved(text).unwrap_or_else(|| text.clone()))
                }
                Element::Glob(pieces) => {
                    let mut pieces = pieces.clone();
                    if let Some(first) = pieces.first_mut()
                        && let Some(rebased) = moved(first)
                    {
                        *first = rebased;
                    }
                    Element::Glob(pieces)
                }
                other => other.clone(),
            })
            .collect();
        ArgsPattern { elements }
    }

    /// Whether every element is a literal: the pattern allows one command line only.
    pub fn is_literal(&self) -> bool {
        self.elements
            .iter()
            .all(|element| matches!(element, Element::Literal(_)))
    }

    /// Whether `args` (without the program itself) matches the pattern as a whole.
    pub fn matches(&self, args: &[String]) -> bool {
        self.mismatch(args).is_none()
    }

    /// The index of the first argument that does not fit, or `args.len()` when the
    /// pattern wants more arguments than there are; `None` when it all matches.
    pub fn mismatch(&self, args: &[String]) -> Option<usize> {
        let mut rest = args.iter().enumerate();
        for element in &self.elements {
            if *element == Element::Rest {
                return rest
                    .find(|(_, argument)| !is_operand(argument))
                    .map(|(at, _)| at);
            }
            let Some((at, argument)) = rest.next() else {
                return Some(args.len());
            };
            let fits = match element {
                Element::Literal(literal) => argument == literal,
                Element::Operand => is_operand(argument),
                // A glob that does not itself start with `-` matches operands only, so
                // `*.txt` never lets `--to-command=sh;:.txt` through.
                Element::Glob(pieces) => {
                    (pieces[0].starts_with('-') || is_operand(argument))
                        && glob_matches(pieces, argument)
                }
                Element::Rest => unreachable!("handled above"),
            };
            if !fits {
                return Some(at);
            }
        }
        rest.next().map(|(at, _)| at)
    }
}

/// Whether `text` is `pieces` joined by stars, each star standing for a run of characters
/// without `/` that is neither `.` nor `..`.
fn glob_matches(pieces: &[String], text: &str) -> bool {
    let (first, others) = pieces
        .split_first()
        .expect("split gives at least one piece");
    let Some(mut remaining) = text.strip_prefix(first.as_str()) else {
        return false;
    };
    // Each star but the last takes the shortest run that lets the next piece follow (the
    // usual greedy glob); the last one runs to the end. Every run is then checked, so a
    // decomposition that is accepted satisfies every rule; at worst a contrived pattern
    // is refused where another decomposition would have fitted.
    for (index, piece) in others.iter().enumerate() {
        let last = index + 1 == others.len();
        let star = if last {
            if !remaining.ends_with(piece.as_str()) {
                return false;
            }
            &remaining[..remaining.len() - piece.len()]
        } else {
            let Some(found) = remaining.find(piece.as_str()) else {
                return false;
            };
            &remaining[..found]
        };
        if star.is_empty() || star.contains('/') || star == "." || star == ".." {
            return false;
        }
        remaining = &remaining[star.len() + piece.len()..];
        if last && !remaining.is_empty() {
            return false;
        }
    }
    true
}

impl fmt::Display for ArgsPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.elements.is_empty() {
            return f.write_str("(no arguments)");
        }
        for (index, element) in self.elements.iter().enumerate() {
            if index > 0 {
                f.write_str(" ")?;
            }
            match element {
                Element::Literal(literal) => write!(f, "{}", quote(literal))?,
                Element::Operand => f.write_str("*")?,
                Element::Glob(pieces) => write!(f, "{}", quote(&pieces.join("*")))?,
                Element::Rest => f.write_str("...")?,
            }
        }
        Ok(())
    }
}

/// An argument as a shell would need it written, for messages and the audit.
pub fn quote(argument: &str) -> String {
    let plain = !argument.is_empty()
        && argument
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%*".contains(c));
    if plain {
        argument.to_owned()
    } else if argument.chars().any(char::is_control) {
        // The shell's ANSI-C quoting, so a tab or a newline shows as itself, escaped.
        let mut quoted = String::from("$'");
        for c in argument.chars() {
            match c {
                '\\' => quoted.push_str(r"\\"),
                '\'' => quoted.push_str(r"\'"),
                '\t' => quoted.push_str(r"\t"),
                '\n' => quoted.push_str(r"\n"),
                '\r' => quoted.push_str(r"\r"),
                c if c.is_control() => quoted.push_str(&format!("\\x{:02x}", u32::from(c))),
                c => quoted.push(c),
            }
        }
        quoted.push('\'');
        quoted
    } else {
        format!("'{}'", argument.replace('\'', r"'\''"))
    }
}

/// A command line for a message, cut after `limit` characters.
pub fn display_args(args: &[String], limit: usize) -> String {
    let mut text = args
        .iter()
        .map(|arg| quote(arg))
        .collect::<Vec<_>>()
        .join(" ");
    if text.chars().count() > limit {
        text = text.chars().take(limit).collect::<String>() + "…";
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(
            quote("${Package}\t${Version}\n"),
            r"$'${Package}\t${Version}\n'"
        );
        assert_eq!(quote("a'b\x07"), r"$'a\'b\x07'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    fn pattern(elements: &[&str]) -> ArgsPattern {
        ArgsPattern::parse(&elements.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>())
            .expect("valid pattern")
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn literals_and_operands_match_the_whole_list() {
        let tar = pattern(&["-x", "-f", "*", "-C", "*"]);
        assert!(tar.matches(&args(&["-x", "-f", "a.tar", "-C", "/srv/app"])));
        assert_eq!(tar.mismatch(&args(&["-x", "-f", "a.tar"])), Some(3));
        assert_eq!(
            tar.mismatch(&args(&[
                "-x",
                "-f",
                "a.tar",
                "-C",
                "/srv",
                "--checkpoint=1"
            ])),
            Some(5)
        );
        // An option never fills an operand's place.
        assert_eq!(
            tar.mismatch(&args(&[
                "-x",
                "-f",
                "--checkpoint-action=exec=sh",
                "-C",
                "/"
            ])),
            Some(2)
        );
        assert!(pattern(&[]).matches(&[]));
        assert!(!pattern(&[]).matches(&args(&["x"])));
    }

    #[test]
    fn the_rest_takes_operands_only() {
        let find = pattern(&["/srv", "-name", "*", "..."]);
        assert!(find.matches(&args(&["/srv", "-name", "a"])));
        assert!(find.matches(&args(&["/srv", "-name", "a", "b", "c"])));
        assert_eq!(
            find.mismatch(&args(&["/srv", "-name", "a", "-exec", "sh", ";"])),
            Some(3)
        );
        let error = ArgsPattern::parse(&args(&["...", "x"])).expect_err("rest not last");
        assert!(error.contains("last element"), "{error}");
    }

    #[test]
    fn globs_stay_inside_one_path_component() {
        let backup = pattern(&["--file=/srv/backup/*.tar"]);
        assert!(backup.matches(&args(&["--file=/srv/backup/monday.tar"])));
        assert!(!backup.matches(&args(&["--file=/srv/backup/../etc.tar"])));
        assert!(!backup.matches(&args(&["--file=/srv/backup/a/b.tar"])));
        assert!(!backup.matches(&args(&["--file=/srv/backup/.tar/x.tar"])));
        assert!(!backup.matches(&args(&["--file=/srv/backup/monday.tar.gz"])));
        let dir = pattern(&["/srv/*"]);
        assert!(dir.matches(&args(&["/srv/app"])));
        assert!(!dir.matches(&args(&["/srv/.."])));
        assert!(!dir.matches(&args(&["/srv/."])));
        assert!(!dir.matches(&args(&["/srv/a/b"])));
        let two = pattern(&["*.*"]);
        assert!(two.matches(&args(&["a.b"])));
        assert!(two.matches(&args(&["a.b.c"])));
        assert!(!two.matches(&args(&["ab"])));
        let ends = pattern(&["*.txt"]);
        assert!(ends.matches(&args(&["notes.txt"])));
        assert!(!ends.matches(&args(&["--to-command=id>&2;:.txt"])));
        assert!(!ends.matches(&args(&[".txt"])), "a star is never empty");
        assert!(!dir.matches(&args(&["/srv/"])));
        let option = pattern(&["--level=*"]);
        assert!(option.matches(&args(&["--level=3"])));
        assert!(!option.matches(&args(&["--level=3/4"])));
    }

    #[test]
    fn patterns_and_arguments_print_as_a_shell_would_read_them() {
        assert_eq!(
            pattern(&["-x", "*", "a b", "--f=*", "..."]).to_string(),
            "-x * 'a b' --f=* ..."
        );
        assert_eq!(pattern(&[]).to_string(), "(no arguments)");
        assert_eq!(display_args(&args(&["it's", "x"]), 100), r"'it'\''s' x");
        assert_eq!(display_args(&args(&["abcdef"]), 3), "abc…");
    }
}

#[cfg(test)]
mod rebase_tests {
    use super::*;

    #[test]
    fn rebasing_moves_the_paths_below_a_directory_and_nothing_else() {
        let pattern = ArgsPattern::parse(&[
            "--".to_owned(),
            "/var/lib/app/*".to_owned(),
            "/var/lib/app".to_owned(),
            "/var/lib/application".to_owned(),
            "*".to_owned(),
        ])
        .expect("pattern");
        let moved = pattern.rebased("/var/lib/app", "/tmp/root/var/lib/app");
        let args = |list: &[&str]| list.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();
        assert!(moved.matches(&args(&[
            "--",
            "/tmp/root/var/lib/app/motd",
            "/tmp/root/var/lib/app",
            "/var/lib/application",
            "x"
        ])));
        assert!(!moved.matches(&args(&[
            "--",
            "/var/lib/app/motd",
            "/tmp/root/var/lib/app",
            "/var/lib/application",
            "x"
        ])));
    }
}
