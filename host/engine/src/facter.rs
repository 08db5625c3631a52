//! `$facts` as Puppet users know it: Facter's core structure (`os.family`,
//! `os.release.major`, `networking.interfaces`, `processors.count`,
//! `memory.system.total_bytes`...), with Puppet 7's legacy flat facts (`osfamily`,
//! `operatingsystem`, `ipaddress`...), built from the fact plugins' flat records. Groups
//! Facter does not know (`package`, `user`, `group`, `mount`) stay lists of records, as
//! resource programs see them.

use std::collections::BTreeMap;
use wconverge_catalog::Value;
use wconverge_requires::Record;

/// The groups this module turns into Facter's facts rather than lists of records.
const FACTER_GROUPS: &[&str] = &[
    "os",
    "networking",
    "interface",
    "processors",
    "memory",
    "virtual",
    "timezone",
    "identity",
    "path",
];

/// The names of the facts this module makes: they are top-scope variables too
/// (`$::osfamily`, `$::os`), as in Puppet.
pub const FACTER_NAMES: &[&str] = &[
    "os",
    "kernel",
    "kernelrelease",
    "kernelversion",
    "kernelmajversion",
    "networking",
    "processors",
    "memory",
    "identity",
    "virtual",
    "is_virtual",
    "path",
    "timezone",
    "hostname",
    "domain",
    "fqdn",
    "ipaddress",
    "ipaddress6",
    "macaddress",
    "netmask",
    "network",
    "interfaces",
    "osfamily",
    "operatingsystem",
    "operatingsystemrelease",
    "operatingsystemmajrelease",
    "lsbdistcodename",
    "architecture",
    "hardwaremodel",
    "processorcount",
    "physicalprocessorcount",
    "memorysize_mb",
    "id",
    "gid",
];

fn string(value: impl Into<String>) -> Value {
    Value::String(value.into())
}

fn hash(entries: Vec<(&str, Value)>) -> Value {
    Value::Hash(
        entries
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

/// An integer fact from its text; `undef` when there is none.
fn integer(text: &str) -> Value {
    text.parse::<i64>().map_or(Value::Undef, Value::Integer)
}

/// The one record of a group, as a lookup.
fn first<'g>(
    groups: &'g BTreeMap<String, Vec<Record>>,
    name: &str,
) -> Option<impl Fn(&str) -> String + 'g> {
    let record = groups.get(name)?.first()?;
    Some(move |key: &str| field(record, key))
}

/// A record's value for `key`, empty when it has none.
fn field(record: &Record, key: &str) -> String {
    record
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.clone())
        .unwrap_or_default()
}

/// Facter's capitalized family: `Debian`, `RedHat`, `Suse`...
fn family_name(family: &str) -> String {
    match family {
        "debian" => "Debian".to_owned(),
        "redhat" => "RedHat".to_owned(),
        "suse" => "Suse".to_owned(),
        "arch" => "Archlinux".to_owned(),
        "alpine" => "Alpine".to_owned(),
        "gentoo" => "Gentoo".to_owned(),
        other => capitalized(other),
    }
}

/// Facter's operating system name: `Debian`, `Ubuntu`, `RedHat`, `CentOS`...
fn os_name(id: &str) -> String {
    match id {
        "rhel" => "RedHat".to_owned(),
        "centos" => "CentOS".to_owned(),
        "almalinux" => "AlmaLinux".to_owned(),
        "opensuse" | "opensuse-leap" => "OpenSuSE".to_owned(),
        "sles" => "SLES".to_owned(),
        "arch" => "Archlinux".to_owned(),
        "ol" => "OracleLinux".to_owned(),
        "amzn" => "Amazon".to_owned(),
        other => capitalized(other),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Debian's names of architectures (`amd64`), which Facter reports on that family.
fn debian_architecture(hardware: &str) -> &str {
    match hardware {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "i686" | "i586" | "i386" => "i386",
        "armv7l" => "armhf",
        other => other,
    }
}

/// A size as Facter writes it: `15.54 GiB`.
fn human_bytes(bytes: i64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.2} {}", units[unit])
    }
}

