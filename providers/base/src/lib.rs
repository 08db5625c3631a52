//! The `base` provider of `service`: the commands the resource gives (`start`, `stop`,
//! `status`, `restart`), each an absolute program and its arguments run without a
//! shell. It knows nothing of boot.

use wconverge_sdk::{Error, ProviderInfo, Resource, Result, export_provider};
use wconverge_service_core::{
    Enable, Manager, ServiceProvider, command_of, run_command, schema, succeeds,
};

struct Base;

fn command(resource: &Resource, attribute: &str) -> Result<Vec<String>> {
    command_of(resource, attribute).ok_or_else(|| {
        Error::new(format!(
            "the base provider runs the commands you give; set `{attribute}`"
        ))
    })
}

impl Manager for Base {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("base", env!("CARGO_PKG_VERSION")).with_type(schema(
            "Provider `base`: the `start`, `stop`, `status` and `restart` commands given.",
        ))
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = Vec::new();
        for attribute in ["start", "status"] {
            if resource.get(attribute).is_none() {
                problems.push(format!(
                    "the base provider runs the commands you give: set `{attribute}`"
                ));
            }
        }
        if resource.get("enable").is_some() {
            problems.push(
                "the base provider knows nothing of boot; leave `enable` out (or use the \
                 debian or systemd provider)"
                    .to_owned(),
            );
        }
        problems
    }

    fn running(resource: &Resource, _name: &str) -> Result<bool> {
        let command = command(resource, "status")?;
        let (program, args) = command.split_first().expect("validated: not empty");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        succeeds(program, &args)
    }

    fn enabled(_resource: &Resource, _name: &str) -> Result<Option<Enable>> {
        Ok(None)
    }

    fn start(resource: &Resource, _name: &str) -> Result<()> {
        run_command(&command(resource, "start")?)
    }

    fn stop(resource: &Resource, _name: &str) -> Result<()> {
        run_command(&command(resource, "stop")?)
    }

    fn restart(resource: &Resource, name: &str) -> Result<()> {
        match command_of(resource, "restart") {
            Some(restart) => run_command(&restart),
            None => {
                Self::stop(resource, name)?;
                Self::start(resource, name)
            }
        }
    }

    fn enable(_resource: &Resource, _name: &str, _enable: Enable) -> Result<()> {
        Err(Error::new("the base provider knows nothing of boot"))
    }
}

export_provider!(ServiceProvider<Base>);
