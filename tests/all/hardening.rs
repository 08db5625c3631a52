//! The sandbox holds against a hostile local user, a hostile plugin and a
//! hostile manifest. Each test stands for a class of attacks; the races run for a
//! bounded count as a real unprivileged user the test creates and removes.

use crate::attacker::{LocalUser, escape_syscalls, open_to_all, renameat2_syscall};
use crate::support::{Machine, Run, entry, sha256_of};
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// A policy giving the `file` and `template` plugins read-write access to `dir` (as the
/// built-in policy gives them `/`), and the hostile test plugin `dir` too.
pub(crate) fn policy_for(
    machine: &Machine,
    dir: &Path,
    hostile_limits: &str,
) -> std::path::PathBuf {
    let dir = dir.display();
    let text = format!(
        r#"[plugins.file]
source = "builtin"
directories = [{{ path = "{dir}", access = "read-write" }}]

[plugins.template]
source = "builtin"
directories = [{{ path = "{dir}", access = "read-write" }}]

[plugins.hostile]
source = "{hostile}"
sha256 = "{hostile_sha}"
directories = [{{ path = "{dir}", access = "read-write" }}]
[plugins.hostile.limits]
{hostile_limits}
"#,
        hostile = wconverge_tests::HOSTILE,
        hostile_sha = sha256_of(wconverge_tests::HOSTILE),
    );
    let path = machine.root().join("hardening-policy.toml");
    std::fs::write(&path, text).expect("policy written");
    path
}

/// A machine a local user can enter, the user, and her home directory in it (hers,
/// others may enter it but not write it).
fn with_attacker() -> (Machine, LocalUser, std::path::PathBuf) {
    let machine = Machine::new();
    open_to_all(machine.root());
    let user = LocalUser::create();
    let home = user.home_in(machine.root());
    (machine, user, home)
}

/// The peak memory `time -f %M` printed last on standard error.
fn peak_kib(run: &Run) -> u64 {
    run.stderr
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak from time(1): {run:#?}"))
}

/// Runs `wconverge` with `args`, killing it if it is still running after `limit`: a
/// run that hangs fails the test instead of hanging it.
fn run_bounded(machine: &Machine, args: &[&str], limit: Duration) -> (Run, Duration) {
    let started = Instant::now();
    let mut child = machine
        .command(crate::support::WCONVERGE)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("wconverge starts");
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wconverge {args:?} was still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().expect("output");
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    (run, started.elapsed())
}

/// Prints a figure of a test (escapes per race attempts, time to fail, memory), which
/// `cargo test -- --nocapture` shows.
#[expect(
    clippy::print_stderr,
    reason = "the figures are printed for whoever runs it"
)]
fn figure(text: &str) {
    eprintln!("{text}");
}

fn apply_args<'a>(catalog: &'a Path, policy: &'a Path) -> Vec<&'a str> {
    vec![
        "apply",
        catalog.to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
        "--format",
        "json",
    ]
}

/// Class 1. The attacker swaps her `.ssh` between a real directory and a symlink to a
/// root directory, as fast as the kernel lets her (`RENAME_EXCHANGE`), while root
/// converges her `authorized_keys`. Before, the grant was checked with one resolution
/// by name and opened with another: root's file was replaced and given to her in about
/// 4% of runs. Now the directory is walked once, by descriptor, and the walk refuses her
/// link whenever it sees it.
#[test]
fn a_grant_is_resolved_once_by_descriptor_while_a_user_swaps_a_symlink() {
    let (machine, user, home) = with_attacker();
    let victim = machine.root().join("victim");
    std::fs::create_dir(&victim).expect("victim dir");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let precious = victim.join("authorized_keys");
    std::fs::write(&precious, "root's key\n").expect("root's file");
    std::fs::create_dir(home.join(".ssh")).expect(".ssh");
    user.give(&home.join(".ssh"));
    std::os::unix::fs::symlink(&victim, home.join(".ssh.evil")).expect("link");
    user.give(&home.join(".ssh.evil"));
    let keys = home.join(".ssh/authorized_keys");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": keys.to_str().expect("utf-8"),
          "attributes": { "content": "her key\n", "owner": user.name, "mode": "0600" } },
    ]));
    let policy = policy_for(&machine, machine.root(), "");
    let attacker = user.spawn_perl(
        &home,
        "my ($nr) = @ARGV; my ($a, $b) = ('.ssh', '.ssh.evil');
         while (1) { syscall($nr, -100, $a, -100, $b, 2) == 0 or die \"renameat2: $!\" }",
        &[renameat2_syscall()],
    );
    let attempts = 200;
    let (mut converged, mut refused, mut escapes) = (0, 0, 0);
    let mut other = Vec::new();
    for _ in 0..attempts {
        let (run, _) = run_bounded(
            &machine,
            &apply_args(&catalog, &policy),
            Duration::from_secs(60),
        );
        let metadata = std::fs::symlink_metadata(&precious).expect("root's file is still there");
        let content = std::fs::read_to_string(&precious).unwrap_or_default();
        if metadata.uid() != 0 || content != "root's key\n" {
            escapes += 1;
            std::fs::write(&precious, "root's key\n").expect("restored");
            std::os::unix::fs::chown(&precious, Some(0), Some(0)).expect("restored");
        }
        match run.code {
            0 | 2 => converged += 1,
            4 if run.stdout.contains("is a symlink owned by uid") => refused += 1,
            _ => other.push(run),
        }
    }
    let said = attacker.stop();
    figure(&format!(
        "class 1: {attempts} runs under the race: {converged} converged, {refused} refused the \
         link, {escapes} escapes"
    ));
    assert_eq!(escapes, 0, "root's file was changed through her link");
    assert!(
        other.is_empty(),
        "unexpected runs: {other:#?}\nattacker: {said}"
    );
    // The race was on: some runs met the link, and some the directory.
    assert!(
        refused > 0,
        "no run met the symlink; the race did not happen"
    );
    assert!(converged > 0, "no run met the directory");
}

