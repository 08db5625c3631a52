//! The `os` facts: one record with the operating system's `family` (`debian`, `redhat`,
//! `suse`...), `name` and `release` from os-release (and Debian's point release,
//! `version`, from /etc/debian_version), the `architecture`, `kernel` and
//! `hostname` the host reports, and `init`, the service manager (`systemd`, `sysv`).

use wconverge_sdk_facts::{FactSource, Group, Machine, export_fact_source};

struct Os;

/// Where os-release lives; /etc/os-release is usually a link to the second.
const OS_RELEASE: [&str; 2] = ["/etc/os-release", "/usr/lib/os-release"];

impl FactSource for Os {
    fn groups() -> Vec<String> {
        vec!["os".to_owned()]
    }

    fn gather(machine: Machine) -> Result<Vec<Group>, String> {
        let text = OS_RELEASE
            .iter()
            .find_map(|path| std::fs::read_to_string(resolved(path)).ok())
            .ok_or_else(|| format!("cannot read {}", OS_RELEASE.join(" or ")))?;
        Ok(vec![Group {
            name: "os".to_owned(),
            records: vec![record(&text, &machine)],
        }])
    }
}

/// Where a link at `path` leads, taken lexically: each granted directory is a sandbox of
/// its own, so the host refuses to follow `/etc/os-release -> ../usr/lib/os-release`
/// out of `/etc` (and warns of it); the plugin opens the target by its own path.
fn resolved(path: &str) -> String {
    let Ok(target) = std::fs::read_link(path) else {
        return path.to_owned();
    };
    let target = target.to_string_lossy();
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        path.split('/')
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .split_last()
            .map(|(_, dir)| dir.to_vec())
            .unwrap_or_default()
    };
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The values of os-release, unquoted.
fn fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| {
            let value = value.trim();
            let unquoted = value
                .strip_prefix('"')
                .and_then(|value| value.strip_suffix('"'))
                .or_else(|| {
                    value
                        .strip_prefix('\'')
                        .and_then(|value| value.strip_suffix('\''))
                })
                .unwrap_or(value);
            (key.trim().to_owned(), unquoted.replace("\\\"", "\""))
        })
        .collect()
}

/// Puppet's families, lowercase: the distribution or one it is like.
fn family(id: &str, like: &str) -> String {
    let names: Vec<&str> = std::iter::once(id).chain(like.split_whitespace()).collect();
    for (family, members) in [
        ("debian", &["debian", "ubuntu"][..]),
        ("redhat", &["rhel", "fedora", "centos"][..]),
        ("suse", &["suse", "opensuse", "sles"][..]),
        ("arch", &["arch"][..]),
        ("alpine", &["alpine"][..]),
    ] {
        if names.iter().any(|name| members.contains(name)) {
            return family.to_owned();
        }
    }
    id.to_owned()
}

fn record(text: &str, machine: &Machine) -> Vec<(String, String)> {
    let fields = fields(text);
    let get = |key: &str| {
        fields
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.clone())
            .unwrap_or_default()
    };
    let id = get("ID").to_ascii_lowercase();
    vec![
        (
            "family".to_owned(),
            family(&id, &get("ID_LIKE").to_ascii_lowercase()),
        ),
        ("name".to_owned(), id),
        ("release".to_owned(), get("VERSION_ID")),
        // Debian's point release (`12.5`), which os-release leaves out.
        (
            "version".to_owned(),
            std::fs::read_to_string("/etc/debian_version")
                .map(|text| text.trim().to_owned())
                .unwrap_or_default(),
        ),
        ("codename".to_owned(), get("VERSION_CODENAME")),
        ("architecture".to_owned(), machine.architecture.clone()),
        ("kernel".to_owned(), machine.kernel.clone()),
        ("hostname".to_owned(), machine.hostname.clone()),
        ("init".to_owned(), init().to_owned()),
    ]
}

/// The service manager: `systemd` where it runs as PID 1 (it makes
/// `/run/systemd/system`, which is how sd_booted() tells), `sysv` otherwise.
fn init() -> &'static str {
    if std::fs::metadata("/run/systemd/system").is_ok_and(|stat| stat.is_dir()) {
        "systemd"
    } else {
        "sysv"
    }
}

export_fact_source!(Os);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_link_is_resolved_by_its_own_path() {
        let dir = std::env::temp_dir().join(format!("wcv-os-release-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).expect("dir");
        let link = dir.join("etc/os-release");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("../usr/lib/os-release", &link).expect("link");
        let link = link.to_str().expect("utf-8");
        assert_eq!(
            resolved(link),
            format!("{}/usr/lib/os-release", dir.display())
        );
        assert_eq!(resolved("/no/such/file"), "/no/such/file");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn ubuntu_is_of_the_debian_family() {
        let machine = Machine {
            os: "linux".to_owned(),
            architecture: "x86_64".to_owned(),
            kernel: "6.1.0".to_owned(),
            hostname: "web1".to_owned(),
        };
        let text = "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\nVERSION_CODENAME=noble\n";
        let record = record(text, &machine);
        assert_eq!(record[0], ("family".to_owned(), "debian".to_owned()));
        assert_eq!(record[1], ("name".to_owned(), "ubuntu".to_owned()));
        assert_eq!(record[2], ("release".to_owned(), "24.04".to_owned()));
        assert_eq!(record[3].0, "version");
        assert_eq!(family("centos", "rhel fedora"), "redhat");
        assert_eq!(family("nixos", ""), "nixos");
    }
}
