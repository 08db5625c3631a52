//! The schemas a catalog's resources use, by type and provider.

use std::collections::HashMap;
use wconverge_catalog::TypeSchema;

/// The schemas in use, by type, then by provider: looked up by reference, without a key
/// to build, several times for each resource of a run.
#[derive(Debug, Default)]
pub struct Schemas(NameMap<NameMap<TypeSchema>>);

/// A map by the name of a type or a provider.
type NameMap<V> = HashMap<String, V, std::hash::BuildHasherDefault<NameHasher>>;

impl Schemas {
    /// The schema of `type_name` with `provider`.
    pub fn get(&self, type_name: &str, provider: &str) -> Option<&TypeSchema> {
        self.0
            .get(type_name)
            .and_then(|by_provider| by_provider.get(provider))
    }

    /// Keeps `schema` for `type_name` with `provider`, unless one is kept already.
    pub(crate) fn keep(
        &mut self,
        type_name: &str,
        provider: &str,
        schema: impl FnOnce() -> TypeSchema,
    ) {
        if self.get(type_name, provider).is_none() {
            self.0
                .entry(type_name.to_owned())
                .or_default()
                .insert(provider.to_owned(), schema());
        }
    }
}

/// Hashes the names of types and providers eight bytes at a time with a multiplication,
/// rather than with SipHash. What is kept under them is only what plugins provide (a
/// manifest's unknown type is refused, never kept), so a manifest cannot fill a map
/// with names that collide.
#[derive(Default)]
pub(crate) struct NameHasher(u64);

impl NameHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut whole = [0; 8];
            whole.copy_from_slice(word);
            self.add(u64::from_le_bytes(whole));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_found_by_its_type_and_provider_and_the_first_kept_stays() {
        let mut schemas = Schemas::default();
        schemas.keep("file", "file", || TypeSchema::new("file", "the first"));
        schemas.keep("file", "file", || TypeSchema::new("file", "a second"));
        schemas.keep("file", "other", || {
            TypeSchema::new("file", "another provider's")
        });
        assert_eq!(
            schemas
                .get("file", "file")
                .map(|schema| schema.doc.as_str()),
            Some("the first")
        );
        assert_eq!(
            schemas
                .get("file", "other")
                .map(|schema| schema.doc.as_str()),
            Some("another provider's")
        );
        assert!(schemas.get("file", "none").is_none());
        assert!(schemas.get("package", "file").is_none());
    }

    #[test]
    fn names_of_any_length_hash_apart() {
        use std::hash::BuildHasher;
        let hash =
            |name: &str| std::hash::BuildHasherDefault::<NameHasher>::default().hash_one(name);
        let names = [
            "",
            "a",
            "file",
            "files",
            "package",
            "exec_12345678",
            "exec_12345679",
        ];
        for (i, one) in names.iter().enumerate() {
            for other in &names[i + 1..] {
                assert_ne!(hash(one), hash(other), "{one} and {other}");
            }
        }
    }
}
