//! What one pair's test says, reduced to what the mesh reports: the workload's headline figure,
//! its stalls (seed 004's receive gaps above `--stall-ms`) and whether it ran whole. The full
//! result stays in the database; this is what the matrix, the worst pairs and the collective
//! estimate are computed from, so a 64-host mesh holds 4,032 of these, never a sample.

use serde::{Deserialize, Serialize};
use tcplab_load::Report;
use tcplab_stats::PairStalls;

pub use tcplab_results::spec::WorkloadKind;

/// The workloads a mesh runs: those one agent runs toward another with a headline per pair.
pub const MESH_KINDS: &[WorkloadKind] = &[
    WorkloadKind::Msgs,
    WorkloadKind::Rr,
    WorkloadKind::Stream,
    WorkloadKind::Crr,
];

/// Reads `--workload`: one of [`MESH_KINDS`]; the error lists them.
pub fn parse_workload(name: &str) -> Result<WorkloadKind, String> {
    WorkloadKind::parse_among(name, MESH_KINDS).map_err(|e| format!("{e} (what a mesh runs)"))
}

/// What a mesh reports of a workload: its per-pair figure, which for msgs is seed 004's stall
/// count rather than the kind's headline (a pair's stalls are what the all-to-all estimate is
/// made of).
pub trait MeshFigure: Copy {
    /// True for workloads whose figure a concurrent test on the same host would change by
    /// sharing its link: they always run as a tournament.
    fn is_throughput(self) -> bool;
    /// The figure's name and unit, as the matrix's caption shows it.
    fn figure(self) -> &'static str;
    /// True when a larger figure is worse.
    fn higher_is_worse(self) -> bool;
}

impl MeshFigure for WorkloadKind {
    fn is_throughput(self) -> bool {
        matches!(self, Self::Stream | Self::Crr | Self::Rrul | Self::Http)
    }

    fn figure(self) -> &'static str {
        match self {
            Self::Msgs => "stalls (receive gaps above --stall-ms)",
            Self::Rr => "p99 latency, µs",
            Self::Stream => "throughput, Mbit/s",
            Self::Crr => "connections/s",
            Self::Rrul => "p99 latency under load, µs",
            Self::Http => "requests/s",
        }
    }

    fn higher_is_worse(self) -> bool {
        matches!(self, Self::Msgs | Self::Rr | Self::Rrul)
    }
}

/// One pair's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// The headline figure ([`MeshFigure::figure`]); None when the test produced none.
    pub value: Option<f64>,
    /// msgs: stalled messages of those received.
    pub stalls: Option<PairStalls>,
    /// The workload's own time, s (what the harness's cost is measured against). JSON has no
    /// NaN or infinity (serde_json writes `null` for them), so `null` reads back as NaN.
    #[serde(deserialize_with = "number_or_nan")]
    pub workload_s: f64,
    /// False when the test was cut short.
    pub complete: bool,
    /// Why it was cut short.
    pub incomplete_reason: Option<String>,
    /// One line: the figures a reader wants beside the headline.
    pub detail: String,
}

/// A number written as `null` (a NaN or an infinity, as serde_json writes them) reads as NaN, so a
/// figure that is not finite does not make its row unreadable.
fn number_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Reduces a pair's result to its [`Figures`]; a result of a kind a mesh does not run is an
/// error naming the kinds it does.
pub fn figures(report: &Report) -> Result<Figures, String> {
    let meta = report.meta();
    let mut f = Figures {
        value: None,
        stalls: None,
        workload_s: 0.0,
        complete: meta.complete,
        incomplete_reason: meta.incomplete_reason.clone(),
        detail: String::new(),
    };
    match report {
        Report::Msgs(r) => {
            if let Some(run) = r.runs.first() {
                f.value = Some(run.stalls as f64);
                f.workload_s = run.total_s;
                if run.received > 0 {
                    f.stalls = Some(PairStalls {
                        stalled: run.stalls.min(run.received),
                        messages: run.received,
                    });
                }
                f.detail = format!(
                    "{} of {} messages, {} µs each, {} stalls{}",
                    run.received,
                    run.count,
                    num(run.per_message_us.mean),
                    run.stalls,
                    run.stall_every
                        .map(|e| format!(", one every {e:.0} messages"))
                        .unwrap_or_default()
                );
            }
        }
        Report::Rr(r) => {
            f.value = r.summary.latency_us.p99;
            f.workload_s = r.points.iter().map(|p| p.elapsed_s).sum();
            if r.summary.transactions > 0 {
                f.stalls = Some(PairStalls {
                    stalled: r.summary.stalls.min(r.summary.transactions),
                    messages: r.summary.transactions,
                });
            }
            f.detail = format!(
                "{} transactions, p50 {} µs, p99 {} µs, max {} µs, {} above {} ms",
                r.summary.transactions,
                num(r.summary.latency_us.p50),
                num(r.summary.latency_us.p99),
                num(r.summary.latency_us.max),
                r.summary.stalls,
                r.config.stall_ms
            );
        }
        Report::Stream(r) => {
            f.value = r.summary.throughput_bps.map(|b| b / 1e6);
            f.workload_s = r.elapsed_s;
            f.detail = format!(
                "{} Mbit/s, {} retransmits",
                num(f.value),
                r.summary.retransmits
            );
        }
        Report::Crr(r) => {
            f.value = r.summary.connections_per_s;
            f.workload_s = r.elapsed_s;
            f.detail = format!(
                "{} connections/s, connect p99 {} µs",
                num(f.value),
                num(r.summary.connect_us.p99)
            );
        }
        Report::Rrul(_) | Report::Http(_) => {
            let ran = if matches!(report, Report::Rrul(_)) {
                "rrul"
            } else {
                "http"
            };
            return Err(format!(
                "the agent ran {ran}, which a mesh does not run; use msgs, rr, stream or crr"
            ));
        }
    }
    Ok(f)
}

/// A figure with three significant digits, or "-".
pub fn num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if !x.is_finite() => "-".into(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_load::msgs::{MsgsResult, MsgsRun};

    #[test]
    fn a_msgs_result_gives_its_stalls_out_of_the_messages_received() {
        let r = Report::Msgs(MsgsResult {
            runs: vec![MsgsRun {
                count: 1_000,
                received: 1_000,
                sent: 1_000,
                stalls: 3,
                total_s: 0.5,
                ..MsgsRun::default()
            }],
            ..MsgsResult::default()
        });
        let f = figures(&r).unwrap();
        assert_eq!(f.value, Some(3.0));
        assert_eq!(
            f.stalls,
            Some(PairStalls {
                stalled: 3,
                messages: 1_000
            })
        );
        assert_eq!(f.workload_s, 0.5);
        assert!(f.detail.contains("3 stalls"), "{}", f.detail);
    }

    #[test]
    fn workload_names_round_trip_and_unknown_ones_list_the_choices() {
        for &w in MESH_KINDS {
            assert_eq!(parse_workload(w.name()), Ok(w));
        }
        let e = parse_workload("rrul").unwrap_err();
        assert!(e.contains("msgs, rr, stream, crr"), "{e}");
    }
}
