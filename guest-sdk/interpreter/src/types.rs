//! Script resource types: their common schema, checks, plan and apply.

use crate::Interpreter;
use crate::script::{Code, Purpose, Script, run};
use std::marker::PhantomData;
use std::time::Duration;
use wconverge_sdk::process::{ExitStatus, Output};
use wconverge_sdk::{
    Attribute, Change, DataType, Error, PathAccess, Provider, ProviderInfo, Resource, Result,
    State, TypeSchema, Value, log,
};

/// Every attribute a guard may inherit from the resource it guards: the script's context
/// (Chef's guard interpreter RFC, with `architecture` for every script type).
pub const INHERITABLE: [&str; 7] = [
    "cwd",
    "environment",
    "group",
    "path",
    "user",
    "umask",
    "architecture",
];

/// Puppet's default timeout for an exec, in seconds; script types share it.
pub(crate) const DEFAULT_TIMEOUT_SECONDS: i64 = 300;

/// What an interpreter plugin declares about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct InterpreterInfo {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) types: Vec<ScriptType>,
    pub(crate) inherits: Vec<String>,
    pub(crate) default_on: Vec<String>,
    pub(crate) requires: Option<String>,
}

impl InterpreterInfo {
    /// An interpreter that inherits every inheritable attribute ([`INHERITABLE`]).
    pub fn new(name: &str, version: &str) -> Self {
        InterpreterInfo {
            name: name.to_owned(),
            version: version.to_owned(),
            types: Vec::new(),
            inherits: INHERITABLE.iter().map(|name| (*name).to_owned()).collect(),
            default_on: Vec::new(),
            requires: None,
        }
    }

    /// Suitable only where this resource program over the machine's facts holds (see
    /// `wconverge_sdk::ProviderInfo::requires`); elsewhere the host uses the next
    /// provider of its script types, and it is never the `default` guard interpreter.
    pub fn requires(mut self, program: &str) -> Self {
        self.requires = Some(program.to_owned());
        self
    }

    /// Adds a script type.
    pub fn with_type(mut self, script_type: ScriptType) -> Self {
        self.types.push(script_type);
        self
    }

    /// Guards inherit only these attributes (a subset of [`INHERITABLE`]).
    pub fn inherits(mut self, attributes: &[&str]) -> Self {
        self.inherits = attributes.iter().map(|name| (*name).to_owned()).collect();
        self
    }

    /// Its first type is the `default` guard interpreter on this operating system
    /// family (`unix`, `windows`).
    pub fn default_on(mut self, family: &str) -> Self {
        self.default_on.push(family.to_owned());
        self
    }
}

/// Where a script type's code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CodeAttribute {
    /// `code`, a required string.
    Code,
    /// `command`, the namevar: a string for the interpreter or an argv array (`exec`).
    Command,
}

/// A script resource type an interpreter implements.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptType {
    pub(crate) name: String,
    doc: String,
    code: CodeAttribute,
    options: Vec<Attribute>,
    puppet_guards: bool,
}

impl ScriptType {
    /// A type whose script is its `code` attribute.
    pub fn new(name: &str, doc: &str) -> Self {
        ScriptType {
            name: name.to_owned(),
            doc: doc.to_owned(),
            code: CodeAttribute::Code,
            options: Vec::new(),
            puppet_guards: false,
        }
    }

    /// The script is the `command` attribute instead, which defaults to the title and
    /// may also be an argv array run without the interpreter (Puppet's `exec`).
    pub fn command_namevar(mut self) -> Self {
        self.code = CodeAttribute::Command;
        self
    }

    /// An attribute of this type only; its value reaches [`Script::option`].
    pub fn option(mut self, attribute: Attribute) -> Self {
        self.options.push(attribute);
        self
    }

    /// Also accepts Puppet's `onlyif` and `unless`, which the host evaluates exactly as
    /// the `only_if` and `not_if` metaparameters.
    pub fn puppet_guards(mut self) -> Self {
        self.puppet_guards = true;
        self
    }

