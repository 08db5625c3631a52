//! `validate_cmd`, as Puppet's `file` has it: a command that checks the new content
//! before it replaces the file (`visudo -cf %`, `nginx -t -c %`). The command runs on
//! the candidate, the temporary file already holding the new content with its final
//! owner and mode, through the host's launcher and the plugin's program grants; the
//! candidate replaces the file only if the command exits 0. Otherwise the file is left
//! as it was, the candidate is removed, and the error carries the command's output
//! (unless the content is sensitive: checkers quote the lines they refuse).
//!
//! The command is split into words as a shell would split a simple command (blanks,
//! single and double quotes, backslashes) and run without a shell: its first word is the
//! program's absolute path, and the characters a shell would give a meaning to
//! (`|;&<>$` and backquotes) are refused outside quotes (write `/bin/sh -c '...'` for a
//! pipeline). Every occurrence of `validate_replacement` (default `%`) in a word is
//! replaced by the candidate's path.

use std::time::Duration;
use wconverge_sdk::process::{Command, ExitStatus};
use wconverge_sdk::{Error, Resource, Result};

/// How long the command may run before it is killed and the change refused.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The longest command accepted.
const MAX_COMMAND_BYTES: usize = 4096;

/// How much of the command's output an error carries.
const SHOWN_OUTPUT_BYTES: usize = 2048;

/// The problems of the resource's `validate_cmd` and `validate_replacement`.
pub fn check(resource: &Resource) -> Vec<String> {
    let Some(command) = resource.get_str("validate_cmd") else {
        if resource.get("validate_replacement").is_some() {
            return vec!["`validate_replacement` is set without `validate_cmd`".to_owned()];
        }
        return Vec::new();
    };
    let replacement = replacement(resource);
    let mut problems = Vec::new();
    if replacement.is_empty() {
        problems.push("`validate_replacement` must not be empty".to_owned());
    }
    match words(command) {
        Err(problem) => problems.push(format!("validate_cmd `{command}`: {problem}")),
        Ok(words) => {
            if !words[0].starts_with('/') {
                problems.push(format!(
                    "validate_cmd `{command}`: the program `{}` must be an absolute path \
                     (the command runs without a shell and without PATH)",
                    words[0]
                ));
            }
            if !replacement.is_empty() && !words.iter().any(|word| word.contains(replacement)) {
                problems.push(format!(
                    "validate_cmd `{command}` does not name the file to check: write \
                     `{replacement}` where the new content's path goes (for example \
                     `/usr/sbin/visudo -cf {replacement}`)"
                ));
            }
        }
    }
    problems
}

fn replacement(resource: &Resource) -> &str {
    resource.get_str("validate_replacement").unwrap_or("%")
}

/// Runs the resource's `validate_cmd` on `candidate`, if it has one: `Ok` if the
/// command accepted it.
pub fn run(resource: &Resource, path: &str, candidate: &str) -> Result<()> {
    let Some(command) = resource.get_str("validate_cmd") else {
        return Ok(());
    };
    let replacement = replacement(resource);
    let words = words(command).map_err(|problem| {
        Error::new(format!(
            "validate_cmd `{command}`: {problem}; `{path}` was not changed"
        ))
    })?;
    let words: Vec<String> = words
        .iter()
        .map(|word| word.replace(replacement, candidate))
        .collect();
    let output = Command::new(&words[0])
        .args(&words[1..])
        .timeout(TIMEOUT)
        .run()
        .map_err(|error| {
            Error::new(format!(
                "validate_cmd `{command}` could not run: {}; `{path}` was not changed",
                error.message()
            ))
        })?;
    if output.success() {
        return Ok(());
    }
    let ended = match output.status {
        ExitStatus::Exited(code) => format!("exited with {code}"),
        ExitStatus::Signaled(signal) => format!("was killed by signal {signal}"),
        ExitStatus::TimedOut => format!("ran past {} s and was killed", TIMEOUT.as_secs()),
    };
    let mut said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !stdout.trim().is_empty() {
        if !said.is_empty() {
            said.push('\n');
        }
        said.push_str(stdout.trim());
    }
    if said.len() > SHOWN_OUTPUT_BYTES {
        let mut end = SHOWN_OUTPUT_BYTES;
        while !said.is_char_boundary(end) {
            end -= 1;
        }
        said.truncate(end);
        said.push_str(" [...]");
    }
    // The temporary name means nothing to the reader: the output names the file.
    let mut said = said.replace(candidate, &format!("<new {path}>"));
    // A checker quotes the lines it refuses: none of a secret's.
    if resource
        .get("content")
        .is_some_and(|content| content.is_sensitive())
    {
        said = "(its output is not shown: the content is sensitive)".to_owned();
    }
    Err(Error::new(format!(
        "validate_cmd `{command}` refused the new content ({ended}); `{path}` was not \
         changed{}",
        if said.is_empty() {
            String::new()
        } else {
            format!(":\n{said}")
        }
    )))
}

