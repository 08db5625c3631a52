//! The Debian package of this very binary (`cargo xtask deb` builds the release binary
//! and asks it, through the hidden `wconverge __package-deb --out DIR`): the binary
//! (stripped of debug information when `strip` is there), a commented config file and
//! site manifest (conffiles), the agent's systemd units (a service that runs the agent,
//! a timer that runs it `--once`), man pages (one per command) and shell completions
//! generated from the command line's definition. Built with `dpkg-deb`. Installing starts nothing; removing
//! stops and disables the units first.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

const CONFIG: &str = r#"# wconverge's config file (TOML). Every key is optional.
#
# The store nodes share for exported resources, facts and reports (default: an SQLite
# file in /var/lib/wconverge):
# store = "postgres://wconverge@db.example.org/fleet?sslrootcert=/etc/wconverge/ca.pem"
# store_password_file = "/etc/wconverge/store.password"
#
# How long the store keeps each node's reports, in days (default 14):
# keep_reports = 14
#
# How often `wconverge agent` (wconverge-agent.service) applies the site manifest, and
# the most it waits at random before a run (between the runs, the service corrects
# drift as it happens: `--watch`):
# runinterval = "30m"
# splaylimit = "5m"
"#;

const SITE: &str = r#"# What wconverge-agent.service and wconverge-agent.timer apply: manifests in
# Puppet's language (docs: /usr/share/doc/wconverge). For example:
#
# file { '/etc/motd':
#   ensure  => file,
#   content => "Managed by wconverge\n",
# }
"#;

const SERVICE: &str = "[Unit]
Description=wconverge agent: keeps this machine converged to /etc/wconverge/manifests/site.pp
Documentation=man:wconverge(1)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart=/usr/bin/wconverge agent --watch /etc/wconverge/manifests/site.pp
ExecReload=/bin/kill -HUP $MAINPID
KillMode=mixed
TimeoutStopSec=30min
Restart=on-failure
RestartSec=30s

[Install]
WantedBy=multi-user.target
";

const ONCE: &str = "[Unit]
Description=wconverge: one run of the agent (started by wconverge-agent.timer)
Documentation=man:wconverge(1)
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=/usr/bin/wconverge agent --once /etc/wconverge/manifests/site.pp
SuccessExitStatus=2
";

const TIMER: &str = "[Unit]
Description=wconverge: a run of the agent every 30 minutes
Documentation=man:wconverge(1)

[Timer]
OnBootSec=5min
OnUnitActiveSec=30min
RandomizedDelaySec=5min
Unit=wconverge-agent-once.service

[Install]
WantedBy=timers.target
";

const UNITS: [&str; 3] = [
    "wconverge-agent.service",
    "wconverge-agent-once.service",
    "wconverge-agent.timer",
];

/// Builds the package into `out`; its path.
pub(crate) fn build(out: &Path, mut command: clap::Command) -> anyhow::Result<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    let architecture = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "i386",
        other => other,
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot make `{}`", out.display()))?;
    let name = format!("wconverge_{version}_{architecture}");
    let tree = tempfile::Builder::new()
        .prefix("wconverge-package-")
        .tempdir_in(out)
        .context("cannot make the package's tree")?;
    let root = tree.path();
    let file = |path: &str, text: &[u8], mode: u32| -> anyhow::Result<()> {
        let target = root.join(path);
        std::fs::create_dir_all(target.parent().expect("a parent"))?;
        std::fs::write(&target, text).with_context(|| format!("cannot write `{path}`"))?;
        std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        Ok(())
    };
    // The binary, without its debug information (as dh_strip does).
    let binary = root.join("usr/bin/wconverge");
    std::fs::create_dir_all(binary.parent().expect("usr/bin"))?;
    std::fs::copy(std::env::current_exe()?, &binary).context("cannot copy the binary")?;
    let _ = Command::new("strip")
        .arg("--strip-debug")
        .arg(&binary)
        .status();
    std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    file("etc/wconverge/wconverge.conf", CONFIG.as_bytes(), 0o644)?;
    file("etc/wconverge/manifests/site.pp", SITE.as_bytes(), 0o644)?;
    for (unit, text) in UNITS.iter().zip([SERVICE, ONCE, TIMER]) {
        file(
            &format!("lib/systemd/system/{unit}"),
            text.as_bytes(),
            0o644,
        )?;
    }
    // The man pages (`wconverge.1` and one per command: `wconverge-apply.1`...),
    // compressed as Debian wants them, and the completions.
    let man = root.join("usr/share/man/man1");
    std::fs::create_dir_all(&man)?;
    clap_mangen::generate_to(command.clone(), &man).context("cannot render the man pages")?;
    let pages: Vec<PathBuf> = std::fs::read_dir(&man)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    let status = Command::new("gzip")
        .args(["-9n", "-f"])
        .args(&pages)
        .status()
        .context("gzip")?;
    if !status.success() {
        bail!("gzip could not compress the man pages");
    }
    for (shell, path) in [
        (
            clap_complete::Shell::Bash,
            "usr/share/bash-completion/completions/wconverge",
        ),
        (
            clap_complete::Shell::Zsh,
            "usr/share/zsh/vendor-completions/_wconverge",
        ),
        (
            clap_complete::Shell::Fish,
            "usr/share/fish/vendor_completions.d/wconverge.fish",
        ),
    ] {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut command, "wconverge", &mut script);
        file(path, &script, 0o644)?;
    }
    let control = format!(
        "Package: wconverge\nVersion: {version}\nArchitecture: {architecture}\nMaintainer: wconverge \
         developers <wconverge@localhost>\nDepends: libc6\nSection: admin\nPriority: optional\n\
         Description: configuration convergence with sandboxed WebAssembly providers\n \
         Declare a machine's state in Puppet's language; wconverge orders the resources,\n \
         evaluates their guards and converges the machine, each provider a WebAssembly\n \
         component limited to what its policy grants.\n"
    );
    file("DEBIAN/control", control.as_bytes(), 0o644)?;
    file(
        "DEBIAN/conffiles",
        b"/etc/wconverge/wconverge.conf\n/etc/wconverge/manifests/site.pp\n",
        0o644,
    )?;
    let units = UNITS.join(" ");
    file(
        "DEBIAN/postinst",
        b"#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi\n",
        0o755,
    )?;
    file(
        "DEBIAN/prerm",
        format!(
            "#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then\n  systemctl stop {units} || true\n  \
             systemctl disable {units} || true\nfi\n"
        )
        .as_bytes(),
        0o755,
    )?;
    file(
        "DEBIAN/postrm",
        b"#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi\n\
          if [ \"$1\" = purge ]; then rm -rf /var/lib/wconverge /var/cache/wconverge; fi\n",
        0o755,
    )?;
    let package = out.join(format!("{name}.deb"));
    let built = Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zgzip", "-z6", "--build"])
        .arg(root)
        .arg(&package)
        .output()
        .context("dpkg-deb (Debian's dpkg) builds the package: install dpkg")?;
    if !built.status.success() {
        bail!(
            "dpkg-deb failed: {}",
            String::from_utf8_lossy(&built.stderr).trim()
        );
    }
    Ok(package)
}
