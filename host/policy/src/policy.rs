//! The policy: which plugins exist, where each comes from, and what each may touch.
//!
//! A policy is a TOML file the operator owns (`--policy FILE`); without one, the
//! built-in [`DEFAULT_POLICY`] applies. Anything a policy does not grant is refused.

use crate::arguments::ArgsPattern;
use serde::Deserialize;
use std::path::{Component, Path, PathBuf};

/// The policy used when no `--policy` is given. Shown and explained in `docs/policy.md`.
pub const DEFAULT_POLICY: &str = r#"# wconverge's built-in policy: the built-in providers, as Puppet users expect them.

# Files anywhere: the file provider sees, for each resource, only the directory
# that holds it. Its programs are those a `validate_cmd` may run (`visudo -cf %`).
[plugins.file]
source = "builtin"
directories = [{ path = "/", access = "read-write" }]
programs = ["/bin/*", "/sbin/*", "/usr/bin/*", "/usr/sbin/*", "/usr/local/bin/*", "/usr/local/sbin/*"]

# Templates, rendered during the run: like files (each resource sees the directory that
# holds it, and the one that holds its source, read-only). A template receives every
# node attribute, sensitive ones included.
[plugins.template]
source = "builtin"
directories = [{ path = "/", access = "read-write" }]
programs = ["/bin/*", "/sbin/*", "/usr/bin/*", "/usr/sbin/*", "/usr/local/bin/*", "/usr/local/sbin/*"]

# Shell commands: exec, sh and script resources, and every guard whose interpreter is
# `default` (/bin/sh) or `exec` or `sh`; programs from the system's program directories,
# as any user; `creates` may name any path (read-only).
[plugins.sh]
source = "builtin"
provides = ["sh", "exec", "script"]
directories = [{ path = "/", access = "read" }]
programs = ["/bin/*", "/sbin/*", "/usr/bin/*", "/usr/sbin/*", "/usr/local/bin/*", "/usr/local/sbin/*"]
users = ["*"]
groups = ["*"]
environment = ["*", "PATH"]

# bash resources and bash guards.
[plugins.bash]
source = "builtin"
directories = [{ path = "/", access = "read" }]
programs = ["/bin/bash", "/usr/bin/bash"]
users = ["*"]
groups = ["*"]
environment = ["*", "PATH"]

# powershell_script resources and PowerShell guards, with PowerShell 7 (pwsh).
[plugins.powershell]
source = "builtin"
provides = ["powershell_script"]
directories = [{ path = "/", access = "read" }]
programs = ["/usr/bin/pwsh", "/usr/local/bin/pwsh", "/opt/microsoft/powershell/7/pwsh", "/snap/bin/pwsh"]
users = ["*"]
groups = ["*"]
environment = ["*", "PATH"]

# Runs a script as another architecture (`architecture => 'i386'`): a 32-bit
# personality with setarch. Pure rules; it launches nothing itself.
[plugins.launcher]
source = "builtin"
provides = []
programs = ["/usr/bin/setarch"]

# Facts for resource programs (`requires`, `wconverge facts`): each is granted the
# directories that hold its facts, read-only, and launches nothing. A directory grant
# holds more than the fact files (/etc holds /etc/shadow): review a fact plugin as you
# would anything that reads /etc.
[plugins.facts-os]
source = "builtin"
provides = []
directories = [{ path = "/etc", access = "read" }, { path = "/usr/lib", access = "read" }, { path = "/run", access = "read" }]

[plugins.facts-package]
source = "builtin"
provides = []
directories = [{ path = "/var/lib/dpkg", access = "read" }]

[plugins.facts-users]
source = "builtin"
provides = []
directories = [{ path = "/etc", access = "read" }]

[plugins.facts-mount]
source = "builtin"
provides = []
directories = [{ path = "/proc", access = "read" }]

# Facter's networking, processors, memory, virtual and timezone facts: interfaces and
# addresses from /proc/net and /sys/class/net, the domain from /etc/hosts and
# /etc/resolv.conf, the hypervisor from /sys/class/dmi, the zone from /etc/timezone.
[plugins.facts-system]
source = "builtin"
provides = []
directories = [{ path = "/proc", access = "read" }, { path = "/sys", access = "read" }, { path = "/etc", access = "read" }, { path = "/run", access = "read" }, { path = "/usr/share/zoneinfo", access = "read" }]

