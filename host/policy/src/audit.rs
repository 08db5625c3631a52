//! What a reviewer must look at twice in a policy: grants that amount to root (write
//! access to where the system takes its privileges from, the right to launch a shell or
//! an interpreter, to run programs as anyone, to set `PATH` or the loader's variables),
//! and read access to where secrets live. Pure: the policy in, the flags out, the same
//! on every machine, so that `wconverge plugins audit` is stable and diffable.

use crate::policy::{Access, PluginPolicy, Principals, ProgramPattern, dangerous_variable};
use std::path::Path;
use wconverge_launch::walk::judged;

/// Paths whose write access is root-equivalent: whoever writes there gets root.
const PRIVILEGED: &[&str] = &[
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/systemd",
    "/usr/lib/systemd",
    "/lib/systemd",
    "/etc/cron.d",
    "/etc/crontab",
    "/var/spool/cron",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/pam.d",
    "/etc/ld.so.preload",
    "/etc/ld.so.conf.d",
    "/etc/profile.d",
    "/root/.ssh",
    "/root",
    "/etc/ssh",
    "/usr/bin",
    "/usr/sbin",
    "/bin",
    "/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/boot",
];

/// Paths whose read access reveals secrets.
const SECRET: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/ssh",
    "/root/.ssh",
    "/etc/sudoers",
    "/proc",
];

/// Shells and interpreters: they run whatever script they are given, on their command
/// line or their input, whatever the argument patterns say.
const SHELLS_AND_INTERPRETERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "csh",
    "tcsh",
    "fish",
    "busybox",
    "python",
    "python3",
    "perl",
    "ruby",
    "node",
    "php",
    "lua",
    "tclsh",
    "pwsh",
    "powershell",
    "awk",
    "gawk",
    "mawk",
];

/// Programs that launch what their arguments name (`find -exec`, `tar
/// --checkpoint-action=exec=`, `env sh`): root-equivalent unless argument patterns
/// restrict them.
const RUN_THEIR_ARGUMENTS: &[&str] = &[
    "env",
    "sudo",
    "su",
    "doas",
    "setarch",
    "linux32",
    "linux64",
    "nohup",
    "xargs",
    "find",
    "nice",
    "timeout",
    "chroot",
    "nsenter",
    "systemd-run",
    "ssh",
    "tar",
    "rsync",
    "git",
    "flock",
    "strace",
    "watch",
    "sed",
    "vim",
    "less",
];

/// Package installers: a package's maintainer scripts run as root, so installing one
/// the manifest names is running code as root.
const INSTALLERS: &[&str] = &[
    "apt-get", "apt", "aptitude", "dpkg", "rpm", "yum", "dnf", "zypper", "apk", "pacman", "pip",
    "pip3", "gem", "npm",
];

/// Account tools: whoever sets a user's groups (`sudo`) or password decides who is root.
const ACCOUNT_TOOLS: &[&str] = &[
    "useradd",
    "usermod",
    "chpasswd",
    "chgpasswd",
    "gpasswd",
    "passwd",
    "adduser",
    "deluser",
];

/// Schedulers: the jobs they install run as their user, root included.
const SCHEDULERS: &[&str] = &["crontab", "at", "batch"];

/// One flagged grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    /// `root-equivalent` or `reads-secrets`.
    pub severity: &'static str,
    pub message: String,
}

/// The flags of the types a plugin provides, whatever its grants: a type whose
/// resources receive every node attribute during the run (`context: node`) reads
/// secrets, sensitive attributes included.
pub fn type_flags(types: &[wconverge_catalog::TypeSchema]) -> Vec<Flag> {
    types
        .iter()
        .filter(|schema| {
            schema
                .context
                .contains(&wconverge_catalog::RunContext::NodeAttributes)
        })
        .map(|schema| Flag {
            severity: "reads-secrets",
            message: format!(
                "type {} receives every node attribute during the run, sensitive ones included",
                schema.name
            ),
        })
        .collect()
}

