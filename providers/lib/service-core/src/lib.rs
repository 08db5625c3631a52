//! What the `systemd`, `debian` and `base` plugins share: Puppet's `service` type, and
//! its plan, apply and refresh over a [`Manager`] (how one service manager starts,
//! stops, restarts, enables and asks). A library of the guest workspace, not a plugin.
//!
//! Refresh is Puppet's: a notified service restarts if it is running (and stays
//! stopped if it is not).

use std::marker::PhantomData;
use wconverge_sdk::process::Command;
use wconverge_sdk::{
    Attribute, Change, DataType, Error, Provider, ProviderInfo, Resource, Result, State, TypeSchema,
};

/// The PATH init scripts and service managers run with: the system's directories, which
/// only root may write.
pub const SYSTEM_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// What `enable` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enable {
    True,
    False,
    Mask,
}

/// One service manager.
pub trait Manager {
    /// The provider's name and a sentence on how it works.
    fn describe() -> ProviderInfo;
    /// Problems of a resource this manager cannot handle.
    fn validate(resource: &Resource) -> Vec<String>;
    /// Whether the service runs now.
    fn running(resource: &Resource, name: &str) -> Result<bool>;
    /// Whether it starts at boot (`true`, `false`, `mask`), if this manager knows.
    fn enabled(resource: &Resource, name: &str) -> Result<Option<Enable>>;
    fn start(resource: &Resource, name: &str) -> Result<()>;
    fn stop(resource: &Resource, name: &str) -> Result<()>;
    fn restart(resource: &Resource, name: &str) -> Result<()>;
    fn enable(resource: &Resource, name: &str, enable: Enable) -> Result<()>;
}

/// Puppet's `service` type, with what `provider_doc` says of the provider.
pub fn schema(provider_doc: &str) -> TypeSchema {
    TypeSchema::new(
        "service",
        &format!(
            "A service: whether it runs, whether it starts at boot; a notified service \
             restarts if it runs. {provider_doc}"
        ),
    )
    .refreshable()
    .attribute(
        Attribute::new(
            "name",
            DataType::String,
            "The service's name (an init script, a systemd unit).",
        )
        .namevar(),
    )
    .attribute(Attribute::new(
        "ensure",
        DataType::enumeration(["running", "stopped", "true", "false"]),
        "Whether it runs (`true` is `running`, `false` is `stopped`). Left alone when not \
         set.",
    ))
    .attribute(Attribute::new(
        "enable",
        DataType::OneOf(vec![
            DataType::Boolean,
            DataType::enumeration(["true", "false", "mask"]),
        ]),
        "Whether it starts at boot; `mask` (systemd) keeps it from starting at all. Left \
         alone when not set.",
    ))
    .attribute(
        Attribute::new(
            "hasstatus",
            DataType::Boolean,
            "Whether the init script's `status` says if it runs (default true).",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "hasrestart",
            DataType::Boolean,
            "Whether the init script restarts it (`restart`); otherwise a restart is a \
             stop and a start. Default: true.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "start",
            DataType::String,
            "A command that starts it: an absolute program and its arguments, split on \
             spaces, run without a shell.",
        )
        .parameter(),
    )
    .attribute(Attribute::new("stop", DataType::String, "A command that stops it.").parameter())
    .attribute(
        Attribute::new(
            "status",
            DataType::String,
            "A command that exits 0 when it runs, and otherwise when it does not.",
        )
        .parameter(),
    )
    .attribute(
        Attribute::new(
            "restart",
            DataType::String,
            "A command that restarts it; a stop and a start when not set.",
        )
        .parameter(),
    )
}

/// Whether `name` is a service name: letters, digits and `@_.:-`, not starting with `-`.
pub fn is_service_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('-')
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@_.:-".contains(&b))
}

/// What `ensure` asks for: `Some(true)` running, `Some(false)` stopped.
pub fn wants_running(resource: &Resource) -> Option<bool> {
    match resource.get_str("ensure") {
        Some("running" | "true") => Some(true),
        Some("stopped" | "false") => Some(false),
        _ => None,
    }
}

/// What `enable` asks for.
pub fn wants_enabled(resource: &Resource) -> Option<Enable> {
    match resource.get("enable") {
        Some(value) => match (value.as_bool(), value.as_str()) {
            (Some(true), _) | (_, Some("true")) => Some(Enable::True),
            (Some(false), _) | (_, Some("false")) => Some(Enable::False),
            (_, Some("mask")) => Some(Enable::Mask),
            _ => None,
        },
        None => None,
    }
}

fn enable_word(enable: Enable) -> &'static str {
    match enable {
        Enable::True => "true",
        Enable::False => "false",
        Enable::Mask => "mask",
    }
}

/// A command attribute (`start`, `status`...) as a program and its arguments.
pub fn command_of(resource: &Resource, attribute: &str) -> Option<Vec<String>> {
    resource
        .get_str(attribute)
        .map(|command| command.split_whitespace().map(str::to_owned).collect())
}

/// Problems of the command attributes: each an absolute program.
pub fn validate_commands(resource: &Resource) -> Vec<String> {
    ["start", "stop", "status", "restart"]
        .into_iter()
        .filter_map(|attribute| {
            let command = command_of(resource, attribute)?;
            match command.first() {
                Some(program) if program.starts_with('/') => None,
                _ => Some(format!(
                    "{attribute} `{}` must start with an absolute program (it runs without a \
                     shell)",
                    resource.get_str(attribute).unwrap_or_default()
                )),
            }
        })
        .collect()
}

