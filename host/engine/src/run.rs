//! The run loop: each resource in graph order, through its provider, with failure
//! isolation and refresh notifications.

use crate::prepared::{ENGINE, Prepared, PreparedResource};
use crate::redact::{REDACTED, Secrets};
use crate::report::{
    ChangeReport, DiffReport, GuardReport, LogReport, RefreshReport, ResourceReport, Status,
};
use crate::{Call, Change, Failure, GuardBody, LogRecord, PluginHost, ScriptStatus};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Instant;
use wconverge_catalog::{Code, NodeAttributes, RunContext, TypeSchema, Value};

/// Whether a run changes the machine. The harmless value is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Report what would change; change nothing.
    #[default]
    Noop,
    Apply,
}

/// What the resources of a run share.
pub(crate) struct Shared<'a> {
    pub(crate) prepared: &'a Prepared,
    pub(crate) host: &'a (dyn PluginHost + Sync),
    pub(crate) mode: Mode,
    /// The node attributes: as compiled, then as `node_block`s write them.
    pub(crate) node: RwLock<NodeAttributes>,
    /// Gathered at the first resource that needs them, once.
    pub(crate) facts: OnceLock<Result<wconverge_requires::Facts, crate::FactsError>>,
    pub(crate) prefetched: crate::prefetch::Prefetched,
    /// Guards evaluated ahead of their resource's turn, by run position (see
    /// [`crate::ahead`]).
    pub(crate) ahead: Mutex<HashMap<usize, crate::ahead::Ahead>>,
    /// The resources to apply, by catalog index (the scope of a run of some resources).
    pub(crate) selected: Option<&'a [bool]>,
    /// How the runs before left the others, by catalog index.
    pub(crate) left: Option<&'a [Status]>,
}

impl Shared<'_> {
    /// Whether the resource at catalog index `idx` is one the run applies unless
    /// notified.
    pub(crate) fn is_selected(&self, idx: usize) -> bool {
        self.selected.is_none_or(|selected| selected[idx])
    }

    fn facts(&self) -> &Result<wconverge_requires::Facts, crate::FactsError> {
        self.facts.get_or_init(|| self.host.facts())
    }

    /// The machine changed (or is changing) through `resource`: what was read in
    /// batches may be stale, unless its plugin can change nothing (`notify`) and it has
    /// no guard (whose commands, run by another plugin, may have changed something).
    fn invalidate(&self, resource: &PreparedResource) {
        if !resource.guards.is_empty() || self.host.changes_machine(&resource.provider) {
            self.prefetched.invalidate();
        }
    }
}

/// What the resources a resource depends on left for it.
pub(crate) struct Inputs {
    /// Those that failed, or were skipped because theirs failed.
    pub(crate) failed_dependencies: Vec<String>,
    /// Those skipped because their requirement does not hold.
    pub(crate) unmet: Vec<String>,
    /// Those whose changes notified it, in graph order.
    pub(crate) notified_by: Vec<usize>,
}

impl Inputs {
    /// From the statuses of the resources finished so far (by catalog index), and the
    /// notifications they sent.
    pub(crate) fn of(
        prepared: &Prepared,
        idx: usize,
        statuses: &[Option<Status>],
        notified_by: &[Vec<usize>],
    ) -> Inputs {
        let graph = &prepared.graph;
        let predecessors = graph.predecessors(idx);
        let named = |wanted: &dyn Fn(Status) -> bool| {
            predecessors
                .iter()
                .filter(|dependency| statuses[**dependency].is_some_and(wanted))
                .map(|dependency| graph.reference(*dependency).to_string())
                .collect()
        };
        let mut notified = notified_by[idx].clone();
        notified.sort_by_key(|&source| graph.position(source));
        Inputs {
            failed_dependencies: named(&|status| {
                matches!(status, Status::Failed | Status::SkippedFailedDependency)
            }),
            unmet: named(&|status| status == Status::SkippedByRequirement),
            notified_by: notified,
        }
    }
}

