use super::*;

fn watched(src: usize, dst: usize) -> Watched {
    Watched {
        slot: Slot {
            src,
            dst,
            workload: 0,
        },
        figure: "throughput_bps".into(),
    }
}

/// A quiet pair's throughput: 940 Mbit/s ± about 1 %, deterministic.
fn quiet(i: u64) -> f64 {
    940e6 * (1.0 + 0.01 * (((i * 7919) % 13) as f64 / 6.0 - 1.0))
}

fn feed(a: &mut Alerts, w: &Watched, values: impl IntoIterator<Item = f64>, t0: u64) -> Vec<Event> {
    values
        .into_iter()
        .enumerate()
        .filter_map(|(i, v)| {
            a.observe(w, v, Objective::Maximise, t0 + i as u64 * 1_000)
                .unwrap()
        })
        .collect()
}

#[test]
fn a_regression_opens_at_its_second_result_and_closes_when_the_pair_is_back() {
    let mut a = Alerts::new(RegressionConfig::default());
    let w = watched(0, 1);
    assert!(feed(&mut a, &w, (0..40).map(quiet), 0).is_empty());
    let events = feed(&mut a, &w, [470e6, 460e6], 40_000);
    match events.as_slice() {
        [Event::Opened { at_ms, check, .. }] => {
            assert_eq!(*at_ms, 41_000, "the second regressed result");
            assert!(check.worse_by > 0.45, "{check:?}");
        }
        other => panic!("{other:?}"),
    }
    // Still slow: the alert stays open, the slow results do not become the baseline.
    assert!(feed(&mut a, &w, [465e6; 50], 42_000).is_empty());
    assert_eq!(a.open().count(), 1);
    // Back to normal: closed once the window is.
    let events = feed(&mut a, &w, (100..103).map(quiet), 92_000);
    match events.as_slice() {
        [Event::Closed { opened_ms, .. }] => assert_eq!(*opened_ms, 41_000),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.open().count(), 0);
    // And a second regression is found again against the same baseline.
    let events = feed(&mut a, &w, [470e6, 460e6], 200_000);
    assert!(
        matches!(events.as_slice(), [Event::Opened { .. }]),
        "{events:?}"
    );
}

#[test]
fn pairs_are_judged_on_their_own_history() {
    let mut a = Alerts::new(RegressionConfig::default());
    let fast = watched(0, 1);
    let slow = watched(1, 0);
    feed(&mut a, &fast, (0..30).map(quiet), 0);
    feed(&mut a, &slow, (0..30).map(|i| quiet(i) / 2.0), 0);
    // The slow pair at its own level is fine; the fast pair at that level regressed.
    assert!(feed(&mut a, &slow, [470e6, 468e6], 30_000).is_empty());
    let events = feed(&mut a, &fast, [470e6, 468e6], 30_000);
    assert!(matches!(events.as_slice(), [Event::Opened { watched, .. }] if *watched == fast));
}

#[test]
fn one_bad_result_is_not_an_alert() {
    let mut a = Alerts::new(RegressionConfig::default());
    let w = watched(2, 3);
    feed(&mut a, &w, (0..30).map(quiet), 0);
    for i in 0..20 {
        let events = feed(&mut a, &w, [300e6, quiet(100 + i)], 30_000 + i * 2_000);
        assert!(events.is_empty(), "{events:?}");
    }
}

#[test]
fn memory_per_figure_stays_bounded() {
    let cfg = RegressionConfig::default();
    let mut a = Alerts::new(cfg);
    let w = watched(0, 1);
    feed(&mut a, &w, (0..10_000).map(quiet), 0);
    let s = &a.series[&w];
    assert_eq!(s.history.len(), cfg.max_history);
    assert_eq!(s.window.len(), cfg.window);
    assert_eq!(a.watched(), 1);
}

#[test]
fn a_figure_that_is_not_a_number_is_an_error() {
    let mut a = Alerts::new(RegressionConfig::default());
    let e = a
        .observe(&watched(0, 1), f64::NAN, Objective::Maximise, 0)
        .unwrap_err();
    assert!(e.to_string().contains("monitored figure"), "{e}");
}
