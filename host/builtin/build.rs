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
    wconverge_guest_build::write_out("builtins.rs", &table);
}
