//! Guards (Chef's guard interpreter RFC, "Resources as custom guard interpreters"): `only_if` and
//! `not_if` on every resource, Puppet's `onlyif` and `unless` on types that declare them,
//! read from the catalog, given their interpreter and what they inherit, before the run.

use crate::{GuardScript, PluginError, PluginHost, PreparedResource};
use std::time::Duration;
use wconverge_catalog::DiagnosticCode;
use wconverge_catalog::{Code, Lazy, Problem, Resource, Value};

/// A guard's default timeout, as an `exec`'s (Puppet).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The parameters a script guard may set besides `command` and its context
/// ([`CONTEXT`]).
const OUTCOME: [&str; 2] = ["timeout", "returns"];

/// A guard ready to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// Where it was written: `only_if`, `not_if`, `onlyif` or `unless`.
    pub metaparameter: &'static str,
    /// True for `not_if` and `unless`: the resource is skipped when the script succeeds.
    pub negated: bool,
    /// The script as the report shows it (`[sensitive]` for a sensitive one).
    pub shown: String,
    /// Exit codes that mean the script succeeded.
    pub returns: Vec<i64>,
    /// The attributes it inherited from its resource.
    pub inherited: Vec<String>,
    pub body: GuardBody,
}

/// What a guard runs.
#[derive(Debug, Clone, PartialEq)]
pub enum GuardBody {
    /// A script, run by an interpreter plugin.
    Script(Box<GuardScript>),
    /// `lazy { expr }`, evaluated by the host: true unless `undef` or `false`.
    Block(Lazy),
}

impl Guard {
    /// Who evaluates it: the script type of its interpreter, or `host` for a block.
    pub fn interpreter(&self) -> &str {
        match &self.body {
            GuardBody::Script(script) => &script.interpreter,
            GuardBody::Block(_) => "host",
        }
    }
}

/// How a resource's string guards are interpreted.
struct Interpretation {
    interpreter: String,
    plugin: String,
    inherits: Vec<String>,
}

/// Caches the host's answer about the `default` interpreter for one `prepare`.
#[derive(Default)]
pub(crate) struct Defaults {
    default: Option<Result<Option<crate::InterpreterInfo>, PluginError>>,
}

impl Defaults {
    fn get(
        &mut self,
        host: &dyn PluginHost,
    ) -> Result<Option<crate::InterpreterInfo>, PluginError> {
        self.default
            .get_or_insert_with(|| host.default_interpreter())
            .clone()
    }
}

