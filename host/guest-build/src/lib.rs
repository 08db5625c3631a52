//! Build-script helper: compiles guest crates of the guest workspace
//! (`providers/Cargo.toml`) for `wasm32-wasip2` with a nested cargo.
//!
//! The nested cargo gets its own target directory (sharing the outer one deadlocks on
//! its lock), a scrubbed environment (the outer build's rustflags, wrappers and target
//! must not leak into the wasm build), the outer jobserver (so `-j` holds for both),
//! and the same toolchain. If the toolchain lacks the `wasm32-wasip2` target, it is
//! installed with rustup first: the README's two commands need no setup step.

#![expect(clippy::print_stdout, reason = "build scripts talk to cargo on stdout")]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target guests are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// One built component.
pub struct Artifact {
    /// The plugin's name: the crate directory's name.
    pub name: String,
    /// The `.wasm`, copied into `OUT_DIR`.
    pub path: PathBuf,
}

/// A guest crate to build.
pub struct Member {
    pub name: String,
    pub package: String,
    pub dir: PathBuf,
}

/// The guest workspace of a repository.
pub struct Guests {
    root: PathBuf,
}

fn env(name: &str) -> Option<OsString> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var_os(name)
}

fn out_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"))
}

/// Writes `contents` to `OUT_DIR/name`.
pub fn write_out(name: &str, contents: &str) {
    let path = out_dir().join(name);
    std::fs::write(&path, contents)
        .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
}

impl Guests {
    pub fn new(root: &Path) -> Guests {
        Guests {
            root: root.to_path_buf(),
        }
    }

    /// Every crate directory directly under `dir` (relative to the root), as members
    /// whose package is `prefix` + the directory's name; sorted by name.
    pub fn members_under(&self, dir: &str, prefix: &str) -> Vec<Member> {
        // Membership is declared in providers/Cargo.toml, which `build` watches; the
        // directory itself is not watched (a stray target/ in it would rerun builds).
        let base = self.root.join(dir);
        let mut members: Vec<Member> = std::fs::read_dir(&base)
            .unwrap_or_else(|error| panic!("cannot list {}: {error}", base.display()))
            .filter_map(Result::ok)
            .filter(|entry| entry.path().join("Cargo.toml").is_file())
            .filter_map(|entry| {
                let name = entry.file_name().to_str()?.to_owned();
                Some(Member {
                    package: format!("{prefix}{name}"),
                    name,
                    dir: entry.path(),
                })
            })
            .collect();
        members.sort_by(|a, b| a.name.cmp(&b.name));
        members
    }

