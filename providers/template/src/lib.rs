//! The `template` provider: a file whose content is rendered during the run from a Jinja
//! template (minijinja), with the resource's `variables`, the node's attributes as
//! `node` and the machine's facts as `facts`, the way Chef renders templates at run
//! time. The rendered file is then managed exactly as a `file` with that content
//! (`wconverge-file-core`). A plugin of its own, so that the template engine weighs
//! only on runs that render templates.

use wconverge_file_core::{
    FileAttributes, file_apply, file_current_state, file_plan, validate_file,
};
use wconverge_sdk::{
    Attribute, Change, Concurrency, DataType, Error, PathAccess, Provider, ProviderInfo, Resource,
    Result, RunContext, State, TypeSchema, Value, export_provider,
};

struct TemplateProvider;

impl Provider for TemplateProvider {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("template", env!("CARGO_PKG_VERSION")).with_type(schema())
    }

    fn validate(resource: &Resource) -> Vec<String> {
        let mut problems = validate_file(resource);
        problems.extend(validate(resource));
        problems
    }

    fn current_state(resource: &Resource) -> Result<State> {
        file_current_state(&as_file(resource)?)
    }

    fn plan(resource: &Resource, current: &State) -> Result<Vec<Change>> {
        file_plan(&as_file(resource)?, current)
    }

    fn apply(resource: &Resource, changes: &[Change]) -> Result<()> {
        file_apply(&as_file(resource)?, changes)
    }
}

export_provider!(TemplateProvider);

/// The largest template source read.
const MAX_SOURCE_BYTES: u64 = 4 * 1024 * 1024;

/// The names the host's context takes in a template; `variables` may not use them.
const RESERVED: [&str; 2] = ["node", "facts"];

fn schema() -> TypeSchema {
    TypeSchema::new(
        "template",
        "A regular file rendered during the run from a Jinja template, with `variables`, \
         the node's attributes (`node`) and the facts (`facts`).",
    )
    .context(RunContext::NodeAttributes)
    .context(RunContext::Facts)
    .concurrency(Concurrency::PerPath)
    .attribute(
        Attribute::new("path", DataType::String, "Absolute path of the file.")
            .namevar()
            .path_access(PathAccess::ReadWrite),
    )
    .attribute(
        Attribute::new(
            "ensure",
            DataType::enumeration(["file", "present", "absent"]),
            "`file` (or `present`): the rendered file; `absent`: no file.",
        )
        .default("file"),
    )
    .attribute(
        Attribute::new(
            "source",
            DataType::String,
            "Absolute path of the template (Jinja syntax, as minijinja reads it), in a \
             directory the plugin's policy lets it read.",
        )
        .required()
        .parameter()
        .path_access(PathAccess::Read)
        .refers_to("file"),
    )
    .attribute(
        Attribute::new(
            "content",
            DataType::String,
            "The rendered content, as changes report it (by digest, or as a diff).",
        )
        .read_only(),
    )
    .attribute(
        Attribute::new(
            "variables",
            DataType::Hash(Box::new(DataType::Any)),
            "Values the template reads by name, beside `node` and `facts`.",
        )
        .default(Value::Hash(Vec::new()))
        .parameter(),
    )
    .with_file_attributes()
}

/// Problems a template resource has before anything runs.
fn validate(resource: &Resource) -> Vec<String> {
    let mut problems = Vec::new();
    match resource.get_str("source") {
        Some(source) if !source.starts_with('/') => problems.push(format!(
            "source `{source}` is not absolute; templates are read by absolute path"
        )),
        Some(_) => {}
        None => problems.push("`source` must be a string".to_owned()),
    }
    if let Some(variables) = resource.get("variables").and_then(Value::as_hash) {
        for (name, _) in variables {
            if RESERVED.contains(&name.as_str()) {
                problems.push(format!(
                    "`variables` may not hold `{name}`: in a template `{name}` is the \
                     node's {}",
                    if name == "node" {
                        "attributes"
                    } else {
                        "facts"
                    }
                ));
            }
        }
    }
    problems
}

/// The resource as a `file` with the rendered content (sensitive when it shows a
/// sensitive value). An `absent` template is not rendered.
fn as_file(resource: &Resource) -> Result<Resource> {
    let mut file = resource.clone();
    if resource.get_str("ensure") == Some("absent") {
        return Ok(file);
    }
    let (content, sensitive) = render(resource)?;
    let content = if sensitive {
        Value::Sensitive(Box::new(Value::String(content)))
    } else {
        Value::String(content)
    };
    file = file.with("content", content);
    Ok(file)
}

