//! Unit tests of the whole front end: source text in, catalog JSON or diagnostics out.

use super::*;

mod conformance;

use conformance::*;

pub(crate) fn types() -> KnownTypes {
    let mut types = KnownTypes::new();
    types.insert(
        "file",
        [
            "path", "ensure", "content", "mode", "owner", "group", "backup",
        ],
    );
    types.insert(
        "exec",
        [
            "command",
            "cwd",
            "environment",
            "user",
            "group",
            "umask",
            "timeout",
            "returns",
            "creates",
            "refreshonly",
            "logoutput",
            "onlyif",
            "unless",
        ],
    );
    types.set_namevar("file", "path");
    types.set_namevar("exec", "command");
    types.insert("notify", ["message", "name"]);
    types
}

fn compile_one(text: &str) -> Compiled {
    compile(
        &[Source::new("test.wcv", text)],
        &CompileOptions::new("node1.example.com", &types()),
    )
}

#[test]
fn a_file_resource_compiles() {
    let compiled = compile_one("file { '/tmp/a': ensure => file, content => \"x${1 + 2}\" }\n");
    assert!(
        compiled.diagnostics.is_empty(),
        "{:?}",
        compiled.diagnostics
    );
    let catalog = compiled.catalog.expect("a catalog");
    assert_eq!(catalog.resources.len(), 1);
    assert_eq!(
        catalog.resources[0]
            .attributes
            .get("content")
            .and_then(|v| v.as_str()),
        Some("x3")
    );
}

#[test]
fn several_files_are_evaluated_in_order_and_report_their_own_names() {
    let sources = [
        Source::new(
            "a.wcv",
            "$base = '/srv'\nclass app { file { \"${::base}/app\": ensure => directory } }\n",
        ),
        Source::new("b.wcv", "include app\nnotify { 'x': bogus => 1 }\n"),
    ];
    let compiled = compile(&sources, &CompileOptions::new("n", &types()));
    let error = compiled
        .diagnostics
        .iter()
        .find(|d| d.is_error())
        .expect("an error");
    assert!(
        render(error, &sources).contains("--> b.wcv:2:15"),
        "{}",
        render(error, &sources)
    );
    let fixed = [sources[0].clone(), Source::new("b.wcv", "include app\n")];
    let catalog = compile(&fixed, &CompileOptions::new("n", &types()))
        .catalog
        .expect("a catalog");
    assert_eq!(catalog.resources[0].title, "/srv/app");
    assert_eq!(
        catalog.resources[0]
            .source
            .as_ref()
            .map(|s| s.file.as_str()),
        Some("a.wcv")
    );
}

#[test]
fn warnings_and_notices_do_not_stop_the_compile() {
    let compiled = compile_one("notice('hello', 1)\nwarning('careful')\nnotify { 'x': }\n");
    assert!(compiled.catalog.is_some());
    let severities: Vec<Severity> = compiled.diagnostics.iter().map(|d| d.severity).collect();
    assert_eq!(severities, [Severity::Notice, Severity::Warning]);
    assert_eq!(compiled.diagnostics[0].message, "hello 1");
}

#[test]
fn values_nested_through_variables_are_bounded_by_the_catalog_depth() {
    let mut text = String::from("$v0 = 'leaf'\n");
    for level in 1..=300 {
        text.push_str(&format!("$v{level} = [$v{}]\n", level - 1));
    }
    text.push_str("notify { 'deep': message => $v300 }\n");
    let error = first_error(&text);
    assert!(error.message.contains("deeper than 128"), "{error:?}");
}

#[test]
fn statement_calls_take_parenthesized_arguments_after_a_space() {
    let compiled = compile_one("notice ('spaced')\nnotice('tight')\ninclude(['nothing'][1, 0])\n");
    let messages: Vec<&str> = compiled
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(messages, ["spaced", "tight"]);
}

