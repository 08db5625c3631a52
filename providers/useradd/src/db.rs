//! The user and group databases, read through `getent` (so users from NSS count, as
//! Puppet's do): each read once for every resource of a run.

use std::collections::HashMap;
use wconverge_sdk::process::Command;
use wconverge_sdk::{Error, Result};

pub(crate) const GETENT: &str = "/usr/bin/getent";

/// One line of `getent passwd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Passwd {
    pub(crate) uid: i64,
    pub(crate) gid: i64,
    pub(crate) comment: String,
    pub(crate) home: String,
    pub(crate) shell: String,
}

/// One line of `getent group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) gid: i64,
    pub(crate) members: Vec<String>,
}

/// One line of `getent shadow`: the password hash and the expiry date (days since the
/// epoch, empty for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shadow {
    pub(crate) hash: String,
    pub(crate) expiry: Option<i64>,
}

/// `getent DATABASE`, every entry, as lines of `:`-separated fields.
fn getent(database: &str) -> Result<Vec<Vec<String>>> {
    let output = Command::new(GETENT).arg(database).run()?;
    // getent exits 2 when a key is not found; with no key it lists everything.
    if !output.success() {
        return Err(Error::new(format!(
            "getent {database} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.split(':').map(str::to_owned).collect())
        .collect())
}

pub(crate) fn passwd() -> Result<HashMap<String, Passwd>> {
    Ok(parse_passwd(getent("passwd")?))
}

pub(crate) fn parse_passwd(lines: Vec<Vec<String>>) -> HashMap<String, Passwd> {
    let mut users = HashMap::new();
    for fields in lines {
        if fields.len() < 7 {
            continue;
        }
        let (Ok(uid), Ok(gid)) = (fields[2].parse(), fields[3].parse()) else {
            continue;
        };
        users.entry(fields[0].clone()).or_insert(Passwd {
            uid,
            gid,
            comment: fields[4].clone(),
            home: fields[5].clone(),
            shell: fields[6].clone(),
        });
    }
    users
}

pub(crate) fn groups() -> Result<HashMap<String, Group>> {
    Ok(parse_groups(getent("group")?))
}

pub(crate) fn parse_groups(lines: Vec<Vec<String>>) -> HashMap<String, Group> {
    let mut groups = HashMap::new();
    for fields in lines {
        if fields.len() < 4 {
            continue;
        }
        let Ok(gid) = fields[2].parse() else {
            continue;
        };
        let members = fields[3]
            .split(',')
            .filter(|member| !member.is_empty())
            .map(str::to_owned)
            .collect();
        groups
            .entry(fields[0].clone())
            .or_insert(Group { gid, members });
    }
    groups
}

pub(crate) fn shadow() -> Result<HashMap<String, Shadow>> {
    let mut entries = HashMap::new();
    for fields in getent("shadow")? {
        if fields.len() < 8 {
            continue;
        }
        entries.entry(fields[0].clone()).or_insert(Shadow {
            hash: fields[1].clone(),
            expiry: fields[7].parse().ok(),
        });
    }
    Ok(entries)
}

/// Days since 1970-01-01 as `YYYY-MM-DD` (the proleptic Gregorian calendar).
pub(crate) fn date_of(days: i64) -> String {
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<Vec<String>> {
        text.lines()
            .map(|line| line.split(':').map(str::to_owned).collect())
            .collect()
    }

    #[test]
    fn databases_parse_and_the_first_entry_of_a_name_wins() {
        let users = parse_passwd(lines(
            "root:x:0:0:root:/root:/bin/bash\nweb:x:990:990:Web server:/srv/web:/usr/sbin/nologin\nweb:x:1:1::/:/bin/sh\nbad:x:y:0::/:/bin/sh",
        ));
        assert_eq!(users["web"].uid, 990);
        assert_eq!(users["web"].comment, "Web server");
        assert!(!users.contains_key("bad"));
        let groups = parse_groups(lines("sudo:x:27:alice,bob\nweb:x:990:"));
        assert_eq!(groups["sudo"].members, vec!["alice", "bob"]);
        assert!(groups["web"].members.is_empty());
    }

    #[test]
    fn days_become_dates() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(20_228), "2025-05-20");
        assert_eq!(date_of(11_016), "2000-02-29");
    }
}
