//! The comparison as one JSON document, for scripts: every figure in the objective's base unit,
//! under a key that is the objective metric's own name (`throughput_bps`, `per_message_us.mean`),
//! whose suffix names the unit.
//!
//! ```text
//! { "objective": {"metric", "unit", "goal"}, "level",
//!   "studies": [{"name", "title"}],
//!   "configurations": [{"label", "factors", "studies": [null | {
//!       "study", "status", "reason", "n",
//!       "<metric>": {"mean", "sd", "ci_lower", "ci_upper"},
//!       "vs_first": null | {"speed_up", "lower", "upper", "p_value", "p_holm", "change"}}]}],
//!   "verdicts": [...], "facts_that_differ": [{"fact", "values": [...]}], "key": {...} }
//! ```

use super::{Cell, Comparison, ComparisonRow, Ratio};
use crate::error::ReportError;
use serde_json::{Value, json};
use tcplab_stats::units::Unit;

impl Comparison {
    /// The document above, pretty-printed. `studies` of a configuration has one entry per
    /// study in study order, `null` where the study lacks it; `vs_first` is the speed-up over
    /// the first study (> 1: better) with its bootstrap CI, Welch's p-value, the Holm-adjusted
    /// one, and `change` (`faster`, `slower`, `not_significant`).
    pub fn to_json(&self) -> Result<String, ReportError> {
        let doc = json!({
            "objective": {
                "metric": self.objective.name,
                "unit": Unit::parse(&self.objective.unit).base_symbol(),
                "goal": self.objective.goal,
            },
            "level": self.level,
            "studies": self.studies,
            "configurations": self.rows.iter().map(|r| self.row_json(r)).collect::<Vec<_>>(),
            "verdicts": self.verdicts(),
            "facts_that_differ": self.facts,
            "key": self.key,
        });
        Ok(serde_json::to_string_pretty(&doc)?)
    }

    fn row_json(&self, r: &ComparisonRow) -> Value {
        let cells: Vec<Value> = r
            .cells
            .iter()
            .zip(&self.studies)
            .map(|(c, s)| {
                c.as_ref()
                    .map_or(Value::Null, |c| self.cell_json(&s.name, c))
            })
            .collect();
        json!({ "label": r.label, "factors": r.factors, "studies": cells })
    }

    fn cell_json(&self, study: &str, c: &Cell) -> Value {
        let mut v = json!({
            "study": study,
            "status": c.status,
            "reason": c.reason,
            "n": c.n,
            "vs_first": c.vs_first.as_ref().map(ratio_json),
        });
        v[self.objective.name.as_str()] = json!({
            "mean": c.mean,
            "sd": c.sd,
            "ci_lower": c.ci_lower,
            "ci_upper": c.ci_upper,
        });
        v
    }
}

fn ratio_json(r: &Ratio) -> Value {
    json!({
        "speed_up": r.estimate,
        "lower": r.lower,
        "upper": r.upper,
        "p_value": r.p_value,
        "p_holm": r.p_adjusted,
        "change": r.change,
    })
}
