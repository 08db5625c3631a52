//! What the benchmarks of whole `wconverge` processes share: a run measured in a helper
//! process of the benchmark (so each peak RSS belongs to that run alone), medians, and
//! the machine's state.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) const WCONVERGE: &str = env!("CARGO_BIN_EXE_wconverge");

/// The flag that makes a benchmark binary the helper process of [`measure`].
pub(crate) const MEASURE_CHILD: &str = "--measure-child";

pub(crate) struct Sample {
    pub(crate) wall: Duration,
    pub(crate) peak_rss_kib: i64,
    pub(crate) exit_code: i32,
}

/// In the helper process: runs the command, then reports its wall time and its peak
/// RSS (the maximum over this helper's children, of which there is one).
pub(crate) fn measure_child(command: &[String]) -> ! {
    let started = Instant::now();
    let status = Command::new(&command[0])
        .args(&command[1..])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the measured command starts");
    let wall = started.elapsed();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    println!(
        "{} {} {}",
        wall.as_nanos(),
        usage.max_rss(),
        status.code().unwrap_or(-1)
    );
    std::process::exit(0);
}

/// Becomes the helper process when this benchmark binary was started as one.
pub(crate) fn serve_as_helper() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(position) = args.iter().position(|arg| arg == MEASURE_CHILD) {
        measure_child(&args[position + 1..]);
    }
}

/// One `wconverge` run with `args` and `env`, measured by a helper process.
pub(crate) fn measure(args: &[&str], env: &[(&str, &Path)]) -> Sample {
    let mut command = Command::new(std::env::current_exe().expect("own path"));
    command.arg(MEASURE_CHILD).arg(WCONVERGE).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("helper runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<i64> = text
        .split_whitespace()
        .map(|field| field.parse().expect("helper prints numbers"))
        .collect();
    assert_eq!(fields.len(), 3, "helper output: {text}");
    Sample {
        wall: Duration::from_nanos(u64::try_from(fields[0]).expect("positive")),
        peak_rss_kib: fields[1],
        exit_code: i32::try_from(fields[2]).expect("exit code"),
    }
}

pub(crate) fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

/// The median wall time and the highest peak RSS (KiB) of `samples`.
pub(crate) fn summary(samples: &[Sample]) -> (Duration, i64) {
    (
        median(samples.iter().map(|sample| sample.wall).collect()),
        samples
            .iter()
            .map(|sample| sample.peak_rss_kib)
            .max()
            .unwrap_or(0),
    )
}

pub(crate) fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// A benchmark's directory under the system's temporary one, with the plugin cache
/// and the state directory of the runs it measures.
pub(crate) struct Dirs {
    pub(crate) root: PathBuf,
    pub(crate) cache: PathBuf,
    pub(crate) state: PathBuf,
}

impl Dirs {
    /// A new, empty `PREFIX-PID` with a `files/` directory in it.
    pub(crate) fn new(prefix: &str) -> Dirs {
        let root = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("files")).expect("bench dir");
        Dirs {
            cache: root.join("cache"),
            state: root.join("state"),
            root,
        }
    }

    /// `ROOT/policy.toml`, granting the file plugin `ROOT/files` read-write.
    pub(crate) fn policy(&self) -> PathBuf {
        let path = self.root.join("policy.toml");
        std::fs::write(
            &path,
            format!(
                "[plugins.file]\nsource = \"builtin\"\ndirectories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
                self.root.join("files").display()
            ),
        )
        .expect("policy");
        path
    }

    /// The environment of a measured run: this cache and state directory.
    pub(crate) fn env(&self) -> Vec<(&'static str, &Path)> {
        vec![
            ("WCONVERGE_CACHE_DIR", self.cache.as_path()),
            ("WCONVERGE_STATE_DIR", self.state.as_path()),
        ]
    }
}

/// A JSON catalog `ROOT/NAME.json` of `n_files` files under `ROOT/files/NAME-DDD/`, 100
/// to a directory, mode 0644, and each file with its content.
pub(crate) fn files_catalog(
    root: &Path,
    name: &str,
    n_files: usize,
) -> (PathBuf, Vec<(PathBuf, String)>) {
    let mut resources = Vec::with_capacity(n_files);
    let mut files = Vec::with_capacity(n_files);
    for idx in 0..n_files {
        let dir = root.join("files").join(format!("{name}-{:03}", idx / 100));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(format!("file-{idx:05}.conf"));
        let content = format!(
            "# managed by wconverge\nkey = value-{idx}\n{}\n",
            "x".repeat(150)
        );
        resources.push(serde_json::json!({
            "type": "file",
            "title": path.to_str().expect("utf-8"),
            "attributes": { "content": content, "mode": "0644" },
        }));
        files.push((path, content));
    }
    let catalog = serde_json::json!({ "format_version": 1, "resources": resources });
    let path = root.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string(&catalog).expect("json")).expect("catalog");
    (path, files)
}

/// What the file provider checks on a no-op, natively: the entry is a regular file, its
/// mode, its content.
pub(crate) fn native_noop(files: &[(PathBuf, String)]) -> Duration {
    let started = Instant::now();
    let mut in_sync = 0usize;
    let mut buffer = Vec::new();
    for (path, content) in files {
        let metadata = std::fs::symlink_metadata(path).expect("stat");
        buffer.clear();
        std::fs::File::open(path)
            .and_then(|mut file| file.read_to_end(&mut buffer))
            .expect("read");
        if metadata.file_type().is_file()
            && metadata.mode() & 0o7777 == 0o644
            && buffer == content.as_bytes()
        {
            in_sync += 1;
        }
    }
    assert_eq!(in_sync, files.len());
    started.elapsed()
}
