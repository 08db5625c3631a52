//! What the `apt` and `dpkg` plugins share: Puppet's `package` type (its schema and
//! checks), the state of the dpkg database read once for every package of a run
//! (`dpkg-query`), and the plan from that state. A library of the guest workspace, not
//! a plugin.
//!
//! Every name and version a manifest gives reaches a command line, so both follow
//! Debian's grammar before anything runs (a name never starts with `-`, so it can never
//! be taken for an option), and the policy's argument patterns check each launch again.

use std::collections::HashMap;
use wconverge_sdk::process::Command;
use wconverge_sdk::{
    Attribute, Change, DataType, Error, PathAccess, Resource, Result, State, TypeSchema,
};

/// dpkg-query, which reads the package database.
pub const DPKG_QUERY: &str = "/usr/bin/dpkg-query";

/// The PATH dpkg, apt-get and maintainer scripts run with: the system's directories,
/// which only root may write.
pub const SYSTEM_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// The format `dpkg-query -W` prints each package in: name, version, status.
pub const QUERY_FORMAT: &str = "${Package}\t${Version}\t${db:Status-Abbrev}\n";

/// The `package` type, with what `provider_doc` says of the provider. A provider that
/// installs local files (`dpkg`) reads its `source` where no one else can swap it (the
/// host requires every directory on the way to be root's), and reads one state at a
/// time (a batch gets no directory); the others read their states in one batch.
pub fn schema(provider_doc: &str, local_files: bool) -> TypeSchema {
    let schema = TypeSchema::new(
        "package",
        &format!(
            "A Debian package: installed (at a version, or the latest), removed or purged. \
             {provider_doc}"
        ),
    );
    // dpkg's database: any package installed, removed or changed rewrites it.
    let schema = schema.watches("/var/lib/dpkg/status");
    let schema = if local_files {
        schema
    } else {
        schema.batch_state()
    };
    let source = Attribute::new(
        "source",
        DataType::String,
        "A `.deb` file to install from (the `dpkg` provider): root's, in a directory only \
         root can write.",
    )
    .parameter()
    .refers_to("file");
    let source = if local_files {
        source.path_access(PathAccess::ReadPrivate)
    } else {
        source
    };
    schema
        .refreshable()
        .attribute(
            Attribute::new(
                "name",
                DataType::String,
                "The package's name, as Debian writes it (`nginx`, `libssl3`).",
            )
            .namevar(),
        )
        .attribute(
            Attribute::new(
                "ensure",
                DataType::String,
                "`present` (or `installed`): installed, any version; `latest`: the newest \
             version available; a version (`1.24.0-1`): that one; `absent`: removed, its \
             configuration kept; `purged`: removed with its configuration.",
            )
            .default("present"),
        )
        .attribute(source)
        .attribute(
            Attribute::new(
                "install_options",
                DataType::Array(Box::new(DataType::String)),
                "Options for the installer; `--no-install-recommends` only (each option of a \
             root program is a capability the policy grants by name).",
            )
            .parameter(),
        )
        .attribute(
            Attribute::new(
                "reinstall_on_refresh",
                DataType::Boolean,
                "Reinstall the package when a resource it subscribes to changes. Default: \
             false (a refresh does nothing).",
            )
            .parameter(),
        )
        .attribute(
            Attribute::new(
                "available",
                DataType::String,
                "The version that `latest` (or `source`) would install.",
            )
            .read_only(),
        )
        .attribute(
            Attribute::new(
                "status",
                DataType::String,
                "What dpkg says of it (`installed`, `config-files`, `half-installed`...).",
            )
            .read_only(),
        )
}

/// Whether `name` is a Debian package name: lowercase letters, digits, `+`, `-` and `.`,
/// at least two, starting with a letter or digit (Debian Policy 5.6.1). An architecture
/// qualifier (`libc6:i386`) is allowed.
pub fn is_package_name(name: &str) -> bool {
    let (name, arch) = match name.split_once(':') {
        Some((name, arch)) => (name, Some(arch)),
        None => (name, None),
    };
    name.len() >= 2
        && name.len() <= 128
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b))
        // apt-get reads a trailing `-` as "remove" when no package has the name.
        && !name.ends_with('-')
        && arch.is_none_or(|arch| {
            !arch.is_empty()
                && arch.len() <= 32
                && arch
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// Whether `version` is a Debian version: `[epoch:]upstream[-revision]`, starting with a
/// digit, of letters, digits and `.+~:-` (Debian Policy 5.6.12).
pub fn is_version(version: &str) -> bool {
    version.len() <= 128
        && version.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".+~:-".contains(&b))
}

/// What `ensure` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    Present,
    Latest,
    Version(String),
    Absent,
    Purged,
}

impl Wanted {
    pub fn of(resource: &Resource) -> Result<Wanted> {
        match resource.get_str("ensure").unwrap_or("present") {
            "present" | "installed" => Ok(Wanted::Present),
            "latest" => Ok(Wanted::Latest),
            "absent" => Ok(Wanted::Absent),
            "purged" => Ok(Wanted::Purged),
            version if is_version(version) => Ok(Wanted::Version(version.to_owned())),
            other => Err(Error::new(format!(
                "ensure `{other}` is neither present, installed, latest, absent, purged nor a \
                 Debian version (like '1.24.0-1')"
            ))),
        }
    }
}