/// The guards of `resource`, in evaluation order (every `only_if`, then every `not_if`),
/// the sensitive strings they carry, and whether a block guard reads `$facts`. Every
/// problem is reported, not only the first.
pub(crate) fn prepare(
    resource: &Resource,
    prepared: &PreparedResource,
    host: &dyn PluginHost,
    code: &dyn Code,
    defaults: &mut Defaults,
) -> Result<(Vec<Guard>, Vec<String>, bool), Vec<Problem>> {
    let metaparams = &resource.metaparams;
    let mut written: Vec<(&'static str, bool, &Value)> = Vec::new();
    if let Some(value) = &metaparams.only_if {
        written.push(("only_if", false, value));
    }
    if let Some(value) = &metaparams.not_if {
        written.push(("not_if", true, value));
    }
    // A type built into the engine (`node_block`) is no script type.
    let scripted = (prepared.provider != crate::ENGINE
        && (!written.is_empty()
            || metaparams.guard_interpreter.is_some()
            || prepared.get("onlyif").is_some()
            || prepared.get("unless").is_some()))
    .then(|| host.interpreter(&resource.type_name, Some(&prepared.provider)))
    .transpose()
    .map_err(|error| {
        vec![Problem::of(
            resource,
            DiagnosticCode::ProviderUnavailable,
            error.to_string(),
        )]
    })?
    .flatten();
    // Puppet's `onlyif` and `unless` are guards on script types (`exec`); another type's
    // attributes of those names are its own business.
    if scripted.is_some() {
        if let Some(value) = prepared.get("onlyif") {
            written.push(("onlyif", false, value));
        }
        if let Some(value) = prepared.get("unless") {
            written.push(("unless", true, value));
        }
    }
    if written.is_empty() && metaparams.guard_interpreter.is_none() {
        return Ok((Vec::new(), Vec::new(), false));
    }
    let problem = |message: String| Problem::of(resource, DiagnosticCode::Guard, message);
    // An array holds several guards; a sensitive array, several sensitive guards.
    let written: Vec<(&'static str, bool, Value)> = written
        .into_iter()
        .flat_map(|(metaparameter, negated, value)| {
            let items: Vec<Value> = match value.unwrap_sensitive() {
                Value::Array(items) if value.is_sensitive() => items
                    .iter()
                    .map(|item| Value::Sensitive(Box::new(item.clone())))
                    .collect(),
                Value::Array(items) => items.clone(),
                _ => vec![value.clone()],
            };
            items
                .into_iter()
                .map(move |item| (metaparameter, negated, item))
        })
        .collect();
    // Block guards need no interpreter; a `guard_interpreter` is checked anyway.
    let scripts = written
        .iter()
        .any(|(_, _, item)| Lazy::from_value(item.unwrap_sensitive()).is_none());
    let interpretation = if scripts || resource.metaparams.guard_interpreter.is_some() {
        Some(
            interpretation(
                resource,
                &prepared.provider,
                scripted.is_some(),
                host,
                defaults,
            )
            .map_err(|problem| vec![*problem])?,
        )
    } else {
        None
    };
    let mut guards = Vec::new();
    let mut secrets = Vec::new();
    let mut problems = Vec::new();
    let mut reads_facts = false;
    for (metaparameter, negated, item) in &written {
        let (metaparameter, negated) = (*metaparameter, *negated);
        item.collect_secrets(false, &mut secrets);
        if let Some(lazy) = Lazy::from_value(item.unwrap_sensitive()) {
            match lazy.and_then(|lazy| code.check_lazy(&lazy).map(|used| (lazy, used))) {
                Ok((lazy, used)) => {
                    reads_facts |= used.reads_facts;
                    guards.push(Guard {
                        metaparameter,
                        negated,
                        shown: if item.is_sensitive() {
                            "[sensitive]".to_owned()
                        } else {
                            lazy.shown()
                        },
                        returns: Vec::new(),
                        inherited: Vec::new(),
                        body: GuardBody::Block(lazy),
                    });
                }
                Err(message) => problems.push(problem(format!("`{metaparameter}`: {message}"))),
            }
            continue;
        }
        let Some(interpretation) = &interpretation else {
            continue;
        };
        {
            match guard(item, prepared, interpretation) {
                Ok((shown, returns, inherited, script)) => guards.push(Guard {
                    metaparameter,
                    negated,
                    shown,
                    returns,
                    inherited,
                    body: GuardBody::Script(Box::new(script)),
                }),
                Err(GuardError::Shape(message)) => {
                    problems.push(problem(format!("`{metaparameter}`: {message}")).with_help(
                        "a guard is a string, a hash with `command` and guard parameters, a \
                         `lazy { }` block, or an array of those",
                    ))
                }
                Err(GuardError::Value(error)) => {
                    problems.push(problem(format!("`{metaparameter}`: {error}")))
                }
            }
        }
    }
    // Chef evaluates every `only_if` before any `not_if`.
    guards.sort_by_key(|guard| guard.negated);
    if problems.is_empty() {
        Ok((guards, secrets, reads_facts))
    } else {
        Err(problems)
    }
}

/// The interpreter of a resource's guards: the one `guard_interpreter` names,
/// inheriting; `default`, never inheriting; unset, the resource's own interpreter for a
/// script type and `default` for any other type. Chef's RFC is inconsistent about
/// inheritance for string guards; they inherit whenever the interpreter is not
/// `default`, as its bash examples show. A script type defaulting to its own
/// interpreter is the RFC's "future guard improvements", which Chef adopted for
/// `execute` and `powershell_script`.
///
/// Only a script resource has attributes to inherit: a `file`'s `path` or `group` mean
/// something else than a script's, so they never reach a guard.
fn interpretation(
    resource: &Resource,
    provider: &str,
    script_type: bool,
    host: &dyn PluginHost,
    defaults: &mut Defaults,
) -> Result<Interpretation, Box<Problem>> {
    let inheriting = |inherits: Vec<String>| if script_type { inherits } else { Vec::new() };
    let host_error = |error: PluginError| {
        Box::new(Problem::of(
            resource,
            DiagnosticCode::ProviderUnavailable,
            error.to_string(),
        ))
    };
    let default = |defaults: &mut Defaults| -> Result<Interpretation, Box<Problem>> {
        match defaults.get(host).map_err(host_error)? {
            Some(info) => Ok(Interpretation {
                interpreter: info.script_type,
                plugin: info.plugin,
                inherits: Vec::new(),
            }),
            None => Err(Box::new(
                Problem::of(
                    resource,
                    DiagnosticCode::GuardInterpreter,
                    format!(
                        "no installed interpreter is the `default` guard interpreter on this {} \
                         machine",
                        std::env::consts::FAMILY
                    ),
                )
                .with_help(
                    "set `guard_interpreter` to an installed script type, or add the built-in \
                     `sh` plugin to the policy",
                ),
            )),
        }
    };
    match resource.metaparams.guard_interpreter.as_deref() {
        Some("default") => default(defaults),
        // A script resource's own type runs with the resource's own provider.
        Some(name) => match host
            .interpreter(name, (name == resource.type_name).then_some(provider))
            .map_err(host_error)?
        {
            Some(info) => Ok(Interpretation {
                interpreter: name.to_owned(),
                plugin: info.plugin,
                inherits: inheriting(info.inherits),
            }),
            None => Err(Box::new(
                Problem::of(
                    resource,
                    DiagnosticCode::GuardInterpreter,
                    format!("guard_interpreter `{name}` is not an installed interpreter"),
                )
                .with_help(
                    "name a script type whose plugin is an interpreter (`sh`, `bash`, `exec`, \
                     `powershell_script`; `wconverge types` lists them) or `default`",
                ),
            )),
        },
        None if script_type => {
            let info = host
                .interpreter(&resource.type_name, Some(provider))
                .map_err(host_error)?
                .unwrap_or_else(|| crate::InterpreterInfo {
                    script_type: resource.type_name.clone(),
                    plugin: provider.to_owned(),
                    inherits: Vec::new(),
                });
            Ok(Interpretation {
                interpreter: resource.type_name.clone(),
                plugin: info.plugin,
                inherits: info.inherits,
            })
        }
        None => default(defaults),
    }
}

type Parsed = (String, Vec<i64>, Vec<String>, GuardScript);

/// Why a guard is refused: its shape, or one of its values.
enum GuardError {
    Shape(String),
    Value(ValueError),
}

impl From<ValueError> for GuardError {
    fn from(error: ValueError) -> Self {
        GuardError::Value(error)
    }
}

/// The guard parameters that set a script's context, which a guard may also inherit;
/// any other attribute an interpreter inherits (`interpreter` for `script`) reaches it
/// as an option.
const CONTEXT: [&str; 7] = [
    "cwd",
    "environment",
    "user",
    "group",
    "umask",
    "path",
    "architecture",
];

/// One guard: a string, or a hash with `command` and guard parameters.
fn guard(
    value: &Value,
    prepared: &PreparedResource,
    interpretation: &Interpretation,
) -> Result<Parsed, GuardError> {
    let shape = |message: &str| GuardError::Shape(message.to_owned());
    let empty = Vec::new();
    let (command, parameters) = match value.unwrap_sensitive() {
        Value::String(_) => (value, &empty),
        Value::Hash(entries) => {
            let command = entries
                .iter()
                .find(|(key, _)| key == "command")
                .map(|(_, command)| command)
                .ok_or_else(|| shape("a guard hash needs `command`, the script to run"))?;
            if let Some((key, _)) = entries.iter().find(|(key, _)| {
                key != "command"
                    && !CONTEXT.contains(&key.as_str())
                    && !OUTCOME.contains(&key.as_str())
            }) {
                return Err(GuardError::Shape(format!(
                    "a guard has no parameter `{key}`; its parameters are: command, {}, {}",
                    CONTEXT.join(", "),
                    OUTCOME.join(", ")
                )));
            }
            (command, entries)
        }
        other => {
            return Err(GuardError::Shape(format!(
                "a guard is a string or a hash, not {}",
                other.type_name()
            )));
        }
    };
    let code = command
        .unwrap_sensitive()
        .as_str()
        .ok_or_else(|| shape("the guard's `command` must be a string"))?;
    if code.trim().is_empty() {
        return Err(shape("the guard's command is empty"));
    }
    let sensitive = command.is_sensitive() || value.is_sensitive();
    let shown = if sensitive {
        "[sensitive]".to_owned()
    } else {
        code.to_owned()
    };
    let own = |name: &str| {
        parameters
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
            .filter(|value| !matches!(value, Value::Undef))
    };
    let mut inherited = Vec::new();
    let mut pick = |name: &str| -> Option<&Value> {
        if let Some(value) = own(name) {
            return Some(value);
        }
        if interpretation
            .inherits
            .iter()
            .any(|inherits| inherits == name)
            && let Some(value) = prepared.get(name)
        {
            inherited.push(name.to_owned());
            return Some(value);
        }
        None
    };
    let script = GuardScript {
        interpreter: interpretation.interpreter.clone(),
        plugin: interpretation.plugin.clone(),
        subject: String::new(),
        secrets: crate::Secrets::default(),
        code: code.to_owned(),
        sensitive,
        cwd: pick("cwd")
            .map(|value| absolute(value, "cwd"))
            .transpose()?,
        environment: pick("environment")
            .map(environment)
            .transpose()?
            .unwrap_or_default(),
        user: pick("user")
            .map(|value| string(value, "user"))
            .transpose()?,
        group: pick("group")
            .map(|value| string(value, "group"))
            .transpose()?,
        umask: pick("umask").map(umask).transpose()?,
        path: pick("path")
            .map(search_path)
            .transpose()?
            .unwrap_or_default(),
        architecture: pick("architecture")
            .map(|value| string(value, "architecture"))
            .transpose()?,
        timeout: own("timeout")
            .map(timeout)
            .transpose()?
            .unwrap_or(DEFAULT_TIMEOUT),
        options: Vec::new(),
    };
    let mut script = script;
    for name in &interpretation.inherits {
        if !CONTEXT.contains(&name.as_str())
            && let Some(value) = prepared.get(name)
        {
            inherited.push(name.clone());
            script.options.push((name.clone(), value.clone()));
        }
    }
    let returns = own("returns").map(returns).transpose()?.unwrap_or(vec![0]);
    Ok((shown, returns, inherited, script))
}

/// Why a guard parameter's value is refused.
#[derive(Debug, Clone, PartialEq)]
enum ValueError {
    /// Not of the kind the parameter takes (`expected`: `a string`, `a hash or an
    /// array`); `found`, the value's type.
    Kind {
        parameter: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    /// A directory (`cwd`) that is not an absolute path.
    NotAbsolute {
        parameter: &'static str,
        path: String,
    },
    /// An `environment` entry that is not `NAME=value`.
    EnvironmentEntry(String),
    /// A `umask` that is not three or four octal digits.
    Umask(String),
    /// A `path` entry that is not absolute.
    PathEntry(String),
    /// A `timeout` out of its range, in seconds.
    Timeout(f64),
    /// `returns` with no exit code.
    NoReturns,
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueError::Kind {
                parameter,
                expected,
                found,
            } => write!(f, "`{parameter}` must be {expected}, not {found}"),
            ValueError::NotAbsolute { parameter, path } => write!(
                f,
                "{parameter} `{path}` is not absolute; it must start with `/`"
            ),
            ValueError::EnvironmentEntry(entry) => write!(
                f,
                "environment entry `{entry}` is not of the form NAME=value"
            ),
            ValueError::Umask(text) => {
                write!(f, "umask `{text}` is not an octal umask like '022'")
            }
            ValueError::PathEntry(entry) => write!(
                f,
                "path entry `{entry}` is not absolute; it must start with `/`"
            ),
            ValueError::Timeout(seconds) => write!(
                f,
                "timeout `{seconds}` must be more than 0 seconds and at most a week"
            ),
            ValueError::NoReturns => f.write_str("`returns` must list at least one exit code"),
        }
    }
}

/// `value` is not what `parameter` takes.
fn kind(parameter: &'static str, expected: &'static str, value: &Value) -> ValueError {
    ValueError::Kind {
        parameter,
        expected,
        found: value.type_name(),
    }
}

fn string(value: &Value, parameter: &'static str) -> Result<String, ValueError> {
    value
        .unwrap_sensitive()
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| kind(parameter, "a string", value))
}