/// The flags of one plugin's grants, in a stable order.
pub fn flags(plugin: &PluginPolicy) -> Vec<Flag> {
    let mut flags = Vec::new();
    let root = |message: String| Flag {
        severity: "root-equivalent",
        message,
    };
    for directory in &plugin.directories {
        let covered = |paths: &[&str]| -> Vec<String> {
            paths
                .iter()
                .filter(|path| Path::new(path).starts_with(&directory.path))
                .map(|path| (*path).to_owned())
                .collect()
        };
        match directory.access {
            Access::ReadWrite => {
                let privileged = covered(PRIVILEGED);
                if !privileged.is_empty() {
                    flags.push(root(format!(
                        "write access to {} covers {}",
                        directory.path.display(),
                        privileged.join(", ")
                    )));
                }
            }
            Access::Read => {}
        }
        let secret = covered(SECRET);
        if !secret.is_empty() {
            flags.push(Flag {
                severity: "reads-secrets",
                message: format!(
                    "read access to {} covers {}",
                    directory.path.display(),
                    secret.join(", ")
                ),
            });
        }
    }
    for grant in &plugin.programs {
        match &grant.pattern {
            ProgramPattern::Exact(path) => {
                let name = path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .unwrap_or_default();
                if SHELLS_AND_INTERPRETERS.contains(&name) {
                    flags.push(root(format!(
                        "may launch {}, which runs whatever it is given",
                        path.display()
                    )));
                } else if SCHEDULERS.contains(&name)
                    && grant.args.as_ref().is_none_or(|patterns| {
                        patterns
                            .iter()
                            .any(|pattern| !pattern.to_string().ends_with(" -l"))
                    })
                {
                    flags.push(root(format!(
                        "may launch {} to install jobs, which run as their user, root included",
                        path.display()
                    )));
                } else if ACCOUNT_TOOLS.contains(&name) {
                    flags.push(root(format!(
                        "may launch {}, which sets users' groups or passwords: whoever it \
                         manages may become root",
                        path.display()
                    )));
                } else if name == "getent"
                    && grant.args.as_ref().is_none_or(|patterns| {
                        patterns
                            .iter()
                            .any(|pattern| format!(" {pattern} ").contains(" shadow "))
                    })
                {
                    flags.push(Flag {
                        severity: "reads-secrets",
                        message: format!(
                            "may launch {} for the shadow database, every password hash",
                            path.display()
                        ),
                    });
                } else if INSTALLERS.contains(&name) {
                    let installs = grant.args.as_ref().is_none_or(|patterns| {
                        patterns.iter().any(|pattern| {
                            let text = format!(" {pattern} ");
                            text.contains(" install ") || text.contains(" -i ")
                        })
                    });
                    if installs {
                        flags.push(root(format!(
                            "may launch {} to install packages, and a package's maintainer \
                             scripts run as root",
                            path.display()
                        )));
                    }
                } else if RUN_THEIR_ARGUMENTS.contains(&name) {
                    match &grant.args {
                        None => flags.push(root(format!(
                            "may launch {} with any arguments, and it runs what its \
                             arguments name; restrict it with `args` patterns",
                            path.display()
                        ))),
                        Some(patterns) if !patterns.iter().all(|p| p.is_literal()) => {
                            flags.push(root(format!(
                                "may launch {} with arguments the plugin chooses (`*`, `...` \
                                 or a glob), and it runs what its arguments name",
                                path.display()
                            )));
                        }
                        Some(_) => {}
                    }
                }
            }
            ProgramPattern::Children(dir) => flags.push(root(format!(
                "may launch any program in {}, shells and interpreters included",
                dir.display()
            ))),
        }
    }
    if plugin.users == Principals::Any {
        flags.push(root(
            "may run programs as any user, root included".to_owned(),
        ));
    } else if let Principals::Only(users) = &plugin.users
        && users.iter().any(|user| user == "root" || user == "0")
    {
        flags.push(root("may run programs as root".to_owned()));
    }
    let variables: Vec<&str> = plugin
        .environment
        .names
        .iter()
        .map(String::as_str)
        .filter(|name| dangerous_variable(name))
        .collect();
    if plugin.environment.any && !plugin.programs.is_empty() {
        flags.push(root(
            "may set any environment variable for its programs, and many take code or \
             options from it (TAR_OPTIONS, GIT_*, PYTHONSTARTUP...), whatever their argument \
             patterns say; grant variables by name"
                .to_owned(),
        ));
    }
    if !variables.is_empty() {
        flags.push(root(format!(
            "may set {}, which decides what code a program runs",
            variables.join(", ")
        )));
    }
    flags
}

