//! The `user` and `group` facts, from `/etc/passwd` and `/etc/group`: for a user its
//! `name`, `uid`, `gid`, `home` and `shell`; for a group its `name`, `gid` and `members`
//! (comma-separated).

use wconverge_sdk_facts::{FactSource, Group, Machine, export_fact_source};

struct Users;

impl FactSource for Users {
    fn groups() -> Vec<String> {
        vec!["user".to_owned(), "group".to_owned()]
    }

    fn gather(_machine: Machine) -> Result<Vec<Group>, String> {
        let read = |path: &str| {
            std::fs::read_to_string(path).map_err(|error| format!("cannot read {path}: {error}"))
        };
        Ok(vec![
            Group {
                name: "user".to_owned(),
                records: records(
                    &read("/etc/passwd")?,
                    &[
                        (0, "name"),
                        (2, "uid"),
                        (3, "gid"),
                        (5, "home"),
                        (6, "shell"),
                    ],
                ),
            },
            Group {
                name: "group".to_owned(),
                records: records(
                    &read("/etc/group")?,
                    &[(0, "name"), (2, "gid"), (3, "members")],
                ),
            },
        ])
    }
}

/// Colon-separated lines, the chosen fields by position; comments and short lines are
/// skipped.
fn records(text: &str, wanted: &[(usize, &str)]) -> Vec<Vec<(String, String)>> {
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            wanted
                .iter()
                .map(|(index, name)| {
                    fields
                        .get(*index)
                        .map(|value| ((*name).to_owned(), (*value).to_owned()))
                })
                .collect()
        })
        .collect()
}

export_fact_source!(Users);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lines_become_user_records() {
        let users = records(
            "root:x:0:0:root:/root:/bin/bash\n# comment\nbroken\n",
            &[(0, "name"), (2, "uid"), (6, "shell")],
        );
        assert_eq!(
            users,
            vec![vec![
                ("name".to_owned(), "root".to_owned()),
                ("uid".to_owned(), "0".to_owned()),
                ("shell".to_owned(), "/bin/bash".to_owned()),
            ]]
        );
    }
}