fn absolute(value: &Value, parameter: &'static str) -> Result<String, ValueError> {
    let path = string(value, parameter)?;
    if path.starts_with('/') {
        Ok(path)
    } else {
        Err(ValueError::NotAbsolute { parameter, path })
    }
}

fn environment(value: &Value) -> Result<Vec<(String, String)>, ValueError> {
    let entry = |entry: &str| {
        entry
            .split_once('=')
            .filter(|(name, _)| !name.is_empty())
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .ok_or_else(|| ValueError::EnvironmentEntry(entry.to_owned()))
    };
    match value.unwrap_sensitive() {
        Value::Hash(entries) => entries
            .iter()
            .map(|(name, value)| Ok((name.clone(), string(value, "environment")?)))
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| entry(&string(item, "environment")?))
            .collect(),
        Value::String(text) => Ok(vec![entry(text)?]),
        other => Err(kind("environment", "a hash or an array", other)),
    }
}

fn umask(value: &Value) -> Result<u32, ValueError> {
    let text = string(value, "umask")?;
    u32::from_str_radix(&text, 8)
        .ok()
        .filter(|umask| text.len() <= 4 && *umask <= 0o777)
        .ok_or(ValueError::Umask(text))
}

fn search_path(value: &Value) -> Result<Vec<String>, ValueError> {
    let directories: Vec<String> = match value.unwrap_sensitive() {
        Value::String(joined) => joined
            .split(':')
            .filter(|dir| !dir.is_empty())
            .map(str::to_owned)
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| string(item, "path"))
            .collect::<Result<_, _>>()?,
        other => return Err(kind("path", "a string or an array", other)),
    };
    match directories.iter().find(|dir| !dir.starts_with('/')) {
        Some(relative) => Err(ValueError::PathEntry(relative.clone())),
        None => Ok(directories),
    }
}

