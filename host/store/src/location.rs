//! Where the store is: `sqlite:PATH` (or a path), or `postgres://...` (or
//! `postgresql://...`) with the usual `PG*` environment variables. A password is never
//! taken from the command line, where every user of the machine can read it.

use std::fmt;
use std::path::PathBuf;

/// Where the store is.
#[derive(Debug, Clone)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(Box<PostgresSettings>),
}

/// How to reach PostgreSQL. Its `Debug` never shows the password.
#[derive(Clone)]
pub struct PostgresSettings {
    /// Parsed from the URL, with the `PG*` environment variables for what it leaves out.
    pub config: postgres::Config,
    /// The password's file: one line, the password (or the format of `PGPASSFILE`);
    /// else `password`.
    pub password_file: Option<PathBuf>,
    /// `PGPASSWORD`, when no file is named.
    pub password: Option<String>,
    /// The certificate authority the server's certificate must chain to (PEM): TLS is
    /// then required and the server's name checked.
    pub ca: Option<PathBuf>,
    /// This client's certificate and key (PEM), for servers that require them.
    pub client_certificate: Option<(PathBuf, PathBuf)>,
}

impl fmt::Debug for PostgresSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresSettings")
            .field("config", &self.config)
            .field("password_file", &self.password_file)
            .field("password", &self.password.as_ref().map(|_| "_"))
            .field("ca", &self.ca)
            .field("client_certificate", &self.client_certificate)
            .finish()
    }
}

impl Location {
    /// Parses `text` (from `--store` or the config file); `password_file` is the config
    /// file's `store_password_file`; `env` reads the environment (`PGHOST`, `PGPORT`,
    /// `PGUSER`, `PGDATABASE`, `PGPASSFILE`, `PGPASSWORD`, `PGSSLROOTCERT`, `PGSSLCERT`,
    /// `PGSSLKEY`), for what the URL does not say.
    pub fn parse(
        text: &str,
        password_file: Option<PathBuf>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Location, String> {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(format!(
                    "`sqlite:{path}`: give the file's absolute path, like \
                     `sqlite:/var/lib/wconverge/store.sqlite`"
                ));
            }
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return parse_postgres(text, password_file, env)
                .map(|settings| Location::Postgres(Box::new(settings)));
        }
        if text.starts_with('/') {
            return Ok(Location::Sqlite(PathBuf::from(text)));
        }
        Err(format!(
            "`{text}` is not a store: give `postgres://HOST/DATABASE`, `sqlite:PATH` or an \
             absolute path"
        ))
    }
}

fn parse_postgres(
    text: &str,
    password_file: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PostgresSettings, String> {
    // wconverge's own TLS options are taken out of the query; the rest is PostgreSQL's
    // URL as libpq reads it.
    let (base, query) = match text.split_once('?') {
        Some((base, query)) => (base, query),
        None => (text, ""),
    };
    let mut ca = env("PGSSLROOTCERT").map(PathBuf::from);
    let mut cert = env("PGSSLCERT").map(PathBuf::from);
    let mut key = env("PGSSLKEY").map(PathBuf::from);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "sslrootcert" => ca = Some(PathBuf::from(decode(value)?)),
            "sslcert" => cert = Some(PathBuf::from(decode(value)?)),
            "sslkey" => key = Some(PathBuf::from(decode(value)?)),
            "password" => return Err(password_refused()),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mut config: postgres::Config = url
        .parse()
        .map_err(|error| format!("`{}` is not a PostgreSQL URL: {error}", shown_url(&url)))?;
    if config.get_password().is_some() {
        return Err(password_refused());
    }
    if config.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(host) if host.starts_with('/') => {
                config.host_path(host);
            }
            Some(host) => {
                config.host(&host);
            }
            None => {
                config.host_path("/var/run/postgresql");
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(port) = env("PGPORT")
    {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("PGPORT `{port}` is not a port number"))?;
        config.port(port);
    }
    if config.get_user().is_none() {
        let user = env("PGUSER").unwrap_or_else(|| "wconverge".to_owned());
        config.user(&user);
    }
    if config.get_dbname().is_none()
        && let Some(dbname) = env("PGDATABASE")
    {
        config.dbname(&dbname);
    }
    let client_certificate = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => {
            return Err(
                "a client certificate needs both `sslcert` and `sslkey` (or PGSSLCERT and \
                 PGSSLKEY)"
                    .to_owned(),
            );
        }
    };
    // Unencrypted over a network only when the URL says so in so many words: reports,
    // facts and exports (what every collector runs as root) would cross it in clear.
    let unencrypted_said = kept.contains(&"sslmode=disable");
    if ca.is_none() && !unencrypted_said {
        for host in config.get_hosts() {
            if let postgres::config::Host::Tcp(name) = host
                && !is_loopback(name)
            {
                return Err(format!(
                    "the store at `{name}` would be reached over the network without TLS: give \
                     the certificate authority that signed the server's certificate \
                     (`?sslrootcert=CA.pem`, or PGSSLROOTCERT), or, on a network you trust, say \
                     `?sslmode=disable`"
                ));
            }
        }
    }
    let password_file = password_file.or_else(|| env("PGPASSFILE").map(PathBuf::from));
    let password = if password_file.is_none() {
        env("PGPASSWORD")
    } else {
        None
    };
    Ok(PostgresSettings {
        config,
        password_file,
        password,
        ca,
        client_certificate,
    })
}