# Packages, Debian's way. apt (the default where os.family is debian): dpkg-query reads
# the package database (once for every package of a run), apt-cache the version `latest`
# would install, and apt-get installs, removes or purges one named package per launch.
# No pattern lets the manifest choose an option: a `*` never matches an argument that
# starts with `-`, and names come after `--`. Installing a package runs its maintainer
# scripts as root: the audit says so. PATH is granted because dpkg and maintainer scripts
# need one; the plugins set the system's (/usr/sbin:/usr/bin:/sbin:/bin).
[plugins.apt]
source = "builtin"
provides = ["package"]
environment = ["DEBIAN_FRONTEND", "PATH"]
programs = [
  { path = "/usr/bin/dpkg-query", query = true, args = [["-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"]] },
  { path = "/usr/bin/apt-cache", query = true, args = [["policy", "--", "*", "..."]] },
  { path = "/usr/bin/apt-get", args = [
    ["install", "-y", "-q", "-o", "DPkg::Options::=--force-confold", "--", "*"],
    ["install", "-y", "-q", "-o", "DPkg::Options::=--force-confold", "--allow-downgrades", "--", "*"],
    ["install", "-y", "-q", "-o", "DPkg::Options::=--force-confold", "--no-install-recommends", "--", "*"],
    ["install", "-y", "-q", "-o", "DPkg::Options::=--force-confold", "--no-install-recommends", "--allow-downgrades", "--", "*"],
    ["install", "-y", "-q", "-o", "DPkg::Options::=--force-confold", "--reinstall", "--", "*"],
    ["install", "-y", "-q", "-o", "DPkg::Options::=--force-confold", "--no-install-recommends", "--reinstall", "--", "*"],
    ["remove", "-y", "-q", "--", "*"],
    ["purge", "-y", "-q", "--", "*"],
  ] },
]

# A local .deb file (`provider => dpkg`, `source => '/path/x.deb'`): dpkg installs the file
# the manifest names, or removes or purges a named package; dpkg-deb reads a file's name
# and version. The plugin reads only who owns the file (anywhere, read-only): it must be
# root's in a directory only root can write, every directory on the way too, or another
# user could swap the package whose scripts run as root.
[plugins.dpkg]
source = "builtin"
provides = ["package"]
directories = [{ path = "/", access = "read" }]
environment = ["DEBIAN_FRONTEND", "PATH"]
programs = [
  { path = "/usr/bin/dpkg-query", query = true, args = [["-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"]] },
  { path = "/usr/bin/dpkg-deb", query = true, args = [["-f", "--", "*", "Package", "Version"]] },
  { path = "/usr/bin/dpkg", args = [
    ["--force-confold", "-i", "--", "*"],
    ["-r", "--", "*"],
    ["-P", "--", "*"],
  ] },
]

