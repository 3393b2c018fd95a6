//! Ranking and racing on synthetic settings whose right answer is known by construction.

mod common;

use common::Gen;
use tcplab_stats::{
    Objective, RaceAction, RaceConfig, RankConfig, RankKey, Samples, TestKind, race_round, rank,
};

/// Five settings of per-run time (minimise), n = 10 each:
/// - `fast-a` ≈ 1.00 ± 0.02 and `fast-b` ≈ 1.01 ± 0.02: indistinguishable, the fast group;
/// - `spiky`: 0.98 most runs but one run in ten takes 2.0 s: a good mean, a bad tail;
/// - `slow-a` ≈ 1.50 ± 0.02 and `slow-b` ≈ 1.51 ± 0.03: a second, slower group.
fn five_settings(g: &mut Gen) -> Vec<(&'static str, Vec<f64>)> {
    let mut spiky = g.normals(10, 0.98, 0.005);
    spiky[4] = 2.0;
    vec![
        ("slow-a", g.normals(10, 1.50, 0.02)),
        ("spiky", spiky),
        ("fast-b", g.normals(10, 1.01, 0.02)),
        ("slow-b", g.normals(10, 1.51, 0.03)),
        ("fast-a", g.normals(10, 1.00, 0.02)),
    ]
}

fn as_samples<'a>(v: &'a [(&'static str, Vec<f64>)]) -> Vec<Samples<'a>> {
    v.iter()
        .map(|(n, xs)| Samples {
            name: n,
            values: xs,
        })
        .collect()
}

#[test]
fn tail_ranking_puts_the_consistent_group_first_and_the_spiky_setting_last_in_it() {
    let data = five_settings(&mut Gen::new(1));
    let r = rank(&as_samples(&data), &RankConfig::new(Objective::Minimise)).unwrap();
    let order: Vec<(&str, usize)> = r
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.group))
        .collect();
    // fast-a/fast-b lead by p90; spiky's p90 (≈1.08) ranks it after them. Its mean (1.08,
    // sd 0.32) is not significantly different from fast-a by Welch, so it stays in group 1.
    assert_eq!(order[0].1, 1);
    assert_eq!(order[1].1, 1);
    let mut first_two = [order[0].0, order[1].0];
    first_two.sort();
    assert_eq!(first_two, ["fast-a", "fast-b"]);
    assert_eq!(order[2], ("spiky", 1));
    assert_eq!(&order[3..].iter().map(|o| o.1).collect::<Vec<_>>(), &[2, 2]);
    assert_eq!(
        r.entries.iter().map(|e| e.rank).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    // The key is the p90 and is reported; spiky's is far above its median.
    let spiky = &r.entries[2];
    assert!(spiky.key > 1.05 && spiky.summary.median < 0.99, "{spiky:?}");
    // Slow settings were compared with the fast leader and are significantly different.
    // The leader of group 2 carries the comparison that excluded it from group 1.
    let slow = &r.entries[3];
    let excluded = slow.vs_leader.as_ref().unwrap();
    assert!(excluded.leader == r.entries[0].name && excluded.p_adjusted.unwrap() < 1e-6);
    assert!(r.entries[0].vs_leader.is_none());
    assert!(
        r.method.contains("Holm") && r.method.contains("90th percentile"),
        "{}",
        r.method
    );
}

#[test]
fn ranking_by_mean_alone_would_have_picked_the_spiky_setting() {
    // Guard that the test above is meaningful: spiky's *minimum and median* are the best.
    let data = five_settings(&mut Gen::new(1));
    let spiky = &data[1].1;
    let fast_a = &data[4].1;
    let med = |v: &Vec<f64>| tcplab_stats::quantile(v, 0.5).unwrap();
    assert!(med(spiky) < med(fast_a));
}

#[test]
fn confidence_bound_key_and_maximise_orientation() {
    // Throughput (maximise): three settings near 900 Mbit/s, two near 400.
    let mut g = Gen::new(2);
    let data = vec![
        ("bbr", g.normals(8, 940.0, 5.0)),
        ("cubic", g.normals(8, 935.0, 5.0)),
        ("reno", g.normals(8, 938.0, 6.0)),
        ("small-buf", g.normals(8, 410.0, 20.0)),
        ("tiny-buf", g.normals(8, 400.0, 25.0)),
    ];
    let mut cfg = RankConfig::new(Objective::Maximise);
    cfg.key = RankKey::ConfidenceBound;
    let r = rank(&as_samples(&data), &cfg).unwrap();
    let groups: Vec<usize> = r.entries.iter().map(|e| e.group).collect();
    assert_eq!(groups, vec![1, 1, 1, 2, 2]);
    for e in &r.entries[..3] {
        assert!(["bbr", "cubic", "reno"].contains(&e.name.as_str()));
        // Key = lower bound of the 95% CI of the mean when maximising.
        assert_eq!(e.key, e.mean_ci.unwrap().lower);
    }
    assert!(r.entries[0].key >= r.entries[1].key && r.entries[1].key >= r.entries[2].key);
}

#[test]
fn many_equal_settings_stay_in_one_group_thanks_to_holm() {
    // Ten settings drawn from one distribution: without correction, ~1 in 20 comparisons
    // would be "significant"; with Holm the family stays together.
    let mut g = Gen::new(3);
    let data: Vec<(&'static str, Vec<f64>)> =
        ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"]
            .into_iter()
            .map(|n| (n, g.normals(6, 1.0, 0.1)))
            .collect();
    let mut cfg = RankConfig::new(Objective::Minimise);
    cfg.test = TestKind::MannWhitney;
    let r = rank(&as_samples(&data), &cfg).unwrap();
    assert!(r.entries.iter().all(|e| e.group == 1), "{:?}", r.entries);
}

#[test]
fn single_run_settings_join_the_leaders_group_untested() {
    let data = vec![("a", vec![1.0, 1.1, 0.9]), ("b", vec![5.0])];
    let r = rank(&as_samples(&data), &RankConfig::new(Objective::Minimise)).unwrap();
    assert_eq!(r.entries[1].name, "b");
    assert_eq!(r.entries[1].group, 1);
    assert_eq!(r.entries[1].vs_leader.as_ref().unwrap().p_value, None);
    assert!(r.entries[1].mean_ci.is_none());
    // A bad setting is named in the error.
    let bad = vec![("ok", vec![1.0, 2.0]), ("broken", vec![])];
    let e = rank(&as_samples(&bad), &RankConfig::new(Objective::Minimise)).unwrap_err();
    assert!(e.to_string().contains("`broken`"), "{e}");
}

#[test]
fn race_drops_only_the_significantly_worse() {
    let mut g = Gen::new(4);
    let data = vec![
        ("best", g.normals(6, 1.00, 0.05)),
        ("close", g.normals(6, 1.02, 0.05)),
        ("far", g.normals(6, 1.50, 0.05)),
        ("new", g.normals(3, 3.00, 0.05)),
    ];
    let round = race_round(&as_samples(&data), &RaceConfig::new(Objective::Minimise)).unwrap();
    assert_eq!(round.best.as_deref(), Some("best"));
    let actions: Vec<RaceAction> = round.verdicts.iter().map(|v| v.action).collect();
    use RaceAction::{Drop, Keep};
    assert_eq!(actions, vec![Keep, Keep, Drop, Keep]);
    assert_eq!(round.dropped().collect::<Vec<_>>(), vec!["far"]);
    let far = &round.verdicts[2];
    assert!(far.p_adjusted.unwrap() < 0.001);
    assert!(
        far.reason.starts_with("mean 1.")
            && !far.reason.contains("far")
            && !far.reason.contains("best best"),
        "the reason leaves the action and the name to its reader: {:?}",
        far.reason
    );
    for needle in [
        "%) vs the best's 1.",
        "< alpha = 0.05",
        "Welch",
        "Holm-adjusted",
        "n = 6 vs 6",
    ] {
        assert!(
            far.reason.contains(needle),
            "{needle:?} not in {:?}",
            far.reason
        );
    }
    assert!(
        round.verdicts[1].reason.contains(">= alpha") && round.verdicts[1].p_value.unwrap() > 0.05
    );
    assert!(
        round.verdicts[3]
            .reason
            .contains("fewer than the minimum 5")
    );
}

#[test]
fn race_maximise_with_mann_whitney_and_too_few_everywhere() {
    let data = vec![
        ("hi", vec![950.0, 948.0, 951.0, 949.0, 952.0, 947.0]),
        ("lo", vec![400.0, 410.0, 405.0, 398.0, 402.0, 407.0]),
    ];
    let mut cfg = RaceConfig::new(Objective::Maximise);
    cfg.test = TestKind::MannWhitney;
    let round = race_round(&as_samples(&data), &cfg).unwrap();
    assert_eq!(round.best.as_deref(), Some("hi"));
    // Exact Mann-Whitney, 6 vs 6, complete separation: p = 1/924 one-sided; one comparison.
    let lo = &round.verdicts[1];
    assert_eq!(lo.action, RaceAction::Drop);
    assert!((lo.p_value.unwrap() - 1.0 / 924.0).abs() < 1e-12);
    assert!(lo.reason.contains("median"));
    cfg.min_n = 10;
    let early = race_round(&as_samples(&data), &cfg).unwrap();
    assert_eq!(early.best, None);
    assert_eq!(early.dropped().count(), 0);
    cfg.min_n = 1;
    assert!(race_round(&as_samples(&data), &cfg).is_err());
}
