//! `wconverge plugins new NAME [--type TYPE] [--dir DIR]`: a ready provider project for
//! an author, outside any wconverge checkout. It holds a provider of one type (a file's
//! content, present or absent) with its schema, state, plan and apply; a unit test;
//! the guest SDK with its WIT contract, vendored, so the project builds on its own; a
//! manifest and a policy to try it with `plugins test`; and a README with the commands.
//! It builds, and its test passes, as generated.

use crate::output;
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// What `plugins new` is given.
#[derive(clap::Args)]
pub(crate) struct NewArgs {
    /// The plugin's name: lowercase letters, digits and `_`, starting with a letter; the
    /// project's directory, its crate and its policy entry.
    #[arg(value_name = "NAME")]
    name: String,
    /// The resource type it provides (default: NAME).
    #[arg(long = "type", value_name = "TYPE")]
    type_name: Option<String>,
    /// The language of the project: `rust` or `python`.
    #[arg(long, value_name = "LANG", default_value = "rust")]
    lang: String,
    /// Where to write the project (default: `./NAME`); it must not exist.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// The guest SDK, as `cargo package` would ship it: its sources (and the WIT contract,
/// [`WIT_FILES`]).
const SDK_FILES: &[(&str, &str)] = &[
    ("src/lib.rs", include_str!("../../../guest-sdk/src/lib.rs")),
    (
        "src/convert.rs",
        include_str!("../../../guest-sdk/src/convert.rs"),
    ),
    (
        "src/digest.rs",
        include_str!("../../../guest-sdk/src/digest.rs"),
    ),
    ("src/log.rs", include_str!("../../../guest-sdk/src/log.rs")),
    (
        "src/metadata.rs",
        include_str!("../../../guest-sdk/src/metadata.rs"),
    ),
    (
        "src/process.rs",
        include_str!("../../../guest-sdk/src/process.rs"),
    ),
    (
        "src/resource.rs",
        include_str!("../../../guest-sdk/src/resource.rs"),
    ),
    (
        "src/schema.rs",
        include_str!("../../../guest-sdk/src/schema.rs"),
    ),
    (
        "src/value.rs",
        include_str!("../../../guest-sdk/src/value.rs"),
    ),
    ("README.md", include_str!("../../../guest-sdk/README.md")),
];

/// The WIT contract, as this wconverge speaks it.
const WIT_FILES: &[(&str, &str)] = &[
    ("wit/facts.wit", include_str!("../../../wit/facts.wit")),
    ("wit/host.wit", include_str!("../../../wit/host.wit")),
    (
        "wit/interpreter.wit",
        include_str!("../../../wit/interpreter.wit"),
    ),
    (
        "wit/launcher.wit",
        include_str!("../../../wit/launcher.wit"),
    ),
    (
        "wit/provider.wit",
        include_str!("../../../wit/provider.wit"),
    ),
    ("wit/types.wit", include_str!("../../../wit/types.wit")),
];

/// The Python side of the SDK, and the componentize-py the examples are built with.
const PYTHON_SDK: &str = include_str!("../../../guest-sdk/python/wconverge_sdk.py");
const PYTHON_REQUIREMENTS: &str =
    include_str!("../../../examples/python-provider/requirements.txt");

/// The vendored SDK's manifest: the SDK's own, its workspace settings written out.
const SDK_MANIFEST: &str = r#"[package]
name = "wconverge-sdk"
description = "Write wconverge providers in Rust: schemas, values, host access and the export macro"
version = "0.1.0"
edition = "2024"
rust-version = "1.95"
license = "Apache-2.0"
publish = false

[dependencies]
wit-bindgen = { version = "0.61.1", default-features = false, features = ["macros", "realloc", "std"] }
sha2 = { version = "0.10", default-features = false }
"#;

pub(crate) fn plugins_new(args: &NewArgs) -> anyhow::Result<u8> {
    let python = match args.lang.as_str() {
        "rust" => false,
        "python" => true,
        other => bail!("`--lang {other}`: give `rust` or `python`"),
    };
    check_name(&args.name, "the plugin's name")?;
    let type_name = args.type_name.clone().unwrap_or_else(|| args.name.clone());
    check_name(&type_name, "`--type`")?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    // Created, never reused: nothing of the author's is overwritten.
    std::fs::create_dir(&dir).with_context(|| {
        format!(
            "cannot create `{}` for the project (it must not exist yet)",
            dir.display()
        )
    })?;
    if python {
        for (path, text) in python_files(&args.name, &type_name) {
            write_new(&dir, path, &text)?;
        }
        for (path, text) in WIT_FILES {
            write_new(&dir, path, text)?;
        }
        output::line(&format!(
            "wrote the Python provider project `{}` (plugin `{}`, type `{type_name}`); its \
             README has the commands to build, test and try it",
            dir.display(),
            args.name
        ));
        return Ok(0);
    }
    let files = project_files(&args.name, &type_name);
    for (path, text) in &files {
        write_new(&dir, path, text)?;
    }
    for (path, text) in SDK_FILES.iter().chain(WIT_FILES) {
        write_new(&dir.join("vendor/wconverge-sdk"), path, text)?;
    }
    write_new(
        &dir.join("vendor/wconverge-sdk"),
        "Cargo.toml",
        SDK_MANIFEST,
    )?;
    output::line(&format!(
        "wrote the provider project `{}` (plugin `{}`, type `{type_name}`); next:\n  cd {}\n  \
         cargo test\n  cargo build --release --target wasm32-wasip2\n  wconverge plugins test \
         target/wasm32-wasip2/release/{}.wasm test.wcv --policy policy.toml",
        dir.display(),
        args.name,
        dir.display(),
        args.name
    ));
    Ok(0)
}

fn check_name(name: &str, what: &str) -> anyhow::Result<()> {
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        bail!(
            "{what} `{name}` is not a name: use lowercase letters, digits and `_`, starting \
             with a letter (at most 64)"
        );
    }
    Ok(())
}