# Users and groups, with the shadow utilities. getent reads the databases once for every
# resource of a run (the shadow database only when a resource manages a password or an
# expiry date: it holds every password hash). Each launch sets one thing, every value
# the manifest gives an operand after its option (a `*` never matches an argument that
# starts with `-`); a password hash goes to chpasswd on standard input, never on a
# command line. Who may create users and set their groups and passwords is root: the
# audit says so.
[plugins.useradd]
source = "builtin"
provides = ["user", "group"]
environment = ["PATH"]
programs = [
  { path = "/usr/bin/getent", query = true, args = [["passwd"], ["group"], ["shadow"]] },
  { path = "/usr/sbin/useradd", args = [
    ["-d", "*", "-m", "--", "*"],
    ["-d", "*", "-M", "--", "*"],
    ["-g", "*", "-d", "*", "-m", "--", "*"],
    ["-g", "*", "-d", "*", "-M", "--", "*"],
    ["-u", "*", "-d", "*", "-m", "--", "*"],
    ["-u", "*", "-d", "*", "-M", "--", "*"],
    ["-u", "*", "-g", "*", "-d", "*", "-m", "--", "*"],
    ["-u", "*", "-g", "*", "-d", "*", "-M", "--", "*"],
    ["-r", "-d", "*", "-m", "--", "*"],
    ["-r", "-d", "*", "-M", "--", "*"],
    ["-r", "-g", "*", "-d", "*", "-m", "--", "*"],
    ["-r", "-g", "*", "-d", "*", "-M", "--", "*"],
    ["-r", "-u", "*", "-d", "*", "-m", "--", "*"],
    ["-r", "-u", "*", "-d", "*", "-M", "--", "*"],
    ["-r", "-u", "*", "-g", "*", "-d", "*", "-m", "--", "*"],
    ["-r", "-u", "*", "-g", "*", "-d", "*", "-M", "--", "*"],
  ] },
  { path = "/usr/sbin/usermod", args = [
    ["-u", "*", "--", "*"], ["-g", "*", "--", "*"], ["-d", "*", "--", "*"], ["-d", "*", "-m", "--", "*"],
    ["-s", "*", "--", "*"], ["-c", "*", "--", "*"], ["-e", "*", "--", "*"], ["-G", "*", "--", "*"],
    ["-a", "-G", "*", "--", "*"],
  ] },
  { path = "/usr/sbin/userdel", args = [["--", "*"], ["-r", "--", "*"]] },
  { path = "/usr/sbin/chpasswd", args = [["-e"]] },
  { path = "/usr/sbin/groupadd", args = [["--", "*"], ["-r", "--", "*"], ["-g", "*", "--", "*"], ["-r", "-g", "*", "--", "*"]] },
  { path = "/usr/sbin/groupmod", args = [["-g", "*", "--", "*"]] },
  { path = "/usr/sbin/groupdel", args = [["--", "*"]] },
  { path = "/usr/bin/gpasswd", args = [["-M", "*", "--", "*"], ["-a", "*", "--", "*"]] },
]

# Services. systemd where PID 1 is systemd (os.init == 'systemd'): systemctl for one
# unit a launch, after `--`. debian elsewhere on Debian: /etc/init.d scripts through
# `service`, enabled with update-rc.d; whether one starts at boot is read from the
# /etc/rc2.d listing. A service's name never starts with `-` (checked before the run,
# and by the patterns' `*`). A status command runs while inspecting, in noop runs too.
# systemd reloads its units first when a unit file changed since (as Puppet does) or
# a unit is not found yet (an init script a package just installed).
[plugins.systemd]
source = "builtin"
provides = ["service"]
environment = ["PATH"]
programs = [
  { path = "/usr/bin/systemctl", query = true, args = [["is-active", "--quiet", "--", "*"], ["is-enabled", "--", "*"], ["show", "--property=NeedDaemonReload", "--property=LoadState", "--", "*"]] },
  { path = "/usr/bin/systemctl", args = [
    ["start", "--", "*"], ["stop", "--", "*"], ["restart", "--", "*"],
    ["enable", "--", "*"], ["disable", "--", "*"], ["mask", "--", "*"], ["unmask", "--", "*"],
    ["daemon-reload"],
  ] },
]

[plugins.debian]
source = "builtin"
provides = ["service"]
environment = ["PATH"]
programs = [
  { path = "/usr/sbin/service", query = true, args = [["*", "status"]] },
  { path = "/usr/bin/ls", query = true, args = [["-1", "--", "/etc/rc2.d"]] },
  { path = "/usr/sbin/service", args = [["*", "start"], ["*", "stop"], ["*", "restart"]] },
  { path = "/usr/sbin/update-rc.d", args = [["*", "defaults"], ["*", "enable"], ["*", "disable"]] },
]

# `provider => base`: the start, stop, status and restart commands a resource gives, each
# an absolute program run without a shell, from the system's program directories and
# /etc/init.d. Whoever writes the manifest chooses the commands: root-equivalent, as
# Puppet's base provider is. The status command runs while inspecting (noop runs too).
[plugins.base]
source = "builtin"
provides = ["service"]
environment = ["PATH"]
programs = [
  { path = "/etc/init.d/*", query = true }, { path = "/usr/sbin/*", query = true },
  { path = "/usr/bin/*", query = true }, { path = "/sbin/*", query = true },
  { path = "/bin/*", query = true }, { path = "/usr/local/sbin/*", query = true },
  { path = "/usr/local/bin/*", query = true },
]

