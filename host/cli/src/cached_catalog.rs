//! The last catalog that compiled, kept for a run whose manifests do not compile (what
//! Puppet's agent does with `usecacheonfailure`, its default): `wconverge agent` asks
//! each run to keep its catalog in the state directory (`catalog.json`, `0600` in the
//! private state directory: it holds the catalog's sensitive values, as Puppet's cached
//! catalog does), and a run whose manifests fail applies that one instead, reported with
//! `cached_catalog_status: on_failure` and exit code 4 (the manifests failed). The
//! machine stays converged, and watched, while the manifests are being fixed.

use crate::catalog::InputArgs;
use std::path::Path;

/// The kept catalog's name in the state directory.
const NAME: &str = "catalog.json";

/// Keeps `catalog` (its JSON) as the last that compiled; a warning when it cannot.
pub(crate) fn keep(state_dir: &Path, catalog: &wconverge_catalog::Catalog) {
    let kept = serde_json::to_vec(catalog)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::dirs::write_private(state_dir, NAME, &bytes));
    if let Err(error) = kept {
        crate::output::warning(&format!(
            "the catalog was not kept for runs whose manifests fail: {error}"
        ));
    }
}

/// What a run whose manifests failed applies instead: the kept catalog, if there is one
/// in a private state directory (no one else can swap it; it is then read as any
/// catalog, with the input's caps).
pub(crate) fn instead(state_dir: &Path) -> Option<InputArgs> {
    wconverge_runtime::open_private_dir(state_dir).ok()?;
    let path = state_dir.join(NAME);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    crate::output::warning(&format!(
        "the manifests did not compile: applying the catalog of the last run whose manifests \
         did, `{}` (as Puppet's agent does); fix the manifests",
        path.display()
    ));
    Some(InputArgs {
        files: vec![path],
        execute: None,
        node: None,
        deny_warnings: false,
        modulepath: None,
    })
}
