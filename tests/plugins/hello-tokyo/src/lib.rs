//! A provider of the `hello` type that is suitable only at the Tokyo site, with an
//! attribute the Paris provider lacks (`bow`): two providers of one type may accept
//! different attributes, and a resource is checked against its own provider's.

use wconverge_sdk::{
    Attribute, Change, DataType, Provider, ProviderInfo, Resource, Result, State, TypeSchema,
    export_provider, log,
};

struct HelloTokyo;

impl Provider for HelloTokyo {
    fn describe() -> ProviderInfo {
        // Two lines, so that a test sees which line failed: the first holds in Paris.
        ProviderInfo::new("hello-tokyo", "0.0.0")
            .requires("int(site.rack) > 0\nsite.name == 'tokyo'")
            .with_type(
                TypeSchema::new("hello", "Greets someone, in the language of the site.")
                    .attribute(
                        Attribute::new("name", DataType::String, "Who is greeted.").namevar(),
                    )
                    .attribute(Attribute::new(
                        "bow",
                        DataType::Boolean,
                        "Whether to bow while greeting.",
                    )),
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
        let bow = if resource.get_bool("bow") == Some(true) {
            " (bowing)"
        } else {
            ""
        };
        log::notice(&format!("konnichiwa, {}{bow}", resource.title));
        Ok(())
    }
}

export_provider!(HelloTokyo);
