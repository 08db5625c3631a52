//! Tests of the lexer: tokens, spans, strings with interpolation, and streaming.

use super::*;

fn toks(text: &str) -> Vec<Tok> {
    let mut diagnostics = Vec::new();
    let tokens = lex(0, text, &mut diagnostics);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    tokens.into_iter().map(|token| token.tok).collect()
}

#[test]
fn names_refs_and_variables() {
    assert_eq!(
        toks("file File::Bar $x::y ::top"),
        vec![
            Tok::Name("file".into()),
            Tok::TypeRef("File::Bar".into()),
            Tok::Var("x::y".into()),
            Tok::Name("::top".into()),
            Tok::Eof
        ]
    );
}

#[test]
fn numbers_follow_puppet_radixes() {
    assert_eq!(
        toks("42 0x1f 0755 1.5"),
        vec![
            Tok::Int(42),
            Tok::Int(31),
            Tok::Int(0o755),
            Tok::Float(1.5),
            Tok::Eof
        ]
    );
}

#[test]
fn slash_divides_after_a_value_and_starts_a_regex_elsewhere() {
    assert_eq!(
        toks("$a / 2 =~ /x\\/y/"),
        vec![
            Tok::Var("a".into()),
            Tok::Punct(P::Slash),
            Tok::Int(2),
            Tok::Punct(P::Match),
            Tok::Regex("x/y".into()),
            Tok::Eof
        ]
    );
}

#[test]
fn collectors_win_over_shifts() {
    assert_eq!(
        toks("<<| |>> <| |> <<"),
        vec![
            Tok::Punct(P::LLCollect),
            Tok::Punct(P::RRCollect),
            Tok::Punct(P::LCollect),
            Tok::Punct(P::RCollect),
            Tok::Punct(P::LShift),
            Tok::Eof
        ]
    );
}

#[test]
fn double_quoted_strings_split_into_parts() {
    let tokens = toks(r#""a $b ${c['d']} \t\$""#);
    let Tok::Interp(parts) = &tokens[0] else {
        panic!("expected an interpolated string, got {tokens:?}")
    };
    assert_eq!(parts.len(), 5);
    assert_eq!(parts[0], Part::Lit("a ".into()));
    assert_eq!(parts[4], Part::Lit(" \t$".into()));
}

#[test]
fn unterminated_string_is_reported() {
    let mut diagnostics = Vec::new();
    lex(0, "'abc", &mut diagnostics);
    assert_eq!(diagnostics.len(), 1);
    assert!(diagnostics[0].message.contains("unterminated string"));
}
