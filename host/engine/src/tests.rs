//! Engine behaviour against an in-memory plugin host: ordering, failure isolation,
//! refresh, noop and redaction. The end-to-end tests repeat these through real plugins.

use crate::report::Status;
use crate::{Call, Change, Level, LogRecord, Mode, PluginError, PluginErrorKind, PluginHost};
use crate::{PreparedResource, prepare, run};
use std::cell::RefCell;
use wconverge_catalog::{
    AttributeSchema, Behaviour, Catalog, DataType, PathAccess, TypeSchema, Value,
};

/// A `test` type: `name` (namevar), `state` (`ok`, `fail`, `same`), `secret`.
/// Records every call as `verb title`.
#[derive(Default)]
struct MemoryHost {
    calls: RefCell<Vec<String>>,
}

fn attribute(name: &str, behaviour: Behaviour, sensitive: bool) -> AttributeSchema {
    AttributeSchema {
        name: name.to_owned(),
        doc: String::new(),
        data_type: DataType::String,
        min: 0,
        max: Some(1),
        default: None,
        behaviour,
        sensitive,
        unsettable: false,
        path_access: PathAccess::None,
        checks: Vec::new(),
    }
}

impl PluginHost for MemoryHost {
    fn schema(&self, type_name: &str) -> Result<Option<TypeSchema>, PluginError> {
        Ok((type_name == "test").then(|| TypeSchema {
            name: "test".to_owned(),
            doc: String::new(),
            attributes: vec![
                attribute("name", Behaviour::Namevar, false),
                attribute("state", Behaviour::Property, false),
                attribute("secret", Behaviour::Property, true),
            ],
            invariants: Vec::new(),
            refreshable: true,
        }))
    }

    fn validate(&self, resource: &PreparedResource) -> Call<Vec<String>> {
        let problems = match resource.get("state").and_then(Value::as_str) {
            Some("invalid") => vec!["state `invalid` is invalid".to_owned()],
            _ => Vec::new(),
        };
        Call::new(Ok(problems), Vec::new())
    }

    fn plan(&self, resource: &PreparedResource) -> Call<Vec<Change>> {
        self.calls
            .borrow_mut()
            .push(format!("plan {}", resource.title));
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
            }],
        };
        Call::new(Ok(changes), logs)
    }

    fn apply(&self, resource: &PreparedResource, _changes: &[Change]) -> Call<()> {
        self.calls
            .borrow_mut()
            .push(format!("apply {}", resource.title));
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
            .borrow_mut()
            .push(format!("refresh {}", resource.title));
        Call::new(Ok(()), Vec::new())
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
        *host.calls.borrow(),
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
    assert!(host.calls.borrow().contains(&"refresh target".to_owned()));

    let host = MemoryHost::default();
    let report = run(&prepared, &host, Mode::Noop);
    assert_eq!(report.resources[0].status, Status::WouldChange);
    assert_eq!(
        report.resources[2].refresh.as_ref().expect("noted").outcome,
        "would_refresh"
    );
    assert_eq!(report.exit_code, 2);
    assert!(
        host.calls
            .borrow()
            .iter()
            .all(|call| call.starts_with("plan")),
        "noop only plans: {:?}",
        host.calls.borrow()
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
            "Test[a]: `test` has no attribute `colour`\n  help: its attributes are: name, state, secret",
            "Test[b]: attribute `state` expects String, got Integer (the value is 3)",
            "Test[c]: state `invalid` is invalid",
            "Nope[d]: unknown type `nope`; no plugin provides it\n  help: check the spelling, or add a plugin that provides it to the policy; `wconverge types` lists the types available",
        ]
    );
    assert!(host.calls.borrow().is_empty());
}
