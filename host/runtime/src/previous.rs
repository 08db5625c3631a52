//! Providers built against the previous WIT version, [`PREVIOUS_WIT_VERSION`], loaded
//! through an adapter (the promise is in `docs/plugin-compatibility.md`).
//!
//! 0.7.0 and 0.8.0 differ in one record: 0.8.0's `type-schema` has `watches`. Every other
//! type has the same shape, and the component model checks types by shape (field and
//! case names and their types, not the records' own names), so the adapter calls a
//! 0.7.0 component's exports with this host's types, and its `describe` with
//! [`ProviderInfo07`], whose types are [`TypeSchema07`]: a 0.7.0 provider's types watch
//! nothing beyond their path attributes. Its imports are this host's own
//! implementations, registered again under the 0.7.0 names, so a 0.7.0 plugin gets
//! exactly the grants, limits and audit trail a 0.8.0 one does.
//!
//! Only the `provider` world is adapted: a 0.7.0 interpreter, launcher or fact source
//! is refused with the version it needs.

use crate::bindings::types::{
    Attribute, AttributeSchema, Change, Checked, Concurrency, Invariant, ProviderInfo, Resource,
    RunContext, TypeSchema,
};
use crate::bindings::{Provider, ProviderIndices, file_metadata, log, process};
use crate::state::PluginState;
use wasmtime::component::{
    ComponentExportIndex, ComponentType, Func, InstancePre, Lift, Linker, Lower,
};
use wasmtime::{AsContextMut, Store};

use crate::bindings::PREVIOUS_WIT_VERSION;

/// 0.7.0's `type-schema`: 0.8.0's without `watches`.
#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(record)]
pub(crate) struct TypeSchema07 {
    name: String,
    doc: String,
    attributes: Vec<AttributeSchema>,
    invariants: Vec<Invariant>,
    refreshable: bool,
    context: Vec<RunContext>,
    #[component(name = "batch-state")]
    batch_state: bool,
    concurrency: Concurrency,
}

/// 0.7.0's `provider-info`, whose types are [`TypeSchema07`].
#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(record)]
pub(crate) struct ProviderInfo07 {
    name: String,
    version: String,
    types: Vec<TypeSchema07>,
    requires: Option<String>,
}

impl From<ProviderInfo07> for ProviderInfo {
    fn from(info: ProviderInfo07) -> ProviderInfo {
        ProviderInfo {
            name: info.name,
            version: info.version,
            types: info
                .types
                .into_iter()
                .map(|schema| TypeSchema {
                    name: schema.name,
                    doc: schema.doc,
                    attributes: schema.attributes,
                    invariants: schema.invariants,
                    refreshable: schema.refreshable,
                    context: schema.context,
                    batch_state: schema.batch_state,
                    concurrency: schema.concurrency,
                    watches: Vec::new(),
                })
                .collect(),
            requires: info.requires,
        }
    }
}

/// Where a 0.7.0 provider's exports are, found and type-checked once when it loads.
pub(crate) struct Indices07 {
    describe: ComponentExportIndex,
    validate: ComponentExportIndex,
    current_state: ComponentExportIndex,
    check: ComponentExportIndex,
    plan: ComponentExportIndex,
    apply: ComponentExportIndex,
    refresh: ComponentExportIndex,
}

impl Indices07 {
    /// The exports of `pre`'s component, checked against 0.7.0's `provider` world.
    pub(crate) fn new(pre: &InstancePre<PluginState>) -> wasmtime::Result<Indices07> {
        let component = pre.component();
        let instance_type = pre.instance_type();
        let index = |name: &str| {
            let (item, index) = component
                .get_export(None, name)
                .ok_or_else(|| wasmtime::format_err!("no export `{name}` found"))?;
            match item {
                wasmtime::component::types::ComponentItem::ComponentFunc(func) => Ok((func, index)),
                _ => Err(wasmtime::format_err!("export `{name}` is not a function")),
            }
        };
        let (func, describe) = index("describe")?;
        func.typecheck::<(), (ProviderInfo07,)>(&instance_type)?;
        let (func, validate) = index("validate")?;
        func.typecheck::<(Vec<Resource>,), (Vec<Vec<String>>,)>(&instance_type)?;
        let (func, current_state) = index("current-state")?;
        func.typecheck::<(Resource,), (Result<Vec<Attribute>, String>,)>(&instance_type)?;
        let (func, check) = index("check")?;
        func.typecheck::<(Vec<Resource>,), (Vec<Result<Checked, String>>,)>(&instance_type)?;
        let (func, plan) = index("plan")?;
        func.typecheck::<(Resource, Vec<Attribute>), (Result<Vec<Change>, String>,)>(
            &instance_type,
        )?;
        let (func, apply) = index("apply")?;
        func.typecheck::<(Resource, Vec<Change>), (Result<(), String>,)>(&instance_type)?;
        let (func, refresh) = index("refresh")?;
        func.typecheck::<(Resource,), (Result<(), String>,)>(&instance_type)?;
        Ok(Indices07 {
            describe,
            validate,
            current_state,
            check,
            plan,
            apply,
            refresh,
        })
    }

