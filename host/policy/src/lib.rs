//! What a policy grants, without running anything: the policy file (`policy`), the
//! argument patterns of program grants (`arguments`), and the flags `wconverge plugins
//! audit` shows a reviewer (`audit`). The runtime enforces it; a review reads it; neither
//! needs wasmtime for that.

pub mod arguments;
pub mod audit;
pub mod policy;
