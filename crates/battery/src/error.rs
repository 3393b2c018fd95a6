//! Errors of the battery and the corpus, each naming what failed and what to do.

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum BatteryError {
    /// A part of the battery failed.
    #[error("battery: {part}: {problem}")]
    Part {
        /// The part (`stream`, `crr`, ...).
        part: String,
        /// What failed.
        problem: String,
    },
    /// The lab could not be built or used.
    #[error(transparent)]
    Lab(#[from] tcplab_lab::LabError),
    /// Bad usage.
    #[error("{field}: {problem}")]
    Invalid {
        /// The flag or field.
        field: String,
        /// What is wrong and the fix.
        problem: String,
    },
}

/// Result alias.
pub type Result<T, E = BatteryError> = std::result::Result<T, E>;
