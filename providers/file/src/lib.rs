//! The `file` provider: regular files, their content, mode and ownership. The type's
//! schema and convergence live in `wconverge-file-core`, which the `template` plugin
//! shares.

use wconverge_file_core::{file_apply, file_current_state, file_plan, file_schema, validate_file};
use wconverge_sdk::{Change, Provider, ProviderInfo, Resource, Result, State, export_provider};

struct FileProvider;

impl Provider for FileProvider {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("file", env!("CARGO_PKG_VERSION")).with_type(file_schema())
    }

    fn validate(resource: &Resource) -> Vec<String> {
        validate_file(resource)
    }

    fn current_state(resource: &Resource) -> Result<State> {
        file_current_state(resource)
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        file_plan(resource, current)
    }

    fn apply(resource: &Resource, changes: &[Change]) -> Result<()> {
        file_apply(resource, changes)
    }
}

export_provider!(FileProvider);
