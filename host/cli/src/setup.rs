//! The runtime a command runs its plugins in: the policy (a file, or the built-in
//! one), the plugins of a plugin directory, the compiled-code cache, and the audit log
//! with the trails that finish it.

use crate::{dirs, input, output};
use anyhow::{Context, bail};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wconverge_catalog::{DiagnosticCode, Problem, SourceLocation};
use wconverge_runtime::policy::{Policy, PolicyError};
use wconverge_runtime::trail::Trail;
use wconverge_runtime::{Runtime, RuntimeOptions};

#[derive(clap::Args)]
pub(crate) struct RuntimeArgs {
    /// Policy file: which plugins exist and what each may touch (default: the built-in
    /// policy, `docs/policy.md`).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Where the plugins whose policy entry says `source = "plugin-dir"` are, as
    /// NAME.wasm; a .wasm there that no entry pins is never loaded.
    #[arg(long, value_name = "DIR")]
    pub(crate) plugin_dir: Option<PathBuf>,
    /// Append every capability decision of the plugins (directories opened, programs
    /// launched, anything refused) to FILE, as JSON lines.
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
    /// Where compiled plugins are cached (default: /var/cache/wconverge as root, else
    /// $XDG_CACHE_HOME/wconverge; or $WCONVERGE_CACHE_DIR).
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
}

pub(crate) fn runtime_for(args: &RuntimeArgs, trails: &Trails) -> anyhow::Result<Runtime> {
    let policy = match &args.policy {
        Some(path) => read_policy(path, args.plugin_dir.as_deref())?,
        None => {
            let mut policy = Policy::builtin();
            if let Some(dir) = &args.plugin_dir {
                place_plugin_dir(&mut policy, dir)?;
            }
            policy
        }
    };
    runtime_with(policy, args, trails)
}

/// The policy file at `path`, with its `plugin-dir` plugins found in `plugin_dir`.
pub(crate) fn read_policy(path: &Path, plugin_dir: Option<&Path>) -> anyhow::Result<Policy> {
    let text = input::read_text(path, "policy", input::POLICY_BYTES).map_err(anyhow::Error::msg)?;
    let base = path.parent().map(|parent| {
        if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        }
    });
    let name = path.display().to_string();
    let mut policy =
        Policy::parse(&text, &name, base).map_err(|error| policy_problem(error, &name, &text))?;
    if let Some(dir) = plugin_dir {
        place_plugin_dir(&mut policy, dir)?;
    }
    Ok(policy)
}

/// A policy that cannot be used, as a diagnostic at its place: the mistake's line and
/// column, or the refused plugin's `[plugins.NAME]` line.
fn policy_problem(error: PolicyError, name: &str, text: &str) -> output::Shown {
    let at = |line: usize, column: usize| SourceLocation {
        file: name.to_owned(),
        line: u32::try_from(line).unwrap_or(u32::MAX),
        column: u32::try_from(column).ok(),
    };
    let problem = match error {
        PolicyError::Syntax {
            line,
            column,
            message,
            ..
        } => Problem {
            location: Some(at(line, column)),
            ..Problem::new(DiagnosticCode::PolicySyntax, message)
        },
        PolicyError::Invalid {
            plugin, message, ..
        } => {
            let message = format!("plugin `{plugin}`: {message}");
            match entry_line(text, &plugin) {
                Some(line) => Problem {
                    location: Some(at(line, 1)),
                    ..Problem::new(DiagnosticCode::PolicyEntry, message)
                },
                None => Problem::new(DiagnosticCode::PolicyEntry, format!("{name}: {message}")),
            }
        }
        PolicyError::Imports { message, .. } => {
            let message = format!("[imports]: {message}");
            match text
                .lines()
                .position(|line| line.trim().trim_start_matches('[').starts_with("imports"))
            {
                Some(index) => Problem {
                    location: Some(at(index + 1, 1)),
                    ..Problem::new(DiagnosticCode::PolicyEntry, message)
                },
                None => Problem::new(DiagnosticCode::PolicyEntry, format!("{name}: {message}")),
            }
        }
    };
    output::shown_problems(
        &[problem],
        &[wconverge_lang::Source::new(
            name.to_owned(),
            text.to_owned(),
        )],
        "the policy cannot be used; nothing was done",
    )
}

/// The line (from 1) of plugin `name`'s table in a policy's text: `[plugins.NAME]`,
/// the name bare or quoted (`"NAME"`, `'NAME'`), spaces around the dot allowed.
fn entry_line(text: &str, name: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            line.trim()
                .strip_prefix('[')
                .filter(|rest| !rest.starts_with('['))
                .and_then(|rest| rest.split(']').next())
                .and_then(|table| table.trim().strip_prefix("plugins"))
                .and_then(|rest| rest.trim_start().strip_prefix('.'))
                .is_some_and(|table| {
                    let table = table.trim();
                    [table, table.trim_matches('"'), table.trim_matches('\'')].contains(&name)
                })
        })
        .map(|index| index + 1)
}

/// Finds the policy's `plugin-dir` plugins in `dir`, warning of what it holds and no
/// plugin takes.
fn place_plugin_dir(policy: &mut Policy, dir: &Path) -> anyhow::Result<()> {
    policy
        .place_plugin_dir(dir)
        .with_context(|| format!("cannot list the plugin directory `{}`", dir.display()))?;
    if let Some(warning) = Policy::plugin_dir_warning(dir) {
        output::warning(&warning);
    }
    for file in &policy.unclaimed {
        output::warning(&format!(
            "{} is not loaded: no plugin of the policy pins it; review it, add \
             `[plugins.NAME]` with `source = \"plugin-dir\"` and its grants to the policy, \
             then run `wconverge plugins lock`",
            file.display()
        ));
    }
    Ok(())
}