/// Class 2. A file the attacker hard-linked into her directory (here by root, as she
/// could where `fs.protected_hardlinks` is off) is another file: its mode and owner are
/// not changed in place, it is not opened for writing (nor truncated), and managing its
/// content replaces the name with a new file.
#[test]
fn a_hard_link_in_a_directory_others_can_write_is_never_changed_in_place() {
    let (machine, user, home) = with_attacker();
    let vault = machine.root().join("vault");
    std::fs::create_dir(&vault).expect("vault");
    std::fs::set_permissions(&vault, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let secret = vault.join("shadow");
    std::fs::write(&secret, "root:secret-hash\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let link = home.join("app.conf");
    std::fs::hard_link(&secret, &link).expect("hard link");
    let link_path = link.to_str().expect("utf-8");
    let policy = policy_for(&machine, machine.root(), "");
    let untouched = || {
        let metadata = std::fs::metadata(&secret).expect("secret");
        assert_eq!(
            std::fs::read_to_string(&secret).expect("secret"),
            "root:secret-hash\n"
        );
        assert_eq!(metadata.mode() & 0o7777, 0o600);
        assert_eq!((metadata.uid(), metadata.gid()), (0, 0));
    };

    // Mode and owner only: refused.
    let catalog = machine.catalog(json!([
        { "type": "file", "title": link_path,
          "attributes": { "ensure": "present", "mode": "0644", "owner": user.name } },
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 4);
    // Refused as a file of another owner in her directory (it could have been moved
    // there), before its links are even counted.
    let error = crate::support::first_error(&report);
    assert!(
        error.contains("could have moved it there") && error.contains("in place"),
        "{error}"
    );
    untouched();

    // A plugin opening it for writing (with truncation): refused before anything.
    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": home.join("x").to_str().expect("utf-8"),
          "attributes": { "action": "write_file", "target": link_path } },
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 4);
    let resource = &report["resources"][0];
    assert!(
        resource.to_string().contains("could have moved it there"),
        "the refusal is explained with the resource: {resource:#}"
    );
    untouched();

    // Content: the name gets a new file; the other link keeps the old one.
    let catalog = machine.catalog(json!([
        { "type": "file", "title": link_path,
          "attributes": { "content": "managed\n", "mode": "0644", "owner": user.name } },
    ]));
    machine.apply_json(&catalog, &policy, &[], 2);
    untouched();
    let managed = std::fs::metadata(&link).expect("managed");
    assert_eq!(managed.nlink(), 1);
    assert_eq!(managed.uid(), user.uid);
    assert_eq!(
        std::fs::read_to_string(&link).expect("managed"),
        "managed\n"
    );
}

/// Class 2, raced. The attacker watches her directory and swaps every temporary file
/// wconverge creates there for a file of her own, hoping root gives hers the managed
/// owner and mode. Mode and owner are set through the descriptor of the file wconverge
/// created, so her files stay hers; a swap that lands is reported, not passed off as
/// converged.
#[test]
fn a_swapped_temporary_file_never_gets_the_managed_owner_or_mode() {
    let (machine, user, home) = with_attacker();
    let target = home.join("app.conf");
    let policy = policy_for(&machine, machine.root(), "");
    let attacker = user.spawn_perl(
        &home,
        r#"my $n = 0; $SIG{TERM} = sub { print "swapped $n\n"; exit 0 };
           while (1) {
             opendir(my $d, '.') or die; my @names = grep { /^\.app\.conf\.wcv-/ } readdir($d); closedir($d);
             for my $name (@names) {
               rename($name, "stolen-$n") or next;
               open(my $f, '>', $name) or next; print $f "planted\n"; close($f);
               chmod(0666, $name);
               $n++;
             }
           }"#,
        &[],
    );
    let attempts = 300;
    let mut reported = 0;
    for round in 0..attempts {
        let catalog = machine.catalog(json!([
            { "type": "file", "title": target.to_str().expect("utf-8"),
              "attributes": { "content": format!("managed {round}\n"), "owner": "root",
                              "group": "root", "mode": "4750" } },
        ]));
        let (run, _) = run_bounded(
            &machine,
            &apply_args(&catalog, &policy),
            Duration::from_secs(60),
        );
        // Converged, or failed saying the race was met: never anything else.
        assert!(run.code == 2 || run.code == 4, "{run:#?}");
        if run.code == 4 {
            // The rename of the temporary file is what failed, and why is the race: the
            // host saw the file swapped, or the attacker had moved it away.
            let report = run.json();
            let failed = &report["resources"][0];
            let error = failed["error"].as_str().unwrap_or_default();
            let logs = failed["logs"].to_string();
            assert!(
                error.starts_with("cannot rename `") && error.contains("/.app.conf.wcv-"),
                "{run:#?}"
            );
            assert!(
                logs.contains("was swapped for another file before it was renamed")
                    || error.ends_with("No such file or directory (os error 44)"),
                "{run:#?}"
            );
            reported += 1;
        }
    }
    let said = attacker.stop();
    let swaps: usize = said
        .lines()
        .find_map(|line| line.strip_prefix("swapped "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("the attacker did not report: {said}"));
    let mut escapes = 0;
    for dir_entry in std::fs::read_dir(&home).expect("home") {
        let path = dir_entry.expect("entry").path();
        let Ok(content) = std::fs::read_to_string(&path) else {
            continue;
        };
        let metadata = std::fs::symlink_metadata(&path).expect("metadata");
        if content == "planted\n" && (metadata.uid() == 0 || metadata.mode() & 0o6000 != 0) {
            escapes += 1;
        }
    }
    figure(&format!(
        "class 2: {attempts} runs under the race: the attacker swapped {swaps} temporary \
         files, {reported} runs reported a swap or failed, {escapes} escapes"
    ));
    assert_eq!(
        escapes, 0,
        "a file of hers got root's owner or a set-ID mode"
    );
    assert!(
        swaps > 0 && reported > 0,
        "the attacker never won the race; the test proves nothing:\n{said}"
    );
}

/// Classes 2 and 3. A FIFO, a socket or a device where a plugin reads is refused by
/// kind, at once: before, a template whose source was a FIFO hung the run (holding the
/// run lock) until someone wrote to it.
#[test]
fn special_files_are_refused_by_kind_and_nothing_blocks() {
    let machine = Machine::new();
    let fifo = machine.root().join("files/source.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("fifo");
    let socket = machine.root().join("files/app.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("socket");
    // A character device (/dev/null's numbers): refused before it is opened.
    let device = machine.root().join("files/null");
    nix::sys::stat::mknod(
        &device,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 3),
    )
    .expect("mknod");
    let policy = policy_for(&machine, &machine.root().join("files"), "");
    let catalog = machine.catalog(json!([
        { "type": "template", "title": machine.file("rendered"),
          "attributes": { "source": fifo.to_str().expect("utf-8") } },
        { "type": "hostile", "title": machine.file("fifo"),
          "attributes": { "action": "read_file", "target": fifo.to_str().expect("utf-8") } },
        { "type": "hostile", "title": machine.file("socket"),
          "attributes": { "action": "read_file", "target": socket.to_str().expect("utf-8") } },
        { "type": "hostile", "title": machine.file("device"),
          "attributes": { "action": "write_file", "target": device.to_str().expect("utf-8") } },
    ]));
    let (run, took) = run_bounded(
        &machine,
        &apply_args(&catalog, &policy),
        Duration::from_secs(60),
    );
    figure(&format!("class 3: four special files refused in {took:?}"));
    assert_eq!(run.code, 4, "{run:#?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let said = |title: &str| entry(&report, title).to_string();
    let template = said(&format!("Template[{}]", machine.file("rendered")));
    assert!(template.contains("is a FIFO"), "{template}");
    let fifo_read = said(&format!("Hostile[{}]", machine.file("fifo")));
    assert!(fifo_read.contains("is a FIFO"), "{fifo_read}");
    let socket_read = said(&format!("Hostile[{}]", machine.file("socket")));
    assert!(socket_read.contains("is a socket"), "{socket_read}");
    let device_write = said(&format!("Hostile[{}]", machine.file("device")));
    assert!(
        device_write.contains("is a character device"),
        "{device_write}"
    );
    assert!(!Path::new(&machine.file("rendered")).exists());
}

/// Class 2. No instance sees what another left in its memory: idle instances are reused
/// only for the same phase and grants, and a new one's memory is the component's image
/// (were instances ever made in reused slots, as wasmtime's pooling allocator makes
/// them, a slot would have to be reset first: see `Runtime::new`). The hostile plugin
/// leaves a secret (1 MiB of one word in memory it grows, 64 KiB in its initial memory)
/// in the memory of each instance that checks or applies six resources, one directory
/// each, so that more instances end than stay idle; six more resources in other
/// directories then grow their memory past that and read every word of it, and find
/// none of it. A resource that leaves the secret and looks for it in one call shows
/// that the search finds it when it is there.
#[test]
fn an_instance_never_sees_what_an_earlier_one_left_in_memory() {
    let machine = Machine::new();
    let files = machine.root().join("files");
    let policy = policy_for(&machine, &files, "");
    let mut resources = vec![
        json!({ "type": "hostile", "title": machine.file("control/x"),
        "attributes": { "action": "leave_and_find_secret" } }),
    ];
    let mut finders = Vec::new();
    for (prefix, action) in [("left", "leave_secret"), ("found", "find_secret")] {
        for n in 0..6 {
            let dir = format!("{prefix}-{n}");
            std::fs::create_dir(files.join(&dir)).expect("directory");
            let title = machine.file(&format!("{dir}/x"));
            if action == "find_secret" {
                finders.push(title.clone());
            }
            resources.push(json!({ "type": "hostile", "title": title,
                "attributes": { "action": action } }));
        }
    }
    std::fs::create_dir(files.join("control")).expect("directory");
    let catalog = machine.catalog(serde_json::Value::Array(resources));
    let mut args = apply_args(&catalog, &policy);
    // One at a time, in catalog order: every finder comes after every leaver.
    args.extend(["--jobs", "1"]);
    let run = machine.run(&args);
    assert_eq!(run.code, 2, "{run:#?}");
    let report = run.json();
    let found = |title: &str| -> Vec<u64> {
        let logs = &entry(&report, &format!("Hostile[{title}]"))["logs"];
        let counts: Vec<u64> = logs
            .as_array()
            .expect("logs")
            .iter()
            .filter_map(|log| {
                log["message"]
                    .as_str()?
                    .strip_prefix("found ")?
                    .strip_suffix(" secret words")?
                    .parse()
                    .ok()
            })
            .collect();
        // Looked for by the instance that checked it and by the one that applied it.
        assert_eq!(counts.len(), 2, "{title}: {logs:#}");
        counts
    };
    for count in found(&machine.file("control/x")) {
        assert!(count >= 1 << 17, "the control found {count} words");
    }
    for finder in &finders {
        assert_eq!(found(finder), [0, 0], "{finder}");
    }
}

/// Class 3. A plugin that blocks inside the host (a sleep of an hour) fails its
/// resource at its wall-clock limit, and the run goes on.
#[test]
fn a_plugin_blocked_in_the_host_fails_at_its_wall_clock_limit() {
    let machine = Machine::new();
    let policy = policy_for(&machine, &machine.root().join("files"), "wall_seconds = 1");
    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": machine.file("sleeper"),
          "attributes": { "action": "sleep" } },
        { "type": "file", "title": machine.file("after"), "attributes": { "content": "x" } },
    ]));
    let (run, took) = run_bounded(
        &machine,
        &apply_args(&catalog, &policy),
        Duration::from_secs(60),
    );
    figure(&format!(
        "class 3: a sleeping plugin stopped after {took:?}"
    ));
    assert_eq!(run.code, 6, "{run:#?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let error = entry(&report, &format!("Hostile[{}]", machine.file("sleeper")))["error"]
        .as_str()
        .expect("failed")
        .to_owned();
    assert!(
        error.contains("it ran past its wall-clock limit of 1 s"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(machine.file("after")).expect("after"),
        "x"
    );
}

/// Class 3. Listings are held whole in host memory: a plugin that keeps listing a
/// directory of 100,000 entries is refused past half its memory limit, naming it, and
/// the host stays small (before: 791 MiB with a 128 MiB plugin limit). A plugin that
/// keeps files open is refused past the descriptor limit, and the instance that holds
/// them is not kept for the next resources.
#[test]
fn host_memory_for_listings_and_descriptors_is_bounded_per_plugin() {
    let machine = Machine::new();
    let crowd = machine.root().join("files/crowd");
    std::fs::create_dir(&crowd).expect("crowd");
    for n in 0..100_000 {
        std::fs::File::create(crowd.join(format!("entry-{n:06}"))).expect("entry");
    }
    let policy = policy_for(&machine, &machine.root().join("files"), "memory_mib = 32");
    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": machine.file("lister"),
          "attributes": { "action": "hoard_listings", "target": crowd.to_str().expect("utf-8") } },
        { "type": "hostile", "title": machine.file("hoarder"),
          "attributes": { "action": "hoard_files", "target": machine.file("crowd/entry-000001") } },
        { "type": "hostile", "title": machine.file("next"), "attributes": { "action": "behave" } },
    ]));
    let mut args = vec!["-f", "%M", crate::support::WCONVERGE];
    args.extend(apply_args(&catalog, &policy));
    let (run, _) = run_bounded_program(&machine, "/usr/bin/time", &args);
    let peak_kib = peak_kib(&run);
    figure(&format!(
        "class 3: peak host memory {} MiB",
        peak_kib / 1024
    ));
    assert_eq!(run.code, 6, "{run:#?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let lister = entry(&report, &format!("Hostile[{}]", machine.file("lister"))).to_string();
    assert!(
        lister.contains(
            "would take more than the 16 MiB of host memory plugin `hostile` may hold in listings"
        ),
        "{lister}"
    );
    let hoarder = entry(&report, &format!("Hostile[{}]", machine.file("hoarder"))).to_string();
    assert!(
        hoarder.contains("holds 256 open files and directories, the most one instance may hold"),
        "{hoarder}"
    );
    assert_eq!(
        entry(&report, &format!("Hostile[{}]", machine.file("next")))["status"],
        "changed"
    );
    assert!(peak_kib < 300 * 1024, "peak {peak_kib} KiB");
}

