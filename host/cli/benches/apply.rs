//! Benchmark of `wconverge apply` through the release binary: start-up, no-op re-apply of
//! 1,000 and 10,000 files (wall time and peak memory), and the same no-op done by a plain
//! native Rust loop as the floor; then 2,000 files from a manifest with plain content
//! against content that is a lazy value reading node attributes; then a 2,000-entry tree
//! copied by one `recurse` resource against a native copy; then a no-op of 500
//! installed packages and of 200 users against the empty manifest. Prints figures; asserts nothing about
//! time.
//!
//! Run it with `scripts/bench` (or `cargo bench -p wconverge-cli --bench apply`).
//! Each measured run is a separate `wconverge` process started through a helper
//! process of this binary, so each peak RSS belongs to that run alone.

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::{Sample, cores, load, measure, median, ms};

use support::Dirs as Bench;

impl Bench {
    /// A catalog of `n_files` files, 100 per directory.
    /// A manifest of `n_files` files (and as many node attributes), with content either
    /// plain or lazy, reading the node attribute.
    fn lazy_manifest(&self, lazy: bool, n_files: usize) -> PathBuf {
        let name = if lazy { "lazy" } else { "plain" };
        let mut text = String::new();
        for idx in 0..n_files {
            let dir = self
                .root
                .join("files")
                .join(format!("{name}-{:03}", idx / 100));
            std::fs::create_dir_all(&dir).expect("dir");
            text.push_str(&format!(
                "$node.default['apps']['app{idx}'] = {{ 'port' => {}, 'name' => 'app {idx}' }}\n",
                8000 + idx
            ));
            let content = if lazy {
                format!("lazy {{ \"port = ${{node['apps']['app{idx}']['port']}}\\n\" }}")
            } else {
                format!("\"port = {}\\n\"", 8000 + idx)
            };
            text.push_str(&format!(
                "file {{ '{}': content => {content} }}\n",
                dir.join(format!("file-{idx:05}.conf")).display()
            ));
        }
        let path = self.root.join(format!("{name}.wcv"));
        std::fs::write(&path, text).expect("manifest");
        path
    }

    fn catalog(&self, name: &str, n_files: usize) -> (PathBuf, Vec<(PathBuf, String)>) {
        support::files_catalog(&self.root, name, n_files)
    }
}

