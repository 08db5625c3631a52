//! Host bindings generated from `wit/` (the only place they are generated): the
//! `provider` world, and the exports of the `interpreter` and `launcher` worlds, which
//! share its types and imports.
//!
//! Host calls are traced (`RUST_LOG=wconverge_runtime=trace`), except `log`, whose
//! messages may carry values the engine has yet to redact.

#![expect(unreachable_pub, reason = "generated code decides its own visibility")]

wasmtime::component::bindgen!({
    world: "provider",
    path: "../../wit",
    imports: {
        "wconverge:plugin/log.log": trappable,
        "wconverge:plugin/process.run": tracing,
        "wconverge:plugin/file-metadata.stat": tracing,
        "wconverge:plugin/file-metadata.set-mode": tracing,
        "wconverge:plugin/file-metadata.set-owner": tracing,
    },
    additional_derives: [PartialEq],
});

pub use wconverge::plugin::types;
pub use wconverge::plugin::{file_metadata, log, process};

/// The `interpreter` world: only its `scripts` export is used from here (its provider
/// functions are reached through [`Provider`]).
pub mod interpreter {
    wasmtime::component::bindgen!({
        world: "interpreter",
        path: "../../wit",
        with: {
            "wconverge:plugin/types": super::types,
            "wconverge:plugin/log": super::log,
            "wconverge:plugin/process": super::process,
            "wconverge:plugin/file-metadata": super::file_metadata,
        },
        additional_derives: [PartialEq],
    });

    pub use exports::wconverge::plugin::scripts;
}

/// The `launcher` world.
pub mod launcher {
    wasmtime::component::bindgen!({
        world: "launcher",
        path: "../../wit",
        additional_derives: [PartialEq],
    });

    pub use exports::wconverge::plugin::launching;
}

/// The `fact-source` world.
pub mod fact_source {
    wasmtime::component::bindgen!({
        world: "fact-source",
        path: "../../wit",
        with: {
            "wconverge:plugin/log": super::log,
        },
        additional_derives: [PartialEq],
    });

    pub use exports::wconverge::plugin::facts;
}

/// The WIT package version this host implements.
pub(crate) const WIT_PACKAGE: &str = "wconverge:plugin";
pub const WIT_VERSION: &str = "0.8.0";

/// The WIT version before this host's, whose providers still load (`previous`).
pub const PREVIOUS_WIT_VERSION: &str = "0.7.0";

/// Export names that tell the worlds apart (`{WIT_PACKAGE}/NAME@{WIT_VERSION}`: a unit
/// test checks they agree).
pub const FACTS_EXPORT: &str = "wconverge:plugin/facts@0.8.0";
pub const SCRIPTS_EXPORT: &str = "wconverge:plugin/scripts@0.8.0";
pub const LAUNCHING_EXPORT: &str = "wconverge:plugin/launching@0.8.0";

#[cfg(test)]
#[test]
fn the_export_names_are_of_the_package_and_version_implemented() {
    for (name, export) in [
        ("facts", FACTS_EXPORT),
        ("scripts", SCRIPTS_EXPORT),
        ("launching", LAUNCHING_EXPORT),
    ] {
        assert_eq!(export, format!("{WIT_PACKAGE}/{name}@{WIT_VERSION}"));
    }
}
pub const PROVIDER_EXPORT: &str = "describe";
