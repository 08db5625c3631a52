//! `wconverge reports`: the runs' reports in the store, listed with their figures under
//! a heading (or as JSON), and `reports show ID`, one report whole.

use crate::fleet::{Fleet, StoreArgs, parse_since, time_text};
use crate::output;
use anyhow::{Context, bail};

/// `wconverge reports [--node N] [--since T]` and `wconverge reports show ID`.
pub(crate) fn reports_command(
    show: Option<&ReportsCommand>,
    node: Option<&str>,
    since: Option<&str>,
    json: bool,
    args: &StoreArgs,
) -> anyhow::Result<u8> {
    let fleet = Fleet::of(args)?;
    let store = fleet.existing_store()?;
    if let Some(ReportsCommand::Show { id, slow }) = show {
        let Some(stored) = store.report(*id)? else {
            bail!(
                "the store {} has no report {id}; `wconverge reports` lists them",
                store.shown()
            );
        };
        let report: serde_json::Value = serde_json::from_str(&stored.report)
            .with_context(|| format!("report {id} in the store is not JSON"))?;
        match slow {
            Some(count) => output::text(&crate::timings::text(&report, None, *count)),
            None => output::json(&report),
        }
        return Ok(0);
    }
    let since = since.map(parse_since).transpose()?;
    let reports = store.reports(node, since)?;
    if json {
        let list: Vec<serde_json::Value> = reports
            .iter()
            .map(|report| {
                let mut entry = serde_json::json!({
                    "id": report.id,
                    "node": report.node,
                    "at": time_text(report.at),
                    "status": report.status,
                });
                if let (Some(figures), Some(object)) = (&report.figures, entry.as_object_mut())
                    && let Ok(serde_json::Value::Object(more)) = serde_json::to_value(figures)
                {
                    object.extend(more);
                }
                entry
            })
            .collect();
        output::json(&list);
    } else {
        output::text(&report_lines(&reports));
    }
    Ok(0)
}

/// The human listing: a line per report, its figures in columns under a heading.
fn report_lines(reports: &[wconverge_store::ReportSummary]) -> String {
    if reports.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 9]> = reports
        .iter()
        .map(|report| {
            let figures = report.figures.as_ref();
            let shown = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
            [
                report.id.to_string(),
                time_text(report.at),
                report.node.escape_debug().to_string(),
                report.status.clone(),
                shown(figures.map(|f| f.mode.clone())),
                shown(figures.map(|f| f.resources.to_string())),
                shown(figures.map(|f| {
                    if f.mode == "noop" {
                        format!("{} (noop)", f.would_change)
                    } else {
                        f.changed.to_string()
                    }
                })),
                shown(figures.map(|f| f.failed.to_string())),
                shown(figures.map(|f| format!("{:.2} s", f.duration_ms / 1000.0))),
            ]
        })
        .collect();
    let heading = [
        "ID",
        "ENDED",
        "NODE",
        "STATUS",
        "MODE",
        "RESOURCES",
        "CHANGED",
        "FAILED",
        "DURATION",
    ];
    let widths: Vec<usize> = (0..heading.len())
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .chain([heading[column].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Numbers right-aligned, words left.
    let right = [true, false, false, false, false, true, true, true, true];
    let line = |cells: &[&str]| {
        let mut line = String::new();
        for (column, cell) in cells.iter().enumerate() {
            let width = widths[column];
            let cell = if right[column] {
                format!("{cell:>width$}")
            } else {
                format!("{cell:<width$}")
            };
            line.push_str(&cell);
            line.push_str("  ");
        }
        line.trim_end().to_owned() + "\n"
    };
    let mut text = line(&heading);
    for row in &rows {
        text.push_str(&line(&row.each_ref().map(String::as_str)));
    }
    text
}

/// What `wconverge reports` does besides listing.
#[derive(clap::Subcommand)]
pub(crate) enum ReportsCommand {
    /// Print one stored report as JSON.
    Show {
        #[arg(value_name = "ID")]
        id: i64,
        /// Instead, where the run's time went: its phases and its N slowest resources,
        /// each with the time of its guards, check, change and refresh.
        #[arg(long, value_name = "N")]
        slow: Option<usize>,
    },
}