    /// Builds `members` in one nested cargo invocation and returns their components.
    pub fn build(&self, members: &[Member]) -> Vec<Artifact> {
        let manifest = self.root.join("providers").join("Cargo.toml");
        let packages: Vec<&str> = members.iter().map(|m| m.package.as_str()).collect();
        let release = cargo_build(&manifest, &packages);
        for path in [
            manifest.clone(),
            self.root.join("providers").join("Cargo.lock"),
            self.root.join("wit"),
        ] {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        // What every member builds from besides its own directory: the SDK crates and
        // the shared libraries of `providers/lib` (their sources and manifests, not
        // their directories, where a stray target/ would rerun builds).
        let sdk = self.root.join("guest-sdk");
        let mut shared = vec![sdk.clone(), sdk.join("interpreter"), sdk.join("facts")];
        if let Ok(entries) = std::fs::read_dir(self.root.join("providers").join("lib")) {
            let mut libraries: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|dir| dir.join("Cargo.toml").is_file())
                .collect();
            libraries.sort();
            shared.extend(libraries);
        }
        for dir in shared {
            for path in [dir.join("Cargo.toml"), dir.join("src")] {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        members
            .iter()
            .map(|member| {
                println!("cargo:rerun-if-changed={}", member.dir.display());
                artifact(&release, &member.package, &member.name)
            })
            .collect()
    }

    /// Builds the crate in `dir` (relative to the root), a workspace of its own outside
    /// the guest workspace, as a third party builds a plugin; its component is named
    /// `name`.
    pub fn build_outside(&self, dir: &str, package: &str, name: &str) -> Artifact {
        let dir = self.root.join(dir);
        let manifest = dir.join("Cargo.toml");
        let release = cargo_build(&manifest, &[package]);
        for path in [manifest, dir.join("Cargo.lock"), self.root.join("wit")] {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        artifact(&release, package, name)
    }
}

impl Guests {
    /// The componentize-py that [`Guests::build_python`] installed (call it after a
    /// build): the tests build Python projects with it too.
    pub fn componentize_py(&self) -> PathBuf {
        guest_target_dir()
            .join("python")
            .join("bin")
            .join("componentize-py")
    }

    /// Builds the Python plugin in `dir` (relative to the root; its module `module`,
    /// the world `provider` of `wit/`) with componentize-py, the version that
    /// `dir/requirements.txt` pins, installed from PyPI into a virtual environment kept
    /// in the guest target directory, with the Python SDK's helpers (`guest-sdk/python`)
    /// on its path. `--stub-wasi`: the component imports no WASI at all, only
    /// wconverge's interfaces.
    pub fn build_python(&self, dir: &str, module: &str, name: &str) -> Artifact {
        let dir = self.root.join(dir);
        let requirements = dir.join("requirements.txt");
        let wit = self.root.join("wit");
        // The helpers of the Python SDK, as an author vendors them.
        let sdk = self.root.join("guest-sdk").join("python");
        for path in [&dir, &requirements, &wit, &sdk] {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        let venv = guest_target_dir().join("python");
        let tool = venv.join("bin").join("componentize-py");
        let wanted = std::fs::read_to_string(&requirements)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", requirements.display()));
        let stamp = venv.join("requirements.txt");
        if !tool.is_file() || std::fs::read_to_string(&stamp).ok().as_deref() != Some(&wanted) {
            let python = env("PYTHON3").unwrap_or_else(|| "python3".into());
            run_tool(
                Command::new(&python)
                    .arg("-m")
                    .arg("venv")
                    .arg("--clear")
                    .arg(&venv),
                "creating a Python virtual environment for componentize-py",
            );
            run_tool(
                Command::new(venv.join("bin").join("pip"))
                    .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                    .arg(&requirements),
                "installing componentize-py from PyPI (the Python example plugin needs it)",
            );
            std::fs::write(&stamp, &wanted)
                .unwrap_or_else(|error| panic!("cannot write {}: {error}", stamp.display()));
        }
        let path = out_dir().join(format!("{name}.wasm"));
        run_tool(
            Command::new(&tool)
                .arg("--wit-path")
                .arg(&wit)
                .args(["--world", "provider", "componentize", "--stub-wasi"])
                .arg("--python-path")
                .arg(&dir)
                .arg("--python-path")
                .arg(&sdk)
                .arg(module)
                .arg("--output")
                .arg(&path)
                // Python must not write bytecode caches into the source directory.
                .env("PYTHONDONTWRITEBYTECODE", "1"),
            "building the Python example plugin with componentize-py",
        );
        Artifact {
            name: name.to_owned(),
            path,
        }
    }
}

/// Runs a build tool, and panics with what it printed if it fails.
fn run_tool(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: cannot run {:?}: {error}", command.get_program()));
    if !output.status.success() {
        panic!(
            "{what} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Runs the nested cargo on `manifest` for `packages`; returns the release directory.
fn cargo_build(manifest: &Path, packages: &[&str]) -> PathBuf {
    let cargo = env("CARGO").unwrap_or_else(|| "cargo".into());
    ensure_target();
    let target_dir = guest_target_dir();
    let mut command = Command::new(&cargo);
    command
        .arg("build")
        .arg("--release")
        .arg("--target")
        .arg(TARGET)
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(&target_dir);
    if env("CARGO_NET_OFFLINE").is_some_and(|value| value == "true") {
        command.arg("--offline");
    }
    for package in packages {
        command.arg("--package").arg(package);
    }
    scrub(&mut command);
    command.env("CARGO_BUILD_BUILD_DIR", &target_dir);
    run_tool(
        &mut command,
        &format!("building {} for {TARGET}", manifest.display()),
    );
    target_dir.join(TARGET).join("release")
}

/// The component of `package`, copied into `OUT_DIR` as `name.wasm`; the build reruns
/// when a source it read changes.
fn artifact(release: &Path, package: &str, name: &str) -> Artifact {
    let stem = package.replace('-', "_");
    rerun_on_sources(&release.join(format!("{stem}.d")));
    let built = release.join(format!("{stem}.wasm"));
    let path = out_dir().join(format!("{name}.wasm"));
    std::fs::copy(&built, &path).unwrap_or_else(|error| {
        panic!(
            "cannot copy {} to {}: {error}",
            built.display(),
            path.display()
        )
    });
    Artifact {
        name: name.to_owned(),
        path,
    }
}

/// Variables of the outer build that must not reach the nested one.
fn scrub(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if leaks(name) {
            command.env_remove(name);
        }
    }
}

/// Whether the outer build's variable `name` would change how the guests are built: its
/// flags, target, coverage, features, and its profile settings (`CARGO_PROFILE_*`, which
/// a profiling or faster host build sets, and which would otherwise change the bytes of
/// the built-in components and so their digests).
fn leaks(name: &str) -> bool {
    matches!(
        name,
        "CARGO_ENCODED_RUSTFLAGS"
            | "RUSTFLAGS"
            | "CARGO_BUILD_RUSTFLAGS"
            | "RUSTC_WORKSPACE_WRAPPER"
            | "CLIPPY_ARGS"
            | "CARGO_TARGET_DIR"
            | "CARGO_BUILD_TARGET"
            | "CARGO_BUILD_TARGET_DIR"
            | "LLVM_PROFILE_FILE"
            | "CARGO_PRIMARY_PACKAGE"
    ) || name.starts_with("CARGO_LLVM_COV")
        || (name.starts_with("CARGO_TARGET_") && name.ends_with("_RUSTFLAGS"))
        || name.starts_with("CARGO_CFG_")
        || name.starts_with("CARGO_FEATURE_")
        || name.starts_with("CARGO_PROFILE_")
}

/// A target directory for guests beside the outer one (under the directory holding
/// cargo's `CACHEDIR.TAG`), shared by every build script that builds guests.
fn guest_target_dir() -> PathBuf {
    let out = out_dir();
    out.ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(|target| target.join("wasm-guests"))
        .unwrap_or_else(|| out.join("wasm-guests"))
}

/// Installs the wasm target into the active toolchain if it is missing.
fn ensure_target() {
    let rustc = env("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
        .unwrap_or_else(|| panic!("cannot ask {} for its sysroot", rustc.to_string_lossy()));
    let installed = sysroot.join("lib").join("rustlib").join(TARGET);
    println!("cargo:rerun-if-changed={}", installed.display());
    if installed.is_dir() {
        return;
    }
    let toolchain = env("RUSTUP_TOOLCHAIN");
    let mut rustup = Command::new(rustup_path());
    rustup.args(["target", "add", TARGET]);
    if let Some(toolchain) = &toolchain {
        rustup.arg("--toolchain").arg(toolchain);
    }
    let status = rustup.status().unwrap_or_else(|error| {
        panic!(
            "the {TARGET} target is missing and rustup cannot be run ({error}); install the \
             target with: rustup target add {TARGET}"
        )
    });
    if !status.success() || !installed.is_dir() {
        panic!(
            "the {TARGET} target is missing and `rustup target add {TARGET}` failed; install \
             it by hand and build again"
        );
    }
}

fn rustup_path() -> PathBuf {
    let from_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .map(|home| home.join("bin").join("rustup"));
    match from_home {
        Some(path) if path.is_file() => path,
        _ => PathBuf::from("rustup"),
    }
}

/// Every source file the nested build read, from its dep-info file.
fn rerun_on_sources(dep_info: &Path) {
    let Ok(text) = std::fs::read_to_string(dep_info) else {
        return;
    };
    for line in text.lines() {
        let Some((_, sources)) = line.split_once(": ") else {
            continue;
        };
        // Paths are separated by spaces; a space inside a path is escaped with `\`.
        let mut current = String::new();
        let mut chars = sources.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    current.push(' ');
                    chars.next();
                }
                ' ' => {
                    if !current.is_empty() {
                        println!("cargo:rerun-if-changed={current}");
                        current.clear();
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            println!("cargo:rerun-if-changed={current}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::leaks;

    #[test]
    fn the_outer_builds_flags_and_profile_do_not_reach_the_guests() {
        for name in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
            "CARGO_PROFILE_RELEASE_DEBUG",
            "CARGO_PROFILE_RELEASE_OPT_LEVEL",
            "CARGO_FEATURE_STD",
            "CARGO_CFG_TARGET_OS",
            "CARGO_LLVM_COV_TARGET_DIR",
        ] {
            assert!(leaks(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "RUSTUP_HOME",
            "CARGO",
            "RUSTC",
        ] {
            assert!(!leaks(name), "{name}");
        }
    }
}