fn run_bounded_program(machine: &Machine, program: &str, args: &[&str]) -> (Run, Duration) {
    let started = Instant::now();
    let output = machine.command(program).args(args).output().expect("runs");
    (
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        },
        started.elapsed(),
    )
}

/// Class 3. A file whose size differs from the content is not read: a sparse 10 GiB
/// file is reported as differing by its size, not hashed for seconds.
#[test]
fn a_file_of_another_size_is_not_hashed() {
    let machine = Machine::new();
    let big = machine.file("big");
    std::fs::File::create(&big)
        .and_then(|file| file.set_len(10 << 30))
        .expect("sparse file");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": big, "attributes": { "content": "small\n" } },
    ]));
    let report = machine.apply_json(&catalog, &machine.policy(""), &["--noop"], 2);
    let said = report["resources"][0].to_string();
    assert!(said.contains("{size}10737418240"), "{said}");
}

/// Class 1. `file-metadata` answers only for normal paths inside the call's grants:
/// `..` never reaches above a grant.
#[test]
fn file_metadata_never_resolves_dot_dot_beyond_the_grant() {
    let machine = Machine::new();
    let policy = policy_for(&machine, &machine.root().join("files"), "");
    let files = machine.files_dir();
    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": machine.file("up"),
          "attributes": { "action": "stat", "target": format!("{files}/..") } },
        { "type": "hostile", "title": machine.file("dot"),
          "attributes": { "action": "stat", "target": format!("{files}/./x") } },
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 4);
    for name in ["up", "dot"] {
        let error = entry(&report, &format!("Hostile[{}]", machine.file(name)))["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} was answered:\n{report:#}"))
            .to_owned();
        assert!(
            error.contains("is not an absolute path without `.`, `..` and empty components"),
            "{error}"
        );
    }
}

/// `set-mode` (and `set-owner`) reach beneath a writable grant (a recursive `file`
/// needs it), resolved by descriptor: never out through a link, absolute or relative,
/// never the grant's directory itself, and set-ID bits only where no other user writes.
#[test]
fn metadata_changes_beneath_a_grant_never_leave_it() {
    let machine = Machine::new();
    let policy = policy_for(&machine, &machine.root().join("files"), "");
    let files = machine.files_dir();
    let outside = tempfile::tempdir().expect("outside");
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "v").expect("victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::symlink(outside.path(), format!("{files}/absolute")).expect("link");
    let relative = format!(
        "../../../{}",
        outside.path().file_name().expect("name").to_string_lossy()
    );
    std::fs::create_dir(format!("{files}/deep")).expect("deep");
    std::os::unix::fs::symlink(&relative, format!("{files}/deep/relative")).expect("link");
    std::fs::create_dir_all(format!("{files}/ok/inner")).expect("ok");
    std::fs::write(format!("{files}/ok/inner/file"), "f").expect("file");
    std::fs::create_dir(format!("{files}/shared")).expect("shared");
    std::fs::set_permissions(
        format!("{files}/shared"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .expect("chmod");
    std::fs::write(format!("{files}/shared/file"), "f").expect("file");
    let chmod = |title: &str, target: String| {
        json!({ "type": "hostile", "title": machine.file(title),
                "attributes": { "action": "chmod", "target": target } })
    };
    let catalog = machine.catalog(json!([
        chmod("absolute", format!("{files}/absolute/victim")),
        chmod("relative", format!("{files}/deep/relative/victim")),
        chmod("grant", files.clone()),
        chmod("setid", format!("{files}/shared/file")),
        chmod("ok", format!("{files}/ok/inner/file")),
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 6);
    let error = |title: &str| {
        entry(&report, &format!("Hostile[{}]", machine.file(title)))["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{title} was allowed:\n{report:#}"))
            .to_owned()
    };
    for title in ["absolute", "relative"] {
        assert!(
            error(title).contains("leads out of the directories granted"),
            "{}",
            error(title)
        );
    }
    assert!(
        error("grant").contains("only what lies beneath it may be changed"),
        "{}",
        error("grant")
    );
    assert!(
        error("setid").contains("set-user-ID and set-group-ID bits"),
        "{}",
        error("setid")
    );
    assert_eq!(
        std::fs::metadata(&victim)
            .expect("victim")
            .permissions()
            .mode()
            & 0o7777,
        0o600,
        "nothing outside the grant changed"
    );
    assert_eq!(
        std::fs::metadata(format!("{files}/ok/inner/file"))
            .expect("file")
            .permissions()
            .mode()
            & 0o7777,
        0o4777,
        "beneath the grant, by descriptor, it is changed"
    );
}

/// Every change a plugin makes by a path of several names (a recursive `file` makes
/// them) resolves the names before the last by descriptor: a link another user made on
/// the way is not followed, even one that stays inside the grant.
#[test]
fn a_deep_change_never_follows_another_users_link_on_the_way() {
    let user = LocalUser::create();
    let machine = Machine::new();
    let policy = policy_for(&machine, &machine.root().join("files"), "");
    let files = machine.files_dir();
    std::fs::create_dir(format!("{files}/victims")).expect("victims");
    let victim = format!("{files}/victims/victim");
    std::fs::write(&victim, "root's\n").expect("victim");
    let theirs = format!("{files}/uploads");
    std::fs::create_dir(&theirs).expect("uploads");
    std::os::unix::fs::chown(&theirs, Some(user.uid), Some(user.gid)).expect("chown");
    let link = format!("{theirs}/sub");
    std::os::unix::fs::symlink("../victims", &link).expect("link");
    std::os::unix::fs::lchown(&link, Some(user.uid), Some(user.gid)).expect("lchown");
    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": machine.file("x"),
          "attributes": { "action": "remove", "target": format!("{link}/victim") } },
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 4);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("the victim is still there"),
        "root's\n",
        "{report:#}"
    );
}

/// Processes a test started that must be gone when it ends, killed if they are not.
struct Survivors(Vec<std::path::PathBuf>);

impl Survivors {
    /// The process ids written in the pid files, once each file holds one.
    fn pids(&self) -> Vec<i32> {
        self.0
            .iter()
            .filter_map(|file| std::fs::read_to_string(file).ok()?.trim().parse().ok())
            .collect()
    }

