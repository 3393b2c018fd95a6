//! How often the doctor is right: labels of a corpus of pathologies and the confusion matrix of
//! the doctor's findings against them.
//!
//! Pure: each run of the corpus is a [`Label`] (the case's true cause, the findings that are
//! true on it too, the ones that must not appear) and the findings the doctor gave. The
//! [`Scorecard`] says, per run, whether the top-ranked finding is the true cause; per finding
//! id, its precision and recall; and how often a healthy path got a finding of warning or
//! above. A finding counts as reported when its severity is at least [`REPORTED`]: an info
//! line (including one demoted because another finding explains it) is not a diagnosis.
//!
//! Precision of id X = runs where X was reported and is true there (the cause or one of the
//! case's `also`) / runs where X was reported. Recall of X = runs whose cause is X where X was
//! reported / runs whose cause is X.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::finding::{Finding, Severity};

/// The cause of a healthy case: nothing at [`REPORTED`] or above may appear.
pub const HEALTHY: &str = "healthy";

/// Lowest severity that counts as the doctor saying something is wrong.
pub const REPORTED: Severity = Severity::Warning;

/// What is true of one run of the corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    /// The case's name, e.g. `sndbuf-small`.
    pub case: String,
    /// The parameter point, e.g. `1gbit 40ms`.
    pub point: String,
    /// The finding id of the true cause, or [`HEALTHY`].
    pub cause: String,
    /// Other finding ids that are true on this case (a real secondary effect): reported,
    /// they count as correct for precision, and never as the top finding.
    #[serde(default)]
    pub also: Vec<String>,
    /// Finding ids that must not be reported (a look-alike the case was built to provoke).
    #[serde(default)]
    pub must_not: Vec<String>,
}

impl Label {
    /// True when `id` is true on this run.
    pub fn is_true(&self, id: &str) -> bool {
        id == self.cause || self.also.iter().any(|a| a == id)
    }

    /// True for a healthy case.
    pub fn healthy(&self) -> bool {
        self.cause == HEALTHY
    }
}

/// One finding as scored: its id and severity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reported {
    /// Finding id.
    pub id: String,
    /// Its severity.
    pub severity: Severity,
}

/// One run of the corpus: its label and what the doctor said (or why it could not run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// What is true.
    pub label: Label,
    /// The findings, in the doctor's order (most important first).
    pub findings: Vec<Reported>,
    /// Why the run produced no diagnosis (the lab or a workload failed).
    #[serde(default)]
    pub error: Option<String>,
}

impl Outcome {
    /// An outcome from the doctor's findings.
    pub fn new(label: Label, findings: &[Finding]) -> Self {
        Self {
            label,
            findings: findings
                .iter()
                .map(|f| Reported {
                    id: f.id.clone(),
                    severity: f.severity,
                })
                .collect(),
            error: None,
        }
    }

    /// The ids reported (at [`REPORTED`] or above), in order.
    pub fn reported(&self) -> Vec<&str> {
        self.findings
            .iter()
            .filter(|f| f.severity >= REPORTED)
            .map(|f| f.id.as_str())
            .collect()
    }

    /// The top-ranked reported id, `None` when nothing was reported.
    pub fn top(&self) -> Option<&str> {
        self.reported().first().copied()
    }

    /// Whether the doctor got this run right: a pathological run's top finding is its cause;
    /// a healthy run has nothing reported.
    pub fn top_correct(&self) -> bool {
        if self.error.is_some() {
            return false;
        }
        if self.label.healthy() {
            return self.top().is_none();
        }
        self.top() == Some(self.label.cause.as_str())
    }

    /// Reported ids the label says must not appear.
    pub fn must_not_violations(&self) -> Vec<&str> {
        self.reported()
            .into_iter()
            .filter(|id| self.label.must_not.iter().any(|m| m == id))
            .collect()
    }

    /// Reported ids that are not true on this run.
    pub fn false_positives(&self) -> Vec<&str> {
        self.reported()
            .into_iter()
            .filter(|id| !self.label.is_true(id))
            .collect()
    }
}

/// Precision and recall of one finding id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FindingScore {
    /// Reported where true.
    pub true_positives: usize,
    /// Reported where not true.
    pub false_positives: usize,
    /// The cause of a run but not reported there.
    pub false_negatives: usize,
    /// Runs whose cause this id is.
    pub cause_of: usize,
}

impl FindingScore {
    /// TP / (TP + FP), `None` when never reported.
    pub fn precision(&self) -> Option<f64> {
        let n = self.true_positives + self.false_positives;
        (n > 0).then(|| self.true_positives as f64 / n as f64)
    }

    /// Reported-as-cause / runs with this cause, `None` when no run has it as its cause.
    pub fn recall(&self) -> Option<f64> {
        (self.cause_of > 0)
            .then(|| (self.cause_of - self.false_negatives) as f64 / self.cause_of as f64)
    }
}

/// The confusion matrix of a corpus run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scorecard {
    /// Every run, in corpus order.
    pub outcomes: Vec<Outcome>,
    /// Per finding id.
    pub findings: BTreeMap<String, FindingScore>,
}