/// Writes `text` to `dir/path`, creating its directories; the file must be new.
fn write_new(dir: &Path, path: &str, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let path = dir.join(path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create `{}`", parent.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("cannot create `{}`", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write `{}`", path.display()))
}

/// The project's own files: `NAME` the plugin, `TYPE` its type.
fn project_files(name: &str, type_name: &str) -> Vec<(&'static str, String)> {
    let fill = |template: &str| fill(template, name, type_name);
    vec![
        ("Cargo.toml", fill(CARGO_TOML)),
        ("src/lib.rs", fill(LIB_RS)),
        ("test.wcv", fill(TEST_WCV)),
        ("policy.toml", fill(POLICY_TOML)),
        ("README.md", fill(README_MD)),
        (".gitignore", "/target\n".to_owned()),
    ]
}

/// A template with the plugin's name (`@NAME@`) and its type (`@TYPE@`, and `@Type@` as
/// manifests write a reference) filled in.
fn fill(template: &str, name: &str, type_name: &str) -> String {
    template
        .replace("@NAME@", name)
        .replace("@TYPE@", type_name)
        .replace("@Type@", &wconverge_catalog::display_type_name(type_name))
}

/// The Python project's own files.
fn python_files(name: &str, type_name: &str) -> Vec<(&'static str, String)> {
    let fill = |template: &str| fill(template, name, type_name);
    vec![
        ("app.py", fill(include_str!("scaffold/app.py"))),
        ("test_app.py", fill(include_str!("scaffold/test_app.py"))),
        ("wconverge_sdk.py", PYTHON_SDK.to_owned()),
        ("requirements.txt", PYTHON_REQUIREMENTS.to_owned()),
        ("test.wcv", fill(TEST_WCV)),
        ("policy.toml", fill(PYTHON_POLICY_TOML)),
        ("README.md", fill(PYTHON_README_MD)),
        (
            ".gitignore",
            "/venv\n/wit_world\n/componentize_py_*\n/poll_loop.py\n/*.wasm\n__pycache__/\n"
                .to_owned(),
        ),
    ]
}

