//! The facts Facter calls `networking`, `processors`, `memory`, `virtual` and
//! `timezone`, as flat records (the host builds Facter's structure for `$facts`):
//!
//! - `networking`: one record, `hostname`, `domain`, `fqdn`, `primary` (the interface of
//!   the default route), and that interface's `ip`, `ip6`, `mac`;
//! - `interface`: one record per network interface, `name`, `ip`, `netmask`, `network`,
//!   `ip6`, `mac`, `mtu`;
//! - `processors`: `count`, `physicalcount`, `models` (joined by newlines), `isa`;
//! - `memory`: `total_bytes`, `available_bytes`, `swap_total_bytes`, `swap_free_bytes`;
//! - `virtual`: `virtual` (`physical`, `kvm`, `docker`...) and `is_virtual`;
//! - `timezone`: `timezone` (the zone's abbreviation, `UTC`, `CET`) and `zone`
//!   (`Europe/Paris`).
//!
//! Everything is read from `/proc`, `/sys` and `/etc` (and the zone file); nothing is
//! launched. A file that is missing leaves its values empty rather than failing.

use std::collections::BTreeMap;
use wconverge_sdk_facts::{FactSource, Group, Machine, export_fact_source};

struct System;

/// No file this plugin reads is longer, on any machine it runs on.
const MAX_FILE: u64 = 4 << 20;

type Record = Vec<(String, String)>;

impl FactSource for System {
    fn groups() -> Vec<String> {
        [
            "networking",
            "interface",
            "processors",
            "memory",
            "virtual",
            "timezone",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn gather(machine: Machine) -> Result<Vec<Group>, String> {
        let interfaces = interfaces();
        let group = |name: &str, records: Vec<Record>| Group {
            name: name.to_owned(),
            records,
        };
        Ok(vec![
            group("networking", vec![networking(&machine, &interfaces)]),
            group(
                "interface",
                interfaces.values().map(Interface::record).collect(),
            ),
            group("processors", vec![processors(&machine)]),
            group("memory", vec![memory()]),
            group("virtual", vec![virtualization()]),
            group("timezone", vec![timezone()]),
        ])
    }
}

/// A file's text, or empty when it cannot be read.
fn read(path: &str) -> String {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return String::new();
    };
    let mut text = String::new();
    let _ = file.take(MAX_FILE).read_to_string(&mut text);
    text
}

fn pair(key: &str, value: impl Into<String>) -> (String, String) {
    (key.to_owned(), value.into())
}

#[derive(Default)]
struct Interface {
    name: String,
    ip: String,
    netmask: String,
    network: String,
    ip6: String,
    mac: String,
    mtu: String,
}

impl Interface {
    fn record(&self) -> Record {
        vec![
            pair("name", &self.name),
            pair("ip", &self.ip),
            pair("netmask", &self.netmask),
            pair("network", &self.network),
            pair("ip6", &self.ip6),
            pair("mac", &self.mac),
            pair("mtu", &self.mtu),
        ]
    }
}

/// The interfaces of `/sys/class/net`, with their IPv4 addresses (the local addresses
/// of `/proc/net/fib_trie`, each on the interface whose route holds it), IPv6 addresses
/// (`/proc/net/if_inet6`), MAC and MTU.
fn interfaces() -> BTreeMap<String, Interface> {
    let mut interfaces: BTreeMap<String, Interface> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir("/sys/class/net") {
        for entry in entries.flatten().take(4096) {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let base = format!("/sys/class/net/{name}");
            let mac = read(&format!("{base}/address")).trim().to_owned();
            interfaces.insert(
                name.clone(),
                Interface {
                    name,
                    mac: if mac == "00:00:00:00:00:00" {
                        String::new()
                    } else {
                        mac
                    },
                    mtu: read(&format!("{base}/mtu")).trim().to_owned(),
                    ..Interface::default()
                },
            );
        }
    }
    let routes = routes(&read("/proc/net/route"));
    for address in local_addresses(&read("/proc/net/fib_trie")) {
        let owner = if address >> 24 == 127 {
            interfaces.contains_key("lo").then(|| "lo".to_owned())
        } else {
            routes
                .iter()
                .filter(|route| route.mask != 0 && address & route.mask == route.network)
                .max_by_key(|route| route.mask.count_ones())
                .map(|route| route.interface.clone())
        };
        let Some(owner) = owner else { continue };
        let interface = interfaces
            .entry(owner.clone())
            .or_insert_with(|| Interface {
                name: owner.clone(),
                ..Interface::default()
            });
        if interface.ip.is_empty() {
            interface.ip = dotted(address);
            let mask = if address >> 24 == 127 {
                0xff00_0000
            } else {
                routes
                    .iter()
                    .filter(|route| route.interface == owner && route.mask != 0)
                    .filter(|route| address & route.mask == route.network)
                    .map(|route| route.mask)
                    .max_by_key(|mask| mask.count_ones())
                    .unwrap_or(0)
            };
            interface.netmask = dotted(mask);
            interface.network = dotted(address & mask);
        }
    }
    for line in read("/proc/net/if_inet6").lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [hex, _, _, scope, _, name] = fields.as_slice() else {
            continue;
        };
        // Global addresses first: a link-local one only when there is no other.
        let Some(interface) = interfaces.get_mut(*name) else {
            continue;
        };
        if hex.len() == 32 && (interface.ip6.is_empty() || *scope == "00") {
            let groups: Vec<String> = (0..8)
                .map(|group| {
                    let part = &hex[group * 4..group * 4 + 4];
                    u16::from_str_radix(part, 16)
                        .map_or_else(|_| part.to_owned(), |v| format!("{v:x}"))
                })
                .collect();
            let global = *scope == "00";
            if interface.ip6.is_empty() || global {
                interface.ip6 = compress_ipv6(&groups);
            }
        }
    }
    interfaces
}

