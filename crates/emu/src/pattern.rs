//! Deterministic loss patterns that repeat, parsed from text (the caller reads the file).
//!
//! # Format
//! `#` starts a comment. Two forms, not mixed in one text:
//!
//! * **Bits**: lines of `0` (pass) and `1` (drop); spaces and `_` are ignored and lines join.
//!   `0000 0001` drops every 8th packet (the 8th, 16th, ...).
//! * **Directives**, one a line:
//!   - `drop N` drops the N-th packet (1-based) of each period; `drop N-M` drops N..=M;
//!   - `period P` sets the period (default: the largest dropped packet number).
//!
//!   `period 41` + `drop 41` drops every 41st packet, the stall in the "every 41st packet" hunt.
//!
//! Packets are counted as they arrive at the link (before the queue), starting at 1, and the
//! pattern repeats forever.

use serde::{Deserialize, Serialize};

use crate::error::ValueError;

/// Longest period: 2^24 packets (2 MiB of bitmap).
pub const MAX_PERIOD: u64 = 1 << 24;

/// A repeating loss pattern: packet `k` (0-based) is dropped iff `k mod period` is in `drops`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossPattern {
    period: u64,
    /// 0-based positions within the period, sorted, unique.
    drops: Vec<u64>,
}

impl LossPattern {
    /// A pattern of `period` packets dropping the 0-based positions `drops`.
    pub fn new(period: u64, mut drops: Vec<u64>) -> Result<Self, ValueError> {
        drops.sort_unstable();
        drops.dedup();
        let p = Self { period, drops };
        p.validate()?;
        Ok(p)
    }

    /// Period in packets.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Dropped 0-based positions within the period.
    pub fn drops(&self) -> &[u64] {
        &self.drops
    }

    /// Checks the period and positions.
    pub fn validate(&self) -> Result<(), ValueError> {
        if self.period == 0 || self.period > MAX_PERIOD {
            return Err(ValueError::Invalid(format!(
                "a loss pattern's period must be 1 to {MAX_PERIOD} packets, not {}",
                self.period
            )));
        }
        // The largest, not the last: a pattern read from JSON need not be sorted.
        if let Some(&last) = self.drops.iter().max()
            && last >= self.period
        {
            return Err(ValueError::Invalid(format!(
                "drop {} is beyond the period of {} packets: set the period to at least {} \
                 or remove that drop",
                last + 1,
                self.period,
                last + 1
            )));
        }
        Ok(())
    }

    /// Parses the text format described in the module docs.
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let mut bits: Vec<bool> = Vec::new();
        // Ranges as written, expanded once at the end: many `drop 1-16777216` lines must not
        // each add 2^24 entries.
        let mut drops: Vec<(u64, u64)> = Vec::new();
        let mut period: Option<u64> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| ValueError::BadLine {
                line: i + 1,
                reason,
            };
            if line
                .chars()
                .all(|c| matches!(c, '0' | '1' | ' ' | '_' | '\t'))
            {
                bits.extend(line.chars().filter_map(|c| match c {
                    '0' => Some(false),
                    '1' => Some(true),
                    _ => None,
                }));
                if bits.len() as u64 > MAX_PERIOD {
                    return Err(bad(format!(
                        "pattern longer than {MAX_PERIOD} packets: use at most {MAX_PERIOD} bits, \
                         or `period` and `drop` lines"
                    )));
                }
            } else {
                parse_directive(line, &mut drops, &mut period).map_err(bad)?;
            }
            if !bits.is_empty() && (!drops.is_empty() || period.is_some()) {
                return Err(bad(
                    "mixes 0/1 bits with `drop`/`period` lines: use one form".into(),
                ));
            }
        }
        if !bits.is_empty() {
            let drops = (0..bits.len() as u64)
                .filter(|&k| bits[k as usize])
                .collect();
            return Self::new(bits.len() as u64, drops);
        }
        let period = match (period, drops.iter().map(|&(_, to)| to).max()) {
            (Some(p), _) => p,
            (None, Some(max)) => max,
            (None, None) => {
                return Err(ValueError::Invalid(
                    "empty loss pattern: write bits like `0001` or lines like `drop 41`".into(),
                ));
            }
        };
        Self::new(period, expand(&drops))
    }

    /// The runtime form: a bitmap and a position.
    pub(crate) fn cursor(&self) -> PatternCursor {
        let words = self.period.div_ceil(64) as usize;
        let mut bitmap = vec![0u64; words];
        for &d in &self.drops {
            bitmap[(d / 64) as usize] |= 1 << (d % 64);
        }
        PatternCursor {
            bitmap,
            period: self.period,
            pos: 0,
        }
    }
}

