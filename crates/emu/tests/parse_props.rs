//! Property tests of every parser of user-written emulator values: the value parsers
//! (`spec.rs`), the impairment flags and their per-direction forms (`flags.rs`), jitter tables
//! (`dist.rs`), loss patterns (`pattern.rs`) and link configs read as JSON from records and
//! peers. Inputs are near-valid (a valid form with one part mutated) or arbitrary.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use props::{bounded, check_error};
use proptest::prelude::*;
use tcplab_emu::describe::{format_duration, format_percent, format_rate};
use tcplab_emu::spec::{
    parse_bytes, parse_duration, parse_percent, parse_queue, parse_rate, parse_seed,
};
use tcplab_emu::{DistTable, ImpairmentFlags, LinkConfig, LinkModel, LossPattern, Realised};

const FLAGS: [&str; 13] = [
    "--delay",
    "--jitter",
    "--jitter-dist",
    "--correlation",
    "--loss",
    "--loss-model",
    "--rate",
    "--queue",
    "--overhead",
    "--reorder",
    "--duplicate",
    "--corrupt",
    "--seed",
];

/// The numeric part of a value: plain, decimal, huge, or malformed.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u64..100_000).prop_map(|n| n.to_string()),
        2 => (0u64..1000, 0u32..1_000_000).prop_map(|(a, b)| format!("{a}.{b}")),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec![
            "", ".", "1.2.3", "-5", "1e3", "٣", " 7 ", "0x10", "99999999999999999999999999999999999",
            "0.000000000000000000000000001", "+1", "1_000", "NaN", "inf", "１０",
        ])
        .prop_map(str::to_owned),
    ]
}

/// A unit: the valid ones of every kind (so each kind also sees the others') and wrong ones.
fn unit() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "", "ns", "us", "µs", "ms", "s", "MS", "min", "xs", "bit", "kbit", "mbit", "gbit", "tbit",
        "bps", "Gbps", "kB/s", "%", "%%", "p", "pkts", "packets", "b", "kb", "mb", "gb", "B", "k",
        " ms", "ms ", "m s", "é", "\u{0}", "\n", "ms\nms",
    ])
}

fn near_value() -> impl Strategy<Value = String> {
    (number(), unit()).prop_map(|(n, u)| format!("{n}{u}"))
}

/// A value for `flag`: near-valid, per direction, keyword forms, or arbitrary text.
fn flag_value(flag: &'static str) -> BoxedStrategy<String> {
    let keyword = match flag {
        "--jitter-dist" => prop::sample::select(vec![
            "uniform",
            "normal",
            "pareto",
            "paretonormal",
            "NORMAL",
            "gauss",
            "table:t.dist",
            "table:",
            "table:missing",
            "normal/table:t.dist",
            "table:/usr/lib/tc/normal.dist/pareto",
        ])
        .boxed(),
        "--loss-model" => prop::sample::select(vec![
            "bernoulli",
            "ge:1%",
            "ge:1%,10%,70%,0.1%",
            "ge:1%,,",
            "ge:1%,2%,3%,4%,5%",
            "ge:200%",
            "gemodel:5%,50%",
            "bits:0001",
            "bits:",
            "bits:01x",
            "pattern:p.txt",
            "pattern:missing",
            "ge:1%/bits:0001",
            "pattern:p.txt/bernoulli",
            "gilbert",
        ])
        .boxed(),
        "--reorder" => prop::sample::select(vec![
            "1%",
            "1%,gap:5",
            "jitter",
            "1%,jitter",
            "gap:",
            "gap:-1",
            "gap:99999999999",
            "gap:5",
            "1%,gap:5,gap:6",
            ",",
            "0%",
        ])
        .boxed(),
        _ => Just("").boxed(),
    };
    prop_oneof![
        3 => near_value(),
        2 => (near_value(), near_value()).prop_map(|(a, b)| format!("{a}/{b}")),
        2 => keyword.prop_map(str::to_owned),
        1 => (near_value(), prop::sample::select(vec!["//", "/", "/ /", " /"]))
            .prop_map(|(a, sep)| format!("{a}{sep}")),
        1 => ".{0,40}",
        1 => any::<String>(),
    ]
    .boxed()
}