/// The install options the policy's built-in patterns grant.
pub const INSTALL_OPTIONS: [&str; 1] = ["--no-install-recommends"];

/// Problems the schema cannot express.
pub fn validate(resource: &Resource) -> Vec<String> {
    let mut problems = Vec::new();
    let name = resource.get_str("name").unwrap_or_default();
    if !is_package_name(name) {
        problems.push(format!(
            "`{name}` is not a Debian package name (lowercase letters, digits, `+`, `-` and \
             `.`, starting with a letter or digit)"
        ));
    }
    if let Err(error) = Wanted::of(resource) {
        problems.push(error.message().to_owned());
    }
    for option in options(resource) {
        if !INSTALL_OPTIONS.contains(&option.as_str()) {
            problems.push(format!(
                "install option `{option}` is not one wconverge passes; it passes {} (an \
                 option of a program that runs as root is granted by the policy, one by one)",
                INSTALL_OPTIONS.join(", ")
            ));
        }
    }
    problems
}

/// The resource's `install_options`.
pub fn options(resource: &Resource) -> Vec<String> {
    resource.get_strings("install_options").unwrap_or_default()
}

/// One package as the dpkg database records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub version: String,
    /// dpkg's word for its state: `installed`, `config-files`, `half-installed`...
    pub status: &'static str,
}

impl Record {
    /// Installed and configured (or only waiting for triggers).
    pub fn installed(&self) -> bool {
        matches!(
            self.status,
            "installed" | "triggers-awaited" | "triggers-pending"
        )
    }
}

