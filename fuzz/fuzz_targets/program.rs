//! Fuzz target: any text as a resource program must parse or be refused without
//! panicking, and a program that parses must evaluate without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wconverge_requires::{Facts, Program};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(program) = Program::parse(text) {
        let mut facts = Facts::default();
        for group in program.groups() {
            facts.groups.insert(
                group.to_owned(),
                vec![
                    vec![("name".to_owned(), "x".to_owned()), ("size".to_owned(), "12".to_owned())],
                    vec![("name".to_owned(), String::new())],
                ],
            );
        }
        let _ = program.evaluate(&facts);
    }
});