struct Route {
    interface: String,
    network: u32,
    mask: u32,
    default: bool,
}

/// `/proc/net/route`: addresses in the kernel's byte order, as hex.
fn routes(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // The bytes of the address in network order, printed as a little-endian
            // number (the machines wconverge runs on are little-endian).
            let parse = |field: &str| u32::from_str_radix(field, 16).ok().map(u32::swap_bytes);
            let network = parse(fields.get(1)?)?;
            let mask = parse(fields.get(7)?)?;
            Some(Route {
                interface: (*fields.first()?).to_owned(),
                network,
                mask,
                default: network == 0 && mask == 0,
            })
        })
        .collect()
}

/// The addresses `/proc/net/fib_trie` marks `/32 host LOCAL`: the machine's own.
fn local_addresses(text: &str) -> Vec<u32> {
    let mut addresses = Vec::new();
    let mut last: Option<u32> = None;
    for line in text.lines() {
        let line = line.trim_start_matches([' ', '|', '+', '-']).trim();
        if line.contains("/32 host LOCAL") {
            if let Some(address) = last
                && !addresses.contains(&address)
            {
                addresses.push(address);
            }
        } else if let Some(address) = parse_dotted(line) {
            last = Some(address);
        }
    }
    addresses
}

fn parse_dotted(text: &str) -> Option<u32> {
    let parts: Vec<u8> = text
        .split('.')
        .map(|part| part.parse::<u8>().ok())
        .collect::<Option<_>>()?;
    let [a, b, c, d] = parts.as_slice() else {
        return None;
    };
    Some(u32::from_be_bytes([*a, *b, *c, *d]))
}

fn dotted(address: u32) -> String {
    let [a, b, c, d] = address.to_be_bytes();
    format!("{a}.{b}.{c}.{d}")
}

/// The longest run of zero groups written `::`, as RFC 5952 says.
fn compress_ipv6(groups: &[String]) -> String {
    let (mut best, mut best_len, mut run, mut run_len) = (0, 0, 0, 0);
    for (idx, group) in groups.iter().enumerate() {
        if group == "0" {
            if run_len == 0 {
                run = idx;
            }
            run_len += 1;
            if run_len > best_len {
                best = run;
                best_len = run_len;
            }
        } else {
            run_len = 0;
        }
    }
    if best_len < 2 {
        return groups.join(":");
    }
    format!(
        "{}::{}",
        groups[..best].join(":"),
        groups[best + best_len..].join(":")
    )
}

/// The host's name, its domain (the host name's own, else the first name with a dot
/// that `/etc/hosts` gives it, else `/etc/resolv.conf`'s `domain` or `search`), and the
/// primary interface (the default route's) with its addresses.
fn networking(machine: &Machine, interfaces: &BTreeMap<String, Interface>) -> Record {
    let (hostname, mut domain) = match machine.hostname.split_once('.') {
        Some((host, domain)) => (host.to_owned(), domain.to_owned()),
        None => (machine.hostname.clone(), String::new()),
    };
    if domain.is_empty() {
        domain = domain_from_hosts(&read("/etc/hosts"), &hostname)
            .or_else(|| domain_from_resolv(&read("/etc/resolv.conf")))
            .unwrap_or_default();
    }
    let fqdn = if domain.is_empty() {
        hostname.clone()
    } else {
        format!("{hostname}.{domain}")
    };
    let primary = routes(&read("/proc/net/route"))
        .into_iter()
        .find(|route| route.default)
        .map(|route| route.interface)
        .unwrap_or_default();
    let chosen = interfaces.get(&primary);
    let field = |get: fn(&Interface) -> &String| chosen.map(get).cloned().unwrap_or_default();
    vec![
        pair("hostname", hostname),
        pair("domain", domain),
        pair("fqdn", fqdn),
        pair("primary", &primary),
        pair("ip", field(|i| &i.ip)),
        pair("netmask", field(|i| &i.netmask)),
        pair("network", field(|i| &i.network)),
        pair("ip6", field(|i| &i.ip6)),
        pair("mac", field(|i| &i.mac)),
        pair("mtu", field(|i| &i.mtu)),
    ]
}