# Cron jobs: a user's crontab, read with `crontab -u USER -l` and written whole, from
# standard input, with `crontab -u USER -`. The jobs run as their user, root included:
# the audit says so.
[plugins.cron]
source = "builtin"
programs = [
  { path = "/usr/bin/crontab", query = true, args = [["-u", "*", "-l"]] },
  { path = "/usr/bin/crontab", args = [["-u", "*", "-"]] },
]

# Entries of /etc/hosts, and of no other file: the file is replaced whole, through a
# temporary file beside it, so the plugin may write in /etc (each resource sees only the
# directory of its file), and `files` says which file its resources may name.
[plugins.hosts]
source = "builtin"
provides = ["host"]
directories = [{ path = "/etc", access = "read-write" }]
files = ["/etc/hosts"]

# Users' authorized_keys, beneath /home and /root (each resource sees only the
# directory of its file), with the file type's rules for directories users own; and the
# keys no resource manages, removed for `user { purge_ssh_keys => true }`.
[plugins.sshkeys]
source = "builtin"
provides = ["ssh_authorized_key", "purge_ssh_keys"]
directories = [{ path = "/home", access = "read-write" }, { path = "/root", access = "read-write" }]

# Messages only: no files, no programs.
[plugins.notify]
source = "builtin"
"#;

/// Default limits of a plugin call.
pub const DEFAULT_MEMORY_MIB: u64 = 128;
pub const DEFAULT_CPU_SECONDS: f64 = 10.0;
pub const DEFAULT_OUTPUT_KIB: u64 = 1024;
pub const DEFAULT_PROCESS_TIMEOUT_SECONDS: u64 = 3600;
pub const DEFAULT_WALL_SECONDS: f64 = 300.0;

/// Why a policy could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{origin}:{line}:{column}: {message}")]
    Syntax {
        origin: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{origin}: plugin `{plugin}`: {message}")]
    Invalid {
        origin: String,
        plugin: String,
        message: String,
    },
    #[error("{origin}: [imports]: {message}")]
    Imports { origin: String, message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    ReadWrite,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default, deserialize_with = "in_file_order")]
    plugins: Vec<(String, PluginEntry)>,
    #[serde(default)]
    imports: ImportsEntry,
}

/// `[imports]`: what this node takes from other nodes' exported resources.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportsEntry {
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    directories: Vec<String>,
}

/// What a node accepts from other nodes' exported resources (a collector realizes them
/// here, as root): nothing by default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Imports {
    /// The types it collects.
    pub types: Vec<String>,
    /// For resources that name paths: the directories every path must be in.
    pub directories: Vec<PathBuf>,
}

/// The `[plugins.NAME]` tables in the order the file has them: the order in which
/// the providers of one type are tried.
fn in_file_order<'de, D>(deserializer: D) -> Result<Vec<(String, PluginEntry)>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Entries;
    impl<'de> serde::de::Visitor<'de> for Entries {
        type Value = Vec<(String, PluginEntry)>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table of plugins")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::new();
            while let Some(entry) = map.next_entry()? {
                entries.push(entry);
            }
            Ok(entries)
        }
    }
    deserializer.deserialize_map(Entries)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginEntry {
    source: String,
    sha256: Option<String>,
    provides: Option<Vec<String>>,
    #[serde(default)]
    directories: Vec<DirectoryEntry>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    programs: Vec<ProgramEntry>,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
    run_as: Option<String>,
    #[serde(default)]
    environment: Vec<String>,
    #[serde(default)]
    limits: LimitsEntry,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectoryEntry {
    path: String,
    access: Access,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ProgramEntry {
    Path(String),
    Table(ProgramTable),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramTable {
    path: String,
    /// The argument lists it may be launched with; any, without this key.
    args: Option<Vec<Vec<String>>>,
    /// May run while a plugin only inspects (current state, plan, noop runs).
    #[serde(default)]
    query: bool,
    /// Launched as root although someone other than root can write the file or a
    /// directory on its path (refused otherwise): only for one program, by name.
    #[serde(default)]
    others_may_write: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsEntry {
    memory_mib: Option<u64>,
    cpu_seconds: Option<f64>,
    output_kib: Option<u64>,
    process_timeout_seconds: Option<u64>,
    wall_seconds: Option<f64>,
}

/// Where a plugin's component comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Embedded in the `wconverge` binary.
    Builtin,
    /// A `.wasm` file, which must match the pinned digest.
    File(PathBuf),
    /// `NAME.wasm` in the directory given with `--plugin-dir` (`None` until it is
    /// given: see [`Policy::place_plugin_dir`]); pinned like a file.
    PluginDir(Option<PathBuf>),
}

impl Source {
    /// The component file, for a plugin that comes from one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Source::Builtin | Source::PluginDir(None) => None,
            Source::File(path) | Source::PluginDir(Some(path)) => Some(path),
        }
    }

    /// How the audit and `plugins list` name it.
    pub fn describe(&self) -> String {
        match self {
            Source::Builtin => "builtin".to_owned(),
            Source::File(path) => path.display().to_string(),
            Source::PluginDir(Some(path)) => format!("plugin-dir {}", path.display()),
            Source::PluginDir(None) => "plugin-dir (no --plugin-dir given)".to_owned(),
        }
    }
}

/// A directory a plugin may reach, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryGrant {
    pub path: PathBuf,
    pub access: Access,
}

