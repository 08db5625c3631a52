//! A real PostgreSQL server for a test: `initdb` and `pg_ctl` from the machine's
//! installed server binaries, in a temporary directory, listening on a Unix socket
//! there (and on loopback, with TLS, when asked), stopped when the value is dropped.
//!
//! Without the server binaries a test fails saying how to install them; it is never
//! skipped. As root (as CI runs), the server runs as the `postgres` user (or `nobody`),
//! since PostgreSQL refuses to run as root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How long the server may take to start or stop.
const DEADLINE_SECONDS: &str = "60";

pub(crate) struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    /// The loopback port when listening with TLS.
    port: Option<u16>,
}

/// Certificates of a TLS server and a client it trusts (PEM files).
pub(crate) struct Tls {
    pub(crate) ca: PathBuf,
    pub(crate) client_cert: PathBuf,
    pub(crate) client_key: PathBuf,
    /// A certificate authority that signed nothing here.
    pub(crate) other_ca: PathBuf,
}

impl Postgres {
    /// A server on a Unix socket only.
    pub(crate) fn start() -> Postgres {
        let postgres = Postgres::init();
        postgres.run_server(&[]);
        postgres
    }

    /// A server on a Unix socket and on loopback; TCP connections must use TLS and
    /// present a client certificate the CA signed for user `wconverge`.
    pub(crate) fn start_tls() -> (Postgres, Tls) {
        let mut postgres = Postgres::init();
        let tls = postgres.certificates();
        postgres.listen_with_tls("127.0.0.1", "127.0.0.1/32", &tls.ca);
        (postgres, tls)
    }

    /// A server for a fleet of test hosts: on its Unix socket and on `address` (the
    /// host's end of their network), where every connection from `network` must use TLS
    /// and present a client certificate the CA signed for its role. Returns the CA and,
    /// for each of `nodes`, its certificate and key (PEM files).
    pub(crate) fn start_fleet(
        address: &str,
        network: &str,
        nodes: &[&str],
    ) -> (Postgres, PathBuf, Vec<(PathBuf, PathBuf)>) {
        let mut postgres = Postgres::init();
        let (ca, clients) = postgres.certificates_for(&format!("IP:{address}"), nodes);
        postgres.listen_with_tls(address, network, &ca);
        (postgres, ca, clients)
    }

    /// Starts the server on its socket and on a free port of `address`, where every
    /// connection from `network` must use TLS and a client certificate `ca` signed.
    fn listen_with_tls(&mut self, address: &str, network: &str, ca: &Path) {
        let port = free_port();
        self.port = Some(port);
        std::fs::write(
            self.data().join("pg_hba.conf"),
            format!("local all all trust\nhostssl all all {network} cert\n"),
        )
        .expect("pg_hba.conf");
        let dir = self.dir.path();
        let options = [
            "-c ssl=on".to_owned(),
            format!("-c ssl_cert_file={}", dir.join("server.pem").display()),
            format!("-c ssl_key_file={}", dir.join("server.key").display()),
            format!("-c ssl_ca_file={}", ca.display()),
            format!("-c listen_addresses={address}"),
            format!("-p {port}"),
        ];
        self.run_server(&options);
    }

    /// The TLS port, for a server started with TLS.
    pub(crate) fn port(&self) -> u16 {
        self.port.expect("a server listening on TCP")
    }

    /// A server on a Unix socket where user `wconverge` needs no password and every
    /// other user one (SCRAM); `user` is created with `password`, and owns the database
    /// `fleet`.
    pub(crate) fn start_with_password(user: &str, password: &str) -> Postgres {
        let postgres = Postgres::init();
        std::fs::write(
            postgres.data().join("pg_hba.conf"),
            "local all wconverge trust\nlocal all all scram-sha-256\n",
        )
        .expect("pg_hba.conf");
        postgres.run_server(&[]);
        postgres.psql(&format!("CREATE ROLE {user} LOGIN PASSWORD '{password}'"));
        postgres.psql(&format!("CREATE DATABASE fleet OWNER {user}"));
        postgres
    }

