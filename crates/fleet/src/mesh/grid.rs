//! The mesh's report, computed from its rows: the N×N matrix (rows send, columns receive),
//! the worst pairs, and for msgs the chance one all-to-all meets a stall. Pure: rows in,
//! text and numbers out.

use std::fmt::Write as _;

use serde::Serialize;
use tcplab_stats::{CollectiveStall, PairStalls, all_to_all_stall};

use super::outcome::{MeshFigure, WorkloadKind, num};
use super::store::PairRow;

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Cell {
    /// The host itself.
    Diagonal,
    /// Not run yet (an interrupted mesh).
    Missing,
    /// The test failed; the reason.
    Failed {
        /// Why.
        reason: String,
    },
    /// The test ran.
    Done {
        /// The headline figure.
        value: Option<f64>,
        /// False when it was cut short.
        complete: bool,
        /// False when the lab's emulator fell behind during its step.
        trustworthy: bool,
        /// One line of detail.
        detail: String,
    },
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Grid {
    /// The workload.
    pub workload: WorkloadKind,
    /// Host names, in order; rows and columns follow it.
    pub hosts: Vec<String>,
    /// `cells[src][dst]`.
    pub cells: Vec<Vec<Cell>>,
    /// Pairs that ran, failed, and are missing.
    pub done: usize,
    /// Pairs that failed.
    pub failed: usize,
    /// Pairs not run.
    pub missing: usize,
    /// Pairs whose step the lab's emulator did not keep up with (their figures are the
    /// emulator's, not the path's).
    pub untrustworthy: usize,
    /// The worst pairs, worst first (failures first).
    pub worst: Vec<Worst>,
    /// msgs and rr: the chance one all-to-all meets at least one stall.
    pub collective: Option<CollectiveStall>,
    /// Sum of the workloads' own times, s.
    pub workload_s: f64,
    /// Sum of the harness's wall times per test, s.
    pub wall_s: f64,
}

/// A pair among the worst.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Worst {
    /// Sender.
    pub src: String,
    /// Receiver.
    pub dst: String,
    /// What makes it bad.
    pub why: String,
}

/// How many worst pairs a report lists.
pub const WORST: usize = 5;

/// Builds the report of `rows` among `hosts`.
pub fn grid(workload: WorkloadKind, hosts: &[String], rows: &[PairRow]) -> Grid {
    let n = hosts.len();
    let index = |name: &str| hosts.iter().position(|h| h == name);
    let mut cells: Vec<Vec<Cell>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i == j {
                        Cell::Diagonal
                    } else {
                        Cell::Missing
                    }
                })
                .collect()
        })
        .collect();
    let (mut failed, mut done, mut untrustworthy) = (0, 0, 0);
    let mut ranked: Vec<(f64, Worst)> = Vec::new();
    let mut stalls: Vec<PairStalls> = Vec::new();
    let (mut workload_s, mut wall_s) = (0.0, 0.0);
    for row in rows {
        let (Some(i), Some(j)) = (index(&row.src), index(&row.dst)) else {
            continue;
        };
        if i == j {
            continue;
        }
        wall_s += row.wall_s;
        let worst = |why: String| Worst {
            src: row.src.clone(),
            dst: row.dst.clone(),
            why,
        };
        match (&row.failure, &row.figures) {
            (failure, None) | (failure @ Some(_), _) => {
                let reason = failure.clone().unwrap_or_else(|| "no result".into());
                failed += 1;
                ranked.push((f64::INFINITY, worst(format!("failed: {reason}"))));
                cells[i][j] = Cell::Failed { reason };
            }
            (None, Some(f)) => {
                done += 1;
                workload_s += f.workload_s;
                if let Some(s) = f.stalls {
                    stalls.push(s);
                }
                let badness = match f.value {
                    Some(v) if workload.higher_is_worse() => v,
                    Some(v) => -v,
                    None => f64::MAX,
                };
                let mut why = format!("{} {}", num(f.value), unit(workload));
                if !f.complete {
                    let _ = write!(
                        why,
                        " (cut short: {})",
                        f.incomplete_reason.as_deref().unwrap_or("?")
                    );
                }
                let trustworthy = row.emulator.as_ref().is_none_or(|e| e.trustworthy);
                let mut detail = f.detail.clone();
                if let Some(e) = row.emulator.as_ref().filter(|e| !e.trustworthy) {
                    untrustworthy += 1;
                    let _ = write!(why, " (emulator: {})", e.reasons.join("; "));
                    let _ = write!(detail, "; untrustworthy: {}", e.reasons.join("; "));
                }
                ranked.push((badness, worst(why)));
                cells[i][j] = Cell::Done {
                    value: f.value,
                    complete: f.complete,
                    trustworthy,
                    detail,
                };
            }
        }
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let worst = ranked.into_iter().take(WORST).map(|(_, w)| w).collect();
    let latency = matches!(workload, WorkloadKind::Msgs | WorkloadKind::Rr);
    let collective = (latency && !stalls.is_empty())
        .then(|| all_to_all_stall(&stalls).ok())
        .flatten();
    Grid {
        workload,
        hosts: hosts.to_vec(),
        cells,
        done,
        failed,
        missing: n * n.saturating_sub(1) - done - failed,
        untrustworthy,
        worst,
        collective,
        workload_s,
        wall_s,
    }
}