#[test]
fn long_operator_chains_are_an_error_not_a_stack_overflow() {
    for text in [
        format!("$x = 1{}\n", " + 1".repeat(100_000)),
        format!(
            "notify {{ 'a': }}\nNotify['a']{}\n",
            " -> Notify['a']".repeat(100_000)
        ),
        format!("$x = [[1]]{}\n", "[0]".repeat(100_000)),
        // Parentheses do not reset the count: the tree would still be this deep.
        format!(
            "$x = {}1{}\n",
            "(".repeat(8),
            &format!("{})", " + 1".repeat(9_999)).repeat(8)
        ),
    ] {
        let error = first_error(&text);
        assert!(error.message.contains("chained"), "{error:?}");
    }
    // Below the limit, long chains compile.
    let compiled = compile_one(&format!(
        "$x = 1{}\nnotify {{ \"${{x}}\": }}\n",
        " + 1".repeat(5_000)
    ));
    assert!(
        compiled.catalog.is_some(),
        "{:?}",
        compiled.diagnostics.first()
    );
}

#[test]
fn sorting_numbers_near_two_to_the_53_does_not_panic() {
    let numbers: Vec<String> = (0..30)
        .map(|i| {
            if i % 3 == 0 {
                "9007199254740992.0".to_owned()
            } else {
                format!("{}", 9_007_199_254_740_990_i64 + i % 7)
            }
        })
        .collect();
    let compiled = compile_one(&format!(
        "$s = sort([{}])\nnotify {{ \"${{s[0]}}\": }}\n",
        numbers.join(", ")
    ));
    assert!(
        compiled.catalog.is_some(),
        "{:?}",
        compiled.diagnostics.first()
    );
}

#[test]
fn a_failed_statement_does_not_leak_nesting_levels() {
    let mut text = "notify { 'a' }\n".repeat(60);
    text.push_str(&format!("$x = {}1{}\n", "[".repeat(45), "]".repeat(45)));
    let compiled = compile_one(&text);
    assert!(
        compiled
            .diagnostics
            .iter()
            .all(|d| d.code != crate::diagnostic::DiagnosticCode::NestingLimit),
        "{:?}",
        compiled.diagnostics.last()
    );
}

fn lazy(
    expression: &str,
    variables: Vec<(&str, wconverge_catalog::Value)>,
) -> wconverge_catalog::Lazy {
    wconverge_catalog::Lazy {
        expression: expression.to_owned(),
        variables: variables
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
        location: wconverge_catalog::SourceLocation {
            file: "site.wcv".to_owned(),
            line: 3,
            column: Some(12),
        },
    }
}

#[test]
fn a_lazy_value_sees_what_it_captured_qualified_names_too() {
    use wconverge_catalog::Value;
    let captured = lazy(
        "$app::port == 8443 and $::mode == 'strict' and $n + 1 == 3",
        vec![
            ("app::port", Value::Integer(8443)),
            ("::mode", "strict".into()),
            ("n", Value::Integer(2)),
        ],
    );
    assert_eq!(
        crate::evaluate_lazy_truth(
            &captured,
            &Default::default(),
            &wconverge_catalog::Value::Hash(Vec::new())
        ),
        Ok(true)
    );
    // The block's own variables live in a scope of their own.
    let local = lazy("[$x, $x = 2][1] == 2", vec![("x", Value::Integer(1))]);
    assert_eq!(
        crate::evaluate_lazy_truth(
            &local,
            &Default::default(),
            &wconverge_catalog::Value::Hash(Vec::new())
        ),
        Ok(true)
    );
    // A regular expression is no catalog value, but it is true.
    assert_eq!(
        crate::evaluate_lazy_truth(
            &lazy("/x/", vec![]),
            &Default::default(),
            &wconverge_catalog::Value::Hash(Vec::new())
        ),
        Ok(true)
    );
    assert_eq!(
        crate::evaluate_lazy_truth(
            &lazy("undef", vec![]),
            &Default::default(),
            &wconverge_catalog::Value::Hash(Vec::new())
        ),
        Ok(false)
    );
}

#[test]
fn a_lazy_value_from_a_catalog_is_bounded_and_checked() {
    for expensive in [
        "1000000.reduce([]) |$m, $i| { [$m] } == 1",
        "1000.each |$a| { 1000.each |$b| { } } != 0",
        "24.reduce('x') |$m, $i| { \"${m}${m}\" } != ''",
    ] {
        let error = crate::evaluate_lazy_truth(
            &lazy(expensive, vec![]),
            &Default::default(),
            &wconverge_catalog::Value::Hash(Vec::new()),
        )
        .expect_err(expensive);
        assert!(
            error.starts_with(
                "the lazy block at site.wcv:3:12 failed: it did more work than a lazy value may"
            ),
            "{expensive}: {error}"
        );
    }
    for (refused, why) in [
        ("file { '/x': }", "contains a resource"),
        (
            "include('x')",
            "a function that changes or reads the catalog",
        ),
        ("lazy { true }", "a lazy value"),
        ("1 }  file { '/x': ", "must be one expression"),
    ] {
        let error = crate::check_lazy(&lazy(refused, vec![])).expect_err(refused);
        assert!(error.contains(why), "{refused}: {error}");
    }
}