/// The 0-based positions of 1-based inclusive ranges, sorted and unique; at most
/// [`MAX_PERIOD`] of them, however many ranges overlap.
fn expand(ranges: &[(u64, u64)]) -> Vec<u64> {
    let Some(end) = ranges.iter().map(|&(_, to)| to).max() else {
        return Vec::new();
    };
    let mut hit = vec![false; end as usize];
    for &(from, to) in ranges {
        hit[(from - 1) as usize..to as usize].fill(true);
    }
    (0..end).filter(|&k| hit[k as usize]).collect()
}

/// One `drop N`, `drop N-M` or `period P` line; a drop is kept as its 1-based range.
fn parse_directive(
    line: &str,
    drops: &mut Vec<(u64, u64)>,
    period: &mut Option<u64>,
) -> Result<(), String> {
    let mut words = line.split_whitespace();
    let keyword = words.next().unwrap_or("");
    let arg = words.next().ok_or_else(|| {
        format!("`{keyword}` needs a number: write e.g. `drop 41` or `period 41`")
    })?;
    if let Some(extra) = words.next() {
        return Err(format!(
            "unexpected `{extra}` after `{keyword} {arg}`: write one number or range a line"
        ));
    }
    let number = |s: &str| -> Result<u64, String> {
        match s.parse::<u64>() {
            Ok(n) if (1..=MAX_PERIOD).contains(&n) => Ok(n),
            _ => Err(format!(
                "`{s}` is not a packet number: write a whole number between 1 and {MAX_PERIOD}"
            )),
        }
    };
    match keyword {
        "drop" => {
            let (from, to) = match arg.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => (number(arg)?, number(arg)?),
            };
            if from > to {
                return Err(format!(
                    "range `{arg}` runs backwards: write the smaller number first"
                ));
            }
            drops.push((from, to));
            Ok(())
        }
        "period" => {
            *period = Some(number(arg)?);
            Ok(())
        }
        other => Err(format!(
            "unknown `{other}`: write `drop N`, `drop N-M`, `period P` or bits like `0001`"
        )),
    }
}

/// Where a running pattern is.
#[derive(Debug, Clone)]
pub(crate) struct PatternCursor {
    bitmap: Vec<u64>,
    period: u64,
    pos: u64,
}

impl PatternCursor {
    /// Whether the next packet is dropped; advances.
    pub(crate) fn next(&mut self) -> bool {
        let k = self.pos;
        self.pos = if k + 1 == self.period { 0 } else { k + 1 };
        self.bitmap[(k / 64) as usize] & (1 << (k % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &LossPattern, n: usize) -> Vec<bool> {
        let mut c = p.cursor();
        (0..n).map(|_| c.next()).collect()
    }

    #[test]
    fn bits_form_repeats() {
        let p = LossPattern::parse("# every 4th\n00 01\n").unwrap();
        assert_eq!(p.period(), 4);
        assert_eq!(p.drops(), &[3]);
        let got = run(&p, 9);
        assert_eq!(
            got,
            [false, false, false, true, false, false, false, true, false]
        );
    }

    #[test]
    fn directive_form_every_41st() {
        let p = LossPattern::parse("period 41\ndrop 41\n").unwrap();
        let got = run(&p, 41 * 3);
        let dropped: Vec<usize> = (0..got.len()).filter(|&i| got[i]).map(|i| i + 1).collect();
        assert_eq!(dropped, [41, 82, 123]);
    }

    #[test]
    fn directive_ranges_and_default_period() {
        let p = LossPattern::parse("drop 2-3\ndrop 5").unwrap();
        assert_eq!(p.period(), 5);
        assert_eq!(p.drops(), &[1, 2, 4]);
    }

    #[test]
    fn long_bitmap_crosses_words() {
        let p = LossPattern::new(130, vec![0, 64, 129]).unwrap();
        let got = run(&p, 260);
        let dropped: Vec<usize> = (0..got.len()).filter(|&i| got[i]).collect();
        assert_eq!(dropped, [0, 64, 129, 130, 194, 259]);
    }

    #[test]
    fn rejects_bad_text_with_line_numbers() {
        let e = LossPattern::parse("drop 1\nfoo 3\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2: unknown `foo`"), "{e}");
        let e = LossPattern::parse("drop 0").unwrap_err();
        assert!(e.to_string().contains("not a packet number"), "{e}");
        let e = LossPattern::parse("period 3\ndrop 5").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("drop 5 is beyond the period of 3 packets: set the period"),
            "{e}"
        );
        let e = LossPattern::parse("0101\ndrop 2").unwrap_err();
        assert!(e.to_string().contains("mixes"), "{e}");
        assert!(LossPattern::parse("# nothing\n").is_err());
        assert!(LossPattern::parse("drop 5-2").is_err());
    }
}