/// The headline figure's short unit.
pub fn unit(w: WorkloadKind) -> &'static str {
    match w {
        WorkloadKind::Msgs => "stalls",
        WorkloadKind::Rr | WorkloadKind::Rrul => "µs p99",
        WorkloadKind::Stream => "Mbit/s",
        WorkloadKind::Crr => "conn/s",
        WorkloadKind::Http => "req/s",
    }
}

impl Grid {
    /// The matrix as text: a row per sender, a column per receiver, `x` for a failed test,
    /// `.` for one not run, `*` after a figure of a test cut short.
    pub fn matrix_text(&self) -> String {
        let width = self
            .hosts
            .iter()
            .map(|h| h.chars().count())
            .max()
            .unwrap_or(1)
            .max(6);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} (row sends to column; x failed, . not run, * cut short, ! emulator fell behind)",
            self.workload.figure()
        );
        let _ = write!(out, "{:>width$}", "");
        for h in &self.hosts {
            let _ = write!(out, " {h:>width$}");
        }
        out.push('\n');
        for (i, h) in self.hosts.iter().enumerate() {
            let _ = write!(out, "{h:>width$}");
            for cell in &self.cells[i] {
                let text = match cell {
                    Cell::Diagonal => "-".to_string(),
                    Cell::Missing => ".".to_string(),
                    Cell::Failed { .. } => "x".to_string(),
                    Cell::Done {
                        value,
                        complete,
                        trustworthy,
                        ..
                    } => format!(
                        "{}{}{}",
                        num(*value),
                        if *complete { "" } else { "*" },
                        if *trustworthy { "" } else { "!" }
                    ),
                };
                let _ = write!(out, " {text:>width$}");
            }
            out.push('\n');
        }
        out
    }

    /// How many pairs ran, failed and are missing, in one line.
    pub fn counts_line(&self) -> String {
        format!(
            "{} pairs: {} done, {} failed, {} not run",
            self.done + self.failed + self.missing,
            self.done,
            self.failed,
            self.missing
        )
    }

    /// The line about pairs the lab's emulator did not keep up with, if any.
    pub fn untrustworthy_line(&self) -> Option<String> {
        (self.untrustworthy > 0).then(|| {
            format!(
                "{} pairs ran while the lab's emulator fell behind: their figures are the \
                 emulator's, not the path's (marked !)",
                self.untrustworthy
            )
        })
    }

    /// The all-to-all stall estimate as a sentence, if there is one.
    pub fn collective_line(&self) -> Option<String> {
        self.collective.as_ref().map(|c| {
            format!(
                "one all-to-all among the {} hosts meets at least one stall with probability {} \
                 (95 % interval {} to {}; {} stalls over {} pairs, pairs taken as independent)",
                self.hosts.len(),
                pct(c.probability),
                pct(c.low),
                pct(c.high),
                c.stalls,
                c.pairs
            )
        })
    }

    /// The summary lines under the matrix: counts, worst pairs, the collective estimate.
    pub fn summary_text(&self) -> String {
        let mut out = self.counts_line();
        out.push('\n');
        if let Some(line) = self.untrustworthy_line() {
            let _ = writeln!(out, "{line}");
        }
        if !self.worst.is_empty() {
            let _ = writeln!(out, "worst pairs:");
            for w in &self.worst {
                let _ = writeln!(out, "  {} -> {}: {}", w.src, w.dst, w.why);
            }
        }
        if let Some(line) = self.collective_line() {
            let _ = writeln!(out, "{line}");
        }
        out
    }
}