    /// The exports of one instance.
    pub(crate) fn load(
        &self,
        mut store: impl AsContextMut<Data = PluginState>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<Provider07> {
        let mut func = |index: &ComponentExportIndex| {
            instance
                .get_func(&mut store, index)
                .ok_or_else(|| wasmtime::format_err!("an export is missing from the instance"))
        };
        Ok(Provider07 {
            describe: func(&self.describe)?,
            validate: func(&self.validate)?,
            current_state: func(&self.current_state)?,
            check: func(&self.check)?,
            plan: func(&self.plan)?,
            apply: func(&self.apply)?,
            refresh: func(&self.refresh)?,
        })
    }
}

/// One instance's exports of a 0.7.0 provider.
pub(crate) struct Provider07 {
    describe: Func,
    validate: Func,
    current_state: Func,
    check: Func,
    plan: Func,
    apply: Func,
    refresh: Func,
}

/// Which `provider` world a plugin was built against, found when it loads.
pub(crate) enum ProviderKind {
    Current(ProviderIndices),
    Previous(Indices07),
}

impl ProviderKind {
    /// The provider exports of `pre`: this host's world, else the previous one's. The
    /// error is the current world's (what an author should build against).
    pub(crate) fn new(pre: &InstancePre<PluginState>) -> wasmtime::Result<ProviderKind> {
        match ProviderIndices::new(pre) {
            Ok(indices) => Ok(ProviderKind::Current(indices)),
            Err(error) => Indices07::new(pre)
                .map(ProviderKind::Previous)
                .map_err(|_| error),
        }
    }

    /// The WIT version of the world it was built against.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            ProviderKind::Current(_) => crate::bindings::WIT_VERSION,
            ProviderKind::Previous(_) => PREVIOUS_WIT_VERSION,
        }
    }

    pub(crate) fn load(
        &self,
        mut store: impl AsContextMut<Data = PluginState>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<ProviderExports> {
        Ok(match self {
            ProviderKind::Current(indices) => {
                ProviderExports::Current(indices.load(&mut store, instance)?)
            }
            ProviderKind::Previous(indices) => {
                ProviderExports::Previous(indices.load(&mut store, instance)?)
            }
        })
    }
}

/// A provider's exports, whichever world it was built against, called with this
/// host's types.
pub(crate) enum ProviderExports {
    Current(Provider),
    Previous(Provider07),
}

type Plugin<'a> = &'a mut Store<PluginState>;

impl ProviderExports {
    pub(crate) fn call_describe(&self, store: Plugin<'_>) -> wasmtime::Result<ProviderInfo> {
        match self {
            ProviderExports::Current(provider) => provider.call_describe(store),
            ProviderExports::Previous(provider) => {
                let typed = provider.describe.typed::<(), (ProviderInfo07,)>(&*store)?;
                let (info,) = typed.call(store, ())?;
                Ok(info.into())
            }
        }
    }

    pub(crate) fn call_validate(
        &self,
        store: Plugin<'_>,
        resources: &[Resource],
    ) -> wasmtime::Result<Vec<Vec<String>>> {
        match self {
            ProviderExports::Current(provider) => provider.call_validate(store, resources),
            ProviderExports::Previous(provider) => {
                let typed = provider
                    .validate
                    .typed::<(&[Resource],), (Vec<Vec<String>>,)>(&*store)?;
                let (problems,) = typed.call(store, (resources,))?;
                Ok(problems)
            }
        }
    }