/// The words of a simple shell command: blanks separate them; `'...'` keeps everything
/// literally; `"..."` keeps everything but `\` before `"`, `\`, `$` or a backquote; a `\`
/// outside quotes keeps the next character.
pub fn words(command: &str) -> std::result::Result<Vec<String>, String> {
    if command.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "longer than {MAX_COMMAND_BYTES} bytes, the limit for a validate_cmd"
        ));
    }
    if let Some(control) = command.chars().find(|c| c.is_control() && *c != '\t') {
        return Err(format!(
            "holds the control character {control:?}; write the command on one line"
        ));
    }
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(done) = word.take() {
                    words.push(done);
                }
            }
            '\'' => {
                let current = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => current.push(c),
                        None => return Err("a single quote is not closed".to_owned()),
                    }
                }
            }
            '"' => {
                let current = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(next @ ('"' | '\\' | '$' | '`')) => current.push(next),
                            Some(next) => {
                                current.push('\\');
                                current.push(next);
                            }
                            None => return Err("a double quote is not closed".to_owned()),
                        },
                        Some(c @ ('$' | '`')) => {
                            return Err(format!(
                                "`{c}` inside double quotes would be expanded by a shell, and \
                                 the command runs without one; put it in single quotes"
                            ));
                        }
                        Some(c) => current.push(c),
                        None => return Err("a double quote is not closed".to_owned()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(next) => word.get_or_insert_with(String::new).push(next),
                None => return Err("ends in a backslash".to_owned()),
            },
            '|' | ';' | '&' | '<' | '>' | '$' | '`' | '(' | ')' => {
                return Err(format!(
                    "`{c}` means something to a shell, and the command runs without one; \
                     quote it, or run `/bin/sh -c '...'` for a pipeline or redirection"
                ));
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(done) = word {
        words.push(done);
    }
    if words.is_empty() {
        return Err("is empty".to_owned());
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_into_words_as_a_shell_splits_a_simple_command() {
        let ok = |command: &str| words(command).unwrap_or_else(|why| panic!("{command}: {why}"));
        assert_eq!(
            ok("/usr/sbin/visudo -cf %"),
            ["/usr/sbin/visudo", "-cf", "%"]
        );
        assert_eq!(
            ok("/bin/sh -c 'nginx -t -c % | grep ok'"),
            ["/bin/sh", "-c", "nginx -t -c % | grep ok"]
        );
        assert_eq!(
            ok(r#"/bin/x "a b" c\ d "q\"x""#),
            ["/bin/x", "a b", "c d", "q\"x"]
        );
        assert_eq!(ok("  /bin/x\t''  "), ["/bin/x", ""]);
        for bad in [
            "",
            "   ",
            "/bin/x 'open",
            "/bin/x \"open",
            "/bin/x a | b",
            "/bin/x; rm -rf /",
            "/bin/x $HOME",
            "/bin/x \"$HOME\"",
            "/bin/x `id`",
            "/bin/x > /etc/passwd",
            "/bin/x\n/bin/y",
            "/bin/x \\",
        ] {
            assert!(words(bad).is_err(), "{bad:?}");
        }
        assert!(words(&"x".repeat(MAX_COMMAND_BYTES + 1)).is_err());
    }

    fn file(attributes: &[(&str, &str)]) -> Resource {
        let mut resource =
            Resource::new("file", "/etc/sudoers.d/ops").with("path", "/etc/sudoers.d/ops");
        for (name, value) in attributes {
            resource = resource.with(name, *value);
        }
        resource
    }

    #[test]
    fn a_validate_cmd_names_an_absolute_program_and_the_file_to_check() {
        assert!(check(&file(&[("validate_cmd", "/usr/sbin/visudo -cf %")])).is_empty());
        assert!(
            check(&file(&[
                ("validate_cmd", "/usr/sbin/nginx -t -c @@"),
                ("validate_replacement", "@@")
            ]))
            .is_empty()
        );
        let problems = check(&file(&[("validate_cmd", "visudo -cf %")]));
        assert!(problems[0].contains("absolute path"), "{problems:?}");
        let problems = check(&file(&[("validate_cmd", "/usr/sbin/visudo -c")]));
        assert!(
            problems[0].contains("does not name the file"),
            "{problems:?}"
        );
        let problems = check(&file(&[("validate_replacement", "@")]));
        assert!(
            problems[0].contains("without `validate_cmd`"),
            "{problems:?}"
        );
    }

    #[test]
    fn native_run_replaces_the_candidate_and_reports_what_the_command_said() {
        let dir = std::env::temp_dir();
        let candidate = dir.join(format!("validate-cmd-{}", std::process::id()));
        std::fs::write(&candidate, "good\n").expect("candidate");
        let candidate = candidate.to_str().expect("utf-8");
        let accepts = file(&[("validate_cmd", "/bin/grep -q good %")]);
        assert!(run(&accepts, "/etc/x", candidate).is_ok());
        let refuses = file(&[(
            "validate_cmd",
            "/bin/sh -c 'echo \"bad line in $0\" >&2; exit 3' %",
        )]);
        let error = run(&refuses, "/etc/x", candidate).expect_err("refused");
        assert!(
            error.message().contains("exited with 3"),
            "{}",
            error.message()
        );
        assert!(
            error.message().contains("bad line in <new /etc/x>"),
            "{}",
            error.message()
        );
        assert!(error.message().contains("`/etc/x` was not changed"));
        let secret = refuses.with(
            "content",
            wconverge_sdk::Value::Sensitive(Box::new("hunter2".into())),
        );
        let error = run(&secret, "/etc/x", candidate).expect_err("refused");
        assert!(
            !error.message().contains("bad line in <new"),
            "{}",
            error.message()
        );
        assert!(error.message().contains("not shown"), "{}", error.message());
        std::fs::remove_file(candidate).expect("remove");
    }
}
