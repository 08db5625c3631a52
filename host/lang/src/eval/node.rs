//! Node attributes (Facebook's Chef model, "Compile Time vs Run Time, and APIs"): set at
//! compile time with `$node.default[...] = v` or `$node.override[...] = v`, read with
//! `$node[...]`, and read (or, in a `node_block`, written) during the run by lazy values.
//!
//! Two layers of nested hashes with string keys; a read merges them key by key, the
//! override layer winning. The compile phase records every read and write, so that a
//! read whose value a later write changes is reported: the bug Facebook's document warns about.

use super::Evaluator;
use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::{Diagnostic, Severity, Span};
use crate::eval::value::Val;
use crate::syntax::{Expr, ExprKind, NodeLayer};
use std::borrow::Cow;
use wconverge_catalog::{NodeAttributes, NodeLayer as CatalogLayer, Value};

/// A value as a warning shows it: as the language displays it, `undef` by name, and
/// cut when long.
fn shown(value: &Value) -> String {
    const LONGEST: usize = 120;
    if *value == Value::Undef {
        return "undef".to_owned();
    }
    let text = Val::from_catalog(value).to_display();
    match text.char_indices().nth(LONGEST) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// How deep a value nests (a scalar is 1).
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, level + 1))),
            Value::Hash(entries) => {
                stack.extend(entries.iter().map(|(_, item)| (item, level + 1)));
            }
            Value::Sensitive(inner) => stack.push((inner, level + 1)),
            _ => {}
        }
    }
    deepest
}

/// The node's attributes during an evaluation.
#[derive(Debug, Clone)]
pub(crate) struct NodeState<'a> {
    /// Borrowed from the catalog during the run until something is written.
    attributes: Cow<'a, NodeAttributes>,
    /// Writes are allowed: at compile time, and during the run in a `node_block` body.
    pub(crate) writable: bool,
    /// Record reads for the stale-read warning (compile time only).
    record: bool,
    reads: Vec<Read>,
    writes: Vec<Write>,
    /// Orders reads and writes.
    seq: u32,
}

#[derive(Debug, Clone)]
struct Read {
    path: Vec<String>,
    seen: Value,
    span: Span,
    seq: u32,
}

#[derive(Debug, Clone)]
struct Write {
    layer: NodeLayer,
    path: Vec<String>,
    /// The value written, as a message shows it (sensitive values redacted).
    shown: String,
    span: Span,
    seq: u32,
}

impl<'a> NodeState<'a> {
    /// Empty layers, as a compile starts.
    pub(crate) fn compiling() -> NodeState<'a> {
        NodeState {
            attributes: Cow::Owned(NodeAttributes::default()),
            writable: true,
            record: true,
            reads: Vec::new(),
            writes: Vec::new(),
            seq: 0,
        }
    }

    /// The attributes of a catalog, for a lazy value evaluated during the run; nothing
    /// is copied unless the value writes.
    pub(crate) fn running(attributes: &'a NodeAttributes, writable: bool) -> NodeState<'a> {
        NodeState {
            attributes: Cow::Borrowed(attributes),
            writable,
            record: false,
            reads: Vec::new(),
            writes: Vec::new(),
            seq: 0,
        }
    }

    /// The attributes, if anything was written.
    pub(crate) fn into_written(self) -> Option<NodeAttributes> {
        match self.attributes {
            Cow::Owned(attributes) if !self.writes.is_empty() => Some(attributes),
            _ => None,
        }
    }

    /// Both layers as a catalog keeps them.
    pub(crate) fn to_catalog(&self) -> NodeAttributes {
        self.attributes.clone().into_owned()
    }

    /// What was written, in order: `$node.default['a'] = 1`.
    pub(crate) fn written(&self) -> Vec<String> {
        self.writes
            .iter()
            .map(|write| {
                format!(
                    "$node.{}{} = {}",
                    write.layer.keyword(),
                    show_path(&write.path),
                    write.shown
                )
            })
            .collect()
    }
}

/// `['a']['b']`, as a message shows a path.
pub(crate) fn show_path(path: &[String]) -> String {
    path.iter().map(|key| format!("['{key}']")).collect()
}

/// The layer under `$node.default[...]` or `$node.override[...]` when `expr` is such a
/// path (which only a write may use).
pub(crate) fn layer_root(expr: &Expr) -> Option<NodeLayer> {
    match &expr.kind {
        ExprKind::NodeLayer(layer) => Some(*layer),
        ExprKind::Access(target, _) => layer_root(target),
        _ => None,
    }
}

