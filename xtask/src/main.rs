//! Project tasks that need code: `cargo xtask demo` runs the README's safe demo.
//!
//! The demo writes only under `demo-out/` in the checkout: it builds `wconverge`,
//! instantiates `examples/demo/` there (the manifest and its policy, with absolute paths
//! into `demo-out/files`), and applies the manifest twice. The policy grants the plugins
//! `demo-out/files` and nothing else, so the demo cannot touch the rest of the machine.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a task reports to its user"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1);
    let result = match task.as_deref() {
        Some("demo") => demo(),
        _ => Err("usage: cargo xtask demo".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ lives in the repository root")
        .to_path_buf()
}

fn instantiate(template: &Path, files: &Path, into: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(template)
        .map_err(|error| format!("cannot read {}: {error}", template.display()))?;
    let files = files.to_str().ok_or("the checkout's path is not UTF-8")?;
    std::fs::write(into, text.replace("@FILES@", files))
        .map_err(|error| format!("cannot write {}: {error}", into.display()))
}

fn demo() -> Result<(), String> {
    let root = repository();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    println!("building wconverge (the first build compiles wasmtime: a few minutes)...");
    let status = Command::new(&cargo)
        .current_dir(&root)
        .args(["build", "--quiet", "--package", "wconverge-cli"])
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("building wconverge failed".to_owned());
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let wconverge = target_dir.join("debug").join("wconverge");
    let out = root.join("demo-out");
    let files = out.join("files");
    std::fs::create_dir_all(&files)
        .map_err(|error| format!("cannot create {}: {error}", files.display()))?;
    let manifest = out.join("site.wcv");
    let policy = out.join("policy.toml");
    instantiate(&root.join("examples/demo/site.wcv"), &files, &manifest)?;
    instantiate(&root.join("examples/demo/policy.toml"), &files, &policy)?;
    println!("the demo writes only under {}\n", out.display());
    let mut codes = Vec::new();
    for run in ["first", "second"] {
        println!("== {run} run: wconverge apply demo-out/site.wcv --policy demo-out/policy.toml");
        let status = Command::new(&wconverge)
            .arg("apply")
            .arg(&manifest)
            .arg("--policy")
            .arg(&policy)
            .arg("--state-dir")
            .arg(out.join("state"))
            .arg("--cache-dir")
            .arg(out.join("cache"))
            .status()
            .map_err(|error| format!("cannot run {}: {error}", wconverge.display()))?;
        let code = status.code().unwrap_or(-1);
        println!("(exit code {code}: {})\n", meaning(code));
        codes.push(code);
    }
    match codes.as_slice() {
        [2, 0] => {
            println!(
                "converged: the second run changed nothing. Look in {}",
                files.display()
            );
            Ok(())
        }
        [_, 0] => {
            println!(
                "already converged: the second run changed nothing. Remove demo-out/ to start over."
            );
            Ok(())
        }
        _ => Err(format!("unexpected exit codes {codes:?}")),
    }
}

fn meaning(code: i32) -> &'static str {
    match code {
        0 => "nothing to change",
        2 => "changes were made",
        4 => "failures",
        6 => "changes and failures",
        _ => "the run could not start",
    }
}
