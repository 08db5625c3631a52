//! Why a resource failed in the run. The report shows a failure as its text; the kinds
//! say where it came from, so the engine (and whoever reads its errors) can tell them
//! apart without reading the words.

use crate::PluginError;
use std::fmt;

/// Why a resource failed before or while its changes were made.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// A call of its plugin failed: the provider's own error, a refusal of the host, a
    /// fault, a plugin that could not be loaded or broke its contract.
    Plugin(PluginError),
    /// Its provider could not read its state (read with others, in one call), in the
    /// provider's words.
    State(String),
    /// The facts it reads (`what`: its lazy values, its run context) could not be
    /// gathered.
    Facts {
        what: &'static str,
        error: FactsError,
    },
    /// A guard could not be evaluated, or ran past its timeout.
    Guard(String),
    /// A lazy value (or a `node_block`'s body) could not be evaluated, or its value does
    /// not fit its attribute.
    Lazy(String),
    /// With its lazy values resolved, its provider's checks refuse it.
    Refused(Vec<String>),
    /// An attribute whose default lies in a user's home could not be filled in.
    Home(String),
    /// Its plan changes an `init_only` attribute (named) of a resource that exists.
    InitOnly(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Plugin(error) => error.fmt(f),
            Failure::State(message)
            | Failure::Guard(message)
            | Failure::Lazy(message)
            | Failure::Home(message) => f.write_str(message),
            Failure::Facts { what, error } => {
                write!(f, "the facts {what} could not be gathered: {error}")
            }
            Failure::Refused(problems) => {
                write!(f, "with its lazy values resolved: {}", problems.join("; "))
            }
            Failure::InitOnly(attribute) => write!(
                f,
                "attribute `{attribute}` is init_only: it is set when the resource is created \
                 and cannot change after; remove the resource and create it again to change it"
            ),
        }
    }
}

impl std::error::Error for Failure {}

/// Why this machine's facts could not be gathered: the fact plugins that failed.
#[derive(Debug, Clone, PartialEq)]
pub struct FactsError(pub Vec<PluginError>);

impl fmt::Display for FactsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, error) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str("; ")?;
            }
            error.fmt(f)?;
        }
        Ok(())
    }
}

impl std::error::Error for FactsError {}

impl From<PluginError> for Failure {
    fn from(error: PluginError) -> Failure {
        Failure::Plugin(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PluginErrorKind;

    #[test]
    fn each_failure_reads_as_the_report_shows_it() {
        let denied = PluginError {
            plugin: "file".to_owned(),
            kind: PluginErrorKind::Denied,
            message: "`/etc` is not granted".to_owned(),
        };
        for (failure, text) in [
            (Failure::from(denied), "denied: `/etc` is not granted"),
            (
                Failure::Facts {
                    what: "its lazy values read",
                    error: FactsError(vec![
                        PluginError {
                            plugin: "facts-os".to_owned(),
                            kind: PluginErrorKind::Fault,
                            message: "unreachable".to_owned(),
                        },
                        PluginError {
                            plugin: "facts-mount".to_owned(),
                            kind: PluginErrorKind::Denied,
                            message: "`/proc` is not granted".to_owned(),
                        },
                    ]),
                },
                "the facts its lazy values read could not be gathered: plugin `facts-os` faulted: \
                 unreachable; denied: `/proc` is not granted",
            ),
            (
                Failure::Refused(vec!["a".to_owned(), "b".to_owned()]),
                "with its lazy values resolved: a; b",
            ),
            (
                Failure::InitOnly("uid".to_owned()),
                "attribute `uid` is init_only: it is set when the resource is created and \
                 cannot change after; remove the resource and create it again to change it",
            ),
            (Failure::Guard("g".to_owned()), "g"),
            (Failure::State("s".to_owned()), "s"),
        ] {
            assert_eq!(failure.to_string(), text);
        }
    }
}