fn domain_from_hosts(text: &str, hostname: &str) -> Option<String> {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let names: Vec<&str> = line.split_whitespace().skip(1).collect();
        if names
            .iter()
            .any(|name| *name == hostname || name.split('.').next() == Some(hostname))
            && let Some(full) = names
                .iter()
                .find(|name| name.starts_with(&format!("{hostname}.")))
        {
            return Some(full[hostname.len() + 1..].to_owned());
        }
    }
    None
}

fn domain_from_resolv(text: &str) -> Option<String> {
    let mut search = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("domain") => return words.next().map(str::to_owned),
            Some("search") if search.is_none() => search = words.next().map(str::to_owned),
            _ => {}
        }
    }
    search
}

/// `/proc/cpuinfo`: processors, distinct physical packages, model names.
fn processors(machine: &Machine) -> Record {
    let text = read("/proc/cpuinfo");
    let mut count = 0;
    let mut physical: Vec<&str> = Vec::new();
    let mut models: Vec<&str> = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "processor" => count += 1,
            "physical id" if !physical.contains(&value.trim()) => physical.push(value.trim()),
            "model name" | "cpu model" => models.push(value.trim()),
            _ => {}
        }
    }
    vec![
        pair("count", count.to_string()),
        pair(
            "physicalcount",
            physical.len().max(usize::from(count > 0)).to_string(),
        ),
        pair("models", models.join("\n")),
        pair("isa", machine.architecture.clone()),
    ]
}

/// `/proc/meminfo`, in bytes.
fn memory() -> Record {
    let text = read("/proc/meminfo");
    let get = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|value| {
                value
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| (kib * 1024).to_string())
            .unwrap_or_default()
    };
    vec![
        pair("total_bytes", get("MemTotal")),
        pair("available_bytes", get("MemAvailable")),
        pair("swap_total_bytes", get("SwapTotal")),
        pair("swap_free_bytes", get("SwapFree")),
    ]
}

/// What Facter's `virtual` says: a container first (its marker files, PID 1's cgroup),
/// then the hypervisor the firmware names, then `physical`.
fn virtualization() -> Record {
    let cgroup = read("/proc/1/cgroup");
    let container = read("/run/systemd/container");
    let virtual_ = if let Some(name) = container_name(container.trim()) {
        name
    } else if std::fs::metadata("/run/.containerenv").is_ok() {
        "podman"
    } else if cgroup.contains("/docker") {
        "docker"
    } else if cgroup.contains("/lxc") {
        "lxc"
    } else if cgroup.contains("/kubepods") {
        "docker"
    } else if std::fs::metadata("/proc/vz").is_ok() && std::fs::metadata("/proc/bc").is_err() {
        "openvz"
    } else {
        let product = format!(
            "{} {} {}",
            read("/sys/class/dmi/id/sys_vendor"),
            read("/sys/class/dmi/id/product_name"),
            read("/sys/class/dmi/id/bios_vendor")
        )
        .to_ascii_lowercase();
        let hypervisor = read("/proc/cpuinfo").lines().any(|line| {
            line.starts_with("flags") && line.split_whitespace().any(|f| f == "hypervisor")
        });
        if product.contains("vmware") {
            "vmware"
        } else if product.contains("virtualbox") || product.contains("innotek") {
            "virtualbox"
        } else if product.contains("microsoft") {
            "hyperv"
        } else if product.contains("xen") {
            "xenhvm"
        } else if product.contains("amazon ec2")
            || product.contains("kvm")
            || product.contains("qemu")
            || product.contains("google")
            || hypervisor
            || std::fs::metadata("/sys/hypervisor/type").is_ok_and(|m| m.len() > 0)
        {
            "kvm"
        } else {
            "physical"
        }
    };
    vec![
        pair("virtual", virtual_),
        pair("is_virtual", (virtual_ != "physical").to_string()),
    ]
}