fn main() {
    support::serve_as_helper();
    let bench = Bench::new("wcv-bench");
    let env = bench.env();
    let policy = bench.policy();
    let policy_arg = policy.to_str().expect("utf-8");
    println!(
        "wconverge apply benchmark ({} cores, load average {})",
        cores(),
        load()
    );
    println!("binary: {}\n", support::WCONVERGE);

    let empty = bench.root.join("empty.json");
    std::fs::write(&empty, r#"{"format_version": 1, "resources": []}"#).expect("empty");
    let empty_arg = empty.to_str().expect("utf-8");
    let startup: Vec<Sample> = (0..21)
        .map(|_| measure(&["apply", empty_arg, "--policy", policy_arg], &env))
        .collect();
    let startup_wall = median(startup.iter().map(|sample| sample.wall).collect());
    let startup_rss = startup
        .iter()
        .map(|sample| sample.peak_rss_kib)
        .max()
        .unwrap_or(0);
    println!(
        "start-up, empty catalog (median of 21): {}, peak RSS {} MiB",
        ms(startup_wall),
        startup_rss / 1024
    );

    // A manifest with the built-in policy: the compiler needs every plugin's types,
    // which come from the summaries the first run leaves in the cache; no plugin is
    // loaded. The floor is the same process applying an empty JSON catalog.
    let empty_wcv = bench.root.join("empty-startup.wcv");
    std::fs::write(&empty_wcv, "").expect("empty manifest");
    let empty_wcv_arg = empty_wcv.to_str().expect("utf-8");
    let _ = measure(&["apply", empty_wcv_arg], &env);
    let manifest_startup: Vec<Sample> = (0..21)
        .map(|_| measure(&["apply", empty_wcv_arg], &env))
        .collect();
    let catalog_startup: Vec<Sample> = (0..21)
        .map(|_| measure(&["apply", empty_arg], &env))
        .collect();
    let manifest_wall = median(manifest_startup.iter().map(|sample| sample.wall).collect());
    let catalog_wall = median(catalog_startup.iter().map(|sample| sample.wall).collect());
    let manifest_rss = manifest_startup
        .iter()
        .map(|sample| sample.peak_rss_kib)
        .max()
        .unwrap_or(0);
    println!(
        "start-up, empty `.wcv` manifest, built-in policy (median of 21): {}, peak RSS {} MiB; \
         floor (an empty JSON catalog): {}; {:.2}x (target: at most 2x, under 10 ms)",
        ms(manifest_wall),
        manifest_rss / 1024,
        ms(catalog_wall),
        manifest_wall.as_secs_f64() / catalog_wall.as_secs_f64().max(1e-9)
    );

    let (one, _) = bench.catalog("one", 1);
    let one_arg = one.to_str().expect("utf-8");
    let _ = std::fs::remove_dir_all(&bench.cache);
    let cold = measure(&["apply", one_arg, "--policy", policy_arg], &env);
    assert_eq!(cold.exit_code, 2);
    let warm: Vec<Duration> = (0..11)
        .map(|_| measure(&["apply", one_arg, "--policy", policy_arg], &env).wall)
        .collect();
    println!(
        "one file, first run with an empty plugin cache (compiles the file plugin): {}",
        ms(cold.wall)
    );
    println!(
        "one file, no-op with a warm cache (median of 11): {}\n",
        ms(median(warm))
    );

    println!("| files | no-op re-apply (median) | peak RSS | native floor (median) | ratio |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for (n_files, runs) in [(1_000usize, 7usize), (10_000, 5)] {
        let (catalog, files) = bench.catalog(&format!("n{n_files}"), n_files);
        let catalog_arg = catalog.to_str().expect("utf-8");
        let first = measure(&["apply", catalog_arg, "--policy", policy_arg], &env);
        assert_eq!(first.exit_code, 2, "the first apply creates the files");
        let samples: Vec<Sample> = (0..runs)
            .map(|_| measure(&["apply", catalog_arg, "--policy", policy_arg], &env))
            .collect();
        assert!(
            samples.iter().all(|sample| sample.exit_code == 0),
            "re-apply is a no-op"
        );
        let wall = median(samples.iter().map(|sample| sample.wall).collect());
        let rss = samples
            .iter()
            .map(|sample| sample.peak_rss_kib)
            .max()
            .unwrap_or(0);
        let native = median((0..runs).map(|_| support::native_noop(&files)).collect());
        println!(
            "| {n_files} | {} | {} MiB | {} | {:.1}x |",
            ms(wall),
            rss / 1024,
            ms(native),
            wall.as_secs_f64() / native.as_secs_f64()
        );
    }

    // Lazy values: the same no-op re-apply from a manifest, with each file's content a
    // lazy value reading one of 2,000 node attributes, against plain content.
    println!("\n| 2,000 files from a manifest | no-op re-apply (median of 5) | peak RSS |");
    println!("| --- | ---: | ---: |");
    for lazy in [false, true] {
        let manifest = bench.lazy_manifest(lazy, 2_000);
        let manifest_arg = manifest.to_str().expect("utf-8");
        let first = measure(&["apply", manifest_arg, "--policy", policy_arg], &env);
        assert_eq!(first.exit_code, 2, "the first apply creates the files");
        let samples: Vec<Sample> = (0..5)
            .map(|_| measure(&["apply", manifest_arg, "--policy", policy_arg], &env))
            .collect();
        assert!(samples.iter().all(|sample| sample.exit_code == 0));
        let rss = samples
            .iter()
            .map(|sample| sample.peak_rss_kib)
            .max()
            .unwrap_or(0);
        println!(
            "| {} | {} | {} MiB |",
            if lazy {
                "content `lazy { ... $node[...] ... }`, 2,000 node attributes"
            } else {
                "plain content"
            },
            ms(median(samples.iter().map(|sample| sample.wall).collect())),
            rss / 1024
        );
    }
    recursive_tree(&bench, policy_arg, &env);
    packages(&bench, &env);
    users(&bench, &env);
    let _ = std::fs::remove_dir_all(&bench.root);
}

/// A no-op of 200 `user` resources (system users this benchmark creates and removes),
/// against the empty manifest: passwd and group are each read once for all of them.
fn users(bench: &Bench, env: &[(&str, &Path)]) {
    if !nix::unistd::geteuid().is_root() {
        println!("\n(not root: no user figures)");
        return;
    }
    struct Remove(Vec<String>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for name in &self.0 {
                let _ = Command::new("userdel").arg(name).output();
            }
        }
    }
    let names: Vec<String> = (0..200)
        .map(|n| format!("wcvb{}u{n}", std::process::id()))
        .collect();
    let created = Remove(names.clone());
    for name in &names {
        let status = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ])
            .status()
            .expect("useradd");
        assert!(status.success(), "useradd {name}");
    }
    let manifest = bench.root.join("users.wcv");
    let text: String = names
        .iter()
        .map(|name| format!("user {{ '{name}': shell => '/usr/sbin/nologin' }}\n"))
        .collect();
    std::fs::write(&manifest, text).expect("manifest");
    let empty = bench.root.join("empty.wcv");
    let (empty_wall, _) = noop_median(&empty, env);
    let (wall, rss) = noop_median(&manifest, env);
    println!(
        "| 200 `user` resources (one getent passwd and one getent group for all) | {} | {} MiB | {} |",
        ms(wall),
        rss / 1024,
        ms(wall.saturating_sub(empty_wall))
    );
    drop(created);
}

