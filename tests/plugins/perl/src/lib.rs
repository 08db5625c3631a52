//! A third-party interpreter, loaded from a file and pinned like any other: the `perl`
//! script type, whose code and guards run with `perl -e`. No line of the host knows it.

use wconverge_sdk::Result;
use wconverge_sdk_interpreter::{
    CommandLine, Interpreter, InterpreterInfo, Script, ScriptType, export_interpreter,
};

struct Perl;

impl Interpreter for Perl {
    fn info() -> InterpreterInfo {
        InterpreterInfo::new("perl", env!("CARGO_PKG_VERSION"))
            .inherits(&["cwd", "environment"])
            .with_type(ScriptType::new("perl", "Runs its code with perl -e."))
    }

    fn command_line(script: &Script) -> Result<CommandLine> {
        Ok(CommandLine::new("/usr/bin/perl")
            .args(script.flags())
            .arg("-e")
            .arg(script.text()?))
    }
}

export_interpreter!(Perl);