/// A probability as a percentage with enough digits for small ones.
pub fn pct(p: f64) -> String {
    let x = p * 100.0;
    if x == 0.0 {
        "0 %".into()
    } else if x >= 1.0 {
        format!("{x:.1} %")
    } else if x >= 0.01 {
        // Two significant digits: 0.24 %, 0.018 %.
        let digits = (1 - x.log10().floor() as i32).max(0) as usize;
        format!("{x:.digits$} %")
    } else {
        format!("{x:.1e} %")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::outcome::Figures;

    fn hosts() -> Vec<String> {
        ["a", "b", "c"].iter().map(|s| s.to_string()).collect()
    }

    fn ok(src: &str, dst: &str, stalls: u64) -> PairRow {
        PairRow {
            src: src.into(),
            dst: dst.into(),
            round: 0,
            figures: Some(Figures {
                value: Some(stalls as f64),
                stalls: Some(PairStalls {
                    stalled: stalls,
                    messages: 1_000,
                }),
                workload_s: 1.0,
                complete: true,
                incomplete_reason: None,
                detail: String::new(),
            }),
            failure: None,
            started_unix_ms: 0,
            wall_s: 1.01,
            emulator: None,
        }
    }

    #[test]
    fn the_matrix_marks_failures_missing_pairs_and_the_diagonal() {
        let mut rows = vec![ok("a", "b", 0), ok("b", "a", 2), ok("c", "a", 0)];
        rows.push(PairRow {
            failure: Some("agent c: connection refused".into()),
            figures: None,
            ..ok("a", "c", 0)
        });
        let g = grid(WorkloadKind::Msgs, &hosts(), &rows);
        assert_eq!((g.done, g.failed, g.missing), (3, 1, 2));
        let text = g.matrix_text();
        let a_row = text.lines().nth(2).unwrap();
        assert!(a_row.trim_start().starts_with('a'), "{text}");
        assert!(a_row.contains('x') && a_row.contains('-'), "{text}");
        assert_eq!(g.worst[0].src, "a");
        assert!(g.worst[0].why.contains("connection refused"));
        assert_eq!(
            (g.worst[1].src.as_str(), g.worst[1].dst.as_str()),
            ("b", "a")
        );
        let c = g.collective.unwrap();
        assert!((c.probability - 0.002).abs() < 1e-12, "{c:?}");
        assert!(g.summary_text().contains("all-to-all among the 3 hosts"));
    }

    #[test]
    fn small_probabilities_keep_two_significant_digits() {
        assert_eq!(pct(0.0), "0 %");
        assert_eq!(pct(0.5), "50.0 %");
        assert_eq!(pct(0.0024), "0.24 %");
        assert_eq!(pct(0.00018), "0.018 %");
        assert_eq!(pct(1e-6), "1.0e-4 %");
    }

    #[test]
    fn rows_of_unknown_hosts_are_ignored() {
        let g = grid(WorkloadKind::Msgs, &hosts(), &[ok("a", "zz", 1)]);
        assert_eq!((g.done, g.failed, g.missing), (0, 0, 6));
        assert!(g.collective.is_none());
    }
}