/// A no-op of 500 `package` resources (packages this machine has installed) with the
/// built-in policy, against the empty manifest: the state of all of them is read in one
/// `dpkg-query`.
fn packages(bench: &Bench, env: &[(&str, &Path)]) {
    let listed = Command::new("dpkg-query")
        .args(["-W", "-f", "${Package}\t${db:Status-Abbrev}\n"])
        .output();
    let Ok(listed) = listed else {
        println!("\n(no dpkg-query on this machine: no package figures)");
        return;
    };
    let names: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(_, status)| status.trim() == "ii")
        .map(|(name, _)| name.to_owned())
        .take(500)
        .collect();
    let empty = bench.root.join("empty.wcv");
    std::fs::write(&empty, "").expect("empty manifest");
    let manifest = bench.root.join("packages.wcv");
    let text: String = names
        .iter()
        .map(|name| format!("package {{ '{name}': ensure => installed }}\n"))
        .collect();
    std::fs::write(&manifest, text).expect("manifest");
    let (empty_wall, _) = noop_median(&empty, env);
    let (wall, rss) = noop_median(&manifest, env);
    println!(
        "\n| no-op, built-in policy (median of 7) | wall | peak RSS | above the empty manifest |"
    );
    println!("| --- | ---: | ---: | ---: |");
    println!("| empty manifest | {} | | |", ms(empty_wall));
    println!(
        "| {} `package` resources (installed: one dpkg-query for all) | {} | {} MiB | {} |",
        names.len(),
        ms(wall),
        rss / 1024,
        ms(wall.saturating_sub(empty_wall))
    );
}

