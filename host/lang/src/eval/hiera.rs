//! Hiera 5, as Puppet's `lookup()` and automatic class parameter lookup use it: the
//! environment's `hiera.yaml` and each module's (consulted only for keys in that
//! module's namespace), hierarchy levels whose paths interpolate facts and top-scope
//! variables (`nodes/%{trusted.certname}.yaml`), YAML and JSON data, the merge
//! strategies `first`, `unique`, `hash` and `deep`, `lookup_options` (`merge`,
//! `convert_to: Sensitive`), and interpolation in data values (`%{facts.x}`,
//! `%{lookup('k')}`, `%{alias('k')}`, `%{literal('%')}`).
//!
//! The files come through the caller's [`Loader`](crate::Loader), parsed; this module
//! reads nothing itself.

use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::Span;
use crate::eval::Evaluator;
use crate::eval::value::Val;
use crate::{DataFormat, HieraFile};
use std::collections::HashMap;

/// `%{lookup('k')}` in data may look up keys that look up keys, this deep at most.
const MAX_NESTED_LOOKUPS: usize = 32;

/// A hierarchy has at most this many levels, and a level this many paths.
const MAX_LEVELS: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Merge {
    First,
    Unique,
    Hash,
    Deep,
}

impl Merge {
    pub(crate) fn parse(value: &Val) -> Result<Option<Merge>, String> {
        let name = match value {
            Val::Undef => return Ok(None),
            Val::Str(name) => name.as_str(),
            Val::Hash(entries) => match Val::hash_get(entries, &Val::Str("strategy".into())) {
                Some(Val::Str(name)) => name.as_str(),
                _ => return Err("a merge hash needs a `strategy`".to_owned()),
            },
            other => {
                return Err(format!(
                    "a merge strategy is a name or a hash, not {}",
                    other.type_name()
                ));
            }
        };
        match name {
            "first" => Ok(Some(Merge::First)),
            "unique" => Ok(Some(Merge::Unique)),
            "hash" => Ok(Some(Merge::Hash)),
            "deep" => Ok(Some(Merge::Deep)),
            other => Err(format!(
                "unknown merge strategy `{other}`; use first, unique, hash or deep"
            )),
        }
    }
}

/// One layer's `hiera.yaml`, read.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    levels: Vec<Level>,
}

#[derive(Clone, Debug)]
struct Level {
    /// Paths relative to the directory of the `hiera.yaml`, before interpolation.
    paths: Vec<String>,
    format: DataFormat,
}

/// A data file read: its name and its value, or why it could not be read.
type DataFile = Result<(String, Val), String>;

/// What the compile has read of Hiera so far.
#[derive(Default)]
pub(crate) struct Hiera {
    /// Each layer's config (`None`: the environment's), `None` when it has none.
    configs: HashMap<Option<String>, Option<Result<Config, String>>>,
    /// Each data file read, by layer and path: `None` when it does not exist.
    data: HashMap<(Option<String>, String), Option<DataFile>>,
    /// The keys being looked up, innermost last (a key whose data looks itself up).
    stack: Vec<String>,
}

fn text_of<'v>(entries: &'v [(Val, Val)], key: &str) -> Option<&'v Val> {
    Val::hash_get(entries, &Val::Str(key.to_owned()))
}

