//! How alerts read to a person, pure: the monitor's log line for each change and the
//! `tcplab monitor alerts` listing, from the same typed rows the webhook sends.

use std::fmt::Write as _;

use crate::evidence::Cause;
use crate::run::{Change, Notice};
use crate::store::AlertRow;

impl AlertRow {
    /// `h1 -> h2 stream throughput_bps`.
    pub fn what(&self) -> String {
        format!(
            "{} -> {} {} {}",
            self.src, self.dst, self.workload, self.figure
        )
    }

    /// How much worse, against what.
    pub fn how_much(&self) -> String {
        let c = &self.check;
        format!(
            "{:.0} % worse than its history (median {}, newest best {}; p = {:.4}, {} earlier runs)",
            c.worse_by * 100.0,
            figure_value(&self.figure, c.baseline),
            figure_value(&self.figure, c.recent),
            c.p_value,
            c.history_used
        )
    }

    /// The cause its evidence names, or that there is none yet.
    pub fn cause(&self) -> Cause {
        self.evidence
            .as_ref()
            .map_or(Cause::Pending, |e| e.cause.clone())
    }

    /// The listing's entry: what, how much, since when, the cause and the doctor's findings
    /// with their first fix.
    pub fn report(&self) -> String {
        let mut out = format!("{}: ", self.what());
        match self.closed_ms {
            Some(c) => {
                let _ = write!(
                    out,
                    "closed after {:.0} min",
                    c.saturating_sub(self.opened_ms) as f64 / 60e3
                );
            }
            None => out.push_str("open"),
        }
        let _ = write!(
            out,
            ", opened at {} (Unix ms)\n  {}\n  cause: {}",
            self.opened_ms,
            self.how_much(),
            self.cause()
        );
        for f in self.evidence.iter().flat_map(|e| &e.findings) {
            let _ = write!(out, "\n  [{}] {}: {}", f.severity, f.id, f.title);
            if let Some(fix) = f.fixes.first() {
                let first = fix.lines.first().map_or("", String::as_str);
                let _ = write!(out, "\n      fix ({}): {first}", fix.applies_to);
            }
        }
        out
    }
}

impl Notice {
    /// The monitor's log line for this change.
    pub fn line(&self) -> String {
        let a = &self.alert;
        match self.change {
            Change::Opened => format!("regression {}: {}", a.what(), a.how_much()),
            Change::Diagnosed => format!("regression {}: {}", a.what(), a.cause()),
            Change::Closed => format!("{} is back", a.what()),
        }
    }
}

/// A figure's value in its unit, as its name says (`_bps`, `_s`, per second, counts).
fn figure_value(figure: &str, v: f64) -> String {
    if figure.ends_with("_bps") {
        format!("{:.1} Mbit/s", v / 1e6)
    } else if figure.ends_with("_s") {
        format!("{:.3} ms", v * 1e3)
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use tcplab_doctor::{Finding, Severity};

    use super::*;
    use crate::evidence::Evidence;

    #[test]
    fn an_alert_reads_with_its_figures_and_its_cause() {
        let mut a = crate::store::sample_alert();
        let r = a.report();
        assert!(r.starts_with("h1 -> h2 stream throughput_bps: open"), "{r}");
        assert!(
            r.contains("67 % worse") && r.contains("940.0 Mbit/s"),
            "{r}"
        );
        assert!(
            r.contains("310.0 Mbit/s") && r.contains("p = 0.0048"),
            "{r}"
        );
        assert!(r.contains("cause: the doctor has not run yet"), "{r}");
        a.evidence = Some(Evidence::of(
            vec![Finding::new(
                "rwnd_limited",
                Severity::Warning,
                "the receive window limits the stream",
            )],
            70_000,
        ));
        a.closed_ms = Some(180_000);
        let r = a.report();
        assert!(r.contains("closed after 2 min"), "{r}");
        assert!(r.contains("cause: the doctor finds rwnd_limited"), "{r}");
        assert!(
            r.contains("[warning] rwnd_limited: the receive window limits the stream"),
            "{r}"
        );
        let n = Notice {
            change: Change::Diagnosed,
            alert: a,
        };
        assert_eq!(
            n.line(),
            "regression h1 -> h2 stream throughput_bps: the doctor finds rwnd_limited"
        );
    }
}
