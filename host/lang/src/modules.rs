//! Puppet's autoloader: the classes and defined types a compile uses and its sources do
//! not define come from the modules of a module path (`ntp` from
//! `ntp/manifests/init.pp`, `ntp::config` from `ntp/manifests/config.pp`), through the
//! caller's [`Loader`].
//!
//! Before evaluating, every name the sources mention (`include ntp`, `ntp::vhost { }`,
//! `Class['ntp']`, `$ntp::params::x`, a string `'ntp::config'`) whose first segment is a
//! module is loaded, and so on for what the loaded files mention; a name known only at
//! run time (`include $role`) is loaded when the evaluation misses it, and the compile
//! starts again. An autoloaded file contributes only its definitions.

use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::{Diagnostic, Severity, Span};
use crate::syntax::{ExprKind, Program};
use crate::{Compiled, Loader, MAX_LOADED_FILES, Source};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use wconverge_catalog::Catalog;

/// A name has at most this many segments to be looked up.
const MAX_SEGMENTS: usize = 16;

pub(crate) struct Modules<'l> {
    /// The sources given, then the modules' files loaded (copied only when a file is).
    pub(crate) sources: Cow<'l, [Source]>,
    given: usize,
    loader: &'l dyn Loader,
    /// Names asked of the loader already, found or not.
    tried: HashSet<String>,
    /// The module of each loaded file, by file index.
    module_of: HashMap<u32, String>,
    /// Names whose manifest exists and could not be read, with why.
    pub(crate) unreadable: HashMap<String, String>,
    limit_reported: bool,
}

impl<'l> Modules<'l> {
    pub(crate) fn new(sources: &'l [Source], loader: &'l dyn Loader) -> Modules<'l> {
        Modules {
            sources: Cow::Borrowed(sources),
            given: sources.len(),
            loader,
            tried: HashSet::new(),
            module_of: HashMap::new(),
            unreadable: HashMap::new(),
            limit_reported: false,
        }
    }

    /// Loads (and parses into `program`) the manifests of every name the sources
    /// mention and do not define, then of what those mention, and so on.
    pub(crate) fn load_mentioned(
        &mut self,
        program: &mut Program,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        // Files loaded in an earlier attempt were parsed with the rest.
        for file in self.given..program.files.len() {
            only_definitions(file, program, diagnostics, &self.sources);
        }
        if self.loader.is_empty() {
            return;
        }
        let mut scanned = 0;
        loop {
            let defined: HashSet<String> = program
                .classes
                .iter()
                .map(|class| class.name.clone())
                .chain(program.defines.iter().map(|define| define.name.clone()))
                .chain(
                    program
                        .functions
                        .iter()
                        .map(|function| function.name.clone()),
                )
                .collect();
            let mut wanted = Vec::new();
            for source in &self.sources[scanned..] {
                for name in mentioned(&source.text) {
                    let module = name.split("::").next().unwrap_or_default();
                    if !defined.contains(&name)
                        && !self.tried.contains(&name)
                        && !wanted.contains(&name)
                        && self.loader.has_module(module)
                    {
                        wanted.push(name);
                    }
                }
            }
            scanned = self.sources.len();
            if wanted.is_empty() {
                return;
            }
            for name in wanted {
                if self.load(&name, diagnostics) {
                    let file = self.sources.len() - 1;
                    crate::parse_one(file, &self.sources[file], program, diagnostics);
                    only_definitions(file, program, diagnostics, &self.sources);
                }
            }
        }
    }

    /// Loads what the evaluation missed; true if anything new was loaded (then the
    /// compile starts again).
    pub(crate) fn load_missing(&mut self, missing: &[String]) -> bool {
        let mut loaded = false;
        let mut ignored = Vec::new();
        for name in missing {
            let name = name.trim_start_matches("::").to_ascii_lowercase();
            let module = name.split("::").next().unwrap_or_default().to_owned();
            if self.tried.contains(&name) || !self.loader.has_module(&module) {
                continue;
            }
            loaded |= self.load(&name, &mut ignored);
        }
        loaded
    }

    fn load(&mut self, name: &str, diagnostics: &mut Vec<Diagnostic>) -> bool {
        self.tried.insert(name.to_owned());
        if self.sources.len() - self.given >= MAX_LOADED_FILES {
            if !self.limit_reported {
                self.limit_reported = true;
                diagnostics.push(
                    Diagnostic::error(
                        DiagnosticCode::ModuleLimit,
                        Span::new(0, 0, 0),
                        format!(
                            "the manifests load more than {MAX_LOADED_FILES} files from the \
                             module path (the limit)"
                        ),
                    )
                    .with_help(
                        "check the module path: it should hold the modules of one code base",
                    ),
                );
            }
            return false;
        }
        match self.loader.manifest(name) {
            Some(Ok(source)) => {
                let file = u32::try_from(self.sources.len()).unwrap_or(u32::MAX);
                let module = name.split("::").next().unwrap_or_default().to_owned();
                self.module_of.insert(file, module);
                self.sources.to_mut().push(source);
                true
            }
            Some(Err(why)) => {
                self.unreadable.insert(name.to_owned(), why);
                false
            }
            None => false,
        }
    }

    /// The module each loaded file belongs to (`$module_name` in its definitions).
    pub(crate) fn module_of_file(&self) -> HashMap<u32, String> {
        self.module_of.clone()
    }

    pub(crate) fn compiled(
        self,
        catalog: Option<Catalog>,
        diagnostics: Vec<Diagnostic>,
    ) -> Compiled {
        let loaded = match self.sources {
            Cow::Owned(mut sources) => sources.split_off(self.given),
            Cow::Borrowed(_) => Vec::new(),
        };
        Compiled {
            catalog,
            diagnostics,
            loaded,
            exports: Vec::new(),
            collects_exports: false,
        }
    }
}

