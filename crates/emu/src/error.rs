//! Errors: [`ValueError`] says what is wrong with one value, [`ConfigError`] says where the value
//! came from (a command-line flag or a config field) so the message names what to fix.
//!
//! A flag error reads `--loss 120%: loss must be between 0% and 100%`; a field error reads
//! `forward.loss.probability: loss must be between 0% and 100%`.

use thiserror::Error;

/// Longest user value echoed in a message; a longer one is cut with `…`.
const SHOWN_CHARS: usize = 60;
/// Longest composed reason; messages are one line a reader takes in at once.
const REASON_CHARS: usize = 300;

/// A value as the user wrote it, fit for a one-line message: control characters (a newline
/// in a scenario string, a NUL from a damaged file) escaped, and cut after a few dozen
/// characters so a wrong file named as a value does not fill the terminal.
pub fn shown(text: &str) -> String {
    cut(text, SHOWN_CHARS)
}

/// A composed reason (which may quote user text) on one line, cut like [`shown`] but longer.
pub fn one_line(text: &str) -> String {
    cut(text, REASON_CHARS)
}

/// A TOML parser's error on one line: where (line and column of `span`'s start in `text`), the
/// parser's `message` flattened, and what to do ([`toml_fix`]). toml's own text quotes the
/// source under a caret, over several lines; its `message()` and `span()` are passed here as
/// parts, so this crate needs no TOML parser. Lab files, hosts files and corpora all say it so.
pub fn toml_message(text: &str, message: &str, span: Option<std::ops::Range<usize>>) -> String {
    let message = message.trim().replace(['\n', '\r'], " ");
    let at = span
        .as_ref()
        .and_then(|r| text.get(..r.start))
        .map(|before| {
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: ")
        })
        .unwrap_or_default();
    let key = span.and_then(|r| text.get(r)).filter(|k| !k.is_empty());
    let message = match key {
        Some(k) if message == "duplicate key" => format!("duplicate key `{}`", k.trim()),
        _ => message,
    };
    format!("{at}{message}{}", toml_fix(&message))
}

/// What to do about a TOML error, by the parser's message: `; write each key once` for a
/// duplicate key, `; add `x`` for a missing field, nothing when the message already says what
/// was expected, else to check the syntax where it points.
pub fn toml_fix(message: &str) -> String {
    if message.starts_with("duplicate key") {
        "; write each key once".to_owned()
    } else if let Some(field) = message.strip_prefix("missing field ") {
        format!("; add {field}")
    } else if message.contains("expected") {
        String::new()
    } else {
        "; check the TOML syntax there".to_owned()
    }
}

/// At most `max` characters of `text` as shown (a control character counts as its escape, which
/// is several), then `…` if any were left out.
fn cut(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for c in text.chars() {
        let escaped = c.is_control().then(|| c.escape_default());
        let width = escaped.clone().map_or(1, Iterator::count);
        if shown + width > max {
            out.push('…');
            break;
        }
        shown += width;
        match escaped {
            Some(e) => out.extend(e),
            None => out.push(c),
        }
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by tcplab-load's `control_frames_read_back_and_damage_is_one_line`: control
    /// characters were escaped after the cut, so 300 NULs a peer sent came out as 1,800
    /// characters.
    #[test]
    fn escapes_count_toward_the_cut() {
        let reason = one_line(&"\0".repeat(1_000));
        assert!(reason.chars().count() <= REASON_CHARS + 1, "{reason}");
        assert!(
            reason.starts_with("\\u{0}") && reason.ends_with('…'),
            "{reason}"
        );
        assert_eq!(shown("a\nb"), "a\\nb");
        let exact = "x".repeat(SHOWN_CHARS);
        assert_eq!(shown(&exact), exact);
        assert_eq!(shown(&format!("{exact}y")), format!("{exact}…"));
    }
}
