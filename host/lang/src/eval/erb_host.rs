//! `template()` and `inline_template()`: ERB rendered at compile time by `crate::erb`,
//! against the variables of the scope that calls it and Puppet's functions, as Puppet's
//! template wrapper gives them to Ruby (`undef` is `nil`, `default` is `:default`).

use super::Evaluator;
use crate::diagnostic::{DiagnosticCode, Severity, Span};
use crate::erb::{Host, RVal};
use crate::eval::value::Val;

/// What a template's call of a function gives when the function failed: the function
/// reported it, and the template stops without reporting it again.
const SAID: &str = "\u{0}reported";

/// A template's view of the compile: the calling scope's variables, and the functions.
struct Calls<'e, 'a> {
    evaluator: &'e mut Evaluator<'a>,
    span: Span,
}

impl Host for Calls<'_, '_> {
    fn variable(&mut self, name: &str) -> Option<RVal> {
        let value = if name.contains("::") {
            self.evaluator.peek_qualified(name)
        } else {
            self.evaluator.peek_variable(name)
        }?;
        Some(to_ruby(&value))
    }

    fn call(&mut self, name: &str, args: Vec<RVal>) -> Result<RVal, String> {
        if name == "template" {
            let before = self.evaluator.errors;
            let args = args.iter().map(from_ruby).collect();
            let value = self.evaluator.render_erb("template", args, self.span);
            if self.evaluator.errors > before {
                return Err(SAID.to_owned());
            }
            return Ok(to_ruby(&value));
        }
        if !crate::eval::functions::is_builtin(name) {
            return Err(format!("`{name}` is no function wconverge has"));
        }
        let before = self.evaluator.errors;
        let args = args.iter().map(from_ruby).collect();
        let value = crate::eval::functions::call(self.evaluator, name, args, None, self.span);
        if self.evaluator.errors > before {
            return Err(SAID.to_owned());
        }
        Ok(to_ruby(&value))
    }
}

/// A value of the manifest as Ruby sees it in a template.
fn to_ruby(value: &Val) -> RVal {
    match value {
        Val::Undef => RVal::Nil,
        Val::Default => RVal::Sym("default".to_owned()),
        Val::Bool(b) => RVal::Bool(*b),
        Val::Int(i) => RVal::Int(*i),
        Val::Float(f) => RVal::Float(*f),
        Val::Str(text) => RVal::Str(text.clone()),
        Val::Regex(pattern) => RVal::Regex(pattern.clone()),
        Val::Array(items) => RVal::Array(items.iter().map(to_ruby).collect()),
        Val::Hash(entries) => RVal::Hash(
            entries
                .iter()
                .map(|(key, value)| (to_ruby(key), to_ruby(value)))
                .collect(),
        ),
        Val::Rich(rich) => RVal::Other(rich.type_name(), rich.text()),
        Val::Sensitive(_) => RVal::Other(
            "Puppet::Pops::Types::PSensitiveType::Sensitive",
            value.to_display(),
        ),
        other => RVal::Other("Puppet::Pops::Types::PAnyType", other.to_display()),
    }
}

/// A value of the template as the manifest sees it (what a function is given).
fn from_ruby(value: &RVal) -> Val {
    match value {
        RVal::Nil => Val::Undef,
        RVal::Bool(b) => Val::Bool(*b),
        RVal::Int(i) => Val::Int(*i),
        RVal::Float(f) => Val::Float(*f),
        RVal::Str(text) => Val::Str(text.clone()),
        RVal::Sym(name) if name == "default" => Val::Default,
        RVal::Sym(name) => Val::Str(name.clone()),
        RVal::Regex(pattern) => Val::Regex(pattern.clone()),
        RVal::Array(items) => Val::Array(items.iter().map(from_ruby).collect()),
        RVal::Hash(entries) => Val::Hash(
            entries
                .iter()
                .map(|(key, value)| (from_ruby(key), from_ruby(value)))
                .collect(),
        ),
        RVal::Range(from, to) => Val::Array((*from..=*to).take(1_000_000).map(Val::Int).collect()),
        other => Val::Str(other.to_s()),
    }
}

impl Evaluator<'_> {
    /// `template('NAME/file.erb', ...)` (each template's text, joined) or
    /// `inline_template(text, ...)`.
    pub(crate) fn render_erb(&mut self, name: &str, args: Vec<Val>, span: Span) -> Val {
        if self.erb_depth >= crate::MAX_NESTING {
            self.report(
                Severity::Error,
                DiagnosticCode::Erb,
                span,
                format!(
                    "templates render templates more than {} deep (the limit)",
                    crate::MAX_NESTING
                ),
            );
            return Val::Undef;
        }
        self.erb_depth += 1;
        let rendered = self.render_erb_texts(name, args, span);
        self.erb_depth -= 1;
        rendered
    }

    fn render_erb_texts(&mut self, name: &str, args: Vec<Val>, span: Span) -> Val {
        let mut out = String::new();
        for arg in args {
            let Val::Str(first) = arg else {
                self.report(
                    Severity::Error,
                    DiagnosticCode::Erb,
                    span,
                    format!(
                        "`{name}` takes strings, not {} `{}`",
                        arg.type_name(),
                        arg.to_display()
                    ),
                );
                return Val::Undef;
            };
            let (label, text) = if name == "inline_template" {
                ("inline_template".to_owned(), first)
            } else {
                match crate::eval::functions::template_source(self, "template", &first, span) {
                    Some(source) => (first, source.text),
                    None => return Val::Undef,
                }
            };
            let rendered = crate::erb::parse_template(&text).and_then(|program| {
                let mut calls = Calls {
                    evaluator: self,
                    span,
                };
                crate::erb::render(&program, &mut calls)
            });
            match rendered {
                Ok(text) => out.push_str(&text),
                // A function it called failed, and said why: nothing more to say.
                Err(error) if error.message == SAID => return Val::Undef,
                Err(error) => {
                    self.report(
                        Severity::Error,
                        DiagnosticCode::Erb,
                        span,
                        format!(
                            "ERB template `{label}`, line {}: {}",
                            error.line, error.message
                        ),
                    )
                    .help = Some(
                        "templates here run the Ruby module templates use (see docs/language.md, \
                         ERB templates); write the template in EPP for anything else"
                            .into(),
                    );
                    return Val::Undef;
                }
            }
        }
        Val::Str(out)
    }
}