/// Reads a `hiera.yaml` of version 5.
fn parse_config(file: HieraFile) -> Result<Config, String> {
    let name = file.name;
    let value = Val::from_catalog(&file.value);
    let bad = |what: String| format!("`{name}`: {what}");
    let Val::Hash(entries) = &value else {
        return Err(bad(
            "a hiera.yaml is a hash (`version: 5`, `hierarchy: [...]`)".into(),
        ));
    };
    match text_of(entries, "version") {
        Some(Val::Int(5)) => {}
        Some(other) => {
            return Err(bad(format!(
                "version {} is not supported; write Hiera 5 (`version: 5`)",
                other.to_display()
            )));
        }
        None => return Err(bad("it has no `version: 5`".into())),
    }
    let defaults = match text_of(entries, "defaults") {
        Some(Val::Hash(defaults)) => defaults.clone(),
        _ => Vec::new(),
    };
    let datadir_of = |entries: &[(Val, Val)], fallback: &str| match text_of(entries, "datadir") {
        Some(Val::Str(dir)) => dir.clone(),
        _ => fallback.to_owned(),
    };
    let format_of = |entries: &[(Val, Val)], fallback: DataFormat, level: &str| match text_of(
        entries,
        "data_hash",
    ) {
        None => Ok(fallback),
        Some(Val::Str(backend)) if backend == "yaml_data" => Ok(DataFormat::Yaml),
        Some(Val::Str(backend)) if backend == "json_data" => Ok(DataFormat::Json),
        Some(other) => Err(bad(format!(
            "{level}: back end `{}` is not supported (only `yaml_data` and `json_data`; the \
                 others are Ruby)",
            other.to_interpolated()
        ))),
    };
    let default_datadir = datadir_of(&defaults, "data");
    let default_format = format_of(&defaults, DataFormat::Yaml, "defaults")?;
    if text_of(&defaults, "lookup_key").is_some() || text_of(&defaults, "data_dig").is_some() {
        return Err(bad(
            "defaults: only `data_hash` back ends (`yaml_data`, `json_data`) are supported".into(),
        ));
    }
    let hierarchy = match text_of(entries, "hierarchy") {
        Some(Val::Array(levels)) => levels.clone(),
        None => vec![Val::Hash(vec![
            (Val::Str("name".into()), Val::Str("Common".into())),
            (Val::Str("path".into()), Val::Str("common.yaml".into())),
        ])],
        Some(_) => return Err(bad("`hierarchy` is a list of levels".into())),
    };
    let mut levels = Vec::new();
    for (idx, level) in hierarchy.iter().enumerate().take(MAX_LEVELS) {
        let Val::Hash(level) = level else {
            return Err(bad(format!("hierarchy level {} is not a hash", idx + 1)));
        };
        let name = match text_of(level, "name") {
            Some(Val::Str(name)) => format!("level `{name}`"),
            _ => format!("hierarchy level {}", idx + 1),
        };
        for unsupported in [
            "lookup_key",
            "data_dig",
            "glob",
            "globs",
            "mapped_paths",
            "uri",
            "uris",
        ] {
            if text_of(level, unsupported).is_some() {
                return Err(bad(format!(
                    "{name}: `{unsupported}` is not supported; give `path` or `paths` with a \
                     `yaml_data` or `json_data` back end"
                )));
            }
        }
        let datadir = datadir_of(level, &default_datadir);
        let format = format_of(level, default_format, &name)?;
        let paths: Vec<String> = match (text_of(level, "path"), text_of(level, "paths")) {
            (Some(Val::Str(path)), None) => vec![path.clone()],
            (None, Some(Val::Array(paths))) => paths
                .iter()
                .take(MAX_LEVELS)
                .map(|path| match path {
                    Val::Str(path) => Ok(path.clone()),
                    _ => Err(bad(format!("{name}: every path is a string"))),
                })
                .collect::<Result<_, _>>()?,
            (None, None) => return Err(bad(format!("{name} has no `path` or `paths`"))),
            _ => {
                return Err(bad(format!(
                    "{name}: give `path` (a string) or `paths` (a list)"
                )));
            }
        };
        levels.push(Level {
            paths: paths
                .into_iter()
                .map(|path| format!("{}/{path}", datadir.trim_end_matches('/')))
                .collect(),
            format,
        });
    }
    Ok(Config { levels })
}

/// Digs `path` (the segments after the first of a dotted key) into `value`.
fn dig(mut value: Val, path: &[&str]) -> Option<Val> {
    for segment in path {
        value = match value {
            Val::Hash(entries) => {
                Val::hash_get(&entries, &Val::Str((*segment).to_owned()))?.clone()
            }
            Val::Array(items) => items.get(segment.parse::<usize>().ok()?)?.clone(),
            _ => return None,
        };
    }
    Some(value)
}

