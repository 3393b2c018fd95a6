//! What every parser property test asserts, shared by the crates' `tests/parse_props.rs`
//! (each includes this file with `#[path]`): a parser given any input returns within a bound,
//! never panics, and an error is one line that names what to fix and says how.
//!
//! Cases: `PROPTEST_CASES` (proptest's own variable) or proptest's default of 256;
//! `benches/fuzz.sh` runs the same suites with many more.
#![allow(dead_code)]

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

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