/// Every package of the dpkg database, from one run of `dpkg-query`.
pub fn database() -> Result<HashMap<String, Record>> {
    let output = Command::new(DPKG_QUERY)
        .args(["-W", "-f", QUERY_FORMAT])
        .run()?;
    // dpkg-query exits 1 when a name matches nothing; with no names it lists everything.
    if !output.success() {
        return Err(Error::new(format!(
            "dpkg-query failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(parse_database(&String::from_utf8_lossy(&output.stdout)))
}

/// Parses `dpkg-query -W -f QUERY_FORMAT`. Of a name listed for several architectures,
/// the installed one wins.
pub fn parse_database(text: &str) -> HashMap<String, Record> {
    let mut packages: HashMap<String, Record> = HashMap::new();
    for line in text.lines() {
        let mut fields = line.split('\t');
        let (Some(name), Some(version), Some(abbrev)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let status = match abbrev.as_bytes().get(1) {
            Some(b'i') => "installed",
            Some(b'c') => "config-files",
            Some(b'n') => "not-installed",
            Some(b'H') => "half-installed",
            Some(b'U') => "unpacked",
            Some(b'F') => "half-configured",
            Some(b'W') => "triggers-awaited",
            Some(b't') => "triggers-pending",
            _ => "unknown",
        };
        let record = Record {
            version: version.to_owned(),
            status,
        };
        match packages.get(name) {
            Some(existing) if existing.installed() => {}
            _ => {
                packages.insert(name.to_owned(), record);
            }
        }
    }
    packages
}

/// The state of a package: `ensure` is its installed version, or `absent` (nothing or
/// only its configuration left) or `purged` (nothing at all).
pub fn state_of(name: &str, database: &HashMap<String, Record>) -> State {
    let bare = name.split(':').next().unwrap_or(name);
    match database.get(name).or_else(|| database.get(bare)) {
        Some(record) if record.status == "not-installed" => State::new()
            .with("ensure", "purged")
            .with("status", "not-installed"),
        Some(record) if record.status == "config-files" => State::new()
            .with("ensure", "absent")
            .with("status", record.status),
        Some(record) => State::new()
            .with("ensure", record.version.as_str())
            .with("status", record.status),
        None => State::new()
            .with("ensure", "purged")
            .with("status", "not-installed"),
    }
}

/// What converging a package takes, given its state and, for `latest`, the newest
/// version available (`None`: unknown).
pub fn plan(resource: &Resource, current: &State, latest: Option<&str>) -> Result<Vec<Change>> {
    let wanted = Wanted::of(resource)?;
    let ensure = current.get_str("ensure").unwrap_or("purged");
    let status = current.get_str("status").unwrap_or("not-installed");
    let installed = !matches!(ensure, "absent" | "purged")
        && matches!(
            status,
            "installed" | "triggers-awaited" | "triggers-pending"
        );
    let present = !matches!(ensure, "absent" | "purged");
    let change = |desired: &str, message: String| {
        Ok(vec![Change::new(
            "ensure",
            Some(ensure.into()),
            Some(desired.into()),
            message,
        )])
    };
    match wanted {
        Wanted::Present if installed => Ok(vec![]),
        Wanted::Present => change("present", format!("installed (it was {ensure})")),
        Wanted::Latest => match latest {
            Some(latest) if installed && latest == ensure => Ok(vec![]),
            Some(latest) if installed => {
                change(latest, format!("upgraded from {ensure} to {latest}"))
            }
            Some(latest) => change(latest, format!("installed {latest} (it was {ensure})")),
            None => Err(Error::new(format!(
                "no version of `{}` is available to install",
                resource.get_str("name").unwrap_or_default()
            ))),
        },
        Wanted::Version(version) if installed && version == ensure => Ok(vec![]),
        Wanted::Version(version) => change(
            &version,
            if installed {
                format!("changed from {ensure} to {version}")
            } else {
                format!("installed {version} (it was {ensure})")
            },
        ),
        Wanted::Absent if !present => Ok(vec![]),
        Wanted::Absent => change("absent", format!("removed {ensure}")),
        Wanted::Purged if ensure == "purged" => Ok(vec![]),
        Wanted::Purged => change("purged", format!("purged (it was {ensure})")),
    }
}

/// A launch's failure as an error, with the end of what it said.
pub fn failed(what: &str, output: &wconverge_sdk::process::Output) -> Error {
    let said = String::from_utf8_lossy(&output.stderr);
    let said = said.trim();
    let tail: String = said
        .lines()
        .rev()
        .take(5)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    Error::new(format!("{what} failed ({:?}): {tail}", output.status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wconverge_sdk::Value;

    fn package(name: &str, ensure: &str) -> Resource {
        Resource::new("package", name)
            .with("name", name)
            .with("ensure", ensure)
    }

    #[test]
    fn names_and_versions_follow_debian_grammar() {
        for good in ["nginx", "libssl3", "g++", "libc6:i386", "python3.11"] {
            assert!(is_package_name(good), "{good}");
        }
        for bad in [
            "-oAPT::Update::Pre-Invoke=x",
            "Nginx",
            "a",
            "a b",
            "x;y",
            "",
            "x:",
        ] {
            assert!(!is_package_name(bad), "{bad}");
        }
        for good in ["1.0", "1:2.3-4", "2.0~rc1+dfsg-1"] {
            assert!(is_version(good), "{good}");
        }
        for bad in ["-1", "v1", "1 2", "1;2"] {
            assert!(!is_version(bad), "{bad}");
        }
    }

    #[test]
    fn a_hostile_name_or_option_is_refused_before_anything_runs() {
        let problems = validate(&package("-oAPT::Update::Pre-Invoke=touch /x", "present"));
        assert_eq!(problems.len(), 1, "{problems:?}");
        let problems = validate(
            &package("nginx", "present")
                .with("install_options", Value::Array(vec!["-oDebug=1".into()])),
        );
        assert!(
            problems[0].contains("is not one wconverge passes"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_database_is_parsed_once_and_installed_wins() {
        let database = parse_database(
            "nginx\t1.22.1-9\tii \nold\t1.0\trc \nlibc6\t2.36-9\tii \nlibc6\t2.36-9\tun \n",
        );
        assert_eq!(
            state_of("nginx", &database).get_str("ensure"),
            Some("1.22.1-9")
        );
        assert_eq!(state_of("old", &database).get_str("ensure"), Some("absent"));
        assert_eq!(
            state_of("libc6", &database).get_str("status"),
            Some("installed")
        );
        assert_eq!(
            state_of("none", &database).get_str("ensure"),
            Some("purged")
        );
    }

    #[test]
    fn plans_follow_puppet() {
        let installed = State::new()
            .with("ensure", "1.0-1")
            .with("status", "installed");
        let purged = State::new()
            .with("ensure", "purged")
            .with("status", "not-installed");
        let config = State::new()
            .with("ensure", "absent")
            .with("status", "config-files");
        assert!(
            plan(&package("x1", "present"), &installed, None)
                .expect("plan")
                .is_empty()
        );
        assert_eq!(
            plan(&package("x1", "installed"), &purged, None)
                .expect("plan")
                .len(),
            1
        );
        assert!(
            plan(&package("x1", "latest"), &installed, Some("1.0-1"))
                .expect("plan")
                .is_empty()
        );
        let upgrade = plan(&package("x1", "latest"), &installed, Some("2.0-1")).expect("plan");
        assert_eq!(upgrade[0].message, "upgraded from 1.0-1 to 2.0-1");
        assert_eq!(
            plan(&package("x1", "2.0-1"), &installed, None)
                .expect("plan")
                .len(),
            1
        );
        assert!(
            plan(&package("x1", "absent"), &config, None)
                .expect("plan")
                .is_empty()
        );
        assert_eq!(
            plan(&package("x1", "purged"), &config, None)
                .expect("plan")
                .len(),
            1
        );
        assert!(
            plan(&package("x1", "purged"), &purged, None)
                .expect("plan")
                .is_empty()
        );
        assert_eq!(
            plan(&package("x1", "absent"), &installed, None)
                .expect("plan")
                .len(),
            1
        );
    }
}
