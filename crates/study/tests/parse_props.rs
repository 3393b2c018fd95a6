//! Property tests of the scenario file (with its workloads, factors, ranges and baseline,
//! expanded into a plan), the duration values it holds, and the packed samples the store keeps.
//! Each problem in a scenario is one diagnostic on one line: the file, the line, the field and
//! the fix.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use props::{bounded, check_error};
use proptest::prelude::*;
use tcplab_results::units::{Bytes, Dur, Rate};
use tcplab_study::{Plan, PlanOptions, ScenarioFile};

const SCENARIO: &str = r#"name = "props"
description = "every section a scenario may have"
repetitions = 3
seed = 7
combine = "cross"
reset = "fresh"
objective = { metric = "per_message_us.mean", goal = "minimise" }
baseline = { "link.delay" = "1ms", "socket.nodelay" = false }
[lab]
topology = "path"
mtu = 1500
bridge = "auto"
offloads = { gro = true }
[lab.link]
delay = "5ms"
loss = "0.1%"
rate = "1gbit/100mbit"
[lab.sysctl.all]
"net.ipv4.tcp_congestion_control" = "cubic"
[[workload]]
kind = "msgs"
count = 1000
size = 1
[[workload]]
kind = "stream"
duration = "2s"
[[factor]]
name = "link.delay"
range = "1ms..40ms"
steps = 3
scale = "log"
[[factor]]
name = "socket.nodelay"
values = [false, true]
[race]
min_reps = 2
alpha = 0.05
[quick]
repetitions = 1
scale = 0.1
"#;

/// A TOML value in place of a valid one.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..100_000).prop_map(|n| n.to_string()),
        "\"[0-9]{0,6}(ms|s|us|xs|%|gbit|kb|)\"",
        "\"[a-z0-9_.:/ -]{0,16}\"",
        "\"\\PC{0,10}\"",
        prop::sample::select(vec![
            "true",
            "-1",
            "0",
            "4294967296",
            "1e999",
            "nan",
            "inf",
            "\"\"",
            "[]",
            "{}",
            "[1, \"a\"]",
            "\"1ms..\"",
            "\"..5ms\"",
            "\"1ms..1gbit\"",
            "\"0..10\"",
            "100000",
            "\"10 lightyears\"",
            "\"linear\"",
            "\"log\"",
            "\"zip\"",
            "\"maximise\"",
            "0.0",
            "1.5",
            "\"socket.nodelai\"",
            "\"link.rate\"",
            "\"workload.size\"",
            "\"é\"",
            "{ metric = \"\" }",
            "\"custom\"",
            "\"star\"",
            "\"\\u0000\"",
        ])
        .prop_map(str::to_owned),
    ]
}

/// The scenario with one line changed (`props::one_line_changed`): the text, the line's key
/// and its number.
fn mutated() -> impl Strategy<Value = (String, String, usize)> {
    props::one_line_changed(SCENARIO, toml_value())
}

/// A diagnostic as (line, field, shown).
type Shown = (Option<usize>, String, String);

/// Parses and plans; the diagnostics when it fails.
fn plan_errors(text: String) -> Result<Option<Vec<Shown>>, TestCaseError> {
    bounded("scenario", move || {
        let e = match ScenarioFile::parse("s.toml", &text) {
            Ok(f) => match Plan::new(&f, PlanOptions::default()) {
                Ok(p) => {
                    let _ = p.dry_run();
                    let quick = PlanOptions {
                        quick: true,
                        ..PlanOptions::default()
                    };
                    match Plan::new(&f, quick) {
                        Ok(_) => return None,
                        Err(e) => e,
                    }
                }
                Err(e) => e,
            },
            Err(e) => e,
        };
        Some(
            e.diagnostics
                .iter()
                .map(|d| (d.line, d.field.clone(), d.to_string()))
                .collect(),
        )
    })
}

