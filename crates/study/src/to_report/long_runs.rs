//! A stored run's samples read for the report from their packed form ([`crate::codec`]), so
//! that a run of ten million messages does not become ten million text rows and parsed rows
//! (about 170 bytes a message) on the way to a scatter of a few thousand points.
//!
//! Every part of the blob goes back to text as before except the tables longer than
//! [`EXACT_ROWS`]. Of those, the first `message` (msgs) or `transaction` (rr) table of a
//! workload, the one the report draws, gives its per-message delays in two passes over the
//! packed columns: the first finds the stall threshold from the whole run's median and 90th
//! percentile (within 0.1 %, [`NsDist`]), the second keeps each stretch's fastest and slowest
//! calm message and slowest and fastest stall, counts every stall and takes the CDF from
//! the whole run's quantiles. Other long tables (crr's connections, http's requests, a
//! second msgs size) are not drawn, so they are not printed. Runs up to [`EXACT_ROWS`]
//! messages are drawn from every message, exactly as before.

use std::collections::BTreeMap;

use tcplab_report::model::MessageDelays;
use tcplab_results::stats::NsDist;

use super::series::stall_threshold_of;
use crate::codec::{self, Part, TableView};

/// Rows a table may have and still be printed and parsed whole.
pub const EXACT_ROWS: usize = 1 << 20;
/// Stretches a long run's scatter is cut into; each keeps at most four messages.
const STRETCHES: usize = 10_000;
/// Quantiles of a long run's CDF (every 0.05 %, both ends included).
const CDF_STEPS: usize = 2_000;

/// Where a run counts as long, and how thin its scatter gets.
#[derive(Debug, Clone, Copy)]
struct Limits {
    exact_rows: usize,
    stretches: usize,
}

const LIMITS: Limits = Limits {
    exact_rows: EXACT_ROWS,
    stretches: STRETCHES,
};

/// A packed blob split for the report.
#[derive(Debug, Default)]
pub struct Split {
    /// The samples text without the long tables.
    pub text: String,
    /// The delays of a workload's long message or transaction table (its label empty), by the
    /// offset in `text` of the workload's first line.
    pub delays: BTreeMap<usize, MessageDelays>,
}

/// Splits a packed blob; `configured_stall_us`: rr's configured stall limit, as for
/// [`super::series::message_delays`].
pub fn split(blob: &[u8], configured_stall_us: Option<f64>) -> Result<Split, String> {
    split_with(blob, configured_stall_us, LIMITS)
}

fn split_with(
    blob: &[u8],
    configured_stall_us: Option<f64>,
    limits: Limits,
) -> Result<Split, String> {
    const HEAD: &str = "# tcplab-samples ";
    let mut out = Split::default();
    let mut bytes = Vec::new();
    // The current workload: its first line's offset, its name, and whether its first
    // message or transaction table has gone by.
    let mut workload: Option<(usize, String, bool)> = None;
    for part in codec::parts(blob)? {
        match part {
            Part::Text(t) => {
                let text = String::from_utf8_lossy(t);
                let mut offset = bytes.len();
                for line in text.split_inclusive('\n') {
                    if let Some(rest) = line.strip_prefix(HEAD) {
                        let name = rest
                            .split_whitespace()
                            .find_map(|w| w.strip_prefix("workload="));
                        workload = Some((offset, name.unwrap_or("").to_string(), false));
                    }
                    offset += line.len();
                }
                bytes.extend_from_slice(t);
            }
            Part::Table(t) => {
                let kind = section_kind(t.header);
                let drawn = matches!(kind, "message" | "transaction")
                    && workload.as_ref().is_some_and(|w| !w.2);
                if let (true, Some(w)) = (drawn, workload.as_mut()) {
                    w.2 = true;
                }
                if t.rows <= limits.exact_rows {
                    t.print(&mut bytes)?;
                } else if drawn && let Some((at, name, _)) = &workload {
                    let configured = (name == "rr").then_some(configured_stall_us).flatten();
                    if let Some(d) = long_delays(&t, kind, configured, limits.stretches) {
                        out.delays.insert(*at, d);
                    }
                }
            }
        }
    }
    out.text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(out)
}