/// `lower` merged into `higher` (which wins), as the strategy says.
fn merge_two(strategy: Merge, higher: Val, lower: Val) -> Val {
    match (strategy, higher, lower) {
        (Merge::First, higher, _) => higher,
        (Merge::Unique, higher, lower) => {
            let mut out = Vec::new();
            for value in [higher, lower] {
                let items = match value {
                    Val::Array(items) => items,
                    other => vec![other],
                };
                for item in items {
                    if !out.iter().any(|existing: &Val| existing == &item) {
                        out.push(item);
                    }
                }
            }
            Val::Array(out)
        }
        (Merge::Hash, Val::Hash(mut higher), Val::Hash(lower)) => {
            for (key, value) in lower {
                if !higher.iter().any(|(existing, _)| *existing == key) {
                    higher.push((key, value));
                }
            }
            Val::Hash(higher)
        }
        (Merge::Deep, Val::Hash(mut higher), Val::Hash(lower)) => {
            for (key, value) in lower {
                match higher.iter().position(|(existing, _)| *existing == key) {
                    Some(at) => {
                        let mine = std::mem::replace(&mut higher[at].1, Val::Undef);
                        higher[at].1 = merge_two(Merge::Deep, mine, value);
                    }
                    None => higher.push((key, value)),
                }
            }
            Val::Hash(higher)
        }
        (Merge::Deep, Val::Array(higher), Val::Array(lower)) => {
            merge_two(Merge::Unique, Val::Array(higher), Val::Array(lower))
        }
        (_, higher, _) => higher,
    }
}