/// How one resource ended.
pub(crate) struct Outcome {
    pub(crate) report: ResourceReport,
    /// It was refreshed.
    pub(crate) refreshed: bool,
    /// It ran: false for a resource a scoped run leaves as it was.
    pub(crate) ran: bool,
}

impl Outcome {
    /// Whether it notifies those it has `notify` edges to: Puppet propagates events
    /// from noop changes too, as "would refresh".
    pub(crate) fn notifies(&self) -> bool {
        self.ran && matches!(self.report.status, Status::Changed | Status::WouldChange)
    }
}

/// One resource, at `position` of the graph order: its dependencies, its requirement,
/// its guards, then its plan, its changes and its refresh.
pub(crate) fn apply_one(shared: &Shared<'_>, position: usize, inputs: Inputs) -> Outcome {
    let prepared = shared.prepared;
    let host = shared.host;
    let mode = shared.mode;
    let graph = &prepared.graph;
    let idx = graph.order()[position];
    let mut refreshed = false;
    let resource = &prepared.resources[idx];
    let resource_started = Instant::now();
    let mut report = ResourceReport {
        resource: resource.reference.to_string(),
        source: resource.source.clone(),
        exported_by: resource.exported_by.clone(),
        provider: resource.provider.clone(),
        status: Status::Unchanged,
        changes: Vec::new(),
        refresh: None,
        error: None,
        failed_dependencies: Vec::new(),
        requirement: None,
        unmet_dependencies: Vec::new(),
        guards: Vec::new(),
        logs: Vec::new(),
        duration_ms: 0.0,
        timings: crate::report::Timings::default(),
        corrective_change: false,
    };
    let Inputs {
        failed_dependencies,
        unmet,
        notified_by,
    } = inputs;
    if notified_by.is_empty() && !shared.is_selected(idx) {
        // Not in this scoped run: as the runs before left it (in sync, or failed and
        // holding back what depends on it).
        report.status = match shared.left.map(|left| left[idx]) {
            Some(Status::Changed | Status::WouldChange) | None => Status::Unchanged,
            Some(status) => status,
        };
        return Outcome {
            report,
            refreshed: false,
            ran: false,
        };
    }
    if !held_back(shared, resource, failed_dependencies, unmet, &mut report) {
        let noop = mode == Mode::Noop || resource.noop;
        // Logs are scrubbed at the end, with the secrets of lazy values too.
        let mut raw: Vec<LogRecord> = Vec::new();
        let mut record = |call_logs: Vec<LogRecord>| raw.extend(call_logs);
        // `$facts` for the lazy values that read it: this machine's, gathered once.
        let facts_value = if resource.reads_facts {
            match shared.facts() {
                Ok(gathered) => Ok(crate::facts_value(&gathered.groups)),
                Err(error) => Err(Failure::Facts {
                    what: "its lazy values read",
                    error: error.clone(),
                }),
            }
        } else {
            Ok(Value::Hash(Vec::new()))
        };
        let milliseconds = |since: Instant| since.elapsed().as_secs_f64() * 1000.0;
        let guards_started = Instant::now();
        // Only a resource with guards may have had them evaluated ahead: no lock for the
        // others (most resources of a run).
        let ahead = (!resource.guards.is_empty())
            .then(|| {
                shared
                    .ahead
                    .lock()
                    .expect("guards ahead lock")
                    .remove(&position)
            })
            .flatten()
            // Taken only if nothing changed the machine since they began.
            .filter(|ahead| ahead.still_holds(shared));
        let guarded = match (&facts_value, ahead) {
            (_, Some(ahead)) => {
                let (guarded, reports, logs) = ahead.taken();
                report.guards = reports;
                record(logs);
                guarded
            }
            (Ok(facts_value), None) => guards(
                host,
                prepared.code,
                resource,
                &shared.node.read().expect("node attributes lock"),
                facts_value,
                &mut report.guards,
                &mut record,
            ),
            (Err(failure), None) => Guarded::Fail(failure.clone()),
        };
        report.timings.guards_ms = milliseconds(guards_started);
        let check_started = Instant::now();
        let facts_value = facts_value.unwrap_or(Value::Undef);
        // The resource as its provider sees it: lazy values resolved.
        let mut target = std::borrow::Cow::Borrowed(resource);
        // The state its provider planned from: what it read of sensitive attributes is
        // as secret as what the catalog says of them.
        let mut observed: crate::State = Vec::new();
        let schema = prepared.schema(resource);
        let planned = match guarded {
            Guarded::Skip => Ok(Planned::SkippedByGuard),
            Guarded::Fail(failure) => Err(failure),
            Guarded::Apply if resource.provider == ENGINE => run_node_block(
                prepared.code,
                resource,
                &mut shared.node.write().expect("node attributes lock"),
                &facts_value,
                &mut record,
            ),
            Guarded::Apply => resolve_lazy(
                resource,
                schema,
                (prepared.code, &prepared.types),
                &shared.node.read().expect("node attributes lock"),
                &facts_value,
            )
            .and_then(|resolved| {
                if let Some(resolved) = resolved {
                    let Call { outcome, logs } = host.validate(&[&resolved]);
                    record(logs);
                    target = std::borrow::Cow::Owned(resolved);
                    let problems = outcome?.into_iter().flatten().collect::<Vec<_>>();
                    if !problems.is_empty() {
                        return Err(Failure::Refused(problems));
                    }
                }
                if let Some(filled) = schema
                    .map(|schema| home_defaults(schema, &target, host))
                    .transpose()?
                    .flatten()
                {
                    target = std::borrow::Cow::Owned(filled);
                }
                let without = std::mem::replace(&mut target, std::borrow::Cow::Borrowed(resource));
                target = with_run_context(shared, schema, without)?;
                let mut batch_logs = Vec::new();
                let checked =
                    match shared
                        .prefetched
                        .take(prepared, host, position, &mut batch_logs)
                    {
                        Some(Err(failure)) => {
                            record(batch_logs);
                            return Err(failure);
                        }
                        Some(Ok(checked)) => Some(checked),
                        None => None,
                    };
                record(batch_logs);
                let checked = match checked {
                    // The batch planned the resource as it is: nothing was added to it
                    // (a home default, a run context) since.
                    Some(checked) if matches!(target, std::borrow::Cow::Borrowed(_)) => checked,
                    current => {
                        let Call { outcome, logs } =
                            host.plan(&target, current.map(|checked| checked.state));
                        record(logs);
                        outcome?
                    }
                };
                observed = checked.state;
                let changes = checked.changes;
                init_only_changes(schema, &changes)?;
                Ok(Planned::Changes(changes))
            }),
        };
        report.timings.check_ms = milliseconds(check_started);
        let change_started = Instant::now();
        let outcome = match planned {
            Err(failure) => Err(failure),
            Ok(Planned::SkippedByGuard) => Ok((Status::SkippedByGuard, Vec::new())),
            Ok(Planned::Done) => Ok((Status::Unchanged, Vec::new())),
            Ok(Planned::Changes(changes)) if changes.is_empty() => {
                shared.prefetched.in_sync();
                Ok((Status::Unchanged, changes))
            }
            Ok(Planned::Changes(changes)) if noop => Ok((Status::WouldChange, changes)),
            Ok(Planned::Changes(changes)) => {
                // What was read in batches may be stale once anything changes (and
                // while it changes, for reads other resources make meanwhile).
                shared.invalidate(&target);
                let Call { outcome, logs } = host.apply(&target, &changes);
                shared.invalidate(&target);
                record(logs);
                outcome
                    .map(|()| (Status::Changed, changes))
                    .map_err(Failure::Plugin)
            }
        };
        report.timings.change_ms = milliseconds(change_started);
        let sensitive_attributes = target.sensitive_attributes();
        // Most resources have no sensitive attribute: their secrets are used as they are.
        let with_observed;
        let secrets = if sensitive_attributes.is_empty() {
            &target.secrets
        } else {
            with_observed = target.secrets_with_observed(&observed);
            &with_observed
        };
        match outcome {
            Ok((status, changes)) => {
                report.status = status;
                report.changes = changes
                    .iter()
                    .map(|change| change_report(change, secrets, &sensitive_attributes))
                    .collect();
            }
            Err(failure) => {
                report.status = Status::Failed;
                report.error = Some(secrets.scrub(&failure.to_string()));
            }
        }
        let refresh_started = Instant::now();
        refreshed = refresh_if_notified(
            shared,
            &target,
            &notified_by,
            secrets,
            noop,
            &mut report,
            &mut record,
        );
        report.timings.refresh_ms = milliseconds(refresh_started);
        report.logs = raw
            .into_iter()
            .map(|log| LogReport {
                level: log.level.as_str(),
                message: secrets.scrub(&log.message),
            })
            .collect();
    }
    report.duration_ms = resource_started.elapsed().as_secs_f64() * 1000.0;
    Outcome {
        report,
        refreshed,
        ran: true,
    }
}