/// A program a plugin may launch: one path, or every file directly in a directory, with
/// the argument lists it may be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramGrant {
    pub pattern: ProgramPattern,
    /// `None`: any arguments. Otherwise the whole argument list must match one pattern.
    pub args: Option<Vec<ArgsPattern>>,
    pub query: bool,
    /// Launched as root even though someone other than root can write the program or a
    /// directory on its path; never for a directory of programs.
    pub others_may_write: bool,
}

impl ProgramGrant {
    pub fn allows_args(&self, args: &[String]) -> bool {
        self.args
            .as_ref()
            .is_none_or(|patterns| patterns.iter().any(|pattern| pattern.matches(args)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramPattern {
    Exact(PathBuf),
    /// `/usr/bin/*`: any file directly in the directory.
    Children(PathBuf),
}

impl ProgramPattern {
    pub fn matches(&self, program: &Path) -> bool {
        match self {
            ProgramPattern::Exact(path) => program == path,
            ProgramPattern::Children(dir) => program.parent() == Some(dir.as_path()),
        }
    }
}

impl std::fmt::Display for ProgramPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProgramPattern::Exact(path) => write!(f, "{}", path.display()),
            ProgramPattern::Children(dir) => write!(f, "{}/*", dir.display()),
        }
    }
}

/// The environment variables a plugin may set for the programs it launches.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvironmentGrant {
    /// `*`: any variable but those [`dangerous_variable`] names (flagged by the audit:
    /// many programs take code or options from their environment).
    pub any: bool,
    /// Names, and prefixes written `NAME_*`.
    pub names: Vec<String>,
}

/// Environment variables that decide what code a program or its loader runs (the
/// search path, the loader's, the shells' start-up files and functions, glibc's module
/// paths): `*` and prefixes never cover them, only their own name does. Many programs
/// read options with the same power (`TAR_OPTIONS`, `GIT_*`, `PYTHONSTARTUP`): the list
/// cannot be complete, so `plugins audit` flags `*` itself.
pub fn dangerous_variable(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "GCONV_PATH",
        "GLIBC_TUNABLES",
        "LOCPATH",
        "NLSPATH",
    ];
    NAMES.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("BASH_FUNC_")
}

impl EnvironmentGrant {
    pub fn allows(&self, name: &str) -> bool {
        if self.names.iter().any(|granted| granted == name) {
            return true;
        }
        if dangerous_variable(name) {
            return false;
        }
        self.any
            || self.names.iter().any(|granted| {
                granted
                    .strip_suffix('*')
                    .is_some_and(|prefix| name.starts_with(prefix))
            })
    }

    /// The entries as the policy writes them.
    pub fn entries(&self) -> Vec<String> {
        let mut entries = Vec::with_capacity(self.names.len() + 1);
        if self.any {
            entries.push("*".to_owned());
        }
        entries.extend(self.names.iter().cloned());
        entries
    }
}

/// Who a plugin may run programs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principals {
    Any,
    Only(Vec<String>),
}

