//! The one error type of the crate: bad input (unknown baseline, non-finite samples) and the
//! rare failure of the SVG backend.

use tcplab_stats::StatsError;

/// Why a table, plot or report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// `baseline` names a configuration that is not among `configurations`.
    #[error(
        "baseline {label:?} is not one of the configurations ({known}); set `baseline` to one of their labels or leave it empty"
    )]
    UnknownBaseline {
        /// The label that was asked for.
        label: String,
        /// The labels that exist, comma-separated.
        known: String,
    },
    /// Two configurations carry the same label, so rows and rankings would be ambiguous.
    #[error(
        "configuration label {label:?} appears twice; give every configuration a unique `label`"
    )]
    DuplicateLabel {
        /// The repeated label.
        label: String,
    },
    /// The statistics crate rejected one configuration's samples (NaN, infinity, too few).
    #[error("configuration {label:?}: {source}")]
    Stats {
        /// The configuration whose samples were rejected.
        label: String,
        /// What was wrong with them.
        #[source]
        source: StatsError,
    },
    /// A sweep plot asked for a factor whose values are not numbers.
    #[error(
        "sweep plot factor {factor:?}: value {value:?} is not a number (optionally followed by a unit such as \"20ms\"); plot a numeric factor"
    )]
    NonNumericFactor {
        /// The factor on the x axis.
        factor: String,
        /// The offending value.
        value: String,
    },
    /// The plotting backend failed while drawing (a bug: it writes into a String).
    #[error("drawing {what}: {message}")]
    Draw {
        /// Which plot was being drawn.
        what: String,
        /// The backend's message.
        message: String,
    },
    /// JSON serialisation failed (a bug: every field is a plain value).
    #[error("JSON export: {0}")]
    Json(#[from] serde_json::Error),
}