fn render(resource: &Resource) -> Result<(String, bool)> {
    let source = resource.require_str("source")?;
    let text = read_source(source)?;
    let mut env = minijinja::Environment::new();
    // A typo in a variable is an error, not an empty string in a config file.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_keep_trailing_newline(true);
    let mut has_secrets = false;
    let context = |perturb: Perturb, has_secrets: &mut bool| {
        let mut context: Vec<(String, minijinja::Value)> = Vec::new();
        if let Some(variables) = resource.get("variables").and_then(Value::as_hash) {
            for (name, value) in variables {
                context.push((name.clone(), to_jinja(value, false, perturb, has_secrets)));
            }
        }
        for name in RESERVED {
            let value = resource.context(name).map_or_else(
                || minijinja::Value::from(()),
                |value| to_jinja(value, false, perturb, has_secrets),
            );
            context.push((name.to_owned(), value));
        }
        minijinja::Value::from_iter(context)
    };
    let plain = context(Perturb::None, &mut has_secrets);
    // An error's detail may quote a value: with secrets about, it is left out.
    let explain = |error: minijinja::Error| {
        let mut message = format!("template `{source}`");
        if let Some(line) = error.line() {
            message.push_str(&format!(", line {line}"));
        }
        message.push_str(&format!(": {}", error.kind()));
        if let Some(detail) = error.detail()
            && !has_secrets
        {
            message.push_str(&format!(": {detail}"));
        }
        Error::new(message)
    };
    let template = env
        .template_from_named_str(source, &text)
        .map_err(explain)?;
    let rendered = template.render(plain).map_err(explain)?;
    if !has_secrets {
        return Ok((rendered, false));
    }
    // Whether the content depends on a sensitive value, whatever filters or conditions
    // it went through: render again with every sensitive value changed, twice (each
    // character changed, and emptied). Different content, or a failure, means it does,
    // and the content is sensitive.
    let sensitive = [Perturb::Flip, Perturb::Empty].into_iter().any(|perturb| {
        template
            .render(context(perturb, &mut has_secrets))
            .map_or(true, |perturbed| perturbed != rendered)
    });
    Ok((rendered, sensitive))
}

fn read_source(source: &str) -> Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(source)
        .map_err(|error| Error::new(format!("cannot read the template `{source}`: {error}")))?;
    let mut text = String::new();
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| Error::new(format!("cannot read the template `{source}`: {error}")))?;
    if text.len() as u64 > MAX_SOURCE_BYTES {
        return Err(Error::new(format!(
            "the template `{source}` is larger than {} MiB",
            MAX_SOURCE_BYTES / 1024 / 1024
        )));
    }
    Ok(text)
}

/// How sensitive values are changed for the dependency check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Perturb {
    None,
    /// Every character, number and boolean changed; strings one longer.
    Flip,
    /// Strings empty, numbers zero, booleans false.
    Empty,
}