    pub(crate) fn code_attribute(&self) -> &'static str {
        match self.code {
            CodeAttribute::Code => "code",
            CodeAttribute::Command => "command",
        }
    }

    pub(crate) fn option_names(&self) -> impl Iterator<Item = &str> {
        self.options
            .iter()
            .map(|attribute| attribute.name())
            .chain(["flags"])
    }

    fn schema(&self, interpreter: &str) -> TypeSchema {
        let strings = || DataType::array_of(DataType::String);
        let code = match self.code {
            CodeAttribute::Code => Attribute::new(
                "code",
                DataType::String,
                &format!("The script, run by {interpreter}."),
            )
            .required()
            .parameter(),
            CodeAttribute::Command => Attribute::new(
                "command",
                DataType::OneOf(vec![DataType::String, strings()]),
                &format!(
                    "A string run by {interpreter}, or an argv array whose first element is \
                     an absolute path. Defaults to the title."
                ),
            )
            .namevar()
            .refers_to("file"),
        };
        // Commands share nothing the host knows of: any number run at once under
        // `apply --jobs`.
        let mut schema = TypeSchema::new(&self.name, &self.doc)
            .refreshable()
            .concurrency(wconverge_sdk::Concurrency::Any);
        if self.code == CodeAttribute::Code {
            schema = schema.attribute(
                Attribute::new("name", DataType::String, "The resource's name; the title.")
                    .namevar(),
            );
        }
        schema = schema
            .attribute(code)
            .attribute(
                Attribute::new("cwd", DataType::String, "Absolute working directory.")
                    .parameter()
                    .refers_to("file"),
            )
            .attribute(
                Attribute::new(
                    "serial",
                    DataType::Boolean,
                    "Run alone under `apply --jobs`: after every resource before it in the \
                     graph's order, with nothing beside it. A command always does, since \
                     what it touches is not known; kept for the catalogs that set it.",
                )
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "environment",
                    DataType::OneOf(vec![strings(), DataType::hash_of(DataType::String)]),
                    "Environment variables, as 'NAME=value' strings or a hash. The \
                     environment starts empty.",
                )
                .parameter(),
            )
            .attribute(
                Attribute::new("user", DataType::String, "User to run as.")
                    .parameter()
                    .refers_to("user"),
            )
            .attribute(
                Attribute::new("group", DataType::String, "Group to run as.")
                    .parameter()
                    .refers_to("group"),
            )
            .attribute(
                Attribute::new("umask", DataType::String, "Umask in octal, like '022'.")
                    .parameter(),
            )
            .attribute(
                Attribute::new(
                    "path",
                    DataType::OneOf(vec![DataType::String, strings()]),
                    "Directories searched for commands: an array, or one string joined \
                     with `:`. Sets PATH for the script.",
                )
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "architecture",
                    DataType::String,
                    "Run the interpreter as a process of this architecture (`i386`, \
                     `x86_64`...); the launcher plugin decides how.",
                )
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "timeout",
                    DataType::OneOf(vec![DataType::Integer, DataType::Float]),
                    "Seconds before the script is killed, with everything it started.",
                )
                .default(DEFAULT_TIMEOUT_SECONDS)
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "returns",
                    DataType::Integer,
                    "Exit codes that mean success.",
                )
                .many()
                .default(vec![0i64])
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "creates",
                    DataType::String,
                    "A path; when it exists the script does not run.",
                )
                .path_access(PathAccess::Read)
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "flags",
                    DataType::String,
                    "Options passed to the interpreter before the script, separated by \
                     spaces.",
                )
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "refreshonly",
                    DataType::Boolean,
                    "Run only when refreshed by a resource this one subscribes to.",
                )
                .default(false)
                .parameter(),
            )
            .attribute(
                Attribute::new(
                    "logoutput",
                    DataType::OneOf(vec![
                        DataType::Boolean,
                        DataType::enumeration(["true", "false", "on_failure"]),
                    ]),
                    "When to log the script's output: `true`, `false` or `on_failure` (as a \
                     boolean or a string, as Puppet takes it).",
                )
                .default("on_failure")
                .parameter(),
            );
        if self.puppet_guards {
            for (name, doc) in [
                (
                    "onlyif",
                    "Puppet's onlyif: run only if this command succeeds (as `only_if`).",
                ),
                (
                    "unless",
                    "Puppet's unless: run only if this command fails (as `not_if`).",
                ),
            ] {
                schema = schema.attribute(
                    Attribute::new(
                        name,
                        DataType::OneOf(vec![DataType::String, strings()]),
                        doc,
                    )
                    .parameter(),
                );
            }
        }
        for option in &self.options {
            schema = schema.attribute(option.clone());
        }
        schema
    }
}

/// The provider of an interpreter's script types (used by [`crate::export_interpreter!`];
/// also usable in native unit tests).
pub struct ScriptProvider<I>(PhantomData<I>);

impl<I: Interpreter> ScriptProvider<I> {
    fn script_type(resource: &Resource) -> Result<ScriptType> {
        I::info()
            .types
            .into_iter()
            .find(|script_type| script_type.name == resource.type_name)
            .ok_or_else(|| {
                Error::new(format!(
                    "this interpreter has no script type `{}`",
                    resource.type_name
                ))
            })
    }

