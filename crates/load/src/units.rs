//! Values as people write them, parsed: durations (`2.5`, `3s`, `250ms`), byte counts with binary
//! K/M/G suffixes, rates with decimal ones, size lists and doubling ranges. crates/cli hands
//! these to its flags as value parsers, so a bad value's message is the same everywhere.

use tcplab_emu::error::shown;

/// Longest duration accepted, ms (about 31 years).
const MAX_MS: f64 = 1e12;
/// Largest byte count or rate accepted (just under 2^64).
const MAX_SCALED: f64 = 1.8e19;

/// Seconds (`1.5`, `2s`, `250ms`) to milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1000.0)
    } else {
        (s, 1000.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!(
            "`{}` is not a duration: write seconds or ms, e.g. 10, 2.5s, 250ms",
            shown(s)
        )
    })?;
    if !(v.is_finite() && v >= 0.0 && v * scale < MAX_MS) {
        return Err(format!(
            "`{}` is out of range: give a duration from 0 to {} s",
            shown(s),
            MAX_MS / 1000.0
        ));
    }
    Ok((v * scale).round() as u64)
}

/// A live-report interval: a duration of at least 10 ms.
pub fn parse_interval_ms(s: &str) -> Result<u64, String> {
    let ms = parse_duration_ms(s)?;
    if ms < crate::live::MIN_INTERVAL_MS {
        return Err(format!(
            "`{}` is shorter than {} ms: give {} ms or more",
            shown(s),
            crate::live::MIN_INTERVAL_MS,
            crate::live::MIN_INTERVAL_MS
        ));
    }
    Ok(ms)
}

fn parse_scaled(s: &str, base: f64, example: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], base),
        Some('m' | 'M') => (&t[..t.len() - 1], base * base),
        Some('g' | 'G') => (&t[..t.len() - 1], base * base * base),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| {
        format!(
            "`{}` is not a number: write a number with an optional K, M or G, e.g. {example}",
            shown(s)
        )
    })?;
    if !(v.is_finite() && v >= 0.0 && v * mul < MAX_SCALED) {
        return Err(format!(
            "`{}` is out of range: give a value from 0 to 1.8e19",
            shown(s)
        ));
    }
    Ok((v * mul).round() as u64)
}

/// Bytes with binary K/M/G suffixes (128K = 131072).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_scaled(s, 1024.0, "128K (131,072 bytes)")
}

/// Rates with decimal K/M/G suffixes (100M = 100,000,000 bit/s).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    parse_scaled(s, 1000.0, "100M (100,000,000)")
}

/// A size list `1,64,1500` or a doubling range `1..4096`.
pub fn parse_size_list(s: &str) -> Result<Vec<u32>, String> {
    const SIZES: &str = "write sizes in bytes (at most 4294967295) as a list, e.g. 1,64,1500, or a \
                         doubling range, e.g. 1..4096";
    let size = |p: &str| {
        p.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{}` is not a size: {SIZES}", shown(p)))
    };
    if let Some((a, b)) = s.split_once("..") {
        let (a, b) = (size(a)?, size(b)?);
        if a == 0 || a > b {
            return Err(format!(
                "range `{}` must be 1 <= start <= end, e.g. 1..4096",
                shown(s)
            ));
        }
        let mut v = Vec::new();
        let mut x = a;
        while x <= b {
            v.push(x);
            x = match x.checked_mul(2) {
                Some(n) => n,
                None => break,
            };
        }
        return Ok(v);
    }
    s.split(',').map(size).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(parse_duration_ms("2.5"), Ok(2500));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("3s"), Ok(3000));
        assert!(parse_duration_ms("-1").is_err());
        assert_eq!(parse_interval_ms("10ms"), Ok(10));
        assert!(parse_interval_ms("5ms").is_err());
        assert_eq!(parse_bytes("128K"), Ok(131_072));
        assert_eq!(parse_rate("100M"), Ok(100_000_000));
        assert_eq!(parse_size_list("1..16"), Ok(vec![1, 2, 4, 8, 16]));
        assert_eq!(parse_size_list("1, 64,1500"), Ok(vec![1, 64, 1500]));
        assert!(parse_size_list("0..4").is_err());
    }
}