/// The keys of `$node[k1][k2]...` when `expr` is such a read, outermost last; `None`
/// when it is not rooted at `$node`.
pub(crate) fn read_keys(expr: &Expr) -> Option<Vec<&Expr>> {
    match &expr.kind {
        ExprKind::Var(name) if name == "node" => Some(Vec::new()),
        ExprKind::Access(target, keys) if keys.len() == 1 => {
            let mut path = read_keys(target)?;
            path.push(&keys[0]);
            Some(path)
        }
        _ => None,
    }
}

impl Evaluator<'_> {
    /// Evaluates the keys of a node attribute path being written: each must be a
    /// string.
    fn node_path(&mut self, keys: &[&Expr]) -> Option<Vec<String>> {
        let mut path = Vec::with_capacity(keys.len());
        for key in keys {
            match self.eval(key) {
                Val::Str(text) => path.push(text),
                other => {
                    self.error(
                        DiagnosticCode::NodeAttributeKey,
                        key.span,
                        format!(
                            "node attribute keys are strings, not {} `{}`",
                            other.type_name(),
                            other.to_display()
                        ),
                    )
                    .help = Some("quote the key: `$node['app']['port']`".into());
                    return None;
                }
            }
        }
        Some(path)
    }

    /// `$node[...]`: the merged value, `undef` for a missing key; recorded at compile
    /// time.
    pub(super) fn node_read(&mut self, keys: &[&Expr], span: Span) -> Val {
        // The string keys name the node attribute; from the first other key on (an
        // array index), the value read is indexed as any value is.
        let keys: Vec<(Val, Span)> = keys.iter().map(|key| (self.eval(key), key.span)).collect();
        let split = keys
            .iter()
            .position(|(key, _)| !matches!(key, Val::Str(_)))
            .unwrap_or(keys.len());
        let path: Vec<String> = keys[..split]
            .iter()
            .filter_map(|(key, _)| match key {
                Val::Str(text) => Some(text.clone()),
                _ => None,
            })
            .collect();
        let seen = self.attributes.attributes.get(&path);
        let mut value = Val::from_catalog(&seen);
        for (key, at) in &keys[split..] {
            value = match (&value, key) {
                (Val::Array(items), Val::Int(index)) => {
                    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                    let index = if *index < 0 { len + index } else { *index };
                    usize::try_from(index)
                        .ok()
                        .and_then(|index| items.get(index).cloned())
                        .unwrap_or(Val::Undef)
                }
                (Val::Hash(entries), key) => {
                    Val::hash_get(entries, key).cloned().unwrap_or(Val::Undef)
                }
                (Val::Undef, _) => Val::Undef,
                (other, key) => {
                    self.error(
                        DiagnosticCode::Access,
                        *at,
                        format!(
                            "cannot index {} `{}` with {} `{}`",
                            other.type_name(),
                            other.to_display(),
                            key.type_name(),
                            key.to_display()
                        ),
                    );
                    return Val::Undef;
                }
            };
        }
        if !self.charge_copy(&value, span) {
            return Val::Undef;
        }
        // One read per place and path is enough for the warning, and keeps a read in a
        // defined type instantiated many times from copying the value each time.
        if self.attributes.record
            && !self
                .attributes
                .reads
                .iter()
                .any(|read| read.span == span && read.path == path)
        {
            self.attributes.seq += 1;
            let seq = self.attributes.seq;
            self.attributes.reads.push(Read {
                path,
                seen,
                span,
                seq,
            });
        }
        value
    }

    /// `$node.default[...] = value` or `$node.override[...] = value`.
    pub(super) fn node_write(
        &mut self,
        layer: NodeLayer,
        keys: &[Expr],
        value: &Expr,
        span: Span,
    ) -> Val {
        let keys: Vec<&Expr> = keys.iter().collect();
        let Some(path) = self.node_path(&keys) else {
            return Val::Undef;
        };
        let reads_before = self.attributes.reads.len();
        let value = self.eval(value);
        // `$node.default['pkgs'] = $node['pkgs'] + ['b']` reads what it replaces: that
        // read is not stale.
        let overlapping =
            |read: &Read| read.path.starts_with(&path) || path.starts_with(&read.path);
        let mut index = 0;
        self.attributes.reads.retain(|read| {
            index += 1;
            index <= reads_before || !overlapping(read)
        });
        if !self.attributes.writable {
            self.error(
                DiagnosticCode::NodeWriteAtRunTime,
                span,
                "node attributes are written at compile time, or during the run only in the \
                 `block` of a `node_block`",
            )
            .help = Some(
                "move the write out of `lazy { }`, or into a `node_block` ordered before the \
                 resources that read it"
                    .into(),
            );
            return Val::Undef;
        }
        if value.contains_lazy() {
            self.error(
                DiagnosticCode::NodeAttributeLazy,
                span,
                "a node attribute cannot hold a lazy value",
            )
            .help = Some(
                "store the plain value, and read it lazily where it is used: \
                 `lazy { $node['app']['version'] }`"
                    .into(),
            );
            return Val::Undef;
        }
        let stored = match value.to_catalog() {
            Ok(stored) => stored,
            Err(message) => {
                self.error(
                    DiagnosticCode::NodeAttributeValue,
                    span,
                    format!("a node attribute cannot hold this value: {message}"),
                );
                return Val::Undef;
            }
        };
        if path.len() + depth(&stored) > wconverge_catalog::MAX_DEPTH {
            self.error(
                DiagnosticCode::NodeAttributeValue,
                span,
                format!(
                    "this write nests deeper than {} levels (its path and its value), the most \
                     a catalog holds",
                    wconverge_catalog::MAX_DEPTH
                ),
            );
            return Val::Undef;
        }
        let shown = stored.display();
        let precedence = match layer {
            NodeLayer::Default => CatalogLayer::Default,
            NodeLayer::Override => CatalogLayer::Override,
        };
        if let Err(depth) = self
            .attributes
            .attributes
            .to_mut()
            .set(precedence, &path, stored)
        {
            let holder = &path[..depth];
            let held = Val::from_catalog(&self.attributes.attributes.get(holder));
            self.error(
                DiagnosticCode::NodeAttributeNotHash,
                span,
                format!(
                    "cannot write `$node{}`: `$node{}` holds {} `{}`, not a hash",
                    show_path(&path),
                    show_path(holder),
                    held.type_name(),
                    held.to_display()
                ),
            )
            .help = Some("write to a key of a hash, or replace the value itself".into());
            return Val::Undef;
        }
        self.attributes.seq += 1;
        let seq = self.attributes.seq;
        self.attributes.writes.push(Write {
            layer,
            path,
            shown,
            span,
            seq,
        });
        value
    }

    /// `$node.default` or `$node.override` read as a value.
    pub(super) fn node_layer_read(&mut self, layer: NodeLayer, span: Span) -> Val {
        let name = layer.keyword();
        self.error(
            DiagnosticCode::NodeLayerRead,
            span,
            format!("`$node.{name}` is for writing"),
        )
        .help = Some(format!(
            "write with `$node.{name}['key'] = value`; read the merged value with \
             `$node['key']`"
        ));
        Val::Undef
    }

    /// The catalog's node attributes: what the compile phase left.
    pub(super) fn node_attributes_for_catalog(&self) -> NodeAttributes {
        self.attributes.to_catalog()
    }

    /// A compile-time read whose value a later write changed: a warning naming both.
    pub(super) fn stale_reads(&mut self) {
        let mut warned: Vec<Span> = Vec::new();
        let reads = std::mem::take(&mut self.attributes.reads);
        for read in &reads {
            if warned.contains(&read.span) {
                continue;
            }
            let now = self.attributes.attributes.get(&read.path);
            if now == read.seen {
                continue;
            }
            let overlaps = |write: &&Write| {
                write.seq > read.seq
                    && (write.path.starts_with(&read.path) || read.path.starts_with(&write.path))
            };
            // The write that decided the value: the last in the override layer if that
            // layer holds the path, else the last in the default layer.
            let layer = if self.attributes.attributes.overridden(&read.path) {
                NodeLayer::Override
            } else {
                NodeLayer::Default
            };
            let writes = &self.attributes.writes;
            let Some(write) = writes
                .iter()
                .rev()
                .filter(overlaps)
                .find(|write| write.layer == layer)
                .or_else(|| writes.iter().rev().find(overlaps))
            else {
                continue;
            };
            warned.push(read.span);
            let path = show_path(&read.path);
            let mut diagnostic = Diagnostic::error(
                DiagnosticCode::StaleNodeRead,
                read.span,
                format!(
                    "`$node{path}` is read at compile time, when it is `{}`; a later write \
                     makes it `{}`",
                    shown(&read.seen),
                    shown(&now)
                ),
            )
            .with_severity(Severity::Warning)
            .with_label("read here, before the write")
            .with_help(format!(
                "read it during the run, when every write is done: `lazy {{ $node{path} }}` \
                 (a lazy attribute value, or a block guard instead of an `if`)"
            ));
            diagnostic
                .related
                .push((write.span, "written here, after the read".to_owned()));
            self.diagnostics.push(diagnostic);
        }
        self.attributes.reads = reads;
    }
}
