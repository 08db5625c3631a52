//! The `bash` interpreter: `/bin/bash` for the `bash` resource type and for guards whose
//! `guard_interpreter` is `bash` (so `[[ ... ]]` works in a guard).

use wconverge_sdk::Result;
use wconverge_sdk_interpreter::{
    CommandLine, Interpreter, InterpreterInfo, Script, ScriptType, export_interpreter,
};

struct Bash;

impl Interpreter for Bash {
    fn info() -> InterpreterInfo {
        InterpreterInfo::new("bash", env!("CARGO_PKG_VERSION")).with_type(ScriptType::new(
            "bash",
            "Runs its code with bash when the resource is applied (unless `creates` exists \
             or `refreshonly` is set) and when it is refreshed; its guards speak bash too.",
        ))
    }

    fn command_line(script: &Script) -> Result<CommandLine> {
        let line = CommandLine::new("/bin/bash")
            .or("/usr/bin/bash")
            .args(script.flags());
        // Sensitive code is read on standard input (`-s`): arguments are public.
        Ok(if script.sensitive {
            line.arg("-s").stdin(script.text()?.as_bytes())
        } else {
            line.arg("-c").arg(script.text()?)
        })
    }
}

export_interpreter!(Bash);

#[cfg(test)]
mod tests {
    use super::*;
    use wconverge_sdk::process::ExitStatus;
    use wconverge_sdk_interpreter::{Purpose, run};

    #[test]
    fn the_command_line_is_bash_dash_c_after_the_flags() {
        let script = Script::new("bash", "[[ 1 == 1 ]]", Purpose::Guard).with_option("flags", "-e");
        assert_eq!(
            Bash::command_line(&script).expect("valid"),
            CommandLine::new("/bin/bash")
                .or("/usr/bin/bash")
                .args(["-e", "-c", "[[ 1 == 1 ]]"])
        );
    }

    #[test]
    fn bash_only_syntax_runs() {
        let script = Script::new("bash", "[[ 1 == 1 ]]", Purpose::Guard);
        let output = run::<Bash>(&script).expect("bash runs");
        assert_eq!(output.status, ExitStatus::Exited(0), "{output:?}");
    }
}
