//! The resource graph: relationships from metaparameters and catalog edges, the
//! application order, and cycle detection.
//!
//! Order is topological, ties broken by catalog order (Puppet's `ordering = manifest`),
//! so a run is deterministic. A cycle is an error that names every resource on it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use wconverge_catalog::DiagnosticCode;
use wconverge_catalog::{Catalog, EdgeKind, Problem, ResourceRef};

/// One end of a relationship a type implies: a resource by its catalog index, when the
/// one who found the relationship knows it, or by its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    At(usize),
    Named(ResourceRef),
}

/// Resources (by catalog index) and the ordering edges between them.
#[derive(Debug)]
pub struct Graph {
    references: Vec<ResourceRef>,
    /// `successors[a]` holds `(b, kind)` for every edge `a -> b`.
    successors: Vec<Vec<(usize, EdgeKind)>>,
    predecessors: Vec<Vec<usize>>,
    order: Vec<usize>,
    /// `positions[idx]`: where catalog index `idx` is in `order`.
    positions: Vec<usize>,
}

impl Graph {
    /// Builds the graph of a catalog whose resources are unique. Every relationship must
    /// name a resource of the catalog; any cycle is reported in full. `implied` are the
    /// relationships the types imply (a file requires its directory and its owner, Puppet's
    /// autorequire), `(required, requiring)`: each is added unless the manifest already
    /// orders the two resources the other way, or either end is not in the catalog.
    pub fn build(catalog: &Catalog, implied: &[(End, End)]) -> Result<Graph, Vec<Problem>> {
        let references: Vec<ResourceRef> = catalog
            .resources
            .iter()
            .map(|resource| resource.reference())
            .collect();
        // Resources by reference, made only when something names one: a catalog without
        // relationships (its files ordered by the directories they imply, by index) hashes
        // no reference at all.
        let by_reference: std::cell::OnceCell<HashMap<&ResourceRef, usize>> =
            std::cell::OnceCell::new();
        let index = || {
            by_reference.get_or_init(|| {
                references
                    .iter()
                    .enumerate()
                    .map(|(idx, reference)| (reference, idx))
                    .collect()
            })
        };
        let n_resources = references.len();
        let mut successors: Vec<Vec<(usize, EdgeKind)>> = vec![Vec::new(); n_resources];
        let mut problems = Vec::new();
        let mut add = |from: usize, to: usize, kind: EdgeKind| {
            match successors[from]
                .iter_mut()
                .find(|(existing, _)| *existing == to)
            {
                // A notify edge subsumes a plain ordering edge between the same pair.
                Some((_, existing)) => {
                    if kind == EdgeKind::Notify {
                        *existing = EdgeKind::Notify;
                    }
                }
                None => successors[from].push((to, kind)),
            }
        };
        for (idx, resource) in catalog.resources.iter().enumerate() {
            let metaparams = &resource.metaparams;
            let relationships = [
                ("require", &metaparams.require, false, EdgeKind::Before),
                ("before", &metaparams.before, true, EdgeKind::Before),
                ("notify", &metaparams.notify, true, EdgeKind::Notify),
                ("subscribe", &metaparams.subscribe, false, EdgeKind::Notify),
            ];
            for (metaparameter, targets, outgoing, kind) in relationships {
                for target in targets {
                    match index().get(target) {
                        Some(&other) if outgoing => add(idx, other, kind),
                        Some(&other) => add(other, idx, kind),
                        None => problems.push(
                            Problem::of(
                                resource,
                                DiagnosticCode::UnknownReference,
                                format!(
                                    "`{metaparameter}` names {target}, which is not in the catalog"
                                ),
                            )
                            .with_help(
                                "declare that resource, or fix the reference's type and title",
                            ),
                        ),
                    }
                }
            }
        }
        for edge in &catalog.edges {
            let index = index();
            let ends = (index.get(&edge.source), index.get(&edge.target));
            match ends {
                (Some(&from), Some(&to)) => add(from, to, edge.kind),
                _ => {
                    let missing = if ends.0.is_none() {
                        &edge.source
                    } else {
                        &edge.target
                    };
                    problems.push(Problem {
                        code: DiagnosticCode::UnknownReference,
                        resource: None,
                        location: edge.declared.clone(),
                        message: format!(
                            "the relationship {} {} {} names {missing}, which is not in the catalog",
                            edge.source,
                            if edge.kind == EdgeKind::Notify { "~>" } else { "->" },
                            edge.target
                        ),
                        help: Some("declare that resource, or fix the reference".to_owned()),
                    });
                }
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let at = |end: &End| match end {
            End::At(idx) => (*idx < n_resources).then_some(*idx),
            End::Named(reference) => index().get(reference).copied(),
        };
        for (required, requiring) in implied {
            if let (Some(from), Some(to)) = (at(required), at(requiring))
                && from != to
                && !successors[to].iter().any(|(next, _)| *next == from)
                && !successors[from].iter().any(|(next, _)| *next == to)
            {
                successors[from].push((to, EdgeKind::Before));
            }
        }
        let mut predecessors = vec![Vec::new(); n_resources];
        for (from, targets) in successors.iter().enumerate() {
            for (to, _) in targets {
                predecessors[*to].push(from);
            }
        }
        let mut graph = Graph {
            references,
            successors,
            predecessors,
            order: Vec::new(),
            positions: Vec::new(),
        };
        graph.order = graph.topological_order().map_err(|cycles| {
            cycles
                .into_iter()
                .map(|cycle| {
                    let first = cycle[0];
                    let path: Vec<String> = cycle
                        .iter()
                        .chain(std::iter::once(&first))
                        .map(|idx| graph.references[*idx].to_string())
                        .collect();
                    let resource = &catalog.resources[first];
                    Problem::of(
                        resource,
                        DiagnosticCode::DependencyCycle,
                        format!("dependency cycle: {}", path.join(" -> ")),
                    )
                    .with_help("remove one of these relationships; nothing was applied")
                })
                .collect::<Vec<_>>()
        })?;
        graph.positions = vec![0; graph.order.len()];
        for (position, &idx) in graph.order.iter().enumerate() {
            graph.positions[idx] = position;
        }
        Ok(graph)
    }

    /// Kahn's algorithm with a min-heap on catalog index; on failure, one cycle per
    /// strongly connected component that has one.
    fn topological_order(&self) -> Result<Vec<usize>, Vec<Vec<usize>>> {
        let n_resources = self.references.len();
        let mut in_degree: Vec<usize> = self.predecessors.iter().map(Vec::len).collect();
        let mut ready: BinaryHeap<Reverse<usize>> = in_degree
            .iter()
            .enumerate()
            .filter(|(_, degree)| **degree == 0)
            .map(|(idx, _)| Reverse(idx))
            .collect();
        let mut order = Vec::with_capacity(n_resources);
        while let Some(Reverse(idx)) = ready.pop() {
            order.push(idx);
            for (next, _) in &self.successors[idx] {
                in_degree[*next] -= 1;
                if in_degree[*next] == 0 {
                    ready.push(Reverse(*next));
                }
            }
        }
        if order.len() == n_resources {
            return Ok(order);
        }
        let stuck: Vec<bool> = in_degree.iter().map(|degree| *degree > 0).collect();
        Err(self.cycles_among(&stuck))
    }

    /// One simple cycle in each strongly connected component of the stuck nodes.
    fn cycles_among(&self, stuck: &[bool]) -> Vec<Vec<usize>> {
        let components = self.strongly_connected(stuck);
        let mut cycles = Vec::new();
        for component in components {
            let in_component: HashMap<usize, ()> = component.iter().map(|idx| (*idx, ())).collect();
            let start = *component.iter().min().expect("components are not empty");
            let is_self_loop = self.successors[start].iter().any(|(to, _)| *to == start);
            if component.len() == 1 && !is_self_loop {
                continue;
            }
            // Walk inside the component until a node repeats; within a strongly
            // connected component every node has a successor in it.
            let mut path = vec![start];
            let mut position: HashMap<usize, usize> = HashMap::from([(start, 0)]);
            let mut current = start;
            loop {
                let next = self.successors[current]
                    .iter()
                    .map(|(to, _)| *to)
                    .filter(|to| in_component.contains_key(to))
                    .min()
                    .expect("a node in a cycle has a successor in its component");
                if let Some(&at) = position.get(&next) {
                    cycles.push(path[at..].to_vec());
                    break;
                }
                position.insert(next, path.len());
                path.push(next);
                current = next;
            }
        }
        cycles.sort();
        cycles
    }

    /// Tarjan's algorithm, iterative so a long chain cannot overflow the stack.
    fn strongly_connected(&self, stuck: &[bool]) -> Vec<Vec<usize>> {
        let n_resources = self.references.len();
        let mut index_of = vec![usize::MAX; n_resources];
        let mut low = vec![0; n_resources];
        let mut on_stack = vec![false; n_resources];
        let mut stack = Vec::new();
        let mut components = Vec::new();
        let mut next_index = 0;
        for root in (0..n_resources).filter(|idx| stuck[*idx]) {
            if index_of[root] != usize::MAX {
                continue;
            }
            let mut work: Vec<(usize, usize)> = vec![(root, 0)];
            while let Some(&mut (node, ref mut edge_idx)) = work.last_mut() {
                if *edge_idx == 0 && index_of[node] == usize::MAX {
                    index_of[node] = next_index;
                    low[node] = next_index;
                    next_index += 1;
                    stack.push(node);
                    on_stack[node] = true;
                }
                let successors = &self.successors[node];
                if *edge_idx < successors.len() {
                    let next = successors[*edge_idx].0;
                    *edge_idx += 1;
                    if !stuck[next] {
                        continue;
                    }
                    if index_of[next] == usize::MAX {
                        work.push((next, 0));
                    } else if on_stack[next] {
                        low[node] = low[node].min(index_of[next]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[node]);
                }
                if low[node] == index_of[node] {
                    let mut component = Vec::new();
                    while let Some(member) = stack.pop() {
                        on_stack[member] = false;
                        component.push(member);
                        if member == node {
                            break;
                        }
                    }
                    components.push(component);
                }
            }
        }
        components
    }

    /// Catalog indices in application order.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Where catalog index `idx` is in the application order.
    pub fn position(&self, idx: usize) -> usize {
        self.positions[idx]
    }

    /// Resources that must be applied before `idx`.
    pub fn predecessors(&self, idx: usize) -> &[usize] {
        &self.predecessors[idx]
    }

    /// Resources after `idx`, with the kind of each edge.
    pub fn successors(&self, idx: usize) -> &[(usize, EdgeKind)] {
        &self.successors[idx]
    }

    pub fn reference(&self, idx: usize) -> &ResourceRef {
        &self.references[idx]
    }

    pub fn len(&self) -> usize {
        self.references.len()
    }

    pub fn is_empty(&self) -> bool {
        self.references.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(json_resources: &str, json_edges: &str) -> Catalog {
        Catalog::from_json(&format!(
            r#"{{"format_version": 1, "resources": [{json_resources}], "edges": [{json_edges}]}}"#
        ))
        .expect("valid catalog")
    }

    fn order_of(catalog: &Catalog) -> Vec<String> {
        let graph = Graph::build(catalog, &[]).expect("no cycle");
        graph
            .order()
            .iter()
            .map(|idx| graph.reference(*idx).title.clone())
            .collect()
    }

    #[test]
    fn ties_are_broken_by_catalog_order() {
        let catalog = catalog(
            r#"{"type": "notify", "title": "c"},
               {"type": "notify", "title": "a", "metaparams": {"require": "Notify[b]"}},
               {"type": "notify", "title": "b"}"#,
            "",
        );
        assert_eq!(order_of(&catalog), vec!["c", "b", "a"]);
    }

    #[test]
    fn all_four_relationships_and_edges_order() {
        let catalog = catalog(
            r#"{"type": "notify", "title": "last", "metaparams": {"subscribe": ["Notify[third]"]}},
               {"type": "notify", "title": "third"},
               {"type": "notify", "title": "second", "metaparams": {"before": "Notify[third]"}},
               {"type": "notify", "title": "first", "metaparams": {"notify": "Notify[second]"}}"#,
            r#"{"source": "Notify[first]", "target": "Notify[last]", "kind": "before"}"#,
        );
        assert_eq!(order_of(&catalog), vec!["first", "second", "third", "last"]);
    }

    #[test]
    fn a_cycle_is_printed_whole() {
        let catalog = catalog(
            r#"{"type": "file", "title": "a", "metaparams": {"before": "Exec[b]"}},
               {"type": "exec", "title": "b", "metaparams": {"before": "File[a]"}},
               {"type": "notify", "title": "free"}"#,
            "",
        );
        let problems = Graph::build(&catalog, &[]).expect_err("cycle");
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].message,
            "dependency cycle: File[a] -> Exec[b] -> File[a]"
        );
    }

    #[test]
    fn a_self_loop_and_a_missing_target_are_problems() {
        let looped = catalog(
            r#"{"type": "notify", "title": "me", "metaparams": {"require": "Notify[me]"}}"#,
            "",
        );
        assert_eq!(
            Graph::build(&looped, &[]).expect_err("self loop")[0].message,
            "dependency cycle: Notify[me] -> Notify[me]"
        );
        let dangling = catalog(
            r#"{"type": "notify", "title": "me", "metaparams": {"require": "Notify[ghost]"}}"#,
            "",
        );
        assert_eq!(
            Graph::build(&dangling, &[]).expect_err("missing")[0].message,
            "`require` names Notify[ghost], which is not in the catalog"
        );
    }

    #[test]
    fn a_long_chain_orders_without_recursion() {
        let n = 20_000;
        let resources: Vec<String> = (0..n)
            .map(|idx| {
                if idx + 1 < n {
                    format!(
                        r#"{{"type": "notify", "title": "{idx}", "metaparams": {{"require": "Notify[{}]"}}}}"#,
                        idx + 1
                    )
                } else {
                    format!(
                        r#"{{"type": "notify", "title": "{idx}", "metaparams": {{"require": "Notify[0]"}}}}"#
                    )
                }
            })
            .collect();
        let problems =
            Graph::build(&catalog(&resources.join(","), ""), &[]).expect_err("one big cycle");
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0]
                .message
                .starts_with("dependency cycle: Notify[0] -> Notify[19999]")
        );
    }
}
