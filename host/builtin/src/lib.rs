//! The built-in plugins: every crate under `providers/` (except the guest workspace's
//! own files), compiled for `wasm32-wasip2` by this crate's build script and embedded.
//! A plugin named `file` comes from `providers/file`.

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_is_a_component() {
        assert!(!super::BUILTINS.is_empty());
        for (name, bytes) in super::BUILTINS {
            // The component binary header: magic, then version 0x0d and layer 1.
            assert_eq!(
                &bytes[..8],
                b"\0asm\x0d\0\x01\0",
                "{name} is not a component"
            );
        }
    }
}
