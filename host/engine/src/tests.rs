//! Engine behaviour against an in-memory plugin host: ordering, failure isolation,
//! refresh, noop and redaction. The end-to-end tests repeat these through real plugins.

use crate::report::Status;
use crate::{
    Call, Change, GuardScript, InterpreterInfo, Level, LogRecord, Mode, PluginError,
    PluginErrorKind, PluginHost, ProviderChoice, ScriptOutput, ScriptStatus,
};
use crate::{PreparedResource, run};

/// `crate::prepare` with the language running the catalog's code, as the CLI calls it.
fn prepare(
    catalog: &wconverge_catalog::Catalog,
    host: &(dyn crate::PluginHost + Sync),
) -> Result<crate::Prepared, Vec<wconverge_catalog::Problem>> {
    crate::prepare(catalog, host, &wconverge_lang::Language)
}
use wconverge_catalog::{
    AttributeSchema, Behaviour, Catalog, DataType, PathAccess, TypeSchema, Value,
};

/// A `test` type: `name` (namevar), `state` (`ok`, `fail`, `same`), `secret`.
/// Records every call as `verb title`.
#[derive(Default)]
struct MemoryHost {
    calls: std::sync::Mutex<Vec<String>>,
    /// The resources being applied now, and every pair that was applied at once.
    applying: std::sync::Mutex<Vec<String>>,
    together: std::sync::Mutex<Vec<(String, String)>>,
    /// `start X` and `end X` for each apply, in the order they happened.
    events: std::sync::Mutex<Vec<String>>,
    /// The plugins `expect_calls` named, in order.
    expected: std::sync::Mutex<Vec<String>>,
    /// `validate` calls running now and the most at once; with `wait_for_company`, a
    /// call waits (up to a second) for a second to start, until two have run at once.
    validating: std::sync::Mutex<(usize, usize)>,
    company: std::sync::Condvar,
    wait_for_company: bool,
}

fn attribute(name: &str, behaviour: Behaviour, sensitive: bool) -> AttributeSchema {
    AttributeSchema {
        behaviour,
        sensitive,
        ..AttributeSchema::new(name, DataType::String)
    }
}

impl MemoryHost {
    fn schema(&self, type_name: &str) -> Option<TypeSchema> {
        if type_name == "sh" {
            return Some(TypeSchema {
                attributes: vec![
                    attribute("name", Behaviour::Namevar, false),
                    attribute("code", Behaviour::Parameter, false),
                    attribute("cwd", Behaviour::Parameter, false),
                ],
                refreshable: true,
                ..TypeSchema::new("sh", "")
            });
        }
        if type_name == "fixed" {
            // `state` may be set only when the resource is created.
            return Some(TypeSchema {
                attributes: vec![
                    attribute("name", Behaviour::Namevar, false),
                    attribute("state", Behaviour::InitOnly, false),
                ],
                ..TypeSchema::new("fixed", "")
            });
        }
        if type_name == "typed" {
            // An attribute typed by a declared type, and checks and an invariant in the
            // manifest language, as a provider ships them.
            return Some(TypeSchema {
                attributes: vec![
                    attribute("name", Behaviour::Namevar, false),
                    AttributeSchema {
                        data_type: DataType::Named("MyApp::Config".to_owned()),
                        ..attribute("config", Behaviour::Property, false)
                    },
                    AttributeSchema {
                        checks: vec![r#"{ if $it =~ /x/ { "no x in ${it}" } }"#.to_owned()],
                        ..attribute("secret", Behaviour::Property, true)
                    },
                    attribute("mode", Behaviour::Property, false),
                ],
                invariants: vec![wconverge_catalog::Invariant {
                    title: Some("a secret needs a mode".to_owned()),
                    source: "!($secret != undef and $mode == undef)".to_owned(),
                }],
                ..TypeSchema::new("typed", "")
            });
        }
        if type_name == "path" {
            // Writes the path it names, and its `owner` names a `test` resource: the
            // shape of `file` and its `user`.
            return Some(TypeSchema {
                attributes: vec![
                    AttributeSchema {
                        path_access: PathAccess::ReadWrite,
                        ..attribute("path", Behaviour::Namevar, false)
                    },
                    AttributeSchema {
                        refers_to: Some("test".to_owned()),
                        ..attribute("owner", Behaviour::Property, false)
                    },
                ],
                context: vec![wconverge_catalog::RunContext::ManagedBeneath],
                concurrency: wconverge_catalog::Concurrency::PerPath,
                ..TypeSchema::new("path", "")
            });
        }
        if type_name == "free" {
            return Some(TypeSchema {
                attributes: vec![
                    attribute("name", Behaviour::Namevar, false),
                    AttributeSchema::new("serial", DataType::Boolean),
                ],
                concurrency: wconverge_catalog::Concurrency::Any,
                ..TypeSchema::new("free", "")
            });
        }
        (type_name == "test").then(|| TypeSchema {
            attributes: vec![
                attribute("name", Behaviour::Namevar, false),
                attribute("state", Behaviour::Property, false),
                attribute("secret", Behaviour::Property, true),
            ],
            refreshable: true,
            ..TypeSchema::new("test", "")
        })
    }
}

impl PluginHost for MemoryHost {
    fn launches_programs(&self, plugin: &str) -> bool {
        !matches!(plugin, "path" | "free")
    }

