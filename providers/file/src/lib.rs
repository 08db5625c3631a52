//! The `file` provider: Puppet's `file` type. Regular files (their content, or a copy of
//! a `source`), directories (with `recurse`, a whole tree: copied from a source
//! directory, given the directory's owner, group and mode, and purged of what nothing
//! manages), symbolic links, and their removal.
//!
//! A regular file with `content` converges as `wconverge-file-core` converges it (the
//! `template` plugin shares that); everything else is planned here as a list of
//! [`tree::Action`]s, each one reported as a change, and applied by planning again
//! (what is on the machine may have changed since the plan) and acting on each.

mod action;
mod tree;
mod walk;

use wconverge_file_core::{FileAttributes, validate_file};
use wconverge_sdk::{
    Attribute, Change, Concurrency, DataType, PathAccess, Provider, ProviderInfo, Resource, Result,
    RunContext, State, TypeSchema, export_provider,
};

struct FileProvider;

impl Provider for FileProvider {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("file", env!("CARGO_PKG_VERSION")).with_type(schema())
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = validate_file(resource);
        problems.extend(tree::validate(resource));
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        tree::current_state(resource)
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        tree::plan(resource, current)
    }

    fn apply(resource: &Resource, changes: &[Change]) -> Result<()> {
        tree::apply(resource, changes)
    }
}

export_provider!(FileProvider);

fn schema() -> TypeSchema {
    TypeSchema::new(
        "file",
        "A file, directory or symbolic link: whether it exists, its content (or a copy of \
         a source, a whole tree with `recurse`), its target, mode, owner and group. \
         Attributes and values are Puppet's.",
    )
    .context(RunContext::ManagedBeneath)
    // The files of a directory are checked in one call (each call is granted only the
    // directory its files need); the run context (`managed`) is only for planning.
    .batch_state()
    // Files at different paths are applied at once under `apply --jobs`.
    .concurrency(Concurrency::PerPath)
    .attribute(
        Attribute::new("path", DataType::String, "Absolute path of the file.")
            .namevar()
            .path_access(PathAccess::ReadWrite),
    )
    .attribute(Attribute::new(
        "ensure",
        DataType::enumeration(["file", "present", "directory", "link", "absent"]),
        "`file`: a regular file; `present`: anything that exists (a new one is a regular \
         file); `directory`; `link`: a symbolic link to `target`; `absent`: nothing. When \
         not set: `link` if `target` is set, else what `source` is, else `file`.",
    ))
    .attribute(Attribute::new(
        "content",
        DataType::String,
        "The whole content of a regular file. Left alone when neither it nor `source` is \
         set.",
    ))
    .attribute(
        Attribute::new(
            "source",
            DataType::String,
            "Absolute path of a file to copy (its content), or of a directory (with \
             `recurse`, its whole tree), in a directory the plugin's policy lets it read.",
        )
        .parameter()
        .path_access(PathAccess::Read)
        .refers_to("file"),
    )
    .attribute(
        Attribute::new(
            "target",
            DataType::String,
            "What a link points to (`ensure => link`): a path, absolute or relative to the \
             link's directory. It need not exist.",
        )
        .refers_to("file"),
    )
    .attribute(
        Attribute::new(
            "recurse",
            DataType::OneOf(vec![
                DataType::Boolean,
                DataType::enumeration(["true", "false", "remote"]),
            ]),
            "For a directory: manage everything in it too: its owner, group and mode, the \
             source's tree when `source` is set (`remote`: only what the source has), and \
             with `purge` the removal of the rest. Default: false.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "recurselimit",
            DataType::Integer,
            "How many levels below the directory `recurse` goes (1: its entries only).",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "purge",
            DataType::Boolean,
            "With `recurse`: remove what is in the directory but not in the source and not \
             managed by another resource (subdirectories only with `force`). A noop run \
             lists what would go. Default: false.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "force",
            DataType::Boolean,
            "Replace a directory by a file or link, remove a directory that is not empty, \
             and let `purge` remove subdirectories. Default: false.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "replace",
            DataType::Boolean,
            "`false`: a file (or link) that exists keeps its content (or target); only \
             its owner, group and mode are managed. Default: true.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "links",
            DataType::enumeration(["manage", "follow", "ignore"]),
            "Links met in a source tree: `manage` copies the link itself, `follow` what it \
             points to, `ignore` skips it. A link at the managed path itself is managed \
             only with `ensure => link`; otherwise it is refused. Default: `manage`.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "checksum",
            DataType::enumeration(["sha256", "md5", "mtime", "none"]),
            "How a file's content is compared with what it should be: `sha256` (`md5` is \
             taken as `sha256`), `mtime` (copied when the source is newer), `none` (a file \
             that exists is never rewritten). Default: `sha256`.",
        )
        .parameter(),
    )
    .with_file_attributes()
}
