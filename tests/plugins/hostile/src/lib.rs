//! A test plugin that misbehaves on request, to prove the sandbox holds.
//!
//! Built only for the end-to-end tests, never embedded in `wconverge`. Its `hostile`
//! type does what its `action` attribute says when applied; `path` names a file whose
//! directory the host grants read-write, and `target` a path the action aims at. Its
//! `peek` type reads its file in its batched check as `reading` says (through
//! `file-metadata`, through WASI, or with the clock or random numbers besides), to show
//! which checks the host may replay.

mod wasi_paths;

use wconverge_sdk::process::Command;
use wconverge_sdk::{
    Attribute, Change, DataType, Error, PathAccess, Provider, ProviderInfo, Resource, Result,
    State, TypeSchema, export_provider, log,
};

struct Hostile;

impl Provider for Hostile {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("hostile", "0.0.0")
            .with_type(
                TypeSchema::new("hostile", "Misbehaves when applied, as `action` says.")
                    .attribute(
                        Attribute::new(
                            "path",
                            DataType::String,
                            "A path in the granted directory.",
                        )
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
                                "wasi_paths",
                                "stat",
                                "sha256",
                                "chmod",
                                "remove",
                                "lie_state",
                                "lie_plan",
                                "trap_in_validate",
                                "leave_secret",
                                "find_secret",
                                "leave_and_find_secret",
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
            .with_type(
                TypeSchema::new(
                    "peek",
                    "Its file holds `expect`, read in the check as `reading` says.",
                )
                .attribute(
                    Attribute::new("path", DataType::String, "A file in the granted directory.")
                        .namevar()
                        .path_access(PathAccess::ReadWrite),
                )
                .attribute(
                    Attribute::new(
                        "reading",
                        DataType::enumeration([
                            "metadata",
                            "file",
                            "status",
                            "clock",
                            "monotonic",
                            "random",
                        ]),
                        "`metadata`: its digest through `file-metadata`; `file`: its content \
                         through WASI; `status`, `clock`, `monotonic`, `random`: its digest, \
                         and besides its status through WASI, the time of day, the \
                         monotonic clock or a random number.",
                    )
                    .required(),
                )
                .attribute(
                    Attribute::new("expect", DataType::String, "The content it should have.")
                        .required(),
                )
                .attribute(Attribute::new(
                    "also",
                    DataType::String,
                    "A path hashed through `file-metadata` first, whatever the answer (one \
                     outside the grant is refused).",
                ))
                .batch_state(),
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
        if resource.type_name == "peek" {
            return peek(resource);
        }
        // Says the enum attribute is a number: outside its own schema.
        if resource.get_str("action") == Some("lie_state") {
            return Ok(State::new().with("action", 42i64));
        }
        // The secret is left, and looked for, by the instance that checks a resource as
        // well as by the one that applies it.
        secret(resource.get_str("action").unwrap_or_default());
        Ok(State::new().with("action", "not done"))
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        if resource.type_name == "peek" {
            let expect = wconverge_sdk::digest::sha256(resource.require_str("expect")?.as_bytes());
            return Ok(match current.get_str("expect") {
                Some(found) if found == expect => Vec::new(),
                found => vec![Change::new(
                    "expect",
                    found.map(Into::into),
                    Some(expect.into()),
                    "it holds something else",
                )],
            });
        }
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
        if resource.type_name == "peek" {
            let path = resource.require_str("path")?;
            return std::fs::write(path, resource.require_str("expect")?)
                .map_err(|error| Error::new(format!("writing `{path}` failed: {error}")));
        }
        let target = resource.get_str("target").unwrap_or_default();
        let action = resource.require_str("action")?;
        if secret(action) {
            return Ok(());
        }
        match action {
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
            "wasi_paths" => {
                let answers = wasi_paths::run(target).map_err(Error::new)?;
                log::notice(&format!("wasi paths: {answers}"));
                Ok(())
            }
            "behave" => Ok(()),
            other => Err(Error::new(format!("unknown action `{other}`"))),
        }
    }
}

export_provider!(Hostile);

/// A `peek` resource's state: the digest of its file's content as `expect`, read as
/// `reading` says.
fn peek(resource: &Resource) -> Result<State> {
    let path = resource.require_str("path")?;
    if let Some(also) = resource.get_str("also") {
        std::hint::black_box(wconverge_sdk::metadata::sha256(also).ok());
    }
    let digest = match resource.require_str("reading")? {
        "file" => match std::fs::read(path) {
            Ok(content) => Some(wconverge_sdk::digest::sha256(&content)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(Error::new(format!("reading `{path}` failed: {error}"))),
        },
        reading => {
            if reading == "status" {
                // Only WASI's file system: the preopens and a `stat-at`.
                std::hint::black_box(std::fs::symlink_metadata(path).ok());
            } else if reading == "clock" {
                std::hint::black_box(std::time::SystemTime::now());
            } else if reading == "monotonic" {
                std::hint::black_box(std::time::Instant::now());
            } else if reading == "random" {
                use std::hash::BuildHasher;
                std::hint::black_box(std::collections::hash_map::RandomState::new().hash_one(1));
            }
            wconverge_sdk::metadata::sha256(path)?
        }
    };
    Ok(match digest {
        Some(digest) => State::new().with("expect", digest),
        None => State::new(),
    })
}

/// A word no plugin data holds: what `leave_secret` fills 1 MiB of its memory with, and
/// `find_secret` counts in all of its memory. It is an immediate in the code, which is
/// not in linear memory, so an instance holds it only where one of them wrote it.
const SECRET_WORD: u64 = 0x5345_4352_4554_2157;

/// Memory of the component's initial image (not grown), for a secret there too.
static LEFT: std::sync::Mutex<[u64; 8192]> = std::sync::Mutex::new([0; 8192]);

/// Does what a secret-related action says (true), or nothing (false): `leave_secret`
/// leaves a secret in memory it never frees (1 MiB it grows its memory for, and 64 KiB
/// of its initial memory), `find_secret` grows its memory by more than that and logs
/// how many words of the secret all of its memory holds (what an earlier instance left
/// there, were memory ever handed from one instance to another), and
/// `leave_and_find_secret` both, which shows the search finds what is there.
fn secret(action: &str) -> bool {
    let (leave, find) = match action {
        "leave_secret" => (true, false),
        "find_secret" => (false, true),
        "leave_and_find_secret" => (true, true),
        _ => return false,
    };
    if leave {
        std::mem::forget(std::hint::black_box(vec![SECRET_WORD; 1 << 17]));
        if let Ok(mut left) = LEFT.lock() {
            left.fill(SECRET_WORD);
        }
    }
    if find {
        // As much memory as a leaver grew, and more: read, not written.
        let room = std::hint::black_box(vec![0u64; 1 << 18]);
        log::notice(&format!("found {} secret words", secret_words()));
        drop(room);
    }
    true
}

/// The words of this instance's whole linear memory that are [`SECRET_WORD`].
#[expect(
    unsafe_code,
    reason = "reads every byte of its own memory, as an attacker would"
)]
fn secret_words() -> usize {
    let end = memory_end();
    let mut found = 0;
    // Address 0 is the null pointer; the first words are the language runtime's.
    let mut address = 64;
    while address + 8 <= end {
        // SAFETY: every address below the memory's size is in bounds, and any bit
        // pattern is a u64.
        let word = unsafe { core::ptr::read_volatile(address as *const u64) };
        if word == SECRET_WORD {
            found += 1;
        }
        address += 8;
    }
    found
}

/// The size of this instance's linear memory.
#[cfg(target_arch = "wasm32")]
fn memory_end() -> usize {
    core::arch::wasm32::memory_size(0) * 65536
}

/// Built natively only to be linted: no linear memory to read.
#[cfg(not(target_arch = "wasm32"))]
fn memory_end() -> usize {
    0
}
