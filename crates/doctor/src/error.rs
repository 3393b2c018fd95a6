//! The doctor's own errors. Diagnosing never fails (a rule that cannot judge stays silent or
//! says so in an `untrustworthy` finding); only parsing user input can.

use thiserror::Error;

/// Errors from parsing doctor options.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DoctorError {
    /// `--fail-on` (or a JSON severity) named no known severity.
    #[error("unknown severity {0:?} for --fail-on: use info, warning, error or critical")]
    UnknownSeverity(String),
}
