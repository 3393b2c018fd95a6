//! Parsers for the values people write: durations, rates, percentages, queue sizes, seeds and
//! the per-direction form `A/B`. Shared by `tcplab emu`, `tcplab lab up` and scenario files.
//!
//! | kind | accepted | examples |
//! |---|---|---|
//! | duration | `ns`, `us` (or `µs`), `ms`, `s`; a bare `0` | `10ms`, `250us`, `1.5s`, `0` |
//! | rate | `bit`, `kbit`, `mbit`, `gbit`, `tbit` and `bps`, `kbps`, `mbps`, `gbps`, or iperf's `k`, `m`, `g`, `t` (all **bits** per second, powers of 1000, any case) | `1gbit`, `100mbit`, `1.5Gbit`, `100M`, `1000000bps` |
//! | workload duration | as a duration, and a bare number is seconds (as iperf's `-t`) | `10`, `2.5`, `250ms` |
//! | size | a bare count or `b` for bytes; `k`/`kb`/`kib`, `m`/`mb`/`mib`, `g`/`gb`/`gib` (powers of 1024) | `64`, `128k`, `64KiB`, `1.5MiB` |
//! | percentage | a number and `%`; a bare `0` | `0.1%`, `1%`, `100%` |
//! | queue | a bare count or `p`/`pkt`/`pkts`/`packets` for packets; `b`, `kb`/`k`/`kib`, `mb`/`m`/`mib`, `gb`/`g`/`gib` for bytes (powers of 1024, as in tc) | `1000`, `64kb`, `1500b` |
//! | per direction | `A/B` = A client→server, B server→client; a bare value applies to both | `10ms/2ms` |
//!
//! Unlike tc, `bps` means bits per second (as in every link-speed spec sheet); tc's
//! bytes-per-second units are not accepted, and `bit/s` is not either, since `/` separates
//! directions. Decimal values are exact (parsed as decimals, not floats) and rounded to the
//! nearest ns or bit/s.

use crate::error::ValueError;
use crate::{Nanos, QueueLimit};

const DURATION_HINT: &str = "write e.g. 10ms, 250us, 1.5s or 0";
const RATE_HINT: &str = "write e.g. 1gbit, 100mbit, 500kbit or 1000000bps";
const PERCENT_HINT: &str = "write e.g. 0.1% or 1%";
const WORKLOAD_DURATION_HINT: &str = "write seconds or a unit, e.g. 10, 2.5s, 250ms or 40us";
const SIZE_HINT: &str = "write bytes, e.g. 64, 128k, 64KiB or 1.5MiB";
const QUEUE_HINT: &str = "write e.g. 1000 (packets), 64kb or 1500b (bytes)";

/// A non-negative decimal number held exactly as `mantissa / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    mantissa: u128,
    scale: u32,
}

impl Decimal {
    /// `self × multiplier`, rounded to the nearest integer (`None` on overflow).
    fn times(self, multiplier: u128) -> Option<u128> {
        let divisor = 10u128.checked_pow(self.scale)?;
        let product = self.mantissa.checked_mul(multiplier)?;
        Some((product + divisor / 2) / divisor)
    }

    fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    fn to_f64(self) -> f64 {
        self.mantissa as f64 / 10f64.powi(self.scale as i32)
    }
}

/// Splits `s` into its leading number and the unit after it.
fn split_number<'a>(s: &'a str, hint: &'static str) -> Result<(Decimal, &'a str), ValueError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(ValueError::Empty { hint });
    }
    if s.starts_with('-') {
        return Err(ValueError::Invalid(format!(
            "`{s}` is negative: values cannot be negative ({hint})"
        )));
    }
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let not_a_number = || ValueError::NotANumber {
        text: s.to_owned(),
        hint,
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') || num.len() > 30 {
        return Err(not_a_number());
    }
    let digits = format!("{int}{frac}");
    let mantissa = digits.parse::<u128>().map_err(|_| not_a_number())?;
    let scale = frac.len() as u32;
    Ok((Decimal { mantissa, scale }, unit.trim()))
}

fn too_large(what: &'static str) -> ValueError {
    ValueError::OutOfRange {
        what,
        range: "a value this machine can represent",
    }
}

/// Parses a duration into ns: `10ms`, `250us`, `1.5s`, `0`.
pub fn parse_duration(s: &str) -> Result<Nanos, ValueError> {
    let (n, unit) = split_number(s, DURATION_HINT)?;
    let per_unit: u128 = match unit.to_ascii_lowercase().as_str() {
        "" if n.is_zero() => 1,
        "" => {
            return Err(ValueError::MissingUnit {
                hint: DURATION_HINT,
            });
        }
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        // Minutes and longer, for schedules and retention (`--every 10m`, `--keep 30d`), as
        // Prometheus and Go write them; `m` is never milli here (`ms` is).
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => {
            return Err(ValueError::UnknownUnit {
                unit: unit.to_owned(),
                allowed: "ns, us, ms, s, m (minutes), h or d",
            });
        }
    };
    n.times(per_unit)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| too_large("duration"))
}

