//! The `debian` provider of `service`: `/etc/init.d` scripts run through `service`
//! (`start`, `stop`, `restart`, `status`), enabled and disabled at boot with
//! `update-rc.d`, whether they are enabled read from `/etc/rc2.d`.

use wconverge_sdk::process::Command;
use wconverge_sdk::{ProviderInfo, Resource, Result, export_provider};
use wconverge_service_core::{
    Enable, Manager, ServiceProvider, command_of, must, run_command, schema, succeeds,
    wants_enabled,
};

const SERVICE: &str = "/usr/sbin/service";
const UPDATE_RC: &str = "/usr/sbin/update-rc.d";
const LS: &str = "/usr/bin/ls";

/// The runlevel whose links say whether a service starts at boot (Debian's default).
const RUNLEVEL_DIR: &str = "/etc/rc2.d";

struct Debian;

impl Manager for Debian {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("debian", env!("CARGO_PKG_VERSION"))
            .requires("os.family == 'debian'")
            .with_type(schema(
                "Provider `debian`: /etc/init.d scripts through `service`, enabled at boot \
                 with update-rc.d.",
            ))
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = Vec::new();
        if wants_enabled(resource) == Some(Enable::Mask) {
            problems.push(
                "enable => mask is systemd's; the debian provider enables or disables".to_owned(),
            );
        }
        if resource.get_bool("hasstatus") == Some(false) && resource.get("status").is_none() {
            problems.push(
                "hasstatus => false needs a `status` command: the debian provider does not \
                 search the process table"
                    .to_owned(),
            );
        }
        problems
    }

    fn running(resource: &Resource, name: &str) -> Result<bool> {
        match command_of(resource, "status") {
            Some(command) => {
                let (program, args) = command.split_first().expect("validated: not empty");
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                succeeds(program, &args)
            }
            None => succeeds(SERVICE, &[name, "status"]),
        }
    }

    fn enabled(_resource: &Resource, name: &str) -> Result<Option<Enable>> {
        let output = Command::new(LS).args(["-1", "--", RUNLEVEL_DIR]).run()?;
        let listing = String::from_utf8_lossy(&output.stdout);
        Ok(Some(if starts_at_boot(&listing, name) {
            Enable::True
        } else {
            Enable::False
        }))
    }

    fn start(resource: &Resource, name: &str) -> Result<()> {
        match command_of(resource, "start") {
            Some(command) => run_command(&command),
            None => must(SERVICE, &[name, "start"]),
        }
    }

    fn stop(resource: &Resource, name: &str) -> Result<()> {
        match command_of(resource, "stop") {
            Some(command) => run_command(&command),
            None => must(SERVICE, &[name, "stop"]),
        }
    }

    fn restart(resource: &Resource, name: &str) -> Result<()> {
        if let Some(command) = command_of(resource, "restart") {
            return run_command(&command);
        }
        if resource.get_bool("hasrestart") == Some(false) {
            Self::stop(resource, name)?;
            return Self::start(resource, name);
        }
        must(SERVICE, &[name, "restart"])
    }

    fn enable(_resource: &Resource, name: &str, enable: Enable) -> Result<()> {
        // The links must exist before they can be turned on or off.
        must(UPDATE_RC, &[name, "defaults"])?;
        match enable {
            Enable::False => must(UPDATE_RC, &[name, "disable"]),
            _ => must(UPDATE_RC, &[name, "enable"]),
        }
    }
}

/// Whether a runlevel directory's listing has a start link for `name` (`S01name`).
fn starts_at_boot(listing: &str, name: &str) -> bool {
    listing.lines().any(|entry| {
        entry.len() == name.len() + 3
            && entry.starts_with('S')
            && entry[1..3].bytes().all(|b| b.is_ascii_digit())
            && &entry[3..] == name
    })
}

export_provider!(ServiceProvider<Debian>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_links_say_a_service_starts_at_boot() {
        let listing = "K01apache2\nS01cron\nS02ssh\nS01sshd-extra\n";
        assert!(starts_at_boot(listing, "cron"));
        assert!(starts_at_boot(listing, "ssh"));
        assert!(!starts_at_boot(listing, "apache2"), "only a kill link");
        assert!(!starts_at_boot(listing, "sshd"));
    }
}