    pub(crate) fn call_current_state(
        &self,
        store: Plugin<'_>,
        resource: &Resource,
    ) -> wasmtime::Result<Result<Vec<Attribute>, String>> {
        match self {
            ProviderExports::Current(provider) => provider.call_current_state(store, resource),
            ProviderExports::Previous(provider) => {
                let typed = provider
                    .current_state
                    .typed::<(&Resource,), (Result<Vec<Attribute>, String>,)>(&*store)?;
                let (state,) = typed.call(store, (resource,))?;
                Ok(state)
            }
        }
    }

    pub(crate) fn call_check(
        &self,
        store: Plugin<'_>,
        resources: &[Resource],
    ) -> wasmtime::Result<Vec<Result<Checked, String>>> {
        match self {
            ProviderExports::Current(provider) => provider.call_check(store, resources),
            ProviderExports::Previous(provider) => {
                let typed = provider
                    .check
                    .typed::<(&[Resource],), (Vec<Result<Checked, String>>,)>(&*store)?;
                let (checked,) = typed.call(store, (resources,))?;
                Ok(checked)
            }
        }
    }

    pub(crate) fn call_plan(
        &self,
        store: Plugin<'_>,
        resource: &Resource,
        current: &[Attribute],
    ) -> wasmtime::Result<Result<Vec<Change>, String>> {
        match self {
            ProviderExports::Current(provider) => provider.call_plan(store, resource, current),
            ProviderExports::Previous(provider) => {
                let typed = provider
                    .plan
                    .typed::<(&Resource, &[Attribute]), (Result<Vec<Change>, String>,)>(&*store)?;
                let (planned,) = typed.call(store, (resource, current))?;
                Ok(planned)
            }
        }
    }

    pub(crate) fn call_apply(
        &self,
        store: Plugin<'_>,
        resource: &Resource,
        changes: &[Change],
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            ProviderExports::Current(provider) => provider.call_apply(store, resource, changes),
            ProviderExports::Previous(provider) => {
                let typed = provider
                    .apply
                    .typed::<(&Resource, &[Change]), (Result<(), String>,)>(&*store)?;
                let (applied,) = typed.call(store, (resource, changes))?;
                Ok(applied)
            }
        }
    }

    pub(crate) fn call_refresh(
        &self,
        store: Plugin<'_>,
        resource: &Resource,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            ProviderExports::Current(provider) => provider.call_refresh(store, resource),
            ProviderExports::Previous(provider) => {
                let typed = provider
                    .refresh
                    .typed::<(&Resource,), (Result<(), String>,)>(&*store)?;
                let (refreshed,) = typed.call(store, (resource,))?;
                Ok(refreshed)
            }
        }
    }
}

/// Registers this host's imports again under the 0.7.0 names, each calling the same
/// implementation as its 0.8.0 twin.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    let name = |interface: &str| format!("wconverge:plugin/{interface}@{PREVIOUS_WIT_VERSION}");
    // A types-only interface: nothing to define, but the instance must exist.
    linker.instance(&name("types"))?;
    linker.instance(&name("log"))?.func_wrap(
        "log",
        |mut store, (level, message): (log::Level, String)| {
            log::Host::log(store.data_mut(), level, message)
        },
    )?;
    linker.instance(&name("process"))?.func_wrap(
        "run",
        |mut store, (command,): (process::Command,)| {
            Ok((process::Host::run(store.data_mut(), command),))
        },
    )?;
    let mut metadata = linker.instance(&name("file-metadata"))?;
    metadata.func_wrap("stat", |mut store, (path,): (String,)| {
        Ok((file_metadata::Host::stat(store.data_mut(), path),))
    })?;
    metadata.func_wrap("sha256", |mut store, (path,): (String,)| {
        Ok((file_metadata::Host::sha256(store.data_mut(), path),))
    })?;
    metadata.func_wrap("set-mode", |mut store, (path, mode): (String, u32)| {
        Ok((file_metadata::Host::set_mode(store.data_mut(), path, mode),))
    })?;
    metadata.func_wrap(
        "set-owner",
        |mut store, (path, owner, group): (String, Option<String>, Option<String>)| {
            Ok((file_metadata::Host::set_owner(
                store.data_mut(),
                path,
                owner,
                group,
            ),))
        },
    )?;
    Ok(())
}
