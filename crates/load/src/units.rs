//! Values as people write them, parsed: durations (`2.5`, `3s`, `250ms`), byte counts with binary
//! K/M/G suffixes, rates with decimal ones (each by `tcplab_results::units`, the one parser a
//! scenario file's values go through too), size lists and doubling ranges. crates/cli hands
//! these to its flags as value parsers, so a bad value's message is the same everywhere.

use tcplab_results::units::{Bytes, Dur, Rate};
use tcplab_text::shown;

/// Seconds (`1.5`, `2s`, `250ms`) to milliseconds, as [`Dur`] reads them.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    s.parse::<Dur>().map(Dur::ms)
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

/// Bytes with binary K/M/G suffixes (128K = 131072), as [`Bytes`] reads them.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    s.parse::<Bytes>().map(|b| b.0)
}

/// Rates with decimal K/M/G suffixes (100M = 100,000,000 bit/s), as [`Rate`] reads them.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    s.parse::<Rate>().map(|r| r.0)
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
