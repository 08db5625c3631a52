//! Where a run's time went: its phases (facts, compile, prepare, run, report) and its
//! slowest resources, each with the time of its guards, its check, its change and its
//! refresh. `apply --timings` prints it after the report; `reports show ID --slow N`
//! prints it from a stored report (whose report phase is not in it: the report is
//! stored before that phase ends).

use serde_json::Value;

/// A duration in milliseconds, as people read it: `12 ms`, `0.4 ms`, `1.25 s`.
fn shown(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// The text for a report (as its JSON), with the report phase's time if known, the
/// `slowest` resources at most.
pub(crate) fn text(report: &Value, report_ms: Option<f64>, slowest: usize) -> String {
    let number = |value: &Value, key: &str| value.get(key).and_then(Value::as_f64).unwrap_or(0.0);
    let mut out = String::new();
    let mut phases: Vec<String> = Vec::new();
    if let Some(recorded) = report.get("phases") {
        for (name, key) in [
            ("facts", "facts_ms"),
            ("compile", "compile_ms"),
            ("prepare", "prepare_ms"),
            ("run", "run_ms"),
        ] {
            phases.push(format!("{name} {}", shown(number(recorded, key))));
        }
    } else {
        phases.push(format!("run {}", shown(number(report, "duration_ms"))));
    }
    if let Some(report_ms) = report_ms {
        phases.push(format!("report {}", shown(report_ms)));
    }
    out.push_str(&format!("timings: {}\n", phases.join(", ")));
    // A stored report keeps its slowest resources apart (its `resources` are those that
    // did not stay unchanged).
    let mut resources: Vec<&Value> = report
        .get("slowest")
        .or_else(|| report.get("resources"))
        .and_then(Value::as_array)
        .map(|resources| resources.iter().collect())
        .unwrap_or_default();
    resources.sort_by(|a, b| number(b, "duration_ms").total_cmp(&number(a, "duration_ms")));
    resources.truncate(slowest);
    if resources.is_empty() {
        return out;
    }
    out.push_str(&format!(
        "the {} slowest resource{}:\n",
        resources.len(),
        if resources.len() == 1 { "" } else { "s" }
    ));
    for resource in resources {
        let timings = resource.get("timings").cloned().unwrap_or(Value::Null);
        let name = resource
            .get("resource")
            .and_then(Value::as_str)
            .unwrap_or("?");
        out.push_str(&format!(
            "  {:>9}  {name}  (guards {}, check {}, change {}, refresh {})\n",
            shown(number(resource, "duration_ms")),
            shown(number(&timings, "guards_ms")),
            shown(number(&timings, "check_ms")),
            shown(number(&timings, "change_ms")),
            shown(number(&timings, "refresh_ms")),
        ));
    }
    out
}

/// `apply --timings`: after the report (on standard error when the report is JSON, so
/// that standard output stays one JSON document).
pub(crate) fn print(report: &wconverge_engine::report::Report, report_ms: f64, json: bool) {
    let Ok(value) = serde_json::to_value(report) else {
        return;
    };
    let text = text(&value, Some(report_ms), 10);
    if json {
        crate::output::text_to_stderr(&text);
    } else {
        crate::output::text(&text);
    }
}
