//! Builds every provider under `providers/` for wasm32-wasip2 and writes the table the
//! crate embeds.

fn main() {
    let manifest_dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let root = manifest_dir
        .parent()
        .and_then(std::path::Path::parent)
        .expect("host/builtin lives two levels below the repository root");
    let guests = wconverge_guest_build::Guests::new(root);
    let plugins = guests.members_under("providers", "wconverge-plugin-");
    let artifacts = guests.build(&plugins);
    let mut table = String::from(
        "/// Built-in plugins by name, with their component bytes.\npub static BUILTINS: &[(&str, &[u8])] = &[\n",
    );
    for artifact in &artifacts {
        table.push_str(&format!(
            "    ({:?}, include_bytes!({:?})),\n",
            artifact.name, artifact.path
        ));
    }
    table.push_str("];\n");
    // Each component's sha256, computed here once rather than at every start: the host
    // keys its caches and checks pins with it.
    table.push_str(
        "/// The sha256 of each built-in plugin's component, by plugin name.\npub static BUILTIN_DIGESTS: &[(&str, &str)] = &[\n",
    );
    for artifact in &artifacts {
        use sha2::Digest;
        let bytes = std::fs::read(&artifact.path).expect("the component was just built");
        let digest: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        table.push_str(&format!("    ({:?}, {digest:?}),\n", artifact.name));
    }
    table.push_str("];\n");
    wconverge_guest_build::write_out("builtins.rs", &table);
}