/// Whether the resource does not get as far as its guards: wconverge was interrupted,
/// a dependency failed or was skipped by its requirement, or its own requirement does
/// not hold (or could not be evaluated). Says why in the report.
fn held_back(
    shared: &Shared<'_>,
    resource: &PreparedResource,
    failed_dependencies: Vec<String>,
    unmet: Vec<String>,
    report: &mut ResourceReport,
) -> bool {
    let requirement = match &resource.requirement {
        Some(program) if failed_dependencies.is_empty() && unmet.is_empty() => {
            Some(shared.facts().as_ref().map(|facts| program.evaluate(facts)))
        }
        _ => None,
    };
    if let Some(why) = shared.host.interrupted() {
        report.status = Status::Failed;
        report.error = Some(format!("not applied: {why}"));
    } else if !failed_dependencies.is_empty() {
        report.status = Status::SkippedFailedDependency;
        report.failed_dependencies = failed_dependencies;
    } else if !unmet.is_empty() {
        report.status = Status::SkippedByRequirement;
        report.unmet_dependencies = unmet;
    } else if let Some(Err(error)) = &requirement {
        report.status = Status::Failed;
        report.error = Some(format!(
            "its requirement could not be evaluated: the facts could not be gathered: {error}"
        ));
    } else if let Some(Ok(verdict)) = &requirement
        && verdict.exhausted
    {
        report.status = Status::Failed;
        report.error = Some(
            "its requirement did more work than a resource program may, and was stopped; \
             simplify it"
                .to_owned(),
        );
    } else if let Some(Ok(verdict)) = requirement
        .as_ref()
        .filter(|verdict| verdict.as_ref().is_ok_and(|verdict| !verdict.holds))
    {
        report.status = Status::SkippedByRequirement;
        report.requirement = verdict
            .failed
            .as_ref()
            .map(|(line, text)| format!("line {line} does not hold: `{text}`"));
    } else {
        return false;
    }
    true
}