    fn provider(
        &self,
        type_name: &str,
        requested: Option<&str>,
    ) -> Result<Option<ProviderChoice>, PluginError> {
        if let Some(requested) = requested
            && requested != type_name
        {
            return Err(PluginError::new(
                requested,
                PluginErrorKind::Unsuitable,
                format!("plugin `{requested}` is not suitable here"),
            ));
        }
        Ok(self.schema(type_name).map(|schema| ProviderChoice {
            plugin: type_name.to_owned(),
            schema,
        }))
    }

    fn validate(&self, resources: &[&PreparedResource]) -> Call<Vec<Vec<String>>> {
        let mut validating = self.validating.lock().expect("validating");
        validating.0 += 1;
        validating.1 = validating.1.max(validating.0);
        self.company.notify_all();
        if self.wait_for_company {
            let timeout = std::time::Duration::from_secs(1);
            validating = self
                .company
                .wait_timeout_while(validating, timeout, |(_, most)| *most < 2)
                .expect("validating")
                .0;
        }
        validating.0 -= 1;
        drop(validating);
        let problems = resources
            .iter()
            .map(
                |resource| match resource.get("state").and_then(Value::as_str) {
                    Some("invalid") => vec!["state `invalid` is invalid".to_owned()],
                    _ => Vec::new(),
                },
            )
            .collect();
        Call::new(Ok(problems), Vec::new())
    }

    fn plan(
        &self,
        resource: &PreparedResource,
        _current: Option<crate::State>,
    ) -> Call<crate::Checked> {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("plan {}", resource.title));
        for (name, value) in &resource.context {
            if name == "managed" {
                self.calls.lock().expect("calls").push(format!(
                    "managed beneath {}: {}",
                    resource.title,
                    value.display()
                ));
            }
        }
        let secret = resource.get("secret").and_then(Value::as_str).unwrap_or("");
        let logs = vec![LogRecord {
            level: Level::Notice,
            message: format!("planning with {secret}"),
        }];
        let changes = match resource.get("state").and_then(Value::as_str) {
            Some("same") => Vec::new(),
            _ => vec![Change {
                attribute: "state".to_owned(),
                current: Some("old".into()),
                desired: Some("new".into()),
                message: format!("state changed to new {secret}"),
                diff: None,
            }],
        };
        let state = Vec::new();
        Call::new(Ok(crate::Checked { state, changes }), logs)
    }