fn set(f: &mut ImpairmentFlags, flag: &str, value: String) {
    let name = flag.trim_start_matches("--").replace('-', "_");
    let slot = f
        .field_mut(&name)
        .unwrap_or_else(|| unreachable!("{flag} is not an impairment flag"));
    *slot = Some(value);
}

/// The files `table:` and `pattern:` name: a generated text, or a read error.
fn reader(table: String, pattern: String) -> impl Fn(&str) -> Result<String, String> {
    move |path| match path {
        p if p.contains("missing") || p.is_empty() => Err("No such file or directory".into()),
        p if p.ends_with(".dist") => Ok(table.clone()),
        _ => Ok(pattern.clone()),
    }
}

/// A loss-pattern text: directive and bit lines with mutations, or arbitrary text.
fn pattern_text() -> impl Strategy<Value = String> {
    let count = prop_oneof![
        Just("0".to_owned()),
        (1u64..200).prop_map(|n| n.to_string()),
        (1u64..=1 << 24).prop_map(|n| n.to_string()),
        number(),
    ];
    let line = prop_oneof![
        count.clone().prop_map(|n| format!("drop {n}")),
        (count.clone(), count.clone()).prop_map(|(a, b)| format!("drop {a}-{b}")),
        count.clone().prop_map(|n| format!("period {n}")),
        "[01 _\t]{0,80}",
        Just("# comment".to_owned()),
        prop::sample::select(vec![
            "drop", "Drop 3", "drop 1 2", "period", "drop 3-", "drop -3"
        ])
        .prop_map(str::to_owned),
        ".{0,30}",
    ];
    prop_oneof![
        4 => prop::collection::vec(line, 0..12).prop_map(|l| l.join("\n")),
        1 => any::<String>(),
    ]
}

/// A jitter-table text: integers in and out of `i16`, words, comments, or arbitrary text.
fn table_text() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        6 => any::<i16>().prop_map(|v| v.to_string()),
        1 => (32768i64..1 << 40).prop_map(|v| v.to_string()),
        1 => prop::sample::select(vec!["x4", "1.5", "#", "-", "+7", "٣"]).prop_map(str::to_owned),
    ];
    let line = prop::collection::vec(word, 0..10).prop_map(|w| w.join(" "));
    prop_oneof![
        4 => prop::collection::vec(line, 0..12).prop_map(|l| l.join("\n")),
        1 => any::<String>(),
    ]
}

/// Every value parser on any text: no panic, a bound, and a one-line error with a fix.
fn value_parsers_hold(text: String) -> Result<(), TestCaseError> {
    let errors = bounded("value parsers", move || {
        [
            parse_duration(&text).err(),
            parse_rate(&text).err(),
            parse_percent(&text).err(),
            parse_queue(&text).err(),
            parse_bytes(&text).err(),
            parse_seed(&text).err(),
        ]
        .into_iter()
        .flatten()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
    })?;
    for e in errors {
        check_error(&e, &[])?;
    }
    Ok(())
}

/// A link using every element, as a run's record holds it.
fn recorded_link() -> LinkConfig {
    let f = ImpairmentFlags {
        delay: Some("10ms".into()),
        jitter: Some("1ms".into()),
        jitter_dist: Some("table:t.dist".into()),
        correlation: Some("25%".into()),
        loss_model: Some("bits:00000001/ge:1%,10%".into()),
        rate: Some("1gbit".into()),
        queue: Some("64kb".into()),
        reorder: Some("1%,gap:5".into()),
        duplicate: Some("0.1%".into()),
        seed: Some("7".into()),
        ..Default::default()
    };
    f.to_link_config_with(&reader("1 2 -3".into(), String::new()))
        .unwrap()
}

