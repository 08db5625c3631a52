//! A test plugin that misbehaves on request, to prove the sandbox holds.
//!
//! Built only for the end-to-end tests, never embedded in `wconverge`. Its `hostile`
//! type does what its `action` attribute says when applied; `path` names a file whose
//! directory the host grants read-write, and `target` a path the action aims at.

use wconverge_sdk::process::Command;
use wconverge_sdk::{
    Attribute, Change, DataType, Error, PathAccess, Provider, ProviderInfo, Resource, Result,
    State, TypeSchema, export_provider, log,
};

struct Hostile;

impl Provider for Hostile {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("hostile", "0.0.0").with_type(
            TypeSchema::new("hostile", "Misbehaves when applied, as `action` says.")
                .attribute(
                    Attribute::new("path", DataType::String, "A path in the granted directory.")
                        .namevar()
                        .path_access(PathAccess::ReadWrite),
                )
                .attribute(
                    Attribute::new(
                        "action",
                        DataType::enumeration([
                            "read_file",
                            "write_file",
                            "launch",
                            "flood_launch",
                            "loop_forever",
                            "allocate_forever",
                            "flood_stdout",
                            "flood_log",
                            "trap",
                            "behave",
                            "sleep",
                            "hoard_listings",
                            "hoard_files",
                            "stat",
                            "sha256",
                            "chmod",
                            "remove",
                            "lie_state",
                            "lie_plan",
                            "trap_in_validate",
                        ]),
                        "What to do when applied.",
                    )
                    .required(),
                )
                .attribute(Attribute::new(
                    "target",
                    DataType::String,
                    "The file to read or the program to launch.",
                )),
        )
    }

    fn validate(resource: &Resource) -> Vec<String> {
        // Validation runs many resources per call: the trap must cost this one alone.
        if resource.get_str("action") == Some("trap_in_validate") {
            panic!("deliberate panic in validate");
        }
        Vec::new()
    }

    fn current_state(resource: &Resource) -> Result<State> {
        // Says the enum attribute is a number: outside its own schema.
        if resource.get_str("action") == Some("lie_state") {
            return Ok(State::new().with("action", 42i64));
        }
        Ok(State::new().with("action", "not done"))
    }

    fn plan(resource: &Resource, _current: &State) -> Result<Vec<Change>> {
        let action = resource.require_str("action")?;
        if action == "lie_plan" {
            return Ok(vec![Change::new(
                "action",
                Some("not done".into()),
                Some(42i64.into()),
                "will make it 42",
            )]);
        }
        Ok(vec![Change::new(
            "action",
            Some("not done".into()),
            Some(action.into()),
            format!("{action} done"),
        )])
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let target = resource.get_str("target").unwrap_or_default();
        match resource.require_str("action")? {
            "read_file" => {
                let content = std::fs::read_to_string(target)
                    .map_err(|error| Error::new(format!("reading `{target}` failed: {error}")))?;
                // Reaching here is a sandbox escape: make it loud in the report.
                log::notice(&format!("read `{target}`: {content}"));
                Ok(())
            }
            "write_file" => {
                std::fs::write(target, "written by the hostile plugin\n")
                    .map_err(|error| Error::new(format!("writing `{target}` failed: {error}")))?;
                log::notice(&format!("wrote `{target}`"));
                Ok(())
            }
            "launch" => {
                let output = Command::new(target).run()?;
                log::notice(&format!("launched `{target}`: {:?}", output.status));
                Ok(())
            }
            "flood_launch" => {
                // Asks again and again for a launch its policy refuses.
                let refused = (0..5000)
                    .filter(|_| Command::new(target).run().is_err())
                    .count();
                log::notice(&format!("{refused} launches of `{target}` refused"));
                Ok(())
            }
            "loop_forever" => {
                let mut counter = 0u64;
                loop {
                    counter = std::hint::black_box(counter.wrapping_add(1));
                }
            }
            "allocate_forever" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            "flood_stdout" => loop {
                println!("{}", "flood ".repeat(100));
            },
            "flood_log" => loop {
                log::notice(&"flood ".repeat(100));
            },
            "trap" => panic!("deliberate panic in the hostile plugin"),
            "stat" => {
                let stat = wconverge_sdk::metadata::stat(target)?;
                log::notice(&format!("stat of `{target}`: {stat:?}"));
                Ok(())
            }
            "sha256" => {
                let digest = wconverge_sdk::metadata::sha256(target)?;
                log::notice(&format!("sha256 of `{target}`: {digest:?}"));
                Ok(())
            }
            "chmod" => wconverge_sdk::metadata::set_mode(target, 0o4777),
            "remove" => std::fs::remove_file(target)
                .map_err(|error| Error::new(format!("removing `{target}` failed: {error}"))),
            "sleep" => {
                // Blocked in the host, where the CPU limit does not reach.
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(())
            }
            "hoard_listings" => {
                // Lists the directory `target` again and again, keeping every listing
                // open: the host holds each whole in its own memory.
                let mut kept = Vec::new();
                for round in 0..1000 {
                    match std::fs::read_dir(target) {
                        Ok(listing) => kept.push(listing),
                        Err(error) => {
                            return Err(Error::new(format!(
                                "listing {round} of `{target}` failed: {error}"
                            )));
                        }
                    }
                }
                log::notice(&format!("kept {} listings of `{target}`", kept.len()));
                Ok(())
            }
            "hoard_files" => {
                // Opens the file `target` again and again without closing it.
                let mut kept = Vec::new();
                for round in 0..2000 {
                    match std::fs::File::open(target) {
                        Ok(file) => kept.push(file),
                        Err(error) => {
                            // Keeps what it has: an idle instance would hold it all.
                            std::mem::forget(kept);
                            return Err(Error::new(format!(
                                "opening `{target}` for the {round}th time failed: {error}"
                            )));
                        }
                    }
                }
                std::mem::forget(kept);
                Ok(())
            }
            "behave" => Ok(()),
            other => Err(Error::new(format!("unknown action `{other}`"))),
        }
    }
}

export_provider!(Hostile);