/// Whether a lazy value reads `$facts` comes from its syntax tree, not its text: the run
/// gathers facts only for those that do.
#[test]
fn a_lazy_value_reads_facts_when_its_tree_names_them() {
    for (expression, reads) in [
        ("$facts['os']['family']", true),
        ("$facts['os']['family'] == 'debian'", true),
        ("[1, 2].map |$x| { $facts['n'] + $x }", true),
        ("'the facts are in'", false),
        ("$node['facts_seen']", false),
        ("$my_facts", false),
    ] {
        let lazy = lazy(expression, vec![("my_facts", 1.into())]);
        let used = crate::check_lazy(&lazy).unwrap_or_else(|error| panic!("{expression}: {error}"));
        assert_eq!(used.reads_facts, reads, "{expression}");
    }
}

#[test]
fn facts_are_a_top_scope_hash_of_record_lists() {
    use wconverge_catalog::Value;
    let facts = Value::Hash(vec![(
        "os".to_owned(),
        Value::Array(vec![Value::Hash(vec![(
            "family".to_owned(),
            "debian".into(),
        )])]),
    )]);
    let source = Source::new(
        "site.wcv",
        "class probe { notify { 'os': message => $facts['os'][0]['family'] } }\ninclude probe\n",
    );
    let mut types = KnownTypes::new();
    types.insert("notify", ["message"]);
    let compiled = crate::compile(&[source], &CompileOptions::new("n", &types).facts(&facts));
    let catalog = compiled.catalog.expect("compiles");
    assert_eq!(
        catalog.resources[0].attributes.get("message"),
        Some(&Value::String("debian".to_owned()))
    );
}

/// Modules in memory, as the CLI's loader finds them in a module path.
struct MapLoader(Vec<(&'static str, &'static str)>);

impl Loader for MapLoader {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn has_module(&self, module: &str) -> bool {
        self.0
            .iter()
            .any(|(path, _)| path.split('/').next() == Some(module))
    }

    fn manifest(&self, name: &str) -> Option<Result<Source, String>> {
        let (module, rest) = name.split_once("::").unwrap_or((name, "init"));
        let path = format!("{module}/manifests/{}.pp", rest.replace("::", "/"));
        if path == "secret/manifests/init.pp" {
            return Some(Err("cannot read it: permission denied".into()));
        }
        self.0
            .iter()
            .find(|(candidate, _)| *candidate == path)
            .map(|(_, text)| Ok(Source::new(path, *text)))
    }
}

