//! The checks before a run go on several threads at once, and their problems still come
//! in the order of one at a time.

use super::{MemoryHost, catalog, prepare};
use wconverge_catalog::DiagnosticCode;

/// With enough resources for the providers' checks to run on several threads while the
/// catalog's own checks run beside them, the problems come in the order of one at a time:
/// each resource's in catalog order, the providers' among them, then the catalog's.
#[test]
fn problems_keep_their_order_when_the_checks_run_at_once() {
    let host = MemoryHost {
        wait_for_company: true,
        ..MemoryHost::default()
    };
    let mut resources: Vec<String> = (0..300)
        .map(|idx| match idx {
            5 | 150 | 290 => format!(
                r#"{{"type": "test", "title": "t{idx}", "attributes": {{"state": "invalid"}}}}"#
            ),
            100 => r#"{"type": "nosuch", "title": "x"}"#.to_owned(),
            _ => format!(r#"{{"type": "test", "title": "t{idx}"}}"#),
        })
        .collect();
    resources.push(r#"{"type": "path", "title": "/p/a"}"#.to_owned());
    resources.push(r#"{"type": "path", "title": "b", "attributes": {"path": "/p/a"}}"#.to_owned());
    let catalog = catalog(&resources.join(","));
    let problems = prepare(&catalog, &host).expect_err("problems");
    // The providers' checks did run at once, wherever there are two cores for them.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let most = host.validating.lock().expect("validating").1;
    assert_eq!(most >= 2, cores >= 2, "{most} at once on {cores} cores");
    let shown: Vec<(DiagnosticCode, String)> = problems
        .iter()
        .map(|problem| {
            let resource = problem.resource.as_ref().map(ToString::to_string);
            (problem.code, resource.unwrap_or_default())
        })
        .collect();
    assert_eq!(
        shown,
        [
            (DiagnosticCode::ProviderCheck, "Test[t5]".to_owned()),
            (DiagnosticCode::NoProvider, "Nosuch[x]".to_owned()),
            (DiagnosticCode::ProviderCheck, "Test[t150]".to_owned()),
            (DiagnosticCode::ProviderCheck, "Test[t290]".to_owned()),
            (DiagnosticCode::SameNamevar, "Path[b]".to_owned()),
        ],
        "{problems:#?}"
    );
}
