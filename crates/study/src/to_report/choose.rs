//! Which runs the report's per-run plots show. A study holds configurations × repetitions
//! runs; plotting all would bury the comparison, and plotting an arbitrary repetition (the
//! first, say) may show the one that hit a stall. So: the baseline, then the configurations
//! with the best mean objective, at most [`MAX_SHOWN`] in all, and of each the repetition whose
//! objective lies closest to the configuration's median: the run that looks like the rest.

use tcplab_stats::Objective;

/// Most configurations whose runs the per-run plots show (legends stay readable).
pub const MAX_SHOWN: usize = 4;

/// One configuration's successful repetitions: (rep, objective).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigReps {
    /// Configuration id.
    pub id: usize,
    /// Whether it is the baseline.
    pub is_baseline: bool,
    /// (repetition, objective value) of each successful run.
    pub reps: Vec<(u32, f64)>,
}

/// A run chosen for the per-run plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen {
    /// Configuration id.
    pub config_id: usize,
    /// Its repetition closest to the configuration's median.
    pub rep: u32,
    /// Whether the configuration is the baseline.
    pub is_baseline: bool,
}

/// The baseline (when it ran) first, then the best other configurations by mean objective
/// (`goal` says which way is better), `max` in all, each by [`median_rep`].
pub fn representatives(configs: &[ConfigReps], goal: Objective, max: usize) -> Vec<Chosen> {
    let mean = |c: &ConfigReps| c.reps.iter().map(|r| r.1).sum::<f64>() / c.reps.len() as f64;
    let mut others: Vec<(&ConfigReps, f64)> = configs
        .iter()
        .filter(|c| !c.is_baseline && !c.reps.is_empty())
        .map(|c| (c, mean(c)))
        .collect();
    others.sort_by(|a, b| match goal {
        Objective::Minimise => a.1.total_cmp(&b.1),
        Objective::Maximise => b.1.total_cmp(&a.1),
    });
    let baseline = configs
        .iter()
        .filter(|c| c.is_baseline && !c.reps.is_empty());
    baseline
        .chain(others.into_iter().map(|(c, _)| c))
        .take(max)
        .filter_map(|c| {
            Some(Chosen {
                config_id: c.id,
                rep: median_rep(&c.reps)?,
                is_baseline: c.is_baseline,
            })
        })
        .collect()
}

/// The repetition whose value is closest to the median of all (type 7, so with an even
/// count the mean of the middle two); of two equally close, the lower repetition.
pub fn median_rep(reps: &[(u32, f64)]) -> Option<u32> {
    let values: Vec<f64> = reps.iter().map(|r| r.1).collect();
    let m = tcplab_stats::quantile(&values, 0.5).ok()?;
    reps.iter()
        .min_by(|a, b| {
            (a.1 - m)
                .abs()
                .total_cmp(&(b.1 - m).abs())
                .then(a.0.cmp(&b.0))
        })
        .map(|r| r.0)
}

/// The sentence under the per-run plots that says how their runs were chosen.
pub fn runs_shown(chosen: &[Chosen], metric: &str) -> Option<String> {
    let baseline = chosen.iter().any(|c| c.is_baseline);
    let best = chosen.iter().filter(|c| !c.is_baseline).count();
    let configs = match best {
        0 => String::new(),
        1 => format!("the configuration with the best mean {metric}"),
        n => format!("the {n} configurations with the best mean {metric}"),
    };
    let which = match (baseline, best) {
        (false, 0) => return None,
        (true, 0) => "the baseline".to_string(),
        (false, _) => configs,
        (true, _) => format!("the baseline and {configs}"),
    };
    let each = if chosen.len() == 1 {
        "by its median repetition"
    } else {
        "each by its median repetition"
    };
    Some(format!(
        "Per-run plots show {which}, {each} (the one whose {metric} is closest to its configuration's median)."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(id: usize, is_baseline: bool, values: &[f64]) -> ConfigReps {
        ConfigReps {
            id,
            is_baseline,
            reps: values
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u32, *v))
                .collect(),
        }
    }

    #[test]
    fn the_median_repetition_is_the_closest_and_ties_go_to_the_lower() {
        assert_eq!(median_rep(&[]), None);
        assert_eq!(median_rep(&[(0, 9.0), (1, 1.0), (2, 5.0)]), Some(2));
        // Median 3: reps 1 (2.0) and 2 (4.0) are equally close.
        assert_eq!(
            median_rep(&[(0, 1.0), (2, 4.0), (1, 2.0), (3, 9.0)]),
            Some(1)
        );
        assert_eq!(median_rep(&[(4, 7.0)]), Some(4));
    }

    #[test]
    fn baseline_first_then_the_best_by_mean_up_to_the_limit() {
        let configs = [
            cfg(0, false, &[5.0, 5.0]),
            cfg(1, true, &[1.0, 3.0, 2.0]),
            cfg(2, false, &[9.0, 8.0]),
            cfg(3, false, &[]),
            cfg(4, false, &[7.0, 6.0, 7.5]),
            cfg(5, false, &[2.0]),
            cfg(6, false, &[6.5]),
        ];
        let ids = |goal| -> Vec<(usize, u32)> {
            representatives(&configs, goal, MAX_SHOWN)
                .iter()
                .map(|c| (c.config_id, c.rep))
                .collect()
        };
        assert_eq!(ids(Objective::Maximise), [(1, 2), (2, 0), (4, 0), (6, 0)]);
        assert_eq!(ids(Objective::Minimise), [(1, 2), (5, 0), (0, 0), (6, 0)]);
        let none = representatives(&configs[2..3], Objective::Maximise, MAX_SHOWN);
        assert!(!none[0].is_baseline && none.len() == 1);
    }

    #[test]
    fn the_sentence_says_what_was_chosen() {
        let c = |config_id, is_baseline| Chosen {
            config_id,
            rep: 0,
            is_baseline,
        };
        let s = runs_shown(
            &[c(0, true), c(1, false), c(2, false), c(3, false)],
            "throughput_bps",
        );
        assert!(
            s.unwrap().starts_with(
                "Per-run plots show the baseline and the 3 configurations with the best mean throughput_bps, each by its median repetition"
            )
        );
        let s = runs_shown(&[c(0, true)], "x").unwrap();
        assert!(
            s.starts_with("Per-run plots show the baseline, by its median repetition"),
            "{s}"
        );
        let s = runs_shown(&[c(1, false)], "x").unwrap();
        assert!(
            s.contains("show the configuration with the best mean x, by"),
            "{s}"
        );
        assert_eq!(runs_shown(&[], "x"), None);
    }
}
