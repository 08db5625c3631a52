//! What a reviewer must look at twice in a policy: grants that amount to root (write
//! access to where the system takes its privileges from, the right to launch a shell or
//! an interpreter, to run programs as anyone, to set `PATH` or the loader's variables),
//! and read access to where secrets live. Pure: the policy in, the flags out, the same
//! on every machine, so that `wconverge plugins audit` is stable and diffable.

use crate::policy::{Access, PluginPolicy, Principals, ProgramPattern, dangerous_variable};
use std::path::Path;

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

/// One flagged grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    /// `root-equivalent` or `reads-secrets`.
    pub severity: &'static str,
    pub message: String,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

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