    fn apply(&self, resource: &PreparedResource, _changes: &[Change]) -> Call<()> {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("apply {}", resource.title));
        let me = resource.reference.to_string();
        {
            let mut applying = self.applying.lock().expect("applying");
            let mut together = self.together.lock().expect("together");
            for other in applying.iter() {
                together.push((other.clone(), me.clone()));
            }
            applying.push(me.clone());
            self.events
                .lock()
                .expect("events")
                .push(format!("start {me}"));
        }
        // Long enough for another worker to start beside it, if it may.
        std::thread::sleep(std::time::Duration::from_millis(20));
        {
            let mut applying = self.applying.lock().expect("applying");
            self.events
                .lock()
                .expect("events")
                .push(format!("end {me}"));
            applying.retain(|other| *other != me);
        }
        let outcome = match resource.get("state").and_then(Value::as_str) {
            Some("fail") => Err(PluginError::new(
                "test",
                PluginErrorKind::Provider,
                "it failed",
            )),
            _ => Ok(()),
        };
        Call::new(outcome, Vec::new())
    }

    fn refresh(&self, resource: &PreparedResource) -> Call<()> {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("refresh {}", resource.title));
        Call::new(Ok(()), Vec::new())
    }

    /// One interpreter, `sh`, which inherits `cwd` only; the `test` type is no script
    /// type, so its guards run with `default`, which is `sh` without inheritance.
    fn interpreter(
        &self,
        type_name: &str,
        _requested: Option<&str>,
    ) -> Result<Option<InterpreterInfo>, PluginError> {
        Ok((type_name == "sh").then(|| InterpreterInfo {
            script_type: "sh".to_owned(),
            plugin: "sh".to_owned(),
            inherits: vec!["cwd".to_owned()],
        }))
    }

    fn default_interpreter(&self) -> Result<Option<InterpreterInfo>, PluginError> {
        self.interpreter("sh", None)
    }

    fn expect_calls(&self, plugin: &str) {
        self.expected
            .lock()
            .expect("expected")
            .push(plugin.to_owned());
    }

    /// One `os` record: the Debian family.
    fn facts(&self) -> Result<wconverge_requires::Facts, crate::FactsError> {
        let mut facts = wconverge_requires::Facts::default();
        facts.groups.insert(
            "os".to_owned(),
            vec![vec![("family".to_owned(), "debian".to_owned())]],
        );
        Ok(facts)
    }

    /// `exit N` exits with N, `sleep` times out, `missing` cannot be launched.
    fn run_guard(&self, script: &GuardScript) -> Call<ScriptOutput> {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("guard {} in {:?}", script.code, script.cwd));
        let status = match script.code.as_str() {
            "sleep" => ScriptStatus::TimedOut,
            "missing" => {
                return Call::new(
                    Err(PluginError::new(
                        "sh",
                        PluginErrorKind::Provider,
                        "cannot launch `/bin/missing`: it does not exist",
                    )),
                    Vec::new(),
                );
            }
            code => ScriptStatus::Exited(
                code.strip_prefix("exit ")
                    .and_then(|code| code.parse().ok())
                    .unwrap_or(127),
            ),
        };
        Call::new(
            Ok(ScriptOutput {
                status,
                stdout: Vec::new(),
                stderr: Vec::new(),
                timeout: script.timeout,
            }),
            Vec::new(),
        )
    }
}

fn catalog(resources: &str) -> Catalog {
    Catalog::from_json(&format!(
        r#"{{"format_version": 1, "resources": [{resources}]}}"#
    ))
    .expect("valid catalog")
}

#[test]
fn a_failure_skips_its_dependents_and_the_rest_go_on() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "test", "title": "a", "attributes": {"state": "fail"}},
           {"type": "test", "title": "b", "metaparams": {"require": "Test[a]"}},
           {"type": "test", "title": "c", "metaparams": {"require": "Test[b]"}},
           {"type": "test", "title": "d"}"#,
    );
    let prepared = prepare(&catalog, &host).expect("valid");
    let report = run(&prepared, &host, Mode::Apply);
    let statuses: Vec<Status> = report.resources.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![
            Status::Failed,
            Status::SkippedFailedDependency,
            Status::SkippedFailedDependency,
            Status::Changed
        ]
    );
    assert_eq!(report.resources[2].failed_dependencies, vec!["Test[b]"]);
    assert_eq!(report.exit_code, 6);
    assert_eq!(
        *host.calls.lock().expect("calls"),
        vec!["plan a", "apply a", "plan d", "apply d"]
    );
}

#[test]
fn a_change_refreshes_its_subscribers_and_noop_only_says_so() {
    let resources = r#"{"type": "test", "title": "source"},
           {"type": "test", "title": "quiet", "attributes": {"state": "same"}},
           {"type": "test", "title": "target", "attributes": {"state": "same"},
            "metaparams": {"subscribe": ["Test[source]", "Test[quiet]"]}}"#;
    let host = MemoryHost::default();
    let prepared = prepare(&catalog(resources), &host).expect("valid");
    let report = run(&prepared, &host, Mode::Apply);
    let refresh = report.resources[2].refresh.as_ref().expect("refreshed");
    assert_eq!(refresh.triggered_by, vec!["Test[source]"]);
    assert_eq!(refresh.outcome, "refreshed");
    assert!(
        host.calls
            .lock()
            .expect("calls")
            .contains(&"refresh target".to_owned())
    );

    let host = MemoryHost::default();
    let report = run(&prepared, &host, Mode::Noop);
    assert_eq!(report.resources[0].status, Status::WouldChange);
    assert_eq!(
        report.resources[2].refresh.as_ref().expect("noted").outcome,
        "would_refresh"
    );
    assert_eq!(report.exit_code, 2);
    let calls = host.calls.lock().expect("calls").clone();
    assert!(
        calls.iter().all(|call| call.starts_with("plan")),
        "noop only plans: {calls:?}"
    );
}

