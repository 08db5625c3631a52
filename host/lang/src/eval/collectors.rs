//! Collectors and realization: queries over the catalog's resources, virtual resources
//! realized, pending overrides and realizes applied between rounds.

use super::*;

impl Evaluator<'_> {
    pub(super) fn collector(&mut self, collector: &Collector, span: Span) -> CollectorId {
        if self.kind_of(&collector.type_name).is_none() {
            self.unknown_type(&collector.type_name, span);
        }
        let query = match &collector.query {
            Some(query) => self.compile_query(query),
            None => CQuery::All,
        };
        let ops = self.eval_ops(&collector.ops, true, "a collector");
        self.collectors.push(CollectorState {
            type_name: collector.type_name.clone(),
            exported: collector.exported,
            query,
            ops,
            matched: HashSet::new(),
            matched_list: Vec::new(),
            span,
            fetched: false,
        });
        CollectorId::new(self.collectors.len() - 1)
    }

    pub(super) fn compile_query(&mut self, query: &Query) -> CQuery {
        match query {
            Query::And(a, b) => CQuery::And(
                Box::new(self.compile_query(a)),
                Box::new(self.compile_query(b)),
            ),
            Query::Or(a, b) => CQuery::Or(
                Box::new(self.compile_query(a)),
                Box::new(self.compile_query(b)),
            ),
            Query::Compare {
                attribute,
                equal,
                value,
            } => CQuery::Compare {
                attribute: attribute.clone(),
                equal: *equal,
                value: self.eval(value),
            },
        }
    }

    pub(super) fn query_matches(&self, query: &CQuery, idx: ResourceId) -> bool {
        match query {
            CQuery::All => true,
            CQuery::And(a, b) => self.query_matches(a, idx) && self.query_matches(b, idx),
            CQuery::Or(a, b) => self.query_matches(a, idx) || self.query_matches(b, idx),
            CQuery::Compare {
                attribute,
                equal,
                value,
            } => {
                let res = &self.resources[idx];
                let found = match attribute.as_str() {
                    "title" => value.equals(&Val::Str(res.title.clone())),
                    "tag" => match value {
                        Val::Str(wanted) => self
                            .tags_of(idx)
                            .iter()
                            .any(|tag| Val::str_equals(wanted, tag)),
                        _ => false,
                    },
                    name => match res.attr(name).map(|attr| &attr.value) {
                        Some(Val::Array(items)) => items.iter().any(|item| value.equals(item)),
                        Some(Val::Undef) | None => false,
                        Some(other) => value.equals(other),
                    },
                };
                found == *equal
            }
        }
    }

    pub(super) fn run_collector(&mut self, collector_idx: CollectorId) -> bool {
        let type_name = self.collectors[collector_idx].type_name.clone();
        if self.collectors[collector_idx].exported && !self.collectors[collector_idx].fetched {
            self.collectors[collector_idx].fetched = true;
            self.collects_exports = true;
            self.collect_foreign(collector_idx);
        }
        let candidates = self.by_type.get(&type_name).cloned().unwrap_or_default();
        // Every round looks at every candidate again: many collectors over many
        // resources is work.
        let span = self.collectors[collector_idx].span;
        if !self.count_work(candidates.len() as u64, span) {
            return false;
        }
        let mut progress = false;
        for idx in candidates {
            let state = &self.collectors[collector_idx];
            if state.matched.contains(&idx) {
                continue;
            }
            if state.exported && !self.resources[idx].exported {
                continue;
            }
            if !self.query_matches(&self.collectors[collector_idx].query, idx) {
                continue;
            }
            let state = &mut self.collectors[collector_idx];
            state.matched.insert(idx);
            state.matched_list.push(idx);
            let ops = state.ops.clone();
            self.realize(idx);
            self.apply_override(idx, &ops, None, true);
            progress = true;
        }
        progress
    }

    pub(super) fn realize(&mut self, idx: ResourceId) {
        let res = &mut self.resources[idx];
        if res.status != Status::Realized {
            res.status = Status::Realized;
            if matches!(res.kind, Kind::Define(_)) && !res.evaluated {
                self.pending_defines.push_back(idx);
            }
        }
    }

    // ---- classes and defined types ----

    pub(super) fn apply_pending_realizes(&mut self) -> bool {
        let pending = std::mem::take(&mut self.realizes);
        let mut progress = false;
        for (key, span) in pending {
            match self.index.get(&key).copied() {
                Some(idx) => {
                    self.realize(idx);
                    progress = true;
                }
                None => self.realizes.push((key, span)),
            }
        }
        progress
    }

    pub(super) fn apply_pending_overrides(&mut self) -> bool {
        let pending = std::mem::take(&mut self.overrides);
        let mut progress = false;
        for pending in pending {
            match self.index.get(&pending.target).copied() {
                Some(idx) => {
                    self.apply_override(idx, &pending.ops, pending.class_name.as_deref(), false);
                    progress = true;
                }
                None => self.overrides.push(pending),
            }
        }
        progress
    }

    // ---- functions ----
}
