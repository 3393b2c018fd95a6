//! Property tests of the unit names objectives and metrics carry (`Unit::parse` takes any text
//! a scenario or a stored study holds) and of the writers that show figures in them.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use props::bounded;
use proptest::prelude::*;
use tcplab_stats::units::{Unit, human, metric_title, significant};

const KNOWN: [Unit; 5] = [
    Unit::BitsPerSecond,
    Unit::Seconds,
    Unit::Microseconds,
    Unit::PerSecond,
    Unit::Bytes,
];

/// A unit name: the known spellings, near misses, or any text.
fn unit_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "bit/s", "bps", "b/s", "s", "seconds", "µs", "us", "1/s", "/s", "ops/s", "bytes", "B",
            " s ", "Bit/s", "mbit/s", "ms", "", "\u{0}", "µ", "segments",
        ])
        .prop_map(str::to_owned),
        any::<String>(),
    ]
}

/// Any float, with the edges spelled out.
fn figure() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        prop::sample::select(vec![
            0.0,
            -0.0,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            f64::MIN,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            999.5,
            0.000_999_5,
        ]),
    ]
}

proptest! {
    #![proptest_config(props::config())]

    /// Any unit text and any figures are shown without a panic.
    #[test]
    fn any_unit_shows_any_figure(text in unit_text(), xs in prop::collection::vec(figure(), 0..8), digits in 1usize..=17) {
        bounded("units", move || {
            let unit = Unit::parse(&text);
            let d = unit.display_for(xs.iter().copied());
            let mut out = vec![d.suffix(), unit.base_symbol(), metric_title(&text)];
            for &x in &xs {
                let _ = d.scale(x);
                out.push(human(x, &unit));
                out.push(significant(x, digits));
            }
            out
        })?;
    }

    /// A known unit reads back from the symbol it is stored under.
    #[test]
    fn known_units_round_trip(i in 0..KNOWN.len()) {
        let unit = KNOWN[i].clone();
        prop_assert_eq!(Unit::parse(&unit.base_symbol()), unit);
    }

    /// `significant` keeps the figure: its text reads back within half a unit of the last
    /// digit kept.
    #[test]
    fn significant_reads_back_close(x in -1e12f64..1e12, digits in 1usize..=9) {
        let text = significant(x, digits);
        let back: f64 = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let tolerance = x.abs() * 10f64.powi(1 - digits as i32) + 1e-300;
        prop_assert!((back - x).abs() <= tolerance, "{} -> {} ({} digits)", x, text, digits);
    }
}
