//! Lines that other programs read, judged by those programs: every value a provider
//! writes into authorized_keys, a crontab or a hosts file is either refused before any
//! change or read back by the real reader (`ssh-keygen` and a running sshd, a running
//! cron, glibc through `getent hosts`) as exactly the one entry intended, and a second
//! run changes nothing. The values are generated (2,000 per field, from a fixed seed
//! printed on failure): control characters, NUL, quotes, backslashes, `%`, runs of
//! spaces, Unicode separators, key types inside values.

use crate::attacker::LocalUser;
use crate::support::Machine;
use serde_json::{Value, json};
use sha2::Digest;
use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Values generated per field.
const PER_FIELD: usize = 2_000;

/// The pieces generated values are made of: mostly harmless, often not.
const PIECES: &[&str] = &[
    "a",
    "b",
    "k",
    "z",
    "Q",
    "0",
    "7",
    "a",
    "e",
    "x",
    "-",
    "_",
    ".",
    "@",
    ",",
    "=",
    "/",
    ":",
    " ",
    " ",
    "  ",
    "\t",
    "\"",
    "'",
    "\\",
    "\\\"",
    "%",
    "\\%",
    "#",
    "$",
    "`",
    ";",
    "(",
    "*",
    "\0",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1b",
    "\x7f",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{3000}",
    "\u{200b}",
    "\u{feff}",
    "é",
    "漢",
    "🙂",
    " ssh-ed25519 ",
    "* * * * * ",
    "no-pty,",
];

/// A deterministic generator of hostile values (xorshift64*).
pub(crate) struct Values(u64);

