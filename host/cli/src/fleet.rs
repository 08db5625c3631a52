//! Beyond one machine: the store nodes share, as the commands use
//! it. A compile publishes this node's exported resources and collects other nodes';
//! a run stores its report (and the facts it gathered); `reports`, `facts --node`,
//! `store` read and manage what is stored.
//!
//! Which store: `--store URL`, else the config file's `store`, else the SQLite file
//! `store.sqlite` in the state directory. A report that cannot be stored is kept in the
//! state directory's `spool/` and sent by the next run that reaches the store.

use crate::{dirs, input, output};
use anyhow::{Context, bail};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use wconverge_catalog::{Collected, Export, ExportQuery};
use wconverge_store::{Location, Store};

/// The config file when neither `--config` nor `$WCONVERGE_CONFIG` names one; read
/// only if it exists.
pub(crate) const DEFAULT_CONFIG: &str = "/etc/wconverge/wconverge.conf";
/// The largest config file.
const CONFIG_BYTES: u64 = 1 << 20;
/// Reports are kept this many days unless `--keep-reports` or the config says.
pub(crate) const KEEP_REPORTS_DAYS: u32 = 14;
/// A run sends at most this many spooled reports before its own.
const SPOOL_SENT_PER_RUN: usize = 1_000;
/// The spool keeps at most this many reports; older ones are dropped, with a warning.
const SPOOL_CAP: usize = 10_000;

/// Where the store is.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct StoreArgs {
    /// The store nodes share for exported resources, facts and reports:
    /// `postgres://HOST/DATABASE` (the password from the config file's
    /// `store_password_file`, PGPASSFILE or PGPASSWORD; never in the URL) or
    /// `sqlite:PATH`. Default: the config file's `store`, else `store.sqlite` in the state
    /// directory.
    #[arg(long, value_name = "URL", global = true)]
    pub(crate) store: Option<String>,
    /// The config file (default: $WCONVERGE_CONFIG, else /etc/wconverge/wconverge.conf
    /// if it exists): `store = "..."`, `store_password_file = "..."`,
    /// `keep_reports = DAYS`, and the agent's `runinterval` and `splaylimit`.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) config: Option<PathBuf>,
    /// The state directory: the run lock, the default store, the report spool
    /// (default: $WCONVERGE_STATE_DIR, else /var/lib/wconverge as root, else
    /// $XDG_STATE_HOME/wconverge).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) state_dir: Option<PathBuf>,
}

/// The config file's settings.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    store: Option<String>,
    store_password_file: Option<PathBuf>,
    keep_reports: Option<u32>,
    /// How often `wconverge agent` runs (`30m`), as Puppet's `runinterval`.
    runinterval: Option<String>,
    /// The most `wconverge agent` waits at random before a run, as Puppet's `splaylimit`.
    splaylimit: Option<String>,
}

impl Config {
    /// Reads the config file the arguments or the environment name, or the default one
    /// if it exists. It decides where reports and facts go, so it must be a regular
    /// file no one but its owner (this user or root) can change.
    pub(crate) fn load(args: &StoreArgs) -> anyhow::Result<Config> {
        Config::load_with_text(args).map(|(config, _)| config)
    }

    /// As [`Config::load`], with the file's text when there is a file.
    pub(crate) fn load_with_text(args: &StoreArgs) -> anyhow::Result<(Config, Option<String>)> {
        let named = args
            .config
            .clone()
            .or_else(|| std::env::var_os("WCONVERGE_CONFIG").map(PathBuf::from));
        let path = match named {
            Some(path) => path,
            None => {
                let path = PathBuf::from(DEFAULT_CONFIG);
                match read_config(&path) {
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                        return Ok((Config::default(), None));
                    }
                    read => return parse_config(&path, read),
                }
            }
        };
        parse_config(&path, read_config(&path))
    }

    pub(crate) fn runinterval(&self) -> Option<&str> {
        self.runinterval.as_deref()
    }

    pub(crate) fn splaylimit(&self) -> Option<&str> {
        self.splaylimit.as_deref()
    }

    pub(crate) fn keep_reports(&self) -> u32 {
        self.keep_reports.unwrap_or(KEEP_REPORTS_DAYS)
    }
}

