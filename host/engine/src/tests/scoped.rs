//! A run of some resources (what `wconverge agent --watch` applies when something
//! drifts) means what a whole run means for them: their dependencies are taken as the
//! whole run left them, what they notify is refreshed, and nothing else runs.

use super::{MemoryHost, Mode, catalog, prepare};
use crate::report::Status;
use crate::{Scope, run_scoped};

#[test]
fn a_scoped_run_applies_the_selected_and_refreshes_what_they_notify_only() {
    // source notifies target; other is unrelated; after depends on source without
    // notification; failing is selected and fails, its dependent is skipped.
    let resources = r#"{"type": "test", "title": "base"},
           {"type": "test", "title": "source", "metaparams": {"require": "Test[base]"}},
           {"type": "test", "title": "target", "attributes": {"state": "same"},
            "metaparams": {"subscribe": "Test[source]"}},
           {"type": "test", "title": "other"},
           {"type": "test", "title": "after", "metaparams": {"require": "Test[source]"}},
           {"type": "test", "title": "failing", "attributes": {"state": "fail"}},
           {"type": "test", "title": "dependent", "metaparams": {"require": "Test[failing]"}}"#;
    let host = MemoryHost::default();
    let prepared = prepare(&catalog(resources), &host).expect("valid");
    let index = |title: &str| {
        prepared
            .resources
            .iter()
            .position(|resource| resource.title == title)
            .expect("declared")
    };
    let mut selected = vec![false; prepared.resources.len()];
    selected[index("source")] = true;
    selected[index("failing")] = true;
    for jobs in [1, 4] {
        let host = MemoryHost::default();
        let (report, _) = run_scoped(
            &prepared,
            &host,
            Mode::Apply,
            jobs,
            Scope {
                selected: Some(&selected),
                ..Scope::default()
            },
        );
        let ran: Vec<(&str, Status)> = report
            .resources
            .iter()
            .map(|resource| (resource.resource.as_str(), resource.status))
            .collect();
        assert_eq!(
            ran,
            vec![
                ("Test[source]", Status::Changed),
                ("Test[target]", Status::Unchanged),
                ("Test[failing]", Status::Failed),
            ],
            "with --jobs {jobs}"
        );
        assert_eq!(
            report.resources[1]
                .refresh
                .as_ref()
                .expect("refreshed")
                .outcome,
            "refreshed"
        );
        assert_eq!(report.summary.resources, 3);
        assert_eq!(report.exit_code, 6);
        let mut calls = host.calls.lock().expect("calls").clone();
        calls.sort();
        assert_eq!(
            calls,
            vec![
                "apply failing",
                "apply source",
                "plan failing",
                "plan source",
                "plan target",
                "refresh target"
            ],
            "nothing else is read or applied, with --jobs {jobs}"
        );
    }

    // A selected resource that stays in sync notifies nothing: its subscriber does not
    // run at all.
    let in_sync = r#"{"type": "test", "title": "source", "attributes": {"state": "same"}},
           {"type": "test", "title": "target", "metaparams": {"subscribe": "Test[source]"}}"#;
    let prepared = prepare(&catalog(in_sync), &host).expect("valid");
    let host = MemoryHost::default();
    let (report, _) = run_scoped(
        &prepared,
        &host,
        Mode::Apply,
        1,
        Scope {
            selected: Some(&[true, false]),
            ..Scope::default()
        },
    );
    assert_eq!(report.resources.len(), 1);
    assert_eq!(report.exit_code, 0);
    assert_eq!(*host.calls.lock().expect("calls"), vec!["plan source"]);
}

#[test]
fn a_scoped_run_holds_back_what_depends_on_a_resource_the_runs_before_left_failed() {
    // The whole run: `package` failed, `config` was skipped for it. Drift on `config`
    // alone: it stays skipped, as a whole run would skip it; drift on both: `package` is
    // tried again first.
    let resources = r#"{"type": "test", "title": "package"},
           {"type": "test", "title": "config", "metaparams": {"require": "Test[package]"}}"#;
    let host = MemoryHost::default();
    let prepared = prepare(&catalog(resources), &host).expect("valid");
    let left = [Status::Failed, Status::SkippedFailedDependency];
    let scope = |selected| Scope {
        selected: Some(selected),
        left: Some(&left),
        node: None,
    };
    let (report, _) = run_scoped(&prepared, &host, Mode::Apply, 1, scope(&[false, true]));
    assert_eq!(report.resources.len(), 1);
    assert_eq!(report.resources[0].status, Status::SkippedFailedDependency);
    assert_eq!(
        report.resources[0].failed_dependencies,
        vec!["Test[package]"]
    );
    assert!(host.calls.lock().expect("calls").is_empty());
    let host = MemoryHost::default();
    let (report, _) = run_scoped(&prepared, &host, Mode::Apply, 1, scope(&[true, true]));
    let statuses: Vec<Status> = report.resources.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![Status::Changed, Status::Changed]);
}