#[test]
fn sensitive_values_are_redacted_from_logs_changes_and_errors() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "test", "title": "a", "attributes": {"secret": "CANARY-1234"}},
           {"type": "test", "title": "b", "attributes": {"state": {"__sensitive": "CANARY-5678"}}}"#,
    );
    let prepared = prepare(&catalog, &host).expect("valid");
    let report = run(&prepared, &host, Mode::Apply);
    let json = serde_json::to_string(&report).expect("serializes");
    assert!(!json.contains("CANARY"), "{json}");
    assert!(json.contains("planning with [redacted]"), "{json}");
    assert_eq!(
        report.resources[1].changes[0].message,
        "state changed [redacted]"
    );
}

#[test]
fn every_schema_problem_is_reported_before_anything_runs() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "test", "title": "a", "attributes": {"colour": "red"}},
           {"type": "test", "title": "b", "attributes": {"state": 3}},
           {"type": "test", "title": "c", "attributes": {"state": "invalid"}},
           {"type": "nope", "title": "d"}"#,
    );
    let problems = prepare(&catalog, &host).expect_err("invalid");
    let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        vec![
            "error[wcv::unknown-attribute]: Test[a]: `test` has no attribute `colour`\n  help: its attributes with provider `test` are: name, state, secret",
            "error[wcv::attribute-value]: Test[b]: attribute `state` expects String, got Integer (the value is 3)",
            "error[wcv::provider-check]: Test[c]: state `invalid` is invalid",
            "error[wcv::no-provider]: Nope[d]: unknown type `nope`; no plugin provides it\n  help: check the spelling, or add a plugin that provides it to the policy; `wconverge types` lists the types available",
        ]
    );
    assert!(host.calls.lock().expect("calls").is_empty());
}

#[test]
fn each_resource_runs_with_the_provider_it_was_given() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "test", "title": "a", "metaparams": {"provider": "other"}},
           {"type": "test", "title": "b", "metaparams": {"provider": "other"}},
           {"type": "test", "title": "c", "metaparams": {"provider": "test"}}"#,
    );
    let problems = prepare(&catalog, &host).expect_err("unsuitable");
    let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
    // Reported once, at the first resource that asked for it; nothing ran.
    assert_eq!(messages.len(), 1, "{messages:#?}");
    assert!(
        messages[0].starts_with(
            "error[wcv::provider-unavailable]: Test[a]: plugin `other` is not suitable here\n  help: `wconverge types test` shows \
             its providers"
        ),
        "{messages:#?}"
    );
    assert!(host.calls.lock().expect("calls").is_empty());
    let catalog =
        self::catalog(r#"{"type": "test", "title": "c", "metaparams": {"provider": "test"}}"#);
    let prepared = prepare(&catalog, &host).expect("valid");
    assert_eq!(prepared.resources[0].provider, "test");
    let report = run(&prepared, &host, Mode::Apply);
    assert_eq!(report.resources[0].provider, "test");
}

#[test]
fn guards_skip_in_order_and_run_in_noop_too() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "test", "title": "a", "metaparams": {"only_if": "exit 1"}},
           {"type": "test", "title": "b", "metaparams": {"not_if": ["exit 1", "exit 0"]}},
           {"type": "test", "title": "c", "metaparams": {"only_if": {"command": "exit 3", "returns": [0, 3]}, "not_if": "exit 1"}},
           {"type": "test", "title": "d", "metaparams": {"require": "Test[a]"}}"#,
    );
    let prepared = prepare(&catalog, &host).expect("valid");
    let report = run(&prepared, &host, Mode::Noop);
    let statuses: Vec<Status> = report.resources.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![
            Status::SkippedByGuard,
            Status::SkippedByGuard,
            Status::WouldChange,
            Status::WouldChange
        ]
    );
    let skipped_b = report.resources[1].guards.last().expect("guard");
    assert_eq!(
        (skipped_b.metaparameter, skipped_b.command.as_str()),
        ("not_if", "exit 0")
    );
    assert_eq!(report.summary.skipped_by_guard, 2);
    assert_eq!(report.exit_code, 2, "a guard skip is no failure");
    assert_eq!(
        *host.calls.lock().expect("calls"),
        vec![
            "guard exit 1 in None",
            "guard exit 1 in None",
            "guard exit 0 in None",
            "guard exit 3 in None",
            "guard exit 1 in None",
            "plan c",
            "plan d"
        ]
    );
}

