//! Exported resources across nodes: a `<<| |>>` collector realizes the exports of
//! other nodes from the store (asked once per collector, its query evaluated in the
//! database), and the compile hands the store this node's own exports.

use super::{
    Attr, CQuery, CollectorId, DiagnosticExt, Evaluator, Foreign, Kind, Op, Res, ResourceId, Status,
};
use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::Span;
use crate::eval::value::Val;
use wconverge_catalog as catalog;

impl Evaluator<'_> {
    /// Asks the store for the exports the collector matches and declares each one this
    /// compile does not have yet, realized, as another node exported it.
    pub(super) fn collect_foreign(&mut self, collector_idx: CollectorId) {
        let span = self.collectors[collector_idx].span;
        let type_name = self.collectors[collector_idx].type_name.clone();
        let Some(query) = self.export_query(&self.collectors[collector_idx].query) else {
            self.error(
                DiagnosticCode::BadExportQuery,
                span,
                "this collector's query compares with a value the store cannot match (a \
                 regular expression, a data type or `default`)",
            )
            .help = Some("compare with strings, numbers, booleans, arrays or hashes".into());
            return;
        };
        let collected = match self.exports.collect(&type_name, &query, self.node) {
            Ok(collected) => collected,
            Err(why) => {
                self.error(
                    DiagnosticCode::StoreUnavailable,
                    span,
                    format!("cannot collect the exported resources of other nodes: {why}"),
                )
                .help = Some(
                    "a collection that could not ask the store would silently miss resources; \
                     make the store reachable (`--store`, or the config file's `store`) and \
                     compile again"
                        .into(),
                );
                return;
            }
        };
        let Some(kind) = self.kind_of(&type_name) else {
            // Reported where the collector was made.
            return;
        };
        for collected in collected {
            self.declare_foreign(collected, kind, span);
        }
    }

    fn declare_foreign(&mut self, collected: catalog::Collected, kind: Kind, span: Span) {
        let catalog::Collected { node, export } = collected;
        let key = (export.type_name.to_lowercase(), export.title.clone());
        if let Some(&existing) = self.index.get(&key) {
            // Found by an earlier collector: the same resource.
            if self.resources[existing]
                .foreign
                .as_ref()
                .is_some_and(|foreign| foreign.node == node)
            {
                return;
            }
            let first = self.resources[existing].span;
            let reference = self.resources[existing].reference();
            let from = match &self.resources[existing].foreign {
                Some(foreign) => format!("node `{}` exports it too", foreign.node),
                None => "this node declares it".to_owned(),
            };
            self.error(
                DiagnosticCode::DuplicateExport,
                span,
                format!(
                    "`{reference}`, exported by node `{node}`{}, is collected here, and {from}",
                    export
                        .source
                        .as_ref()
                        .map(|at| format!(" at {at}"))
                        .unwrap_or_default()
                ),
            )
            .with_related_mut(first, "the other one")
            .help = Some(
                "a resource is declared once per catalog (Puppet's \"duplicate declaration\"): \
                 give the exports distinct titles, or narrow the collector's query"
                    .into(),
            );
            return;
        }
        let mut attrs = Vec::with_capacity(export.attributes.0.len());
        for (name, value) in export.attributes.0 {
            // wconverge never stores these in an export: whatever wrote them into the
            // store was not a compile, and they would run code (a lazy value, a guard)
            // or order this node's resources (a relationship) on another node's word.
            if catalog::Lazy::within(&value) || catalog::METAPARAMETERS.contains(&name.as_str()) {
                self.error(
                    DiagnosticCode::BadExport,
                    span,
                    format!(
                        "`{}`, exported by node `{node}`, holds {}, which no compile exports; \
                         it is refused",
                        Val::reference(&key.0, &key.1).to_display(),
                        if catalog::Lazy::within(&value) {
                            format!("a lazy value in `{name}`")
                        } else {
                            format!("the metaparameter `{name}`")
                        }
                    ),
                )
                .help = Some(
                    "the store's exports were written by something other than `wconverge \
                     compile`: find out what, then have that node compile again"
                        .into(),
                );
                return;
            }
            let op = Op {
                name: name.as_str().into(),
                value: Val::from_catalog(&value),
                span,
                append: false,
            };
            if self.check_op(&key.0, kind, &op) {
                attrs.push(Attr {
                    name: op.name,
                    value: op.value,
                    span,
                    from_default: false,
                });
            }
        }
        let order = self.next_order();
        let idx = ResourceId::new(self.resources.len());
        self.resources.push(Res {
            type_name: key.0.clone(),
            title: key.1.clone(),
            kind,
            status: Status::Realized,
            attrs,
            span,
            container: None,
            declared_in: None,
            order,
            function_tags: Vec::new(),
            evaluated: false,
            depth: 0,
            // Another collector of exports may match it too; it is never exported again
            // (see `make_exports`).
            exported: true,
            horizon: u32::MAX,
            below_node: false,
            foreign: Some(Box::new(Foreign {
                node,
                tags: export.tags,
                source: export.source,
            })),
        });
        self.index_by_type(&key.0, idx);
        self.index.insert(key, idx);
        if matches!(kind, Kind::Define(_)) {
            self.pending_defines.push_back(idx);
        }
    }

    /// The collector's query as the store evaluates it; `None` if a value cannot be
    /// matched there.
    fn export_query(&self, query: &CQuery) -> Option<catalog::ExportQuery> {
        Some(match query {
            CQuery::All => catalog::ExportQuery::All,
            CQuery::And(a, b) => catalog::ExportQuery::And(
                Box::new(self.export_query(a)?),
                Box::new(self.export_query(b)?),
            ),
            CQuery::Or(a, b) => catalog::ExportQuery::Or(
                Box::new(self.export_query(a)?),
                Box::new(self.export_query(b)?),
            ),
            CQuery::Compare {
                attribute,
                equal,
                value,
            } => catalog::ExportQuery::Compare {
                attribute: attribute.clone(),
                equal: *equal,
                value: match value {
                    Val::Regex(_) | Val::Type(_) | Val::Default | Val::Lazy(_) => return None,
                    Val::Ref {
                        type_name,
                        title: Some(title),
                    } => catalog::Value::String(Val::reference(type_name, title).to_display()),
                    other => other.to_catalog().ok()?,
                },
            },
        })
    }

    /// This node's exported resources, as the store keeps them: every resource
    /// declared with `@@` here (not those collected from other nodes), with its tags
    /// and attributes. Relationships stay behind: they name resources of this node.
    pub(super) fn make_exports(&mut self) {
        let mut exports = Vec::new();
        for idx in ResourceId::below(self.resources.len()) {
            let res = &self.resources[idx];
            if !res.exported || res.foreign.is_some() || matches!(res.kind, Kind::Class(_)) {
                continue;
            }
            let in_catalog = res.status == Status::Realized;
            let mut attributes = catalog::Attributes(Vec::with_capacity(res.attrs.len()));
            let mut refused = Vec::new();
            for attr in &res.attrs {
                if attr.value == Val::Undef
                    || super::RELATIONSHIP_METAPARAMETERS.contains(&&*attr.name)
                    || &*attr.name == "tag"
                {
                    continue;
                }
                if catalog::METAPARAMETERS.contains(&&*attr.name) {
                    refused.push((
                        attr.span,
                        format!(
                            "an exported resource cannot carry `{}`: it would act on the node \
                             that collects it (a guard would run a command there)",
                            attr.name
                        ),
                    ));
                    continue;
                }
                match attr.value.to_catalog() {
                    Ok(value) if catalog::Lazy::within(&value) => refused.push((
                        attr.span,
                        format!(
                            "`{}` of an exported resource is `lazy`: it would be evaluated on \
                             the node that collects it, with that node's attributes",
                            attr.name
                        ),
                    )),
                    Ok(value) => attributes.set(&attr.name, value),
                    // A resource in the catalog has it reported when the catalog is made.
                    Err(message) if !in_catalog => refused.push((
                        attr.span,
                        format!(
                            "attribute `{}` of an exported resource: {message}",
                            attr.name
                        ),
                    )),
                    Err(_) => {}
                }
            }
            for (span, message) in refused {
                self.error(DiagnosticCode::BadExport, span, message).help = Some(
                    "export values known at compile time, with no metaparameter but `tag`; put \
                     guards and relationships on the collecting node's side"
                        .into(),
                );
            }
            let res = &self.resources[idx];
            let export = catalog::Export {
                type_name: res.type_name.clone(),
                title: res.title.clone(),
                tags: self.tags_of(idx),
                attributes,
                source: Some(self.location(res.span)),
            };
            exports.push(export);
        }
        self.exported = exports;
    }

    /// The tags another node gave a resource this compile collected, added to `tags`.
    pub(super) fn foreign_tags(&self, idx: ResourceId, tags: &mut Vec<String>) {
        if let Some(foreign) = &self.resources[idx].foreign {
            for tag in &foreign.tags {
                super::catalog_output::push_tag(tag, tags);
            }
        }
    }

    /// Where a collected resource was declared: on the node that exported it.
    pub(super) fn foreign_source(&self, idx: ResourceId) -> Option<catalog::SourceLocation> {
        let foreign = self.resources[idx].foreign.as_ref()?;
        let mut source = foreign.source.clone().unwrap_or(catalog::SourceLocation {
            file: String::new(),
            line: 0,
            column: None,
        });
        source.file = format!("node {}: {}", foreign.node, source.file);
        Some(source)
    }
}
