//! The PowerShell interpreter: the `powershell_script` resource type and PowerShell
//! guards, with Chef's `convert_boolean_return`.
//!
//! The script is wrapped (see [`wrapper`]) and passed with `-EncodedCommand`, so no
//! quoting of the user's code can go wrong. On Windows the program is Windows
//! PowerShell in System32 (the launcher plugin swaps in the SysWOW64 or sysnative copy
//! for another architecture); elsewhere the first `pwsh` that exists.

use wconverge_sdk::{Attribute, DataType, Result, Value};
use wconverge_sdk_interpreter::{
    CommandLine, Interpreter, InterpreterInfo, Purpose, Script, ScriptType, export_interpreter,
};

struct PowerShell;

/// Windows PowerShell, where every Windows has it.
const WINDOWS_POWERSHELL: &str = r"C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe";

/// Where PowerShell 7 is installed on Linux and macOS, by package or by hand.
const PWSH: [&str; 4] = [
    "/usr/bin/pwsh",
    "/usr/local/bin/pwsh",
    "/opt/microsoft/powershell/7/pwsh",
    "/snap/bin/pwsh",
];

impl Interpreter for PowerShell {
    fn info() -> InterpreterInfo {
        InterpreterInfo::new("powershell", env!("CARGO_PKG_VERSION")).with_type(
            ScriptType::new(
                "powershell_script",
                "Runs its code with PowerShell (powershell.exe on Windows, pwsh elsewhere); \
                 its guards speak PowerShell too.",
            )
            .option(
                Attribute::new(
                    "convert_boolean_return",
                    DataType::Boolean,
                    "Exit 0 when the code's value is $true and 1 when it is $false. Defaults \
                     to false for the resource's code and to true for its guards.",
                )
                .parameter(),
            ),
        )
    }

    fn command_line(script: &Script) -> Result<CommandLine> {
        let code = script.text()?;
        let convert = match script.option("convert_boolean_return") {
            Some(Value::Boolean(convert)) => *convert,
            _ => script.purpose == Purpose::Guard,
        };
        let mut line = if script.os == "windows" {
            CommandLine::new(WINDOWS_POWERSHELL)
        } else {
            PWSH.iter()
                .skip(1)
                .fold(CommandLine::new(PWSH[0]), |line, program| line.or(program))
        };
        line = line
            .when_missing(
                "install PowerShell 7 (pwsh), or allow where it is in the policy's `programs` of \
                 the powershell plugin",
            )
            .args([
                "-NoLogo",
                "-NonInteractive",
                "-NoProfile",
                "-ExecutionPolicy",
                "Bypass",
                "-InputFormat",
                "None",
            ])
            .args(script.flags())
            .arg("-EncodedCommand");
        // Sensitive code is read on standard input: the arguments (base64 is no secret)
        // carry only a loader that reads the script and runs it.
        Ok(if script.sensitive {
            line.arg(&encode_command(STDIN_LOADER))
                .stdin(wrapper(code, convert).into_bytes())
        } else {
            line.arg(&encode_command(&wrapper(code, convert)))
        })
    }
}

/// Reads the whole script from standard input and runs it in this session, so its
/// `exit` ends PowerShell with its code.
pub const STDIN_LOADER: &str =
    "$wconvergeScript = [Console]::In.ReadToEnd()\n. ([scriptblock]::Create($wconvergeScript))\n";

/// The script PowerShell runs: the user's code in a script block, then the exit code.
///
/// - With `convert`, a value that is exactly one boolean decides: `$true` exits 0,
///   `$false` exits 1.
/// - Otherwise (any other value, or no conversion) the ordinary rules hold: the value is
///   written to standard output; a non-zero `$LASTEXITCODE` of a native program is the
///   exit code; a failed last command exits 1; else 0.
/// - An exception ends the script with exit code 1 and its message on standard error.
///   An `exit N` in the code exits with N at once.
pub fn wrapper(code: &str, convert: bool) -> String {
    let convert = if convert { "$true" } else { "$false" };
    format!(
        "$ProgressPreference = 'SilentlyContinue'\n\
         $global:LASTEXITCODE = 0\n\
         $wconvergeConvert = {convert}\n\
         try {{\n\
         \x20   $wconvergeResult = & {{\n\
         {code}\n\
         \x20   }}\n\
         \x20   $wconvergeSucceeded = $?\n\
         }} catch {{\n\
         \x20   [Console]::Error.WriteLine($_.Exception.Message)\n\
         \x20   exit 1\n\
         }}\n\
         if ($wconvergeConvert -and $wconvergeResult -is [bool]) {{\n\
         \x20   if ($wconvergeResult) {{ exit 0 }} else {{ exit 1 }}\n\
         }}\n\
         if ($null -ne $wconvergeResult) {{ $wconvergeResult | Out-String -Stream | Write-Output }}\n\
         if ($null -ne $LASTEXITCODE -and $LASTEXITCODE -ne 0) {{ exit $LASTEXITCODE }}\n\
         if (-not $wconvergeSucceeded) {{ exit 1 }}\n\
         exit 0\n"
    )
}

