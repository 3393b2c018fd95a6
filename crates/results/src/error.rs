//! The one error of this crate: a configuration value that is out of range or inconsistent
//! with another. Its message names the flag, because the CLI prints it as the one-line
//! diagnosis the user sees; the workloads' `LoadError::Config` carries it unchanged.

/// A configuration value is out of range or inconsistent with another one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --{flag}: {reason}")]
pub struct ConfigError {
    /// The command-line flag (without dashes) the value came from.
    pub flag: &'static str,
    /// What is wrong and what would be accepted.
    pub reason: String,
}

/// Shorthand for a [`ConfigError`].
pub(crate) fn config(flag: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        reason: reason.into(),
    }
}

/// Every counted or timed workload is bounded: by `--count`, `--duration` or both, neither 0.
pub fn check_bounds(count: Option<u64>, duration_ms: Option<u64>) -> Result<(), ConfigError> {
    match (count, duration_ms) {
        (None, None) => Err(config(
            "count",
            "give --count or --duration (every run is bounded)",
        )),
        (Some(0), _) => Err(config("count", "must be at least 1")),
        (_, Some(0)) => Err(config("duration", "must be above 0 s")),
        _ => Ok(()),
    }
}