/// The `section=` word of a table's header line.
fn section_kind(header: &str) -> &str {
    header
        .split_whitespace()
        .find_map(|w| w.strip_prefix("section="))
        .unwrap_or("")
}

/// The header's `columns=` names.
fn columns(header: &str) -> Vec<&str> {
    header
        .split_whitespace()
        .find_map(|w| w.strip_prefix("columns="))
        .map_or_else(Vec::new, |c| c.split(',').collect())
}

/// The per-message delays of a long message (send → receive) or transaction (intended →
/// done) table, thinned; `None` when its columns are not there or no row has both stamps.
fn long_delays(
    t: &TableView<'_>,
    kind: &str,
    configured_stall_us: Option<f64>,
    stretches: usize,
) -> Option<MessageDelays> {
    let (from, to) = match kind {
        "message" => ("send_ns", "recv_ns"),
        _ => ("intended_ns", "done_ns"),
    };
    let names = columns(t.header);
    if names.first() != Some(&"seq") {
        return None;
    }
    // `seq` is the row number and is not stored: stored column i is the header's i + 1.
    let stored = |name: &str| names.iter().position(|c| *c == name)?.checked_sub(1);
    let (a, b) = (stored(from)?, stored(to)?);
    // A missing stamp ends a column (rows past its length print `-`), so zipping the two
    // columns keeps exactly the rows that have both, as the text reader does.
    let rows = || Some(t.column(a)?.zip(t.column(b)?));
    let delay_ns = |(s, r): (u64, u64)| r.saturating_sub(s);

    let mut dist = NsDist::default();
    let mut n = 0usize;
    for row in rows()? {
        dist.add(delay_ns(row));
        n += 1;
    }
    let (median, p90) = (dist.quantile_us(0.5)?, dist.quantile_us(0.9)?);
    let stall_us = stall_threshold_of(configured_stall_us, median, p90);

    let stretch = n.div_ceil(stretches).max(1);
    let mut thin = Thinning::default();
    let mut stalls = 0u64;
    for (i, (s, r)) in rows()?.enumerate() {
        // The text reader's figures: (to − from) in µs, `from` in s since the section's t0.
        let us = (r as f64 - s as f64) / 1e3;
        let stalled = us > stall_us;
        stalls += u64::from(stalled);
        thin.add(i as u64, us, s as f64 / 1e9, stalled);
        if (i + 1) % stretch == 0 {
            thin.flush();
        }
    }
    thin.flush();
    let distribution_us = (0..=CDF_STEPS)
        .filter_map(|k| dist.quantile_us(k as f64 / CDF_STEPS as f64))
        .collect();
    Some(MessageDelays {
        label: String::new(),
        points: thin.points,
        times_s: thin.times_s,
        stall_us: Some(stall_us),
        stalls: Some(stalls),
        distribution_us,
    })
}

/// One message of a stretch: (seq, delay µs, send time s).
type Row = (u64, f64, f64);

/// The kept messages of each stretch: its fastest and slowest calm one, its fastest and
/// slowest stall, in sequence order, so every stretch's range shows and no stall hides.
#[derive(Debug, Default)]
struct Thinning {
    calm: Option<(Row, Row)>,
    stalled: Option<(Row, Row)>,
    points: Vec<(u64, f64)>,
    times_s: Vec<f64>,
}

impl Thinning {
    fn add(&mut self, seq: u64, us: f64, t_s: f64, stalled: bool) {
        let row = (seq, us, t_s);
        let slot = if stalled {
            &mut self.stalled
        } else {
            &mut self.calm
        };
        match slot {
            None => *slot = Some((row, row)),
            Some((lo, hi)) => {
                if us < lo.1 {
                    *lo = row;
                }
                if us > hi.1 {
                    *hi = row;
                }
            }
        }
    }

    fn flush(&mut self) {
        let mut kept: Vec<Row> = [self.calm.take(), self.stalled.take()]
            .into_iter()
            .flatten()
            .flat_map(|(lo, hi)| if lo.0 == hi.0 { vec![lo] } else { vec![lo, hi] })
            .collect();
        kept.sort_by_key(|r| r.0);
        for (seq, us, t) in kept {
            self.points.push((seq, us));
            self.times_s.push(t);
        }
    }
}

#[cfg(test)]
mod tests;