    /// The Unix socket's directory.
    pub(crate) fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    fn init() -> Postgres {
        let bin = server_binaries();
        let dir = tempfile::Builder::new()
            .prefix("wcv-pg-")
            .tempdir()
            .expect("a temporary directory");
        let owner = if rustix::process::geteuid().is_root() {
            let user = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .or_else(|| nix::unistd::User::from_name("nobody").ok().flatten())
                .expect("as root, PostgreSQL needs a `postgres` or `nobody` user to run as");
            std::os::unix::fs::chown(dir.path(), Some(user.uid.as_raw()), Some(user.gid.as_raw()))
                .expect("chown the server's directory");
            Some((user.uid.as_raw(), user.gid.as_raw()))
        } else {
            None
        };
        let postgres = Postgres {
            dir,
            bin,
            owner,
            port: None,
        };
        let data = postgres.data();
        let output = postgres
            .command("initdb")
            .args([
                "--auth=trust",
                "--username=wconverge",
                "--encoding=UTF8",
                "--no-sync",
            ])
            .arg("-D")
            .arg(&data)
            .output()
            .expect("initdb runs");
        assert!(
            output.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        postgres
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, program: &str) -> Command {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(self.bin.join(program));
        command.current_dir(self.dir.path()).env_remove("PGHOST");
        if let Some((uid, gid)) = self.owner {
            command.uid(uid).gid(gid);
        }
        command
    }

    fn run_server(&self, extra: &[String]) {
        let mut options = format!(
            "-k {} -c fsync=off -c synchronous_commit=off",
            self.dir.path().display()
        );
        if self.port.is_none() {
            options.push_str(" -c listen_addresses=''");
        }
        for option in extra {
            options.push(' ');
            options.push_str(option);
        }
        let output = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-o", &options, "-w", "-t", DEADLINE_SECONDS, "start"])
            .output()
            .expect("pg_ctl runs");
        assert!(
            output.status.success(),
            "the PostgreSQL server did not start: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
        );
    }

    /// The store URL of database `postgres` over the Unix socket, as user `wconverge`.
    pub(crate) fn url(&self) -> String {
        let mut url = format!(
            "postgres://wconverge@/postgres?host={}",
            self.dir.path().display()
        );
        if let Some(port) = self.port {
            url.push_str(&format!("&port={port}"));
        }
        url
    }

    /// The store URL over loopback TCP (TLS).
    pub(crate) fn tcp_url(&self) -> String {
        let port = self.port.expect("a server started with TLS");
        format!("postgres://wconverge@localhost:{port}/postgres")
    }

    /// Runs SQL in database `postgres` through `psql` on the Unix socket.
    pub(crate) fn psql(&self, sql: &str) -> String {
        self.psql_in("postgres", sql)
    }

    /// Runs SQL in `database` through `psql` on the Unix socket, as `wconverge`.
    pub(crate) fn psql_in(&self, database: &str, sql: &str) -> String {
        let mut command = Command::new("psql");
        command
            .args([
                "-X",
                "-q",
                "-t",
                "-A",
                "-v",
                "ON_ERROR_STOP=1",
                "-U",
                "wconverge",
                "-d",
                database,
            ])
            .arg("-h")
            .arg(self.dir.path())
            .args(["-c", sql]);
        if let Some(port) = self.port {
            command.args(["-p", &port.to_string()]);
        }
        let output = command.output().expect("psql runs");
        assert!(
            output.status.success(),
            "psql failed on `{sql}`: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// A CA, a server certificate for `localhost`, a client certificate for
    /// `wconverge`, and an unrelated CA, made with `openssl`.
    /// A CA, a server certificate for `server_name` (`IP:...` or `DNS:...`) and a client
    /// certificate for each of `clients` (its common name the role), all signed by it.
    fn certificates_for(
        &self,
        server_name: &str,
        clients: &[&str],
    ) -> (PathBuf, Vec<(PathBuf, PathBuf)>) {
        let dir = self.dir.path();
        let openssl = |args: &str| openssl(dir, args);
        let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        openssl(&format!(
            "req -x509 {key} -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca"
        ));
        std::fs::write(
            dir.join("server.ext"),
            format!("subjectAltName={server_name}\nextendedKeyUsage=serverAuth\n"),
        )
        .expect("extensions");
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n")
            .expect("extensions");
        let mut made = Vec::new();
        for (name, subject, ext) in
            std::iter::once(("server".to_owned(), "/CN=server".to_owned(), "server")).chain(
                clients.iter().map(|client| {
                    (
                        format!("client-{client}"),
                        format!("/CN={client}"),
                        "client",
                    )
                }),
            )
        {
            openssl(&format!(
                "req {key} -keyout {name}.key -out {name}.csr -subj {subject}"
            ));
            openssl(&format!(
                "x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                 -out {name}.pem -extfile {ext}.ext"
            ));
            set_private(
                &dir.join(format!("{name}.key")),
                self.owner.filter(|_| name == "server"),
            );
            if name != "server" {
                made.push((
                    dir.join(format!("{name}.pem")),
                    dir.join(format!("{name}.key")),
                ));
            }
        }
        set_private(&dir.join("server.pem"), self.owner);
        (dir.join("ca.pem"), made)
    }

    fn certificates(&self) -> Tls {
        let dir = self.dir.path();
        let (ca, clients) = self.certificates_for("DNS:localhost,IP:127.0.0.1", &["wconverge"]);
        openssl(
            dir,
            "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
             -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=test-other-ca",
        );
        let (client_cert, client_key) = clients.into_iter().next().expect("one client");
        Tls {
            ca,
            client_cert,
            client_key,
            other_ca: dir.join("other-ca.pem"),
        }
    }
}

/// Runs `openssl ARGS` in `dir`, checked.
fn openssl(dir: &Path, args: &str) {
    let output = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        output.status.success(),
        "openssl {args}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Postgres {
    /// Stops the server (a store that is down), keeping its data.
    pub(crate) fn stop(&self) {
        let output = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "fast", "-w", "-t", DEADLINE_SECONDS, "stop"])
            .output()
            .expect("pg_ctl runs");
        assert!(
            output.status.success(),
            "the PostgreSQL server did not stop: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts the server again after [`Postgres::stop`] (on a Unix socket only).
    pub(crate) fn start_again(&self) {
        assert!(self.port.is_none(), "a server on a Unix socket only");
        self.run_server(&[]);
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "-t", DEADLINE_SECONDS, "stop"])
            .output();
    }
}

/// `0600`, owned by `owner` when given (the server reads its key as its own user).
fn set_private(path: &Path, owner: Option<(u32, u32)>) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown");
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// The directory of `initdb` and `pg_ctl`: `$WCONVERGE_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian's layout), else where `initdb` is on `PATH`.
fn server_binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("WCONVERGE_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    debian.sort();
    if let Some((_, bin)) = debian.pop() {
        return bin;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .find(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists());
    on_path.unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server is not installed (no `initdb` and `pg_ctl` in \
             /usr/lib/postgresql/*/bin or on PATH): install it with `apt-get install \
             postgresql` (`.ci/run` does), or set WCONVERGE_PG_BIN to their directory"
        )
    })
}
