//! Tests of the policy file: parsing, its checks and their messages, pins, and the plugin directory.

use super::*;

#[test]
fn the_builtin_policy_grants_what_the_readme_says() {
    let policy = Policy::builtin();
    let exec = policy
        .providers_of("exec")
        .next()
        .expect("exec is provided");
    assert_eq!(exec.name, "sh");
    let launcher = policy.plugin("launcher").expect("launcher");
    assert!(launcher.provides.is_empty());
    assert!(
        exec.programs
            .iter()
            .any(|grant| grant.pattern.matches(Path::new("/bin/sh")))
    );
    assert!(
        !exec
            .programs
            .iter()
            .any(|grant| grant.pattern.matches(Path::new("/tmp/sh")))
    );
    assert!(
        !exec
            .programs
            .iter()
            .any(|grant| grant.pattern.matches(Path::new("/usr/bin/x/y")))
    );
    let notify = policy.plugin("notify").expect("notify");
    assert!(notify.directories.is_empty() && notify.programs.is_empty());
    assert_eq!(notify.limits.memory_bytes, 128 * 1024 * 1024);
}

#[test]
fn syntax_errors_name_line_and_column() {
    let error = Policy::parse(
        "[plugins.file]\nsource = \"builtin\"\nbogus = 1\n",
        "p.toml",
        None,
    )
    .expect_err("unknown key");
    let message = error.to_string();
    assert!(
        message.starts_with("p.toml:3:1: unknown field `bogus`"),
        "{message}"
    );
}

#[test]
fn file_plugins_must_be_pinned_and_paths_absolute() {
    let unpinned =
        Policy::parse("[plugins.x]\nsource = \"x.wasm\"\n", "p.toml", None).expect_err("unpinned");
    assert!(
        unpinned.to_string().contains("must be pinned"),
        "{unpinned}"
    );
    let relative = Policy::parse(
        "[plugins.x]\nsource = \"builtin\"\ndirectories = [{ path = \"srv\", access = \"read\" }]\n",
        "p.toml",
        None,
    )
    .expect_err("relative");
    assert_eq!(
        relative.to_string(),
        "p.toml: plugin `x`: directory `srv` is not an absolute path"
    );
    let glob = Policy::parse(
        "[plugins.x]\nsource = \"builtin\"\nprograms = [\"/usr/bin/py*\"]\n",
        "p.toml",
        None,
    )
    .expect_err("partial glob");
    assert!(glob.to_string().contains("whole last component"), "{glob}");
}