/// Parses a workload's duration into ns: a duration as [`parse_duration`] takes it, or a bare
/// number of seconds (`10`, `2.5`), as `-t` has meant since iperf. A link's delay keeps its
/// unit: `--delay 10` is not seconds.
pub fn parse_workload_duration(s: &str) -> Result<Nanos, ValueError> {
    let (n, unit) = split_number(s, WORKLOAD_DURATION_HINT)?;
    if unit.is_empty() {
        return n
            .times(1_000_000_000)
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| too_large("duration"));
    }
    parse_duration(s)
}

/// Parses a size into bytes: a bare number or `b` is bytes, `k`, `m`, `g` (with or without
/// `b`/`ib`) are powers of 1024, as in `tc` and iperf; fractions are rounded to the byte.
pub fn parse_size(s: &str) -> Result<u64, ValueError> {
    let (n, unit) = split_number(s, SIZE_HINT)?;
    let per_unit: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(ValueError::UnknownUnit {
                unit: unit.to_owned(),
                allowed: "no unit or b (bytes), k, m or g (powers of 1024, e.g. 128k or 64KiB)",
            });
        }
    };
    n.times(per_unit)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| too_large("size"))
}

/// Parses a rate into bits per second: `1gbit`, `100mbit`, `1.5Gbit`, `1000000bps`.
pub fn parse_rate(s: &str) -> Result<u64, ValueError> {
    let (n, unit) = split_number(s, RATE_HINT)?;
    let per_unit: u128 = match unit.to_ascii_lowercase().as_str() {
        "" => return Err(ValueError::MissingUnit { hint: RATE_HINT }),
        "bit" | "bps" => 1,
        "kbit" | "kbps" | "k" => 1_000,
        "mbit" | "mbps" | "m" => 1_000_000,
        "gbit" | "gbps" | "g" => 1_000_000_000,
        "tbit" | "tbps" | "t" => 1_000_000_000_000,
        _ => {
            return Err(ValueError::UnknownUnit {
                unit: unit.to_owned(),
                allowed: "bit, kbit, mbit, gbit or tbit (bits per second)",
            });
        }
    };
    n.times(per_unit)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| too_large("rate"))
}

/// Parses a percentage into a fraction: `0.1%` → 0.001. Range checks are the caller's (a
/// loss may be 100%, a correlation may not).
pub fn parse_percent(s: &str) -> Result<f64, ValueError> {
    let (n, unit) = split_number(s, PERCENT_HINT)?;
    match unit {
        "%" => Ok(n.to_f64() / 100.0),
        "" if n.is_zero() => Ok(0.0),
        "" => Err(ValueError::MissingUnit { hint: PERCENT_HINT }),
        _ => Err(ValueError::UnknownUnit {
            unit: unit.to_owned(),
            allowed: "% (e.g. 0.1%)",
        }),
    }
}

/// Parses a queue limit: a bare number is packets, a size unit makes it bytes.
pub fn parse_queue(s: &str) -> Result<QueueLimit, ValueError> {
    let (n, unit) = split_number(s, QUEUE_HINT)?;
    let bytes_per_unit: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "p" | "pkt" | "pkts" | "packets" => {
            if n.scale != 0 {
                return Err(ValueError::Invalid(format!(
                    "`{s}`: a packet count is a whole number ({QUEUE_HINT})"
                )));
            }
            let count = u32::try_from(n.mantissa).map_err(|_| too_large("queue"))?;
            return Ok(QueueLimit::Packets(count));
        }
        "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(ValueError::UnknownUnit {
                unit: unit.to_owned(),
                allowed: "no unit or p (packets), b, kb, mb or gb (bytes)",
            });
        }
    };
    n.times(bytes_per_unit)
        .and_then(|v| u64::try_from(v).ok())
        .map(QueueLimit::Bytes)
        .ok_or_else(|| too_large("queue"))
}

/// Parses a byte count without fractions: `24` or `24b`.
pub fn parse_bytes(s: &str) -> Result<u32, ValueError> {
    const HINT: &str = "write a whole number of bytes, e.g. 24";
    let (n, unit) = split_number(s, HINT)?;
    if !matches!(unit, "" | "b" | "B") || n.scale != 0 {
        return Err(ValueError::Invalid(format!("`{s}`: {HINT}")));
    }
    u32::try_from(n.mantissa).map_err(|_| too_large("overhead"))
}

/// Parses a seed: decimal, or hexadecimal with `0x`.
pub fn parse_seed(s: &str) -> Result<u64, ValueError> {
    let s = s.trim();
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    parsed.map_err(|_| ValueError::NotANumber {
        text: s.to_owned(),
        hint: "write an integer from 0 to 18446744073709551615, or hex like 0x5eed",
    })
}

