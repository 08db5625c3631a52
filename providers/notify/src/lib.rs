//! The `notify` provider: logs a message, with Puppet's semantics.
//!
//! A notify resource has no state on the machine, so it changes on every run (its
//! message is "defined"), which is what makes it useful for tracing the order of a run
//! and for triggering refreshes.

use wconverge_sdk::{
    Attribute, Change, Concurrency, DataType, Provider, ProviderInfo, Resource, Result, State,
    TypeSchema, export_provider, log,
};

struct NotifyProvider;

impl Provider for NotifyProvider {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("notify", env!("CARGO_PKG_VERSION")).with_type(
            TypeSchema::new(
                "notify",
                "Logs a message at notice level every time it is applied.",
            )
            .concurrency(Concurrency::Any)
            .attribute(
                Attribute::new("name", DataType::String, "An arbitrary name; the title.").namevar(),
            )
            .attribute(Attribute::new(
                "message",
                DataType::String,
                "The message to log. Defaults to the name.",
            )),
        )
    }

    fn current_state(_resource: &Resource) -> Result<State> {
        Ok(State::new())
    }

    fn plan(resource: &Resource, _current: &State) -> Result<Vec<Change>> {
        let message = message(resource);
        Ok(vec![Change::new(
            "message",
            None,
            Some(message.clone().into()),
            format!("defined 'message' as '{message}'"),
        )])
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        log::notice(&message(resource));
        Ok(())
    }
}

fn message(resource: &Resource) -> String {
    resource
        .get_str("message")
        .or(resource.get_str("name"))
        .unwrap_or(&resource.title)
        .to_owned()
}

export_provider!(NotifyProvider);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_defaults_to_the_name_and_is_logged_at_notice() {
        let resource = Resource::new("notify", "hello").with("name", "hello");
        let changes = NotifyProvider::plan(&resource, &State::new()).expect("plan");
        assert_eq!(changes[0].message, "defined 'message' as 'hello'");
        NotifyProvider::apply(&resource, &changes).expect("apply");
        assert_eq!(
            log::take_captured(),
            vec![(log::Level::Notice, "hello".to_owned())]
        );
    }
}