    fn run_code(resource: &Resource) -> Result<()> {
        let script_type = Self::script_type(resource)?;
        let script = Script::from_resource(resource, &script_type, Purpose::Code)?;
        let output = run::<I>(&script)?;
        let expected = expected_returns(resource);
        let success = matches!(output.status, ExitStatus::Exited(code) if expected.contains(&i64::from(code)));
        let logoutput = match resource
            .get("logoutput")
            .map(|value| (value.as_bool(), value.as_str()))
        {
            Some((Some(true), _)) => "true",
            Some((Some(false), _)) => "false",
            Some((_, Some(word))) => word,
            _ => "on_failure",
        };
        let code = resource.get(script_type.code_attribute());
        // A sensitive command, or an argv command with a sensitive element.
        let secret = code.is_some_and(|code| {
            code.is_sensitive()
                || matches!(code, Value::Array(items) if items.iter().any(Value::is_sensitive))
        });
        if logoutput == "true" || (logoutput == "on_failure" && !success) {
            // The output of a sensitive script may echo any part of it; the host can only
            // redact the whole value, so the output is withheld (as Puppet does).
            if secret {
                log::notice("[the output of a sensitive script is not shown]");
            } else {
                log_output(&output);
            }
        }
        if success {
            return Ok(());
        }
        let shown = match code {
            Some(_) if secret => "[sensitive script]".to_owned(),
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            Some(Value::String(text)) => text.clone(),
            _ => resource.title.clone(),
        };
        Err(Error::new(match output.status {
            ExitStatus::Exited(code) => {
                format!("`{shown}` returned {code} instead of one of {expected:?}")
            }
            ExitStatus::Signaled(signal) => format!("`{shown}` was killed by signal {signal}"),
            ExitStatus::TimedOut => {
                let seconds = script.timeout.map_or(0.0, |timeout| timeout.as_secs_f64());
                let unit = if seconds == 1.0 { "second" } else { "seconds" };
                format!(
                    "`{shown}` ran past its timeout of {seconds} {unit}; it was killed with everything it started"
                )
            }
        }))
    }
}

impl<I: Interpreter> Provider for ScriptProvider<I> {
    fn describe() -> ProviderInfo {
        let info = I::info();
        let mut provider = ProviderInfo::new(&info.name, &info.version);
        if let Some(program) = &info.requires {
            provider = provider.requires(program);
        }
        for script_type in &info.types {
            provider = provider.with_type(script_type.schema(&info.name));
        }
        provider
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let script_type = match Self::script_type(resource) {
            Ok(script_type) => script_type,
            Err(error) => return vec![error.to_string()],
        };
        let mut problems = Vec::new();
        match Script::from_resource(resource, &script_type, Purpose::Code) {
            // An argv command runs without the interpreter, so only text is checked.
            Ok(script) if matches!(script.code, Code::Text(_)) => {
                if let Err(error) = I::command_line(&script) {
                    problems.push(error.to_string());
                }
            }
            Ok(_) => {}
            Err(error) => problems.push(error.to_string()),
        }
        if let Some(path) = resource.get_str("creates")
            && !path.starts_with('/')
        {
            problems.push(format!(
                "creates `{path}` is not absolute; it must start with `/`"
            ));
        }
        problems.extend(I::validate(resource));
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        let mut state = State::new().with("returns", "notrun");
        if let Some(creates) = resource.get_str("creates") {
            state.set("creates_exists", std::fs::symlink_metadata(creates).is_ok());
        }
        Ok(state)
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        if resource.get_bool("refreshonly") == Some(true) {
            return Ok(vec![]);
        }
        if current.get("creates_exists").and_then(Value::as_bool) == Some(true) {
            log::debug(&format!(
                "not running: `{}` exists",
                resource.get_str("creates").unwrap_or_default()
            ));
            return Ok(vec![]);
        }
        Ok(vec![Change::new(
            "returns",
            Some("notrun".into()),
            Some(Value::Array(
                expected_returns(resource)
                    .into_iter()
                    .map(Value::Integer)
                    .collect(),
            )),
            "executed successfully",
        )])
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        Self::run_code(resource)
    }

    fn refresh(resource: &Resource) -> Result<()> {
        if let Some(creates) = resource.get_str("creates")
            && std::fs::symlink_metadata(creates).is_ok()
        {
            log::debug(&format!("not refreshing: `{creates}` exists"));
            return Ok(());
        }
        Self::run_code(resource)
    }
}

fn expected_returns(resource: &Resource) -> Vec<i64> {
    let returns: Vec<i64> = resource
        .get("returns")
        .map(|value| {
            value
                .as_list()
                .iter()
                .filter_map(|value| value.as_integer())
                .collect()
        })
        .unwrap_or_default();
    if returns.is_empty() { vec![0] } else { returns }
}

fn log_output(output: &Output) {
    for (stream, bytes, truncated) in [
        ("stdout", &output.stdout, output.stdout_truncated),
        ("stderr", &output.stderr, output.stderr_truncated),
    ] {
        for line in String::from_utf8_lossy(bytes).lines() {
            log::notice(&format!("{stream}: {line}"));
        }
        if truncated {
            log::notice(&format!("{stream}: [output truncated at the host's cap]"));
        }
    }
}

/// Seconds from a `timeout` value, checked.
pub(crate) fn timeout_of(value: Option<&Value>) -> Result<Duration> {
    let seconds = match value.map(Value::unwrap_sensitive) {
        None => DEFAULT_TIMEOUT_SECONDS as f64,
        Some(Value::Integer(seconds)) => *seconds as f64,
        Some(Value::Float(seconds)) => *seconds,
        Some(_) => return Err(Error::new("`timeout` must be a number of seconds")),
    };
    if !(seconds > 0.0 && seconds <= 86_400.0 * 7.0) {
        return Err(Error::new(format!(
            "timeout `{seconds}` must be more than 0 seconds and at most a week"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}