#[test]
fn classes_and_defined_types_load_from_modules_as_puppet_s_autoloader() {
    let loader = MapLoader(vec![
        (
            "ntp/manifests/init.pp",
            "class ntp($servers = $ntp::params::servers) inherits ntp::params {\n  contain ntp::config\n}\n",
        ),
        (
            "ntp/manifests/params.pp",
            "class ntp::params { $servers = ['a'] }\n",
        ),
        (
            "ntp/manifests/config.pp",
            "class ntp::config inherits ntp {\n  ntp::server { $servers: }\n}\nnotify { 'stray': }\n",
        ),
        (
            "ntp/manifests/server.pp",
            "define ntp::server { notify { \"${module_name} ${title}\": } }\n",
        ),
        ("role/manifests/web.pp", "class role::web { include ntp }\n"),
        (
            "unused/manifests/init.pp",
            "class unused { this does not parse ((( }\n",
        ),
        ("secret/manifests/other.pp", ""),
    ]);
    // `role::web` is named only when the node's body runs: loaded then.
    let main = "$kind = 'web'\nnode default { include \"role::${kind}\" }\nnotify { \"top [${module_name}]\": }\n";
    let compiled = compile(
        &[Source::new("site.pp", main)],
        &CompileOptions::new("node1", &types()).modules(&loader),
    );
    let mut all = vec![Source::new("site.pp", main)];
    all.extend(compiled.loaded.iter().cloned());
    let rendered: Vec<String> = compiled
        .diagnostics
        .iter()
        .map(|diagnostic| render(diagnostic, &all))
        .collect();
    let catalog = compiled
        .catalog
        .unwrap_or_else(|| panic!("compiles: {rendered:?}"));
    let titles: Vec<&str> = catalog
        .resources
        .iter()
        .filter(|resource| resource.type_name == "notify")
        .map(|resource| resource.title.as_str())
        .collect();
    assert_eq!(titles, ["top []", "ntp a"]);
    // The stray statement of a module's file is a warning, not evaluated; the file that
    // does not parse was never loaded, as nothing names `unused`.
    assert_eq!(rendered.len(), 1, "{rendered:?}");
    assert!(
        rendered[0].contains("ntp/manifests/config.pp:4:1")
            && rendered[0].contains("not evaluated"),
        "{}",
        rendered[0]
    );
    let loaded: Vec<&str> = compiled
        .loaded
        .iter()
        .map(|source| source.name.as_str())
        .collect();
    assert!(!loaded.contains(&"unused/manifests/init.pp"), "{loaded:?}");

    let compiled = compile(
        &[Source::new(
            "site.pp",
            "include secret\ninclude ntp::nothing\n",
        )],
        &CompileOptions::new("node1", &types()).modules(&loader),
    );
    assert!(compiled.catalog.is_none());
    let messages: Vec<String> = compiled
        .diagnostics
        .iter()
        .map(|diagnostic| {
            format!(
                "{} | {}",
                diagnostic.message,
                diagnostic.help.clone().unwrap_or_default()
            )
        })
        .collect();
    assert!(
        messages[1].contains("class `secret`: cannot read it: permission denied"),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("`manifests/nothing.wcv` (or `manifests/nothing.pp`) of module `ntp`"),
        "{messages:?}"
    );
}

#[test]
fn facts_are_top_scope_variables_except_lists_of_records() {
    let facts = wconverge_catalog::Value::Hash(vec![
        (
            "osfamily".to_owned(),
            wconverge_catalog::Value::String("Debian".to_owned()),
        ),
        (
            "os".to_owned(),
            wconverge_catalog::Value::Hash(vec![(
                "family".to_owned(),
                wconverge_catalog::Value::String("Debian".to_owned()),
            )]),
        ),
        (
            "package".to_owned(),
            wconverge_catalog::Value::Array(Vec::new()),
        ),
    ]);
    let text = "notify { \"${::osfamily} ${osfamily} ${os['family']} ${facts['os']['family']} ${defined('$package')}\": }\n";
    let compiled = compile(
        &[Source::new("site.pp", text)],
        &CompileOptions::new("web1.example.com", &types()).facts(&facts),
    );
    let catalog = compiled
        .catalog
        .unwrap_or_else(|| panic!("{:?}", compiled.diagnostics));
    assert_eq!(
        catalog.resources[0].title,
        "Debian Debian Debian Debian false"
    );
}

