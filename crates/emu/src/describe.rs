//! A [`LinkConfig`] written for people: the values in the syntax the flags take (`10ms`,
//! `1gbit`, `0.1%`), so `tcplab lab set`, `tcplab lab status` and `tcplab emu` print what is in
//! force the way a user would have typed it, and a printed value pastes back into a flag.
//!
//! The writers are exact: [`format_duration`] and [`format_rate`] never round (a value that
//! needs nine decimals gets them), and [`format_percent`] keeps six decimals of a percent, more
//! than any flag value parsed from text carries, so `parse(format(x))` gives `x` back for
//! every value that came from a flag.

use std::fmt;

use crate::{DirectionConfig, Distribution, Jitter, LinkConfig, Loss, QueueLimit, Reorder};

/// Writes ns in the largest unit (s, ms, us) the value reaches, with every decimal it needs:
/// `10ms`, `2.09ms`, `250us`, `1.000000001s`, `800ns`, `0`.
pub fn format_duration(ns: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
    if ns == 0 {
        return "0".to_owned();
    }
    for (per, unit) in UNITS {
        if ns >= per {
            return format!("{}{unit}", exact_quotient(ns, per));
        }
    }
    format!("{ns}ns")
}

/// Writes bits/s the same way: `1gbit`, `2.5mbit`, `100kbit`, `800bit`.
pub fn format_rate(bps: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "tbit"),
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ];
    for (per, unit) in UNITS {
        if bps >= per {
            return format!("{}{unit}", exact_quotient(bps, per));
        }
    }
    format!("{bps}bit")
}

/// Writes a probability as a percentage with at most six decimals (0.001 → `0.1%`), or as
/// many as it takes to show a non-zero one (1e-9 → `0.0000001%`, never `0%`).
pub fn format_percent(p: f64) -> String {
    let x = p * 100.0;
    let mut text = String::from("0");
    for decimals in 6..=15 {
        let s = format!("{x:.decimals$}");
        text = s.trim_end_matches('0').trim_end_matches('.').to_owned();
        if text != "0" || x == 0.0 {
            break;
        }
    }
    format!("{text}%")
}

/// A measured size in bytes as `826 B`, `1.5 kB`, `12.3 MB`, `4.56 GB` (decimal units, three significant digits).
pub fn format_bytes(n: u64) -> String {
    scaled(
        n,
        &[(1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "kB")],
        "B",
    )
}

/// A measured time in ns as `740 ns`, `14.7 µs`, `2.36 ms` (three significant digits at most;
/// configured durations are written exactly by [`format_duration`]).
pub fn format_ns(ns: u64) -> String {
    scaled(
        ns,
        &[(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs")],
        "ns",
    )
}

/// `n` in the largest of `units` (largest first) it reaches, with three significant digits;
/// below them all, whole `base` units.
fn scaled(n: u64, units: &[(u64, &str)], base: &str) -> String {
    for &(per, unit) in units {
        if n >= per {
            let x = n as f64 / per as f64;
            let decimals = if x >= 100.0 {
                0
            } else if x >= 10.0 {
                1
            } else {
                2
            };
            return format!("{x:.decimals$} {unit}");
        }
    }
    format!("{n} {base}")
}

/// `n / per` in decimal without rounding (`per` is a power of ten): 2_090_000 / 10^6 → `2.09`.
fn exact_quotient(n: u64, per: u64) -> String {
    let (whole, rest) = (n / per, n % per);
    if rest == 0 {
        return whole.to_string();
    }
    let digits = per.ilog10() as usize;
    let fraction = format!("{rest:0digits$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

impl fmt::Display for QueueLimit {
    /// `1000` (packets, as `--queue` reads a bare number) or `262144b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Packets(n) => write!(f, "{n}"),
            Self::Bytes(n) => write!(f, "{n}b"),
        }
    }
}

impl fmt::Display for Loss {
    /// `0.1%`, `ge:1%,10%,100%,0% (mean 9.091%)` or `pattern: 1 of every 41`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bernoulli { probability } => f.write_str(&format_percent(*probability)),
            Self::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => write!(
                f,
                "ge:{},{},{},{} (mean {:.3}%)",
                format_percent(*p),
                format_percent(*r),
                format_percent(*one_minus_h),
                format_percent(*one_minus_k),
                self.mean_loss() * 100.0
            ),
            Self::Pattern(pattern) => write!(
                f,
                "pattern: {} of every {}",
                pattern.drops().len(),
                pattern.period()
            ),
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uniform => f.write_str("uniform"),
            Self::Normal => f.write_str("normal"),
            Self::Pareto => f.write_str("pareto"),
            Self::Paretonormal => f.write_str("paretonormal"),
            Self::Table(_) => f.write_str("table"),
        }
    }
}

