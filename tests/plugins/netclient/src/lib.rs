//! A test plugin that uses the network, so its component imports `wasi:sockets`.
//!
//! Built only for the end-to-end tests: the host must refuse it before instantiation,
//! naming the import, because no policy grants network access.

use wconverge_sdk::{
    Attribute, Change, DataType, Provider, ProviderInfo, Resource, Result, State, TypeSchema,
    export_provider,
};

struct NetClient;

impl Provider for NetClient {
    fn describe() -> ProviderInfo {
        ProviderInfo::new("netclient", "0.0.0").with_type(
            TypeSchema::new("netclient", "Connects to an address when applied.").attribute(
                Attribute::new("address", DataType::String, "host:port to connect to.").namevar(),
            ),
        )
    }

    fn current_state(_resource: &Resource) -> Result<State> {
        Ok(State::new())
    }

    fn plan(_resource: &Resource, _current: &State) -> Result<Vec<Change>> {
        Ok(vec![Change::new("address", None, None, "connected")])
    }

    fn apply(resource: &Resource, _changes: &[Change]) -> Result<()> {
        let address = resource.require_str("address")?;
        std::net::TcpStream::connect(address)?;
        Ok(())
    }
}

export_provider!(NetClient);