/// A resource that was notified, did not fail and was not skipped by a guard is
/// refreshed (if its type reacts to notifications): unless its `ensure` just changed
/// (Puppet's "unscheduled"), or the run is a noop. Whether it was refreshed.
fn refresh_if_notified(
    shared: &Shared<'_>,
    target: &PreparedResource,
    notified_by: &[usize],
    secrets: &Secrets,
    noop: bool,
    report: &mut ResourceReport,
    record: &mut impl FnMut(Vec<LogRecord>),
) -> bool {
    let refreshable = shared
        .prepared
        .schema(target)
        .is_some_and(|schema| schema.refreshable);
    if refreshable
        && !notified_by.is_empty()
        && !matches!(report.status, Status::Failed | Status::SkippedByGuard)
    {
        let triggered_by = notified_by
            .iter()
            .map(|source| shared.prepared.graph.reference(*source).to_string())
            .collect();
        // Puppet's: a resource whose `ensure` just changed (a service just started)
        // is not refreshed as well; the refresh is unscheduled.
        let ensure_changed = report
            .changes
            .iter()
            .any(|change| change.attribute == "ensure");
        let outcome = if ensure_changed {
            "unscheduled"
        } else if noop {
            "would_refresh"
        } else {
            shared.invalidate(target);
            let Call { outcome, logs } = shared.host.refresh(target);
            shared.invalidate(target);
            record(logs);
            match outcome {
                Ok(()) => "refreshed",
                Err(error) => {
                    report.status = Status::Failed;
                    report.error = Some(secrets.scrub(&error.to_string()));
                    "failed"
                }
            }
        };
        report.refresh = Some(RefreshReport {
            triggered_by,
            outcome,
        });
        return outcome == "refreshed";
    }
    false
}

