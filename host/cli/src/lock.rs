//! `wconverge plugins lock`: pins every plugin of a policy file to the sha256 of its
//! component as it is now, editing the file in place (comments and layout kept), and
//! says what changed. The new file is checked as a policy and replaces the old one
//! atomically, or nothing is written.

use anyhow::{Context, bail};
use std::path::Path;
use wconverge_runtime::policy::Policy;

/// What happened to one plugin's pin.
enum Outcome {
    Pinned(String),
    Unchanged,
    Changed { was: String, now: String },
    Unreadable(String),
}

pub(crate) fn lock(
    path: &Path,
    plugin_dir: Option<&Path>,
    builtins: &'static [(&'static str, &'static [u8])],
) -> anyhow::Result<u8> {
    let text = crate::input::read_text(path, "policy", crate::input::POLICY_BYTES)
        .map_err(anyhow::Error::msg)?;
    let mut document: toml_edit::DocumentMut =
        text.parse().map_err(|error: toml_edit::TomlError| {
            anyhow::anyhow!("{}: {}", path.display(), error.to_string().trim_end())
        })?;
    let base = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let Some(plugins) = document
        .get_mut("plugins")
        .and_then(toml_edit::Item::as_table_like_mut)
    else {
        bail!(
            "{}: the policy has no `[plugins.NAME]` table to lock",
            path.display()
        );
    };
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    for (name, entry) in plugins.iter_mut() {
        let name = name.get().to_owned();
        let Some(entry) = entry.as_table_like_mut() else {
            bail!("{}: `plugins.{name}` is not a table", path.display());
        };
        let source = entry
            .get("source")
            .and_then(toml_edit::Item::as_str)
            .with_context(|| format!("{}: plugin `{name}` has no `source`", path.display()))?
            .to_owned();
        let bytes = if source == "builtin" {
            match builtins.iter().find(|(builtin, _)| *builtin == name) {
                Some((_, bytes)) => bytes.to_vec(),
                None => {
                    outcomes.push((
                        name.clone(),
                        Outcome::Unreadable(format!("there is no built-in plugin named `{name}`")),
                    ));
                    continue;
                }
            }
        } else {
            let file = if source == "plugin-dir" {
                let Some(dir) = plugin_dir else {
                    outcomes.push((
                        name.clone(),
                        Outcome::Unreadable(
                            "it comes from the plugin directory: pass --plugin-dir DIR".to_owned(),
                        ),
                    ));
                    continue;
                };
                dir.join(format!("{name}.wasm"))
            } else {
                base.join(&source)
            };
            match wconverge_runtime::read_component(&file) {
                Ok(bytes) => bytes,
                Err(error) => {
                    outcomes.push((
                        name.clone(),
                        Outcome::Unreadable(format!("cannot read `{}`: {error}", file.display())),
                    ));
                    continue;
                }
            }
        };
        let digest = wconverge_runtime::sha256_hex(&bytes);
        let previous = entry
            .get("sha256")
            .and_then(toml_edit::Item::as_str)
            .map(str::to_ascii_lowercase);
        let outcome = match previous {
            None => Outcome::Pinned(digest.clone()),
            Some(was) if was == digest => Outcome::Unchanged,
            Some(was) => Outcome::Changed {
                was,
                now: digest.clone(),
            },
        };
        if !matches!(outcome, Outcome::Unchanged) {
            entry.insert("sha256", toml_edit::value(digest));
        }
        outcomes.push((name, outcome));
    }
    let unreadable = outcomes
        .iter()
        .any(|(_, outcome)| matches!(outcome, Outcome::Unreadable(_)));
    let mut report = String::new();
    for (name, outcome) in &outcomes {
        report.push_str(&match outcome {
            Outcome::Pinned(now) => format!("{name}: pinned sha256 {now}\n"),
            Outcome::Unchanged => format!("{name}: unchanged\n"),
            Outcome::Changed { was, now } => format!(
                "{name}: CHANGED from sha256 {was} to {now}; review the new component before \
                 you apply with this policy\n"
            ),
            Outcome::Unreadable(why) => format!("{name}: not pinned: {why}\n"),
        });
    }
    crate::output::text(&report);
    if unreadable {
        bail!(
            "{}: some plugins could not be pinned; nothing was written",
            path.display()
        );
    }
    let updated = document.to_string();
    // The result must be a valid policy before it replaces the old one.
    let mut locked = Policy::parse(&updated, &path.display().to_string(), Some(&base))
        .with_context(|| "the locked policy would not be valid; nothing was written")?;
    if let Some(dir) = plugin_dir {
        locked
            .place_plugin_dir(dir)
            .with_context(|| format!("cannot list the plugin directory `{}`", dir.display()))?;
        if let Some(warning) = Policy::plugin_dir_warning(dir) {
            crate::output::warning(&warning);
        }
        for file in &locked.unclaimed {
            crate::output::warning(&format!(
                "{} is not pinned: no plugin of the policy takes it, so it is never loaded;                  to use it, add `[plugins.NAME]` with `source = \"plugin-dir\"` and its \
                 grants, then lock again",
                file.display()
            ));
        }
    }
    if updated == text {
        crate::output::line(&format!("{}: already locked", path.display()));
        return Ok(0);
    }
    write_atomically(path, &updated)?;
    crate::output::line(&format!("{}: locked", path.display()));
    Ok(0)
}

/// Writes `text` to a new file beside `path` and renames it over `path`.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .context("the policy path has no file name")?;
    let temporary = path.with_file_name(format!(".{name}.lock-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        if let Ok(metadata) = std::fs::metadata(path) {
            file.set_permissions(metadata.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if let Err(error) = result {
        let _ = std::fs::remove_file(&temporary);
        return Err(error).with_context(|| format!("cannot write `{}`", path.display()));
    }
    Ok(())
}