impl Evaluator<'_> {
    fn hiera_config(&mut self, layer: Option<&str>) -> Option<Result<Config, String>> {
        let key = layer.map(str::to_owned);
        if let Some(config) = self.hiera.configs.get(&key) {
            return config.clone();
        }
        let config = self
            .loader()
            .hiera_config(layer)
            .map(|file| file.and_then(parse_config));
        self.hiera.configs.insert(key, config.clone());
        config
    }

    fn hiera_data(
        &mut self,
        layer: Option<&str>,
        path: &str,
        format: DataFormat,
    ) -> Option<DataFile> {
        let key = (layer.map(str::to_owned), path.to_owned());
        if let Some(data) = self.hiera.data.get(&key) {
            return data.clone();
        }
        let data = self
            .loader()
            .hiera_data(layer, path, format)
            .map(|file| file.map(|file| (file.name, Val::from_catalog(&file.value))));
        self.hiera.data.insert(key, data.clone());
        data
    }

    /// A hierarchy path with `%{...}` replaced by facts and top-scope variables; `None`
    /// when it cannot be made (reported).
    fn interpolate_path(&mut self, path: &str, span: Span) -> Option<String> {
        match self.hiera_interpolate(path, span) {
            Ok(Val::Str(text)) => Some(text),
            Ok(other) => Some(other.to_interpolated()),
            Err(()) => None,
        }
    }

    /// Replaces `%{...}` in `text`: `%{facts.os.family}`, `%{::var}`, `%{var}`,
    /// `%{scope('var')}`, `%{lookup('key')}`, `%{hiera('key')}`, `%{alias('key')}`
    /// (the whole string: the value itself, of any type), `%{literal('%')}`. A variable
    /// that is not set is empty, as in Hiera.
    fn hiera_interpolate(&mut self, text: &str, span: Span) -> Result<Val, ()> {
        if !text.contains("%{") {
            return Ok(Val::Str(text.to_owned()));
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("%{") {
            out.push_str(&rest[..at]);
            let Some(end) = rest[at..].find('}') else {
                self.hiera_error(span, format!("`{text}`: `%{{` is not closed with `}}`"));
                return Err(());
            };
            let inner = rest[at + 2..at + end].trim();
            rest = &rest[at + end + 1..];
            let call = |name: &str| {
                inner
                    .strip_prefix(name)
                    .and_then(|args| args.trim().strip_prefix('('))
                    .and_then(|args| args.trim().strip_suffix(')'))
                    .map(|arg| arg.trim().trim_matches(['\'', '"']).to_owned())
            };
            if let Some(key) = call("alias") {
                if !out.is_empty() || !rest.is_empty() {
                    self.hiera_error(
                        span,
                        format!("`{text}`: `%{{alias(...)}}` must be the whole string"),
                    );
                    return Err(());
                }
                return match self.hiera_lookup(&key, None, span)? {
                    Some(value) => Ok(value),
                    None => {
                        self.hiera_error(
                            span,
                            format!("`%{{alias('{key}')}}`: no value for `{key}`"),
                        );
                        Err(())
                    }
                };
            }
            let value = if let Some(literal) = call("literal") {
                Val::Str(literal)
            } else if let Some(key) = call("lookup").or_else(|| call("hiera")) {
                match self.hiera_lookup(&key, None, span)? {
                    Some(value) => value,
                    None => {
                        self.hiera_error(
                            span,
                            format!("`%{{lookup('{key}')}}`: no value for `{key}`"),
                        );
                        return Err(());
                    }
                }
            } else {
                let name = call("scope").unwrap_or_else(|| inner.to_owned());
                let name = name.trim_start_matches("::");
                let mut segments = name.split('.');
                let first = segments.next().unwrap_or_default();
                let rest_path: Vec<&str> = segments.collect();
                self.top_variable(first)
                    .and_then(|value| dig(value, &rest_path))
                    .unwrap_or(Val::Undef)
            };
            out.push_str(&value.to_interpolated());
        }
        out.push_str(rest);
        Ok(Val::Str(out))
    }

    /// Interpolates every string in a value from data.
    fn hiera_interpolate_value(&mut self, value: Val, span: Span) -> Result<Val, ()> {
        Ok(match value {
            Val::Str(text) => self.hiera_interpolate(&text, span)?,
            Val::Array(items) => Val::Array(
                items
                    .into_iter()
                    .map(|item| self.hiera_interpolate_value(item, span))
                    .collect::<Result<_, _>>()?,
            ),
            Val::Hash(entries) => Val::Hash(
                entries
                    .into_iter()
                    .map(|(key, value)| Ok((key, self.hiera_interpolate_value(value, span)?)))
                    .collect::<Result<_, _>>()?,
            ),
            other => other,
        })
    }

    fn hiera_error(&mut self, span: Span, message: String) {
        self.report(
            crate::diagnostic::Severity::Error,
            DiagnosticCode::Hiera,
            span,
            message,
        )
        .help = Some("see docs/language.md, Hiera".into());
    }

    /// The layers that may hold `key`, with their configs: the environment's, then the
    /// module's that the key's namespace names.
    fn layers(&mut self, key: &str, span: Span) -> Result<Vec<(Option<String>, Config)>, ()> {
        let mut layers = Vec::new();
        let module = key
            .split_once("::")
            .map(|(module, _)| module.trim_start_matches(':').to_owned())
            .filter(|module| !module.is_empty());
        for layer in [None, module] {
            match self.hiera_config(layer.as_deref()) {
                None => {}
                Some(Ok(config)) => layers.push((layer, config)),
                Some(Err(why)) => {
                    self.hiera_error(span, why);
                    return Err(());
                }
            }
        }
        Ok(layers)
    }

    /// Every value of `name` (the first segment of a dotted key) in a layer's levels, the
    /// highest priority first, with the file each came from.
    fn layer_values(
        &mut self,
        layer: &Option<String>,
        config: &Config,
        name: &str,
        span: Span,
    ) -> Result<Vec<(String, Val)>, ()> {
        let mut found = Vec::new();
        for level in &config.levels {
            for path in &level.paths {
                let Some(path) = self.interpolate_path(path, span) else {
                    return Err(());
                };
                match self.hiera_data(layer.as_deref(), &path, level.format) {
                    None => {}
                    Some(Err(why)) => {
                        self.hiera_error(span, why);
                        return Err(());
                    }
                    Some(Ok((file, Val::Hash(entries)))) => {
                        if let Some(value) = Val::hash_get(&entries, &Val::Str(name.to_owned())) {
                            found.push((file, value.clone()));
                        }
                    }
                    Some(Ok((_, Val::Undef))) => {}
                    Some(Ok((file, _))) => {
                        self.hiera_error(span, format!("`{file}`: a data file is a hash of keys"));
                        return Err(());
                    }
                }
            }
        }
        Ok(found)
    }

    /// The `lookup_options` that apply to `key`: from the layer's data (all levels,
    /// merged), the exact key first, else the first regular expression key
    /// (`'^profile::.*'`) that matches.
    fn lookup_options(
        &mut self,
        key: &str,
        layers: &[(Option<String>, Config)],
        span: Span,
    ) -> Result<Vec<(Val, Val)>, ()> {
        let mut merged = Val::Hash(Vec::new());
        for (layer, config) in layers {
            for (_, options) in self.layer_values(layer, config, "lookup_options", span)? {
                merged = merge_two(Merge::Deep, merged, options);
            }
        }
        let Val::Hash(entries) = merged else {
            return Ok(Vec::new());
        };
        if let Some(Val::Hash(options)) = Val::hash_get(&entries, &Val::Str(key.to_owned())) {
            return Ok(options.clone());
        }
        for (pattern, options) in &entries {
            if let (Val::Str(pattern), Val::Hash(options)) = (pattern, options)
                && pattern.starts_with('^')
                && self
                    .regex(pattern, span)
                    .is_some_and(|regex| regex.is_match(key))
            {
                return Ok(options.clone());
            }
        }
        Ok(Vec::new())
    }

    /// Looks `key` up in Hiera: `Ok(None)` when no level has it; `Err` when something
    /// was reported.
    pub(crate) fn hiera_lookup(
        &mut self,
        key: &str,
        merge: Option<Merge>,
        span: Span,
    ) -> Result<Option<Val>, ()> {
        let key = key.trim_start_matches("::");
        if self.hiera.stack.iter().any(|outer| outer == key) {
            let chain = format!("{} → {key}", self.hiera.stack.join(" → "));
            self.hiera_error(
                span,
                format!("the data of `{key}` looks itself up: {chain}"),
            );
            return Err(());
        }
        if self.hiera.stack.len() >= MAX_NESTED_LOOKUPS {
            self.hiera_error(
                span,
                format!("lookups in data nest more than {MAX_NESTED_LOOKUPS} deep (the limit)"),
            );
            return Err(());
        }
        let layers = self.layers(key, span)?;
        if layers.is_empty() {
            return Ok(None);
        }
        self.hiera.stack.push(key.to_owned());
        let result = self.lookup_in(key, merge, &layers, span);
        self.hiera.stack.pop();
        result
    }

    fn lookup_in(
        &mut self,
        key: &str,
        merge: Option<Merge>,
        layers: &[(Option<String>, Config)],
        span: Span,
    ) -> Result<Option<Val>, ()> {
        let options = self.lookup_options(key, layers, span)?;
        let strategy = match merge {
            Some(merge) => merge,
            None => match Merge::parse(text_of(&options, "merge").unwrap_or(&Val::Undef)) {
                Ok(merge) => merge.unwrap_or(Merge::First),
                Err(why) => {
                    self.hiera_error(span, format!("lookup_options of `{key}`: {why}"));
                    return Err(());
                }
            },
        };
        let mut segments = key.split('.');
        let name = segments.next().unwrap_or_default();
        let path: Vec<&str> = segments.collect();
        let mut result: Option<Val> = None;
        'layers: for (layer, config) in layers {
            // A module's data answers only for its own namespace.
            if let Some(module) = layer
                && !name.starts_with(&format!("{module}::"))
            {
                continue;
            }
            for (_, value) in self.layer_values(layer, config, name, span)? {
                let Some(value) = dig(value, &path) else {
                    continue;
                };
                let value = self.hiera_interpolate_value(value, span)?;
                result = Some(match result {
                    None => value,
                    Some(higher) => merge_two(strategy, higher, value),
                });
                if strategy == Merge::First {
                    break 'layers;
                }
            }
        }
        // `unique` always gives an array.
        if strategy == Merge::Unique
            && let Some(value) = result.take()
        {
            result = Some(merge_two(Merge::Unique, Val::Array(Vec::new()), value));
        }
        let sensitive = match text_of(&options, "convert_to") {
            Some(Val::Str(to)) => to == "Sensitive",
            Some(Val::Array(to)) => to.first() == Some(&Val::Str("Sensitive".into())),
            _ => false,
        };
        Ok(result.map(|value| {
            if sensitive {
                Val::Sensitive(Box::new(value))
            } else {
                value
            }
        }))
    }
}
