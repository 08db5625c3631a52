//! Fuzzes the whole front end: any bytes, as one or two manifest files, through the
//! lexer, the parser and the evaluator. The property is that `compile` never panics,
//! never overflows the stack, and reports every error at a span inside its file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wconverge_lang::{CompileOptions, KnownTypes, Source, compile, render};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // A NUL byte splits the input into two files, to exercise cross-file spans.
    let sources: Vec<Source> = match text.split_once('\0') {
        Some((first, second)) => vec![Source::new("a.wcv", first), Source::new("b.wcv", second)],
        None => vec![Source::new("a.wcv", text.as_ref())],
    };
    let mut types = KnownTypes::new();
    types.insert("file", ["path", "ensure", "content", "mode", "owner", "group"]);
    types.insert("exec", ["command", "cwd", "environment", "user", "timeout", "returns"]);
    types.insert("notify", ["message"]);
    let compiled = compile(&sources, &CompileOptions::new("node1.example.com", &types));
    // Templates (`inline_epp`) are files of the compile too, after the sources.
    let mut sources = sources;
    sources.extend(compiled.loaded.iter().cloned());
    for diagnostic in &compiled.diagnostics {
        let source = &sources[diagnostic.span.file as usize];
        assert!(diagnostic.span.start <= diagnostic.span.end);
        assert!(diagnostic.span.end as usize <= source.text.len());
        render(diagnostic, &sources);
    }
    if compiled.diagnostics.iter().any(|diagnostic| diagnostic.is_error()) {
        assert!(compiled.catalog.is_none(), "a catalog despite errors");
    }
    if let Some(catalog) = compiled.catalog {
        // What compiles must serialize and read back.
        let json = catalog.to_json();
        assert!(json.starts_with('{'));
    }
});