/// The resource with the run context its type asks for (the node's attributes, the
/// facts, the paths managed beneath it), filled in just before its provider sees it.
fn with_run_context<'r>(
    shared: &Shared<'_>,
    schema: Option<&TypeSchema>,
    target: std::borrow::Cow<'r, PreparedResource>,
) -> Result<std::borrow::Cow<'r, PreparedResource>, Failure> {
    let prepared = shared.prepared;
    if let Some(schema) = schema.filter(|schema| !schema.context.is_empty()) {
        let mut context = Vec::new();
        let mut secrets = Vec::new();
        for wanted in &schema.context {
            let value = match wanted {
                RunContext::NodeAttributes => {
                    shared.node.read().expect("node attributes lock").merged()
                }
                RunContext::ManagedBeneath => {
                    let beneath = schema
                        .namevar()
                        .and_then(|namevar| target.get(&namevar.name))
                        .and_then(Value::as_str)
                        .map(|path| prepared.written_beneath(path))
                        .unwrap_or_default();
                    // Most paths have nothing managed beneath them: no
                    // entry means none (and spares a copy of the resource).
                    if beneath.is_empty() {
                        continue;
                    }
                    Value::Array(beneath.into_iter().map(Value::String).collect())
                }
                RunContext::Facts => match shared.facts() {
                    Ok(facts) => crate::facts_value(&facts.groups),
                    Err(error) => {
                        return Err(Failure::Facts {
                            what: "it reads",
                            error: error.clone(),
                        });
                    }
                },
            };
            value.collect_secrets(false, &mut secrets);
            context.push((wanted.entry().to_owned(), value));
        }
        if !context.is_empty() {
            let mut with_context = target.into_owned();
            with_context.context.extend(context);
            with_context.secrets.extend(secrets);
            return Ok(std::borrow::Cow::Owned(with_context));
        }
    }
    Ok(target)
}

/// How far a resource got before its changes are made.
enum Planned {
    SkippedByGuard,
    /// A `node_block` ran: nothing to change on the machine.
    Done,
    Changes(Vec<Change>),
}

/// Runs a `node_block`'s body, which writes node attributes; each write is logged.
fn run_node_block(
    code: &dyn Code,
    resource: &PreparedResource,
    node: &mut NodeAttributes,
    facts: &Value,
    record: &mut impl FnMut(Vec<LogRecord>),
) -> Result<Planned, Failure> {
    let (_, block) = resource
        .lazy
        .iter()
        .find(|(name, _)| name == "block")
        .ok_or_else(|| Failure::Lazy("it has no `block`".to_owned()))?;
    let written = code
        .run_node_block(block, node, facts)
        .map_err(Failure::Lazy)?;
    record(
        written
            .into_iter()
            .map(|write| LogRecord {
                level: crate::Level::Notice,
                message: format!("set {write}"),
            })
            .collect(),
    );
    Ok(Planned::Done)
}

