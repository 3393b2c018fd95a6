//! The facts that differ between studies: what changed besides the numbers (the kernel, HZ,
//! a sysctl's default, the host), and the studies' titles when they differ.

use crate::html::flatten;
use crate::model::ReportInput;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One fact whose value is not the same in every study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactDifference {
    /// Dotted key into the facts (`sysctl.net.ipv4.tcp_rmem`), or `title`.
    pub fact: String,
    /// Its value per study, in study order; `None` where the study did not record it.
    pub values: Vec<Option<String>>,
}

/// The title (when the titles differ), then every flattened fact whose values differ, sorted
/// by key.
pub(super) fn differences(studies: &[(String, ReportInput)]) -> Vec<FactDifference> {
    let mut out = Vec::new();
    let titles: Vec<Option<String>> = studies.iter().map(|(_, i)| Some(i.title.clone())).collect();
    if !all_equal(&titles) {
        out.push(FactDifference {
            fact: "title".to_string(),
            values: titles,
        });
    }
    let flat: Vec<BTreeMap<String, String>> = studies
        .iter()
        .map(|(_, input)| {
            let mut rows = Vec::new();
            flatten("", &input.facts, &mut rows);
            rows.into_iter().collect()
        })
        .collect();
    let keys: BTreeSet<&String> = flat.iter().flat_map(|f| f.keys()).collect();
    for key in keys {
        let values: Vec<Option<String>> = flat.iter().map(|f| f.get(key).cloned()).collect();
        if !all_equal(&values) {
            out.push(FactDifference {
                fact: key.clone(),
                values,
            });
        }
    }
    out
}

fn all_equal(values: &[Option<String>]) -> bool {
    values.windows(2).all(|w| w[0] == w[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ObjectiveSpec;
    use tcplab_stats::Objective;

    fn study(title: &str, facts: serde_json::Value) -> (String, ReportInput) {
        let objective = ObjectiveSpec {
            name: "t".into(),
            unit: "s".into(),
            goal: Objective::Minimise,
        };
        let mut input = ReportInput::new(title, objective, Vec::new());
        input.facts = facts;
        (title.to_string(), input)
    }

    #[test]
    fn only_differing_facts_and_titles_are_listed() {
        let a = study(
            "a",
            serde_json::json!({"kernel": "6.1", "hz": 250, "sysctl": {"rmem": "1 2 3"}}),
        );
        let b = study(
            "b",
            serde_json::json!({"kernel": "6.8", "hz": 250, "cpus": 4, "sysctl": {"rmem": "1 2 3"}}),
        );
        let d = differences(&[a, b]);
        let keys: Vec<&str> = d.iter().map(|f| f.fact.as_str()).collect();
        assert_eq!(keys, ["title", "cpus", "kernel"]);
        assert_eq!(d[1].values, [None, Some("4".to_string())]);
        assert_eq!(
            d[2].values,
            [Some("6.1".to_string()), Some("6.8".to_string())]
        );
    }
}
