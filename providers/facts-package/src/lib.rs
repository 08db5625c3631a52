//! The `package` facts: `name`, `version` and `architecture` of every installed package
//! (configured, or waiting for triggers), from the dpkg status database. On a machine
//! without dpkg the group is empty.

use wconverge_sdk_facts::{FactSource, Group, Machine, export_fact_source};

struct Packages;

const STATUS: &str = "/var/lib/dpkg/status";

impl FactSource for Packages {
    fn groups() -> Vec<String> {
        vec!["package".to_owned()]
    }

    fn gather(_machine: Machine) -> Result<Vec<Group>, String> {
        let records = match std::fs::read_to_string(STATUS) {
            Ok(text) => installed(&text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(format!("cannot read {STATUS}: {error}")),
        };
        Ok(vec![Group {
            name: "package".to_owned(),
            records,
        }])
    }
}

/// The installed packages of a dpkg status file: paragraphs of `Field: value` lines.
fn installed(text: &str) -> Vec<Vec<(String, String)>> {
    let mut records = Vec::new();
    for paragraph in text.split("\n\n") {
        let field = |name: &str| {
            paragraph.lines().find_map(|line| {
                line.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(|value| value.trim().to_owned())
            })
        };
        let Some(name) = field("Package") else {
            continue;
        };
        // Configured, or configured and waiting for triggers: installed either way.
        let installed = field("Status").is_some_and(|status| {
            [" installed", " triggers-pending", " triggers-awaited"]
                .iter()
                .any(|state| status.ends_with(state))
        });
        if !installed {
            continue;
        }
        records.push(vec![
            ("name".to_owned(), name),
            ("version".to_owned(), field("Version").unwrap_or_default()),
            (
                "architecture".to_owned(),
                field("Architecture").unwrap_or_default(),
            ),
        ]);
    }
    records
}

export_fact_source!(Packages);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_installed_packages_are_records() {
        let status = "Package: bash\nStatus: install ok installed\nVersion: 5.2-1\nArchitecture: amd64\nDescription: GNU shell\n continued\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n";
        assert_eq!(
            installed(status),
            vec![vec![
                ("name".to_owned(), "bash".to_owned()),
                ("version".to_owned(), "5.2-1".to_owned()),
                ("architecture".to_owned(), "amd64".to_owned()),
            ]]
        );
    }
}