/// Facter's `memory.system` or `memory.swap` from a total and what is free.
fn memory_of(total: &str, free: &str) -> Value {
    let (Ok(total), Ok(free)) = (total.parse::<i64>(), free.parse::<i64>()) else {
        return Value::Undef;
    };
    let used = total.saturating_sub(free);
    let capacity = if total > 0 {
        format!("{:.2}%", used as f64 * 100.0 / total as f64)
    } else {
        "0.00%".to_owned()
    };
    hash(vec![
        ("available", string(human_bytes(free))),
        ("available_bytes", Value::Integer(free)),
        ("capacity", string(capacity)),
        ("total", string(human_bytes(total))),
        ("total_bytes", Value::Integer(total)),
        ("used", string(human_bytes(used))),
        ("used_bytes", Value::Integer(used)),
    ])
}

/// Facts as manifests, lazy values and templates read them: Facter's structure for what
/// Facter knows, each other group a list of records (`$facts['package'][0]['name']`).
pub fn facts_value(groups: &BTreeMap<String, Vec<Record>>) -> Value {
    let mut facts: Vec<(String, Value)> = Vec::new();
    let mut put = |name: &str, value: Value| {
        if value != Value::Undef {
            facts.push((name.to_owned(), value));
        }
    };
    if let Some(os) = first(groups, "os") {
        let family = family_name(&os("family"));
        let name = os_name(&os("name"));
        // Debian's point release is in /etc/debian_version (`12.5`), not os-release.
        let full = match os("version") {
            version if !version.is_empty() => version,
            _ => os("release"),
        };
        let mut parts = full.splitn(3, '.');
        let major = parts.next().unwrap_or_default().to_owned();
        let minor = parts.next().map(str::to_owned);
        let hardware = os("architecture");
        let architecture = if family == "Debian" {
            debian_architecture(&hardware).to_owned()
        } else {
            hardware.clone()
        };
        let mut release = vec![("full", string(&full)), ("major", string(&major))];
        if let Some(minor) = &minor {
            release.push(("minor", string(minor)));
        }
        put(
            "os",
            hash(vec![
                ("architecture", string(&architecture)),
                (
                    "distro",
                    hash(vec![
                        ("codename", string(os("codename"))),
                        ("id", string(&name)),
                        ("release", hash(release.clone())),
                    ]),
                ),
                ("family", string(&family)),
                ("hardware", string(&hardware)),
                ("name", string(&name)),
                ("release", hash(release)),
            ]),
        );
        let kernel_release = os("kernel");
        let version = kernel_release
            .split(['-', '+'])
            .next()
            .unwrap_or_default()
            .to_owned();
        let majversion = version.split('.').take(2).collect::<Vec<_>>().join(".");
        put("kernel", string("Linux"));
        put("kernelrelease", string(&kernel_release));
        put("kernelversion", string(&version));
        put("kernelmajversion", string(majversion));
        put("osfamily", string(&family));
        put("operatingsystem", string(&name));
        put("operatingsystemrelease", string(&full));
        put("operatingsystemmajrelease", string(&major));
        put("lsbdistcodename", string(os("codename")));
        put("architecture", string(architecture));
        put("hardwaremodel", string(hardware));
    }
    let interfaces: Vec<(String, Value)> = groups
        .get("interface")
        .into_iter()
        .flatten()
        .map(|record| {
            let get = |key: &str| field(record, key);
            let mut entries: Vec<(&str, Value)> = Vec::new();
            if !get("ip").is_empty() {
                entries.push((
                    "bindings",
                    Value::Array(vec![hash(vec![
                        ("address", string(get("ip"))),
                        ("netmask", string(get("netmask"))),
                        ("network", string(get("network"))),
                    ])]),
                ));
            }
            for key in ["ip", "ip6", "mac", "netmask", "network"] {
                if !get(key).is_empty() {
                    entries.push((key, string(get(key))));
                }
            }
            entries.push(("mtu", integer(&get("mtu"))));
            entries.retain(|(_, value)| *value != Value::Undef);
            (get("name"), hash(entries))
        })
        .collect();
    if let Some(net) = first(groups, "networking") {
        let mut entries: Vec<(&str, Value)> = vec![
            ("domain", string(net("domain"))),
            ("fqdn", string(net("fqdn"))),
            ("hostname", string(net("hostname"))),
            ("interfaces", Value::Hash(interfaces.clone())),
        ];
        for key in ["ip", "ip6", "mac", "netmask", "network", "primary"] {
            if !net(key).is_empty() {
                entries.push((key, string(net(key))));
            }
        }
        entries.push(("mtu", integer(&net("mtu"))));
        entries.retain(|(_, value)| *value != Value::Undef);
        put("networking", hash(entries));
        put("hostname", string(net("hostname")));
        put("domain", string(net("domain")));
        put("fqdn", string(net("fqdn")));
        for (legacy, key) in [
            ("ipaddress", "ip"),
            ("ipaddress6", "ip6"),
            ("macaddress", "mac"),
            ("netmask", "netmask"),
            ("network", "network"),
        ] {
            if !net(key).is_empty() {
                put(legacy, string(net(key)));
            }
        }
        let names: Vec<&str> = interfaces.iter().map(|(name, _)| name.as_str()).collect();
        put("interfaces", string(names.join(",")));
    }
    if let Some(cpu) = first(groups, "processors") {
        let models: Vec<Value> = cpu("models")
            .lines()
            .filter(|line| !line.is_empty())
            .map(string)
            .collect();
        put(
            "processors",
            hash(vec![
                ("count", integer(&cpu("count"))),
                ("isa", string(cpu("isa"))),
                ("models", Value::Array(models)),
                ("physicalcount", integer(&cpu("physicalcount"))),
            ]),
        );
        put("processorcount", integer(&cpu("count")));
        put("physicalprocessorcount", integer(&cpu("physicalcount")));
    }
    if let Some(memory) = first(groups, "memory") {
        let system = memory_of(&memory("total_bytes"), &memory("available_bytes"));
        let swap = memory_of(&memory("swap_total_bytes"), &memory("swap_free_bytes"));
        if let Ok(total) = memory("total_bytes").parse::<i64>() {
            put("memorysize_mb", Value::Float(total as f64 / 1_048_576.0));
        }
        put("memory", hash(vec![("swap", swap), ("system", system)]));
    }
    if let Some(identity) = first(groups, "identity") {
        put(
            "identity",
            hash(vec![
                ("gid", integer(&identity("gid"))),
                ("group", string(identity("group"))),
                (
                    "privileged",
                    Value::Boolean(identity("privileged") == "true"),
                ),
                ("uid", integer(&identity("uid"))),
                ("user", string(identity("user"))),
            ]),
        );
        put("id", string(identity("user")));
        put("gid", string(identity("group")));
    }
    if let Some(virt) = first(groups, "virtual") {
        put("virtual", string(virt("virtual")));
        put("is_virtual", Value::Boolean(virt("is_virtual") == "true"));
    }
    if let Some(path) = first(groups, "path") {
        put("path", string(path("path")));
    }
    if let Some(zone) = first(groups, "timezone") {
        put("timezone", string(zone("timezone")));
    }
    for (group, records) in groups {
        if FACTER_GROUPS.contains(&group.as_str()) {
            continue;
        }
        let records = records
            .iter()
            .map(|record| {
                Value::Hash(
                    record
                        .iter()
                        .map(|(key, value)| (key.clone(), Value::String(value.clone())))
                        .collect(),
                )
            })
            .collect();
        facts.push((group.clone(), Value::Array(records)));
    }
    facts.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Hash(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pairs: &[(&str, &str)]) -> Record {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn at<'v>(value: &'v Value, path: &[&str]) -> &'v Value {
        path.iter().fold(value, |value, key| match value {
            Value::Hash(entries) => entries
                .iter()
                .find(|(name, _)| name == key)
                .map_or(&Value::Undef, |(_, value)| value),
            _ => &Value::Undef,
        })
    }

    #[test]
    fn flat_records_become_facter_s_structure_and_legacy_facts() {
        let mut groups = BTreeMap::new();
        groups.insert(
            "os".to_owned(),
            vec![record(&[
                ("family", "debian"),
                ("name", "debian"),
                ("release", "12"),
                ("version", "12.5"),
                ("codename", "bookworm"),
                ("architecture", "x86_64"),
                ("kernel", "6.1.0-18-amd64"),
            ])],
        );
        groups.insert(
            "networking".to_owned(),
            vec![record(&[
                ("hostname", "web1"),
                ("domain", "example.com"),
                ("fqdn", "web1.example.com"),
                ("primary", "eth0"),
                ("ip", "192.168.0.17"),
                ("mtu", "1500"),
            ])],
        );
        groups.insert(
            "interface".to_owned(),
            vec![record(&[
                ("name", "eth0"),
                ("ip", "192.168.0.17"),
                ("netmask", "255.255.255.0"),
                ("network", "192.168.0.0"),
                ("mtu", "1500"),
            ])],
        );
        groups.insert(
            "memory".to_owned(),
            vec![record(&[
                ("total_bytes", "2147483648"),
                ("available_bytes", "1073741824"),
            ])],
        );
        groups.insert(
            "package".to_owned(),
            vec![record(&[("name", "bash"), ("version", "5.2")])],
        );
        let facts = facts_value(&groups);
        assert_eq!(at(&facts, &["os", "family"]), &string("Debian"));
        assert_eq!(at(&facts, &["os", "name"]), &string("Debian"));
        assert_eq!(at(&facts, &["os", "release", "full"]), &string("12.5"));
        assert_eq!(at(&facts, &["os", "release", "major"]), &string("12"));
        assert_eq!(at(&facts, &["os", "release", "minor"]), &string("5"));
        assert_eq!(at(&facts, &["os", "architecture"]), &string("amd64"));
        assert_eq!(at(&facts, &["os", "hardware"]), &string("x86_64"));
        assert_eq!(at(&facts, &["kernel"]), &string("Linux"));
        assert_eq!(at(&facts, &["kernelversion"]), &string("6.1.0"));
        assert_eq!(at(&facts, &["kernelmajversion"]), &string("6.1"));
        assert_eq!(at(&facts, &["osfamily"]), &string("Debian"));
        assert_eq!(
            at(&facts, &["networking", "fqdn"]),
            &string("web1.example.com")
        );
        assert_eq!(at(&facts, &["networking", "mtu"]), &Value::Integer(1500));
        assert_eq!(
            at(&facts, &["networking", "interfaces", "eth0", "netmask"]),
            &string("255.255.255.0")
        );
        assert_eq!(at(&facts, &["ipaddress"]), &string("192.168.0.17"));
        assert_eq!(
            at(&facts, &["memory", "system", "total_bytes"]),
            &Value::Integer(2_147_483_648)
        );
        assert_eq!(
            at(&facts, &["memory", "system", "used"]),
            &string("1.00 GiB")
        );
        assert_eq!(
            at(&facts, &["memory", "system", "capacity"]),
            &string("50.00%")
        );
        let Value::Array(packages) = at(&facts, &["package"]) else {
            panic!("package stays a list of records");
        };
        assert_eq!(at(&packages[0], &["name"]), &string("bash"));
    }
}
