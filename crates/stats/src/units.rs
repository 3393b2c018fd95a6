//! Units per metric: figures are stored and exported in base units (bit/s, s, µs, 1/s, bytes)
//! and shown in the unit a reader expects at their magnitude (Mbit/s, ms, k/s), one unit per
//! column or axis so the numbers in it compare at a glance.

/// A metric's base unit, as the objective spells it ("bit/s", "s", "µs", "1/s", "bytes").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit {
    /// Bits per second.
    BitsPerSecond,
    /// Seconds.
    Seconds,
    /// Microseconds.
    Microseconds,
    /// Events per second.
    PerSecond,
    /// Bytes.
    Bytes,
    /// Anything else: shown as given, unscaled ("segments", "", "x").
    Other(String),
}

/// How one column or axis shows values: divide by `divisor`, print `symbol`.
#[derive(Debug, Clone, PartialEq)]
pub struct Display {
    /// Base units per displayed unit (1e6 for Mbit/s).
    pub divisor: f64,
    /// The displayed unit ("Mbit/s"); empty for a count without unit.
    pub symbol: String,
}

impl Display {
    /// `x` in the displayed unit.
    pub fn scale(&self, x: f64) -> f64 {
        x / self.divisor
    }

    /// The unit as an axis or header suffix: " (Mbit/s)", or "" without a unit.
    pub fn suffix(&self) -> String {
        if self.symbol.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.symbol)
        }
    }
}

impl Unit {
    /// The unit named by an objective or metric unit string.
    pub fn parse(s: &str) -> Unit {
        match s.trim() {
            "bit/s" | "bps" | "b/s" => Unit::BitsPerSecond,
            "s" | "seconds" | "second" | "sec" => Unit::Seconds,
            "µs" | "us" | "microseconds" => Unit::Microseconds,
            "1/s" | "/s" | "per second" | "ops/s" => Unit::PerSecond,
            "bytes" | "B" | "byte" => Unit::Bytes,
            other => Unit::Other(other.to_string()),
        }
    }

    /// The base unit's own symbol (for CSV and JSON names).
    pub fn base_symbol(&self) -> String {
        match self {
            Unit::BitsPerSecond => "bit/s".into(),
            Unit::Seconds => "s".into(),
            Unit::Microseconds => "µs".into(),
            Unit::PerSecond => "/s".into(),
            Unit::Bytes => "B".into(),
            Unit::Other(s) => s.clone(),
        }
    }

    /// A suffix for machine-readable names in ASCII: `_bps`, `_s`, `_us`, `_per_s`,
    /// `_bytes`, or empty.
    pub fn name_suffix(&self) -> &'static str {
        match self {
            Unit::BitsPerSecond => "_bps",
            Unit::Seconds => "_s",
            Unit::Microseconds => "_us",
            Unit::PerSecond => "_per_s",
            Unit::Bytes => "_bytes",
            Unit::Other(_) => "",
        }
    }

    /// The display for a set of values: the largest magnitude decides, so that it reads
    /// between 1 and 1000 (746e6 bit/s → Mbit/s; 0.0213 s → ms).
    pub fn display_for(&self, values: impl IntoIterator<Item = f64>) -> Display {
        let largest = values
            .into_iter()
            .filter(|v| v.is_finite())
            .map(f64::abs)
            .fold(0.0, f64::max);
        let pick = |steps: &[(f64, &str)]| {
            if largest == 0.0 {
                let base = steps.iter().find(|(d, _)| *d == 1.0).unwrap_or(&steps[0]);
                return Display {
                    divisor: 1.0,
                    symbol: base.1.to_string(),
                };
            }
            let (divisor, symbol) = steps
                .iter()
                .rev()
                .find(|(d, _)| largest >= *d)
                .unwrap_or(&steps[0]);
            Display {
                divisor: *divisor,
                symbol: (*symbol).to_string(),
            }
        };
        match self {
            Unit::BitsPerSecond => pick(&[
                (1.0, "bit/s"),
                (1e3, "kbit/s"),
                (1e6, "Mbit/s"),
                (1e9, "Gbit/s"),
            ]),
            Unit::Seconds => pick(&[(1e-6, "µs"), (1e-3, "ms"), (1.0, "s")]),
            Unit::Microseconds => pick(&[(1.0, "µs"), (1e3, "ms"), (1e6, "s")]),
            Unit::PerSecond => pick(&[(1.0, "/s"), (1e3, "k/s"), (1e6, "M/s")]),
            Unit::Bytes => pick(&[(1.0, "B"), (1e3, "kB"), (1e6, "MB"), (1e9, "GB")]),
            Unit::Other(s) => Display {
                divisor: 1.0,
                symbol: s.clone(),
            },
        }
    }
}