fn parse_config(
    path: &Path,
    read: std::io::Result<String>,
) -> anyhow::Result<(Config, Option<String>)> {
    let text = read.with_context(|| format!("cannot read the config file `{}`", path.display()))?;
    let config: Config = toml::from_str(&text).map_err(|error| {
        anyhow::anyhow!(
            "the config file `{}`: {}",
            path.display(),
            error.to_string().trim_end()
        )
    })?;
    if config
        .keep_reports
        .is_some_and(|days| !(1..=36_500).contains(&days))
    {
        bail!(
            "the config file `{}`: `keep_reports` is a number of days from 1 to 36500",
            path.display()
        );
    }
    Ok((config, Some(text)))
}

/// The config file's text: settings root acts on, so owned by root or this user and
/// changed by no one else (checked by the descriptor it is read from).
fn read_config(path: &Path) -> std::io::Result<String> {
    let bytes =
        wconverge_store::read_guarded(path, wconverge_store::Guard::Settings, CONFIG_BYTES)?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// The store as a command uses it: opened when first needed, once.
pub(crate) struct Fleet {
    location: Option<Location>,
    /// Named by `--store` or the config file: a fleet's store, which every run reports
    /// to with its facts. The default SQLite file is used only as far as it is needed.
    explicit: bool,
    /// Why there is no store (no state directory, a bad URL).
    missing: Option<String>,
    store: OnceLock<Result<Store, String>>,
    facts_stored: AtomicBool,
    state_dir: Option<PathBuf>,
    pub(crate) keep_reports: u32,
}

impl Fleet {
    /// The store of `args` (or the config file, or the state directory's file).
    pub(crate) fn new(args: &StoreArgs, state_dir: Option<&Path>) -> anyhow::Result<Fleet> {
        let config = Config::load(args)?;
        let keep_reports = config.keep_reports();
        let named = args.store.clone().or(config.store);
        let explicit = named.is_some();
        let (location, missing) = match named {
            Some(text) => (
                Some(
                    Location::parse(&text, config.store_password_file, &|name| {
                        std::env::var(name).ok()
                    })
                    .map_err(anyhow::Error::msg)?,
                ),
                None,
            ),
            None => match state_dir {
                Some(dir) => (Some(Location::Sqlite(dir.join("store.sqlite"))), None),
                None => (None, Some("there is no state directory".to_owned())),
            },
        };
        Ok(Fleet {
            location,
            explicit,
            missing,
            store: OnceLock::new(),
            facts_stored: AtomicBool::new(false),
            state_dir: state_dir.map(Path::to_path_buf),
            keep_reports,
        })
    }

    /// The store of a command that does not run: that of the state directory
    /// (`--state-dir`, else the default one), if there is one.
    pub(crate) fn of(args: &StoreArgs) -> anyhow::Result<Fleet> {
        let state_dir = match &args.state_dir {
            Some(dir) => Some(dirs::absolute(dir)?),
            None => dirs::state_dir(None).ok(),
        };
        Fleet::new(args, state_dir.as_deref())
    }

    /// No store at all (`types --manifest`): nothing collected, nothing published.
    pub(crate) fn none() -> Fleet {
        Fleet {
            location: None,
            explicit: false,
            missing: Some("this command uses no store".to_owned()),
            store: OnceLock::new(),
            facts_stored: AtomicBool::new(false),
            state_dir: None,
            keep_reports: KEEP_REPORTS_DAYS,
        }
    }

    /// The store named by the command line or the config file, or `None` (the default
    /// is used only where needed).
    pub(crate) fn explicit(&self) -> bool {
        self.explicit
    }

    /// The store, opened (and migrated) the first time.
    pub(crate) fn store(&self) -> Result<&Store, String> {
        self.store
            .get_or_init(|| {
                let location = self
                    .location
                    .as_ref()
                    .ok_or_else(|| self.missing.clone().unwrap_or_default())?;
                if let Location::Sqlite(path) = location {
                    // The file's directory must be private: another user who could
                    // write there could swap the file under root.
                    let dir = path.parent().unwrap_or(Path::new("/"));
                    let opened = wconverge_runtime::open_private_dir(dir).map_err(|why| {
                        format!(
                            "cannot use the store's directory `{}`: {why}",
                            dir.display()
                        )
                    })?;
                    // Not even a sticky directory as /tmp: SQLite creates its side files
                    // (`-wal`, `-shm`) there by name, and another user could plant them
                    // first.
                    let mode = rustix::fs::fstat(&opened)
                        .map_err(|error| format!("cannot use `{}`: {error}", dir.display()))?
                        .st_mode;
                    if mode & 0o022 != 0 {
                        return Err(format!(
                            "cannot use the store's directory `{}`: others may create files in \
                             it (mode {:04o}), and SQLite keeps side files there (`-wal`, \
                             `-shm`) that another user could plant; use a directory only its \
                             owner can write",
                            dir.display(),
                            mode & 0o7777
                        ));
                    }
                }
                Store::open(location).map_err(|error| error.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The store, for a command that only reads it (or manages what is in it): the
    /// default SQLite file is not created for it.
    /// The facts `node` last stored (as `$facts` groups) and when; an error when it has
    /// stored none, saying how a node stores them.
    pub(crate) fn stored_facts(
        &self,
        node: &str,
    ) -> anyhow::Result<(wconverge_runtime::FactGroups, i64)> {
        let store = self.existing_store()?;
        let Some((facts, at)) = store.facts(node)? else {
            bail!(
                "the store {} has no facts of node `{node}`: a run of `wconverge apply` on it \
                 with this store (`--store`, or the config file's `store`) sends them",
                store.shown()
            );
        };
        let groups = facts_from_json(&facts, &format!("the facts of node `{node}`"))
            .map_err(anyhow::Error::msg)?;
        Ok((groups, at))
    }

    pub(crate) fn existing_store(&self) -> anyhow::Result<&Store> {
        if !self.explicit
            && let Some(Location::Sqlite(path)) = &self.location
            && !self.default_exists()
        {
            bail!(
                "there is no store at `{}` yet: no run has stored anything there (name another \
                 with `--store`, or the config file's `store`)",
                path.display()
            );
        }
        self.store().map_err(anyhow::Error::msg)
    }

    /// Whether the default store file exists: a node that exports nothing need not
    /// create it, only clear what it exported before.
    fn default_exists(&self) -> bool {
        match &self.location {
            Some(Location::Sqlite(path)) => path.exists(),
            _ => false,
        }
    }

    /// After a successful compile: `node`'s exports replace those it stored before.
    /// A store that cannot be reached is a warning (the catalog is still good), said
    /// only when it matters: when there are exports, or the store was named.
    pub(crate) fn publish(&self, node: &str, exports: &[Export]) {
        if exports.is_empty() && !self.explicit && !self.default_exists() {
            return;
        }
        let result = self.store().and_then(|store| {
            store
                .replace_exports(node, exports)
                .map_err(|error| error.to_string())
        });
        if let Err(why) = result {
            if exports.is_empty() {
                if self.explicit {
                    output::warning(&format!(
                        "the store is unreachable ({why}); this node's exports there were not \
                         cleared"
                    ));
                }
            } else {
                output::warning(&format!(
                    "this node's {} exported resource{} were not stored, so other nodes do not \
                     collect them yet: {why}",
                    exports.len(),
                    if exports.len() == 1 { "" } else { "s" }
                ));
            }
        }
    }

    /// Stores `node`'s facts (a warning if the store cannot take them).
    pub(crate) fn store_facts(&self, node: &str, groups: &wconverge_runtime::FactGroups) {
        if !self.explicit && !self.default_exists() && self.store.get().is_none() {
            // The default store is not created for facts alone.
            return;
        }
        let json = facts_object(groups).to_string();
        match self.store().and_then(|store| {
            store
                .store_facts(node, &json)
                .map_err(|error| error.to_string())
        }) {
            Ok(()) => self.facts_stored.store(true, Ordering::Relaxed),
            Err(why) => output::warning(&format!("this node's facts were not stored: {why}")),
        }
    }

    /// Whether this command stored the node's facts already.
    pub(crate) fn facts_stored(&self) -> bool {
        self.facts_stored.load(Ordering::Relaxed)
    }

    /// Stores a run's report (what `reports show` prints), after any spooled ones; a
    /// report that cannot be stored is spooled, with a warning.
    pub(crate) fn send_report(&self, node: &str, report: &wconverge_engine::report::Report) {
        let at = wconverge_store::now();
        let stored = StoredForm::of(report);
        let text = match serde_json::to_string(&stored) {
            Ok(text) => text,
            Err(error) => {
                output::warning(&format!("the run's report could not be written: {error}"));
                return;
            }
        };
        let status = status_of(report);
        if text.len() > wconverge_store::MAX_DOCUMENT_BYTES {
            output::warning(&format!(
                "the run's report takes {} bytes, more than the store keeps ({} MiB): it was \
                 not stored",
                text.len(),
                wconverge_store::MAX_DOCUMENT_BYTES >> 20
            ));
            return;
        }
        let sent = self.store().and_then(|store| {
            self.send_spooled(store);
            store
                .store_report(node, at, (status, Some(&figures_of(report))), &text)
                .map_err(|error| error.to_string())?;
            // Stored: a failure to prune is a warning, and the report is not spooled.
            let before = at.saturating_sub(i64::from(self.keep_reports) * 86_400);
            if let Err(error) = store.prune_reports(node, before) {
                output::warning(&format!("old reports were not removed: {error}"));
            }
            Ok(())
        });
        if let Err(why) = sent {
            match self.spool(node, at, status, &text) {
                Ok(path) => output::warning(&format!(
                    "the run's report was not stored ({why}); it is kept in `{}` and sent by the \
                     next run that reaches the store",
                    path.display()
                )),
                Err(spool_error) => output::warning(&format!(
                    "the run's report was not stored ({why}), nor kept: {spool_error}"
                )),
            }
        }
    }

    fn spool_dir(&self) -> Option<PathBuf> {
        self.state_dir.as_ref().map(|dir| dir.join("spool"))
    }

    /// Keeps a report in the spool: a file `0600`, written whole under a temporary name
    /// and renamed, in a private directory.
    fn spool(&self, node: &str, at: i64, status: &str, report: &str) -> anyhow::Result<PathBuf> {
        let Some(dir) = self.spool_dir() else {
            bail!("there is no state directory");
        };
        wconverge_runtime::open_private_dir(&dir).map_err(anyhow::Error::msg)?;
        let mut pending = spooled(&dir)?;
        pending.sort();
        while pending.len() >= SPOOL_CAP {
            let oldest = pending.remove(0);
            output::warning(&format!(
                "the spool holds {SPOOL_CAP} reports (the limit): dropping the oldest, `{}`",
                oldest.display()
            ));
            let _ = std::fs::remove_file(&oldest);
        }
        let name = format!("{at:012}-{}.json", std::process::id());
        let envelope = serde_json::json!({
            "node": node,
            "at": at,
            "status": status,
            "report": report,
        });
        let temporary = dir.join(format!(".{name}.tmp"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&temporary)
            .with_context(|| format!("cannot create `{}`", temporary.display()))?;
        file.write_all(envelope.to_string().as_bytes())
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write `{}`", temporary.display()))?;
        let path = dir.join(name);
        std::fs::rename(&temporary, &path)
            .with_context(|| format!("cannot rename `{}`", temporary.display()))?;
        Ok(path)
    }

    /// Sends the spooled reports, oldest first; each is removed once stored.
    fn send_spooled(&self, store: &Store) {
        let Some(dir) = self.spool_dir() else {
            return;
        };
        if !dir.exists() {
            return;
        }
        if let Err(why) = wconverge_runtime::open_private_dir(&dir) {
            output::warning(&format!("the spool `{}` is not used: {why}", dir.display()));
            return;
        }
        let Ok(mut pending) = spooled(&dir) else {
            return;
        };
        pending.sort();
        for path in pending.into_iter().take(SPOOL_SENT_PER_RUN) {
            let sent = input::read_text(&path, "spooled report", SPOOLED_BYTES)
                .and_then(|text| {
                    serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string())
                })
                .map_err(Unsent::Unreadable)
                .and_then(|envelope| {
                    let field = |name: &str| envelope.get(name).cloned();
                    match (
                        field("node").and_then(|v| v.as_str().map(str::to_owned)),
                        field("at").and_then(|v| v.as_i64()),
                        field("status").and_then(|v| v.as_str().map(str::to_owned)),
                        field("report").and_then(|v| v.as_str().map(str::to_owned)),
                    ) {
                        (Some(node), Some(at), Some(status), Some(report)) => store
                            .store_report(&node, at, (&status, None), &report)
                            .map(|_| ())
                            .map_err(|error| match error {
                                wconverge_store::StoreError::Invalid(why) => {
                                    Unsent::Unreadable(why)
                                }
                                other => Unsent::Store(other.to_string()),
                            }),
                        _ => Err(Unsent::Unreadable("it is not a spooled report".to_owned())),
                    }
                });
            match sent {
                Ok(()) => {
                    let _ = std::fs::remove_file(&path);
                }
                Err(Unsent::Store(why)) => {
                    // The store fails now: the rest waits for the next run.
                    output::warning(&format!(
                        "the spooled report `{}` was not sent: {why}",
                        path.display()
                    ));
                    break;
                }
                Err(Unsent::Unreadable(why)) => {
                    // It never will be sent: set aside, so that it holds up no other.
                    let aside = path.with_extension("bad");
                    let _ = std::fs::rename(&path, &aside);
                    output::warning(&format!(
                        "the spooled report `{}` cannot be read ({why}); it is set aside as `{}`",
                        path.display(),
                        aside.display()
                    ));
                }
            }
        }
    }
}

/// Why a spooled report was not sent.
enum Unsent {
    /// The store failed: try again next run.
    Store(String),
    /// The file is not a report the store takes: it never will be.
    Unreadable(String),
}

/// A spooled report's file is at most this large: a report the store takes, escaped
/// into its envelope.
const SPOOLED_BYTES: u64 = 3 * wconverge_store::MAX_DOCUMENT_BYTES as u64;

/// The spooled reports' paths. A temporary file a spooling run left behind (it died
/// before its rename) is removed.
fn spooled(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("cannot list `{}`", dir.display()))?
    {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        } else if !name.starts_with('.') && name.ends_with(".json") {
            paths.push(entry.path());
        }
        if paths.len() > SPOOL_CAP * 2 {
            bail!(
                "`{}` holds more than {} reports; remove some",
                dir.display(),
                SPOOL_CAP * 2
            );
        }
    }
    Ok(paths)
}

impl wconverge_lang::Exports for Fleet {
    fn collect(
        &self,
        type_name: &str,
        query: &ExportQuery,
        excluding: &str,
    ) -> Result<Vec<Collected>, String> {
        self.store()?
            .collect(type_name, query, excluding)
            .map_err(|error| error.to_string())
    }
}

/// Puppet's words for a run's outcome.
/// What a listing of the store shows of a run, from its report.
fn figures_of(report: &wconverge_engine::report::Report) -> wconverge_store::RunFigures {
    let summary = &report.summary;
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    wconverge_store::RunFigures {
        mode: report.mode.to_owned(),
        resources: count(summary.resources),
        changed: count(summary.changed),
        would_change: count(summary.would_change),
        failed: count(summary.failed),
        skipped: count(summary.skipped),
        duration_ms: report.duration_ms,
    }
}

/// Puppet's status of a run: a noop run changes nothing, so it is `unchanged` unless
/// something failed (what it would change is in its figures).
fn status_of(report: &wconverge_engine::report::Report) -> &'static str {
    if report.exit_code & 4 != 0 {
        "failed"
    } else if report.corrective_change && report.mode != "noop" {
        // Drift a watching agent corrected, rather than a change the catalog asked for.
        "corrected"
    } else if report.exit_code & 2 != 0 && report.mode != "noop" {
        "changed"
    } else {
        "unchanged"
    }
}

/// A report as the store keeps it: the summary and every resource that did not stay
/// unchanged or was refreshed (the summary counts the others), as PuppetDB keeps a run's
/// events, and where
/// the time went (the phases, and the slowest resources whatever their status).
/// Sensitive values are redacted in the report already.
#[derive(serde::Serialize)]
struct StoredForm<'a> {
    format_version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    mode: &'static str,
    duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    phases: Option<&'a wconverge_engine::report::Phases>,
    summary: &'a wconverge_engine::report::Summary,
    resources: Vec<&'a wconverge_engine::report::ResourceReport>,
    /// The slowest resources, unchanged ones too: `reports show ID --slow N`.
    slowest: Vec<Slow<'a>>,
    exit_code: i32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    corrective_change: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    drift: &'a [wconverge_engine::report::Drift],
    #[serde(skip_serializing_if = "Option::is_none")]
    cached_catalog_status: Option<&'static str>,
}

/// How many of a run's slowest resources the store keeps.
const SLOWEST_KEPT: usize = 20;

#[derive(serde::Serialize)]
struct Slow<'a> {
    resource: &'a str,
    duration_ms: f64,
    timings: &'a wconverge_engine::report::Timings,
}

