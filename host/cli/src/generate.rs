//! Resources a catalog implies that it does not declare, added when it is applied, as
//! Puppet generates them: `user { purge_ssh_keys => true }` becomes a `purge_ssh_keys`
//! resource for the user, which keeps the keys the catalog manages for that user (its
//! `ssh_authorized_key` resources that are present, by key, never by name) and removes
//! the others, after the user and its keys.

use wconverge_catalog::{Attributes, Catalog, Metaparams, Resource, Value};

/// Adds what the catalog's resources imply.
pub(crate) fn implied_resources(catalog: &mut Catalog) {
    let mut added = Vec::new();
    for user in &mut catalog.resources {
        if user.type_name != "user"
            || user.attributes.get("purge_ssh_keys") != Some(&Value::Boolean(true))
        {
            continue;
        }
        user.attributes
            .0
            .retain(|(name, _)| name != "purge_ssh_keys");
        let name = user
            .attributes
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&user.title)
            .to_owned();
        added.push((name, user.reference(), user.source.clone()));
    }
    for (name, user, source) in added {
        let keys: Vec<&Resource> = catalog
            .resources
            .iter()
            .filter(|key| {
                key.type_name == "ssh_authorized_key"
                    && key.attributes.get("user").and_then(Value::as_str) == Some(name.as_str())
            })
            .collect();
        let keep = keys
            .iter()
            .filter(|key| key.attributes.get("ensure").and_then(Value::as_str) != Some("absent"))
            .filter_map(|key| key.attributes.get("key").and_then(Value::as_str))
            .map(|key| Value::String(key.to_owned()))
            .collect();
        let mut require = vec![user];
        require.extend(keys.iter().map(|key| key.reference()));
        let purge = Resource {
            type_name: "purge_ssh_keys".to_owned(),
            title: name.clone(),
            attributes: Attributes(vec![
                ("user".to_owned(), Value::String(name)),
                ("keep".to_owned(), Value::Array(keep)),
            ]),
            metaparams: Box::new(Metaparams {
                require,
                ..Metaparams::default()
            }),
            source,
            exported_by: None,
        };
        catalog.resources.push(purge);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wconverge_catalog::ResourceRef;

    #[test]
    fn a_user_that_purges_its_keys_gets_a_purge_after_its_keys() {
        let mut catalog = Catalog::from_json(
            r#"{"format_version": 1, "resources": [
                {"type": "user", "title": "alice", "attributes": {"purge_ssh_keys": true}},
                {"type": "ssh_authorized_key", "title": "laptop", "attributes": {"user": "alice", "key": "AAAA"}},
                {"type": "ssh_authorized_key", "title": "gone", "attributes": {"user": "alice", "key": "BBBB", "ensure": "absent"}},
                {"type": "ssh_authorized_key", "title": "other", "attributes": {"user": "bob", "key": "CCCC"}},
                {"type": "user", "title": "bob"}
            ]}"#,
        )
        .expect("catalog");
        implied_resources(&mut catalog);
        assert_eq!(catalog.resources.len(), 6);
        let purge = &catalog.resources[5];
        assert_eq!(purge.type_name, "purge_ssh_keys");
        assert_eq!(
            purge.attributes.get("keep"),
            Some(&Value::Array(vec!["AAAA".into()]))
        );
        assert_eq!(
            purge.metaparams.require,
            vec![
                ResourceRef::new("user", "alice"),
                ResourceRef::new("ssh_authorized_key", "laptop"),
                ResourceRef::new("ssh_authorized_key", "gone")
            ]
        );
        assert!(
            catalog.resources[0]
                .attributes
                .get("purge_ssh_keys")
                .is_none()
        );
    }
}