/// The most files of a program directory (`/usr/bin/*`) named in one flag.
const NAMED_FILES: usize = 5;

/// The allowlisted programs that someone other than root could replace: a program file,
/// or a directory on its path (or holding the programs a pattern allows), that another
/// user owns or that its group (other than root's) or everyone may write. Whoever can
/// replace a program that wconverge runs as root gets root. Unlike [`flags`], this
/// reads the machine: `plugins audit` shows it, and a run warns of it when the plugin
/// loads.
pub fn writable_programs(plugin: &PluginPolicy) -> Vec<Flag> {
    let mut found: Vec<String> = Vec::new();
    let mut note = |message: String| {
        if !found.contains(&message) {
            found.push(message);
        }
    };
    // Each directory of programs listed once: `/bin/*` and `/usr/bin/*` are one
    // directory where `/bin` is a link to `usr/bin`.
    let mut listed: Vec<(u64, u64)> = Vec::new();
    for grant in &plugin.programs {
        let (path, children) = match &grant.pattern {
            ProgramPattern::Exact(path) => (path.as_path(), false),
            ProgramPattern::Children(dir) => (dir.as_path(), true),
        };
        for checked in ways_to(path) {
            // In a sticky directory (`/tmp`) no one may replace what another owns, but
            // anyone may add: a directory of allowed programs may not be one.
            let sticky_is_safe = !(children && checked == path);
            if let Some(why) = writable(&checked, sticky_is_safe) {
                let launched = if grant.others_may_write {
                    "; launched all the same: the policy trusts it by name (`others_may_write`)"
                } else {
                    "; so it is not launched as root"
                };
                note(format!(
                    "{} ({}, on the way to {}) {why}{launched}",
                    checked.display(),
                    kind_of(&checked),
                    grant.pattern
                ));
            }
        }
        // Each entry looked at from the directory's descriptor: one name to resolve
        // rather than the whole path (`/bin` holds thousands, at every run that loads a
        // plugin allowed to launch them).
        if children
            && let Some(dir) = opened_directory(path)
            && let Ok(identity) = rustix::fs::fstat(&dir)
            && !listed.contains(&(identity.st_dev, identity.st_ino))
            && let Ok(entries) = rustix::fs::Dir::read_from(&dir)
        {
            listed.push((identity.st_dev, identity.st_ino));
            let mut names = Vec::new();
            let mut more = 0usize;
            for entry in entries.flatten().take(100_000) {
                let name = entry.file_name();
                if name == c"." || name == c".." {
                    continue;
                }
                let Ok(stat) =
                    rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                else {
                    continue;
                };
                if judged(&stat, true).is_some() {
                    if names.len() < NAMED_FILES {
                        names.push(name.to_string_lossy().into_owned());
                    } else {
                        more += 1;
                    }
                }
            }
            if !names.is_empty() {
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                note(format!(
                    "{} holds programs that someone other than root can write: {}{more}",
                    path.display(),
                    names.join(", ")
                ));
            }
        }
    }
    found
        .into_iter()
        .map(|message| Flag {
            severity: "root-equivalent",
            message: format!("{message}; whoever can write it can replace what wconverge runs"),
        })
        .collect()
}

/// Every directory from `/` to `path`, and `path` itself; where a component is a
/// symbolic link, the link and then the way to its target.
fn ways_to(path: &Path) -> Vec<std::path::PathBuf> {
    let mut ways = Vec::new();
    let mut prefix = std::path::PathBuf::from("/");
    ways.push(prefix.clone());
    for component in path.components().skip(1) {
        prefix.push(component);
        ways.push(prefix.clone());
    }
    if let Ok(real) = std::fs::canonicalize(path)
        && real != path
    {
        let mut prefix = std::path::PathBuf::from("/");
        for component in real.components().skip(1) {
            prefix.push(component);
            if !ways.contains(&prefix) {
                ways.push(prefix.clone());
            }
        }
    }
    ways
}

fn kind_of(path: &Path) -> &'static str {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => "a directory",
        Ok(metadata) if metadata.file_type().is_symlink() => "a symlink",
        _ => "a program",
    }
}