#[test]
fn a_guard_that_cannot_run_or_times_out_fails_its_resource() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "test", "title": "a", "metaparams": {"only_if": "missing"}},
           {"type": "test", "title": "b", "metaparams": {"not_if": {"command": "sleep", "timeout": 2}}},
           {"type": "test", "title": "c", "metaparams": {"require": "Test[b]"}}"#,
    );
    let prepared = prepare(&catalog, &host).expect("valid");
    let report = run(&prepared, &host, Mode::Apply);
    assert_eq!(report.resources[0].status, Status::Failed);
    assert_eq!(
        report.resources[0].error.as_deref(),
        Some(
            "only_if guard `missing` (interpreter `sh`) could not be evaluated: cannot launch `/bin/missing`: it does not exist"
        )
    );
    assert_eq!(
        report.resources[1].error.as_deref(),
        Some(
            "not_if guard `sleep` (interpreter `sh`) ran past its timeout of 2 seconds; it was killed with everything it started"
        )
    );
    assert_eq!(report.resources[2].status, Status::SkippedFailedDependency);
}

#[test]
fn only_a_non_default_interpreter_inherits_and_guard_parameters_win() {
    let host = MemoryHost::default();
    let guard = |resource: &str| {
        let prepared = prepare(&catalog(resource), &host).expect("valid");
        let guard = prepared.resources[0].guards[0].clone();
        let cwd = match &guard.body {
            crate::GuardBody::Script(script) => script.cwd.clone(),
            crate::GuardBody::Block(_) => panic!("a script guard"),
        };
        (guard.interpreter().to_owned(), cwd, guard.inherited)
    };
    // A script type's guards run with its own interpreter and inherit its cwd...
    assert_eq!(
        guard(
            r#"{"type": "sh", "title": "a", "attributes": {"code": "x", "cwd": "/opt"}, "metaparams": {"only_if": "exit 0"}}"#
        ),
        (
            "sh".to_owned(),
            Some("/opt".to_owned()),
            vec!["cwd".to_owned()]
        )
    );
    // ...unless the guard sets its own...
    assert_eq!(
        guard(
            r#"{"type": "sh", "title": "a", "attributes": {"code": "x", "cwd": "/opt"}, "metaparams": {"only_if": {"command": "exit 0", "cwd": "/srv"}}}"#
        ),
        ("sh".to_owned(), Some("/srv".to_owned()), vec![])
    );
    // ...and `default` inherits nothing.
    assert_eq!(
        guard(
            r#"{"type": "sh", "title": "a", "attributes": {"code": "x", "cwd": "/opt"}, "metaparams": {"only_if": "exit 0", "guard_interpreter": "default"}}"#
        ),
        ("sh".to_owned(), None, vec![])
    );
    let problems = prepare(
        &catalog(r#"{"type": "test", "title": "a", "metaparams": {"only_if": "exit 0", "guard_interpreter": "zsh"}}"#),
        &host,
    )
    .expect_err("unknown interpreter");
    assert_eq!(
        problems[0].to_string(),
        "error[wcv::guard-interpreter]: Test[a]: guard_interpreter `zsh` is not an installed interpreter\n  help: name a script type whose plugin is an interpreter (`sh`, `bash`, `exec`, `powershell_script`; `wconverge types` lists them) or `default`"
    );
    let problems = prepare(
        &catalog(r#"{"type": "test", "title": "a", "metaparams": {"only_if": {"command": "exit 0", "colour": "red"}, "not_if": {"command": "x", "returns": []}}}"#),
        &host,
    )
    .expect_err("unknown parameter, empty returns");
    assert!(
        problems[0]
            .message
            .starts_with("`only_if`: a guard has no parameter `colour`"),
        "{}",
        problems[0]
    );
    assert_eq!(
        problems[1].message,
        "`not_if`: `returns` must list at least one exit code"
    );
    assert_eq!(problems[1].help, None);
}

#[test]
fn an_unmet_requirement_skips_the_resource_and_its_dependents_without_failing() {
    let host = MemoryHost::default();
    let requiring = catalog(
        r#"{"type": "test", "title": "debian", "metaparams": {"requires": "os.family == 'debian'"}},
           {"type": "test", "title": "redhat", "metaparams": {"requires": "os.family == 'debian'\nos.family == 'redhat'"}},
           {"type": "test", "title": "after", "metaparams": {"require": "Test[redhat]"}}"#,
    );
    let prepared = prepare(&requiring, &host).expect("valid");
    let report = run(&prepared, &host, Mode::Apply);
    let statuses: Vec<Status> = report.resources.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![
            Status::Changed,
            Status::SkippedByRequirement,
            Status::SkippedByRequirement
        ]
    );
    assert_eq!(
        report.resources[1].requirement.as_deref(),
        Some("line 2 does not hold: `os.family == 'redhat'`")
    );
    assert_eq!(report.resources[2].unmet_dependencies, vec!["Test[redhat]"]);
    assert_eq!(report.exit_code, 2);
    let invalid = catalog(r#"{"type": "test", "title": "a", "metaparams": {"requires": "True"}}"#);
    let problems = prepare(&invalid, &host).expect_err("invalid program");
    assert_eq!(
        problems[0].message,
        "`requires` line 1, column 1: the expression uses no group variable"
    );
}

/// The declared type `MyApp::Config` (a port above 1023, at least one host), compiled.
fn config_types() -> Vec<TypeSchema> {
    let compiled = wconverge_lang::compile(
        &[wconverge_lang::Source::new(
            "types.wcv",
            "type MyApp::Config {\n  attr port, Integer { default => 8080, check => $it > 1023 }\n  \
             attr hosts, String { min => 1, max => unbound }\n}\n",
        )],
        &wconverge_lang::CompileOptions::new("node", &wconverge_lang::KnownTypes::new()),
    );
    compiled.catalog.expect("the types compile").types
}

#[test]
fn checks_invariants_and_declared_types_are_enforced_before_the_run() {
    let mut catalog = catalog(
        r#"{"type": "typed", "title": "ok", "attributes": {"config": {"hosts": ["a"]}}},
           {"type": "typed", "title": "bad", "attributes": {"config": {"port": 80}}},
           {"type": "typed", "title": "secret", "attributes": {"secret": "xyz", "mode": "1"}},
           {"type": "typed", "title": "modeless", "attributes": {"secret": "abc"}}"#,
    );
    catalog.types = config_types();
    let host = MemoryHost::default();
    let problems = prepare(&catalog, &host).expect_err("three resources are wrong");
    let messages: Vec<String> = problems
        .iter()
        .map(|problem| {
            format!(
                "{}: {}",
                problem.resource.as_ref().expect("a resource"),
                problem.message
            )
        })
        .collect();
    assert_eq!(
        messages,
        vec![
            "Typed[bad]: attribute `config`: `port`: Illegal value: 80 is not an acceptable \
             value for port",
            "Typed[bad]: attribute `config`: `hosts` is required (at least 1 value)",
            "Typed[secret]: attribute `secret`: no x in [redacted]",
            "Typed[modeless]: `typed`: a secret needs a mode",
        ]
    );
    // A value of a declared type is the object, with its defaults.
    catalog.resources.truncate(1);
    let prepared = prepare(&catalog, &host).expect("valid");
    assert_eq!(
        prepared.resources[0].get("config"),
        Some(&Value::Hash(vec![
            ("port".to_owned(), Value::Integer(8080)),
            ("hosts".to_owned(), Value::Array(vec!["a".into()])),
        ]))
    );
}

#[test]
fn preparing_for_a_run_moves_the_values_and_prepares_the_same() {
    let types = config_types();
    let host = MemoryHost::default();
    for resources in [
        // Valid: a declared type's object with its defaults, a secret with its mode.
        r#"{"type": "typed", "title": "ok", "attributes": {"config": {"hosts": ["a"]}}},
           {"type": "typed", "title": "kept", "attributes": {"secret": "abc", "mode": "1"}},
           {"type": "test", "title": "t", "attributes": {"state": "same"}}"#,
        // Invalid: the same problems either way.
        r#"{"type": "typed", "title": "bad", "attributes": {"config": {"port": 80}}},
           {"type": "typed", "title": "modeless", "attributes": {"secret": "abc"}}"#,
    ] {
        let mut catalog = catalog(resources);
        catalog.types = types.clone();
        let copied = prepare(&catalog, &host);
        let moved = crate::prepare_taking_values(&mut catalog, &host, &wconverge_lang::Language);
        match (copied, moved) {
            (Ok(copied), Ok(moved)) => {
                let values = |prepared: &crate::Prepared| -> Vec<(String, Vec<(String, Value)>)> {
                    prepared
                        .resources
                        .iter()
                        .map(|resource| (resource.title.clone(), resource.attributes.clone()))
                        .collect()
                };
                assert_eq!(values(&copied), values(&moved));
                assert_eq!(copied.resources[1].secrets.scrub("abc"), "[redacted]");
                assert_eq!(moved.resources[1].secrets.scrub("abc"), "[redacted]");
            }
            (Err(copied), Err(moved)) => assert_eq!(copied, moved),
            (copied, moved) => panic!("{copied:?}\n{moved:?}"),
        }
        // What a run needs of the catalog after is still there; its values are not.
        assert!(
            catalog
                .resources
                .iter()
                .all(|resource| resource.attributes.0.is_empty())
        );
        assert!(!catalog.resources[0].title.is_empty());
    }
}

#[test]
fn an_init_only_attribute_is_never_changed_on_a_resource_that_exists() {
    let host = MemoryHost::default();
    // The memory provider's plan changes `state` from "old": the resource exists.
    let catalog = catalog(r#"{"type": "fixed", "title": "a", "attributes": {"state": "x"}}"#);
    let prepared = prepare(&catalog, &host).expect("valid");
    for mode in [Mode::Noop, Mode::Apply] {
        let report = run(&prepared, &host, mode);
        assert_eq!(report.resources[0].status, Status::Failed);
        assert!(
            report.resources[0]
                .error
                .as_deref()
                .is_some_and(|error| error.starts_with("attribute `state` is init_only")),
            "{:?}",
            report.resources[0].error
        );
    }
    assert_eq!(
        *host.calls.lock().expect("calls"),
        vec!["plan a", "plan a"],
        "never applied"
    );
}

#[test]
fn a_path_requires_its_nearest_written_ancestor_and_what_its_attributes_name() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "path", "title": "/srv/a/b/c/d"},
           {"type": "path", "title": "/srv/a/b", "attributes": {"owner": "alice"}},
           {"type": "path", "title": "/srv/a"},
           {"type": "test", "title": "alice"},
           {"type": "path", "title": "/x/y"},
           {"type": "path", "title": "/x", "metaparams": {"require": "Path[/x/y]"}},
           {"type": "path", "title": "/srv/ab"}"#,
    );
    let prepared = prepare(&catalog, &host).expect("valid");
    let order: Vec<String> = prepared
        .graph
        .order()
        .iter()
        .map(|&idx| prepared.resources[idx].title.clone())
        .collect();
    // The deepest path waits for `/srv/a/b` (its nearest written ancestor), which waits
    // for `/srv/a` and for the `alice` it names; an explicit reverse order wins over the
    // implied one, and `/srv/ab` is no child of `/srv/a`.
    assert_eq!(
        order,
        vec![
            "/srv/a",
            "alice",
            "/srv/a/b",
            "/srv/a/b/c/d",
            "/x/y",
            "/x",
            "/srv/ab"
        ]
    );
    assert_eq!(
        prepared.written_beneath("/srv/a"),
        vec!["/srv/a/b".to_owned(), "/srv/a/b/c/d".to_owned()]
    );
    assert!(prepared.written_beneath("/srv/ab").is_empty());
    // The provider receives them as its context entry `managed`.
    run(&prepared, &host, Mode::Noop);
    let calls = host.calls.lock().expect("calls");
    assert!(
        calls.contains(&"managed beneath /srv/a: ['/srv/a/b', '/srv/a/b/c/d']".to_owned()),
        "{calls:?}"
    );
    assert!(
        !calls
            .iter()
            .any(|call| call.starts_with("managed beneath /srv/ab")),
        "nothing managed beneath: no entry; {calls:?}"
    );
}

