//! Permission modes as Puppet's `file` takes them: numeric (`'0644'`, `'755'`) or
//! symbolic, chmod's syntax (`'u=rw,go=r'`, `'a+x'`, `'ug+rwX,o-w'`, `'g=u'`).
//!
//! A numeric mode is absolute; on a directory, Puppet adds the search bit wherever the
//! read bit is set (`'0644'` makes a directory `0755`). A symbolic mode changes the
//! current mode (for a new file, the default: `0644`, or `0755` for a directory)
//! clause by clause; no `who` means all (`'+x'` is `'a+x'`), and the umask plays no
//! part.

/// A parsed mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Numeric(u32),
    Symbolic(Vec<Clause>),
}

/// One clause of a symbolic mode: who, then operations (`u+r-w`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// Bits of `u`, `g`, `o` (0o4, 0o2, 0o1 in this order: 0o7 is `a`).
    who: u32,
    operations: Vec<(char, Permissions)>,
}

/// What an operation adds, removes or sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Permissions {
    /// `rwxXst` letters.
    Letters {
        read: bool,
        write: bool,
        execute: bool,
        /// `X`: execute, if a directory or already executable by someone.
        search: bool,
        set_id: bool,
        sticky: bool,
    },
    /// A copy of another class's current bits (`g=u`).
    Copy(u32),
}

impl Mode {
    /// The mode `text` means, or why it is not a mode.
    pub fn parse(text: &str) -> Result<Mode, String> {
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            if text.len() > 4 || !text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return Err(format!(
                    "mode `{text}` is not an octal mode of at most four digits like '0644'"
                ));
            }
            return u32::from_str_radix(text, 8)
                .map(Mode::Numeric)
                .map_err(|error| format!("mode `{text}`: {error}"));
        }
        if text.is_empty() || text.len() > 128 {
            return Err(format!(
                "mode `{text}` is neither octal ('0644') nor symbolic ('u=rw,go=r')"
            ));
        }
        text.split(',')
            .map(|clause| parse_clause(clause).ok_or(clause))
            .collect::<Result<Vec<_>, _>>()
            .map(Mode::Symbolic)
            .map_err(|clause| {
                format!(
                    "mode `{text}`: `{clause}` is not a clause of a symbolic mode; write \
                     them like chmod's: 'u=rw,go=r', 'a+x', 'ug+rwX,o-w'"
                )
            })
    }

    /// The mode a file ends with whose mode is `current` now (its kind's default when it
    /// does not exist yet).
    pub fn apply(&self, current: u32, directory: bool) -> u32 {
        match self {
            Mode::Numeric(mode) if directory => {
                let mut mode = *mode;
                for shift in [6, 3, 0] {
                    if mode & (0o4 << shift) != 0 {
                        mode |= 0o1 << shift;
                    }
                }
                mode
            }
            Mode::Numeric(mode) => *mode,
            Mode::Symbolic(clauses) => clauses.iter().fold(current & 0o7777, |mode, clause| {
                clause.apply(mode, directory)
            }),
        }
    }
}

fn parse_clause(clause: &str) -> Option<Clause> {
    let mut chars = clause.chars().peekable();
    let mut who = 0;
    while let Some(&c) = chars.peek() {
        who |= match c {
            'u' => 0o4,
            'g' => 0o2,
            'o' => 0o1,
            'a' => 0o7,
            _ => break,
        };
        chars.next();
    }
    if who == 0 {
        who = 0o7;
    }
    let mut operations = Vec::new();
    while let Some(op) = chars.next() {
        if !matches!(op, '+' | '-' | '=') {
            return None;
        }
        let mut letters = (false, false, false, false, false, false);
        let mut copy = None;
        while let Some(&c) = chars.peek() {
            match c {
                'r' => letters.0 = true,
                'w' => letters.1 = true,
                'x' => letters.2 = true,
                'X' => letters.3 = true,
                's' => letters.4 = true,
                't' => letters.5 = true,
                'u' | 'g' | 'o' if copy.is_none() && letters == Default::default() => {
                    copy = Some(match c {
                        'u' => 0o4,
                        'g' => 0o2,
                        _ => 0o1,
                    });
                }
                _ => break,
            }
            chars.next();
        }
        let permissions = match copy {
            Some(_) if letters != Default::default() => return None,
            Some(class) => Permissions::Copy(class),
            None => Permissions::Letters {
                read: letters.0,
                write: letters.1,
                execute: letters.2,
                search: letters.3,
                set_id: letters.4,
                sticky: letters.5,
            },
        };
        operations.push((op, permissions));
    }
    (!operations.is_empty()).then_some(Clause { who, operations })
}

