//! Under `--jobs`, a barrier (a resource whose type does not bound what it touches)
//! keeps its place in manifest order, and resources bounded by their paths overlap only
//! where their paths are apart.

use super::{MemoryHost, Mode, catalog, prepare};

#[test]
fn under_jobs_a_barrier_keeps_its_place_in_manifest_order() {
    // No relationships: `test` resources (a type that declares nothing of what it
    // touches) are barriers; `free` ones touch nothing and `path` ones their path.
    let resources = r#"{"type": "free", "title": "f1"},
           {"type": "path", "title": "/srv/a"},
           {"type": "test", "title": "c"},
           {"type": "free", "title": "f2"},
           {"type": "path", "title": "/srv/b"},
           {"type": "path", "title": "/srv/b/inner"},
           {"type": "test", "title": "a"},
           {"type": "test", "title": "b"},
           {"type": "free", "title": "f3"},
           {"type": "path", "title": "/srv/c"},
           {"type": "free", "title": "f4"},
           {"type": "test", "title": "d"}"#;
    let catalog = catalog(resources);
    let order: Vec<String> = catalog
        .resources
        .iter()
        .map(|resource| resource.reference().to_string())
        .collect();
    for _ in 0..20 {
        let host = MemoryHost::default();
        let prepared = prepare(&catalog, &host).expect("valid");
        crate::run_with_jobs(&prepared, &host, Mode::Apply, 4);
        let events = host.events.lock().expect("events").clone();
        let at = |event: String| {
            events
                .iter()
                .position(|seen| *seen == event)
                .unwrap_or_else(|| panic!("{event} in {events:?}"))
        };
        for (position, barrier) in order.iter().enumerate() {
            if !barrier.starts_with("Test[") {
                continue;
            }
            let (start, end) = (at(format!("start {barrier}")), at(format!("end {barrier}")));
            for before in &order[..position] {
                assert!(
                    at(format!("end {before}")) < start,
                    "{before} before {barrier}: {events:?}"
                );
            }
            for later in &order[position + 1..] {
                assert!(
                    at(format!("start {later}")) > end,
                    "{later} after {barrier}: {events:?}"
                );
            }
        }
        // A path beneath another is written after it.
        assert!(at("end Path[/srv/b]".to_owned()) < at("start Path[/srv/b/inner]".to_owned()));
    }
}
