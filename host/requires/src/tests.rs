//! Every example, limitation and proposal of PlainBox's documentation of resource
//! programs, with the result it states, and the rejections.

use super::*;

/// A record written as pairs.
type Pairs<'a> = &'a [(&'a str, &'a str)];

fn facts(groups: &[(&str, &[Pairs<'_>])]) -> Facts {
    Facts {
        groups: groups
            .iter()
            .map(|(group, records)| {
                (
                    (*group).to_owned(),
                    records
                        .iter()
                        .map(|record| {
                            record
                                .iter()
                                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                                .collect()
                        })
                        .collect(),
                )
            })
            .collect(),
    }
}

fn holds(program: &str, facts: &Facts) -> bool {
    Program::parse(program)
        .unwrap_or_else(|errors| panic!("{program:?} is valid: {errors:?}"))
        .evaluate(facts)
        .holds
}

fn refused(program: &str) -> ProgramError {
    Program::parse(program)
        .expect_err(program)
        .into_iter()
        .next()
        .expect("an error")
}

fn packages(names: &[&str]) -> Facts {
    let records: Vec<Vec<(&str, &str)>> = names
        .iter()
        .map(|name| vec![("name", *name), ("version", "1.0")])
        .collect();
    let slices: Vec<&[(&str, &str)]> = records.iter().map(Vec::as_slice).collect();
    facts(&[("package", &slices)])
}

#[test]
fn a_package_requirement_holds_when_the_package_is_installed() {
    assert!(holds(
        r#"package.name == "fwts""#,
        &packages(&["bash", "fwts"])
    ));
    assert!(!holds(r#"package.name == "fwts""#, &packages(&["bash"])));
}

#[test]
fn the_cdrom_program_needs_both_lines() {
    let program = "device.category == 'CDROM'\noptical_drive.cd == 'writable'";
    let writable = facts(&[
        (
            "device",
            &[&[("category", "DISK")], &[("category", "CDROM")]],
        ),
        ("optical_drive", &[&[("cd", "writable")]]),
    ]);
    assert!(holds(program, &writable));
    let read_only = facts(&[
        ("device", &[&[("category", "CDROM")]]),
        ("optical_drive", &[&[("cd", "read-only")]]),
    ]);
    let verdict = Program::parse(program).expect("valid").evaluate(&read_only);
    assert_eq!(
        verdict,
        Verdict {
            holds: false,
            failed: Some((2, "optical_drive.cd == 'writable'".to_owned())),
            exhausted: false,
        }
    );
}

#[test]
fn exactly_one_variable_per_expression() {
    let two = refused(r#"device.category == "AUDIO" and package.name == "mplayer""#);
    assert_eq!(
        two.to_string(),
        "line 1, column 1: the expression uses 2 group variables (device, package); each line \
         may use exactly one\n  help: split it into one line per group: lines are joined by an \
         implicit `and`"
    );
    let audio = facts(&[
        ("device", &[&[("category", "AUDIO")]]),
        ("package", &[&[("name", "mplayer")]]),
    ]);
    assert!(holds(
        "device.category == \"AUDIO\"\npackage.name == \"mplayer\"",
        &audio
    ));
    for constant in ["True", "False"] {
        assert_eq!(
            refused(constant).message,
            "the expression uses no group variable"
        );
    }
}

#[test]
fn one_record_at_a_time_makes_the_xorg_procps_program_false() {
    let both = packages(&["xorg", "procps"]);
    assert!(!holds(
        "package.name == 'xorg' and package.name == 'procps'",
        &both
    ));
    assert!(holds(
        "package.name == 'xorg'\npackage.name == 'procps'",
        &both
    ));
}

#[test]
fn not_equal_holds_when_any_record_differs() {
    let xinput = facts(&[(
        "xinput",
        &[
            &[
                ("device_class", "XITouchClass"),
                ("touch_mode", "dependant"),
            ],
            &[
                ("device_class", "XITouchClass"),
                ("touch_mode", "something else"),
            ],
        ],
    )]);
    assert!(holds(
        "xinput.device_class == 'XITouchClass' and xinput.touch_mode != 'dependent'",
        &xinput
    ));
}

#[test]
fn everything_is_a_string_until_converted() {
    let memory = facts(&[("memory", &[&[("size", "2048"), ("ratio", "0.5")]])]);
    // A string never equals a number, and ordering them is an error: false either way.
    assert!(!holds("memory.size == 2048", &memory));
    assert!(!holds("memory.size > 1024", &memory));
    assert!(holds("memory.size == '2048'", &memory));
    assert!(holds("int(memory.size) > 1024", &memory));
    assert!(holds("float(memory.ratio) < 1", &memory));
    assert!(holds("bool(memory.size)", &memory));
    // A failed conversion counts as false for that record only.
    let mixed = facts(&[("memory", &[&[("size", "lots")], &[("size", "4096")]])]);
    assert!(holds("int(memory.size) >= 4096", &mixed));
    assert!(!holds("all(int(memory.size) >= 4096)", &mixed));
}

#[test]
fn explicit_all_asks_every_record() {
    let program = "all(package.name != 'ubuntu-desktop')";
    assert!(holds(program, &packages(&["bash", "fwts"])));
    assert!(!holds(program, &packages(&["bash", "ubuntu-desktop"])));
}

#[test]
fn an_unknown_or_empty_group_is_false() {
    assert!(!holds("package.name == 'x'", &Facts::default()));
    assert!(!holds("all(package.name != 'x')", &packages(&[])));
    // A missing attribute is an error for that record.
    assert!(!holds("package.arch == 'amd64'", &packages(&["bash"])));
}

#[test]
fn python_semantics_of_the_allowed_operators() {
    let record = facts(&[("os", &[&[("family", "debian"), ("release", "12")]])]);
    for (program, expected) in [
        ("os.family in ['debian', 'ubuntu']", true),
        ("os.family not in ('redhat',)", true),
        ("'deb' in os.family", true),
        ("1 in os.family", false),
        ("int(os.release) + 1 == 13", true),
        (
            "int(os.release) // 5 == 2 and int(os.release) % 5 == 2",
            true,
        ),
        ("-int(os.release) // 5 == -3", true),
        ("int(os.release) / 8 == 1.5", true),
        ("2 ** 3 ** 2 == 512 and os.family", true),
        ("-2 ** 2 == -4 and os.family", true),
        ("10 < int(os.release) <= 12", true),
        ("os.family + '-' + os.release == 'debian-12'", true),
        ("os.family * 2 == 'debiandebian'", true),
        ("(1 << 4 | 1) & ~0 == 17 and os.family", true),
        ("not os.family == 'redhat'", true),
        ("True == 1 and 1 == 1.0 and os.family", true),
        ("[1, 2] == [1, 2] and [1] != (1,) and os.family", true),
        ("int(os.release) / 0 or os.family", false),
        ("os.family is True", false),
        ("bool(os.family) is True", true),
        ("os.family and ''", false),
        ("os.family * 10 ** 9", false),
        ("float('nan') < int(os.release)", false),
        ("int(' 12 ') == int(os.release)", true),
        ("int('1_2') == int(os.release)", true),
        ("int('4.2') == 4 or os.family == 'x'", false),
        ("os.family in ['debian', int('x')]", false),
        ("os.release and 0 ** -1", false),
        ("os.release and 10.0 ** 400 > 0", false),
        ("1 // 0.1 == 9 and 7.0 // 0.1 == 69 and os.family", true),
        ("-7.5 % 2 == 0.5 and 7.5 % -2 == -0.5 and os.family", true),
        (
            "2 ** 53 + 1 != 2.0 ** 53 and 2 ** 53 == 2.0 ** 53 and os.family",
            true,
        ),
        (
            "'\\101\\x41\\u0041\\U00000041' == 'AAAA' and os.family",
            true,
        ),
    ] {
        assert_eq!(holds(program, &record), expected, "{program}");
    }
}

#[test]
fn anything_else_is_refused_before_evaluation() {
    for (program, message) in [
        (
            "package.name.upper() == 'X'",
            "attribute access is allowed only on the group variable (`package.name`)",
        ),
        ("package.name == len('x')", "calling `len()` is not allowed"),
        ("package.name = 'x'", "assignment is not allowed"),
        ("package.name[0] == 'x'", "subscripts are not allowed"),
        ("import os", "imports are not allowed"),
        ("(lambda: package.name)()", "lambdas are not allowed"),
        (
            "package.name if package else 'x'",
            "conditional expressions are not allowed",
        ),
        (
            "[p for p in package.name]",
            "comprehensions are not allowed",
        ),
        (
            "package == 'x'",
            "`package` must be used as a group with attributes, like `package.name`",
        ),
        ("package.name == None", "`None` is not allowed"),
        (
            "not all(package.name != 'x')",
            "all() may only wrap a whole line",
        ),
        ("package.name == 'x", "this string is not closed"),
        ("package.name == f'x'", "string prefix `f` is not allowed"),
        (
            "package.name == 'x' ;",
            "`;` is not allowed in a resource expression",
        ),
        (
            "package.name ==",
            "expected a value, found the end of the line",
        ),
        (
            "int(package.name, 16) > 1",
            "int() takes exactly one argument here",
        ),
    ] {
        assert_eq!(refused(program).message, message, "{program}");
    }
}

#[test]
fn every_invalid_line_is_reported_with_its_line_and_column() {
    let errors = Program::parse("package.name == 'x'\n\n  True\nos.family = 'debian'\n")
        .expect_err("invalid");
    let shown: Vec<String> = errors
        .iter()
        .map(|error| format!("{}:{}", error.line, error.column))
        .collect();
    assert_eq!(shown, ["3:3", "4:11"]);
    assert_eq!(
        refused("\n  \n# only a comment").message,
        "the program is empty"
    );
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let deep = format!("{}package.name{}", "(".repeat(200), ")".repeat(200));
    assert!(refused(&deep).message.contains("nests deeper than"));
    let negations = format!("{}package.name", "not ".repeat(200));
    assert!(refused(&negations).message.contains("nests deeper than"));
}

#[test]
fn expensive_programs_stop_instead_of_exhausting_the_machine() {
    let chain = format!("package.name and {}", vec!["1"; 4000].join(" + "));
    assert!(refused(&chain).message.contains("more than 500 parts"));
    let record = packages(&["bash"]);
    // Building a huge value is an error for the record, not an allocation.
    assert!(!holds("[package.name * 2**19] * 2**20 == []", &record));
    assert!(!holds(
        "package.name and [[0] * 2**20] * 2**20 == []",
        &record
    ));
    // A program that does too much stops, and says so.
    let line = "all([package.name] * 8000 != [])";
    let program = Program::parse(&vec![line; 1000].join("\n")).expect("valid");
    let many: Vec<&str> = vec!["x"; 700];
    let verdict = program.evaluate(&packages(&many));
    assert!(!verdict.holds);
    assert!(verdict.exhausted);
}