/// Hiera's files in memory: each `(layer, path, JSON)`, the layer `""` the environment's.
struct HieraLoader(Vec<(&'static str, &'static str, &'static str)>);

impl HieraLoader {
    fn file(&self, layer: &str, path: &str) -> Option<Result<HieraFile, String>> {
        let (_, _, json) = self.0.iter().find(|(l, p, _)| *l == layer && *p == path)?;
        Some(
            serde_json::from_str::<wconverge_catalog::Value>(json)
                .map(|value| HieraFile {
                    name: format!("{layer}/{path}"),
                    value,
                })
                .map_err(|error| error.to_string()),
        )
    }
}

impl Loader for HieraLoader {
    fn is_empty(&self) -> bool {
        true
    }

    fn has_module(&self, _module: &str) -> bool {
        false
    }

    fn manifest(&self, _name: &str) -> Option<Result<Source, String>> {
        None
    }

    fn hiera_config(&self, module: Option<&str>) -> Option<Result<HieraFile, String>> {
        self.file(module.unwrap_or_default(), "hiera.yaml")
    }

    fn hiera_data(
        &self,
        module: Option<&str>,
        path: &str,
        _format: DataFormat,
    ) -> Option<Result<HieraFile, String>> {
        self.file(module.unwrap_or_default(), path)
    }
}

fn compile_with_hiera(loader: &HieraLoader, text: &str) -> (Option<Catalog>, Vec<String>) {
    let facts: wconverge_catalog::Value =
        serde_json::from_str(r#"{"os": {"family": "Debian"}, "osfamily": "Debian"}"#)
            .expect("facts");
    let compiled = compile(
        &[Source::new("site.pp", text)],
        &CompileOptions::new("web1.example.com", &types())
            .facts(&facts)
            .modules(loader),
    );
    let messages = compiled
        .diagnostics
        .iter()
        .map(|diagnostic| diagnostic.message.clone())
        .collect();
    (compiled.catalog, messages)
}

fn notify_titles(catalog: &Catalog) -> Vec<&str> {
    catalog
        .resources
        .iter()
        .filter(|resource| resource.type_name == "notify")
        .map(|resource| resource.title.as_str())
        .collect()
}

#[test]
fn hiera_looks_up_through_the_hierarchy_with_merges_options_and_class_parameters() {
    let loader = HieraLoader(vec![
        (
            "",
            "hiera.yaml",
            r#"{"version": 5, "defaults": {"datadir": "data"}, "hierarchy": [
                {"name": "node", "path": "nodes/%{trusted.certname}.yaml"},
                {"name": "os", "path": "os/%{facts.os.family}.yaml"},
                {"name": "common", "paths": ["common.yaml"]}]}"#,
        ),
        (
            "",
            "data/nodes/web1.example.com.yaml",
            r#"{"ntp::servers": ["node"], "list": ["n"], "h": {"a": {"x": 1}}}"#,
        ),
        (
            "",
            "data/os/Debian.yaml",
            r#"{"list": ["d", "n"], "h": {"a": {"y": 2}, "b": 3}, "ntp::service": "chrony"}"#,
        ),
        (
            "",
            "data/common.yaml",
            r#"{"lookup_options": {"list": {"merge": "unique"}, "^secret::.*": {"convert_to": "Sensitive"}},
                "list": ["c"], "h": {"a": {"x": 9, "z": 3}, "c": 4},
                "secret::token": "hunter2", "owner": "ops",
                "motd": "on %{::osfamily} by %{lookup('owner')}", "whole": "%{alias('list')}",
                "loop": "%{lookup('loop')}"}"#,
        ),
        ("ntp", "hiera.yaml", r#"{"version": 5}"#),
        (
            "ntp",
            "data/common.yaml",
            r#"{"ntp::service": "from-module", "ntp::package": "ntp", "owner": "not the module's key"}"#,
        ),
    ]);
    let manifest = r#"
class ntp($servers = ['default'], $service = 'ntpd', $package = 'none', $other = 'default') {
  notify { "ntp ${servers} ${service} ${package} ${other}": }
}
include ntp
notify { "first ${lookup('list', undef, 'first')} unique ${lookup('list')}": }
notify { "hash ${lookup('h', Hash, 'hash')} deep ${lookup('h', Hash, 'deep')}": }
notify { "secret ${lookup('secret::token')} motd ${lookup('motd')} whole ${lookup('whole')}": }
notify { "dig ${lookup('h.a.x')} default ${lookup('missing', { 'default_value' => 'dv' })} lambda ${lookup('missing') |$k| { "no ${k}" }}": }
"#;
    let (catalog, messages) = compile_with_hiera(&loader, manifest);
    let catalog = catalog.unwrap_or_else(|| panic!("{messages:?}"));
    assert_eq!(
        notify_titles(&catalog),
        [
            "ntp [node] chrony ntp default",
            "first [n] unique [n, d, c]",
            "hash {a => {x => 1}, b => 3, c => 4} deep {a => {x => 1, y => 2, z => 3}, b => 3, c => 4}",
            "secret Sensitive [value redacted] motd on Debian by ops whole [n, d, c]",
            "dig 1 default dv lambda no missing",
        ]
    );

    let (catalog, messages) = compile_with_hiera(
        &loader,
        "notify { lookup('nothing'): }\nnotify { lookup('loop'): }\n$x = hiera('owner')\n",
    );
    assert!(catalog.is_none());
    assert!(
        messages[0].contains("`lookup` found no value for `nothing`"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("the data of `loop` looks itself up: loop → loop"),
        "{messages:?}"
    );
    assert_eq!(messages[2], "`hiera()` is deprecated");

    // A failed lookup is one error, not also what was built from its value.
    let (catalog, messages) = compile_with_hiera(
        &loader,
        "$role = lookup('role')\ninclude \"role::${role}\"\nnotify { \"r-${role}\": }\n",
    );
    assert!(catalog.is_none());
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].contains("no value for `role`"), "{messages:?}");

    let bad = HieraLoader(vec![(
        "",
        "hiera.yaml",
        r#"{"version": 3, "hierarchy": []}"#,
    )]);
    let (catalog, messages) = compile_with_hiera(&bad, "notify { lookup('x'): }\n");
    assert!(catalog.is_none());
    assert!(
        messages[0].contains("version 3 is not supported"),
        "{messages:?}"
    );
}

