//! The `systemd` provider of `service`, where PID 1 is systemd: `systemctl` starts,
//! stops, restarts, enables, disables and masks units, and says whether one is active
//! and enabled.

use wconverge_sdk::process::Command;
use wconverge_sdk::{ProviderInfo, Resource, Result, export_provider};
use wconverge_service_core::{
    Enable, Manager, SYSTEM_PATH, ServiceProvider, command_of, must, run_command, schema, succeeds,
};

const SYSTEMCTL: &str = "/usr/bin/systemctl";

struct Systemd;

/// The command line of `systemctl VERB` for a unit: the unit after `--`, so no name is
/// ever taken for an option.
fn systemctl(verb: &'static str, unit: &str) -> Vec<String> {
    let mut args = vec![verb.to_owned()];
    if verb == "is-active" {
        args.push("--quiet".to_owned());
    }
    args.extend(["--".to_owned(), unit.to_owned()]);
    args
}

/// The `systemctl` verbs that make a unit's boot state `enable`.
fn enable_verbs(enable: Enable) -> &'static [&'static str] {
    match enable {
        Enable::True => &["unmask", "enable"],
        Enable::False => &["disable"],
        Enable::Mask => &["mask"],
    }
}

/// `systemctl is-enabled`'s answer as `enable`.
fn enabled_from(answer: &str) -> Enable {
    match answer.trim() {
        "enabled" | "enabled-runtime" | "static" | "alias" | "generated" => Enable::True,
        "masked" | "masked-runtime" => Enable::Mask,
        _ => Enable::False,
    }
}

fn run(verb: &'static str, unit: &str) -> Result<()> {
    let args = systemctl(verb, unit);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    must(SYSTEMCTL, &args)
}

/// The command line that asks whether systemd still runs an older definition of the
/// unit than its file holds, and whether it found the unit at all.
fn need_reload_args(unit: &str) -> [&str; 5] {
    [
        "show",
        "--property=NeedDaemonReload",
        "--property=LoadState",
        "--",
        unit,
    ]
}

/// Whether `systemctl show`'s answer asks for a reload: the unit's file changed since
/// systemd read it, or systemd has not found the unit (an init script a package just
/// installed becomes a unit only when systemd's generators run again).
fn needs_reload(show: &str) -> bool {
    show.lines()
        .any(|line| line == "NeedDaemonReload=yes" || line == "LoadState=not-found")
}

/// Reloads systemd's units when [`needs_reload`] says so (Puppet's systemd provider
/// reloads for a changed file too): a start or restart then runs the definition the
/// file holds, not the one systemd remembers.
fn reload_if_changed(unit: &str) -> Result<()> {
    let output = Command::new(SYSTEMCTL)
        .args(need_reload_args(unit))
        .env("PATH", SYSTEM_PATH)
        .run()?;
    if needs_reload(&String::from_utf8_lossy(&output.stdout)) {
        must(SYSTEMCTL, &["daemon-reload"])?;
    }
    Ok(())
}

impl Manager for Systemd {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("systemd", env!("CARGO_PKG_VERSION"))
            .requires("os.init == 'systemd'")
            .with_type(schema("Provider `systemd`: units through systemctl."))
    }

    fn validate(_resource: &Resource) -> Vec<String> {
        Vec::new()
    }

    fn running(resource: &Resource, name: &str) -> Result<bool> {
        let command = command_of(resource, "status").unwrap_or_else(|| {
            let mut command = vec![SYSTEMCTL.to_owned()];
            command.extend(systemctl("is-active", name));
            command
        });
        let (program, args) = command.split_first().expect("never empty");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        succeeds(program, &args)
    }

    fn enabled(_resource: &Resource, name: &str) -> Result<Option<Enable>> {
        let args = systemctl("is-enabled", name);
        // It exits non-zero for a disabled unit: its answer is on standard output.
        let output = Command::new(SYSTEMCTL)
            .args(&args)
            .env("PATH", SYSTEM_PATH)
            .run()?;
        Ok(Some(enabled_from(&String::from_utf8_lossy(&output.stdout))))
    }

    fn start(resource: &Resource, name: &str) -> Result<()> {
        match command_of(resource, "start") {
            Some(command) => run_command(&command),
            None => {
                // A masked unit cannot start: one the manifest does not want masked is
                // unmasked first (its `enable` is made after `ensure`).
                if resource.get_str("enable") != Some("mask")
                    && Self::enabled(resource, name)? == Some(Enable::Mask)
                {
                    run("unmask", name)?;
                }
                reload_if_changed(name)?;
                run("start", name)
            }
        }
    }

    fn stop(resource: &Resource, name: &str) -> Result<()> {
        match command_of(resource, "stop") {
            Some(command) => run_command(&command),
            None => run("stop", name),
        }
    }

    fn restart(resource: &Resource, name: &str) -> Result<()> {
        match command_of(resource, "restart") {
            Some(command) => run_command(&command),
            None => {
                reload_if_changed(name)?;
                run("restart", name)
            }
        }
    }

    fn enable(_resource: &Resource, name: &str, enable: Enable) -> Result<()> {
        for verb in enable_verbs(enable) {
            run(verb, name)?;
        }
        Ok(())
    }
}

export_provider!(ServiceProvider<Systemd>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_put_the_unit_after_a_double_dash() {
        assert_eq!(systemctl("start", "nginx"), ["start", "--", "nginx"]);
        assert_eq!(
            systemctl("is-active", "getty@tty1.service"),
            ["is-active", "--quiet", "--", "getty@tty1.service"]
        );
        assert_eq!(enable_verbs(Enable::True), ["unmask", "enable"]);
        assert_eq!(enable_verbs(Enable::False), ["disable"]);
        assert_eq!(enable_verbs(Enable::Mask), ["mask"]);
        assert_eq!(
            need_reload_args("web.service"),
            [
                "show",
                "--property=NeedDaemonReload",
                "--property=LoadState",
                "--",
                "web.service"
            ]
        );
        assert!(needs_reload("NeedDaemonReload=yes\nLoadState=loaded\n"));
        assert!(needs_reload("LoadState=not-found\nNeedDaemonReload=no\n"));
        assert!(!needs_reload("NeedDaemonReload=no\nLoadState=loaded\n"));
    }

    #[test]
    fn is_enabled_answers_map_to_puppets_values() {
        assert_eq!(enabled_from("enabled\n"), Enable::True);
        assert_eq!(enabled_from("static"), Enable::True);
        assert_eq!(enabled_from("disabled\n"), Enable::False);
        assert_eq!(enabled_from("masked\n"), Enable::Mask);
        assert_eq!(enabled_from("indirect\n"), Enable::False);
        assert_eq!(enabled_from(""), Enable::False);
    }
}
