//! What a component may import and export: the WASI interfaces with no network, this
//! host's interfaces of one WIT version (this one, or the previous one for providers).
//! A component that asks for anything else is refused when it loads, naming it.

use crate::bindings::{PREVIOUS_WIT_VERSION, WIT_PACKAGE, WIT_VERSION};

/// Imports a plugin may have. Nothing else is ever linked: no sockets, no HTTP.
const ALLOWED_WASI: &[&str] = &[
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
];
const ALLOWED_HOST: &[&str] = &["log", "process", "file-metadata", "types"];

/// Why a component's imports or exports are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Built against a WIT version this host does not load.
    Version(String),
    /// It imports this host's interfaces of two versions.
    TwoVersions(String, String),
    /// An import no policy can grant (`network`: sockets or HTTP).
    Import { import: String, network: bool },
    /// An interface of the previous WIT version that only a provider may have.
    PreviousExport(String),
    /// It exports the interfaces of two worlds (`what`, in words).
    Mixed(&'static str),
    /// Its exports do not fit the `world` it claims: wasmtime's words.
    Misfit { world: &'static str, error: String },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Version(version) => write!(
                f,
                "it was built against {WIT_PACKAGE}@{version}, and this wconverge implements \
                 {WIT_PACKAGE}@{WIT_VERSION} (and loads providers built against \
                 {PREVIOUS_WIT_VERSION}); rebuild it against {WIT_VERSION}"
            ),
            Refused::TwoVersions(first, second) => write!(
                f,
                "it imports {WIT_PACKAGE} interfaces of two versions, {first} and {second}; \
                 rebuild it against {WIT_VERSION}"
            ),
            Refused::Import { import, network } => write!(
                f,
                "it imports `{import}`, which is refused: {}",
                if *network {
                    "plugins have no network access"
                } else {
                    "no policy can grant it"
                }
            ),
            Refused::PreviousExport(export) => write!(
                f,
                "it exports `{export}`: it was built against {WIT_PACKAGE}@{PREVIOUS_WIT_VERSION}, \
                 whose interpreters, launchers and fact sources this wconverge does not load \
                 (only its providers); rebuild it against {WIT_VERSION}"
            ),
            Refused::Mixed(what) => write!(
                f,
                "it exports {what}; a plugin is built for one world (provider, interpreter, \
                 launcher or fact-source): rebuild it for one"
            ),
            Refused::Misfit { world, error } => write!(
                f,
                "it does not fit the `{world}` world ({error}); rebuild it against this \
                 wconverge's wit/ ({WIT_PACKAGE}@{WIT_VERSION})"
            ),
        }
    }
}

/// Checks a component's imports against what any plugin may import; the error names
/// the first import that is refused. A plugin's host interfaces are all of this host's
/// WIT version, or all of the previous one (loaded through `previous`).
pub(crate) fn check_imports(imports: &[String]) -> Result<(), Refused> {
    let mut built_against: Option<&str> = None;
    for import in imports {
        if ALLOWED_WASI.iter().any(|prefix| import.starts_with(prefix)) {
            continue;
        }
        if let Some(rest) = import.strip_prefix(&format!("{WIT_PACKAGE}/")) {
            let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
            if version != WIT_VERSION && version != PREVIOUS_WIT_VERSION {
                return Err(Refused::Version(version.to_owned()));
            }
            if let Some(other) = built_against.replace(version)
                && other != version
            {
                return Err(Refused::TwoVersions(other.to_owned(), version.to_owned()));
            }
            if ALLOWED_HOST.contains(&interface) {
                continue;
            }
        }
        return Err(Refused::Import {
            import: import.clone(),
            network: import.starts_with("wasi:sockets/") || import.starts_with("wasi:http/"),
        });
    }
    Ok(())
}

/// Refuses a component that exports an interface of the previous WIT version: the
/// adapter covers that version's providers (whose exports are plain functions), not its
/// interpreters, launchers or fact sources, which would otherwise load as a plain
/// provider, or not at all, without saying why.
pub(crate) fn check_previous_exports(exports: &[String]) -> Result<(), Refused> {
    let suffix = format!("@{PREVIOUS_WIT_VERSION}");
    match exports
        .iter()
        .find(|export| export.starts_with(&format!("{WIT_PACKAGE}/")) && export.ends_with(&suffix))
    {
        Some(export) => Err(Refused::PreviousExport(export.clone())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_checked_by_interface_and_version() {
        let said = |checked: Result<(), Refused>| checked.map_err(|refused| refused.to_string());
        let ok = [
            "wasi:io/poll@0.2.6",
            "wasi:filesystem/types@0.2.6",
            "wconverge:plugin/log@0.8.0",
        ]
        .map(str::to_owned);
        assert_eq!(check_imports(&ok), Ok(()));
        let sockets = ["wasi:sockets/tcp@0.2.6".to_owned()];
        assert_eq!(
            said(check_imports(&sockets)),
            Err("it imports `wasi:sockets/tcp@0.2.6`, which is refused: plugins have no network access".to_owned())
        );
        assert_eq!(
            check_imports(&sockets),
            Err(Refused::Import {
                import: "wasi:sockets/tcp@0.2.6".to_owned(),
                network: true,
            })
        );
        let older = ["wconverge:plugin/log@0.2.0".to_owned()];
        assert_eq!(
            check_imports(&older),
            Err(Refused::Version("0.2.0".to_owned()))
        );
        assert_eq!(
            said(check_imports(&older)),
            Err(
                "it was built against wconverge:plugin@0.2.0, and this wconverge implements \
                 wconverge:plugin@0.8.0 (and loads providers built against 0.7.0); rebuild \
                 it against 0.8.0"
                    .to_owned()
            )
        );
        assert_eq!(
            check_previous_exports(&["describe".to_owned(), "plan".to_owned()]),
            Ok(())
        );
        assert_eq!(
            said(check_previous_exports(&[
                "wconverge:plugin/scripts@0.7.0".to_owned()
            ])),
            Err(
                "it exports `wconverge:plugin/scripts@0.7.0`: it was built against \
                 wconverge:plugin@0.7.0, whose interpreters, launchers and fact sources this \
                 wconverge does not load (only its providers); rebuild it against 0.8.0"
                    .to_owned()
            )
        );
        let previous = [
            "wconverge:plugin/log@0.7.0".to_owned(),
            "wconverge:plugin/types@0.7.0".to_owned(),
        ];
        assert_eq!(check_imports(&previous), Ok(()));
        let mixed = [
            "wconverge:plugin/log@0.7.0".to_owned(),
            "wconverge:plugin/process@0.8.0".to_owned(),
        ];
        assert_eq!(
            said(check_imports(&mixed)),
            Err(
                "it imports wconverge:plugin interfaces of two versions, 0.7.0 and 0.8.0; \
                 rebuild it against 0.8.0"
                    .to_owned()
            )
        );
    }
}