impl<'a> StoredForm<'a> {
    fn of(report: &'a wconverge_engine::report::Report) -> StoredForm<'a> {
        StoredForm {
            format_version: report.format_version,
            node: report.node.as_deref(),
            mode: report.mode,
            duration_ms: report.duration_ms,
            phases: report.phases.as_ref(),
            summary: &report.summary,
            resources: report
                .resources
                .iter()
                .filter(|resource| {
                    resource.status != wconverge_engine::report::Status::Unchanged
                        || resource.refresh.is_some()
                })
                .collect(),
            slowest: {
                let mut all: Vec<&wconverge_engine::report::ResourceReport> =
                    report.resources.iter().collect();
                all.sort_by(|a, b| b.duration_ms.total_cmp(&a.duration_ms));
                all.truncate(SLOWEST_KEPT);
                all.into_iter()
                    .map(|resource| Slow {
                        resource: &resource.resource,
                        duration_ms: resource.duration_ms,
                        timings: &resource.timings,
                    })
                    .collect()
            },
            exit_code: report.exit_code,
            corrective_change: report.corrective_change,
            drift: &report.drift,
            cached_catalog_status: report.cached_catalog_status,
        }
    }
}

/// Facts as JSON: each group a list of objects, as `facts --format json` prints them
/// and `requirement --facts` reads them.
pub(crate) fn facts_object(groups: &wconverge_runtime::FactGroups) -> serde_json::Value {
    serde_json::Value::Object(
        groups
            .iter()
            .map(|(group, records)| {
                let records = records
                    .iter()
                    .map(|record| {
                        serde_json::Value::Object(
                            record
                                .iter()
                                .map(|(key, value)| {
                                    (key.clone(), serde_json::Value::String(value.clone()))
                                })
                                .collect(),
                        )
                    })
                    .collect();
                (group.clone(), serde_json::Value::Array(records))
            })
            .collect(),
    )
}

/// Facts from their JSON form; `shown` names where they come from in errors.
pub(crate) fn facts_from_json(
    text: &str,
    shown: &str,
) -> Result<wconverge_runtime::FactGroups, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("{shown}: not JSON: {error}"))?;
    let groups = json.as_object().ok_or_else(|| {
        format!("{shown}: the facts must be an object mapping each group to its records")
    })?;
    let mut facts = wconverge_runtime::FactGroups::new();
    for (group, records) in groups {
        let records = records
            .as_array()
            .ok_or_else(|| format!("{shown}: group `{group}` must be a list of records"))?;
        let mut parsed = Vec::with_capacity(records.len());
        for (index, record) in records.iter().enumerate() {
            let record = record
                .as_object()
                .ok_or_else(|| format!("{shown}: record {index} of `{group}` must be an object"))?;
            parsed.push(
                record
                    .iter()
                    .map(|(key, value)| {
                        value
                            .as_str()
                            .map(|value| (key.clone(), value.to_owned()))
                            .ok_or_else(|| {
                                format!(
                                    "{shown}: `{group}` record {index}: `{key}` must be a \
                                     string (every fact is a string; write \"{value}\")"
                                )
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        facts.insert(group.clone(), parsed);
    }
    Ok(facts)
}

/// `wconverge store deactivate NODE`, `wconverge store nodes`.
pub(crate) fn store_command(command: &StoreCommand) -> anyhow::Result<u8> {
    match command {
        StoreCommand::Deactivate { node, store } => {
            let fleet = Fleet::of(store)?;
            let store = fleet.existing_store()?;
            if store.deactivate(node)? {
                output::line(&format!(
                    "node `{node}` deactivated: its exported resources are collected no more \
                     (until it compiles again)"
                ));
                Ok(0)
            } else {
                bail!(
                    "the store {} knows no node `{node}`; `wconverge store nodes` lists them",
                    store.shown()
                )
            }
        }
        StoreCommand::Nodes { store } => {
            let fleet = Fleet::of(store)?;
            let store = fleet.existing_store()?;
            let mut text = String::new();
            for node in store.nodes()? {
                text.push_str(&format!(
                    "{}  exports={}  facts={}{}\n",
                    node.name.escape_debug(),
                    node.exports,
                    node.facts_at.map_or_else(|| "none".to_owned(), time_text),
                    node.deactivated
                        .map(|at| format!("  deactivated={}", time_text(at)))
                        .unwrap_or_default()
                ));
            }
            output::text(&text);
            Ok(0)
        }
    }
}

/// What `wconverge store` does.
#[derive(clap::Subcommand)]
pub(crate) enum StoreCommand {
    /// Deactivate a node (a machine retired): its exported resources are collected no
    /// more, until it compiles again.
    Deactivate {
        #[arg(value_name = "NODE")]
        node: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The nodes the store knows: how many resources each exports, when it last sent
    /// facts, whether it is deactivated.
    Nodes {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `--since`: `30m`, `12h`, `7d` ago, or a date `2026-11-25`, or a time
/// `2026-11-25T08:00:00Z` (UTC).
pub(crate) fn parse_since(text: &str) -> anyhow::Result<i64> {
    let now = wconverge_store::now();
    let bad = || {
        anyhow::anyhow!(
            "`--since {text}`: give an age (`30m`, `12h`, `7d`), a date (`2026-11-25`) or a \
             UTC time (`2026-11-25T08:00:00Z`)"
        )
    };
    if let Some(unit) = text.chars().last().filter(char::is_ascii_alphabetic)
        && text.len() > 1
        && text[..text.len() - 1].bytes().all(|b| b.is_ascii_digit())
    {
        let count: i64 = text[..text.len() - 1].parse().map_err(|_| bad())?;
        let seconds = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        return Ok(now.saturating_sub(count.saturating_mul(seconds)));
    }
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => (date, Some(time.strip_suffix('Z').ok_or_else(bad)?)),
        None => (text, None),
    };
    let fields: Vec<i64> = date
        .split('-')
        .map(|field| field.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let [year, month, day] = fields.as_slice() else {
        return Err(bad());
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1970..=9999).contains(year)
        || !(1..=12).contains(month)
        || !(1..=days_in_month).contains(day)
    {
        return Err(bad());
    }
    // In range: checked above.
    let (month, day) = (
        u32::try_from(*month).map_err(|_| bad())?,
        u32::try_from(*day).map_err(|_| bad())?,
    );
    let mut seconds = wconverge_lang::calendar::days_from_civil(*year, month, day) * 86_400;
    if let Some(time) = time {
        let fields: Vec<i64> = time
            .split(':')
            .map(|field| field.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let [hours, minutes, secs] = fields.as_slice() else {
            return Err(bad());
        };
        if *hours > 23 || *minutes > 59 || *secs > 60 {
            return Err(bad());
        }
        seconds += hours * 3_600 + minutes * 60 + secs;
    }
    Ok(seconds)
}

/// A time as `2026-11-25T08:00:00Z`.
pub(crate) fn time_text(at: i64) -> String {
    let days = at.div_euclid(86_400);
    let seconds = at.rem_euclid(86_400);
    let (year, month, day) = wconverge_lang::calendar::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds / 3_600,
        seconds % 3_600 / 60,
        seconds % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_and_parse_back() {
        for at in [0, 951_782_400, 1_764_057_600, 1_795_000_123] {
            let text = time_text(at);
            assert_eq!(parse_since(&text).expect(&text), at, "{text}");
        }
        assert_eq!(time_text(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(parse_since("2026-11-25").expect("date"), 1_795_564_800);
        let now = wconverge_store::now();
        let day_ago = parse_since("1d").expect("age");
        assert!((now - 86_400 - day_ago).abs() <= 1);
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-02-29",
            "2026-04-31",
            "99999999999999-01-01",
            "5y",
            "2026-11-25T25:00:00Z",
            "d",
        ] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn facts_read_back_as_they_were_written() {
        let mut groups = wconverge_runtime::FactGroups::new();
        groups.insert(
            "os".to_owned(),
            vec![vec![
                ("family".to_owned(), "Debian".to_owned()),
                ("release".to_owned(), "12".to_owned()),
            ]],
        );
        let text = facts_object(&groups).to_string();
        assert_eq!(facts_from_json(&text, "test").expect("facts"), groups);
        assert!(facts_from_json("[1]", "test").is_err());
    }
}
