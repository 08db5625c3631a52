//! The end of a compile: references resolved, classes and defined type instances
//! expanded to the resources they contain, relationships turned into edges, and the
//! realized resources written into the catalog in manifest order.

use super::{
    DiagnosticExt, EdgeRequest, Evaluator, Kind, NODE_BLOCK, Operand, RELATIONSHIP_METAPARAMETERS,
    ResourceId, Status,
};
use crate::diagnostic::DiagnosticCode;
use crate::diagnostic::Span;
use crate::eval::value::{Val, flatten_into};
use crate::syntax::RelOp;
use std::collections::{HashMap, HashSet};
use wconverge_catalog::{self as catalog, EdgeKind, ResourceRef};

impl Evaluator<'_> {
    fn bridge_error(&mut self, error: BridgeError) {
        match error {
            BridgeError::TooMany {
                empty,
                n_pairs,
                span,
            } => {
                let reference = self.resources[empty].reference();
                self.error(DiagnosticCode::EmptyContainerOrdering, span, format!("ordering through `{reference}`, which contains no resource, relates {n_pairs} pairs of resources (more than {MAX_BRIDGED_PAIRS})"))
                    .help = Some(format!("give `{reference}` a resource (a `notify`, say) that the ordering can pass through, or relate the resources directly"));
            }
            BridgeError::Cycle { empty, leaf, span } => {
                let reference = self.resources[empty].reference();
                let leaf = self.resources[leaf].reference();
                self.error(DiagnosticCode::Cycle, span, format!("`{leaf}` is ordered both before and after `{reference}`, which contains no resource: a cycle"))
                    .help = Some("remove one of the two relationships".into());
            }
        }
    }

    fn container_noop(&self, idx: ResourceId) -> bool {
        let mut current = self.resources[idx].container;
        let mut steps = 0;
        while let Some(container_idx) = current {
            steps += 1;
            if steps > self.resources.len() {
                break;
            }
            let container = &self.resources[container_idx];
            if let Some(attr) = container.attr("noop")
                && attr.value != Val::Undef
            {
                return attr.value == Val::Bool(true);
            }
            current = container.container;
        }
        false
    }

    pub(super) fn tags_of(&self, idx: ResourceId) -> Vec<String> {
        let mut tags: Vec<String> = Vec::new();
        let res = &self.resources[idx];
        push_tag(&res.type_name, &mut tags);
        if let Some(attr) = res.attr("tag") {
            each_tag(&attr.value, &mut |tag| push_tag(tag, &mut tags));
        }
        self.foreign_tags(idx, &mut tags);
        self.container_tags(res.container, &mut tags);
        tags
    }

    /// The tags a class or defined type instance and those containing it give what they
    /// contain (their names, their `tag` attributes, what `tag()` added), and the main
    /// scope's, added to `tags`: what `tagged()` asks about.
    pub(super) fn container_tags(&self, start: Option<ResourceId>, tags: &mut Vec<String>) {
        let mut current = start;
        let mut steps = 0;
        while let Some(container_idx) = current {
            steps += 1;
            if steps > self.resources.len() {
                break;
            }
            let container = &self.resources[container_idx];
            let name = if container.kind == Kind::Plugin {
                break;
            } else if matches!(container.kind, Kind::Class(_)) {
                &container.title
            } else {
                &container.type_name
            };
            push_tag(name, tags);
            if name.contains("::") {
                for segment in name.split("::") {
                    push_tag(segment, tags);
                }
            }
            if let Some(attr) = container.attr("tag") {
                each_tag(&attr.value, &mut |tag| push_tag(tag, tags));
            }
            for tag in &container.function_tags {
                push_tag(tag, tags);
            }
            current = container.container;
        }
        for tag in &self.main_tags {
            push_tag(tag, tags);
        }
    }

    pub(super) fn location(&self, span: Span) -> catalog::SourceLocation {
        let source = self.source_of(span.file);
        let (line, column) =
            self.line_starts[span.file as usize].line_column(&source.text, span.start);
        catalog::SourceLocation {
            file: source.name.clone(),
            line,
            column: Some(column),
        }
    }

    /// The realized plugin resources a reference stands for: itself, or everything a
    /// class or defined type instance contains.
    fn leaves(
        &self,
        idx: ResourceId,
        children: &HashMap<ResourceId, Vec<ResourceId>>,
        out: &mut Vec<ResourceId>,
    ) {
        let mut stack = vec![idx];
        let mut seen = HashSet::new();
        while let Some(current) = stack.pop() {
            if !seen.insert(current) {
                continue;
            }
            let res = &self.resources[current];
            if res.status != Status::Realized {
                continue;
            }
            match res.kind {
                Kind::Plugin => out.push(current),
                _ => {
                    if let Some(kids) = children.get(&current) {
                        stack.extend(kids.iter().rev());
                    }
                }
            }
        }
    }

    fn resolve_ref(
        &mut self,
        key: &(String, String),
        span: Span,
        what: &str,
    ) -> Option<ResourceId> {
        let reference = Val::reference(&key.0, &key.1).to_display();
        match self.index.get(key).copied() {
            Some(idx) if self.resources[idx].status == Status::Realized => Some(idx),
            Some(idx) => {
                let declared = self.resources[idx].span;
                self.error(
                    DiagnosticCode::VirtualReference,
                    span,
                    format!("{what} `{reference}`, which is virtual and never realized"),
                )
                .with_related_mut(declared, "declared virtual here")
                .help = Some(format!(
                    "realize it with `realize({reference})` or a collector"
                ));
                None
            }
            None => {
                self.error(
                    DiagnosticCode::UnknownReference,
                    span,
                    format!("{what} `{reference}`, which is not declared"),
                )
                .help = Some("declare the resource, or check the type and title for typos".into());
                None
            }
        }
    }

    pub(super) fn finish(&mut self) -> catalog::Catalog {
        // Overrides and `realize` calls whose target never appeared.
        for pending in std::mem::take(&mut self.overrides) {
            let reference = Val::reference(&pending.target.0, &pending.target.1).to_display();
            self.error(
                DiagnosticCode::UnknownReference,
                pending.span,
                format!("override of `{reference}`, which is not declared"),
            )
            .help = Some("declare the resource, or check the type and title for typos".into());
        }
        // The generation rounds realized every reference that appeared; what is left
        // never did.
        for ((type_name, title), span) in std::mem::take(&mut self.realizes) {
            let reference = Val::reference(&type_name, &title).to_display();
            self.error(
                DiagnosticCode::UnknownReference,
                span,
                format!("`realize` of `{reference}`, which is not declared"),
            );
        }
        let mut children: HashMap<ResourceId, Vec<ResourceId>> = HashMap::new();
        for (idx, res) in ResourceId::below(self.resources.len()).zip(&self.resources) {
            if let Some(container) = res.container {
                children.entry(container).or_default().push(idx);
            }
        }
        // Every relationship, first as a request between sets of resources; emitted
        // once all are known, so that ordering between sets can be reduced.
        let mut requests: Vec<EdgeRequest> = Vec::new();
        // Relationship expressions.
        for relation in std::mem::take(&mut self.relations) {
            let lhs = self.operand_leaves(&relation.lhs, relation.span, &children);
            let rhs = self.operand_leaves(&relation.rhs, relation.span, &children);
            let ((sources, empty_sources), (targets, empty_targets), notify) = match relation.op {
                RelOp::Before => (lhs, rhs, false),
                RelOp::Notify => (lhs, rhs, true),
                RelOp::Require => (rhs, lhs, false),
                RelOp::Subscribe => (rhs, lhs, true),
            };
            requests.push(EdgeRequest {
                sources,
                targets,
                notify,
                span: relation.span,
                empty_sources,
                empty_targets,
            });
        }
        // Relationship metaparameters.
        let mut metaparam_refs: HashMap<ResourceId, Vec<(&'static str, ResourceId)>> =
            HashMap::new();
        for idx in ResourceId::below(self.resources.len()) {
            if self.resources[idx].status != Status::Realized {
                continue;
            }
            for &metaparam in RELATIONSHIP_METAPARAMETERS {
                let Some(attr) = self.resources[idx].attr(metaparam).cloned() else {
                    continue;
                };
                for key in self.reference_values(&attr.value, attr.span, metaparam) {
                    let Some(target) =
                        self.resolve_ref(&key, attr.span, &format!("`{metaparam}` refers to"))
                    else {
                        continue;
                    };
                    let both_plugins = self.resources[idx].kind == Kind::Plugin
                        && self.resources[target].kind == Kind::Plugin;
                    if both_plugins {
                        metaparam_refs
                            .entry(idx)
                            .or_default()
                            .push((metaparam, target));
                        continue;
                    }
                    let own = self.side(&[idx], &children);
                    let other = self.side(&[target], &children);
                    let ((sources, empty_sources), (targets, empty_targets), notify) =
                        match metaparam {
                            "require" => (other, own, false),
                            "subscribe" => (other, own, true),
                            "before" => (own, other, false),
                            _ => (own, other, true),
                        };
                    requests.push(EdgeRequest {
                        sources,
                        targets,
                        notify,
                        span: attr.span,
                        empty_sources,
                        empty_targets,
                    });
                }
            }
        }
        // This node's exports, before the catalog takes the attributes.
        self.make_exports();
        // The edges and the catalog's resources are made from `self.resources` alone:
        // what only the evaluation needed goes first, and they reuse its memory.
        drop(children);
        self.release_evaluation();
        if let Err(error) = bridge_empty_containers(&mut requests) {
            self.bridge_error(error);
        }
        let (edges, overflow) = self.emit_edges(&requests, &metaparam_refs);
        if let Some(span) = overflow {
            self.error(
                DiagnosticCode::EdgeLimit,
                span,
                format!(
                    "the relationships make more than {} edges (the limit); this one went past it",
                    super::MAX_EDGES
                ),
            )
            .help = Some(
                "a notification between two large sets relates every pair; notify a class or a \
                 single resource instead"
                    .into(),
            );
        }
        drop(requests);
        // The resources, in manifest order.
        let mut order: Vec<ResourceId> = ResourceId::below(self.resources.len())
            .filter(|&idx| {
                self.resources[idx].status == Status::Realized
                    && self.resources[idx].kind == Kind::Plugin
            })
            .collect();
        order.sort_by(|&a, &b| self.resources[a].order.cmp(&self.resources[b].order));
        let mut resources = Vec::with_capacity(order.len());
        for idx in order {
            resources
                .push(self.catalog_resource(idx, metaparam_refs.remove(&idx).unwrap_or_default()));
        }
        catalog::Catalog {
            format_version: catalog::FORMAT_VERSION,
            node: Some(self.node.to_owned()),
            resources,
            edges,
            node_attributes: self.node_attributes_for_catalog(),
            types: self.declared_types.clone(),
        }
    }

    /// Frees what only the evaluation needed: the indices of resources, the scopes and
    /// their variables, collectors, compiled regular expressions and templates.
    fn release_evaluation(&mut self) {
        self.index = HashMap::new();
        self.aliases = HashMap::new();
        self.by_type = HashMap::new();
        self.scopes = Vec::new();
        self.class_scopes = HashMap::new();
        self.collectors = Vec::new();
        self.regexes = HashMap::new();
        self.captures = Vec::new();
        self.templates = HashMap::new();
        self.type_aliases = HashMap::new();
    }

    /// Turns relationship requests into catalog edges.
    ///
    /// Ordering between two sets (`Class['a'] -> Class['b']`) would be every pair, which
    /// grows as the product of the sizes; but `before` is transitive, so it is enough to
    /// order the last resources of the first set (those no other member of the set
    /// must follow) before the first resources of the second. The engine orders exactly
    /// as the full product would. Notifications are not transitive and keep every pair.
    fn emit_edges(
        &self,
        requests: &[EdgeRequest],
        metaparam_refs: &HashMap<ResourceId, Vec<(&'static str, ResourceId)>>,
    ) -> (Vec<catalog::Edge>, Option<Span>) {
        // Orderings between single resources, which every set reduction may rely on: as
        // sorted pairs (a manifest of 50,000 resources has tens of thousands).
        let mut successors: Vec<(ResourceId, ResourceId)> = Vec::new();
        let mut predecessors: Vec<(ResourceId, ResourceId)> = Vec::new();
        let mut link = |from: ResourceId, to: ResourceId| {
            successors.push((from, to));
            predecessors.push((to, from));
        };
        for (&idx, refs) in metaparam_refs {
            for &(metaparam, target) in refs {
                match metaparam {
                    "require" | "subscribe" => link(target, idx),
                    _ => link(idx, target),
                }
            }
        }
        for request in requests {
            if let ([source], [target]) = (request.sources.as_slice(), request.targets.as_slice()) {
                link(*source, *target);
            }
        }
        successors.sort_unstable();
        predecessors.sort_unstable();
        // The members of `set` with no successor (or, `reverse`, no predecessor) in it.
        let ends = |set: &[ResourceId], reverse: bool| -> Vec<ResourceId> {
            if set.len() < 2 {
                return set.to_vec();
            }
            let members: HashSet<ResourceId> = set.iter().copied().collect();
            let neighbours = if reverse { &predecessors } else { &successors };
            let ends: Vec<ResourceId> = set
                .iter()
                .copied()
                .filter(|&idx| {
                    let from = neighbours.partition_point(|&(first, _)| first < idx);
                    !neighbours[from..]
                        .iter()
                        .take_while(|&&(first, _)| first == idx)
                        .any(|&(_, next)| next != idx && members.contains(&next))
                })
                .collect();
            // A set ordered in a cycle has no end; keep it whole (the cycle is
            // reported when the graph is built).
            if ends.is_empty() { set.to_vec() } else { ends }
        };
        let mut edges = Vec::new();
        let mut seen: HashSet<(ResourceId, ResourceId, bool)> = HashSet::new();
        let mut locations = HashMap::new();
        for request in requests {
            let (sources, targets) = if request.notify {
                (request.sources.clone(), request.targets.clone())
            } else {
                (ends(&request.sources, false), ends(&request.targets, true))
            };
            let declared = locations
                .entry(request.span)
                .or_insert_with(|| self.location(request.span))
                .clone();
            for &source in &sources {
                for &target in &targets {
                    if source == target || !seen.insert((source, target, request.notify)) {
                        continue;
                    }
                    if edges.len() >= super::MAX_EDGES {
                        return (edges, Some(request.span));
                    }
                    let (s, t) = (&self.resources[source], &self.resources[target]);
                    edges.push(catalog::Edge {
                        source: ResourceRef::new(&s.type_name, &s.title),
                        target: ResourceRef::new(&t.type_name, &t.title),
                        kind: if request.notify {
                            EdgeKind::Notify
                        } else {
                            EdgeKind::Before
                        },
                        declared: Some(declared.clone()),
                    });
                }
            }
        }
        (edges, None)
    }

    /// One side of a relationship: the resources it stands for, and the classes and
    /// defined type instances on it that contain none.
    fn operand_leaves(
        &mut self,
        operand: &Operand,
        span: Span,
        children: &HashMap<ResourceId, Vec<ResourceId>>,
    ) -> (Vec<ResourceId>, Vec<ResourceId>) {
        let members: Vec<ResourceId> = match operand {
            Operand::Refs(refs) => refs
                .iter()
                .filter_map(|key| self.resolve_ref(key, span, "the relationship refers to"))
                .collect(),
            Operand::Collector(collector_idx) => {
                self.collectors[*collector_idx].matched_list.clone()
            }
        };
        self.side(&members, children)
    }

    fn side(
        &self,
        members: &[ResourceId],
        children: &HashMap<ResourceId, Vec<ResourceId>>,
    ) -> (Vec<ResourceId>, Vec<ResourceId>) {
        let mut leaves = Vec::new();
        let mut empty = Vec::new();
        for &idx in members {
            let before = leaves.len();
            self.leaves(idx, children, &mut leaves);
            if leaves.len() == before && self.resources[idx].kind != Kind::Plugin {
                empty.push(idx);
            }
        }
        (leaves, empty)
    }

    /// The references a relationship metaparameter's value names.
    fn reference_values(
        &mut self,
        value: &Val,
        span: Span,
        metaparam: &str,
    ) -> Vec<(String, String)> {
        let mut flat = Vec::new();
        flatten_into(value.clone(), &mut flat);
        let mut out = Vec::new();
        for item in flat {
            match item {
                Val::Undef => {}
                Val::Ref {
                    type_name,
                    title: Some(title),
                } => out.push((type_name, title)),
                Val::Str(text) => match ResourceRef::parse(&text) {
                    Ok(reference) => {
                        let title = if reference.type_name == "class" {
                            reference.title.to_ascii_lowercase()
                        } else {
                            reference.title
                        };
                        out.push((reference.type_name, title));
                    }
                    Err(message) => {
                        self.error(
                            DiagnosticCode::BadReference,
                            span,
                            format!("`{metaparam}`: {message}"),
                        );
                    }
                },
                other => {
                    self.error(DiagnosticCode::BadReference, span, format!("`{metaparam}` takes resource references like `File['/etc/motd']`, not {} `{}`", other.type_name(), other.to_display()));
                }
            }
        }
        out
    }

    fn catalog_resource(
        &mut self,
        idx: ResourceId,
        refs: Vec<(&'static str, ResourceId)>,
    ) -> catalog::Resource {
        let mut metaparams = catalog::Metaparams::default();
        for (metaparam, target) in refs {
            let target = &self.resources[target];
            let reference = ResourceRef::new(&target.type_name, &target.title);
            let list = match metaparam {
                "require" => &mut metaparams.require,
                "before" => &mut metaparams.before,
                "notify" => &mut metaparams.notify,
                _ => &mut metaparams.subscribe,
            };
            if !list.contains(&reference) {
                list.push(reference);
            }
        }
        metaparams.tags = self.tags_of(idx);
        metaparams.tags.shrink_to_fit();
        // `noop => true` on a class or defined type instance covers what it contains,
        // unless a resource says otherwise.
        if self.resources[idx]
            .attr("noop")
            .is_none_or(|attr| attr.value == Val::Undef)
        {
            metaparams.noop = self.container_noop(idx);
        }
        // The attributes are not read again: move them into the catalog.
        let attrs = std::mem::take(&mut self.resources[idx].attrs);
        let mut attributes = catalog::Attributes(Vec::with_capacity(attrs.len()));
        let type_name = self.resources[idx].type_name.clone();
        for attr in attrs {
            if attr.value == Val::Undef
                || RELATIONSHIP_METAPARAMETERS.contains(&&*attr.name)
                || &*attr.name == "tag"
            {
                continue;
            }
            if let Some(at) = attr.value.node_write()
                && !(type_name == NODE_BLOCK && &*attr.name == "block")
            {
                self.error(
                    DiagnosticCode::NodeWriteAtRunTime,
                    at,
                    "only the `block` of a `node_block` may write node attributes during the run",
                )
                .help = Some(
                    "write at compile time, outside `lazy { }`, or declare `node_block { 'name': \
                     block => lazy { ... } }` ordered before the resources that read what it \
                     writes"
                        .into(),
                );
                continue;
            }
            match &*attr.name {
                "noop" => {
                    // Anything but a boolean was reported where it was given.
                    if let Val::Bool(noop) = attr.value {
                        metaparams.noop = noop;
                    }
                }
                "guard_interpreter" | "requires" | "provider" => match attr.value {
                    // Chef's `guard_interpreter :default`, written as Puppet's `default`.
                    Val::Default if &*attr.name == "guard_interpreter" => {
                        metaparams.guard_interpreter = Some("default".to_owned());
                    }
                    Val::Str(text) => match &*attr.name {
                        "requires" => metaparams.requires = Some(text),
                        "provider" => metaparams.provider = Some(text),
                        _ => metaparams.guard_interpreter = Some(text),
                    },
                    other => {
                        self.error(
                            DiagnosticCode::BadMetaparameter,
                            attr.span,
                            format!(
                                "`{}` must be a string, not {} `{}`",
                                attr.name,
                                other.type_name(),
                                other.to_display()
                            ),
                        );
                    }
                },
                "only_if" | "not_if" => match attr.value.to_catalog() {
                    Ok(value) => {
                        if &*attr.name == "only_if" {
                            metaparams.only_if = Some(value);
                        } else {
                            metaparams.not_if = Some(value);
                        }
                    }
                    Err(message) => {
                        self.error(
                            DiagnosticCode::BadValue,
                            attr.span,
                            format!("`{}`: {message}", attr.name),
                        );
                    }
                },
                _ => {
                    match attr.value.to_catalog() {
                        Ok(value) => attributes.set(&attr.name, value),
                        Err(message) => {
                            self.error(DiagnosticCode::BadValue, attr.span, format!("attribute `{}`: {message}", attr.name))
                            .help = Some("attribute values are strings, numbers, booleans, arrays and hashes".into());
                        }
                    }
                }
            }
        }
        let res = &self.resources[idx];
        catalog::Resource {
            type_name: res.type_name.clone(),
            title: res.title.clone(),
            attributes,
            metaparams: Box::new(metaparams),
            source: Some(
                self.foreign_source(idx)
                    .unwrap_or_else(|| self.location(res.span)),
            ),
            exported_by: res.foreign.as_ref().map(|foreign| foreign.node.clone()),
        }
    }
}

/// Each string of a `tag` value, arrays flattened (anything else is no tag).
fn each_tag(value: &Val, each: &mut dyn FnMut(&str)) {
    match value {
        Val::Str(tag) => each(tag),
        Val::Array(items) => {
            for item in items {
                each_tag(item, each);
            }
        }
        _ => {}
    }
}

/// Relationships through a class or defined type instance that contains nothing:
/// everything ordered before it is ordered before everything ordered after it. Each
/// empty container is bridged once; bridges made for one are seen by the next, so
/// chains of empty containers are crossed too.
fn bridge_empty_containers(requests: &mut Vec<EdgeRequest>) -> Result<(), BridgeError> {
    // Which requests (by their position in `requests`) end at, and start from, each
    // empty container.
    let mut into: HashMap<ResourceId, Vec<usize>> = HashMap::new();
    let mut out_of: HashMap<ResourceId, Vec<usize>> = HashMap::new();
    for (request_idx, request) in requests.iter().enumerate() {
        for &empty in &request.empty_targets {
            into.entry(empty).or_default().push(request_idx);
        }
        for &empty in &request.empty_sources {
            out_of.entry(empty).or_default().push(request_idx);
        }
    }
    let mut empties: Vec<ResourceId> = into.keys().chain(out_of.keys()).copied().collect();
    empties.sort_unstable();
    empties.dedup();
    for empty in empties {
        let befores = into.get(&empty).cloned().unwrap_or_default();
        let afters = out_of.get(&empty).cloned().unwrap_or_default();
        let n_pairs: usize = befores
            .iter()
            .map(|&b| requests[b].sources.len())
            .sum::<usize>()
            .saturating_mul(afters.iter().map(|&a| requests[a].targets.len()).sum());
        if n_pairs > MAX_BRIDGED_PAIRS {
            return Err(BridgeError::TooMany {
                empty,
                n_pairs,
                span: requests[afters[0]].span,
            });
        }
        for &before in &befores {
            for &after in &afters {
                let (first, second) = (&requests[before], &requests[after]);
                if let Some(&leaf) = first
                    .sources
                    .iter()
                    .find(|leaf| second.targets.contains(leaf))
                {
                    return Err(BridgeError::Cycle {
                        empty,
                        leaf,
                        span: second.span,
                    });
                }
                let bridge = EdgeRequest {
                    sources: first.sources.clone(),
                    targets: second.targets.clone(),
                    notify: first.notify && second.notify,
                    span: second.span,
                    empty_sources: first.empty_sources.clone(),
                    empty_targets: second.empty_targets.clone(),
                };
                // Bridges made here are seen by the empty containers still to come.
                let bridge_idx = requests.len();
                for &next in &bridge.empty_targets {
                    into.entry(next).or_default().push(bridge_idx);
                }
                for &next in &bridge.empty_sources {
                    out_of.entry(next).or_default().push(bridge_idx);
                }
                requests.push(bridge);
            }
        }
    }
    Ok(())
}

/// Ordering through one empty class or defined type instance relates every resource
/// before it to every resource after it; beyond this many pairs, the compile asks for a
/// resource in it instead (a catalog has no nodes that are not resources).
const MAX_BRIDGED_PAIRS: usize = 100_000;

enum BridgeError {
    TooMany {
        empty: ResourceId,
        n_pairs: usize,
        span: Span,
    },
    Cycle {
        empty: ResourceId,
        leaf: ResourceId,
        span: Span,
    },
}

pub(super) fn valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    chars
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// Adds a tag, lowercased, unless it is there.
pub(super) fn push_tag(tag: &str, tags: &mut Vec<String>) {
    // The tags are kept in lower case: one that is there already costs no copy.
    if !tags.iter().any(|kept| kept.eq_ignore_ascii_case(tag)) {
        tags.push(tag.to_ascii_lowercase());
    }
}