    /// Waits until every pid file holds a pid.
    fn wait_for_pids(&self) {
        let started = Instant::now();
        while self.pids().len() < self.0.len() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the programs did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pids still running (a zombie is not running) after waiting up to 5 s for
    /// them to go.
    fn still_running(&self) -> Vec<i32> {
        let started = Instant::now();
        loop {
            let alive = self.ours();
            if alive.is_empty() || started.elapsed() > Duration::from_secs(5) {
                return alive;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pids that still run the program that wrote them. A pid is checked by its pid
    /// file's path, which that program's command line or environment holds: the pid of
    /// a program killed long ago may be another's now (a test that forks thousands of
    /// times a second runs beside this one), and that one is not this test's to judge
    /// or kill.
    fn ours(&self) -> Vec<i32> {
        self.0
            .iter()
            .filter_map(|file| {
                let pid: i32 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
                let needle = file.to_string_lossy();
                let holds = |what: &str| {
                    std::fs::read(format!("/proc/{pid}/{what}"))
                        .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(&*needle))
                };
                (state != "Z" && state != "X" && (holds("cmdline") || holds("environ")))
                    .then_some(pid)
            })
            .collect()
    }
}

impl Drop for Survivors {
    fn drop(&mut self) {
        for pid in self.ours() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// An `exec` whose command starts a program that leaves its session (`setsid`) and
/// another that stays, writing their pids; both sleep for five minutes.
fn runaway(machine: &Machine, title: &str, timeout: u64) -> (serde_json::Value, Survivors) {
    let escaped = machine.root().join(format!("{title}-escaped.pid"));
    let direct = machine.root().join(format!("{title}-direct.pid"));
    let command = format!(
        "setsid sh -c 'echo $$ > {0}; WCV_PID_FILE={0} exec sleep 300' & echo $$ > {1}; \
         WCV_PID_FILE={1} exec sleep 300",
        escaped.display(),
        direct.display()
    );
    (
        json!({ "type": "exec", "title": title,
                "attributes": { "command": command, "timeout": timeout } }),
        Survivors(vec![escaped, direct]),
    )
}

/// Class 4. A launched program has no controlling terminal: run from a terminal (under
/// `script`), wconverge's child cannot open `/dev/tty`, so it cannot push keystrokes into
/// the operator's root shell with `TIOCSTI` (before, it shared wconverge's session).
#[test]
fn a_launched_program_has_no_controlling_terminal() {
    let machine = Machine::new();
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "tty",
          "attributes": { "command": "if (: < /dev/tty) 2>/dev/null; then echo TTY-REACHABLE; else echo NO-TTY; fi",
                          "logoutput": "true" } },
    ]));
    let policy = machine.policy("");
    let line = format!(
        "{} apply {} --policy {}",
        crate::support::WCONVERGE,
        catalog.display(),
        policy.display()
    );
    // The test itself has a terminal under script(1): the check would pass for the
    // wrong reason without one.
    let probe = Run::of(machine.command("/usr/bin/script").args([
        "-qec",
        "if (: < /dev/tty) 2>/dev/null; then echo TTY-REACHABLE; fi",
        "/dev/null",
    ]));
    assert!(probe.stdout.contains("TTY-REACHABLE"), "{probe:#?}");
    let run = Run::of(
        machine
            .command("/usr/bin/script")
            .args(["-qec", &line, "/dev/null"]),
    );
    assert!(run.stdout.contains("NO-TTY"), "{run:#?}");
    assert!(!run.stdout.contains("TTY-REACHABLE"), "{run:#?}");
}

/// Class 4. Descriptors wconverge inherited (here a root-only file left open by whoever
/// started it) never reach a launched program, even one running as another user.
#[test]
fn a_launched_program_gets_only_standard_input_output_and_error() {
    let machine = Machine::new();
    let user = LocalUser::create();
    let secret = machine.root().join("root-only");
    std::fs::write(&secret, "ROOT-ONLY-SECRET\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "peek",
          "attributes": {
            "command": "cat <&7 2>/dev/null || echo NO-FD-7; for fd in 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do [ -e /proc/$$/fd/$fd ] && echo \"open $fd\"; done; echo checked",
            "user": user.name, "logoutput": "true" } },
    ]));
    let policy = machine.policy("");
    let line = format!(
        "exec 7< {} 9< {}; exec {} apply {} --policy {} --format json",
        secret.display(),
        secret.display(),
        crate::support::WCONVERGE,
        catalog.display(),
        policy.display()
    );
    let run = Run::of(machine.command("/bin/sh").args(["-c", &line]));
    assert_eq!(run.code, 2, "{run:#?}");
    let said = run.json()["resources"][0]["logs"].to_string();
    assert!(said.contains("NO-FD-7"), "{said}");
    assert!(said.contains("checked"), "{said}");
    assert!(!said.contains("ROOT-ONLY-SECRET"), "{said}");
    assert!(!said.contains("open "), "{said}");
}

/// Class 4. At its timeout a program is killed with all its descendants, a descendant
/// that left its session included (before, it survived, holding the output pipes),
/// and the run does not wait for it.
#[test]
fn a_timeout_kills_every_descendant_even_one_that_left_its_session() {
    let machine = Machine::new();
    let (exec, survivors) = runaway(&machine, "runaway", 1);
    let catalog = machine.catalog(json!([exec]));
    let (run, took) = run_bounded(
        &machine,
        &apply_args(&catalog, &machine.policy("")),
        Duration::from_secs(60),
    );
    figure(&format!(
        "class 4: a timeout of 1 s killed the tree; the run took {took:?}"
    ));
    assert_eq!(run.code, 4, "{run:#?}");
    assert!(
        run.stdout
            .contains("ran past its timeout of 1 second; it was killed with everything it started"),
        "{run:#?}"
    );
    assert_eq!(survivors.pids().len(), 2, "both programs ran");
    assert_eq!(survivors.still_running(), Vec::<i32>::new());
}

/// Class 4. An interrupted wconverge (`SIGTERM`) kills what it runs with all its
/// descendants, applies nothing more, reports, and releases the run lock; a killed one
/// (`SIGKILL`) takes its program with it.
#[test]
fn an_interrupted_or_killed_wconverge_leaves_no_program_running() {
    let machine = Machine::new();
    let (exec, survivors) = runaway(&machine, "interrupted", 600);
    let after = machine.file("after");
    let catalog = machine.catalog(json!([
        exec,
        { "type": "file", "title": after, "attributes": { "content": "x" } },
    ]));
    let policy = machine.policy("");
    let child = machine
        .command(crate::support::WCONVERGE)
        .args(apply_args(&catalog, &policy))
        // One at a time: the file waits behind the running command, not beside it.
        .args(["--jobs", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("wconverge starts");
    survivors.wait_for_pids();
    let started = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal");
    let output = child.wait_with_output().expect("wconverge ends");
    figure(&format!(
        "class 4: SIGTERM to the end of the run: {:?}",
        started.elapsed()
    ));
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert_eq!(run.code, 4, "{run:#?}");
    let report = run.json();
    assert_eq!(
        entry(&report, &format!("File[{after}]"))["error"],
        "not applied: wconverge was interrupted (SIGTERM)"
    );
    assert!(!Path::new(&after).exists());
    assert_eq!(survivors.still_running(), Vec::<i32>::new());
    // The lock is free again.
    machine.apply_json(&catalog, &policy, &["--noop"], 2);

    let (exec, survivors) = runaway(&machine, "killed", 600);
    let catalog = machine.catalog(json!([exec]));
    let mut child = machine
        .command(crate::support::WCONVERGE)
        .args(apply_args(&catalog, &policy))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("wconverge starts");
    survivors.wait_for_pids();
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let direct: i32 = std::fs::read_to_string(&survivors.0[1])
        .expect("pid")
        .trim()
        .parse()
        .expect("pid");
    let only_direct = Survivors(vec![survivors.0[1].clone()]);
    assert_eq!(
        only_direct.still_running(),
        Vec::<i32>::new(),
        "the program {direct} outlived a killed wconverge"
    );
    // What the program started in a session of its own (in the launch's cgroup) the
    // watchdog kills, and removes the cgroup; where there are no cgroups, the program's
    // own descendants are the limit (documented).
    let left_by = |cgroup: &Path| -> Vec<String> {
        std::fs::read_dir(cgroup)
            .expect("cgroup")
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(&format!("wconverge-{}-", child.id())))
            .collect()
    };
    let cgroup = own_cgroup();
    if let Some(cgroup) = &cgroup {
        let killed = Instant::now();
        while (!survivors.still_running().is_empty() || !left_by(cgroup).is_empty())
            && killed.elapsed() < Duration::from_secs(15)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        figure(&format!(
            "class 8: SIGKILL to the launch's tree and cgroup gone: {:?}",
            killed.elapsed()
        ));
        assert_eq!(
            survivors.still_running(),
            Vec::<i32>::new(),
            "what the program started outlived a killed wconverge"
        );
        assert_eq!(
            left_by(cgroup),
            Vec::<String>::new(),
            "in {}",
            cgroup.display()
        );
    }
    drop(survivors);
    machine.apply_json(&catalog, &policy, &["--noop"], 2);
    if let Some(cgroup) = &cgroup {
        assert_eq!(
            left_by(cgroup),
            Vec::<String>::new(),
            "in {}",
            cgroup.display()
        );
    }
}

/// This process's cgroup in the cgroup2 hierarchy, where the wconverge it starts makes
/// its launches' cgroups; `None` where there is none.
fn own_cgroup() -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (fields, rest) = line.split_once(" - ")?;
        rest.starts_with("cgroup2 ")
            .then(|| fields.split(' ').nth(4).map(std::path::PathBuf::from))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|line| line.strip_prefix("0::"))?;
    Some(mount.join(path.trim().trim_start_matches('/')))
}

