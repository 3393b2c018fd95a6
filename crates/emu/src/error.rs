//! Errors: [`ValueError`] says what is wrong with one value, [`ConfigError`] says where the value
//! came from (a command-line flag or a config field) so the message names what to fix.
//!
//! The quoting of user text (`shown`, `one_line`, TOML errors) is `tcplab_text`'s, re-exported here.
//!
//! A flag error reads `--loss 120%: loss must be between 0% and 100%`; a field error reads
//! `forward.loss.probability: loss must be between 0% and 100%`.

use thiserror::Error;

pub use tcplab_text::{one_line, shown, toml_fix, toml_message};

/// What is wrong with one user value, independent of where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    /// The value is empty.
    #[error("empty value: {hint}")]
    Empty {
        /// An example of a valid value.
        hint: &'static str,
    },
    /// The numeric part does not parse.
    #[error("`{}` is not a number: {hint}", shown(.text))]
    NotANumber {
        /// The offending text.
        text: String,
        /// An example of a valid value.
        hint: &'static str,
    },
    /// A number without a unit where one is needed.
    #[error("missing unit: {hint}")]
    MissingUnit {
        /// An example of a valid value.
        hint: &'static str,
    },
    /// A unit that is not known.
    #[error("unknown unit `{}`: use {allowed}", shown(.unit))]
    UnknownUnit {
        /// The offending unit.
        unit: String,
        /// The accepted units.
        allowed: &'static str,
    },
    /// A value outside its allowed range.
    #[error("{what} must be {range}")]
    OutOfRange {
        /// The quantity, e.g. "loss".
        what: &'static str,
        /// The allowed range in words, e.g. "between 0% and 100%".
        range: &'static str,
    },
    /// A keyword that is not one of the accepted ones.
    #[error("unknown {what} `{}`: use {allowed}", shown(.got))]
    UnknownKeyword {
        /// What the keyword names, e.g. "distribution".
        what: &'static str,
        /// The offending keyword.
        got: String,
        /// The accepted keywords.
        allowed: &'static str,
    },
    /// A malformed line in a loss-pattern or distribution-table text.
    #[error("line {line}: {}", one_line(.reason))]
    BadLine {
        /// 1-based line number in the text.
        line: usize,
        /// What is wrong and how to write it instead.
        reason: String,
    },
    /// Any other malformed value, with the fix in words.
    #[error("{}", one_line(.0))]
    Invalid(String),
}

/// A configuration that cannot be used, naming the flag or field to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// A command-line flag (or scenario key written like one) with a bad value.
    #[error("{flag} {}: {source}", shown(.value))]
    Flag {
        /// The flag, e.g. `--loss`.
        flag: &'static str,
        /// The value as the user wrote it.
        value: String,
        /// What is wrong with it.
        source: ValueError,
    },
    /// A field of a [`crate::LinkConfig`] (e.g. from a scenario file) with a bad value.
    #[error("{field}: {source}")]
    Field {
        /// Dotted path of the field, e.g. `forward.loss.probability`.
        field: String,
        /// What is wrong with it.
        source: ValueError,
    },
    /// Two settings that cannot be used together.
    #[error("{first} and {second} conflict: {fix}")]
    Conflict {
        /// One of the settings.
        first: &'static str,
        /// The other.
        second: &'static str,
        /// How to resolve it.
        fix: &'static str,
    },
    /// A setting that only means something together with another one.
    #[error("{flag} needs {needs}: {fix}")]
    Needs {
        /// The setting given.
        flag: &'static str,
        /// The setting it depends on.
        needs: &'static str,
        /// Why, and what to add.
        fix: &'static str,
    },
    /// A file named by a flag could not be read by the caller's reader.
    #[error(
        "{flag}: cannot read `{}`: {}; check the path",
        shown(.path),
        one_line(.reason)
    )]
    File {
        /// The flag that named the file.
        flag: &'static str,
        /// The path as given.
        path: String,
        /// The reader's error text.
        reason: String,
    },
}

impl ConfigError {
    /// Prefixes a field error with a parent path (`loss` becomes `forward.loss`); other
    /// variants are returned unchanged.
    #[must_use]
    pub fn within(self, parent: &str) -> Self {
        match self {
            Self::Field { field, source } => Self::Field {
                field: format!("{parent}.{field}"),
                source,
            },
            other => other,
        }
    }

    /// A field error for `field`.
    pub(crate) fn field(field: &str, source: ValueError) -> Self {
        Self::Field {
            field: field.to_owned(),
            source,
        }
    }
}