/// A source tree of 2,000 entries (20 directories of 99 files) copied by one `file`
/// resource with `recurse => true`: the first apply and the no-op re-apply, against the
/// same work done natively (the copy: temporary file, fchmod, write, fsync, rename,
/// fsync of the directory; the no-op: lstat and read of both sides, compare).
fn recursive_tree(bench: &Bench, policy_arg: &str, env: &[(&str, &Path)]) {
    let source = bench.root.join("files/tree-source");
    let mut files = Vec::new();
    for dir in 0..20 {
        let dir_path = source.join(format!("d{dir:02}"));
        std::fs::create_dir_all(&dir_path).expect("source dir");
        for file in 0..99 {
            let path = dir_path.join(format!("f{file:02}.conf"));
            std::fs::write(&path, format!("setting_{dir}_{file} = on\n")).expect("source file");
            files.push((dir, path));
        }
    }
    let dest = bench.root.join("files/tree");
    let manifest = bench.root.join("tree.wcv");
    std::fs::write(
        &manifest,
        format!(
            "file {{ '{}': ensure => directory, source => '{}', recurse => true }}\n",
            dest.display(),
            source.display()
        ),
    )
    .expect("manifest");
    let manifest_arg = manifest.to_str().expect("utf-8");
    let firsts: Vec<Duration> = (0..3)
        .map(|_| {
            let _ = std::fs::remove_dir_all(&dest);
            let sample = measure(&["apply", manifest_arg, "--policy", policy_arg], env);
            assert_eq!(sample.exit_code, 2, "the first apply copies the tree");
            sample.wall
        })
        .collect();
    let noops: Vec<Sample> = (0..5)
        .map(|_| measure(&["apply", manifest_arg, "--policy", policy_arg], env))
        .collect();
    assert!(
        noops.iter().all(|sample| sample.exit_code == 0),
        "re-apply is a no-op"
    );
    let native_dest = bench.root.join("files/native-tree");
    let native_firsts: Vec<Duration> = (0..3)
        .map(|_| {
            let _ = std::fs::remove_dir_all(&native_dest);
            native_copy(&source, &native_dest, &files)
        })
        .collect();
    let native_noops: Vec<Duration> = (0..5)
        .map(|_| native_compare(&source, &native_dest, &files))
        .collect();
    let (first, native_first) = (median(firsts), median(native_firsts));
    let (noop, native_noop) = (
        median(noops.iter().map(|sample| sample.wall).collect()),
        median(native_noops),
    );
    println!(
        "\n| 2,000-entry tree, one `recurse` resource | wconverge (median) | native floor | ratio |"
    );
    println!("| --- | ---: | ---: | ---: |");
    println!(
        "| first apply (copy) | {} | {} | {:.1}x |",
        ms(first),
        ms(native_first),
        first.as_secs_f64() / native_first.as_secs_f64()
    );
    println!(
        "| no-op re-apply | {} (peak RSS {} MiB) | {} | {:.1}x |",
        ms(noop),
        noops
            .iter()
            .map(|sample| sample.peak_rss_kib)
            .max()
            .unwrap_or(0)
            / 1024,
        ms(native_noop),
        noop.as_secs_f64() / native_noop.as_secs_f64()
    );
}

/// The median wall time of 7 no-op applies of `manifest` with the built-in policy, and
/// their largest peak RSS in KiB.
fn noop_median(manifest: &Path, env: &[(&str, &Path)]) -> (Duration, i64) {
    let arg = manifest.to_str().expect("utf-8");
    let samples: Vec<Sample> = (0..7).map(|_| measure(&["apply", arg], env)).collect();
    assert!(
        samples.iter().all(|sample| sample.exit_code == 0),
        "a no-op"
    );
    support::summary(&samples)
}

fn native_copy(source: &Path, dest: &Path, files: &[(usize, PathBuf)]) -> Duration {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let started = Instant::now();
    for dir in 0..20 {
        std::fs::create_dir_all(dest.join(format!("d{dir:02}"))).expect("dir");
    }
    for (_, path) in files {
        let relative = path.strip_prefix(source).expect("beneath");
        let target = dest.join(relative);
        let temporary = target.with_extension("tmp");
        let content = std::fs::read(path).expect("read");
        let mut file = std::fs::File::create(&temporary).expect("create");
        file.set_permissions(std::fs::Permissions::from_mode(0o644))
            .expect("fchmod");
        file.write_all(&content).expect("write");
        file.sync_all().expect("fsync");
        std::fs::rename(&temporary, &target).expect("rename");
        std::fs::File::open(target.parent().expect("parent"))
            .and_then(|dir| dir.sync_all())
            .expect("fsync dir");
    }
    started.elapsed()
}

fn native_compare(source: &Path, dest: &Path, files: &[(usize, PathBuf)]) -> Duration {
    let started = Instant::now();
    let mut same = 0;
    for (_, path) in files {
        let target = dest.join(path.strip_prefix(source).expect("beneath"));
        let (a, b) = (
            std::fs::symlink_metadata(path).expect("stat"),
            std::fs::symlink_metadata(&target).expect("stat"),
        );
        if a.len() == b.len()
            && std::fs::read(path).expect("read") == std::fs::read(&target).expect("read")
        {
            same += 1;
        }
    }
    assert_eq!(same, files.len());
    started.elapsed()
}