/// One value with its own unit, three significant digits: `746 Mbit/s`, `21.3 ms`.
pub fn human(x: f64, unit: &Unit) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    let d = unit.display_for([x]);
    let v = significant(d.scale(x), 3);
    if d.symbol.is_empty() {
        v
    } else {
        format!("{v} {}", d.symbol)
    }
}

/// `x` rounded to `digits` significant digits, trailing zeros dropped (174760 → "170000" at
/// two digits; 0.02134 → "0.021").
pub fn significant(x: f64, digits: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i64;
    let excess = magnitude + 1 - digits as i64;
    if excess > 0 {
        let unit = 10f64.powi(excess as i32);
        return format!("{}", (x / unit).round() * unit);
    }
    let decimals = (-excess) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A metric's name for people: its unit suffix dropped, underscores and dots as spaces
/// (`throughput_bps` → "throughput", `latency_p99_us` → "latency p99", a field of a
/// summary `per_message_us.mean` → "per message mean").
pub fn metric_title(metric: &str) -> String {
    let (head, field) = match metric.split_once('.') {
        Some((h, f)) => (h, Some(f)),
        None => (metric, None),
    };
    // The unit is said beside the title: drop its suffix, from the head (`latency_us.p99`)
    // or, when the head has none, from the field (`inflation.during_p99_us`).
    let strip = |s: &'_ str| -> Option<String> {
        ["_per_s", "_bps", "_us", "_ms", "_ns", "_s", "_bytes"]
            .iter()
            .find_map(|suffix| s.strip_suffix(suffix).filter(|s| !s.is_empty()))
            .map(str::to_owned)
    };
    let (stem, field) = match strip(head) {
        Some(stem) => (stem, field.map(str::to_owned)),
        None => (
            head.to_owned(),
            field.map(|f| strip(f).unwrap_or_else(|| f.to_owned())),
        ),
    };
    let mut title = stem.replace('_', " ");
    if let Some(f) = field {
        title.push(' ');
        title.push_str(&f.replace(['_', '.'], " "));
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magnitudes_pick_the_prefix() {
        let bps = Unit::parse("bit/s");
        assert_eq!(bps.display_for([21.5e6, 746e6]).symbol, "Mbit/s");
        assert_eq!(bps.display_for([1.2e9]).symbol, "Gbit/s");
        assert_eq!(bps.display_for([0.0]).symbol, "bit/s");
        assert_eq!(Unit::parse("s").display_for([]).symbol, "s");
        assert_eq!(Unit::parse("s").display_for([0.0213]).symbol, "ms");
        assert_eq!(Unit::parse("s").display_for([12.0]).symbol, "s");
        assert_eq!(Unit::parse("µs").display_for([35.0, 19_800.0]).symbol, "ms");
        assert_eq!(Unit::parse("1/s").display_for([41_000.0]).symbol, "k/s");
        assert_eq!(
            Unit::parse("segments").display_for([5e6]).symbol,
            "segments"
        );
    }

    #[test]
    fn one_value_reads_with_its_unit() {
        assert_eq!(human(746_170_173.0, &Unit::BitsPerSecond), "746 Mbit/s");
        assert_eq!(human(0.0198, &Unit::Seconds), "19.8 ms");
        assert_eq!(human(f64::NAN, &Unit::Seconds), "-");
        assert_eq!(metric_title("throughput_bps"), "throughput");
        assert_eq!(metric_title("transactions_per_s"), "transactions");
        assert_eq!(metric_title("total_s"), "total");
        assert_eq!(metric_title("cost"), "cost");
        assert_eq!(metric_title("per_message_us.mean"), "per message mean");
        assert_eq!(metric_title("latency_us.p99"), "latency p99");
        assert_eq!(
            metric_title("inflation.during_p99_us"),
            "inflation during p99"
        );
    }
}