/// The resource with its lazy attribute values evaluated and checked against its
/// schema, or `None` when it has none. A lazy value that is `undef` leaves the
/// attribute unset (its default applies).
/// Puppet's `init_only`: such an attribute is set when the resource is created and never
/// changed after; a plan that would change it on a resource that exists fails the
/// resource (in noop runs too) before anything is applied.
fn init_only_changes(schema: Option<&TypeSchema>, changes: &[Change]) -> Result<(), Failure> {
    let Some(schema) = schema else {
        return Ok(());
    };
    for change in changes {
        let init_only = schema
            .attribute(&change.attribute)
            .is_some_and(|attribute| attribute.behaviour == wconverge_catalog::Behaviour::InitOnly);
        let exists = change
            .current
            .as_ref()
            .is_some_and(|current| !matches!(current, Value::Undef));
        if init_only && exists {
            return Err(Failure::InitOnly(change.attribute.clone()));
        }
    }
    Ok(())
}

/// The resource with the attributes whose default lies below a user's home filled in,
/// if it leaves any unset; looked up now, so a user created earlier in the run counts.
fn home_defaults(
    schema: &TypeSchema,
    resource: &PreparedResource,
    host: &dyn PluginHost,
) -> Result<Option<PreparedResource>, Failure> {
    let mut filled: Option<PreparedResource> = None;
    for attribute in &schema.attributes {
        let Some(home) = &attribute.home_default else {
            continue;
        };
        if resource.get(&attribute.name).is_some() {
            continue;
        }
        let user = resource
            .get(&home.user_attribute)
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Failure::Home(format!(
                    "`{}` is not set, and `{}` names no user whose home it would be in",
                    attribute.name, home.user_attribute
                ))
            })?;
        let dir = host.home_of(user).ok_or_else(|| {
            Failure::Home(format!(
                "`{}` is not set, and user `{user}` has no home directory on this machine; \
                 set `{}`",
                attribute.name, attribute.name
            ))
        })?;
        let value = home.below(&dir);
        filled
            .get_or_insert_with(|| resource.clone())
            .attributes
            .push((attribute.name.clone(), Value::String(value)));
    }
    Ok(filled)
}

fn resolve_lazy(
    resource: &PreparedResource,
    schema: Option<&TypeSchema>,
    code: (&dyn Code, &[TypeSchema]),
    node: &NodeAttributes,
    facts: &Value,
) -> Result<Option<PreparedResource>, Failure> {
    resolve_lazy_values(resource, schema, code, node, facts).map_err(Failure::Lazy)
}