impl fmt::Display for Jitter {
    /// `1ms normal`, then `correlation 25%` and `may reorder` when set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}",
            format_duration(self.amount_ns),
            self.distribution
        )?;
        if self.correlation > 0.0 {
            write!(f, ", correlation {}", format_percent(self.correlation))?;
        }
        if self.allow_reorder {
            f.write_str(", may reorder")?;
        }
        Ok(())
    }
}

impl fmt::Display for Reorder {
    /// `1%` or `1% gap:5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_percent(self.probability))?;
        if self.gap > 1 {
            write!(f, " gap:{}", self.gap)?;
        }
        Ok(())
    }
}

impl DirectionConfig {
    /// Each impairment in force as (name, value), in the flags' order; empty when the
    /// direction is transparent.
    pub fn described(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.delay_ns > 0 {
            out.push(("delay", format_duration(self.delay_ns)));
        }
        if let Some(j) = self.jitter.as_ref().filter(|j| j.amount_ns > 0) {
            out.push(("jitter", j.to_string()));
        }
        if let Some(loss) = self.loss.as_ref().filter(|l| !l.is_lossless()) {
            out.push(("loss", loss.to_string()));
        }
        if let Some(rate) = self.rate_bps {
            out.push(("rate", format_rate(rate)));
            out.push(("queue", self.queue_limit().to_string()));
            if let Some(d) = &self.queue_discipline {
                out.push(("queue discipline", crate::aqm::spec::describe(d)));
            }
            if self.overhead_bytes > 0 {
                out.push(("overhead", format!("{}b", self.overhead_bytes)));
            }
        }
        if let Some(r) = self.reorder.as_ref().filter(|r| r.probability > 0.0) {
            out.push(("reorder", r.to_string()));
        }
        if self.duplicate > 0.0 {
            out.push(("duplicate", format_percent(self.duplicate)));
        }
        if self.corrupt > 0.0 {
            out.push(("corrupt", format_percent(self.corrupt)));
        }
        out
    }
}

impl fmt::Display for DirectionConfig {
    /// `delay 10ms, loss 0.1%, rate 1gbit, queue 1000`, or `no impairment`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = self.described();
        if parts.is_empty() {
            return f.write_str("no impairment");
        }
        let text: Vec<String> = parts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        f.write_str(&text.join(", "))
    }
}

impl LinkConfig {
    /// One line when both directions are the same (`each way: delay 10ms`), else one per
    /// direction (`client→server: delay 10ms`, `server→client: delay 2ms`). The seed is left
    /// out: the one in force may have been picked at start, so callers print the running one.
    pub fn described_lines(&self) -> Vec<String> {
        if self.forward == self.reverse {
            vec![format!("each way: {}", self.forward)]
        } else {
            vec![
                format!("client→server: {}", self.forward),
                format!("server→client: {}", self.reverse),
            ]
        }
    }
}

impl fmt::Display for LinkConfig {
    /// [`LinkConfig::described_lines`] on one line, joined by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.described_lines().join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ImpairmentFlags;
    use crate::spec::{parse_duration, parse_percent, parse_rate};

    #[test]
    fn durations_are_exact_in_the_largest_unit_reached() {
        let cases = [
            (0, "0"),
            (800, "800ns"),
            (1_000, "1us"),
            (250_000, "250us"),
            (2_090_000, "2.09ms"),
            (10_000_000, "10ms"),
            (1_234_567, "1.234567ms"),
            (1_500_000_000, "1.5s"),
            (1_000_000_001, "1.000000001s"),
        ];
        for (ns, text) in cases {
            assert_eq!(format_duration(ns), text);
            assert_eq!(parse_duration(text).unwrap(), ns, "{text} reads back");
        }
    }

