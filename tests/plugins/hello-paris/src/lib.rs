//! A provider of the `hello` type that is suitable only at the Paris site: its
//! requirement reads the `site` group that the `facts-custom` test plugin publishes.
//! With `hello-tokyo`, it shows how the host chooses among the providers of one type.

use wconverge_sdk::{
    Attribute, Change, DataType, Provider, ProviderInfo, Resource, Result, State, TypeSchema,
    export_provider, log,
};

struct HelloParis;

impl Provider for HelloParis {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("hello-paris", "0.0.0")
            .requires("site.name == 'paris'")
            .with_type(
                TypeSchema::new("hello", "Greets someone, in the language of the site.").attribute(
                    Attribute::new("name", DataType::String, "Who is greeted.").namevar(),
                ),
            )
    }

    fn current_state(_resource: &Resource) -> Result<State> {
        Ok(State::new())
    }

    fn plan(resource: &Resource, _current: &State) -> Result<Vec<Change>> {
        Ok(vec![Change::new(
            "name",
            None,
            Some(resource.title.clone().into()),
            format!("greeted {}", resource.title),
        )])
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        log::notice(&format!("bonjour, {}", resource.title));
        Ok(())
    }
}

export_provider!(HelloParis);