/// `-EncodedCommand` takes base64 of the script in UTF-16LE.
pub fn encode_command(script: &str) -> String {
    let bytes: Vec<u8> = script.encode_utf16().flat_map(u16::to_le_bytes).collect();
    base64(&bytes)
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

export_interpreter!(PowerShell);

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(encoded: &str) -> String {
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let mut bytes = Vec::new();
        for chunk in encoded.as_bytes().chunks(4) {
            let n = chunk.iter().enumerate().fold(0u32, |n, (i, c)| {
                n | (u32::from(if *c == b'=' { 0 } else { value(*c) }) << (18 - 6 * i))
            });
            let keep = chunk.iter().filter(|c| **c != b'=').count() - 1;
            bytes.extend(n.to_be_bytes()[1..=keep].iter());
        }
        let units: Vec<u16> = bytes
            .chunks(2)
            .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
            .collect();
        String::from_utf16(&units).expect("UTF-16")
    }

    fn script(code: &str, purpose: Purpose, os: &str) -> Script {
        let mut script = Script::new("powershell_script", code, purpose);
        script.os = os.to_owned();
        script
    }

    #[test]
    fn base64_matches_the_standard_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn the_linux_command_line_tries_each_pwsh_and_encodes_the_wrapper() {
        let code = "(get-executionpolicy -scope localmachine) -eq 'remotesigned'";
        let line = PowerShell::command_line(&script(code, Purpose::Guard, "linux")).expect("valid");
        assert_eq!(line.programs, PWSH);
        assert!(line.when_missing.is_some());
        assert_eq!(
            line.args[..8],
            [
                "-NoLogo",
                "-NonInteractive",
                "-NoProfile",
                "-ExecutionPolicy",
                "Bypass",
                "-InputFormat",
                "None",
                "-EncodedCommand"
            ]
        );
        assert_eq!(line.args.len(), 9);
        assert_eq!(decode(&line.args[8]), wrapper(code, true));
        assert_eq!(line.stdin, None);
    }

    #[test]
    fn sensitive_code_goes_on_standard_input_behind_a_loader() {
        let code = "$password = 'hunter2'; exit 0";
        let mut sensitive = script(code, Purpose::Code, "linux");
        sensitive.sensitive = true;
        let line = PowerShell::command_line(&sensitive).expect("valid");
        assert_eq!(decode(&line.args[8]), STDIN_LOADER);
        assert_eq!(line.args.len(), 9);
        assert!(line.args.iter().all(|arg| !arg.contains("hunter2")));
        assert_eq!(line.stdin, Some(wrapper(code, false).into_bytes()));
    }

    #[test]
    fn the_windows_command_line_is_system32_powershell_with_flags_before_the_command() {
        let code = "new-smbshare systemshare $env:systemdrive\\";
        let with_flags = script(code, Purpose::Code, "windows").with_option("flags", "-Sta");
        let line = PowerShell::command_line(&with_flags).expect("valid");
        assert_eq!(line.programs, [WINDOWS_POWERSHELL]);
        assert_eq!(line.args[7], "-Sta");
        assert_eq!(line.args[8], "-EncodedCommand");
        assert_eq!(decode(&line.args[9]), wrapper(code, false));
    }

    #[test]
    fn convert_boolean_return_defaults_to_true_for_guards_only() {
        let guard =
            PowerShell::command_line(&script("$true", Purpose::Guard, "linux")).expect("guard");
        assert!(decode(guard.args.last().expect("arg")).contains("$wconvergeConvert = $true\n"));
        let code =
            PowerShell::command_line(&script("$true", Purpose::Code, "linux")).expect("code");
        assert!(decode(code.args.last().expect("arg")).contains("$wconvergeConvert = $false\n"));
        let explicit =
            script("$true", Purpose::Code, "linux").with_option("convert_boolean_return", true);
        let explicit = PowerShell::command_line(&explicit).expect("explicit");
        assert!(decode(explicit.args.last().expect("arg")).contains("$wconvergeConvert = $true\n"));
    }

    /// The wrapper decides the exit code in this order; each line is one rule of the
    /// RFC's boolean conversion.
    #[test]
    fn the_wrapper_maps_each_kind_of_result_to_its_exit_code() {
        let text = wrapper("get-smbshare systemshare", true);
        let rules = [
            // LASTEXITCODE starts at 0, so a script that runs no native program exits 0.
            "$global:LASTEXITCODE = 0",
            // The code runs in a script block; its value is captured.
            "$wconvergeResult = & {\nget-smbshare systemshare\n    }",
            // A thrown exception: message on stderr, exit 1.
            "} catch {\n    [Console]::Error.WriteLine($_.Exception.Message)\n    exit 1\n}",
            // $true -> 0, $false -> 1, only for exactly one boolean and only when converting.
            "if ($wconvergeConvert -and $wconvergeResult -is [bool]) {\n    if ($wconvergeResult) { exit 0 } else { exit 1 }\n}",
            // Any other value is output, not a verdict.
            "if ($null -ne $wconvergeResult) { $wconvergeResult | Out-String -Stream | Write-Output }",
            // A native program's non-zero exit code is the script's.
            "if ($null -ne $LASTEXITCODE -and $LASTEXITCODE -ne 0) { exit $LASTEXITCODE }",
            // A failed last cmdlet is a failure.
            "if (-not $wconvergeSucceeded) { exit 1 }",
            "exit 0\n",
        ];
        let mut from = 0;
        for rule in rules {
            let at = text[from..]
                .find(rule)
                .unwrap_or_else(|| panic!("rule {rule:?} missing or out of order in:\n{text}"));
            from += at + rule.len();
        }
    }
}