#[test]
fn odd_templates_never_panic_and_every_span_is_inside_its_file() {
    let templates = [
        "",
        "<%",
        "%>",
        "<%-",
        "-%>",
        "<%=",
        "<%#",
        "<%%",
        "%%>",
        "<%= %>",
        "<% } %>",
        "<% { %>",
        "<%- | | -%>",
        "<% | $a | %><% | $b | %>",
        "é<%= 'ü' %>ß",
        "<%= $x",
        "a\n<%- -%>\n\nb",
        "<% |$x = | %>",
        "<%= [1,2][0] %><%= {a=>1} %>",
        "<%- |$a| -%>é",
        "<%= inline_epp('<%= 1 %>') %>",
    ];
    for template in templates {
        let text = format!(
            "notify {{ 'x': message => inline_epp('{}', {{ 'a' => 1 }}) }}\n",
            template.replace('\'', "\\'")
        );
        let sources = [Source::new("site.pp", text)];
        let compiled = compile(&sources, &CompileOptions::new("n", &types()));
        let mut all = sources.to_vec();
        all.extend(compiled.loaded.iter().cloned());
        for diagnostic in &compiled.diagnostics {
            let file = &all[diagnostic.span.file as usize];
            assert!(
                diagnostic.span.end as usize <= file.text.len(),
                "{template:?}: {diagnostic:?}"
            );
            render(diagnostic, &all);
        }
    }
}

/// Other nodes' exports, held in memory: answers as a store does, by evaluating the
/// query on each export (the store's own tests check it agrees with this).
struct Fleet(Vec<wconverge_catalog::Collected>);

impl Exports for Fleet {
    fn collect(
        &self,
        type_name: &str,
        query: &wconverge_catalog::ExportQuery,
        excluding: &str,
    ) -> Result<Vec<wconverge_catalog::Collected>, String> {
        Ok(self
            .0
            .iter()
            .filter(|collected| {
                collected.node != excluding
                    && collected.export.type_name == type_name
                    && query.matches(&collected.export)
            })
            .cloned()
            .collect())
    }
}

fn exported(
    node: &str,
    type_name: &str,
    title: &str,
    tags: &[&str],
) -> wconverge_catalog::Collected {
    wconverge_catalog::Collected {
        node: node.to_owned(),
        export: wconverge_catalog::Export {
            type_name: type_name.to_owned(),
            title: title.to_owned(),
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            attributes: wconverge_catalog::Attributes(vec![(
                "content".to_owned(),
                wconverge_catalog::Value::String(format!("from {node}\n")),
            )]),
            source: Some(wconverge_catalog::SourceLocation {
                file: "site.wcv".to_owned(),
                line: 7,
                column: None,
            }),
        },
    }
}

fn compile_in_fleet(text: &str, fleet: &dyn Exports) -> Compiled {
    compile(
        &[Source::new("test.wcv", text)],
        &CompileOptions::new("lb", &types()).exports(fleet),
    )
}