fn scenario_holds(text: String, key: &str, line: usize) -> Result<(), TestCaseError> {
    let Some(diags) = plan_errors(text)? else {
        return Ok(());
    };
    prop_assert!(!diags.is_empty(), "an error without a diagnostic");
    for (_, _, shown) in &diags {
        check_error(shown, &["s.toml"])?;
    }
    if !key.is_empty() {
        let leaf = key.rsplit('.').next().unwrap_or(key);
        let named = diags.iter().any(|(l, field, shown)| {
            *l == Some(line) || field.contains(leaf) || shown.contains(leaf)
        });
        // A value may be valid on its own and clash with another setting, which is then the
        // one named; the clash is still located.
        let located = diags
            .iter()
            .all(|(l, field, _)| l.is_some() || !field.is_empty());
        prop_assert!(
            named || located,
            "neither `{}` nor line {} named: {:?}",
            key,
            line,
            diags
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn scenarios_with_one_line_changed((text, key, line) in mutated()) {
        scenario_holds(text, &key, line)?;
    }

    #[test]
    fn scenarios_of_any_text(text in any::<String>()) {
        scenario_holds(text, "", 0)?;
    }

    #[test]
    fn durations(text in prop_oneof!["[0-9]{0,25}(\\.[0-9]{0,12})?(ns|us|µs|ms|s|m|h|)", any::<String>()]) {
        let result = bounded("Dur", move || text.parse::<Dur>().map(Dur::ns))?;
        if let Err(e) = result {
            check_error(&e, &[])?;
        }
    }

    #[test]
    fn sizes_and_rates(text in prop_oneof!["[0-9]{0,25}(\\.[0-9]{0,12})?(k|KiB|m|MB|g|b|mbit|gbit|M|G|)", any::<String>()]) {
        let t = text.clone();
        if let Err(e) = bounded("Bytes", move || t.parse::<Bytes>().map(|b| b.0))? {
            check_error(&e, &[])?;
        }
        if let Err(e) = bounded("Rate", move || text.parse::<Rate>().map(|r| r.0))? {
            check_error(&e, &[])?;
        }
    }

    /// Packed samples from a damaged store: any bytes after the magic unpack or fail with one
    /// line, and never to more than a bounded multiple of their size.
    #[test]
    fn packed_samples(
        version in 0u8..4,
        body in prop::collection::vec(
            prop_oneof![
                4 => any::<u8>(),
                1 => Just(0xff),
                1 => prop::sample::select(vec![1u8, 2, 3]),
            ],
            0..400,
        ),
    ) {
        let mut blob = tcplab_study::codec::MAGIC.to_vec();
        blob.push(version);
        blob.extend_from_slice(&body);
        let len = blob.len();
        let copy = blob.clone();
        // The text's length as a string (the report's reader replaces bytes that are not
        // UTF-8, which may lengthen it), and as bytes.
        let result = bounded("codec::unpack", move || {
            tcplab_study::codec::unpack(&blob).map(|t| (String::from_utf8_lossy(&t).len(), t.len()))
        })?;
        // The report's reader of the same blob: the same verdict, never more text.
        let split = bounded("long_runs::split", move || {
            tcplab_study::to_report::long_runs::split(&copy, None).map(|s| s.text.len())
        })?;
        prop_assert_eq!(result.is_ok(), split.is_ok(), "{:?} vs {:?}", &result, &split);
        if let (Ok((n, _)), Ok(m)) = (&result, &split) {
            prop_assert!(m <= n, "{} bytes of text from the split, {} unpacked", m, n);
        }
        match result {
            Ok((_, n)) => prop_assert!(n <= tcplab_study::codec::max_unpacked(len), "{} bytes from {}", n, len),
            // The store wraps these in its own error, which says what to do.
            Err(e) => prop_assert!(!e.is_empty() && !e.contains('\n'), "{:?}", e),
        }
    }
}

/// An unknown variant typed with a control character (benches/fuzz.sh found `combine = "\r"`):
/// serde quotes it as typed, and the message was cut in two by the carriage return.
#[test]
fn an_unknown_variant_with_a_control_character_is_shown_escaped() {
    for value in ["\\r", "cr\\u0007oss", "\\t"] {
        let text = SCENARIO.replacen("combine = \"cross\"", &format!("combine = \"{value}\""), 1);
        let diags = plan_errors(text).unwrap().expect("refused");
        for (_, _, shown) in &diags {
            check_error(shown, &["s.toml"]).unwrap();
        }
        assert!(
            diags
                .iter()
                .any(|d| d.2.contains("combine") && d.2.contains("cross, zip")),
            "{diags:?}"
        );
    }
}

/// A text chunk that is not UTF-8 (benches/fuzz.sh found it): the report's reader gives the
/// same text as unpacking, with the bytes replaced as a string must have them.
#[test]
fn a_text_chunk_that_is_not_utf8_reads_as_unpacking_does() {
    let mut blob = tcplab_study::codec::MAGIC.to_vec();
    blob.extend_from_slice(&[1, 1, 2, 128, 0]);
    let unpacked = tcplab_study::codec::unpack(&blob).unwrap();
    assert_eq!(unpacked, [128, 0]);
    let split = tcplab_study::to_report::long_runs::split(&blob, None).unwrap();
    assert_eq!(split.text, String::from_utf8_lossy(&unpacked));
}

/// A sweep's cases build plans of up to 10,000 configurations (over a second each in a
/// debug build), so this property runs a thirty-second of the cases of the others.
fn sweep_config() -> ProptestConfig {
    let base = props::config();
    ProptestConfig {
        cases: (base.cases / 32).max(8),
        ..base
    }
}

proptest! {
    #![proptest_config(sweep_config())]

    /// Factors that multiply out to more runs than anyone can wait for are refused at once,
    /// not expanded; the sizes just under the limits are planned within the bound.
    #[test]
    fn huge_sweeps_are_refused_quickly(
        factors in 1usize..6,
        steps in prop_oneof![2 => 2usize..=12, 1 => 2usize..=10_000],
        repetitions in prop_oneof![1u64..10, Just(4_294_967_295)],
    ) {
        let mut text = SCENARIO.replace("repetitions = 3", &format!("repetitions = {repetitions}"));
        for i in 0..factors {
            text.push_str(&format!(
                "[[factor]]\nname = \"sysctl.client.\\\"net.core.rmem_max{i}\\\"\"\nrange = \"1..1000000000\"\nsteps = {steps}\n"
            ));
        }
        let result = bounded("a sweep's plan", move || {
            let f = ScenarioFile::parse("s.toml", &text).map_err(|e| e.to_string())?;
            Plan::new(&f, PlanOptions::default()).map(|_| ()).map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &["s.toml"])?;
        }
    }
}

/// Found by `huge_sweeps_are_refused_quickly`: five factors of 10,000 steps each crossed into
/// 10^20 configurations, expanded in memory before anything was checked.
#[test]
fn a_cross_of_five_long_ranges_is_refused() {
    let mut text = SCENARIO.to_owned();
    for i in 0..5 {
        text.push_str(&format!(
            "[[factor]]\nname = \"sysctl.client.\\\"net.core.rmem_max{i}\\\"\"\nrange = \"1..1000000000\"\nsteps = 10000\n"
        ));
    }
    let f = ScenarioFile::parse("s.toml", &text).unwrap();
    let e = Plan::new(&f, PlanOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("configurations") && e.contains("at most"), "{e}");
}