/// [`resolve_lazy`], its failure in words.
fn resolve_lazy_values(
    resource: &PreparedResource,
    schema: Option<&TypeSchema>,
    (code, declared): (&dyn Code, &[TypeSchema]),
    node: &NodeAttributes,
    facts: &Value,
) -> Result<Option<PreparedResource>, String> {
    if resource.lazy.is_empty() {
        return Ok(None);
    }
    let schema = schema.ok_or("its type has no schema")?;
    let mut resolved = resource.clone();
    resolved.lazy.clear();
    let mut secrets = Vec::new();
    for (name, lazy) in &resource.lazy {
        let attribute = schema
            .attribute(name)
            .ok_or_else(|| format!("its type has no attribute `{name}`"))?;
        let value = code
            .evaluate_lazy(lazy, node, facts)
            .map_err(|message| format!("attribute `{name}`: {message}"))?;
        let value = match value {
            Value::Undef => match &attribute.default {
                Some(default) => default.clone(),
                None if attribute.required() => {
                    return Err(format!(
                        "attribute `{name}` is required, and its lazy value ({}) is undef",
                        lazy.location
                    ));
                }
                None => continue,
            },
            value => value,
        };
        if !matches!(attribute.data_type, wconverge_catalog::DataType::Named(_))
            && let Err(message) = attribute.check(&value)
        {
            let shown = if value.is_sensitive() || attribute.sensitive {
                String::new()
            } else {
                format!(" (the value is {})", value.display())
            };
            return Err(format!(
                "attribute `{name}`: its lazy value ({}) {message}{shown}",
                lazy.location
            ));
        }
        let value = match crate::validate::conform(schema, attribute, &value, code, declared) {
            Ok(instance) => instance.unwrap_or(value),
            Err(messages) => {
                return Err(format!(
                    "attribute `{name}`: its lazy value ({}) was refused: {}",
                    lazy.location,
                    messages.join("; ")
                ));
            }
        };
        value.collect_secrets(attribute.sensitive, &mut secrets);
        let value = if attribute.sensitive && !value.is_sensitive() {
            Value::Sensitive(Box::new(value))
        } else {
            value
        };
        resolved.attributes.push((name.clone(), value));
    }
    // In schema order, as the provider sees every resource.
    resolved.attributes.sort_by_key(|(name, _)| {
        schema
            .attributes
            .iter()
            .position(|attribute| attribute.name == *name)
    });
    resolved.secrets.extend(secrets);
    let broken = crate::validate::invariants(code, schema, &resolved.attributes);
    if !broken.is_empty() {
        return Err(resolved.secrets.scrub(&broken.join("; ")));
    }
    Ok(Some(resolved))
}

/// What a resource's guards decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Guarded {
    Apply,
    Skip,
    /// A guard could not be evaluated: the resource fails.
    Fail(Failure),
}

/// Evaluates the guards in order until one says to skip (as Chef does); a guard that
/// cannot be launched or times out fails the resource rather than count as true or
/// false.
pub(crate) fn guards(
    host: &dyn PluginHost,
    code: &dyn Code,
    resource: &crate::PreparedResource,
    node: &NodeAttributes,
    facts: &Value,
    reports: &mut Vec<GuardReport>,
    record: &mut impl FnMut(Vec<LogRecord>),
) -> Guarded {
    for guard in &resource.guards {
        let named = format!(
            "{} guard `{}` (interpreter `{}`)",
            guard.metaparameter,
            guard.shown,
            guard.interpreter()
        );
        let (exit_code, signal, succeeded) = match &guard.body {
            GuardBody::Block(lazy) => match code.evaluate_lazy_truth(lazy, node, facts) {
                Ok(holds) => (None, None, holds),
                Err(message) => {
                    return Guarded::Fail(Failure::Guard(format!(
                        "{named} could not be evaluated: {message}"
                    )));
                }
            },
            GuardBody::Script(script) => {
                let Call { outcome, logs } = host.run_guard(script);
                record(logs);
                let output = match outcome {
                    Ok(output) => output,
                    Err(error) => {
                        return Guarded::Fail(Failure::Guard(format!(
                            "{named} could not be evaluated: {}",
                            error.message
                        )));
                    }
                };
                // A guard's output explains a false one ("command not found"); the JSON
                // report keeps it, unless the guard is sensitive (its output could say
                // anything its code holds).
                if script.sensitive {
                    if !output.stdout.is_empty() || !output.stderr.is_empty() {
                        record(vec![LogRecord {
                            level: crate::Level::Info,
                            message: format!(
                                "{} output not kept: the guard is sensitive",
                                guard.metaparameter
                            ),
                        }]);
                    }
                } else {
                    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)]
                    {
                        record(
                            String::from_utf8_lossy(bytes)
                                .lines()
                                .take(50)
                                .map(|line| LogRecord {
                                    level: crate::Level::Info,
                                    message: format!("{} {stream}: {line}", guard.metaparameter),
                                })
                                .collect(),
                        );
                    }
                }
                let (exit_code, signal) = match output.status {
                    ScriptStatus::Exited(code) => (Some(code), None),
                    ScriptStatus::Signaled(signal) => (None, Some(signal)),
                    ScriptStatus::TimedOut => {
                        return Guarded::Fail(Failure::Guard(format!(
                            "{named} ran past its timeout of {}; it was killed with everything it started",
                            seconds(output.timeout)
                        )));
                    }
                };
                (
                    exit_code,
                    signal,
                    exit_code.is_some_and(|code| guard.returns.contains(&i64::from(code))),
                )
            }
        };
        let passed = succeeded != guard.negated;
        reports.push(GuardReport {
            metaparameter: guard.metaparameter,
            command: guard.shown.clone(),
            interpreter: guard.interpreter().to_owned(),
            inherited: guard.inherited.clone(),
            exit_code,
            signal,
            succeeded,
            passed,
        });
        if !passed {
            return Guarded::Skip;
        }
    }
    Guarded::Apply
}