/// A value as a template sees it. Within a sensitive value (`secret`), `perturb`
/// changes every leaf (for the dependency check); `has_secrets` notes that there is one.
fn to_jinja(
    value: &Value,
    secret: bool,
    perturb: Perturb,
    has_secrets: &mut bool,
) -> minijinja::Value {
    // Only the leaves of a sensitive value change; `perturb` goes down unchanged.
    let leaf = if secret { perturb } else { Perturb::None };
    match (value, leaf) {
        (Value::Undef, _) => minijinja::Value::from(()),
        (Value::Boolean(b), Perturb::None) => minijinja::Value::from(*b),
        (Value::Boolean(b), Perturb::Flip) => minijinja::Value::from(!*b),
        (Value::Boolean(_), Perturb::Empty) => minijinja::Value::from(false),
        (Value::Integer(i), Perturb::None) => minijinja::Value::from(*i),
        (Value::Integer(i), Perturb::Flip) => minijinja::Value::from(i.wrapping_add(7919)),
        (Value::Integer(_), Perturb::Empty) => minijinja::Value::from(0),
        (Value::Float(f), Perturb::None) => minijinja::Value::from(*f),
        (Value::Float(f), Perturb::Flip) => minijinja::Value::from(f + 7919.5),
        (Value::Float(_), Perturb::Empty) => minijinja::Value::from(0.0),
        (Value::String(s), Perturb::None) => minijinja::Value::from(s.as_str()),
        // Every character differs and the length too: slices, prefixes and lengths all
        // see the change.
        (Value::String(s), Perturb::Flip) => minijinja::Value::from(
            s.chars()
                .map(|c| char::from_u32(u32::from(c) ^ 1).unwrap_or('x'))
                .chain(['\u{1}'])
                .collect::<String>(),
        ),
        (Value::String(_), Perturb::Empty) => minijinja::Value::from(""),
        (Value::Array(items), _) => minijinja::Value::from(
            items
                .iter()
                .map(|item| to_jinja(item, secret, perturb, has_secrets))
                .collect::<Vec<_>>(),
        ),
        (Value::Hash(entries), _) => minijinja::Value::from_iter(
            entries
                .iter()
                .map(|(key, value)| (key.clone(), to_jinja(value, secret, perturb, has_secrets))),
        ),
        (Value::Sensitive(inner), _) => {
            *has_secrets = true;
            to_jinja(inner, true, perturb, has_secrets)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own for one test.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("wconverge-template-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir
    }

    fn template(dir: &std::path::Path, text: &str) -> Resource {
        let source = dir.join("app.conf.j2");
        std::fs::write(&source, text).expect("template written");
        Resource::new("template", "/etc/app.conf")
            .with("path", "/etc/app.conf")
            .with("source", source.to_str().expect("utf-8"))
    }

    #[test]
    fn variables_node_attributes_and_facts_render() {
        let dir = scratch("render");
        let node = Value::Hash(vec![(
            "app".to_owned(),
            Value::Hash(vec![("port".to_owned(), Value::Integer(8080))]),
        )]);
        // Facter's structure, as the host passes it.
        let facts = Value::Hash(vec![(
            "os".to_owned(),
            Value::Hash(vec![(
                "family".to_owned(),
                Value::String("Debian".to_owned()),
            )]),
        )]);
        let resource = template(
            &dir,
            "# {{ site }}\nport = {{ node.app.port }}\nos = {{ facts.os.family }}\n{% for u in users %}{{ u }} {% endfor %}\n",
        )
        .with(
            "variables",
            Value::Hash(vec![
                ("site".to_owned(), "paris".into()),
                (
                    "users".to_owned(),
                    Value::Array(vec!["a".into(), "b".into()]),
                ),
            ]),
        )
        .with_context("node", node)
        .with_context("facts", facts);
        let file = as_file(&resource).expect("renders");
        assert_eq!(
            file.get_str("content"),
            Some("# paris\nport = 8080\nos = Debian\na b \n")
        );
    }

    #[test]
    fn an_undefined_name_is_an_error_with_its_line() {
        let dir = scratch("undefined");
        let resource = template(&dir, "ok\nport = {{ node.app.prot }}\n")
            .with_context("node", Value::Hash(Vec::new()));
        let error = as_file(&resource).expect_err("undefined").to_string();
        assert!(
            error.contains("app.conf.j2`, line 2: undefined value"),
            "{error}"
        );
    }

    #[test]
    fn content_showing_a_sensitive_value_is_sensitive() {
        let dir = scratch("sensitive");
        let resource = template(&dir, "password = {{ password }}\n").with(
            "variables",
            Value::Hash(vec![(
                "password".to_owned(),
                Value::Sensitive(Box::new("hunter2".into())),
            )]),
        );
        let file = as_file(&resource).expect("renders");
        assert!(file.get("content").is_some_and(Value::is_sensitive));
        let plain = template(&dir, "nothing secret\n").with(
            "variables",
            Value::Hash(vec![(
                "password".to_owned(),
                Value::Sensitive(Box::new("hunter2".into())),
            )]),
        );
        assert!(
            !as_file(&plain)
                .expect("renders")
                .get("content")
                .is_some_and(Value::is_sensitive)
        );
    }

    #[test]
    fn a_sensitive_value_through_a_filter_still_makes_the_content_sensitive() {
        let dir = scratch("filters");
        for text in [
            "pw={{ pw | upper }}\n",
            "part={{ pw[0:3] }}\n",
            "rev={{ pw | reverse }}\n",
            "{% if pw | length > 3 %}long{% endif %}\n",
        ] {
            let resource = template(&dir, text).with(
                "variables",
                Value::Hash(vec![(
                    "pw".to_owned(),
                    Value::Sensitive(Box::new("hunter2secret".into())),
                )]),
            );
            let file = as_file(&resource).expect("renders");
            assert!(
                file.get("content").is_some_and(Value::is_sensitive),
                "{text}"
            );
        }
        // An error names no secret.
        let resource = template(&dir, "{% include pw | upper %}\n").with(
            "variables",
            Value::Hash(vec![(
                "pw".to_owned(),
                Value::Sensitive(Box::new("hunter2secret".into())),
            )]),
        );
        let error = as_file(&resource)
            .expect_err("no such template")
            .to_string();
        assert!(!error.to_lowercase().contains("hunter2"), "{error}");
    }

    #[test]
    fn variables_may_not_hide_node_or_facts() {
        let resource = Resource::new("template", "/x")
            .with("source", "/t.j2")
            .with(
                "variables",
                Value::Hash(vec![("node".to_owned(), "x".into())]),
            );
        assert_eq!(
            validate(&resource),
            ["`variables` may not hold `node`: in a template `node` is the node's attributes"]
        );
    }
}