/// Builds a model of an accepted config and runs a few packets through it: a config that
/// validates must be one the model can run.
fn runs(cfg: &LinkConfig) {
    let mut link = LinkModel::new(cfg, 1).expect("a validated config builds a model");
    for k in 0..64u64 {
        let _ = link.forward.arrive(1500, k * 1000);
        let _ = link.reverse.arrive(64, k * 1000);
    }
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn value_parsers_on_near_valid_values(text in near_value()) {
        value_parsers_hold(text)?;
    }

    #[test]
    fn value_parsers_on_any_text(text in any::<String>()) {
        value_parsers_hold(text)?;
    }

    /// One flag mutated (with what it needs given validly): the error names that flag.
    #[test]
    fn one_bad_flag_is_named(
        index in 0..FLAGS.len(),
        value in (0..FLAGS.len()).prop_flat_map(|i| flag_value(FLAGS[i])),
        table in table_text(),
        pattern in pattern_text(),
    ) {
        let flag = FLAGS[index];
        let mut f = ImpairmentFlags::default();
        set(&mut f, flag, value);
        match flag {
            "--jitter-dist" | "--correlation" | "--reorder" => set(&mut f, "--jitter", "1ms".into()),
            "--queue" | "--overhead" => set(&mut f, "--rate", "1gbit".into()),
            _ => {}
        }
        let result = bounded("flags", move || {
            let cfg = f.to_link_config_with(&reader(table, pattern));
            if let Ok(cfg) = &cfg {
                runs(cfg);
            }
            cfg.map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &[flag])?;
        }
    }

    /// Any mix of flags: the error names one of the flags given.
    #[test]
    fn any_flags_name_one_given(
        values in prop::collection::vec(
            (0..FLAGS.len()).prop_flat_map(|i| (Just(i), flag_value(FLAGS[i]))), 1..6),
        table in table_text(),
        pattern in pattern_text(),
    ) {
        let mut f = ImpairmentFlags::default();
        let given: Vec<&str> = values.iter().map(|(i, _)| FLAGS[*i]).collect();
        for (i, v) in values {
            set(&mut f, FLAGS[i], v);
        }
        let result = bounded("flags", move || {
            let cfg = f.to_link_config_with(&reader(table, pattern));
            if let Ok(cfg) = &cfg {
                runs(cfg);
            }
            cfg.map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &given)?;
        }
    }

    #[test]
    fn loss_patterns(text in pattern_text()) {
        let result = bounded("LossPattern::parse", move || {
            LossPattern::parse(&text).map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &[])?;
        }
    }

    #[test]
    fn jitter_tables(text in table_text()) {
        let result = bounded("DistTable::parse", move || {
            DistTable::parse(&text).map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &[])?;
        }
    }

    #[test]
    fn jitter_tables_round_trip(values in prop::collection::vec(any::<i16>(), 1..300)) {
        let table = DistTable::new(values).unwrap();
        prop_assert_eq!(DistTable::parse(&table.to_dist_text()).unwrap(), table);
    }

    #[test]
    fn durations_round_trip(ns in prop_oneof![0u64..=60_000_000_000, any::<u64>()]) {
        prop_assert_eq!(parse_duration(&format_duration(ns)), Ok(ns));
    }

    #[test]
    fn rates_round_trip(bps in prop_oneof![1u64..=400_000_000_000, any::<u64>()]) {
        prop_assert_eq!(parse_rate(&format_rate(bps)), Ok(bps));
    }

    /// A probability read from a flag (at most six decimals of a percent) is written back
    /// to the same text and the same value.
    #[test]
    fn percentages_round_trip(whole in 0u32..=100, micro in 0u32..1_000_000) {
        let text = format!("{whole}.{micro:06}%");
        let p = parse_percent(&text).unwrap();
        prop_assert_eq!(parse_percent(&format_percent(p)), Ok(p));
    }

    /// A link from flags is recorded as JSON with each run and replayed from it: the record
    /// reads back to the same link, and its description pastes back into the flags.
    #[test]
    fn links_round_trip_through_records_and_descriptions(
        delay in 0u64..=60_000_000_000,
        rate in 1u64..=400_000_000_000,
        queue in 1u32..=10_000_000,
        // Zero is left out of a description (and reads back as no element at all).
        loss in 1u32..=100_000_000,
        duplicate in 1u32..=100_000_000,
    ) {
        let f = ImpairmentFlags {
            delay: Some(format_duration(delay)),
            rate: Some(format_rate(rate)),
            queue: Some(queue.to_string()),
            loss: Some(format!("{}.{:06}%", loss / 1_000_000, loss % 1_000_000)),
            duplicate: Some(format!("{}.{:06}%", duplicate / 1_000_000, duplicate % 1_000_000)),
            ..Default::default()
        };
        let cfg = f.to_link_config().unwrap();
        let json = serde_json::to_string(&cfg).unwrap();
        prop_assert_eq!(&serde_json::from_str::<LinkConfig>(&json).unwrap(), &cfg);
        let mut again = ImpairmentFlags::default();
        for (name, value) in cfg.forward.described() {
            set(&mut again, &format!("--{name}"), value);
        }
        prop_assert_eq!(again.to_link_config().unwrap(), cfg);
    }

    /// A link config from a record or a peer: a valid one with one byte changed, or any
    /// text. It reads or fails with one line, and one that validates runs.
    #[test]
    fn link_configs_from_json(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        garbage in any::<bool>(),
        text in ".{0,200}",
    ) {
        let valid = serde_json::to_string(&recorded_link()).unwrap();
        let input = if garbage {
            text
        } else {
            let mut bytes = valid.as_bytes().to_vec();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let result = bounded("LinkConfig from JSON", move || {
            let Ok(cfg) = serde_json::from_str::<LinkConfig>(&input) else {
                // serde's message; the reader of the record or the request wraps it with
                // what to do.
                return Ok(());
            };
            cfg.validate().map_err(|e| e.to_string())?;
            runs(&cfg);
            Ok::<_, String>(())
        })?;
        if let Err(e) = result {
            check_error(&e, &[])?;
        }
    }

    /// An emulator's realised figures arrive as JSON in its status; any of it reads or fails,
    /// and what reads can be printed.
    #[test]
    fn realised_from_json(text in r#"\{("[a-z_]{1,12}": ?(-?[0-9]{1,40}|"[0-9a-z]{0,40}"|\{\}|null),? ?){0,8}\}"#) {
        bounded("Realised from JSON", move || {
            if let Ok(r) = serde_json::from_str::<Realised>(&text) {
                let _ = format!("{r:?}");
            }
        })?;
    }
}

/// The model's names for the flags it documents all parse.
#[test]
fn every_flag_has_a_slot() {
    for flag in FLAGS {
        set(&mut ImpairmentFlags::default(), flag, String::new());
    }
}

/// Found by `links_round_trip_through_records_and_descriptions`: without serde_json's
/// `float_roundtrip` a recorded probability read back one ulp off (0.09113927000000001 as
/// 0.09113927), so a run replayed from its record was not the run recorded.
#[test]
fn a_recorded_probability_reads_back_exactly() {
    for x in [0.091_139_270_000_000_01f64, 0.948_367_5, 1e-8] {
        let back: f64 = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
        assert_eq!(back.to_bits(), x.to_bits(), "{x:?} read back as {back:?}");
    }
}

/// A pattern read from JSON need not be sorted: a drop past the period that is not the last
/// one listed was let through and indexed past the model's bitmap.
#[test]
fn an_unsorted_pattern_from_json_is_refused_not_run() {
    let json = r#"{"forward":{"loss":{"model":"pattern","period":8,"drops":[700,1]}}}"#;
    let cfg: LinkConfig = serde_json::from_str(json).unwrap();
    let e = cfg.validate().unwrap_err().to_string();
    assert!(
        e.starts_with("forward.loss.pattern: drop 701 is beyond"),
        "{e}"
    );
    assert!(LinkModel::new(&cfg, 1).is_err());
}

/// Overlapping ranges are kept as ranges: a hundred lines of `drop 1-1000000` held a
/// hundred million positions (800 MB; a thousand lines, 8 GB) before they were sorted.
#[test]
fn overlapping_drop_ranges_take_the_memory_of_one() {
    let text = "drop 1-1000000\n".repeat(100);
    let p = LossPattern::parse(&text).unwrap();
    assert_eq!(p.period(), 1_000_000);
    assert_eq!(p.drops().len(), 1_000_000);
}

/// A value with a newline (a TOML multi-line string, a pasted file) is echoed escaped, and
/// a long one is cut: the error stays one line.
#[test]
fn an_echoed_value_stays_on_one_line() {
    let f = ImpairmentFlags {
        delay: Some("10m\ns".into()),
        ..Default::default()
    };
    let e = f.to_link_config().unwrap_err().to_string();
    assert_eq!(
        e,
        "--delay 10m\\ns: unknown unit `m\\ns`: use ns, us, ms, s, m (minutes), h or d"
    );
    let f = ImpairmentFlags {
        loss_model: Some(format!("gilbert{}", "x".repeat(5000))),
        ..Default::default()
    };
    let e = f.to_link_config().unwrap_err().to_string();
    assert!(e.len() < 300 && e.contains('…'), "{e}");
}