/// A count out of a total, with its share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// How many.
    pub count: usize,
    /// Out of.
    pub total: usize,
}

impl Share {
    /// count / total, 0 for an empty total.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.count as f64 / self.total as f64
        }
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} ({:.1}%)",
            self.count,
            self.total,
            self.fraction() * 100.0
        )
    }
}

/// The goals a corpus run is held to (issue: the doctor's accuracy).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Goals {
    /// Least share of pathological runs whose top finding is the cause.
    pub top_correct: f64,
    /// Least precision of every finding id reported at least once.
    pub precision: f64,
    /// Largest share of healthy runs with a finding of warning or above.
    pub false_alarms: f64,
}

impl Default for Goals {
    fn default() -> Self {
        Self {
            top_correct: 0.9,
            precision: 0.9,
            false_alarms: 0.05,
        }
    }
}

impl Scorecard {
    /// Scores `outcomes`.
    pub fn new(outcomes: Vec<Outcome>) -> Self {
        let mut findings: BTreeMap<String, FindingScore> = BTreeMap::new();
        for o in &outcomes {
            if !o.label.healthy() {
                let s = findings.entry(o.label.cause.clone()).or_default();
                s.cause_of += 1;
                if !o.reported().contains(&o.label.cause.as_str()) {
                    s.false_negatives += 1;
                }
            }
            let distinct: BTreeSet<&str> = o.reported().into_iter().collect();
            for id in distinct {
                let s = findings.entry(id.to_string()).or_default();
                if o.label.is_true(id) {
                    s.true_positives += 1;
                } else {
                    s.false_positives += 1;
                }
            }
        }
        Self { outcomes, findings }
    }

    /// Pathological runs whose top-ranked finding is the true cause.
    pub fn top_correct(&self) -> Share {
        self.share(|o| !o.label.healthy(), Outcome::top_correct)
    }

    /// Healthy runs with a finding of warning or above (or no diagnosis at all).
    pub fn false_alarms(&self) -> Share {
        self.share(|o| o.label.healthy(), |o| !o.top_correct())
    }

