//! What the doctor said about a regressed pair, pure: its findings ranked as the doctor ranks
//! them, and the one cause an alert names (a finding's id, a bounded set the doctor's rules
//! define), or why there is none.
//!
//! The cause is a label on the regression metric and in the webhook's payload: its values are
//! the doctor's rule ids and four words of the monitor's own, so a dashboard's series stay
//! bounded.

use serde::{Deserialize, Serialize};
use tcplab_doctor::{Finding, Severity};

/// Why an alert's pair is slow, as far as the monitor knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Cause {
    /// The doctor has not run on the pair yet (it waits for both hosts to be free).
    Pending,
    /// The doctor's top finding: its id (`rwnd_limited`, `loss_limited`, ...).
    Found {
        /// The finding's id.
        id: String,
    },
    /// The doctor ran and reported nothing at warning or above: the regression is real but
    /// the battery does not explain it.
    Unexplained,
    /// The doctor could not run on the pair.
    DoctorFailed {
        /// Why.
        why: String,
    },
    /// The monitor runs without the doctor (`--no-doctor`).
    NotDiagnosed,
}

impl Cause {
    /// The metric label's value.
    pub fn label(&self) -> &str {
        match self {
            Cause::Pending => "pending",
            Cause::Found { id } => id,
            Cause::Unexplained => "unexplained",
            Cause::DoctorFailed { .. } => "doctor_failed",
            Cause::NotDiagnosed => "not_diagnosed",
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Pending => f.write_str("the doctor has not run yet"),
            Cause::Found { id } => write!(f, "the doctor finds {id}"),
            Cause::Unexplained => f.write_str(
                "the doctor ran and finds nothing that explains it (a regression it does not explain)",
            ),
            Cause::DoctorFailed { why } => write!(f, "the doctor could not run: {why}"),
            Cause::NotDiagnosed => f.write_str("not diagnosed (--no-doctor)"),
        }
    }
}

/// The doctor's run on a regressed pair: what an alert keeps as its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The cause it names.
    pub cause: Cause,
    /// When the doctor finished, Unix ms.
    pub at_ms: u64,
    /// The findings it reported (warning and above, not explained by another), ranked: the
    /// first is the cause.
    pub findings: Vec<Finding>,
}

impl Evidence {
    /// The evidence of a doctor's findings (`findings` as `tcplab_doctor::diagnosis` ranks
    /// them, info ones included).
    pub fn of(findings: Vec<Finding>, at_ms: u64) -> Evidence {
        let reported: Vec<Finding> = findings
            .into_iter()
            .filter(|f| f.severity >= Severity::Warning && f.explained_by.is_none())
            .collect();
        let cause = match reported.first() {
            Some(top) => Cause::Found { id: top.id.clone() },
            None => Cause::Unexplained,
        };
        Evidence {
            cause,
            at_ms,
            findings: reported,
        }
    }

    /// The evidence of a doctor that could not run.
    pub fn failed(why: String, at_ms: u64) -> Evidence {
        Evidence {
            cause: Cause::DoctorFailed { why },
            at_ms,
            findings: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: &str, severity: Severity) -> Finding {
        Finding::new(id, severity, id)
    }

    #[test]
    fn the_cause_is_the_top_reported_finding_and_info_or_explained_ones_are_left_out() {
        let mut symptom = finding("periodic_stall", Severity::Error);
        symptom.explained_by = Some("rwnd_limited".into());
        let e = Evidence::of(
            vec![
                finding("untrustworthy.cpu", Severity::Info),
                symptom,
                finding("rwnd_limited", Severity::Warning),
                finding("loss_limited", Severity::Warning),
            ],
            7,
        );
        assert_eq!(
            e.cause,
            Cause::Found {
                id: "rwnd_limited".into()
            }
        );
        let ids: Vec<&str> = e.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["rwnd_limited", "loss_limited"]);
        assert_eq!(e.cause.label(), "rwnd_limited");
    }

    #[test]
    fn nothing_reported_is_unexplained_and_says_so() {
        let e = Evidence::of(vec![finding("healthy_note", Severity::Info)], 1);
        assert_eq!(e.cause, Cause::Unexplained);
        assert!(e.findings.is_empty());
        assert!(
            e.cause.to_string().contains("does not explain"),
            "{}",
            e.cause
        );
        let f = Evidence::failed("agent b: refused".into(), 2);
        assert_eq!(f.cause.label(), "doctor_failed");
        assert!(f.cause.to_string().contains("agent b: refused"));
    }

    #[test]
    fn evidence_reads_back_as_it_was_written() {
        let e = Evidence::of(vec![finding("loss_limited", Severity::Error)], 9);
        let back: Evidence = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