/// The files of one directory share their nearest written ancestor (looked up once for
/// those that come one after another): each file requires exactly the resource that
/// writes it, whether its neighbours come first or between, under a declared `/` too.
#[test]
fn files_of_one_directory_each_require_the_nearest_written_ancestor() {
    let host = MemoryHost::default();
    let catalog = catalog(
        r#"{"type": "path", "title": "/srv/d/f1"},
           {"type": "path", "title": "/srv/d/f2"},
           {"type": "path", "title": "/srv/e/g"},
           {"type": "path", "title": "/srv/d/f3"},
           {"type": "path", "title": "/srv/e/h"},
           {"type": "path", "title": "/srv/d"},
           {"type": "path", "title": "/srv"},
           {"type": "path", "title": "/top"},
           {"type": "path", "title": "/"}"#,
    );
    let prepared = prepare(&catalog, &host).expect("valid");
    let idx = |title: &str| {
        prepared
            .resources
            .iter()
            .position(|resource| resource.title == title)
            .expect(title)
    };
    let required = |title: &str| -> Vec<&str> {
        prepared
            .graph
            .predecessors(idx(title))
            .iter()
            .map(|&other| prepared.resources[other].title.as_str())
            .collect()
    };
    for file in ["/srv/d/f1", "/srv/d/f2", "/srv/d/f3"] {
        assert_eq!(required(file), ["/srv/d"], "{file}");
    }
    // `/srv/e` is not declared: its files require `/srv`.
    for file in ["/srv/e/g", "/srv/e/h", "/srv/d"] {
        assert_eq!(required(file), ["/srv"], "{file}");
    }
    for top in ["/srv", "/top"] {
        assert_eq!(required(top), ["/"], "{top}");
    }
    assert!(required("/").is_empty());
}