/// Class 5. Secrets stay secret: an environment given as a sensitive array of
/// `NAME=value` is redacted by value; a sensitive guard's output is not kept; a secret
/// cut in two at the output cap leaves no half behind; and sensitive code reaches its
/// interpreter on standard input, never in its arguments, where every local user reads
/// it (`/proc/PID/cmdline`).
#[test]
fn secrets_stay_out_of_reports_and_process_arguments() {
    let machine = Machine::new();
    let secret = "hunter2-3f9a7c";
    let marker = machine.root().join("sensitive-code.pid");
    let filler = "x".repeat(1014);
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "env-array",
          "attributes": { "command": "echo \"token is $TOKEN\" >&2; exit 1",
                          "environment": { "__sensitive": [format!("TOKEN={secret}")] } } },
        { "type": "exec", "title": "guarded",
          "attributes": { "command": "true",
                          "unless": { "__sensitive": format!("echo {secret}; echo {secret} >&2; false") } } },
        { "type": "exec", "title": "cut",
          "attributes": { "command": format!("printf '%s%s' {filler} \"$TOKEN\"; exit 1"),
                          "environment": { "TOKEN": { "__sensitive": secret } } } },
        { "type": "exec", "title": "code",
          "attributes": { "command": { "__sensitive":
              format!(": {secret}; echo $$ > {}; sleep 2", marker.display()) } } },
        { "type": "exec", "title": "lines",
          "attributes": { "command": "/usr/bin/env", "logoutput": "true",
                          "environment": { "PW": { "__sensitive": "first-line-x9q\nsecond-line-x9q" } } } },
    ]));
    let policy = machine.policy("[plugins.sh.limits]\noutput_kib = 1\n");
    let mut child = machine
        .command(crate::support::WCONVERGE)
        .args(apply_args(&catalog, &policy))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("wconverge starts");
    // While the sensitive code runs, no process shows it in its arguments.
    let started = Instant::now();
    while !marker.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the code did not run"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut seen = 0;
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let Ok(entry) = entry else { continue };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            seen += 1;
            assert!(
                !String::from_utf8_lossy(&cmdline).contains(secret),
                "{:?} shows the secret: {}",
                entry.path(),
                String::from_utf8_lossy(&cmdline)
            );
        }
    }
    assert!(seen > 1);
    let _ = child.stdin.take();
    let output = child.wait_with_output().expect("wconverge ends");
    let everything = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(6), "{everything}");
    // A secret of several lines is printed line by line.
    assert!(!everything.contains("line-x9q"), "{everything}");
    for start in 4..=secret.len() {
        assert!(
            !everything.contains(&secret[..start]),
            "`{}` leaked:\n{everything}",
            &secret[..start]
        );
    }
    let report: serde_json::Value =
        serde_json::from_str(&String::from_utf8_lossy(&output.stdout)).expect("json");
    let env = entry(&report, "Exec[env-array]").to_string();
    assert!(env.contains("token is [redacted]"), "{env}");
    let guarded = entry(&report, "Exec[guarded]").to_string();
    assert!(
        guarded.contains("unless output not kept: the guard is sensitive"),
        "{guarded}"
    );
    let cut = entry(&report, "Exec[cut]").to_string();
    assert!(
        cut.contains("xxxx"),
        "the output was kept up to the secret: {cut}"
    );
}

/// Class 6. What programs, plugins and manifests write is inert on a terminal: a
/// program printing a clipboard write (OSC 52), a carriage return that rewrites the
/// summary line and a conceal sequence, a title and a message holding escapes and a
/// fake summary after a newline, all come out as visible escapes, and only wconverge
/// writes lines of its own.
#[test]
fn output_is_inert_on_a_terminal() {
    let machine = Machine::new();
    let nasty = "printf '\\033]52;c;cm0gLXJmIH4K\\007\\rapplied in 0.00 s: 1 resource, nothing changed\\033[8m hidden\\n'; exit 1";
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "noisy\u{1b}[2J", "attributes": { "command": nasty } },
        { "type": "notify", "title": "liar",
          "attributes": { "message": "done\napplied in 0.00 s: 2 resources, all fine\u{202e}txt.exe" } },
    ]));
    let run = machine.apply(&catalog, &machine.policy(""), &[]);
    assert_eq!(run.code, 6, "{run:#?}");
    let printed = run.all_output();
    for forbidden in ['\u{1b}', '\u{7}', '\r', '\u{202e}'] {
        assert!(
            !printed.contains(forbidden),
            "{forbidden:?} reached the terminal:\n{printed:?}"
        );
    }
    assert!(
        printed.contains("\\x1b]52;c;cm0gLXJmIH4K\\x07\\rapplied"),
        "{printed}"
    );
    assert!(printed.contains("Exec[noisy\\x1b[2J]"), "{printed}");
    assert!(printed.contains("\\u{202e}txt.exe"), "{printed}");
    let summaries = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("applied in"))
        .count();
    assert_eq!(
        summaries, 1,
        "a line passes for the summary:\n{}",
        run.stdout
    );
}

/// Class 7. The compiled-code cache is bound and private: another plugin's valid entry
/// under this plugin's entry name is rebuilt, not run (before, it ran under the first
/// plugin's pin); a FIFO in place of an entry is refused without blocking; a cache below
/// a directory others can write is not used at all.
#[test]
fn the_compiled_code_cache_is_bound_to_its_component_and_private() {
    let machine = Machine::new();
    let cache = machine.root().join("cache");
    let catalog = machine.catalog(json!([
        { "type": "notify", "title": "hi" },
        { "type": "hostile", "title": machine.file("h"), "attributes": { "action": "behave" } },
    ]));
    let policy = policy_for(&machine, &machine.root().join("files"), "");
    let policy_text = std::fs::read_to_string(&policy).expect("policy")
        + "\n[plugins.notify]\nsource = \"builtin\"\n";
    std::fs::write(&policy, policy_text).expect("policy");
    let apply = |cache: &Path| {
        let mut args = apply_args(&catalog, &policy);
        args.push("--cache-dir");
        args.push(cache.to_str().expect("utf-8"));
        run_bounded(&machine, &args, Duration::from_secs(120)).0
    };
    let run = apply(&cache);
    assert_eq!(run.code, 2, "{run:#?}");
    // The compiled code (beside it, the `validate` calls remembered).
    let entries: Vec<std::path::PathBuf> = std::fs::read_dir(cache.join("components"))
        .expect("cache written")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "cwasm")
        })
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    let hostile_digest = sha256_of(wconverge_tests::HOSTILE);
    let (hostile, notify): (Vec<_>, Vec<_>) = entries.iter().partition(|path| {
        path.file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(&hostile_digest))
    });
    // The hostile plugin's entry, valid, under the notify plugin's name.
    std::fs::copy(hostile[0], notify[0]).expect("swapped");
    let run = apply(&cache);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "it was compiled from component sha256 {hostile_digest}, not "
        )),
        "{run:#?}"
    );
    // A FIFO in place of an entry.
    std::fs::remove_file(notify[0]).expect("removed");
    nix::unistd::mkfifo(notify[0], nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
    let run = apply(&cache);
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr.contains("it is a FIFO, not a regular file"),
        "{run:#?}"
    );
    // Below a directory anyone may write.
    let open = machine.root().join("open");
    std::fs::create_dir(&open).expect("dir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let run = apply(&open.join("cache"));
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stderr.contains("not using the component cache")
            && run.stderr.contains("can be written by other users"),
        "{run:#?}"
    );
}

