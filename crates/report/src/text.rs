//! Terminal text: wrapping prose to a width, and the few ANSI styles the tables use (only
//! when the caller says the output is a colour terminal).

/// How terminal text is laid out: its width in columns and whether ANSI colour may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Columns available; tables and prose fit in it.
    pub width: usize,
    /// ANSI colour and bold (a terminal without `NO_COLOR`).
    pub color: bool,
}

impl Default for Layout {
    /// 100 columns, no colour: what a pipe, a file or a log gets.
    fn default() -> Layout {
        Layout {
            width: 100,
            color: false,
        }
    }
}

/// A style for [`Layout::paint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// No style.
    Plain,
    /// The consistently fast group.
    Good,
    /// Failed configurations.
    Bad,
    /// Headers.
    Bold,
    /// Secondary text (dropped configurations, the key).
    Dim,
}

impl Layout {
    /// `s` in `style` when colour is on; `s` unchanged otherwise.
    pub fn paint(&self, s: &str, style: Style) -> String {
        if !self.color || s.is_empty() || style == Style::Plain {
            return s.to_string();
        }
        let code = match style {
            Style::Plain => "0",
            Style::Good => "32",
            Style::Bad => "31",
            Style::Bold => "1",
            Style::Dim => "2",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    }
}

/// `text` wrapped at spaces into lines of at most `width` characters (a word longer than
/// the width gets a line of its own); lines after the first start with `indent`.
pub fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let width = width.max(indent.chars().count() + 10);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        let fresh = line.is_empty() || line == indent;
        if !fresh && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str(indent);
        }
        if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.trim().is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` wrapped as [`wrap`] does, joined with newlines (no trailing newline).
pub fn wrap_str(text: &str, width: usize, indent: &str) -> String {
    text.lines()
        .flat_map(|l| wrap(l, width, indent))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_and_the_width() {
        let text = "bulk transfer limited by the receiver's window 7% of its busy time at 24.0 Mbit/s (rwnd_limited)";
        let lines = wrap(text, 40, "  ");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(lines[1..].iter().all(|l| l.starts_with("  ")));
        let joined: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(joined, text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn a_long_word_gets_its_own_line() {
        let lines = wrap("a sysctl.all.\"net.ipv4.tcp_rmem\"=4096 b", 12, "");
        assert_eq!(lines, ["a", "sysctl.all.\"net.ipv4.tcp_rmem\"=4096", "b"]);
    }

    #[test]
    fn colour_only_when_asked() {
        let plain = Layout::default();
        assert_eq!(plain.paint("x", Style::Good), "x");
        let tty = Layout {
            width: 100,
            color: true,
        };
        assert_eq!(tty.paint("x", Style::Good), "\x1b[32mx\x1b[0m");
    }
}