#[test]
fn resources_apply_at_once_as_their_types_allow_and_report_as_one_at_a_time() {
    let resources = r#"{"type": "test", "title": "t1"},
           {"type": "test", "title": "t2"},
           {"type": "test", "title": "t3", "attributes": {"state": "fail"}},
           {"type": "test", "title": "t4", "metaparams": {"require": "Test[t3]"}},
           {"type": "free", "title": "f1"},
           {"type": "free", "title": "f2"},
           {"type": "free", "title": "f3", "metaparams": {"notify": "Test[t5]"}},
           {"type": "free", "title": "alone", "attributes": {"serial": true}},
           {"type": "free", "title": "f4"},
           {"type": "test", "title": "t5", "attributes": {"state": "same"}},
           {"type": "path", "title": "/srv/a"},
           {"type": "path", "title": "/srv/b"}"#;
    let host = MemoryHost::default();
    let prepared = prepare(&catalog(resources), &host).expect("valid");
    let alone = run(&prepared, &host, Mode::Apply);
    assert!(host.together.lock().expect("together").is_empty());
    let host = MemoryHost::default();
    let together = crate::run_with_jobs(&prepared, &host, Mode::Apply, 4);
    let pairs = host.together.lock().expect("together").clone();
    // A type that declares nothing (`test`) and a serial resource are barriers: each
    // ran beside nothing.
    assert!(
        !pairs.iter().any(|(a, b)| [a, b]
            .iter()
            .any(|r| r.starts_with("Test[") || *r == "Free[alone]")),
        "{pairs:?}"
    );
    // The others did run beside each other.
    assert!(
        pairs
            .iter()
            .any(|(a, b)| a.starts_with("Free[") && b.starts_with("Free[")),
        "{pairs:?}"
    );
    // Two paths apart run at once. (Above, the two are next to each other in graph order
    // and may run one after the other: the worker that takes the first goes on with the
    // next.) Alone, the second worker takes what the first leaves.
    let host = MemoryHost::default();
    let paths = prepare(
        &catalog(r#"{"type": "path", "title": "/srv/a"}, {"type": "path", "title": "/srv/b"}"#),
        &host,
    )
    .expect("valid");
    crate::run_with_jobs(&paths, &host, Mode::Apply, 2);
    // One pair, whichever of the two started first.
    let mut pair = host.together.lock().expect("together").clone();
    pair.iter_mut().for_each(|(a, b)| {
        if a > b {
            std::mem::swap(a, b)
        }
    });
    assert_eq!(
        pair,
        [("Path[/srv/a]".to_owned(), "Path[/srv/b]".to_owned())]
    );
    // The same report, in the same order: statuses, failures, refreshes.
    let shape = |report: &crate::report::Report| -> Vec<String> {
        report
            .resources
            .iter()
            .map(|resource| {
                format!(
                    "{} {:?} {:?} {:?} {:?}",
                    resource.resource,
                    resource.status,
                    resource.failed_dependencies,
                    resource
                        .refresh
                        .as_ref()
                        .map(|refresh| (&refresh.triggered_by, refresh.outcome)),
                    resource.error
                )
            })
            .collect()
    };
    assert_eq!(shape(&alone), shape(&together));
    assert_eq!(
        format!("{:?}", alone.summary),
        format!("{:?}", together.summary)
    );
    assert_eq!(alone.exit_code, together.exit_code);
}

#[test]
fn the_host_is_told_once_of_each_plugin_the_run_will_call() {
    // No type of this host reads states in batches: each resource's own provider is
    // called, and the interpreter of a guard.
    let host = MemoryHost::default();
    prepare(
        &catalog(
            r#"{"type": "test", "title": "a", "metaparams": {"only_if": "exit 0"}},
               {"type": "test", "title": "b"},
               {"type": "free", "title": "f"},
               {"type": "free", "title": "g", "metaparams": {"not_if": "exit 1"}}"#,
        ),
        &host,
    )
    .expect("valid");
    assert_eq!(
        *host.expected.lock().expect("expected"),
        ["sh", "test", "free"]
    );
}

mod checks_at_once;
mod ordering;
mod scoped;