impl Principals {
    fn from_list(list: Vec<String>) -> Self {
        if list.iter().any(|entry| entry == "*") {
            Principals::Any
        } else {
            Principals::Only(list)
        }
    }

    pub fn allows(&self, name: &str) -> bool {
        match self {
            Principals::Any => true,
            Principals::Only(names) => names.iter().any(|allowed| allowed == name),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub memory_bytes: usize,
    pub cpu_seconds: f64,
    pub output_bytes: usize,
    pub process_timeout_seconds: u64,
    /// Wall-clock time one call may take, not counting the programs it launches (which
    /// stop at their own timeout): a call that sleeps, or waits on anything, ends here.
    pub wall_seconds: f64,
}

/// One plugin's entry, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginPolicy {
    pub name: String,
    pub source: Source,
    /// Lowercase hex.
    pub sha256: Option<String>,
    pub provides: Vec<String>,
    pub directories: Vec<DirectoryGrant>,
    /// When not empty, the only files (by exact path) its resources may name where they
    /// write: the directories above are where those files are, not what it may write.
    pub files: Vec<PathBuf>,
    pub programs: Vec<ProgramGrant>,
    pub users: Principals,
    pub groups: Principals,
    /// The user (and their primary group) a program runs as when its launch names no
    /// user; without it, as wconverge's own user.
    pub run_as: Option<String>,
    /// Environment variables the plugin may set for the programs it launches.
    pub environment: EnvironmentGrant,
    pub limits: Limits,
}

/// A checked policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub origin: String,
    pub plugins: Vec<PluginPolicy>,
    /// The `.wasm` files of the plugin directory that no plugin takes, so never loaded
    /// (set by [`Policy::place_plugin_dir`]).
    pub unclaimed: Vec<PathBuf>,
    /// What it accepts from other nodes.
    pub imports: Imports,
}

impl Policy {
    /// The built-in policy.
    pub fn builtin() -> Policy {
        Policy::parse(DEFAULT_POLICY, "built-in policy", None)
            .expect("the built-in policy is valid")
    }

    /// Parses a policy. `origin` names it in messages; relative plugin paths resolve
    /// against `base_dir` (the policy file's directory).
    pub fn parse(text: &str, origin: &str, base_dir: Option<&Path>) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|error| {
            let (line, column) = error
                .span()
                .map(|span| line_column(text, span.start))
                .unwrap_or((1, 1));
            PolicyError::Syntax {
                origin: origin.to_owned(),
                line,
                column,
                message: error.message().to_owned(),
            }
        })?;
        let mut plugins = Vec::with_capacity(file.plugins.len());
        for (name, entry) in file.plugins {
            let invalid = |message: String| PolicyError::Invalid {
                origin: origin.to_owned(),
                plugin: name.clone(),
                message,
            };
            plugins.push(check_entry(&name, entry, base_dir).map_err(invalid)?);
        }
        let invalid_imports = |message: String| PolicyError::Imports {
            origin: origin.to_owned(),
            message,
        };
        let imports = Imports {
            types: file.imports.types,
            directories: file
                .imports
                .directories
                .iter()
                .map(|dir| absolute(dir, "directory"))
                .collect::<Result<_, String>>()
                .map_err(invalid_imports)?,
        };
        Ok(Policy {
            origin: origin.to_owned(),
            plugins,
            unclaimed: Vec::new(),
            imports,
        })
    }

    /// Places the plugins whose source is `plugin-dir` in `dir` (`dir/NAME.wasm`), and
    /// records in `unclaimed` the `.wasm` files of `dir` that no plugin takes: they are
    /// never loaded, since nothing pins them.
    pub fn place_plugin_dir(&mut self, dir: &Path) -> std::io::Result<()> {
        for plugin in &mut self.plugins {
            if let Source::PluginDir(file) = &mut plugin.source {
                *file = Some(dir.join(format!("{}.wasm", plugin.name)));
            }
        }
        let mut unclaimed = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|extension| extension != "wasm") {
                continue;
            }
            let claimed = self
                .plugins
                .iter()
                .any(|plugin| plugin.source.file() == Some(path.as_path()));
            if !claimed {
                unclaimed.push(path);
            }
        }
        unclaimed.sort();
        self.unclaimed = unclaimed;
        Ok(())
    }

    /// What is wrong with the plugin directory's ownership: one that another user owns
    /// or may write lets that user replace the components in it. Pins still refuse what
    /// they did not pin, so a run then fails instead of running it; the operator should
    /// know before.
    pub fn plugin_dir_warning(dir: &Path) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::metadata(dir).ok()?;
        let euid = rustix::process::geteuid().as_raw();
        if metadata.uid() != euid && metadata.uid() != 0 {
            return Some(format!(
                "the plugin directory `{}` belongs to uid {}, not to this user or root: its \
                 owner can replace the plugins in it (pinned plugins would then be refused)",
                dir.display(),
                metadata.uid()
            ));
        }
        if metadata.mode() & 0o022 != 0 {
            return Some(format!(
                "the plugin directory `{}` can be written by {} (mode {:o}): they can replace \
                 the plugins in it (pinned plugins would then be refused); run `chmod go-w {}`",
                dir.display(),
                if metadata.mode() & 0o002 != 0 {
                    "every user"
                } else {
                    "its group"
                },
                metadata.mode() & 0o7777,
                dir.display()
            ));
        }
        None
    }

    pub fn plugin(&self, name: &str) -> Option<&PluginPolicy> {
        self.plugins.iter().find(|plugin| plugin.name == name)
    }

    /// The plugins that provide `type_name`, in the order the policy lists them: the
    /// order in which their suitability is tried.
    pub fn providers_of<'a>(
        &'a self,
        type_name: &'a str,
    ) -> impl Iterator<Item = &'a PluginPolicy> + 'a {
        self.plugins
            .iter()
            .filter(move |plugin| plugin.provides.iter().any(|provided| provided == type_name))
    }
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |rest| rest.chars().count())
        + 1;
    (line, column)
}

fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// An absolute path without `.`, `..` or empty components.
fn absolute(path: &str, what: &str) -> Result<PathBuf, String> {
    let parsed = Path::new(path);
    if !parsed.is_absolute() {
        return Err(format!("{what} `{path}` is not an absolute path"));
    }
    if parsed
        .components()
        .any(|component| matches!(component, Component::CurDir | Component::ParentDir))
    {
        return Err(format!("{what} `{path}` contains `.` or `..`"));
    }
    Ok(parsed.components().collect())
}

fn check_entry(
    name: &str,
    entry: PluginEntry,
    base_dir: Option<&Path>,
) -> Result<PluginPolicy, String> {
    if !is_valid_name(name) {
        return Err(
            "plugin names are lowercase letters, digits, `_` and `-`, starting with a letter"
                .to_owned(),
        );
    }
    let source = match entry.source.as_str() {
        "builtin" => Source::Builtin,
        "plugin-dir" => Source::PluginDir(None),
        "" => return Err("`source` is empty".to_owned()),
        path => {
            let path = Path::new(path);
            let resolved = match base_dir {
                Some(base) if path.is_relative() => base.join(path),
                _ => path.to_path_buf(),
            };
            Source::File(resolved)
        }
    };
    let sha256 = match entry.sha256 {
        Some(digest) => {
            let digest = digest.to_ascii_lowercase();
            if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("`sha256` `{digest}` is not 64 hexadecimal digits"));
            }
            Some(digest)
        }
        None => None,
    };
    if source != Source::Builtin && sha256.is_none() {
        return Err(
            "a plugin loaded from a file must be pinned: add `sha256 = \"...\"` with the \
             digest of the reviewed .wasm (`wconverge plugins lock --policy FILE` writes it, \
             or `sha256sum FILE` prints it)"
                .to_owned(),
        );
    }
    let provides = entry.provides.unwrap_or_else(|| vec![name.to_owned()]);
    for type_name in &provides {
        if !is_valid_name(type_name) {
            return Err(format!(
                "`provides` entry `{type_name}` is not a lowercase type name"
            ));
        }
    }
    let directories = entry
        .directories
        .into_iter()
        .map(|directory| {
            Ok(DirectoryGrant {
                path: absolute(&directory.path, "directory")?,
                access: directory.access,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let programs = entry
        .programs
        .into_iter()
        .map(|program| {
            let (path, args, query, others_may_write) = match program {
                ProgramEntry::Path(path) => (path, None, false, false),
                ProgramEntry::Table(table) => {
                    (table.path, table.args, table.query, table.others_may_write)
                }
            };
            let args = args
                .map(|patterns| {
                    patterns
                        .iter()
                        .map(|pattern| {
                            ArgsPattern::parse(pattern)
                                .map_err(|error| format!("program `{path}`: {error}"))
                        })
                        .collect::<Result<Vec<_>, String>>()
                })
                .transpose()?;
            let pattern = match path.strip_suffix("/*") {
                Some(dir) if !dir.is_empty() => ProgramPattern::Children(absolute(dir, "program directory")?),
                _ if path.contains('*') => {
                    return Err(format!(
                        "program `{path}`: `*` is allowed only as a whole last component, as in `/usr/bin/*`"
                    ));
                }
                _ => ProgramPattern::Exact(absolute(&path, "program")?),
            };
            if others_may_write && matches!(pattern, ProgramPattern::Children(_)) {
                return Err(format!(
                    "program `{path}`: `others_may_write` trusts one program by name, not a \
                     directory of them; list the program"
                ));
            }
            Ok(ProgramGrant {
                pattern,
                args,
                query,
                others_may_write,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut environment = EnvironmentGrant::default();
    for variable in entry.environment {
        let name = variable.strip_suffix('*').unwrap_or(&variable);
        if variable == "*" {
            environment.any = true;
        } else if name.is_empty()
            || name.contains(['=', '\0', '*'])
            || (name.len() < variable.len() && dangerous_variable(name))
        {
            return Err(format!(
                "`environment` entry `{variable}` is not a variable name, `NAME_*` or `*` \
                 (PATH, LD_*, DYLD_*, BASH_ENV and the like are granted only by their full \
                 name)"
            ));
        } else {
            environment.names.push(variable);
        }
    }
    let limits = Limits {
        memory_bytes: mib_to_bytes(
            entry.limits.memory_mib.unwrap_or(DEFAULT_MEMORY_MIB),
            "memory_mib",
        )?,
        cpu_seconds: match entry.limits.cpu_seconds.unwrap_or(DEFAULT_CPU_SECONDS) {
            seconds if seconds > 0.0 && seconds <= 3600.0 => seconds,
            seconds => {
                return Err(format!(
                    "`cpu_seconds` {seconds} must be above 0 and at most 3600"
                ));
            }
        },
        output_bytes: usize::try_from(entry.limits.output_kib.unwrap_or(DEFAULT_OUTPUT_KIB))
            .ok()
            .filter(|kib| (1..=1024 * 1024).contains(kib))
            .ok_or("`output_kib` must be between 1 and 1048576")?
            * 1024,
        process_timeout_seconds: match entry
            .limits
            .process_timeout_seconds
            .unwrap_or(DEFAULT_PROCESS_TIMEOUT_SECONDS)
        {
            0 => return Err("`process_timeout_seconds` must be above 0".to_owned()),
            seconds => seconds,
        },
        wall_seconds: match entry.limits.wall_seconds.unwrap_or(DEFAULT_WALL_SECONDS) {
            seconds if seconds > 0.0 && seconds <= 86_400.0 => seconds,
            seconds => {
                return Err(format!(
                    "`wall_seconds` {seconds} must be above 0 and at most 86400"
                ));
            }
        },
    };
    let files = entry
        .files
        .iter()
        .map(|file| absolute(file, "file"))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(PluginPolicy {
        name: name.to_owned(),
        source,
        sha256,
        provides,
        directories,
        files,
        programs,
        users: Principals::from_list(entry.users),
        groups: Principals::from_list(entry.groups),
        run_as: match entry.run_as {
            Some(user) if user.is_empty() || user == "*" => {
                return Err("`run_as` names one user".to_owned());
            }
            other => other,
        },
        environment,
        limits,
    })
}

fn mib_to_bytes(mib: u64, key: &str) -> Result<usize, String> {
    if !(2..=64 * 1024).contains(&mib) {
        return Err(format!("`{key}` {mib} must be between 2 and 65536"));
    }
    usize::try_from(mib * 1024 * 1024).map_err(|_| format!("`{key}` {mib} is too large"))
}

#[cfg(test)]
mod tests;