/// Who other than root may change `path` (not following a link), if anyone. With
/// `sticky_is_safe`, a sticky directory counts as safe: what is in it can be replaced only
/// by its owner, which is checked on its own.
fn writable(path: &Path, sticky_is_safe: bool) -> Option<String> {
    judged(&rustix::fs::lstat(path).ok()?, sticky_is_safe)
}

/// The directory at `path` (links on the way followed, as listing it by name would),
/// opened to list it.
fn opened_directory(path: &Path) -> Option<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn a_program_others_can_write_or_a_directory_on_its_way_is_flagged() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin");
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").expect("tool");
        // The same directory by another name, as `/bin` is `/usr/bin`.
        let also = dir.path().join("also");
        std::os::unix::fs::symlink(&bin, &also).expect("link");
        let entry = format!(
            "programs = [\"{}\", \"{}/*\", \"{}/*\"]\n",
            tool.display(),
            bin.display(),
            also.display()
        );
        let clean: Vec<String> = writable_programs(&plugin(&entry))
            .into_iter()
            .map(|flag| flag.message)
            .collect();
        // The temporary directory is the test's own: root's when the tests run as root.
        if rustix::process::geteuid().is_root() {
            assert!(clean.is_empty(), "{clean:#?}");
        }
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o757)).expect("chmod");
        let messages: Vec<String> = writable_programs(&plugin(&entry))
            .into_iter()
            .map(|flag| flag.message)
            .collect();
        assert!(
            messages.iter().any(|message| message.starts_with(&format!(
                "{} (a directory, on the way to {}) can be written by every user (mode 0777)",
                bin.display(),
                tool.display()
            ))),
            "{messages:#?}"
        );
        assert!(
            messages.iter().any(|message| message.starts_with(&format!(
                "{} (a program, on the way to {}) can be written by every user (mode 0757)",
                tool.display(),
                tool.display()
            ))),
            "{messages:#?}"
        );
        assert!(
            messages.iter().any(|message| message.starts_with(&format!(
                // `tool` alone: the directory's own `.` and `..` are not its programs.
                "{} holds programs that someone other than root can write: tool;",
                bin.display()
            ))),
            "{messages:#?}"
        );
        let listings = messages
            .iter()
            .filter(|message| message.contains("holds programs"))
            .count();
        assert_eq!(listings, 1, "one directory, listed once: {messages:#?}");
    }

    fn plugin(entry: &str) -> PluginPolicy {
        let policy = Policy::parse(
            &format!("[plugins.p]\nsource = \"builtin\"\n{entry}"),
            "p.toml",
            None,
        )
        .expect("valid");
        policy.plugins[0].clone()
    }

    #[test]
    fn writing_where_privileges_come_from_is_root_equivalent() {
        let found = flags(&plugin(
            "directories = [{ path = \"/etc\", access = \"read-write\" }, \
             { path = \"/srv/app\", access = \"read-write\" }]\n",
        ));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(found[0].severity, "root-equivalent");
        assert!(
            found[0].message.starts_with(
                "write access to /etc covers /etc/sudoers, /etc/sudoers.d, /etc/systemd"
            ),
            "{found:#?}"
        );
        assert_eq!(found[1].severity, "reads-secrets");
        assert!(found[1].message.contains("/etc/shadow"), "{found:#?}");
        assert!(
            flags(&plugin(
                "directories = [{ path = \"/srv/app\", access = \"read-write\" }]\n"
            ))
            .is_empty()
        );
    }

    #[test]
    fn shells_wildcards_any_user_and_path_are_flagged() {
        let found = flags(&plugin(
            "programs = [\"/bin/bash\", \"/usr/bin/*\", \"/usr/bin/systemctl\"]\n\
             users = [\"*\"]\nenvironment = [\"PATH\", \"LANG\"]\n",
        ));
        let messages: Vec<&str> = found.iter().map(|flag| flag.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "may launch /bin/bash, which runs whatever it is given",
                "may launch any program in /usr/bin, shells and interpreters included",
                "may run programs as any user, root included",
                "may set PATH, which decides what code a program runs",
            ]
        );
        assert!(
            flags(&plugin(
                "programs = [\"/usr/bin/systemctl\"]\nusers = [\"app\"]\n"
            ))
            .is_empty()
        );
    }
}