/// Runs a program; `Ok(true)` when it exits 0.
pub fn succeeds(program: &str, args: &[&str]) -> Result<bool> {
    let output = Command::new(program)
        .args(args)
        .env("PATH", SYSTEM_PATH)
        .run()?;
    Ok(output.success())
}

/// Runs a program that must succeed.
pub fn must(program: &str, args: &[&str]) -> Result<()> {
    let output = Command::new(program)
        .args(args)
        .env("PATH", SYSTEM_PATH)
        .run()?;
    if output.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    let said = if said.trim().is_empty() {
        String::from_utf8_lossy(&output.stdout).into_owned()
    } else {
        said.into_owned()
    };
    Err(Error::new(format!(
        "{program} {} failed ({:?}): {}",
        args.join(" "),
        output.status,
        said.trim()
    )))
}

/// Runs a command attribute (`restart`...) that must succeed.
pub fn run_command(command: &[String]) -> Result<()> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Error::new("an empty command"))?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    must(program, &args)
}

/// A [`Provider`] of `service` over the manager `M`.
pub struct ServiceProvider<M>(PhantomData<M>);

impl<M: Manager> Provider for ServiceProvider<M> {
    fn describe() -> ProviderInfo {
        M::describe()
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = Vec::new();
        let name = resource.get_str("name").unwrap_or_default();
        if !is_service_name(name) {
            problems.push(format!(
                "`{name}` is not a service name (letters, digits and `@_.:-`, not starting \
                 with `-`)"
            ));
        }
        problems.extend(validate_commands(resource));
        problems.extend(M::validate(resource));
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let name = resource.require_str("name")?;
        let mut state = State::new();
        // A resource that asks for neither is being inspected (`wconverge resource`):
        // both are read.
        let inspected = wants_running(resource).is_none() && wants_enabled(resource).is_none();
        if wants_running(resource).is_some() || inspected {
            let running = M::running(resource, name)?;
            state.set("ensure", if running { "running" } else { "stopped" });
        }
        if (wants_enabled(resource).is_some() || inspected)
            && let Some(enabled) = M::enabled(resource, name)?
        {
            state.set("enable", enable_word(enabled));
        }
        Ok(state)
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        if let Some(running) = wants_running(resource) {
            let found = current.get_str("ensure").unwrap_or("stopped");
            let wanted = if running { "running" } else { "stopped" };
            if found != wanted {
                changes.push(Change::new(
                    "ensure",
                    Some(found.into()),
                    Some(wanted.into()),
                    if running { "started" } else { "stopped" },
                ));
            }
        }
        if let Some(enable) = wants_enabled(resource) {
            let found = current.get_str("enable").unwrap_or("false");
            let wanted = enable_word(enable);
            // A masked unit is disabled too: `enable => false` leaves an administrator's
            // mask alone, as Puppet does.
            let in_sync = found == wanted || (enable == Enable::False && found == "mask");
            if !in_sync {
                changes.push(Change::new(
                    "enable",
                    Some(found.into()),
                    Some(wanted.into()),
                    format!("enable changed '{found}' to '{wanted}'"),
                ));
            }
        }
        Ok(changes)
    }

    fn apply(resource: &Resource, changes: &[Change]) -> Result<()> {
        let name = resource.require_str("name")?;
        for change in changes {
            match change.attribute.as_str() {
                "ensure" if wants_running(resource) == Some(true) => M::start(resource, name)?,
                "ensure" => M::stop(resource, name)?,
                "enable" => {
                    if let Some(enable) = wants_enabled(resource) {
                        M::enable(resource, name, enable)?;
                    }
                }
                other => {
                    return Err(Error::new(format!(
                        "no change of `{other}` is planned for a service"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Puppet's: restarted when it runs; left alone when it does not.
    fn refresh(resource: &Resource) -> Result<()> {
        let name = resource.require_str("name")?;
        if wants_running(resource) == Some(false) || !M::running(resource, name)? {
            return Ok(());
        }
        M::restart(resource, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str) -> Resource {
        Resource::new("service", name).with("name", name)
    }

    #[test]
    fn names_and_commands_are_checked() {
        assert!(is_service_name("nginx"));
        assert!(is_service_name("getty@tty1.service"));
        assert!(!is_service_name("-x"));
        assert!(!is_service_name("a b"));
        assert!(!is_service_name(".."));
        assert!(validate_commands(&service("x").with("start", "/usr/bin/x --go")).is_empty());
        assert_eq!(
            validate_commands(&service("x").with("start", "x --go")).len(),
            1
        );
    }

    #[test]
    fn ensure_and_enable_take_puppets_values() {
        assert_eq!(
            wants_running(&service("x").with("ensure", "true")),
            Some(true)
        );
        assert_eq!(
            wants_running(&service("x").with("ensure", "stopped")),
            Some(false)
        );
        assert_eq!(wants_running(&service("x")), None);
        assert_eq!(
            wants_enabled(&service("x").with("enable", true)),
            Some(Enable::True)
        );
        assert_eq!(
            wants_enabled(&service("x").with("enable", "mask")),
            Some(Enable::Mask)
        );
    }
}
