//! tcplab-text: how every crate's one-line messages quote text they did not write (a value a
//! user gave, a reason a peer sent, a TOML parser's words). Messages are one line a reader takes
//! in at once, so what is quoted is escaped (a newline or a NUL cannot break the line) and cut.
//!
//! Pure, with no dependencies, so the lowest crates (the link model, the results) and the
//! highest share one wording; `tcplab_emu::error` re-exports it for its callers.

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