    #[test]
    fn rates_are_exact_in_the_largest_unit_reached() {
        let cases = [
            (800, "800bit"),
            (100_000, "100kbit"),
            (2_500_000, "2.5mbit"),
            (100_000_000, "100mbit"),
            (1_000_000_000, "1gbit"),
            (1_000_000_007, "1.000000007gbit"),
            (400_000_000_000, "400gbit"),
            (1_000_000_000_000, "1tbit"),
        ];
        for (bps, text) in cases {
            assert_eq!(format_rate(bps), text);
            assert_eq!(parse_rate(text).unwrap(), bps, "{text} reads back");
        }
    }

    #[test]
    fn percentages_read_back_to_the_same_probability() {
        for text in ["0.1%", "1%", "100%", "0.0001%", "33.333333%", "12.5%"] {
            let p = parse_percent(text).unwrap();
            assert_eq!(format_percent(p), text);
            assert_eq!(parse_percent(&format_percent(p)).unwrap(), p);
        }
        assert_eq!(format_percent(0.0), "0%");
        assert_eq!(
            format_percent(1e-9),
            "0.0000001%",
            "a non-zero value never reads 0%"
        );
        let tiny = parse_percent("0.0000001%").unwrap();
        assert_eq!(format_percent(tiny), "0.0000001%");
    }

    fn link(flags: ImpairmentFlags) -> LinkConfig {
        flags.to_link_config().unwrap()
    }

    #[test]
    fn a_symmetric_link_is_written_once_in_the_flags_order() {
        let cfg = link(ImpairmentFlags {
            delay: Some("10ms".into()),
            jitter: Some("1ms".into()),
            jitter_dist: Some("paretonormal".into()),
            correlation: Some("25%".into()),
            loss: Some("0.1%".into()),
            rate: Some("1gbit".into()),
            queue: Some("256kb".into()),
            overhead: Some("24".into()),
            reorder: Some("1%,gap:5".into()),
            duplicate: Some("0.5%".into()),
            corrupt: Some("0.01%".into()),
            seed: Some("42".into()),
            ..Default::default()
        });
        assert_eq!(
            cfg.to_string(),
            "each way: delay 10ms, jitter 1ms paretonormal, correlation 25%, loss 0.1%, \
             rate 1gbit, queue 262144b, overhead 24b, reorder 1% gap:5, duplicate 0.5%, \
             corrupt 0.01%"
        );
    }

    #[test]
    fn directions_that_differ_are_named_and_the_default_queue_is_shown() {
        let cfg = link(ImpairmentFlags {
            delay: Some("10ms/2ms".into()),
            loss_model: Some("ge:1%,10%/bernoulli".into()),
            ..Default::default()
        });
        assert_eq!(
            cfg.to_string(),
            "client→server: delay 10ms, loss ge:1%,10%,100%,0% (mean 9.091%); \
             server→client: delay 2ms"
        );
        let rated = link(ImpairmentFlags {
            rate: Some("100mbit".into()),
            ..Default::default()
        });
        assert_eq!(rated.to_string(), "each way: rate 100mbit, queue 1000");
    }

    #[test]
    fn a_transparent_link_says_so_and_lossless_or_zero_elements_are_left_out() {
        assert_eq!(LinkConfig::default().to_string(), "each way: no impairment");
        let cfg = link(ImpairmentFlags {
            loss: Some("0%".into()),
            reorder: Some("0%".into()),
            ..Default::default()
        });
        assert_eq!(cfg.to_string(), "each way: no impairment");
        let one_way = link(ImpairmentFlags {
            delay: Some("0/5ms".into()),
            ..Default::default()
        });
        assert_eq!(
            one_way.to_string(),
            "client→server: no impairment; server→client: delay 5ms"
        );
    }

    #[test]
    fn patterns_and_tables_are_summarised_not_dumped() {
        let cfg = link(ImpairmentFlags {
            loss_model: Some("bits:0001".into()),
            ..Default::default()
        });
        assert_eq!(cfg.to_string(), "each way: loss pattern: 1 of every 4");
        let table = crate::DistTable::parse("0 1 -1 2").unwrap();
        let jitter = Jitter {
            amount_ns: 2_000_000,
            distribution: Distribution::Table(table),
            correlation: 0.0,
            allow_reorder: true,
        };
        assert_eq!(jitter.to_string(), "2ms table, may reorder");
    }
}