/// Class 8. A hostile manifest meets a budget, each an error naming the limit and the
/// place, in bounded time and memory (before, each of these took 4 GiB or more): a string
/// doubled 30 times, a value holding itself twice 28 times over, a million-step loop in a
/// million-step loop, 3,000 × 3,000 notifications, a defined type declaring two of
/// itself. And what is read must be a regular file within a cap: `/dev/zero` given as a
/// manifest, or a FIFO as a policy, is refused at once. (Found by review: a literal of a
/// hundred copies of a large array, two thousand regular expressions, and two thousand
/// collectors over twenty thousand resources, each round.)
#[test]
fn manifests_and_inputs_have_budgets() {
    let machine = Machine::new();
    let doubling: String = (1..=30)
        .map(|n| format!("$a{n} = \"${{a{p}}}${{a{p}}}\"\n", p = n - 1))
        .collect();
    let nesting: String = (1..=28)
        .map(|n| format!("$b{n} = [$b{p}, $b{p}]\n", p = n - 1))
        .collect();
    let mut edges = String::new();
    for side in ["a", "b"] {
        for n in 0..3000 {
            edges.push_str(&format!("notify {{ '{side}{n}': }}\n"));
        }
    }
    let refs = |side: &str| {
        (0..3000)
            .map(|n| format!("Notify['{side}{n}']"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    edges.push_str(&format!("[{}] ~> [{}]\n", refs("a"), refs("b")));
    let cases = [
        (
            "doubling",
            format!("$a0 = 'x'\n{doubling}notify {{ 'x': message => $a30 }}\n"),
            "the manifests did more work than a compile may (25000000 steps",
            "doubling.wcv:26:",
        ),
        (
            "join",
            format!(
                "$s0 = 'xxxxxxxxxxxxxxxx'\n{}$list = 200.map |$i| {{ $i }}\n$j = join($list, $s13)\n",
                (1..=13)
                    .map(|n| format!("$s{n} = \"${{s{p}}}${{s{p}}}\"\n", p = n - 1))
                    .collect::<String>()
            ),
            "`join` builds a string of more than 16777216 bytes (16 MiB), the limit",
            "join.wcv:16:",
        ),
        (
            "nesting",
            format!(
                "$b0 = ['xxxxxxxxxxxxxxxx']\n{nesting}notify {{ 'x': message => \"${{b28}}\" }}\n"
            ),
            "this builds a value of more than 1000000 elements",
            "nesting.wcv:",
        ),
        (
            "loop",
            "1000000.each |$i| { 1000000.each |$j| { $k = [$i, $j] } }\n".to_owned(),
            "the manifests did more work than a compile may (25000000 steps",
            "loop.wcv:1:",
        ),
        (
            "edges",
            edges,
            "the relationships make more than 250000 edges (the limit)",
            "edges.wcv:6001:1",
        ),
        (
            "copies",
            format!(
                "$c0 = [1, 2]\n{}$n = [{}]\n",
                (1..=18)
                    .map(|n| format!("$c{n} = $c{p} + $c{p}\n", p = n - 1))
                    .collect::<String>(),
                vec!["$c18"; 100].join(", ")
            ),
            "this builds a value of more than 1000000 elements",
            "copies.wcv:20:",
        ),
        (
            "regexes",
            (0..2000)
                .map(|n| format!("$r{n} = 'abc' =~ /[\\w]{{14}}z{n}/\n"))
                .collect(),
            "the manifests did more work than a compile may (25000000 steps",
            "regexes.wcv:",
        ),
        (
            "collectors",
            format!(
                "{}{}",
                (0..20_000)
                    .map(|n| format!("notify {{ 'r{n}': }}\n"))
                    .collect::<String>(),
                (0..2000)
                    .map(|n| format!("Notify <| title == 'nomatch{n}' |>\n"))
                    .collect::<String>()
            ),
            "the manifests did more work than a compile may (25000000 steps",
            "collectors.wcv:",
        ),
        (
            "define",
            "define rep() {\n  rep { \"${title}a\": }\n  rep { \"${title}b\": }\n}\nrep { 'r': }\n"
                .to_owned(),
            "the manifests declare more than 200000 resources (the limit)",
            "define.wcv:",
        ),
    ];
    for (name, text, error, place) in cases {
        let manifest = machine.manifest(&format!("{name}.wcv"), &text);
        let args = [
            "-f",
            "%M",
            crate::support::WCONVERGE,
            "compile",
            manifest.to_str().expect("utf-8"),
        ];
        let started = Instant::now();
        let (run, _) = run_bounded_program(&machine, "/usr/bin/time", &args);
        let took = started.elapsed();
        let peak_kib = peak_kib(&run);
        figure(&format!(
            "class 8: {name}: refused in {took:?}, peak {} MiB",
            peak_kib / 1024
        ));
        assert_eq!(run.code, 1, "{name}: {run:#?}");
        assert!(run.stderr.contains(error), "{name}: {}", run.stderr);
        assert!(run.stderr.contains(place), "{name}: {}", run.stderr);
        assert!(peak_kib < 1024 * 1024, "{name}: peak {peak_kib} KiB");
    }
    // Inputs.
    let zero = machine.root().join("zero.wcv");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("link");
    let run = machine.run(&["compile", zero.to_str().expect("utf-8")]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "the manifest `{}` is a character device; a manifest is read only from a regular \
             file",
            zero.display()
        )),
        "{run:#?}"
    );
    let fifo = machine.root().join("policy.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
    let manifest = machine.manifest("ok.wcv", "notify { 'hi': }\n");
    let (run, _) = run_bounded(
        &machine,
        &[
            "compile",
            manifest.to_str().expect("utf-8"),
            "--policy",
            fifo.to_str().expect("utf-8"),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("is a FIFO; a policy is read only from a regular file"),
        "{run:#?}"
    );
}

/// Class 9. Two resources that reach one file through a symlinked directory are one
/// resource, refused before anything runs; and a plugin's answers are checked against
/// its own schema: an enumeration answered with a number fails the resource.
#[test]
fn aliased_paths_and_values_outside_a_plugins_own_schema_are_refused() {
    let machine = Machine::new();
    let real = machine.file("real");
    std::fs::create_dir(&real).expect("real");
    let link = machine.file("link");
    std::os::unix::fs::symlink(&real, &link).expect("link");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": format!("{real}/app.conf"), "attributes": { "content": "one\n" } },
        { "type": "file", "title": format!("{link}/app.conf"), "attributes": { "content": "two\n" } },
    ]));
    let policy = policy_for(&machine, &machine.root().join("files"), "");
    let run = machine.apply(&catalog, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains(&format!(
            "File[{link}/app.conf]: manages the same path `{link}/app.conf` as \
             File[{real}/app.conf]"
        )) && run.stderr.contains(&format!(
            "both are `{real}/app.conf` once symlinks are followed"
        )),
        "{run:#?}"
    );
    assert!(!Path::new(&format!("{real}/app.conf")).exists());

    let catalog = machine.catalog(json!([
        { "type": "hostile", "title": machine.file("state"), "attributes": { "action": "lie_state" } },
        { "type": "hostile", "title": machine.file("plan"), "attributes": { "action": "lie_plan" } },
    ]));
    let report = machine.apply_json(&catalog, &policy, &[], 4);
    for (name, expected) in [
        (
            "state",
            "plugin returned invalid value for `action`: its schema expects Enum",
        ),
        (
            "plan",
            "plugin returned invalid value for `action`: its schema expects Enum",
        ),
    ] {
        let error = entry(&report, &format!("Hostile[{}]", machine.file(name)))["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} was accepted:\n{report:#}"))
            .to_owned();
        assert!(error.contains(expected), "{name}: {error}");
    }
}

/// Class 10. A program the policy allows that someone other than root could replace
/// (here: it sits in a directory a local user owns) is flagged by `plugins audit`, every
/// run that loads the plugin warns of it, and it is not launched as root.
#[test]
fn a_program_others_can_replace_is_flagged_and_warned_of() {
    let (machine, user, home) = with_attacker();
    let tool = home.join("tool");
    std::fs::copy("/bin/true", &tool).expect("tool");
    let policy = machine.root().join("tool-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.sh]\nsource = \"builtin\"\nprovides = [\"sh\", \"exec\", \"script\"]\n\
             programs = [\"{}\"]\n",
            tool.display()
        ),
    )
    .expect("policy");
    let flag = format!(
        "{} (a directory, on the way to {}) belongs to uid {}; so it is not launched as root; \
         whoever can write it can replace what wconverge runs",
        home.display(),
        tool.display(),
        user.uid
    );
    let audit = machine.run(&[
        "plugins",
        "audit",
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    assert!(
        audit.stdout.contains(&format!("! root-equivalent: {flag}")),
        "{audit:#?}"
    );
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "tool", "attributes": { "command": [tool.to_str().expect("utf-8")] } },
    ]));
    let run = machine.apply(&catalog, &policy, &[]);
    assert_eq!(run.code, 4, "{run:#?}");
    assert!(
        run.stderr.contains(&format!("plugin `sh`: {flag}"))
            && run.all_output().contains("is not launched as root"),
        "{run:#?}"
    );
}