const PYTHON_POLICY_TOML: &str = r#"# The plugin's entry in a wconverge policy: what it may touch. It acts only through the
# programs below, each with the arguments it may be given (`query`: it only reads, so it
# may run while the state is read). Before deploying, pin the
# reviewed build: `wconverge plugins lock --policy policy.toml --plugin-dir DIR` writes
# its digest here (`plugins test` loads the build it is given, unpinned).
[plugins.@NAME@]
source = "plugin-dir"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
provides = ["@TYPE@"]
directories = [{ path = "/var/lib/@NAME@", access = "read-write" }]
programs = [
  { path = "/usr/bin/test", query = true, args = [["-e", "/var/lib/@NAME@/*"]] },
  { path = "/usr/bin/cat", query = true, args = [["--", "/var/lib/@NAME@/*"]] },
  { path = "/usr/bin/tee", args = [["--", "/var/lib/@NAME@/*"]] },
  { path = "/usr/bin/rm", args = [["-f", "--", "/var/lib/@NAME@/*"]] },
]
"#;

const PYTHON_README_MD: &str = r#"# @NAME@

A wconverge provider of type `@TYPE@` (`@Type@` in manifests), in Python, written by
`wconverge plugins new --lang python`. It is built with componentize-py (the version
`requirements.txt` pins) against `wit/`, with `--stub-wasi`: the component has no file
system of its own and acts only through the programs `policy.toml` lets it launch.

```sh
python3 -m venv venv && venv/bin/pip install -r requirements.txt
venv/bin/componentize-py --wit-path wit --world provider bindings .   # wit_world, to import
python3 -m unittest test_app                                          # the unit test
venv/bin/componentize-py --wit-path wit --world provider \
    componentize --stub-wasi app --output @NAME@.wasm
wconverge plugins test @NAME@.wasm test.wcv --policy policy.toml --allow-programs
```

The unit test runs the provider natively, standing in for the host's `process.run` with
the program run here. `plugins test` applies `test.wcv` with the component in a throwaway
root (the policy's read-write directories, and the program arguments that name them,
rebased below a temporary directory), applies it again (which must change nothing) and
runs noop (which must plan nothing). `--allow-programs` says that you accept the programs
running on this machine (their arguments stay inside the throwaway root).

`wconverge_sdk.py` holds the helpers (values, schema attributes, launches, `@reported`
for tracebacks); `wit/` is the contract, as the `wconverge` that wrote this project speaks
it. `docs/writing-a-provider.md` in wconverge's repository is the guide.
"#;

const CARGO_TOML: &str = r#"[package]
name = "@NAME@"
description = "A wconverge provider of type `@TYPE@`"
version = "0.1.0"
edition = "2024"
publish = false

# A project of its own, whatever directory it sits in.
[workspace]

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
# The guest SDK and its WIT contract, vendored by `wconverge plugins new`.
wconverge-sdk = { path = "vendor/wconverge-sdk" }

[profile.release]
# Small plugins; keep the name section so that traps show function names.
opt-level = "s"
codegen-units = 1
lto = true
debug = false
"#;

const LIB_RS: &str = r#"//! `@TYPE@`: a file with the content it is given, or no file.
//!
//! ```text
//! @TYPE@ { '/srv/app/motd': content => "hello\n" }
//! @TYPE@ { '/srv/app/old': ensure => absent }
//! ```
//!
//! Written by `wconverge plugins new`: change the type, keep the shape. `current_state`
//! reads what is there, `plan` compares it with the resource and says what would
//! change (and must depend on its arguments alone: the host may call it in a batch),
//! `apply` makes the planned changes. The host gives the plugin only the directories
//! its policy grants, and runs `plan` with them read-only.

use wconverge_sdk::{
    Attribute, Change, DataType, PathAccess, Provider, ProviderInfo, Resource, Result, State,
    TypeSchema, export_provider,
};

/// The provider.
pub struct Plugin;

