//! End-to-end tests: the real `wconverge` binary, real components under wasmtime, real
//! processes and real files in temporary directories.
//!
//! One test binary (as wasmtime does) to save link time. It is a test target of the
//! `wconverge-cli` package so that cargo builds the binary for it; the test plugins come
//! from the `wconverge-tests` artifacts crate.

mod accounts;
mod agent;
mod attacker;
mod audit;
mod authors;
mod control_repo;
mod converge;
mod deployment;
mod drift;
mod entries;
mod files;
mod golden;
mod grammars;
mod guards;
mod hardening;
mod launches;
mod manifest;
mod module_graph;
mod node;
mod ordering;
mod package;
mod packages;
mod pg;
mod providers;
mod puppet;
mod replay;
mod requirement;
mod sandbox;
mod sensitive;
mod services;
mod store;
mod support;
mod testhost;
mod tidy;
mod timings;
mod types;
mod wasi_paths;