/// Whether `host` names this machine: `localhost`, or a loopback address.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

fn password_refused() -> String {
    "the store's URL holds a password, which every user of this machine could read on the \
     command line: put it in a file named by `store_password_file` in the config file (or \
     PGPASSFILE), or in PGPASSWORD"
        .to_owned()
}

/// `%XX` escapes decoded.
fn decode(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = value
                .get(at + 1..at + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| format!("`{value}` has a bad `%` escape"))?;
            out.push(hex);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{value}` is not UTF-8 once decoded"))
}

/// A URL as messages show it: without what follows `?`, and without a password.
fn shown_url(url: &str) -> String {
    let base = url.split('?').next().unwrap_or(url);
    match base.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user_info, host)) => {
                let user = user_info.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}@{host}")
            }
            None => base.to_owned(),
        },
        None => base.to_owned(),
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "`{}`", path.display()),
            Location::Postgres(settings) => {
                let host = match settings.config.get_hosts().first() {
                    Some(postgres::config::Host::Tcp(host)) => host.clone(),
                    Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
                    None => String::new(),
                };
                let port = settings.config.get_ports().first().copied().unwrap_or(5432);
                write!(
                    f,
                    "`postgres://{}@{host}:{port}/{}`",
                    settings.config.get_user().unwrap_or_default(),
                    settings.config.get_dbname().unwrap_or_default()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_password_in_the_url_is_refused() {
        for url in [
            "postgres://wconverge:secret@db.example/fleet",
            "postgres://db.example/fleet?password=secret",
        ] {
            let error = Location::parse(url, None, &no_env).expect_err(url);
            assert!(error.contains("store_password_file"), "{error}");
            assert!(!error.contains("secret"), "{error}");
        }
        let unparsable = Location::parse("postgres://wc:secret@db.example:port/x", None, &no_env)
            .expect_err("a bad port");
        assert!(!unparsable.contains("secret"), "{unparsable}");
        let settings = Location::parse("postgres://localhost/fleet", None, &|name| {
            (name == "PGPASSWORD").then(|| "secret".to_owned())
        })
        .expect("url");
        assert!(!format!("{settings:?}").contains("secret"));
    }

    #[test]
    fn a_store_over_the_network_needs_tls_or_says_it_goes_without() {
        let error =
            Location::parse("postgres://wc@db.example/fleet", None, &no_env).expect_err("no TLS");
        assert!(
            error.contains("sslrootcert") && error.contains("sslmode=disable"),
            "{error}"
        );
        let from_env = Location::parse("postgres:///fleet", None, &|name| {
            (name == "PGHOST").then(|| "10.0.0.7".to_owned())
        });
        assert!(from_env.is_err(), "PGHOST counts too");
        for url in [
            "postgres://wc@db.example/fleet?sslmode=disable",
            "postgres://wc@db.example/fleet?sslrootcert=/ca.pem",
            "postgres://wc@localhost/fleet",
            "postgres://wc@127.0.0.1:5433/fleet",
            "postgres://wc@[::1]/fleet",
            "postgres:///fleet?host=/run/postgresql",
        ] {
            assert!(Location::parse(url, None, &no_env).is_ok(), "{url}");
        }
    }

    #[test]
    fn locations_parse_and_show_without_secrets() {
        let location = Location::parse(
            "postgres://wc@db.example:6543/fleet?sslrootcert=/etc/wconverge/ca.pem",
            None,
            &no_env,
        )
        .expect("url");
        let Location::Postgres(settings) = &location else {
            panic!("postgres");
        };
        assert_eq!(
            settings.ca.as_deref(),
            Some(std::path::Path::new("/etc/wconverge/ca.pem"))
        );
        assert_eq!(
            location.to_string(),
            "`postgres://wc@db.example:6543/fleet`"
        );
        assert!(matches!(
            Location::parse("sqlite:/var/lib/wconverge/store.sqlite", None, &no_env),
            Ok(Location::Sqlite(_))
        ));
        assert!(Location::parse("mysql://x", None, &no_env).is_err());
        assert!(
            Location::parse("postgres://db/fleet?sslcert=/a.pem", None, &no_env)
                .expect_err("half a certificate")
                .contains("sslkey")
        );
    }
}