/// Facter's name for the container manager that systemd names in
/// `/run/systemd/container` (what the manager put in PID 1's `container` variable).
fn container_name(manager: &str) -> Option<&'static str> {
    Some(match manager {
        "" => return None,
        "systemd-nspawn" => "systemd_nspawn",
        "docker" => "docker",
        "podman" => "podman",
        "lxc" | "lxc-libvirt" => "lxc",
        "openvz" => "openvz",
        "wsl" => "wsl",
        "rkt" => "rkt",
        // A manager Facter has no name for is still a container.
        _ => "container_other",
    })
}

/// The zone's name (`/etc/timezone`, else where `/etc/localtime` links to), and its
/// abbreviation from the zone file's POSIX rule (standard time: `CET` all year).
fn timezone() -> Record {
    let from_link = std::fs::read_link("/etc/localtime")
        .ok()
        .and_then(|target| {
            let target = target.to_string_lossy().into_owned();
            target
                .split_once("zoneinfo/")
                .map(|(_, zone)| zone.to_owned())
        });
    let zone = match read("/etc/timezone").trim() {
        "" => from_link.unwrap_or_default(),
        zone => zone.to_owned(),
    };
    let zone_file = if zone.is_empty() {
        String::new()
    } else {
        format!("/usr/share/zoneinfo/{zone}")
    };
    let abbreviation = std::fs::read(if zone_file.is_empty() {
        "/etc/localtime"
    } else {
        &zone_file
    })
    .ok()
    .and_then(|bytes| posix_abbreviation(&bytes))
    .unwrap_or_else(|| {
        if zone.is_empty() {
            "UTC".to_owned()
        } else {
            zone.clone()
        }
    });
    vec![pair("timezone", abbreviation), pair("zone", zone)]
}

/// The standard-time abbreviation of a TZif file's footer (`\nCET-1CEST,M3.5.0...\n`).
fn posix_abbreviation(bytes: &[u8]) -> Option<String> {
    if !bytes.starts_with(b"TZif") {
        return None;
    }
    let end = bytes.len().checked_sub(1)?;
    if bytes[end] != b'\n' {
        return None;
    }
    let start = bytes[..end].iter().rposition(|b| *b == b'\n')? + 1;
    let footer = std::str::from_utf8(&bytes[start..end]).ok()?;
    let abbreviation = if let Some(quoted) = footer.strip_prefix('<') {
        quoted.split('>').next()?.to_owned()
    } else {
        footer
            .chars()
            .take_while(char::is_ascii_alphabetic)
            .collect()
    };
    (!abbreviation.is_empty()).then_some(abbreviation)
}

export_fact_source!(System);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_managers_are_named_as_facter_names_them() {
        assert_eq!(container_name("systemd-nspawn"), Some("systemd_nspawn"));
        assert_eq!(container_name("lxc-libvirt"), Some("lxc"));
        assert_eq!(container_name("docker"), Some("docker"));
        assert_eq!(container_name("something-new"), Some("container_other"));
        assert_eq!(container_name(""), None);
    }

    #[test]
    fn routes_and_local_addresses_place_each_address_on_its_interface() {
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                     eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let routes = routes(route);
        assert!(routes[0].default);
        assert_eq!(dotted(routes[1].network), "192.168.0.0");
        assert_eq!(dotted(routes[1].mask), "255.255.255.0");
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 127.0.0.0/8 2 0 2\n        |-- 127.0.0.1\n           /32 host LOCAL\n     |-- 192.168.0.17\n        /32 host LOCAL\n";
        assert_eq!(
            local_addresses(trie)
                .into_iter()
                .map(dotted)
                .collect::<Vec<_>>(),
            ["127.0.0.1", "192.168.0.17"]
        );
    }

    #[test]
    fn ipv6_addresses_are_compressed_and_domains_found() {
        let groups: Vec<String> = ["fe80", "0", "0", "0", "1", "0", "0", "2"]
            .map(str::to_owned)
            .to_vec();
        assert_eq!(compress_ipv6(&groups), "fe80::1:0:0:2");
        assert_eq!(
            domain_from_hosts("127.0.1.1 web1.example.com web1\n", "web1").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            domain_from_resolv("nameserver 1.1.1.1\nsearch corp.example lab\n").as_deref(),
            Some("corp.example")
        );
    }

    #[test]
    fn the_zone_abbreviation_is_the_footer_s_standard_time() {
        let mut file = b"TZif2....".to_vec();
        file.extend_from_slice(b"\nCET-1CEST,M3.5.0,M10.5.0/3\n");
        assert_eq!(posix_abbreviation(&file).as_deref(), Some("CET"));
        let mut file = b"TZif2....".to_vec();
        file.extend_from_slice(b"\n<+03>-3\n");
        assert_eq!(posix_abbreviation(&file).as_deref(), Some("+03"));
    }
}