/// Class 2 (found by review). A file wconverge creates starts private: a user watching a
/// directory she may read (not write) opens each new temporary file at once and keeps
/// reading it, hoping to catch content meant for mode 0600 (before, it was created 0644
/// and made private only later: 41 leaks in 50 runs with inotify).
#[test]
fn a_temporary_file_is_private_from_its_creation() {
    let machine = Machine::new();
    open_to_all(machine.root());
    let user = LocalUser::create();
    let etc = machine.root().join("etc");
    std::fs::create_dir(&etc).expect("etc");
    std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let secret = etc.join("secret");
    let policy = policy_for(&machine, machine.root(), "");
    let watcher = user.spawn_perl(
        &etc,
        r#"my ($opened, %seen, @held) = (0); my $leaks = 0;
           $SIG{TERM} = sub {
             for my $f (@held) { local $/; my $text = <$f>; $leaks++ if defined $text && $text =~ /TOPSECRET/ }
             print "seen " . scalar(keys %seen) . " opened $opened leaked $leaks\n"; exit 0 };
           while (1) {
             opendir(my $d, '.') or die; my @names = grep { /^\.secret\.wcv-/ } readdir($d); closedir($d);
             for my $name (@names) {
               next if $seen{$name}++;
               if (open(my $f, '<', $name)) { $opened++; push @held, $f; }
             }
           }"#,
        &[],
    );
    let attempts = 100;
    for round in 0..attempts {
        let catalog = machine.catalog(json!([
            { "type": "file", "title": secret.to_str().expect("utf-8"),
              "attributes": { "content": format!("TOPSECRET {round}\n"), "mode": "0600" } },
        ]));
        let (run, _) = run_bounded(
            &machine,
            &apply_args(&catalog, &policy),
            Duration::from_secs(60),
        );
        assert_eq!(run.code, 2, "{run:#?}");
    }
    let said = watcher.stop();
    figure(&format!(
        "class 2: {attempts} files written under a watcher: {}",
        said.trim()
    ));
    assert!(said.contains(" opened 0 leaked 0"), "{said}");
    // The watcher did see temporary files, and could open none: not a race it lost.
    let seen: usize = said
        .strip_prefix("seen ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("the watcher did not report: {said}"));
    assert!(
        seen > 0,
        "the watcher never saw a temporary file; the test proves nothing: {said}"
    );
}

/// Classes 1 and 2 (found by review). Links another user could have placed are never
/// followed: a template whose source is her symlink to a root-only file in her
/// directory (before: rendered world-readable), and a root-owned symlink hard-linked
/// into her directory (as she could where `fs.protected_hardlinks` is off) on the way to
/// a managed file (before: the file was written where that link led, and given to her).
#[test]
fn links_another_user_could_have_placed_are_not_followed() {
    let (machine, user, home) = with_attacker();
    let secret = home.join(".htpasswd");
    std::fs::write(&secret, "SECRET-HTPASSWD\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let source = home.join("motd.j2");
    std::os::unix::fs::symlink(".htpasswd", &source).expect("link");
    user.give(&source);
    let out = machine.root().join("out");
    std::fs::create_dir(&out).expect("out");
    // A root-owned symlink elsewhere, hard-linked into her directory.
    let system = machine.root().join("system");
    std::fs::create_dir(&system).expect("system");
    let target = machine.root().join("etc-sim");
    std::fs::create_dir(&target).expect("etc-sim");
    std::os::unix::fs::symlink(&target, system.join("syslink")).expect("link");
    std::fs::hard_link(system.join("syslink"), home.join("app")).expect("hard link");
    let catalog = machine.catalog(json!([
        { "type": "template", "title": out.join("motd").to_str().expect("utf-8"),
          "attributes": { "source": source.to_str().expect("utf-8"), "mode": "0644" } },
        { "type": "file", "title": home.join("app/settings.conf").to_str().expect("utf-8"),
          "attributes": { "content": "x\n", "owner": user.name } },
    ]));
    let policy = policy_for(&machine, machine.root(), "");
    let report = machine.apply_json(&catalog, &policy, &[], 4);
    let template = entry(
        &report,
        &format!("Template[{}]", out.join("motd").display()),
    )
    .to_string();
    assert!(
        template.contains(&format!("is a symlink owned by uid {}", user.uid)),
        "{template}"
    );
    let file = entry(
        &report,
        &format!("File[{}]", home.join("app/settings.conf").display()),
    )
    .to_string();
    assert!(file.contains("is a symlink with 2 hard links"), "{file}");
    assert!(!out.join("motd").exists());
    assert!(!target.join("settings.conf").exists());
}

/// Class 3 (found by review). The audit log and the run lock are never a FIFO or a
/// link another user planted: a FIFO as the audit log is refused at once (before, the
/// run blocked forever, and SIGTERM did not end it), and a state directory below one
/// others can write is refused (before, her `run.lock` symlink had root truncate the
/// file it named and write its pid in it).
#[test]
fn the_audit_log_and_the_run_lock_cannot_be_planted() {
    let machine = Machine::new();
    let catalog = machine.catalog(json!([{ "type": "notify", "title": "hi" }]));
    let policy = machine.policy("");
    let fifo = machine.root().join("audit.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("fifo");
    let mut args = apply_args(&catalog, &policy);
    args.extend(["--audit-log", fifo.to_str().expect("utf-8")]);
    let (run, took) = run_bounded(&machine, &args, Duration::from_secs(60));
    figure(&format!(
        "class 3: a FIFO as the audit log refused in {took:?}"
    ));
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr
            .contains("is a special file (a FIFO, socket or device); it must be a regular file"),
        "{run:#?}"
    );

    let open = machine.root().join("open");
    std::fs::create_dir(&open).expect("dir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let state = open.join("state");
    std::fs::create_dir(&state).expect("state");
    let victim = machine.root().join("victim");
    std::fs::write(&victim, "precious\n").expect("victim");
    std::os::unix::fs::symlink(&victim, state.join("run.lock")).expect("link");
    let mut command = machine.command(crate::support::WCONVERGE);
    command
        .args(apply_args(&catalog, &policy))
        .env("WCONVERGE_STATE_DIR", &state);
    let run = Run::of(&mut command);
    assert_eq!(run.code, 1, "{run:#?}");
    assert!(
        run.stderr.contains("cannot use the state directory")
            && run.stderr.contains("can be written by other users"),
        "{run:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
}

/// Class 4 (found by review). Programs that try to leave the tree wconverge kills at the
/// deadline are killed all the same, and the run ends on time: one that forks and exits
/// its parent every 200 µs in a process group of its own (a scan of /proc always finds
/// a pid that is gone; the launch's cgroup holds it); a helper made
/// wconverge's own child with `clone(CLONE_PARENT)` that leaves its session; a program
/// that turns its child-subreaper attribute off so that its grandchild goes to init; and
/// a helper that seizes the program with `ptrace`, so its exit status never comes
/// (before: the first two survived, and the third held the run until the helper chose to
/// let go).
#[test]
fn programs_that_escape_the_tree_are_killed_and_the_run_ends_on_time() {
    let machine = Machine::new();
    let [clone, prctl, ptrace, getpid] = escape_syscalls();
    let pid_file = |name: &str| machine.root().join(format!("{name}.pid"));
    let sibling = format!(
        "require POSIX; if (syscall({clone}, 0x8000|17, 0, 0, 0, 0) == 0) {{ POSIX::setsid(); \
         open(my $f, '>', '{}'); print $f syscall({getpid}); close($f); sleep 300; POSIX::_exit(0) }} \
         sleep 300",
        pid_file("sibling").display()
    );
    let unreaped = format!(
        "require POSIX; syscall({prctl}, 36, 0, 0, 0, 0); if (fork() == 0) {{ POSIX::setsid(); \
         if (fork() == 0) {{ open(my $f, '>', '{}'); print $f syscall({getpid}); close($f); sleep 300; \
         POSIX::_exit(0) }} POSIX::_exit(0) }} sleep 300",
        pid_file("orphan").display()
    );
    let traced = format!(
        "require POSIX; my $program = syscall({getpid}); if (syscall({clone}, 0x8000|17, 0, 0, 0, 0) == 0) \
         {{ POSIX::setsid(); open(STDOUT, '>/dev/null'); open(STDERR, '>/dev/null'); \
         syscall({ptrace}, 0x4206, $program, 0, 0); open(my $f, '>', '{}'); print $f syscall({getpid}); \
         close($f); sleep 300; POSIX::_exit(0) }} sleep 300",
        pid_file("tracer").display()
    );
    // Forks and lets its parent exit, again and again, in a process group of its own,
    // deaf to SIGHUP: always at a new pid by the time a scan of /proc finds it. So it
    // is found alive by its heartbeat, a file whose time it sets at every hop.
    let marker = format!("wcv-hopper-{}", std::process::id());
    let beat = machine.root().join("hopper.beat");
    std::fs::write(&beat, "").expect("heartbeat file");
    let hopper = format!(
        "require POSIX; $SIG{{HUP}} = 'IGNORE'; if (fork() == 0) {{ setpgrp(0, 0); \
         while (1) {{ utime(undef, undef, '{}'); select(undef, undef, undef, 0.0002); \
         POSIX::_exit(0) if fork() }} }} sleep 300",
        beat.display()
    );
    let catalog = machine.catalog(json!([
        { "type": "exec", "title": "hopper",
          "attributes": { "command": ["/usr/bin/perl", "-e", hopper, &marker], "timeout": 2 } },
        { "type": "exec", "title": "sibling",
          "attributes": { "command": ["/usr/bin/perl", "-e", sibling], "timeout": 2 } },
        { "type": "exec", "title": "orphan",
          "attributes": { "command": ["/usr/bin/perl", "-e", unreaped], "timeout": 2 } },
        { "type": "exec", "title": "traced",
          "attributes": { "command": ["/usr/bin/perl", "-e", traced], "timeout": 2 } },
    ]));
    let survivors = Survivors(vec![
        pid_file("sibling"),
        pid_file("orphan"),
        pid_file("tracer"),
    ]);
    let (run, took) = run_bounded(
        &machine,
        &apply_args(&catalog, &machine.policy("")),
        Duration::from_secs(60),
    );
    figure(&format!(
        "class 4: four programs escaping the tree, each with a timeout of 2 s: the run took {took:?}"
    ));
    let hopping = beating(&beat);
    if hopping {
        // Not this test's to leave behind: killed by its marker until it stops.
        let started = Instant::now();
        while beating(&beat) && started.elapsed() < Duration::from_secs(10) {
            for pid in running_with(&marker) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
    assert_eq!(run.code, 4, "{run:#?}");
    assert_eq!(
        run.stdout
            .matches("ran past its timeout of 2 seconds; it was killed with everything it started")
            .count(),
        4,
        "each program was stopped at its deadline: {run:#?}"
    );
    assert_eq!(survivors.pids().len(), 3, "every helper ran: {run:#?}");
    assert_eq!(survivors.still_running(), Vec::<i32>::new(), "{run:#?}");
    assert!(!hopping, "the hopper outlived the run");
    assert!(took < Duration::from_secs(20), "the run took {took:?}");
}

/// Whether something still sets the time of `file`: looked at twice, 300 ms apart.
fn beating(file: &std::path::Path) -> bool {
    let modified = || {
        std::fs::metadata(file)
            .and_then(|metadata| metadata.modified())
            .expect("heartbeat file")
    };
    let before = modified();
    std::thread::sleep(Duration::from_millis(300));
    modified() != before
}

/// The processes running now (zombies aside) whose command line holds `marker`.
fn running_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| {
            let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat[stat.rfind(')')? + 1..]
                .split_whitespace()
                .next()?
                .to_owned();
            (String::from_utf8_lossy(&cmdline).contains(marker) && state != "Z").then_some(pid)
        })
        .collect()
}

/// `file-metadata.sha256` (the host hashing a file, so that a no-op check
/// does not stream its content through WASI) opens what `open-at` would open and
/// nothing else: a regular file inside the call's grants. A FIFO, a socket, a symlink,
/// a path outside the grants or climbing out of them, a file another user could have
/// moved into a directory others can write, and a link of hers on the way are each
/// refused; a huge file ends at the call's wall-clock limit, not after reading it all.
#[test]
fn the_host_digest_opens_only_what_open_at_would() {
    let (machine, user, home) = with_attacker();
    let files = machine.root().join("files");
    let plain = files.join("plain");
    std::fs::write(&plain, "hello\n").expect("plain");
    let fifo = files.join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("fifo");
    let socket = files.join("app.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("socket");
    std::os::unix::fs::symlink("/etc/passwd", files.join("link")).expect("link");
    // A directory everyone may write, without the sticky bit, and her file in it.
    let shared = files.join("shared");
    std::fs::create_dir(&shared).expect("shared");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::fs::write(shared.join("hers"), "hello\n").expect("her file");
    user.give(&shared.join("hers"));
    // Her link on the way to a root directory of the grant.
    let inner = files.join("inner");
    std::fs::create_dir(&inner).expect("inner");
    std::fs::write(inner.join("secret"), "root's\n").expect("secret");
    let her_link = files.join("via-her");
    std::os::unix::fs::symlink(&inner, &her_link).expect("her link");
    user.give(&her_link);
    let huge = files.join("huge");
    std::fs::File::create(&huge)
        .and_then(|file| file.set_len(1 << 40))
        .expect("sparse file");
    let cases: [(&str, String); 10] = [
        ("plain", plain.display().to_string()),
        ("missing", files.join("none").display().to_string()),
        ("fifo", fifo.display().to_string()),
        ("socket", socket.display().to_string()),
        ("link", files.join("link").display().to_string()),
        ("outside", "/etc/passwd".to_owned()),
        ("climb", format!("{}/../files/plain", files.display())),
        ("moved-in", shared.join("hers").display().to_string()),
        ("via-her", her_link.join("secret").display().to_string()),
        ("huge", huge.display().to_string()),
    ];
    let resources: Vec<serde_json::Value> = cases
        .iter()
        .map(|(name, target)| {
            json!({ "type": "hostile", "title": files.join(format!("{name}.hostile")).to_str().expect("utf-8"),
                    "attributes": { "action": "sha256", "target": target } })
        })
        .collect();
    let catalog = machine.catalog(serde_json::Value::Array(resources));
    let policy = policy_for(&machine, &files, "wall_seconds = 2");
    let (run, took) = run_bounded(
        &machine,
        &apply_args(&catalog, &policy),
        Duration::from_secs(60),
    );
    figure(&format!("ten host digests in {took:?}"));
    let report: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {run:#?}"));
    let said = |name: &str| {
        entry(
            &report,
            &format!(
                "Hostile[{}]",
                files.join(format!("{name}.hostile")).display()
            ),
        )
        .to_string()
    };
    let expected = format!("{{sha256}}{}", sha256_of(plain.to_str().expect("utf-8")));
    assert!(said("plain").contains(&expected), "{}", said("plain"));
    assert!(said("missing").contains(": None"), "{}", said("missing"));
    for (name, why) in [
        ("fifo", "is a FIFO"),
        ("socket", "is a socket"),
        ("link", "is a symlink"),
        ("outside", "outside the directories granted"),
        ("climb", "without `.`, `..`"),
        ("moved-in", "could have moved it there"),
        ("via-her", "owned by uid"),
        ("huge", "wall-clock limit"),
    ] {
        let text = said(name);
        assert!(text.contains("\"failed\""), "{name}: {text}");
        assert!(text.contains(why), "{name} should say {why:?}: {text}");
    }
    // Only the plain file was hashed: not her file, the link's target, nor the secret
    // behind her link.
    assert_eq!(run.stdout.matches("{sha256}").count(), 1, "{}", run.stdout);
    drop(user);
    let _ = home;
}

/// A directory wconverge makes in a directory another user can write (`~/.ssh` in her
/// home) is its own only as it made it: she renames each new `.ssh` away the moment it
/// appears (root's, before it gets her as its owner) and moves a private directory of
/// root's that holds a secret in its place. Runs race her until she has won at least
/// 20 swaps (at most 3,000 runs): the vault she moved in is never given to her, and
/// each run she won failed saying so or left her only the empty directory it made.
#[test]
fn a_directory_swapped_in_for_one_wconverge_made_is_never_given_away() {
    let (machine, user, home) = with_attacker();
    let ssh = home.join(".ssh");
    let vault = home.join("vault");
    std::fs::create_dir(&vault).expect("vault");
    std::fs::set_permissions(&vault, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(vault.join("secret"), "root's\n").expect("secret");
    let vault_inode = std::fs::metadata(&vault).expect("vault").ino();
    let policy = policy_for(&machine, machine.root(), "");
    let catalog = machine.catalog(json!([
        { "type": "file", "title": ssh.to_str().expect("utf-8"),
          "attributes": { "ensure": "directory", "owner": user.name, "mode": "0700" } },
    ]));
    let attacker = user.spawn_perl(
        &home,
        r#"my $n = 0; $SIG{TERM} = sub { print "swapped $n\n"; exit 0 };
           while (1) {
             my @st = lstat('.ssh');
             next unless @st && $st[4] == 0 && -d _ && -e 'vault';
             rename('.ssh', "gone-$n") or next;
             rename('vault', '.ssh') and $n++;
           }"#,
        &[],
    );
    let (mut runs, mut won, mut failed) = (0, 0, 0);
    while won < 20 && runs < 3000 {
        runs += 1;
        let (run, _) = run_bounded(
            &machine,
            &apply_args(&catalog, &policy),
            Duration::from_secs(60),
        );
        let at_ssh = std::fs::symlink_metadata(&ssh).ok();
        if at_ssh
            .as_ref()
            .is_some_and(|stat| stat.ino() == vault_inode)
        {
            won += 1;
            if run.code != 2 {
                failed += 1;
            }
            assert_eq!(
                at_ssh.expect("stat").uid(),
                0,
                "the vault was given to her: {run:#?}"
            );
            std::fs::rename(&ssh, &vault).expect("the vault back");
        }
        // From nothing again: her directories and what the run made go.
        for entry in std::fs::read_dir(&home).expect("home") {
            let path = entry.expect("entry").path();
            if path != vault {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    let said = attacker.stop();
    let vault_stat = std::fs::metadata(&vault).expect("vault");
    figure(&format!(
        "made directories: {runs} runs under the race, she moved the vault in {won} times, \
         {failed} of those runs failed; the vault is uid {}",
        vault_stat.uid()
    ));
    assert_eq!(vault_stat.ino(), vault_inode);
    assert_eq!(vault_stat.uid(), 0, "the vault stays root's");
    assert!(
        won > 0,
        "she never won the race; the test proves nothing:\n{said}"
    );
}