impl Values {
    pub(crate) fn new(seed: u64) -> Values {
        Values(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Up to `max` pieces.
    pub(crate) fn text(&mut self, max: usize) -> String {
        let len = 1 + self.below(max);
        (0..len).map(|_| PIECES[self.below(PIECES.len())]).collect()
    }

    /// `n` distinct values made by `make`.
    pub(crate) fn distinct(
        &mut self,
        n: usize,
        make: impl Fn(&mut Values) -> String,
    ) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut all = Vec::with_capacity(n);
        while all.len() < n {
            let value = make(self);
            if seen.insert(value.clone()) {
                all.push(value);
            }
        }
        all
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A public ed25519 key (sshd does not check the point) and its fingerprint as
/// `ssh-keygen -l` prints it.
fn random_key(values: &mut Values) -> (String, String) {
    let mut blob = Vec::new();
    for field in [b"ssh-ed25519".to_vec(), values.bytes(32)] {
        blob.extend_from_slice(&u32::try_from(field.len()).expect("short").to_be_bytes());
        blob.extend_from_slice(&field);
    }
    let digest = sha2::Sha256::digest(&blob);
    (
        base64(&blob),
        format!("SHA256:{}", base64(&digest).trim_end_matches('=')),
    )
}

/// The titles of the resources of type `ty` that a refused run names, and checks that
/// the run refused the catalog before changing anything.
fn refused_titles(run: &crate::support::Run, ty: &str) -> HashSet<String> {
    assert_eq!(run.code, 1, "the catalog holds values to refuse:\n{run:#?}");
    assert!(
        run.stderr.contains("nothing was changed"),
        "refused before any change:\n{}",
        run.stderr
    );
    let marker = format!("{ty}[");
    run.stderr
        .lines()
        .filter_map(|line| {
            let start = line.find(&marker)? + marker.len();
            let end = start + line[start..].find(']')?;
            Some(line[start..end].to_owned())
        })
        .collect()
}

/// Applies `resources`, then the ones the first run did not refuse, twice: the values
/// accepted are written, and written once. `untouched` says, after the refused run,
/// that the file is as it was. Returns the accepted resources.
fn accepted(
    machine: &Machine,
    policy: &Path,
    ty: &str,
    resources: Vec<Value>,
    untouched: &dyn Fn() -> bool,
) -> Vec<Value> {
    let all = machine.catalog(Value::Array(resources.clone()));
    let run = machine.apply(&all, policy, &[]);
    let refused = refused_titles(&run, ty);
    assert!(untouched(), "a refused catalog changed nothing");
    assert!(!refused.is_empty(), "some values are refused:\n{run:#?}");
    let accepted: Vec<Value> = resources
        .into_iter()
        .filter(|resource| !refused.contains(resource["title"].as_str().expect("title")))
        .collect();
    assert!(
        accepted.len() >= 50,
        "so few values accepted ({}) that the property says little",
        accepted.len()
    );
    let catalog = machine.catalog(Value::Array(accepted.clone()));
    let first = machine.apply(&catalog, policy, &[]);
    assert_eq!(
        first.code, 2,
        "the accepted values are written:\n{first:#?}"
    );
    let again = machine.apply(&catalog, policy, &[]);
    assert_eq!(
        again.code, 0,
        "a second run finds every entry as written:\n{}",
        again.stdout
    );
    accepted
}

fn sshkeys_policy(machine: &Machine) -> PathBuf {
    machine.policy(&format!(
        "[plugins.sshkeys]\nsource = \"builtin\"\nprovides = [\"ssh_authorized_key\", \"purge_ssh_keys\"]\n\
         directories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
        machine.files_dir()
    ))
}

/// What `ssh-keygen -l` reads in an authorized_keys file: each key's fingerprint and
/// comment, in order.
fn keys_read_by_ssh_keygen(path: &str) -> Vec<(String, String)> {
    let output = Command::new("ssh-keygen")
        .args(["-l", "-f", path])
        .output()
        .expect("ssh-keygen runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| {
            let rest = line.strip_prefix("256 ").expect("an ed25519 key");
            let (fingerprint, rest) = rest.split_once(' ').expect("a comment");
            let comment = rest.strip_suffix(" (ED25519)").expect("its type");
            (fingerprint.to_owned(), comment.to_owned())
        })
        .collect()
}

#[test]
fn authorized_keys_values_are_refused_or_read_back_by_ssh_keygen_as_written() {
    let seed = 0x5eed_0001;
    let machine = Machine::new();
    let policy = sshkeys_policy(&machine);
    let target = machine.file("authorized_keys");
    let mut values = Values::new(seed);
    let names = values.distinct(PER_FIELD, |values| values.text(12));
    let options = values.distinct(PER_FIELD, |values| match values.below(4) {
        0 => format!("command=\"{}\"", values.text(10)),
        1 => format!("from=\"{}\"", values.text(6)),
        2 => format!("{}=\"{}\"", values.text(3), values.text(6)),
        _ => values.text(8),
    });
    let mut resources = Vec::new();
    let mut fingerprints = std::collections::HashMap::new();
    for (index, (name, option)) in names
        .iter()
        .map(|name| (name.clone(), None))
        .chain(
            options
                .iter()
                .enumerate()
                .map(|(index, option)| (format!("option {index}"), Some(option.clone()))),
        )
        .enumerate()
    {
        let (key, fingerprint) = random_key(&mut values);
        let title = format!("k{index}");
        fingerprints.insert(title.clone(), fingerprint);
        let mut attributes = json!({
            "name": name, "user": "root", "type": "ssh-ed25519", "key": key, "target": target,
        });
        if let Some(option) = option {
            attributes["options"] = json!([option]);
        }
        resources
            .push(json!({"type": "ssh_authorized_key", "title": title, "attributes": attributes}));
    }
    let accepted = accepted(&machine, &policy, "Ssh_authorized_key", resources, &|| {
        !Path::new(&target).exists()
    });
    // Each accepted key is read as its key with its name, and nothing else is a key.
    let mut read = keys_read_by_ssh_keygen(&target);
    let mut expected: Vec<(String, String)> = accepted
        .iter()
        .map(|resource| {
            (
                fingerprints[resource["title"].as_str().expect("title")].clone(),
                resource["attributes"]["name"]
                    .as_str()
                    .expect("name")
                    .to_owned(),
            )
        })
        .collect();
    read.sort();
    expected.sort();
    assert_eq!(read, expected, "generated from {seed:#x}");
}

/// The line of the attack: an option value that ends in `\` and a name that holds a
/// quote made sshd read another key than the managed one. Refused, whole.
#[test]
fn an_option_that_escapes_its_closing_quote_is_refused_before_any_change() {
    let machine = Machine::new();
    let policy = sshkeys_policy(&machine);
    let target = machine.file("authorized_keys");
    let mut values = Values::new(7);
    let (legit, _) = random_key(&mut values);
    let (evil, _) = random_key(&mut values);
    let catalog = machine.catalog(json!([{
        "type": "ssh_authorized_key", "title": "managed",
        "attributes": {
            "name": format!("\" ssh-ed25519 {evil} attacker"),
            "user": "root", "type": "ssh-ed25519", "key": legit, "target": target,
            "options": ["command=\"exec /bin/sh #\\\""],
        },
    }]));
    let run = machine.apply(&catalog, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    for said in [
        "a `\\` in a value may only escape a quote",
        "key name `\" ssh-ed25519",
    ] {
        assert!(
            run.stderr.contains(said),
            "missing `{said}`:\n{}",
            run.stderr
        );
    }
    assert!(!Path::new(&target).exists(), "nothing was written");
}

/// sshd, started for the test on a loopback port with a throwaway host key, reads the
/// file wconverge wrote: each managed key logs in and gets exactly the forced command
/// written (the user's shell is a recorder that prints what sshd asks it to run, and
/// runs nothing), and a key that is not managed is refused.
#[test]
fn sshd_runs_each_managed_key_with_exactly_the_command_written() {
    let seed = 0x5eed_0002;
    let machine = Machine::new();
    let shared = shared_dir();
    let (user, target, policy) = sshd_user(&machine, shared.path(), "printf '%s' \"$2\"");
    let mut values = Values::new(seed);
    let commands = values.distinct(150, |values| {
        // Printable ASCII and escaped quotes, with a few of everything else.
        (0..1 + values.below(12))
            .map(|_| match values.below(10) {
                0 => PIECES[values.below(PIECES.len())].to_owned(),
                1 => "\\\"".to_owned(),
                _ => char::from(b' ' + values.below(95) as u8).to_string(),
            })
            .collect()
    });
    let keys = shared.path().join("keys");
    std::fs::create_dir(&keys).expect("keys/");
    let mut resources = Vec::new();
    for (index, command) in commands.iter().enumerate() {
        let private = keys.join(format!("k{index}"));
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
            .arg(&private)
            .output()
            .expect("ssh-keygen");
        assert!(made.status.success(), "{made:?}");
        let public = std::fs::read_to_string(private.with_extension("pub")).expect("public key");
        let key = public.split_whitespace().nth(1).expect("key").to_owned();
        resources.push(json!({
            "type": "ssh_authorized_key", "title": format!("k{index}"),
            "attributes": {
                "name": format!("k{index}"), "user": user.name, "type": "ssh-ed25519",
                "key": key, "target": target, "options": [format!("command=\"{command}\"")],
            },
        }));
    }
    let accepted = accepted(&machine, &policy, "Ssh_authorized_key", resources, &|| {
        !target.exists()
    });
    let sshd = Sshd::start(shared.path(), &target);
    for resource in &accepted {
        let title = resource["title"].as_str().expect("title");
        let written = resource["attributes"]["options"][0]
            .as_str()
            .expect("option");
        // What was meant: the value between the quotes, `\"` standing for `"`.
        let meant = written["command=\"".len()..written.len() - 1].replace("\\\"", "\"");
        let ran = sshd.login(&keys.join(title), &user.name);
        assert_eq!(
            ran.as_deref(),
            Some(meant.as_str()),
            "key {title} with {written:?} (generated from {seed:#x})"
        );
    }
    let stranger = keys.join("stranger");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&stranger)
        .output()
        .expect("ssh-keygen");
    assert!(made.status.success());
    assert_eq!(
        sshd.login(&stranger, &user.name),
        None,
        "a key not managed is refused"
    );
}

/// sshd enforces each option of a managed key as written, not only `command`: `from`
/// admits the address it names and refuses another, `environment` hands the session
/// exactly the value meant (`\"` a quote), and `restrict` with the flags of a locked
/// down key still runs the forced command.
#[test]
fn sshd_enforces_each_managed_option_as_written() {
    let machine = Machine::new();
    let shared = shared_dir();
    // Prints the command sshd asks it to run and the variable a key's option set.
    let (user, target, policy) =
        sshd_user(&machine, shared.path(), "printf '%s|%s' \"$2\" \"$WCV\"");
    // Each key's options, and what a login with it must print (`None`: refused).
    let cases: [(&str, &[&str], Option<&str>); 7] = [
        (
            "here",
            &["from=\"127.0.0.1\"", "command=\"one\""],
            Some("one|"),
        ),
        ("elsewhere", &["from=\"10.9.9.9\"", "command=\"two\""], None),
        (
            "pattern",
            &["from=\"127.0.0.*,!10.*\"", "command=\"three\""],
            Some("three|"),
        ),
        (
            "plain",
            &["environment=\"WCV=plain\"", "command=\"e\""],
            Some("e|plain"),
        ),
        (
            "spaced",
            &[
                "environment=\"WCV=with two  spaces;and \\\"quotes\\\"\"",
                "command=\"e\"",
            ],
            Some("e|with two  spaces;and \"quotes\""),
        ),
        (
            "locked",
            &[
                "restrict",
                "no-pty",
                "no-port-forwarding",
                "command=\"four\"",
            ],
            Some("four|"),
        ),
        ("nothing", &[], Some("ignored|")),
    ];
    let keys = shared.path().join("keys");
    std::fs::create_dir(&keys).expect("keys/");
    let mut resources = Vec::new();
    for (name, options, _) in &cases {
        let private = keys.join(name);
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
            .arg(&private)
            .output()
            .expect("ssh-keygen");
        assert!(made.status.success(), "{made:?}");
        let public = std::fs::read_to_string(private.with_extension("pub")).expect("public key");
        let key = public.split_whitespace().nth(1).expect("key").to_owned();
        resources.push(json!({
            "type": "ssh_authorized_key", "title": name,
            "attributes": {
                "name": name, "user": user.name, "type": "ssh-ed25519",
                "key": key, "target": target, "options": options,
            },
        }));
    }
    let catalog = machine.catalog(Value::Array(resources));
    let first = machine.apply(&catalog, &policy, &[]);
    assert_eq!(first.code, 2, "{first:#?}");
    let again = machine.apply(&catalog, &policy, &[]);
    assert_eq!(again.code, 0, "{again:#?}");
    let sshd = Sshd::start_with(shared.path(), &target, "PermitUserEnvironment WCV\n");
    for (name, options, meant) in &cases {
        assert_eq!(
            sshd.login(&keys.join(name), &user.name).as_deref(),
            *meant,
            "key {name} with {options:?}"
        );
    }
}

/// A user for sshd to log in, whose shell is `/bin/sh` running `recorder` (what it prints
/// is what a login prints), with the authorized_keys file in `shared` that the plugin may
/// write and the policy that lets it.
fn sshd_user(machine: &Machine, shared: &Path, recorder: &str) -> (LocalUser, PathBuf, PathBuf) {
    let user = LocalUser::create();
    let shell = shared.join("recorder");
    std::fs::write(&shell, format!("#!/bin/sh\n{recorder}\n")).expect("recorder");
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let usermod = Command::new("usermod")
        .args(["-s", shell.to_str().expect("utf-8"), "-p", "*", &user.name])
        .output()
        .expect("usermod");
    assert!(usermod.status.success(), "{usermod:?}");
    let policy = machine.policy(&format!(
        "[plugins.sshkeys]\nsource = \"builtin\"\nprovides = [\"ssh_authorized_key\"]\n\
         directories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
        shared.display()
    ));
    (user, shared.join("authorized_keys"), policy)
}

/// A directory every user may enter (for the files a test user's programs read), removed
/// at the end.
pub(crate) fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("wcv-shared-")
        .tempdir_in("/tmp")
        .expect("a directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// An sshd of the test's own, on a free loopback port, stopped when dropped.
struct Sshd {
    child: Child,
    port: u16,
}

impl Sshd {
    fn start(dir: &Path, authorized_keys: &Path) -> Sshd {
        Sshd::start_with(dir, authorized_keys, "")
    }

    /// [`Sshd::start`], with `extra` lines in its configuration.
    fn start_with(dir: &Path, authorized_keys: &Path, extra: &str) -> Sshd {
        let host_key = dir.join("host_key");
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&host_key)
            .output()
            .expect("ssh-keygen");
        assert!(made.status.success(), "{made:?}");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile {}\n\
                 AuthorizedKeysFile {}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin no\nMaxAuthTries 2\n{extra}",
                host_key.display(),
                dir.join("sshd.pid").display(),
                authorized_keys.display()
            ),
        )
        .expect("sshd_config");
        // sshd's privilege separation directory, which its package makes at boot.
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd starts (Debian's openssh-server)");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "sshd listens");
            std::thread::sleep(Duration::from_millis(20));
        }
        Sshd { child, port }
    }

