//! The built-in plugins: every crate under `providers/` (except the guest workspace's
//! own files), compiled for `wasm32-wasip2` by this crate's build script and embedded.
//! A plugin named `file` comes from `providers/file`.

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_has_the_digest_of_its_bytes() {
        use sha2::Digest;
        assert_eq!(super::BUILTINS.len(), super::BUILTIN_DIGESTS.len());
        for ((name, bytes), (digest_name, digest)) in
            super::BUILTINS.iter().zip(super::BUILTIN_DIGESTS)
        {
            assert_eq!(name, digest_name);
            let computed: String = sha2::Sha256::digest(bytes)
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            assert_eq!(&computed, digest, "{name}");
        }
    }

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