impl Provider for Plugin {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("@NAME@", env!("CARGO_PKG_VERSION")).with_type(
            TypeSchema::new("@TYPE@", "A file with the content it is given, or no file.")
                .attribute(
                    Attribute::new("path", DataType::String, "The file's absolute path.")
                        .namevar()
                        .path_access(PathAccess::ReadWrite),
                )
                .attribute(
                    Attribute::new(
                        "ensure",
                        DataType::enumeration(["present", "absent"]),
                        "Whether the file exists.",
                    )
                    .default("present"),
                )
                .attribute(Attribute::new(
                    "content",
                    DataType::String,
                    "What the file holds when present.",
                )),
        )
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let path = resource.require_str("path")?;
        Ok(match std::fs::read_to_string(path) {
            Ok(content) => State::new()
                .with("ensure", "present")
                .with("content", content.as_str()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                State::new().with("ensure", "absent")
            }
            Err(error) => return Err(format!("cannot read `{path}`: {error}").into()),
        })
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        let wanted = resource.get_str("ensure").unwrap_or("present");
        let now = current.get_str("ensure").unwrap_or("absent");
        if wanted != now {
            let message = if wanted == "present" { "created" } else { "removed" };
            return Ok(vec![Change::new(
                "ensure",
                Some(now.into()),
                Some(wanted.into()),
                message,
            )]);
        }
        match resource.get_str("content") {
            Some(content) if wanted == "present" && current.get_str("content") != Some(content) => {
                Ok(vec![Change::new(
                    "content",
                    current.get_str("content").map(Into::into),
                    Some(content.into()),
                    "content changed",
                )])
            }
            _ => Ok(Vec::new()),
        }
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let path = resource.require_str("path")?;
        if resource.get_str("ensure") == Some("absent") {
            return std::fs::remove_file(path)
                .map_err(|error| format!("cannot remove `{path}`: {error}").into());
        }
        let content = resource.get_str("content").unwrap_or_default();
        std::fs::write(path, content).map_err(|error| format!("cannot write `{path}`: {error}").into())
    }
}

export_provider!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str, attributes: &[(&str, &str)]) -> Resource {
        let mut resource = Resource::new("@TYPE@", path).with("path", path);
        for (name, value) in attributes {
            resource = resource.with(name, *value);
        }
        resource
    }

    /// Converges, then plans nothing: what `wconverge plugins test` checks end to end.
    #[test]
    fn converges_then_stays_quiet() {
        let dir = std::env::temp_dir().join(format!("@NAME@-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("motd");
        let path = path.to_str().expect("UTF-8");
        let wanted = resource(path, &[("content", "hello\n")]);
        let changes = Plugin::plan(&wanted, &Plugin::current_state(&wanted).expect("state"))
            .expect("plan");
        assert_eq!(changes.len(), 1);
        Plugin::apply(&wanted, &changes).expect("apply");
        assert_eq!(std::fs::read_to_string(path).expect("written"), "hello\n");
        let again = Plugin::plan(&wanted, &Plugin::current_state(&wanted).expect("state"))
            .expect("plan");
        assert!(again.is_empty(), "{again:?}");
        let gone = resource(path, &[("ensure", "absent")]);
        let changes =
            Plugin::plan(&gone, &Plugin::current_state(&gone).expect("state")).expect("plan");
        Plugin::apply(&gone, &changes).expect("apply");
        assert!(!std::path::Path::new(path).exists());
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
"#;

const TEST_WCV: &str = r#"# A manifest to try the provider with `wconverge plugins test` (in a throwaway root).
@TYPE@ { '/var/lib/@NAME@/motd':
  content => "hello from @NAME@\n",
}
@TYPE@ { '/var/lib/@NAME@/old':
  ensure => absent,
}
"#;

const POLICY_TOML: &str = r#"# The plugin's entry in a wconverge policy: what it may touch. Before deploying, pin the
# reviewed build: `wconverge plugins lock --policy policy.toml --plugin-dir DIR` writes
# its digest here (`plugins test` loads the build it is given, unpinned).
[plugins.@NAME@]
source = "plugin-dir"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
provides = ["@TYPE@"]
directories = [{ path = "/var/lib/@NAME@", access = "read-write" }]
"#;

const README_MD: &str = r#"# @NAME@

A wconverge provider of type `@TYPE@` (`@Type@` in manifests), written by
`wconverge plugins new`.

```sh
cargo test                                         # the unit test, natively
rustup target add wasm32-wasip2                    # once
cargo build --release --target wasm32-wasip2       # the component
wconverge plugins test target/wasm32-wasip2/release/@NAME@.wasm test.wcv --policy policy.toml
```

`plugins test` applies `test.wcv` with this build in a throwaway root (the policy's
read-write directories rebased below a temporary directory), applies it again (which
must change nothing) and runs noop (which must plan nothing); `--verbose` shows every
call. To deploy, copy the `.wasm` into the plugin directory, add `policy.toml`'s entry to
the machine's policy, and pin it with `wconverge plugins lock`.

`vendor/wconverge-sdk` is the guest SDK with the WIT contract, as the `wconverge` that
wrote this project speaks it; `cargo doc --open` documents it.
"#;
