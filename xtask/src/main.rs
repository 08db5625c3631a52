//! Project tasks that need code: `cargo xtask demo` runs the README's safe demo, and
//! `cargo xtask webserver [--remove]` the web server role (`examples/webserver`), which
//! changes the machine it runs on.
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
        Some("webserver") => webserver(std::env::args().nth(2).as_deref() == Some("--remove")),
        Some("deb") => deb(),
        _ => Err(
            "usage: cargo xtask demo | cargo xtask webserver [--remove] | cargo xtask deb"
                .to_owned(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask deb`: the release binary, then its Debian package in target/deb.
fn deb() -> Result<(), String> {
    let root = repository();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .args(["build", "--release", "--package", "wconverge-cli"])
        .current_dir(&root)
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("the release build failed".to_owned());
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let binary = target.join("release/wconverge");
    let status = std::process::Command::new(&binary)
        .args(["__package-deb", "--out"])
        .arg(target.join("deb"))
        .status()
        .map_err(|error| format!("cannot run {}: {error}", binary.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err("the package could not be built".to_owned())
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

/// Builds `wconverge` and returns the binary's path.
fn build(root: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    println!("building wconverge (the first build compiles wasmtime: a few minutes)...");
    let status = Command::new(&cargo)
        .current_dir(root)
        .args(["build", "--quiet", "--package", "wconverge-cli"])
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err("building wconverge failed".to_owned());
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target_dir.join("debug").join("wconverge"))
}

fn demo() -> Result<(), String> {
    let root = repository();
    let wconverge = build(&root)?;
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
        codes.push(apply(&wconverge, &manifest, Some(&policy), &out)?);
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

/// The web server role: builds its package, applies `examples/webserver/site.wcv` twice
/// with the built-in policy, and asks the server for its page; with `remove`, applies
/// `remove.wcv`. It installs a package, adds a user and starts a service: root only, and
/// best in a throwaway VM or container.
fn webserver(remove: bool) -> Result<(), String> {
    if !is_root() {
        return Err(
            "the web server demo installs a package, adds a user and starts a service on this \
             machine: run it as root, in a throwaway VM or container"
                .to_owned(),
        );
    }
    let root = repository();
    let wconverge = build(&root)?;
    let out = root.join("demo-out").join("webserver");
    std::fs::create_dir_all(&out)
        .map_err(|error| format!("cannot create {}: {error}", out.display()))?;
    let apply = |manifest: &Path| -> Result<i32, String> {
        println!("== wconverge apply {}", manifest.display());
        apply(&wconverge, manifest, None, &out)
    };
    if remove {
        let code = apply(&root.join("examples/webserver/remove.wcv"))?;
        return if code == 0 || code == 2 {
            Ok(())
        } else {
            Err(format!("removing failed (exit code {code})"))
        };
    }
    let deb = out.join("wcv-demo-web_1.0-1_all.deb");
    let built = Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(root.join("examples/webserver/package"))
        .arg(&deb)
        .output()
        .map_err(|error| format!("cannot run dpkg-deb: {error}"))?;
    if !built.status.success() {
        return Err(format!(
            "dpkg-deb failed: {}",
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    let manifest = out.join("site.wcv");
    let text = std::fs::read_to_string(root.join("examples/webserver/site.wcv"))
        .map_err(|error| format!("cannot read the manifest: {error}"))?
        .replace("@DEB@", &deb.display().to_string());
    std::fs::write(&manifest, text)
        .map_err(|error| format!("cannot write {}: {error}", manifest.display()))?;
    // The first run converges (2, or 0 when the role was there already) and the second
    // finds nothing to do: a failure on the first run is not hidden by the second.
    let codes = [apply(&manifest)?, apply(&manifest)?];
    if !matches!(codes, [0 | 2, 0]) {
        return Err(format!("unexpected exit codes {codes:?}"));
    }
    let page = fetch("127.0.0.1:8080")?;
    println!("GET http://127.0.0.1:8080/ says: {}", page.trim());
    println!("converged; `cargo xtask webserver --remove` undoes it");
    Ok(())
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|stat| std::os::unix::fs::MetadataExt::uid(&stat) == 0)
        .unwrap_or(false)
}

/// The body of `GET /` from `address`, retried for a second while the server starts.
fn fetch(address: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut last = String::new();
    for _ in 0..20 {
        match std::net::TcpStream::connect(address) {
            Ok(mut stream) => {
                stream
                    .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
                    .map_err(|error| format!("cannot ask {address}: {error}"))?;
                let mut response = String::new();
                stream
                    .read_to_string(&mut response)
                    .map_err(|error| format!("cannot read from {address}: {error}"))?;
                return Ok(response
                    .split_once("\r\n\r\n")
                    .map_or(response.clone(), |(_, body)| body.to_owned()));
            }
            Err(error) => last = error.to_string(),
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(format!("nothing answers on {address}: {last}"))
}

/// `wconverge apply MANIFEST [--policy POLICY]` with its state and cache under `out`:
/// its exit code, said in words.
fn apply(
    wconverge: &Path,
    manifest: &Path,
    policy: Option<&Path>,
    out: &Path,
) -> Result<i32, String> {
    let mut command = Command::new(wconverge);
    command.arg("apply").arg(manifest);
    if let Some(policy) = policy {
        command.arg("--policy").arg(policy);
    }
    let status = command
        .arg("--state-dir")
        .arg(out.join("state"))
        .arg("--cache-dir")
        .arg(out.join("cache"))
        .status()
        .map_err(|error| format!("cannot run {}: {error}", wconverge.display()))?;
    let code = status.code().unwrap_or(-1);
    println!("(exit code {code}: {})\n", meaning(code));
    Ok(code)
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