#[test]
fn providers_of_one_type_keep_the_order_of_the_file() {
    let policy = Policy::parse(
        "[plugins.zypper]\nsource = \"builtin\"\nprovides = [\"package\"]\n\
         [plugins.apt]\nsource = \"builtin\"\nprovides = [\"package\"]\n\
         [plugins.file]\nsource = \"builtin\"\n\
         [plugins.dnf]\nsource = \"builtin\"\nprovides = [\"package\", \"repo\"]\n",
        "p.toml",
        None,
    )
    .expect("several providers of a type are allowed");
    let names = |type_name| {
        policy
            .providers_of(type_name)
            .map(|plugin| plugin.name.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(names("package"), ["zypper", "apt", "dnf"]);
    assert_eq!(names("file"), ["file"]);
    assert!(names("user").is_empty());
    let all: Vec<&str> = policy.plugins.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(all, ["zypper", "apt", "file", "dnf"]);
}

#[test]
fn environment_grants_names_prefixes_and_a_star_that_never_covers_the_loader() {
    let policy = Policy::parse(
        "[plugins.a]\nsource = \"builtin\"\nenvironment = [\"LANG\", \"APP_*\"]\n\
         [plugins.b]\nsource = \"builtin\"\nenvironment = [\"*\", \"PATH\"]\n\
         [plugins.c]\nsource = \"builtin\"\n",
        "p.toml",
        None,
    )
    .expect("valid");
    let allows = |plugin: &str, name: &str| {
        policy
            .plugin(plugin)
            .expect("plugin")
            .environment
            .allows(name)
    };
    assert!(allows("a", "LANG") && allows("a", "APP_HOME"));
    assert!(!allows("a", "HOME") && !allows("a", "PATH"));
    assert!(allows("b", "HOME") && allows("b", "PATH"));
    assert!(!allows("b", "LD_PRELOAD") && !allows("b", "DYLD_INSERT_LIBRARIES"));
    assert!(!allows("c", "LANG"));
    for bad in ["LD_*", "PATH*", "A=B", "", "A*B"] {
        let error = Policy::parse(
            &format!("[plugins.x]\nsource = \"builtin\"\nenvironment = [\"{bad}\"]\n"),
            "p.toml",
            None,
        )
        .expect_err(bad);
        assert!(
            error.to_string().contains("is not a variable name"),
            "{error}"
        );
    }
}

#[test]
fn the_builtin_package_grants_let_no_manifest_value_become_an_option() {
    let policy = Policy::builtin();
    let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let grant = |plugin: &str, program: &str| {
        policy
            .plugin(plugin)
            .expect("plugin")
            .programs
            .iter()
            .find(|grant| grant.pattern.matches(Path::new(program)))
            .expect("granted")
            .clone()
    };
    let apt_get = grant("apt", "/usr/bin/apt-get");
    let install = [
        "install",
        "-y",
        "-q",
        "-o",
        "DPkg::Options::=--force-confold",
        "--",
    ];
    let with = |last: &str| {
        let mut all = install.to_vec();
        all.push(last);
        args(&all)
    };
    assert!(apt_get.allows_args(&with("nginx")));
    assert!(apt_get.allows_args(&with("nginx=1.22.1-9")));
    assert!(!apt_get.allows_args(&with("-oAPT::Update::Pre-Invoke::=touch /tmp/x")));
    assert!(!apt_get.allows_args(&args(&["update"])));
    assert!(!apt_get.allows_args(&args(&[
        "install",
        "-y",
        "-q",
        "-o",
        "APT::Update::Pre-Invoke::=sh",
        "--",
        "nginx"
    ])));
    assert!(apt_get.allows_args(&args(&["purge", "-y", "-q", "--", "nginx"])));
    let dpkg = grant("dpkg", "/usr/bin/dpkg");
    assert!(dpkg.allows_args(&args(&["--force-confold", "-i", "--", "/srv/x.deb"])));
    assert!(!dpkg.allows_args(&args(&["-i", "--", "/srv/x.deb"])));
    assert!(!dpkg.allows_args(&args(&["--force-confold", "-i", "--", "--admindir=/x"])));
    let query = grant("apt", "/usr/bin/dpkg-query");
    assert!(query.query);
    assert!(query.allows_args(&args(&[
        "-W",
        "-f",
        "${Package}\t${Version}\t${db:Status-Abbrev}\n"
    ])));
}

#[test]
fn program_grants_carry_argument_patterns() {
    let policy = Policy::parse(
        "[plugins.x]\nsource = \"builtin\"\nprograms = [\"/usr/bin/id\", \
         { path = \"/usr/bin/tar\", args = [[\"-x\", \"-f\", \"*\"], []] }]\n",
        "p.toml",
        None,
    )
    .expect("valid");
    let grants = &policy.plugin("x").expect("x").programs;
    let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    assert!(grants[0].allows_args(&args(&["--anything", "goes"])));
    assert!(grants[1].allows_args(&args(&["-x", "-f", "a.tar"])));
    assert!(grants[1].allows_args(&[]));
    assert!(!grants[1].allows_args(&args(&["-x", "-f", "--to-command=sh"])));
    let error = Policy::parse(
        "[plugins.x]\nsource = \"builtin\"\nprograms = [{ path = \"/usr/bin/find\", \
         args = [[\"...\", \"-print\"]] }]\n",
        "p.toml",
        None,
    )
    .expect_err("rest not last");
    assert_eq!(
        error.to_string(),
        "p.toml: plugin `x`: program `/usr/bin/find`: `...` may only be the last element \
         of an argument pattern"
    );
}

#[test]
fn a_plugin_listed_twice_is_refused() {
    let error = Policy::parse(
        "[plugins.a]\nsource = \"builtin\"\n[plugins.a]\nsource = \"builtin\"\n",
        "p.toml",
        None,
    )
    .expect_err("duplicate table");
    assert!(error.to_string().starts_with("p.toml:3:"), "{error}");
}
