//! The host's own path operations answer as WASI does: a plugin written for WASI makes
//! link, rename, set-times, unlink, mkdir and rmdir calls in its grant (wasi-libc's `*at`
//! functions, through the hostile test plugin), and each gets the answer wasmtime-wasi
//! would give (cap-std's reading of trailing slashes and dots, `symlink-follow`, links
//! out of the grant), and nothing outside the grant changes.

use crate::support::{Machine, entry};
use serde_json::json;
use std::os::unix::fs::MetadataExt;

#[test]
fn path_operations_answer_as_wasi_and_change_nothing_outside_the_grant() {
    let machine = Machine::new();
    let grant = machine.root().join("grant");
    let outside = machine.root().join("outside");
    std::fs::create_dir_all(grant.join("dir")).expect("grant/dir");
    std::fs::create_dir(&outside).expect("outside");
    std::fs::write(outside.join("victim"), "root's\n").expect("victim");
    std::fs::write(grant.join("file"), "x").expect("file");
    std::os::unix::fs::symlink("../outside", grant.join("outside")).expect("link");
    let before = std::fs::metadata(&outside).expect("outside");
    let policy = crate::hardening::policy_for(&machine, &grant, "");
    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": grant.join("probe").to_str().expect("utf-8"),
          "attributes": { "action": "wasi_paths", "target": grant.to_str().expect("utf-8") } },
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 2);
    let probe = entry(
        &report,
        &format!("Hostile[{}]", grant.join("probe").display()),
    );
    let said = probe["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .filter_map(|log| log["message"].as_str())
        .find(|message| message.starts_with("wasi paths: "))
        .unwrap_or_else(|| panic!("the answers: {probe:#}"))
        .to_owned();
    // What wasmtime-wasi 48 answers (its `link_at`, `rename_at`, `set_times_at` and
    // cap-std's `open_parent`, `rename`, `hard_link`), through wasi-libc's errno.
    for expected in [
        "link file=ok",
        "link outside/=EPERM",
        "rename outside/=ENOTDIR",
        "rename outside/.=EPERM",
        "rename file/=ENOTDIR",
        "rename dir/=ok",
        "rename to outside/.=EPERM",
        "set-times-follow outside=EPERM",
        "set-times-follow outside/=EPERM",
        "set-times-nofollow outside/=EPERM",
        "set-times-nofollow outside=ok",
        "unlink outside/=EPERM",
        "mkdir new/=ok",
        "link to l6/=ENOENT",
        "link onto itself=EEXIST",
        "link a directory=EPERM",
        "rename to x/=ENOTDIR",
        "unlink file/=ENOTDIR",
        "rmdir new/=EINVAL",
        "open file/=ENOTDIR",
        "open dir2/=ok",
        "symlink at missing/=ENOENT",
        "symlink at file/=ENOTDIR",
        "symlink at dir2/=EEXIST",
        "link-follow outside=invalid",
    ] {
        assert!(said.contains(expected), "missing `{expected}` in: {said}");
    }
    // Outside the grant: the same entries, content and times.
    let after = std::fs::metadata(&outside).expect("outside");
    assert_eq!(
        (before.mtime(), before.mtime_nsec(), before.atime()),
        (after.mtime(), after.mtime_nsec(), after.atime())
    );
    let entries: Vec<String> = std::fs::read_dir(&outside)
        .expect("outside")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(entries, ["victim"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("victim")).expect("victim"),
        "root's\n"
    );
    assert!(grant.join("dir2").is_dir() && grant.join("new").is_dir());
    assert!(
        grant.join("file").is_file(),
        "no failed change moved the file"
    );
}