    /// Logs in as `user` with `key`: what the session printed, or `None` when the key
    /// was refused.
    fn login(&self, key: &Path, user: &str) -> Option<String> {
        let output = Command::new("ssh")
            .args([
                "-F",
                "/dev/null",
                "-T",
                "-o",
                "BatchMode=yes",
                "-o",
                "IdentitiesOnly=yes",
            ])
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .args([
                "-o",
                "PreferredAuthentications=publickey",
                "-o",
                "ConnectTimeout=10",
            ])
            .arg("-i")
            .arg(key)
            .args([
                "-p",
                &self.port.to_string(),
                &format!("{user}@127.0.0.1"),
                "ignored",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("ssh runs");
        match output.status.code() {
            Some(255) => None,
            _ => Some(String::from_utf8_lossy(&output.stdout).into_owned()),
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What Debian's cron makes of a command: `\%` is a percent sign and `\\` a
/// backslash (as seen running it; a bare `%` would end the command, which wconverge
/// refuses).
fn as_cron_runs_it(command: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for c in command.chars() {
        if escaped && (c == '%' || c == '\\') {
            out.pop();
            out.push(c);
            escaped = false;
            continue;
        }
        escaped = !escaped && c == '\\';
        out.push(c);
    }
    out
}

/// What cron makes of an environment value: the quotes around it removed.
fn as_cron_sets_it(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

/// A cron daemon: the one running, or one started for the test and stopped after it.
struct CronDaemon(Option<Child>);

impl CronDaemon {
    fn running() -> CronDaemon {
        // This machine's own: a test host's cron (another mount namespace, its own spool)
        // runs nothing of this machine's crontabs.
        let own = std::fs::read_link("/proc/self/ns/mnt").ok();
        let found = Command::new("pgrep")
            .args(["-x", "cron"])
            .output()
            .expect("pgrep");
        let here = String::from_utf8_lossy(&found.stdout)
            .lines()
            .any(|pid| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok() == own);
        if here {
            return CronDaemon(None);
        }
        let child = Command::new("/usr/sbin/cron")
            .arg("-f")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cron starts (Debian's cron)");
        CronDaemon(Some(child))
    }
}

impl Drop for CronDaemon {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn cron_values_are_refused_or_run_by_cron_as_written() {
    let seed = 0x5eed_0003;
    crate::entries::crontab_available();
    let machine = Machine::new();
    let user = LocalUser::create();
    let _remove = crate::entries::CrontabRemoved(user.name.clone());
    let shared = shared_dir();
    let log = shared.path().join("ran");
    std::fs::write(&log, "").expect("log");
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    // The jobs' shell records what cron asks it to run, and runs nothing.
    let recorder = shared.path().join("recorder");
    std::fs::write(
        &recorder,
        format!(
            "#!/bin/sh\nprintf '%s\\037%s\\036' \"$2\" \"$WCV_E\" >> {}\n",
            log.display()
        ),
    )
    .expect("recorder");
    std::fs::set_permissions(&recorder, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let policy = machine.policy(
        "[plugins.cron]\nsource = \"builtin\"\nprograms = [\n  { path = \"/usr/bin/crontab\", query = true, args = [[\"-u\", \"*\", \"-l\"]] },\n  { path = \"/usr/bin/crontab\", args = [[\"-u\", \"*\", \"-\"]] },\n]\n",
    );
    let mut values = Values::new(seed);
    let commands = values.distinct(PER_FIELD, |values| values.text(10));
    let environment = values.distinct(PER_FIELD, |values| format!("WCV_E={}", values.text(8)));
    let names = values.distinct(PER_FIELD, |values| values.text(8));
    let job = |title: String, name: &str, command: &str| {
        json!({"type": "cron", "title": title, "attributes": {
            "name": name, "user": user.name, "command": command,
        }})
    };
    let mut resources = vec![json!({"type": "cron", "title": "shell", "attributes": {
        "name": "shell", "user": user.name, "command": "setup",
        "environment": [format!("SHELL={}", recorder.display()), "MAILTO=\"\""],
    }})];
    for (index, command) in commands.iter().enumerate() {
        resources.push(job(format!("c{index}"), &format!("c{index}"), command));
    }
    for (index, variable) in environment.iter().enumerate() {
        let mut entry = job(
            format!("e{index}"),
            &format!("e{index}"),
            &format!("env{index}"),
        );
        entry["attributes"]["environment"] = json!([variable]);
        resources.push(entry);
    }
    for (index, name) in names.iter().enumerate() {
        resources.push(job(format!("n{index}"), name, &format!("name{index}")));
    }
    let accepted = accepted(&machine, &policy, "Cron", resources, &|| {
        crate::entries::crontab_of(&user.name).is_empty()
    });
    // Every job the crontab holds is one that was accepted, and cron runs each of them
    // with the command and environment written.
    let mut expected: HashSet<(String, Option<String>)> = HashSet::new();
    for resource in &accepted {
        let attributes = &resource["attributes"];
        let command = attributes["command"].as_str().expect("command");
        let value = attributes["environment"][0]
            .as_str()
            .and_then(|variable| variable.strip_prefix("WCV_E="))
            .map(|value| as_cron_sets_it(value).to_owned());
        expected.insert((as_cron_runs_it(command), value));
    }
    let _cron = CronDaemon::running();
    let started = Instant::now();
    let mut ran: HashSet<(String, Option<String>)> = HashSet::new();
    let mut missing: Vec<(String, Option<String>)>;
    loop {
        let text = std::fs::read_to_string(&log).expect("log");
        ran.clear();
        for record in text.split('\u{1e}').filter(|record| !record.is_empty()) {
            let (command, value) = record.split_once('\u{1f}').expect("two fields");
            ran.insert((command.to_owned(), Some(value.to_owned())));
        }
        missing = expected
            .iter()
            .filter(|(command, value)| match value {
                Some(_) => !ran.contains(&(command.clone(), value.clone())),
                None => !ran.iter().any(|(ran, _)| ran == command),
            })
            .cloned()
            .collect();
        if missing.is_empty() || started.elapsed() > Duration::from_secs(150) {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        missing.is_empty(),
        "cron did not run {} of {} jobs as written (generated from {seed:#x}), e.g. {:?}",
        missing.len(),
        expected.len(),
        &missing[..missing.len().min(5)]
    );
    let commands: HashSet<&String> = expected.iter().map(|(command, _)| command).collect();
    let strays: Vec<&(String, Option<String>)> = ran
        .iter()
        .filter(|(command, _)| !commands.contains(command))
        .collect();
    assert!(strays.is_empty(), "cron ran jobs nobody wrote: {strays:?}");
}

#[test]
fn hosts_values_are_refused_or_resolved_by_glibc_as_written() {
    let seed = 0x5eed_0004;
    let machine = Machine::new();
    let policy = machine.policy(&format!(
        "[plugins.hosts]\nsource = \"builtin\"\nprovides = [\"host\"]\n\
         directories = [{{ path = \"{}\", access = \"read-write\" }}]\n",
        machine.files_dir()
    ));
    let target = machine.file("hosts");
    let mut values = Values::new(seed);
    let names = values.distinct(PER_FIELD, |values| values.text(5));
    let comments = values.distinct(PER_FIELD, |values| values.text(10));
    let address =
        |index: usize| format!("10.{}.{}.{}", index >> 16, (index >> 8) & 255, index & 255);
    let mut resources = Vec::new();
    for (index, (name, comment)) in names
        .iter()
        .map(|name| (name.clone(), None))
        .chain(
            comments
                .iter()
                .enumerate()
                .map(|(index, comment)| (format!("comment{index}"), Some(comment.clone()))),
        )
        .enumerate()
    {
        let mut attributes = json!({"name": name, "ip": address(index + 1), "target": target});
        if let Some(comment) = comment {
            attributes["comment"] = json!(comment);
        }
        resources
            .push(json!({"type": "host", "title": format!("h{index}"), "attributes": attributes}));
    }
    let accepted = accepted(&machine, &policy, "Host", resources, &|| {
        !Path::new(&target).exists()
    });
    // glibc reads the file as /etc/hosts (bound over it in a mount namespace of its own).
    let names: Vec<&str> = accepted
        .iter()
        .map(|resource| resource["attributes"]["name"].as_str().expect("name"))
        .collect();
    let output = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount --bind \"$0\" /etc/hosts && exec getent hosts \"$@\"",
        ])
        .arg(&target)
        .args(&names)
        .output()
        .expect("unshare runs");
    assert!(output.status.success(), "every name resolves: {output:?}");
    let mut resolved: Vec<(String, String)> = String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| {
            let mut fields = line.split_whitespace();
            let ip = fields.next().expect("an address").to_owned();
            (fields.next().expect("a name").to_owned(), ip)
        })
        .collect();
    let mut expected: Vec<(String, String)> = accepted
        .iter()
        .map(|resource| {
            let attributes = &resource["attributes"];
            (
                attributes["name"].as_str().expect("name").to_owned(),
                attributes["ip"].as_str().expect("ip").to_owned(),
            )
        })
        .collect();
    resolved.sort();
    expected.sort();
    assert_eq!(resolved, expected, "generated from {seed:#x}");
}

/// Values the files would not keep byte for byte, so that no later run would find them
/// again (a copy of the job or key added on every run, a change reported on every run),
/// are refused before any change, with the reason.
#[test]
fn values_a_file_would_not_keep_are_refused_before_any_change() {
    let machine = Machine::new();
    let files = machine.files_dir();
    let policy = machine.policy(&format!(
        "[plugins.sshkeys]\nsource = \"builtin\"\nprovides = [\"ssh_authorized_key\"]\ndirectories = [{{ path = \"{files}\", access = \"read-write\" }}]\n\n\
         [plugins.hosts]\nsource = \"builtin\"\nprovides = [\"host\"]\ndirectories = [{{ path = \"{files}\", access = \"read-write\" }}]\n\n\
         [plugins.cron]\nsource = \"builtin\"\nprograms = [{{ path = \"/usr/bin/crontab\", query = true, args = [[\"-u\", \"*\", \"-l\"]] }}]\n"
    ));
    let mut values = Values::new(11);
    let (key, _) = random_key(&mut values);
    let catalog = machine.catalog(json!([
        { "type": "cron", "title": "nightly ", "attributes": { "command": "/bin/true" } },
        { "type": "ssh_authorized_key", "title": "deploy  key", "attributes": {
            "user": "root", "type": "ssh-ed25519", "key": key,
            "target": format!("{files}/authorized_keys") } },
        { "type": "host", "title": "db", "attributes": {
            "ip": "10.0.0.5", "target": format!("{files}/hosts"), "comment": "primary " } },
    ]));
    let run = machine.apply(&catalog, &policy, &[]);
    assert_eq!(run.code, 1, "{run:#?}");
    for said in [
        "Cron[nightly ]: job name `nightly ` has spaces at an end",
        "Ssh_authorized_key[deploy  key]: key name `deploy  key` has a space at either end or two in a row",
        "Host[db]: comment `primary ` has spaces at an end",
    ] {
        assert!(
            run.stderr.contains(said),
            "missing `{said}`:\n{}",
            run.stderr
        );
    }
    assert!(
        std::fs::read_dir(&files).expect("files/").next().is_none(),
        "nothing written"
    );
}
