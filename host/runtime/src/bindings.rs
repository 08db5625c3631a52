//! Host bindings generated from `wit/` (the only place they are generated).
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
