//! How commands report: human text or one JSON document on stdout, errors as one line on stderr
//! (or as JSON with `--json`), and the exit codes: 0 ok, 1 a check failed, 2 bad usage or a
//! failure the user must fix.

use std::io::Write;
use std::process::ExitCode;

/// `println!` for results on stdout: a closed stdout (`tcplab report DB | head`) ends the
/// output quietly instead of panicking, as a Unix filter does.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `print!` with [`outln!`]'s handling of a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

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
    let message = one_line(err);
    if json {
        let doc = serde_json::json!({ "error": message });
        outln!("{doc}");
    }
    eprintln!("tcplab: error: {message}");
    ExitCode::from(EXIT_USAGE)
}

/// The error and its causes on one line, `outer: cause: root`. A cause whose text the message
/// already carries is left out: library errors (thiserror) often print their source inside
/// their own message *and* report it as the source, which `{:#}` would print twice
/// (`--loss 150%: loss must be … : loss must be …`). The message may carry it flattened and
/// cut short (SQLite's quote their SQL over several lines), so a cause is flattened too and
/// its beginning is what is looked for. The outer error keeps its own lines: a scenario's
/// problems are one a line.
fn one_line(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
            continue;
        }
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let start: String = flat.chars().take(40).collect();
        let carried = message.split_whitespace().collect::<Vec<_>>().join(" ");
        if !carried.contains(&start) {
            message.push_str(": ");
            message.push_str(&flat);
        }
    }
    message
}

/// Runs a command body, turning its error into the usage exit code.
pub fn finish(json: bool, result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|e| fail(json, &e))
}

/// How tables and prose are laid out on stdout: the terminal's width when stdout is a
/// terminal (100 columns otherwise), colour only on a terminal and never with `NO_COLOR`.
pub fn stdout_layout() -> tcplab_report::text::Layout {
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal();
    tcplab_report::text::Layout {
        width: if tty { terminal_width(&stdout) } else { 100 },
        color: tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

/// The width of stderr when it is a terminal, else 100 columns (progress and findings).
pub fn stderr_width() -> usize {
    use std::io::IsTerminal;
    let stderr = std::io::stderr();
    if stderr.is_terminal() {
        terminal_width(&stderr)
    } else {
        100
    }
}

/// The terminal's columns, or 100 when it does not say (a serial console reports 0).
fn terminal_width(fd: impl rustix::fd::AsFd) -> usize {
    rustix::termios::tcgetwinsize(fd)
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|w| *w >= 40)
        .unwrap_or(100)
}

/// `text` wrapped to `width`, continuation lines indented by two spaces.
pub fn wrapped(text: &str, width: usize) -> String {
    tcplab_report::text::wrap_str(text, width, "  ")
}

#[cfg(test)]
mod tests {
    use super::one_line;
    use tcplab_emu::{ConfigError, ValueError};

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let e = anyhow::Error::new(ConfigError::Flag {
            flag: "--loss",
            value: "150%".into(),
            source: ValueError::OutOfRange {
                what: "loss",
                range: "between 0% and 100%",
            },
        });
        assert_eq!(
            one_line(&e),
            "--loss 150%: loss must be between 0% and 100%"
        );
    }

    #[test]
    fn context_and_new_causes_are_joined() {
        let e = anyhow::Error::new(std::io::Error::other("permission denied"))
            .context("opening /run/tcplab");
        assert_eq!(one_line(&e), "opening /run/tcplab: permission denied");
    }
}