#[test]
fn exported_collectors_realize_other_nodes_exports_once() {
    let fleet = Fleet(vec![
        exported("web1", "file", "/lb/web1", &["file", "backend"]),
        exported("web2", "file", "/lb/web2", &["file", "backend"]),
        exported("web2", "file", "/lb/other", &["file"]),
        // Its own exports come from the compile, never from the store.
        exported("lb", "file", "/lb/stale", &["file", "backend"]),
    ]);
    let compiled = compile_in_fleet(
        "@@file { '/lb/self': content => 'x', tag => 'backend' }\n\
         File <<| tag == 'backend' |>> { mode => '0600' }\n\
         File <<| title == '/lb/web2' |>>\n",
        &fleet,
    );
    assert!(compiled.collects_exports);
    let catalog = compiled
        .catalog
        .unwrap_or_else(|| panic!("{:?}", compiled.diagnostics));
    let titles: Vec<&str> = catalog.resources.iter().map(|r| r.title.as_str()).collect();
    assert_eq!(titles, ["/lb/self", "/lb/web1", "/lb/web2"]);
    let web2 = &catalog.resources[2];
    assert_eq!(
        web2.attributes.get("mode").and_then(|v| v.as_str()),
        Some("0600"),
        "the collector's override applies to what it collects"
    );
    assert!(web2.metaparams.tags.contains(&"backend".to_owned()));
    assert_eq!(
        web2.source.as_ref().map(|at| at.file.as_str()),
        Some("node web2: site.wcv")
    );
    // What this node exports goes to the store; what it collected does not.
    let exports: Vec<&str> = compiled.exports.iter().map(|e| e.title.as_str()).collect();
    assert_eq!(exports, ["/lb/self"]);
    assert!(compiled.exports[0].tags.contains(&"backend".to_owned()));
}

#[test]
fn a_collected_export_that_clashes_is_an_error_naming_its_node() {
    let fleet = Fleet(vec![exported("web1", "file", "/lb/web1", &["file"])]);
    let compiled = compile_in_fleet(
        "file { '/lb/web1': content => 'mine' }\nFile <<| |>>\n",
        &fleet,
    );
    assert!(compiled.catalog.is_none());
    let message = &compiled.diagnostics[0].message;
    assert!(message.contains("exported by node `web1`"), "{message}");
    assert!(message.contains("this node declares it"), "{message}");
}

struct Unreachable;

impl Exports for Unreachable {
    fn collect(
        &self,
        _type_name: &str,
        _query: &wconverge_catalog::ExportQuery,
        _excluding: &str,
    ) -> Result<Vec<wconverge_catalog::Collected>, String> {
        Err("connection refused".to_owned())
    }
}

#[test]
fn a_store_that_cannot_answer_fails_the_collector_never_collects_nothing() {
    let compiled = compile_in_fleet(
        "file { '/a': content => 'x' }\nFile <<| |>>\n",
        &Unreachable,
    );
    assert!(compiled.catalog.is_none());
    let diagnostic = &compiled.diagnostics[0];
    assert_eq!(diagnostic.code.to_string(), "wcv::store-unavailable");
    assert!(diagnostic.message.contains("connection refused"));
    // A plain collector never asks the store.
    let plain = compile_in_fleet("file { '/a': content => 'x' }\nFile <| |>\n", &Unreachable);
    assert!(plain.catalog.is_some() && !plain.collects_exports);
}

#[test]
fn an_export_no_compile_would_make_is_refused() {
    let mut lazy = exported("web1", "file", "/lb/web1", &["file"]);
    lazy.export.attributes.0.push((
        "mode".to_owned(),
        wconverge_catalog::Value::Hash(vec![(
            wconverge_catalog::LAZY_KEY.to_owned(),
            wconverge_catalog::Value::Hash(vec![(
                "expression".to_owned(),
                wconverge_catalog::Value::String("'0777'".to_owned()),
            )]),
        )]),
    ));
    let mut ordered = exported("web2", "file", "/lb/web2", &["file"]);
    ordered.export.attributes.0.push((
        "before".to_owned(),
        wconverge_catalog::Value::String("File['/etc/passwd']".to_owned()),
    ));
    let compiled = compile_in_fleet("File <<| |>>\n", &Fleet(vec![lazy, ordered]));
    assert!(compiled.catalog.is_none());
    let messages: Vec<&str> = compiled
        .diagnostics
        .iter()
        .map(|diagnostic| diagnostic.message.as_str())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains("node `web1`") && messages[0].contains("a lazy value in `mode`"));
    assert!(
        messages[1].contains("node `web2`") && messages[1].contains("the metaparameter `before`")
    );
}

#[test]
fn a_guard_on_an_exported_resource_is_refused_where_it_is_exported() {
    let compiled = compile_in_fleet(
        "@@file { '/lb/self': content => 'x', only_if => 'true', require => File['/a'] }\n\
         file { '/a': content => 'a' }\n",
        &Fleet(Vec::new()),
    );
    assert!(compiled.catalog.is_none());
    let messages: Vec<&str> = compiled
        .diagnostics
        .iter()
        .map(|diagnostic| diagnostic.message.as_str())
        .collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].contains("cannot carry `only_if`"),
        "{messages:?}"
    );
}