/// `1 second`, `2.5 seconds`.
fn seconds(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds == 1.0 {
        "1 second".to_owned()
    } else {
        format!("{seconds} seconds")
    }
}

fn change_report(change: &Change, secrets: &Secrets, sensitive: &[&str]) -> ChangeReport {
    if sensitive.contains(&change.attribute.as_str()) {
        return ChangeReport {
            attribute: change.attribute.clone(),
            from: change.current.as_ref().map(|_| REDACTED.to_owned()),
            to: change.desired.as_ref().map(|_| REDACTED.to_owned()),
            message: format!("{} changed {REDACTED}", change.attribute),
            diff: None,
        };
    }
    let shown = |value: &wconverge_catalog::Value| {
        let text = value.display();
        if secrets.is_empty() {
            text
        } else {
            secrets.scrub(&text)
        }
    };
    ChangeReport {
        attribute: change.attribute.clone(),
        from: change.current.as_ref().map(shown),
        to: change.desired.as_ref().map(shown),
        message: secrets.scrub(&change.message),
        diff: change.diff.as_ref().map(|diff| match diff {
            crate::Diff::Unified(text) => DiffReport::Unified(secrets.scrub(text)),
            crate::Diff::BeforeAfter { before, after } => DiffReport::BeforeAfter {
                before: secrets.scrub(before),
                after: secrets.scrub(after),
            },
        }),
    }
}

#[cfg(test)]
mod diff_tests {
    use super::*;

    fn change(attribute: &str, diff: crate::Diff) -> Change {
        Change {
            attribute: attribute.to_owned(),
            current: None,
            desired: None,
            message: "changed".to_owned(),
            diff: Some(diff),
        }
    }

    /// A provider's diff reaches the report scrubbed of the resource's secrets, and
    /// never for an attribute that is sensitive, whatever the provider sent.
    #[test]
    fn a_diff_is_scrubbed_and_never_shown_for_a_sensitive_attribute() {
        let secrets = Secrets::new(vec!["hunter2".to_owned()]);
        let unified = change(
            "content",
            crate::Diff::Unified("-password = old\n+password = hunter2\n".to_owned()),
        );
        let report = change_report(&unified, &secrets, &[]);
        assert_eq!(
            report.diff,
            Some(DiffReport::Unified(
                "-password = old\n+password = [redacted]\n".to_owned()
            ))
        );
        let sensitive = change_report(&unified, &secrets, &["content"]);
        assert_eq!(sensitive.diff, None);
        let values = change(
            "value",
            crate::Diff::BeforeAfter {
                before: "a".to_owned(),
                after: "hunter2".to_owned(),
            },
        );
        assert_eq!(
            change_report(&values, &secrets, &[]).diff,
            Some(DiffReport::BeforeAfter {
                before: "a".to_owned(),
                after: "[redacted]".to_owned()
            })
        );
    }
}
