//! A third-party fact source: publishes the `site` group, one record naming the site and
//! the rack this machine is in, loaded from a pinned file like any plugin.

use wconverge_sdk_facts::{FactSource, Group, Machine, export_fact_source};

struct Site;

impl FactSource for Site {
    fn groups() -> Vec<String> {
        vec!["site".to_owned()]
    }

    fn gather(machine: Machine) -> Result<Vec<Group>, String> {
        let record = vec![
            ("name".to_owned(), "paris".to_owned()),
            ("rack".to_owned(), "12".to_owned()),
            ("kernel".to_owned(), machine.kernel),
        ];
        Ok(vec![Group {
            name: "site".to_owned(),
            records: vec![record],
        }])
    }
}

export_fact_source!(Site);
