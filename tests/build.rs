//! Builds the test plugins under `tests/plugins/` for wasm32-wasip2.

fn main() {
    let manifest_dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let root = manifest_dir
        .parent()
        .expect("tests/ lives directly under the repository root");
    let guests = wconverge_guest_build::Guests::new(root);
    let plugins = guests.members_under("tests/plugins", "wconverge-testplugin-");
    let mut artifacts = guests.build(&plugins);
    // The third-party example, built as its author would: a workspace of its own that
    // knows only the guest SDK and `wit/`.
    artifacts.push(guests.build_outside("examples/third-party-provider", "file-line", "file-line"));
    // The second language: Python, built with componentize-py against `wit/`.
    artifacts.push(guests.build_python("examples/python-provider", "app", "git-config"));
    // A Python provider with a bug: its exception must reach the report with its
    // traceback.
    artifacts.push(guests.build_python("tests/plugins/python-raising", "app", "python-raising"));
    let mut consts = String::new();
    for artifact in &artifacts {
        consts.push_str(&format!(
            "/// The `{}` test plugin's component.\npub const {}: &str = {:?};\n",
            artifact.name,
            artifact.name.to_uppercase().replace('-', "_"),
            artifact.path
        ));
    }
    consts.push_str(&format!(
        "/// componentize-py, as the Python plugins were built with it.\npub const COMPONENTIZE_PY: &str = {:?};\n",
        guests.componentize_py()
    ));
    wconverge_guest_build::write_out("test_plugins.rs", &consts);
}