/// A runtime over `policy`, with the cache and audit log `args` name; its trail is
/// finished with the command's (`trails`).
pub(crate) fn runtime_with(
    policy: Policy,
    args: &RuntimeArgs,
    trails: &Trails,
) -> anyhow::Result<Runtime> {
    let cache_dir = dirs::cache_dir(args.cache_dir.clone());
    let runtime = Runtime::new(RuntimeOptions {
        policy,
        cache_dir: cache_dir.map(|dir| dir.join("components")),
        builtins: wconverge_builtin::BUILTINS,
        builtin_digests: wconverge_builtin::BUILTIN_DIGESTS,
    })?;
    let file = match &args.audit_log {
        Some(path) => Some(open_audit_log(path)?),
        None => None,
    };
    let trail = Arc::new(Trail::new(file, Box::new(output::refusal)));
    runtime.set_trail(Arc::clone(&trail));
    trails.0.borrow_mut().push(trail);
    Ok(runtime)
}

/// The audit log, opened for appending: never through a symlink, and only a regular file
/// of this user that no one else may write.
fn open_audit_log(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let context = || format!("cannot open the audit log `{}`", path.display());
    // What is there, named, before anything is opened (opening a FIFO to write fails or
    // blocks; a device could act).
    if let Ok(metadata) = std::fs::symlink_metadata(path)
        && !metadata.is_file()
    {
        bail!(
            "the audit log `{}` is {}; it must be a regular file of this user",
            path.display(),
            if metadata.file_type().is_symlink() {
                "a symlink"
            } else if metadata.is_dir() {
                "a directory"
            } else {
                "a special file (a FIFO, socket or device)"
            }
        );
    }
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        // Non-blocking: a FIFO in its place must not hang the run.
        .custom_flags(
            (rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::NONBLOCK
                | rustix::fs::OFlags::NOCTTY)
                .bits() as i32,
        )
        .open(path)
        .with_context(context)?;
    let metadata = file.metadata().with_context(context)?;
    // One link only: a hard link to another file of this user would have the log
    // written into that file.
    if !metadata.is_file()
        || metadata.uid() != rustix::process::geteuid().as_raw()
        || metadata.mode() & 0o022 != 0
        || metadata.nlink() != 1
    {
        bail!(
            "the audit log `{}` must be a regular file of this user, with no other link, \
             that no one else may write (mode 0600)",
            path.display()
        );
    }
    Ok(file)
}

/// The audit trails of one command's runtimes, finished when the command is done, how
/// ever it ended (`main` owns them; every runtime the command makes adds its own).
#[derive(Default)]
pub(crate) struct Trails(std::cell::RefCell<Vec<Arc<Trail>>>);

impl Trails {
    /// Ends every audit trail: the counts of suppressed refusals, and a flush. A trail
    /// that could not be written fails the command.
    pub(crate) fn finish(self) -> anyhow::Result<()> {
        output::held_refusals(None);
        for trail in self.0.into_inner() {
            trail
                .finish()
                .context("cannot write the audit log; it is incomplete")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugins_table_is_found_however_its_name_is_written() {
        let text = "# policy\n[plugins]\n[plugins.file]\nsource = \"builtin\"\n\
                    [plugins.\"my-plugin\"]\n[ plugins . 'other' ]\n[plugins.file.limits]\n\
                    [[plugins.file.programs]]\n";
        assert_eq!(entry_line(text, "file"), Some(3));
        assert_eq!(entry_line(text, "my-plugin"), Some(5));
        assert_eq!(entry_line(text, "other"), Some(6));
        assert_eq!(entry_line(text, "missing"), None);
        assert_eq!(entry_line("[plugins.filed]\n", "file"), None);
    }

    #[test]
    fn a_policy_error_shows_its_line_unless_the_line_is_too_long() {
        let syntax = |message: &str| PolicyError::Syntax {
            origin: "p.toml".to_owned(),
            line: 2,
            column: 10,
            message: message.to_owned(),
        };
        let short = "[plugins.file]\nsource = 3\n";
        let shown = policy_problem(syntax("invalid type"), "p.toml", short).to_string();
        assert!(
            shown.starts_with("error[wcv::policy-syntax]: invalid type\n --> p.toml:2:10\n"),
            "{shown}"
        );
        assert!(shown.contains("2 | source = 3"), "{shown}");
        let long = format!("[plugins.file]\nsource = \"{}\"\n", "x".repeat(5000));
        let shown = policy_problem(syntax("too long"), "p.toml", &long).to_string();
        assert!(!shown.contains("xxxx"), "{shown}");
        assert!(shown.contains(" --> p.toml:2:10"), "{shown}");
        let entry = policy_problem(
            PolicyError::Invalid {
                origin: "p.toml".to_owned(),
                plugin: "gone".to_owned(),
                message: "no such thing".to_owned(),
            },
            "p.toml",
            short,
        )
        .to_string();
        assert!(
            entry.starts_with("error[wcv::policy-entry]: p.toml: plugin `gone`: no such thing"),
            "{entry}"
        );
    }
}
