//! Paths of the test plugins (`tests/plugins/*`), built for wasm32-wasip2 by this
//! crate's build script. They are never embedded in `wconverge`: only the end-to-end
//! tests load them, pinned by digest in a test policy.

include!(concat!(env!("OUT_DIR"), "/test_plugins.rs"));
