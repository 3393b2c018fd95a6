//! Errors of tune and the demo, each naming what failed and what to do.

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The lab could not be built or used.
    #[error(transparent)]
    Lab(#[from] tcplab_lab::LabError),
    /// The candidate study failed.
    #[error(transparent)]
    Study(#[from] tcplab_study::error::StudyError),
    /// The generated scenario is invalid (a bug: it is generated, not written by a user).
    #[error("generated scenario: {0}")]
    Scenario(String),
    /// Bad usage.
    #[error("{field}: {problem}")]
    Invalid {
        /// The flag.
        field: String,
        /// What is wrong and the fix.
        problem: String,
    },
}

/// Result alias.
pub type Result<T, E = TuneError> = std::result::Result<T, E>;
