//! How many arguments each built-in function takes, as Puppet's function reference
//! gives its signatures (a lambda is not counted): a call outside that is an error
//! before the function runs, as in Puppet (`max()` "expects at least 1 argument").

use crate::diagnostic::{DiagnosticCode, Severity, Span};
use crate::eval::Evaluator;

/// Any number from the least.
const MANY: usize = usize::MAX;

/// Each built-in function: the least and the most arguments it takes.
const ARITY: &[(&str, usize, usize)] = &[
    // Catalog and logging.
    ("include", 1, MANY),
    ("contain", 1, MANY),
    ("require", 1, MANY),
    ("realize", 1, MANY),
    ("tag", 1, MANY),
    ("tagged", 1, MANY),
    ("defined", 1, MANY),
    ("notice", 0, MANY),
    ("info", 0, MANY),
    ("debug", 0, MANY),
    ("warning", 0, MANY),
    ("err", 0, MANY),
    ("alert", 0, MANY),
    ("crit", 0, MANY),
    ("emerg", 0, MANY),
    ("fail", 0, MANY),
    // Iteration.
    ("each", 1, 1),
    ("map", 1, 1),
    ("filter", 1, 1),
    ("reduce", 1, 2),
    ("select", 1, 1),
    ("reject", 1, 1),
    ("collect", 1, 1),
    ("any", 1, 1),
    ("all", 1, 1),
    ("group_by", 1, 1),
    ("partition", 1, 1),
    ("slice", 2, 2),
    ("break", 0, 0),
    ("next", 0, 1),
    ("return", 0, 1),
    ("with", 0, MANY),
    ("new", 1, MANY),
    ("step", 2, 2),
    ("reverse_each", 1, 1),
    ("then", 1, 1),
    ("lest", 1, 1),
    // Strings and collections.
    ("split", 2, 2),
    ("join", 1, 2),
    ("upcase", 1, 1),
    ("downcase", 1, 1),
    ("capitalize", 1, 1),
    ("strip", 1, 1),
    ("lstrip", 1, 1),
    ("rstrip", 1, 1),
    ("chomp", 1, 1),
    ("chop", 1, 1),
    ("camelcase", 1, 1),
    ("length", 1, 1),
    ("size", 1, 1),
    ("keys", 1, 1),
    ("values", 1, 1),
    ("flatten", 1, MANY),
    ("unique", 1, 1),
    ("sort", 1, 1),
    ("empty", 1, 1),
    ("sensitive", 1, 1),
    ("unwrap", 1, 1),
    ("regsubst", 3, 5),
    ("sprintf", 1, MANY),
    ("versioncmp", 2, 3),
    ("merge", 1, MANY),
    ("abs", 1, 1),
    ("min", 1, MANY),
    ("max", 1, MANY),
    ("ceiling", 1, 1),
    ("floor", 1, 1),
    ("round", 1, 1),
    ("compare", 2, 3),
    ("dig", 1, MANY),
    ("get", 2, 3),
    ("getvar", 1, 2),
    ("index", 1, 2),
    ("type", 1, 2),
    ("match", 2, 2),
    ("assert_type", 2, 2),
    ("sha256", 1, 1),
    ("base64", 2, 3),
    // Data: Hiera and templates.
    ("lookup", 1, 4),
    ("hiera", 1, 3),
    ("hiera_array", 1, 3),
    ("hiera_hash", 1, 3),
    ("hiera_include", 1, 3),
    ("epp", 1, 2),
    ("template", 1, MANY),
    ("inline_template", 1, MANY),
    ("inline_epp", 1, 2),
    // Conversions, reached through `Type.new(...)` with the type taken off.
    ("new_integer", 0, 3),
    ("new_float", 0, 2),
    ("new_numeric", 0, 2),
    ("new_string", 0, 2),
    ("new_boolean", 0, 1),
    ("new_array", 0, 2),
    ("new_hash", 0, 2),
    ("new_binary", 1, 2),
    ("new_semver", 1, 5),
    ("new_timespan", 1, 6),
    ("new_timestamp", 0, 2),
    ("strftime", 1, 3),
    ("call", 1, MANY),
    ("convert_to", 2, MANY),
    ("create_resources", 2, 3),
    ("md5", 1, 1),
    ("sha1", 1, 1),
    ("digest", 1, 1),
    ("shellquote", 1, MANY),
    ("tree_each", 1, 2),
    ("fqdn_rand", 1, 3),
    // puppetlabs-stdlib.
    ("pick", 1, MANY),
    ("pick_default", 1, MANY),
    ("str2bool", 1, 1),
    ("bool2str", 1, 3),
    ("concat", 1, MANY),
    ("delete", 2, 2),
    ("has_key", 2, 2),
    ("member", 2, 2),
    ("ensure_resource", 2, 3),
    ("ensure_resources", 2, 3),
    ("ensure_packages", 1, 2),
    ("is_string", 1, 1),
    ("is_array", 1, 1),
    ("is_hash", 1, 1),
    ("is_integer", 1, 1),
    ("is_numeric", 1, 1),
    ("is_float", 1, 1),
    ("is_bool", 1, 1),
    ("is_absolute_path", 1, 1),
    ("validate_string", 1, MANY),
    ("validate_array", 1, MANY),
    ("validate_hash", 1, MANY),
    ("validate_bool", 1, MANY),
    ("validate_integer", 1, 3),
    ("validate_absolute_path", 1, MANY),
    ("validate_re", 2, 3),
];

/// The arguments `name` takes, if it is a built-in function.
pub(crate) fn of(name: &str) -> Option<(usize, usize)> {
    ARITY
        .iter()
        .find(|(known, ..)| *known == name)
        .map(|&(_, least, most)| (least, most))
}

/// Whether `given` arguments fit the built-in `name`; reported when they do not.
pub(crate) fn fits(evaluator: &mut Evaluator<'_>, name: &str, given: usize, span: Span) -> bool {
    let Some((least, most)) = of(name) else {
        return true;
    };
    if (least..=most).contains(&given) {
        return true;
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let takes = if most == MANY {
        format!("at least {least} argument{}", plural(least))
    } else if least == most {
        format!("{least} argument{}", plural(least))
    } else {
        format!("{least} to {most} arguments")
    };
    evaluator
        .report(
            Severity::Error,
            DiagnosticCode::BadArgument,
            span,
            format!("`{name}` takes {takes}, and is given {given}"),
        )
        .help = Some(format!(
        "see `{name}` in Puppet's function reference (docs/language.md, Functions)"
    ));
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_function_says_how_many_arguments_it_takes() {
        let missing: Vec<&str> = crate::eval::functions::FUNCTIONS
            .iter()
            .chain(crate::eval::stdlib::names())
            .copied()
            .filter(|name| of(name).is_none())
            .collect();
        assert!(missing.is_empty(), "no arity for {missing:?}");
        for (name, ..) in ARITY {
            assert!(
                crate::eval::functions::is_builtin(name),
                "`{name}` has an arity but is no function"
            );
        }
    }
}
