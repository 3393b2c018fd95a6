//! How commands report: human text or one JSON document on stdout, errors as one line on stderr
//! (or as JSON with `--json`), and the exit codes: 0 ok, 1 a check failed, 2 bad usage or a
//! failure the user must fix.

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;

/// Exit code for bad usage and for errors the user must act on.
pub const EXIT_USAGE: u8 = 2;

/// Prints a value as pretty JSON on stdout. A closed stdout (EPIPE) is not an error.
pub fn print_json<T: Serialize>(value: &T) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(false, &anyhow::anyhow!("encoding JSON: {e}")),
    }
}

/// Reports an error and returns the usage exit code. With `json`, the error is a JSON document
/// on stdout (so a script parsing stdout always gets JSON); the one-line message also goes to
/// stderr.
pub fn fail(json: bool, err: &anyhow::Error) -> ExitCode {
    let message = format!("{err:#}");
    if json {
        let doc = serde_json::json!({ "error": message });
        println!("{doc}");
    }
    eprintln!("tcplab: error: {message}");
    ExitCode::from(EXIT_USAGE)
}

/// Runs a command body, turning its error into the usage exit code.
pub fn finish(json: bool, result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|e| fail(json, &e))
}
