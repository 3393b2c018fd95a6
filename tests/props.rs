//! What every parser property test asserts, shared by the crates' `tests/parse_props.rs`
//! (each includes this file with `#[path]`): a parser given any input returns within a bound,
//! never panics, and an error is one line that names what to fix and says how.
//!
//! Cases: `PROPTEST_CASES` (proptest's own variable) or proptest's default of 256, drawn from
//! the fixed `PROPTEST_RNG_SEED` in `.cargo/config.toml` so every run tries the same ones;
//! `benches/fuzz.sh` runs the same suites with many more, from a new seed each time.
#![allow(dead_code)]

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError};

/// The number of cases comes from `PROPTEST_CASES` (read by `Config::default`); failures are
/// kept as unit tests beside the properties, not in proptest's regression files.
pub fn config() -> Config {
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

/// How long one parse may take. Generous for a debug build on a loaded CI machine; a parser
/// that needs longer on inputs of a few kilobytes is looping or allocating without bound.
pub const BOUND: Duration = Duration::from_secs(10);

/// Longest error accepted: a value echoed back must be cut, not repeated whole.
pub const MAX_ERROR_LEN: usize = 600;

/// Words that say what to do (the fix), in the project's error style.
pub const FIX_WORDS: &[&str] = &[
    "use ",
    "write ",
    "give ",
    "set ",
    "add ",
    "remove ",
    "must ",
    "expected",
    "e.g.",
    "needs ",
    "rename",
    "run ",
    "pick ",
    "list ",
    "delete ",
    "check ",
    "should ",
    "only ",
    "point ",
    "pass ",
    "restore",
    "start a",
    "did you mean",
    "choose",
    "install",
    "rebuild",
];

/// Runs `f` on its own thread: a panic or a run longer than [`BOUND`] fails the case.
pub fn bounded<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, TestCaseError> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        // The receiver may have given up already: nothing to do then.
        let _ = tx.send(f());
    });
    match rx.recv_timeout(BOUND) {
        Ok(v) => Ok(v),
        Err(RecvTimeoutError::Timeout) => Err(TestCaseError::fail(format!(
            "{what}: no answer within {BOUND:?}"
        ))),
        Err(RecvTimeoutError::Disconnected) => {
            Err(TestCaseError::fail(format!("{what}: panicked")))
        }
    }
}

/// An error message is one non-empty line, not too long, names one of `names` (when any are
/// given) and says what to do.
pub fn check_error(msg: &str, names: &[&str]) -> Result<(), TestCaseError> {
    let fail = |why: &str| Err(TestCaseError::fail(format!("{why}: {msg:?}")));
    if msg.trim().is_empty() {
        return fail("empty error");
    }
    if msg.contains(['\n', '\r']) {
        return fail("error on more than one line");
    }
    if msg.chars().count() > MAX_ERROR_LEN {
        return fail("error too long");
    }
    if !names.is_empty() && !names.iter().any(|n| msg.contains(n)) {
        return Err(TestCaseError::fail(format!(
            "error names none of {names:?}: {msg:?}"
        )));
    }
    if !says_fix(msg) {
        return fail("error does not say what to do");
    }
    Ok(())
}

/// True when the message contains one of [`FIX_WORDS`] (any case).
pub fn says_fix(msg: &str) -> bool {
    let lower = msg.to_lowercase();
    FIX_WORDS.iter().any(|w| lower.contains(w))
}

/// A valid `key = value` text (TOML) with one line changed: its value replaced by one of
/// `values`, the line removed, doubled, or replaced by junk. Returns the text, the line's key
/// (if it has one, without quotes) and the number of the line the change shows at (1-based; a
/// doubled line clashes where its copy is, one line down).
pub fn one_line_changed(
    base: &'static str,
    values: impl Strategy<Value = String>,
) -> impl Strategy<Value = (String, String, usize)> {
    let n = base.lines().count();
    (0..n, 0..4u8, values, ".{0,30}").prop_map(move |(i, how, value, junk)| {
        let mut out: Vec<String> = base.lines().map(str::to_owned).collect();
        let key = out[i]
            .split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"').to_owned())
            .unwrap_or_default();
        match how {
            0 if !key.is_empty() => {
                let k = out[i]
                    .split_once('=')
                    .map(|(k, _)| k.to_owned())
                    .unwrap_or_default();
                out[i] = format!("{k}= {value}");
            }
            1 => out[i] = String::new(),
            2 => {
                let l = out[i].clone();
                out.insert(i, l);
            }
            _ => out[i] = junk,
        }
        let line = if how == 2 { i + 2 } else { i + 1 };
        (out.join("\n"), key, line)
    })
}