    /// The lowest precision over finding ids reported at least once, with its id.
    pub fn worst_precision(&self) -> Option<(&str, f64)> {
        self.findings
            .iter()
            .filter_map(|(id, s)| s.precision().map(|p| (id.as_str(), p)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// Runs where a must-not finding was reported.
    pub fn must_not_violations(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| !o.must_not_violations().is_empty())
            .count()
    }

    /// Each goal missed, in words; empty when all are met.
    pub fn missed(&self, goals: &Goals) -> Vec<String> {
        let mut missed = Vec::new();
        let top = self.top_correct();
        if top.fraction() < goals.top_correct {
            missed.push(format!(
                "top finding is the cause in {top}, goal {:.0}%",
                goals.top_correct * 100.0
            ));
        }
        for (id, s) in &self.findings {
            if let Some(p) = s.precision().filter(|p| *p < goals.precision) {
                missed.push(format!(
                    "precision of {id} {p:.2}, goal {:.2}",
                    goals.precision
                ));
            }
        }
        let alarms = self.false_alarms();
        if alarms.fraction() > goals.false_alarms {
            missed.push(format!(
                "healthy runs with a finding: {alarms}, goal at most {:.0}%",
                goals.false_alarms * 100.0
            ));
        }
        missed
    }

    fn share(&self, of: impl Fn(&Outcome) -> bool, hit: impl Fn(&Outcome) -> bool) -> Share {
        let runs: Vec<&Outcome> = self.outcomes.iter().filter(|o| of(o)).collect();
        Share {
            count: runs.iter().filter(|o| hit(o)).count(),
            total: runs.len(),
        }
    }
}

impl fmt::Display for Scorecard {
    /// The per-run table, the per-finding table and the summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "per run: is the top finding the true cause?")?;
        let width = |col: fn(&Label) -> &str, head: &str| {
            self.outcomes
                .iter()
                .map(|o| col(&o.label).chars().count())
                .max()
                .unwrap_or(0)
                .max(head.len())
        };
        let (wc, wp, wt) = (
            width(|l| &l.case, "case"),
            width(|l| &l.point, "point"),
            width(|l| &l.cause, "true cause"),
        );
        let said_head = "reported (warning and above, in order)";
        writeln!(
            f,
            "      {:<wc$}  {:<wp$}  {:<wt$}  {said_head}",
            "case", "point", "true cause"
        )?;
        for o in &self.outcomes {
            let mark = if o.top_correct() { "ok" } else { "NO" };
            let said = match &o.error {
                Some(e) => format!("run failed: {e}"),
                None if o.reported().is_empty() => "-".to_string(),
                None => o.reported().join(", "),
            };
            writeln!(
                f,
                "  {mark:<3} {:<wc$}  {:<wp$}  {:<wt$}  {said}",
                o.label.case, o.label.point, o.label.cause
            )?;
        }
        writeln!(f, "\nper finding: precision and recall")?;
        writeln!(
            f,
            "  {:<36} {:>4} {:>4} {:>4} {:>9} {:>9}",
            "finding", "TP", "FP", "FN", "precision", "recall"
        )?;
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        for (id, s) in &self.findings {
            writeln!(
                f,
                "  {id:<36} {:>4} {:>4} {:>4} {:>9} {:>9}",
                s.true_positives,
                s.false_positives,
                s.false_negatives,
                pct(s.precision()),
                pct(s.recall())
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "top finding is the true cause: {} of pathological runs",
            self.top_correct()
        )?;
        if let Some((id, p)) = self.worst_precision() {
            writeln!(f, "lowest precision: {p:.2} ({id})")?;
        }
        writeln!(
            f,
            "healthy runs with a finding of warning or above: {}",
            self.false_alarms()
        )?;
        writeln!(
            f,
            "runs with a must-not finding: {}",
            self.must_not_violations()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(case: &str, cause: &str, also: &[&str], must_not: &[&str]) -> Label {
        Label {
            case: case.into(),
            point: "p".into(),
            cause: cause.into(),
            also: also.iter().map(|s| s.to_string()).collect(),
            must_not: must_not.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn outcome(l: Label, said: &[(&str, Severity)]) -> Outcome {
        Outcome {
            label: l,
            findings: said
                .iter()
                .map(|(id, severity)| Reported {
                    id: id.to_string(),
                    severity: *severity,
                })
                .collect(),
            error: None,
        }
    }

    use Severity::{Error, Info, Warning};

    #[test]
    fn top_finding_must_be_the_cause_and_info_does_not_count() {
        let o = outcome(
            label("a", "sndbuf_limited", &[], &["periodic_stall"]),
            &[("periodic_stall", Info), ("sndbuf_limited", Warning)],
        );
        assert_eq!(o.top(), Some("sndbuf_limited"));
        assert!(o.top_correct());
        assert!(o.must_not_violations().is_empty(), "demoted to info");
        let o = outcome(
            label("a", "sndbuf_limited", &[], &["periodic_stall"]),
            &[("periodic_stall", Error), ("sndbuf_limited", Warning)],
        );
        assert!(!o.top_correct());
        assert_eq!(o.must_not_violations(), ["periodic_stall"]);
    }

    #[test]
    fn healthy_runs_are_right_only_when_silent() {
        let quiet = outcome(label("h", HEALTHY, &[], &[]), &[("x", Info)]);
        assert!(quiet.top_correct());
        let alarm = outcome(label("h", HEALTHY, &[], &[]), &[("x", Warning)]);
        assert!(!alarm.top_correct());
        let mut failed = quiet.clone();
        failed.error = Some("lab failed".into());
        assert!(!failed.top_correct());
    }

    #[test]
    fn precision_recall_and_shares_are_exact() {
        let card = Scorecard::new(vec![
            // Cause found first.
            outcome(
                label("a", "loss_limited", &["untrustworthy.cpu"], &[]),
                &[("loss_limited", Error), ("untrustworthy.cpu", Warning)],
            ),
            // Cause found second, after a false one.
            outcome(
                label("b", "loss_limited", &[], &[]),
                &[("periodic_stall", Error), ("loss_limited", Warning)],
            ),
            // Cause missed.
            outcome(label("c", "bufferbloat", &[], &[]), &[]),
            // Healthy with an alarm, and healthy quiet.
            outcome(
                label("h", HEALTHY, &[], &[]),
                &[("periodic_stall", Warning)],
            ),
            outcome(label("h", HEALTHY, &[], &[]), &[]),
        ]);
        let loss = &card.findings["loss_limited"];
        assert_eq!(
            (
                loss.true_positives,
                loss.false_positives,
                loss.false_negatives
            ),
            (2, 0, 0)
        );
        assert_eq!(loss.precision(), Some(1.0));
        assert_eq!(loss.recall(), Some(1.0));
        let stall = &card.findings["periodic_stall"];
        assert_eq!((stall.true_positives, stall.false_positives), (0, 2));
        assert_eq!(stall.precision(), Some(0.0));
        assert_eq!(stall.recall(), None);
        let bloat = &card.findings["bufferbloat"];
        assert_eq!(bloat.recall(), Some(0.0));
        assert_eq!(bloat.precision(), None);
        assert_eq!(card.findings["untrustworthy.cpu"].precision(), Some(1.0));
        assert_eq!(card.top_correct(), Share { count: 1, total: 3 });
        assert_eq!(card.false_alarms(), Share { count: 1, total: 2 });
        assert_eq!(card.worst_precision(), Some(("periodic_stall", 0.0)));
        let missed = card.missed(&Goals::default());
        assert_eq!(missed.len(), 3, "{missed:?}");
        assert!(missed[0].starts_with("top finding is the cause in 1 of 3 (33.3%)"));
        let text = card.to_string();
        assert!(text.contains("  NO  b  "), "{text}");
        assert!(text.contains("lowest precision: 0.00 (periodic_stall)"));
    }

    #[test]
    fn a_finding_reported_twice_in_a_run_counts_once() {
        let card = Scorecard::new(vec![outcome(
            label("a", "x", &[], &[]),
            &[("x", Error), ("x", Warning)],
        )]);
        assert_eq!(card.findings["x"].true_positives, 1);
    }
}