/// An autoloaded file contributes its definitions; code outside them is not
/// evaluated (it would run at an order nobody chose), and says so.
fn only_definitions(
    file: usize,
    program: &mut Program,
    diagnostics: &mut Vec<Diagnostic>,
    sources: &[Source],
) {
    let Some(block) = program.files.get_mut(file) else {
        return;
    };
    if let Some(first) = block
        .iter()
        .find(|expr| !matches!(expr.kind, ExprKind::Definition))
    {
        let name = sources.get(file).map_or("", |source| source.name.as_str());
        diagnostics.push(
            Diagnostic::error(
                DiagnosticCode::ModuleTopLevelCode,
                first.span,
                format!(
                    "`{name}` is a module's manifest, loaded for the class or defined type it \
                     defines; code outside the definition is not evaluated"
                ),
            )
            .with_severity(Severity::Warning)
            .with_help("move it into the class, or into the main manifest"),
        );
        block.clear();
    }
}

/// The class and defined type names a text may mention, with every shorter prefix
/// (`ntp::params::servers` gives `ntp`, `ntp::params`, `ntp::params::servers`):
/// lowercased words of letters, digits, `_` and `::`.
fn mentioned(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
        if !is_word(bytes[at]) {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && is_word(bytes[at]) {
            at += 1;
        }
        let word = text[start..at]
            .trim_start_matches("::")
            .to_ascii_lowercase();
        let segments: Vec<&str> = word.split("::").collect();
        let valid = segments.len() <= MAX_SEGMENTS
            && segments.iter().all(|segment| {
                segment
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_lowercase())
                    && segment
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            });
        if !valid {
            continue;
        }
        for end in 1..=segments.len() {
            let name = segments[..end].join("::");
            if seen.insert(name.clone()) {
                names.push(name);
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::mentioned;

    #[test]
    fn mentioned_names_are_lowercased_words_with_their_prefixes() {
        let names = mentioned("include ntp::config\nApache::Vhost['x'] $::os::x 'a:b' 9x");
        assert_eq!(
            names,
            [
                "include",
                "ntp",
                "ntp::config",
                "apache",
                "apache::vhost",
                "x",
                "os",
                "os::x",
            ]
        );
    }
}
