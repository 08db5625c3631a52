//! `wconverge facts [NAME]`: the facts as manifests see them (`$facts`: Facter's
//! structure, `os.family` is `Debian`), one of them by its dotted name
//! (`os.release.major`), or with `--raw` the fact plugins' records, the form
//! `requirement --facts` reads.

use crate::setup::{RuntimeArgs, Trails, runtime_for};
use crate::{ReportFormat, fleet, literal, output};
use anyhow::bail;
use wconverge_catalog::Value;

/// A list of records longer than this is summarized in the listing of every fact.
const LISTED_RECORDS: usize = 10;

/// What `wconverge facts` is given.
#[derive(clap::Args)]
pub(crate) struct FactsArgs {
    /// One fact, by its dotted name as manifests read it (`os.family` is
    /// `$facts['os']['family']`; `package.0.name` an element of a list); with `--raw`,
    /// one group of records.
    #[arg(value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// The fact plugins' records, group by group, rather than `$facts` (the form
    /// `requirement --facts` reads, with `--format json`).
    #[arg(long)]
    pub(crate) raw: bool,
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub(crate) format: ReportFormat,
    /// The node whose stored facts to print.
    #[arg(long, value_name = "NAME")]
    pub(crate) node: Option<String>,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
    #[command(flatten)]
    pub(crate) store: fleet::StoreArgs,
}

/// `wconverge facts`: this machine's facts, or with `--node` those the node last stored.
pub(crate) fn facts(args: FactsArgs, trails: &Trails) -> anyhow::Result<u8> {
    let FactsArgs {
        name,
        raw,
        format,
        node,
        runtime,
        store,
    } = args;
    let (mut groups, errors) = match &node {
        Some(node) => {
            let (groups, at) = fleet::Fleet::of(&store)?.stored_facts(node)?;
            if matches!(format, ReportFormat::Human) && name.is_none() {
                output::line(&format!(
                    "# node {node}, facts stored {}",
                    fleet::time_text(at)
                ));
            }
            (groups, Vec::new())
        }
        None => runtime_for(&runtime, trails)?.gather_facts(),
    };
    if raw {
        if let Some(group) = &name {
            groups.retain(|found, _| found == group);
            if groups.is_empty() {
                bail!(
                    "no fact plugin gathers a group `{group}`; `wconverge facts --raw` lists them"
                );
            }
        }
        match format {
            ReportFormat::Human => output::facts_human(&groups),
            // The form `requirement --facts` reads: each group a list of objects.
            ReportFormat::Json => output::json(&fleet::facts_object(&groups)),
        }
    } else {
        let facts = wconverge_engine::facts_value(&groups);
        match &name {
            Some(name) => {
                let Some(found) = dig(&facts, name) else {
                    bail!(
                        "there is no fact `{name}`; the facts are {}",
                        top_names(&facts)
                    );
                };
                match (format, found) {
                    (ReportFormat::Json, found) => output::json(found),
                    // As Facter prints one fact: a string as it is.
                    (ReportFormat::Human, Value::String(text)) => output::line(text),
                    (ReportFormat::Human, found) => output::line(&literal::value(found, 0)),
                }
            }
            None => match format {
                ReportFormat::Json => output::json(&facts),
                ReportFormat::Human => output::text(&listing(&facts)),
            },
        }
    }
    for error in &errors {
        output::error(&error.to_string());
    }
    Ok(u8::from(!errors.is_empty()))
}

/// The fact at a dotted name: hash keys, and list positions as numbers.
fn dig<'v>(facts: &'v Value, name: &str) -> Option<&'v Value> {
    name.split('.').try_fold(facts, |value, key| match value {
        Value::Hash(entries) => entries
            .iter()
            .find(|(found, _)| found == key)
            .map(|(_, value)| value),
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => None,
    })
}

fn top_names(facts: &Value) -> String {
    match facts {
        Value::Hash(entries) => entries
            .iter()
            .map(|(name, _)| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".to_owned(),
    }
}

/// Every fact as `name => value`, sorted by name; a long list of records (the
/// packages, the users) is counted rather than printed, with how to print it.
fn listing(facts: &Value) -> String {
    let Value::Hash(entries) = facts else {
        return String::new();
    };
    let mut entries: Vec<&(String, Value)> = entries.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = String::new();
    for (name, value) in entries {
        let shown = match value {
            Value::Array(items) if items.len() > LISTED_RECORDS => format!(
                "[...] # {} entries; `wconverge facts {name}` prints them",
                items.len()
            ),
            value => literal::value(value, 0),
        };
        text.push_str(&format!("{name} => {shown}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_names_reach_into_hashes_and_lists() {
        let facts = Value::Hash(vec![
            (
                "os".to_owned(),
                Value::Hash(vec![(
                    "family".to_owned(),
                    Value::String("Debian".to_owned()),
                )]),
            ),
            (
                "package".to_owned(),
                Value::Array(vec![Value::Hash(vec![(
                    "name".to_owned(),
                    Value::String("bash".to_owned()),
                )])]),
            ),
        ]);
        assert_eq!(
            dig(&facts, "os.family"),
            Some(&Value::String("Debian".to_owned()))
        );
        assert_eq!(
            dig(&facts, "package.0.name"),
            Some(&Value::String("bash".to_owned()))
        );
        assert_eq!(dig(&facts, "os.nothing"), None);
        assert_eq!(dig(&facts, "package.x"), None);
        assert_eq!(top_names(&facts), "`os`, `package`");
        let many = Value::Hash(vec![(
            "package".to_owned(),
            Value::Array(vec![Value::Integer(1); LISTED_RECORDS + 1]),
        )]);
        assert!(listing(&many).contains("11 entries; `wconverge facts package`"));
    }
}