/// Splits the per-direction form: `A/B` → (A, B); a bare value applies to both directions.
pub fn split_directions(s: &str) -> Result<(&str, &str), ValueError> {
    match s.split_once('/') {
        None => Ok((s.trim(), s.trim())),
        Some((a, b)) if b.contains('/') => Err(ValueError::Invalid(format!(
            "`{a}/{b}` has more than one `/`: write A/B (client→server/server→client)"
        ))),
        Some((a, b)) if a.trim().is_empty() || b.trim().is_empty() => Err(ValueError::Invalid(
            "one side of `/` is empty: write A/B (client→server/server→client)".into(),
        )),
        Some((a, b)) => Ok((a.trim(), b.trim())),
    }
}

/// Splits the per-direction form for values that may contain file paths: the split is at
/// the first `/` followed by a complete keyword (`normal`, or a prefix like `ge:`), so a path
/// such as `table:/usr/lib/tc/normal.dist` stays whole.
pub fn split_directions_keyed<'a>(
    s: &'a str,
    words: &[&str],
    prefixes: &[&str],
) -> (&'a str, &'a str) {
    for (i, _) in s.match_indices('/') {
        let rest = &s[i + 1..];
        if words.contains(&rest) || prefixes.iter().any(|p| rest.starts_with(p)) {
            let first = &s[..i];
            if !first.is_empty() {
                return (first.trim(), rest.trim());
            }
        }
    }
    (s.trim(), s.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10ms"), Ok(10_000_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("250µs"), Ok(250_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("0.0005ms"), Ok(500));
        assert_eq!(parse_duration("7ns"), Ok(7));
        assert_eq!(parse_duration("1.5ns"), Ok(2), "rounds to nearest");
        assert_eq!(
            parse_duration("10").unwrap_err().to_string(),
            "missing unit: write e.g. 10ms, 250us, 1.5s or 0"
        );
        assert_eq!(parse_duration("10min"), Ok(600_000_000_000));
        assert_eq!(parse_duration("10m"), Ok(600_000_000_000));
        assert_eq!(parse_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("30d"), Ok(2_592_000_000_000_000));
        assert_eq!(
            parse_duration("10fortnights").unwrap_err().to_string(),
            "unknown unit `fortnights`: use ns, us, ms, s, m (minutes), h or d"
        );
        assert!(
            parse_duration("-5ms")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("1.2.3ms").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("99999999999999999999s").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("500kbit"), Ok(500_000));
        assert_eq!(parse_rate("1000000bps"), Ok(1_000_000));
        assert_eq!(parse_rate("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("100Mbps"), Ok(100_000_000));
        assert!(matches!(
            parse_rate("100"),
            Err(ValueError::MissingUnit { .. })
        ));
        assert!(matches!(
            parse_rate("1gb"),
            Err(ValueError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn percents() {
        assert_eq!(parse_percent("1%"), Ok(0.01));
        assert!((parse_percent("0.1%").unwrap() - 0.001).abs() < 1e-15);
        assert_eq!(parse_percent("0"), Ok(0.0));
        assert_eq!(parse_percent("120%"), Ok(1.2));
        assert!(matches!(
            parse_percent("0.5"),
            Err(ValueError::MissingUnit { .. })
        ));
        assert!(parse_percent("5pc").is_err());
    }

    #[test]
    fn queues() {
        assert_eq!(parse_queue("1000"), Ok(QueueLimit::Packets(1000)));
        assert_eq!(parse_queue("64p"), Ok(QueueLimit::Packets(64)));
        assert_eq!(parse_queue("64kb"), Ok(QueueLimit::Bytes(65_536)));
        assert_eq!(parse_queue("1500b"), Ok(QueueLimit::Bytes(1500)));
        assert_eq!(parse_queue("1.5mb"), Ok(QueueLimit::Bytes(1_572_864)));
        assert!(parse_queue("1.5").is_err());
        assert!(parse_queue("10 apples").is_err());
    }

    #[test]
    fn seeds_and_bytes() {
        assert_eq!(parse_seed("42"), Ok(42));
        assert_eq!(parse_seed("0x5eed"), Ok(0x5eed));
        assert!(parse_seed("-1").is_err());
        assert_eq!(parse_bytes("24"), Ok(24));
        assert_eq!(parse_bytes("24b"), Ok(24));
        assert!(parse_bytes("2.5").is_err());
    }

    #[test]
    fn directions() {
        assert_eq!(split_directions("10ms/2ms"), Ok(("10ms", "2ms")));
        assert_eq!(split_directions("10ms"), Ok(("10ms", "10ms")));
        assert!(split_directions("1/2/3").is_err());
        assert!(split_directions("/2ms").is_err());
        let words = ["normal", "pareto"];
        let prefixes = ["table:"];
        assert_eq!(
            split_directions_keyed("table:/usr/lib/tc/normal.dist", &words, &prefixes),
            (
                "table:/usr/lib/tc/normal.dist",
                "table:/usr/lib/tc/normal.dist"
            )
        );
        assert_eq!(
            split_directions_keyed("table:/a/b.dist/normal", &words, &prefixes),
            ("table:/a/b.dist", "normal")
        );
        assert_eq!(
            split_directions_keyed("pareto/table:x.dist", &words, &prefixes),
            ("pareto", "table:x.dist")
        );
    }
}