fn timeout(value: &Value) -> Result<Duration, ValueError> {
    let seconds = match value.unwrap_sensitive() {
        Value::Integer(seconds) => *seconds as f64,
        Value::Float(seconds) => *seconds,
        other => return Err(kind("timeout", "a number of seconds", other)),
    };
    if seconds > 0.0 && seconds <= 86_400.0 * 7.0 {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(ValueError::Timeout(seconds))
    }
}

fn returns(value: &Value) -> Result<Vec<i64>, ValueError> {
    let codes = match value.unwrap_sensitive() {
        Value::Array(items) => items.iter().collect(),
        _ => vec![value],
    };
    let codes: Vec<i64> = codes
        .into_iter()
        .map(|code| match code.unwrap_sensitive() {
            Value::Integer(code) => Ok(*code),
            other => Err(kind("returns", "exit codes (integers)", other)),
        })
        .collect::<Result<_, _>>()?;
    if codes.is_empty() {
        return Err(ValueError::NoReturns);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refused_parameter_value_says_what_it_must_be() {
        let cases: [(Result<(), ValueError>, &str); 8] = [
            (
                string(&Value::Integer(1), "user").map(drop),
                "`user` must be a string, not Integer",
            ),
            (
                absolute(&Value::String("tmp".to_owned()), "cwd").map(drop),
                "cwd `tmp` is not absolute; it must start with `/`",
            ),
            (
                environment(&Value::String("=x".to_owned())).map(drop),
                "environment entry `=x` is not of the form NAME=value",
            ),
            (
                environment(&Value::Boolean(true)).map(drop),
                "`environment` must be a hash or an array, not Boolean",
            ),
            (
                umask(&Value::String("0999".to_owned())).map(drop),
                "umask `0999` is not an octal umask like '022'",
            ),
            (
                search_path(&Value::String("/bin:sbin".to_owned())).map(drop),
                "path entry `sbin` is not absolute; it must start with `/`",
            ),
            (
                timeout(&Value::Integer(0)).map(drop),
                "timeout `0` must be more than 0 seconds and at most a week",
            ),
            (
                returns(&Value::Array(Vec::new())).map(drop),
                "`returns` must list at least one exit code",
            ),
        ];
        for (result, text) in cases {
            assert_eq!(result.expect_err(text).to_string(), text);
        }
    }
}