impl Clause {
    fn apply(&self, mut mode: u32, directory: bool) -> u32 {
        for &(op, permissions) in &self.operations {
            let mut bits = 0;
            for (class, shift, set_id) in [(0o4, 6, 0o4000), (0o2, 3, 0o2000), (0o1, 0, 0)] {
                if self.who & class == 0 {
                    continue;
                }
                let rwx = match permissions {
                    Permissions::Copy(from) => {
                        let from_shift = match from {
                            0o4 => 6,
                            0o2 => 3,
                            _ => 0,
                        };
                        (mode >> from_shift) & 0o7
                    }
                    Permissions::Letters {
                        read,
                        write,
                        execute,
                        search,
                        set_id: wants_set_id,
                        ..
                    } => {
                        let searchable = directory || mode & 0o111 != 0;
                        let mut rwx = 0;
                        if read {
                            rwx |= 0o4;
                        }
                        if write {
                            rwx |= 0o2;
                        }
                        if execute || (search && searchable) {
                            rwx |= 0o1;
                        }
                        if wants_set_id {
                            bits |= set_id;
                        }
                        rwx
                    }
                };
                bits |= rwx << shift;
            }
            if let Permissions::Letters { sticky: true, .. } = permissions
                && self.who & 0o1 != 0
            {
                bits |= 0o1000;
            }
            mode = match op {
                '+' => mode | bits,
                '-' => mode & !bits,
                _ => {
                    let mut cleared = 0;
                    for (class, mask) in [(0o4, 0o4700), (0o2, 0o2070), (0o1, 0o1007)] {
                        if self.who & class != 0 {
                            cleared |= mask;
                        }
                    }
                    (mode & !cleared) | bits
                }
            };
        }
        mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbolic(text: &str, current: u32, directory: bool) -> u32 {
        Mode::parse(text).expect(text).apply(current, directory)
    }

    #[test]
    fn numeric_modes_are_absolute_and_directories_get_search_where_read() {
        assert_eq!(Mode::parse("0644"), Ok(Mode::Numeric(0o644)));
        assert_eq!(Mode::parse("755"), Ok(Mode::Numeric(0o755)));
        assert_eq!(Mode::parse("4755"), Ok(Mode::Numeric(0o4755)));
        assert_eq!(
            Mode::parse("0644").expect("mode").apply(0o777, false),
            0o644
        );
        assert_eq!(Mode::parse("0644").expect("mode").apply(0, true), 0o755);
        assert_eq!(Mode::parse("0640").expect("mode").apply(0, true), 0o750);
        assert!(Mode::parse("0888").is_err());
        assert!(Mode::parse("17777").is_err());
    }

    #[test]
    fn symbolic_modes_follow_chmod() {
        assert_eq!(symbolic("u=rw,go=r", 0o777, false), 0o644);
        assert_eq!(symbolic("a+x", 0o644, false), 0o755);
        assert_eq!(symbolic("+x", 0o600, false), 0o711);
        assert_eq!(symbolic("go-w", 0o666, false), 0o644);
        assert_eq!(symbolic("ug+rwX,o-rwx", 0o604, false), 0o660);
        assert_eq!(symbolic("ug+rwX,o-rwx", 0o604, true), 0o770);
        assert_eq!(symbolic("u+s", 0o755, false), 0o4755);
        assert_eq!(symbolic("+t", 0o777, true), 0o1777);
        assert_eq!(symbolic("g=u", 0o640, false), 0o660);
        assert_eq!(symbolic("u=rwx,g=rx,o=", 0o4777, false), 0o750);
        assert_eq!(symbolic("u+w-x", 0o555, false), 0o655);
    }

    #[test]
    fn malformed_symbolic_modes_are_errors_that_show_the_syntax() {
        for bad in ["u=rw,", "z+x", "u*r", "", "rw-r--r--", "g=ur"] {
            let error = Mode::parse(bad).expect_err(bad);
            assert!(error.contains("mode `"), "{error}");
        }
    }
}
