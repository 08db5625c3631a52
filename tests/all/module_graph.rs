//! The modules of each host crate point one way: the top-level modules of a crate and
//! the modules each names (`crate::NAME`, `use crate::{NAME, ...}`, outside its tests)
//! form a directed acyclic graph, but for the cycles listed here, each with why it is
//! one. `cargo test -p wconverge-cli --test all module_graph -- --nocapture` prints each
//! crate's graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The cycles that remain, each a crate, its modules and why. A cycle the code has
/// that is not here fails the test; one here the code no longer has fails it too, so
/// the list shrinks as cycles are broken.
const CYCLES: &[(&str, &[&str], &str)] = &[
    (
        "engine",
        &["ahead", "run"],
        "the guards evaluated ahead are those the run would evaluate for a resource, and \
         the run takes them when its turn comes: one step in two files",
    ),
    (
        "runtime",
        &["code", "files", "plugin", "previous", "replay", "state"],
        "a plugin's state is what its calls reach (files, replayed reads), and loading a \
         plugin compiles it and adapts the previous WIT version to it: to be split by \
         what a call holds and what a load holds",
    ),
];

/// The top-level modules of the crate at `src` (`NAME.rs` with `NAME/`, or `NAME/mod.rs`),
/// each with the text of its files outside their tests.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("src") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .expect("name")
            .to_owned();
        let is_file = path.extension().is_some_and(|extension| extension == "rs");
        if (is_file && (name == "lib" || name == "main" || name == "tests"))
            || (!is_file && !path.join("mod.rs").is_file())
        {
            continue;
        }
        let mut text = String::new();
        let mut files = Vec::new();
        if is_file {
            files.push(path.clone());
        }
        let dir = src.join(&name);
        if dir.is_dir() {
            collect(&dir, &mut files);
        }
        for file in files {
            // Tests may reach anything: a module's own, and those of its directory.
            if file.file_stem().is_some_and(|stem| stem == "tests")
                || file.components().any(|part| part.as_os_str() == "tests")
            {
                continue;
            }
            let source = std::fs::read_to_string(&file).expect("source");
            let code = source
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            text.push_str(code);
            text.push('\n');
        }
        modules.entry(name).or_insert(text);
    }
    modules
}

fn collect(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// The modules of `names` that `text` names: `crate::NAME`, and each `NAME` at the top
/// of a `use crate::{...}` group.
fn named(text: &str, names: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let word = |rest: &str| -> String {
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let name = word(item.trim_start());
                if names.contains(name.as_str()) {
                    found.insert(name);
                }
            }
        } else {
            let name = word(rest);
            if names.contains(name.as_str()) {
                found.insert(name);
            }
        }
    }
    found
}

/// The strongly connected components of more than one module (Tarjan's).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Walk<'e> {
        edges: &'e BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'e str, usize>,
        low: BTreeMap<&'e str, usize>,
        stack: Vec<&'e str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'e> Walk<'e> {
        fn visit(&mut self, node: &'e str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            for next in &self.edges[node] {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = BTreeSet::new();
                while let Some(top) = self.stack.pop() {
                    component.insert(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

#[test]
#[expect(
    clippy::print_stdout,
    reason = "each crate's graph is printed for whoever runs the test"
)]
fn the_modules_of_each_host_crate_point_one_way() {
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../host");
    let mut unexplained = Vec::new();
    let mut found_all = Vec::new();
    for entry in std::fs::read_dir(&host).expect("host") {
        let src = entry.expect("entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let krate = src
            .parent()
            .and_then(|dir| dir.file_name())
            .and_then(|name| name.to_str())
            .expect("crate")
            .to_owned();
        let modules = modules(&src);
        let names: BTreeSet<&str> = modules.keys().map(String::as_str).collect();
        let edges: BTreeMap<String, BTreeSet<String>> = modules
            .iter()
            .map(|(name, text)| {
                let mut to = named(text, &names);
                to.remove(name);
                (name.clone(), to)
            })
            .collect();
        println!("{krate}:");
        for (from, to) in &edges {
            if !to.is_empty() {
                println!(
                    "  {from} -> {}",
                    to.iter().cloned().collect::<Vec<_>>().join(", ")
                );
            }
        }
        for cycle in cycles(&edges) {
            let listed = CYCLES.iter().any(|(in_crate, modules, _)| {
                *in_crate == krate && modules.iter().copied().eq(cycle.iter().map(String::as_str))
            });
            if !listed {
                unexplained.push(format!("{krate}: {cycle:?}"));
            }
            found_all.push((krate.clone(), cycle));
        }
    }
    assert!(
        unexplained.is_empty(),
        "modules that name each other in a cycle: {unexplained:#?}; break the cycle (move \
         what both need into a module both can name), or list it in CYCLES with why"
    );
    for (krate, modules, _) in CYCLES {
        assert!(
            found_all.iter().any(|(in_crate, cycle)| in_crate == krate
                && modules.iter().copied().eq(cycle.iter().map(String::as_str))),
            "CYCLES lists {krate}: {modules:?}, which the code no longer has: remove it"
        );
    }
}

#[test]
fn a_cycle_is_found_and_a_chain_is_not() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            edges
                .entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned());
            edges.entry((*to).to_owned()).or_default();
        }
        edges
    };
    assert!(cycles(&edges(&[("a", "b"), ("b", "c")])).is_empty());
    let found = cycles(&edges(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].iter().map(String::as_str).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    let names: BTreeSet<&str> = ["walk", "state", "files"].into_iter().collect();
    assert_eq!(
        named(
            "use crate::{files::x, state};\nlet y = crate::walk::walk();",
            &names
        ),
        ["files", "state", "walk"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    );
}
