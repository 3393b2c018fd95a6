//! Property tests of the doctor's corpus file (`CorpusFile::parse`, with every case's points
//! laid over its lab and checked): a valid corpus with one line changed, or any text, parses
//! or fails with one line naming the file or case and the fix.
//! And of the corpus's stored records (`load_records`, then scored by the doctor as
//! `tcplab corpus score` does): a record with one value changed, its bytes damaged, a line of
//! its raw samples changed, or any text in its place, loads and scores without a panic or
//! fails on one line that names the file (and the samples' part and line).

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/json_props.rs"]
mod json_props;
#[path = "../../../tests/props.rs"]
mod props;

use props::{bounded, check_error};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;
use tcplab_battery::corpus::{CorpusFile, Mode, Record, load_records};
use tcplab_doctor::synth::{self, MsgSim, StreamSim};
use tcplab_results::Report;

const CORPUS: &str = r#"[defaults]
budget = "24s"
offloads = "on"
[defaults.lab]
topology = "path"
[defaults.lab.sysctl.all]
"net.ipv4.tcp_rmem" = "4096 131072 67108864"
[[case]]
name = "healthy"
cause = "healthy"
about = "a path built well"
[[case.point]]
link = { rate = "10mbit", delay = "0.5ms", queue = "16" }
[[case.point]]
name = "far"
link = { rate = "1gbit", delay = "25ms", queue = "4200" }
[[case]]
name = "rwnd-small"
cause = "rwnd_limited"
offloads = "tso=on,gro=off"
also = ["bufferbloat"]
[[case.point]]
link = { rate = "1gbit", delay = "15ms", queue = "2600", loss = "0.1%" }
sysctl.server = { "net.ipv4.tcp_rmem" = "4096 87380 174760" }
"#;

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "\"[0-9]{0,6}(ms|s|xs|%|mbit|gbit|kb|)\"",
        "\"[a-z0-9_.=,:/ -]{0,20}\"",
        "\"\\PC{0,12}\"",
        "\\{ (rate|delay|queue|loss|dealy) = \"[0-9a-z%.]{0,8}\" \\}",
        prop::sample::select(vec![
            "true",
            "-1",
            "0",
            "\"\"",
            "[]",
            "{}",
            "[1]",
            "\"healthy\"",
            "\"on\"",
            "\"off\"",
            "\"tso=maybe\"",
            "\"custom\"",
            "\"é\"",
            "\"\\u0000\"",
            "\"10 lightyears\"",
        ])
        .prop_map(str::to_owned),
    ]
}

fn mutated() -> impl Strategy<Value = String> {
    let n = CORPUS.lines().count();
    (0..n, 0..4u8, toml_value(), ".{0,30}").prop_map(move |(i, how, value, junk)| {
        let mut out: Vec<String> = CORPUS.lines().map(str::to_owned).collect();
        match (how, out[i].split_once('=')) {
            (0, Some((k, _))) => out[i] = format!("{k}= {value}"),
            (1, _) => out[i] = String::new(),
            (2, _) => {
                let l = out[i].clone();
                out.insert(i, l);
            }
            _ => out[i] = junk,
        }
        out.join("\n")
    })
}

fn corpus_holds(text: String) -> Result<(), TestCaseError> {
    let result = bounded("CorpusFile::parse", move || {
        CorpusFile::parse("corpus.toml", &text)
            .and_then(|c| c.budget().map(|_| ()))
            .map_err(|e| e.to_string())
    })?;
    if let Err(e) = result {
        check_error(&e, &["corpus.toml", "defaults.budget"])?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn corpora_with_one_line_changed(text in mutated()) {
        corpus_holds(text)?;
    }

    #[test]
    fn corpora_of_any_text(text in any::<String>()) {
        corpus_holds(text)?;
    }
}

/// A record as `tcplab corpus run` writes one: a battery of every part the doctor reads raw
/// samples of, with those samples as text.
fn record_json() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let c = CorpusFile::parse("corpus.toml", CORPUS).unwrap();
        let case = &c.cases[1];
        let mut msgs = MsgSim::new(300, 1);
        msgs.seed = 7;
        let battery = tcplab_doctor::Battery {
            stream: Some(StreamSim::healthy(1e9, 15_000).run()),
            msgs: Some(synth::msgs(
                vec![msgs.run(|i| if i % 100 == 50 { 40_000_000 } else { 0 })],
                false,
            )),
            train: Some(synth::train(100e6, 0.010, 4e5, 300, 4)),
            rr: Some(synth::rr(64, &[200_000; 200], true)),
            crr: Some(synth::crr(100, 500.0, |_| 60_000)),
            facts: Some(synth::facts(250)),
            ..tcplab_doctor::Battery::default()
        };
        let mut samples = BTreeMap::new();
        let parts: [(&str, Option<Report>); 4] = [
            ("train", battery.train.clone().map(Report::Msgs)),
            ("msgs", battery.msgs.clone().map(Report::Msgs)),
            ("rr", battery.rr.clone().map(Report::Rr)),
            ("crr", battery.crr.clone().map(Report::Crr)),
        ];
        for (name, report) in parts {
            let mut text = Vec::new();
            tcplab_results::samples::write(&mut text, &report.unwrap()).unwrap();
            samples.insert(name.to_string(), String::from_utf8(text).unwrap());
        }
        let mut record = Record::new(
            c.label(case, 0),
            c.lab_of(case, 0).unwrap(),
            c.knobs_of(case, 0),
            Mode::Remote,
        );
        record.battery = Some(battery);
        record.samples = samples;
        serde_json::to_string(&record).unwrap()
    })
}

/// Every JSON pointer in `v`.
fn json_value() -> impl Strategy<Value = Value> {
    json_props::json_value(vec![serde_json::json!("rwnd_limited")])
}

/// A stored record damaged: a value replaced or removed, its bytes changed, or one line of a
/// part's raw samples changed. With the bytes, the part whose samples no longer read, if any.
fn damaged_record() -> impl Strategy<Value = (Vec<u8>, Option<&'static str>)> {
    (
        0..3u8,
        any::<prop::sample::Index>(),
        any::<bool>(),
        json_value(),
        (
            any::<prop::sample::Index>(),
            1..=255u8,
            prop::collection::vec(any::<u8>(), 0..16),
        ),
        (0..3u8, "[0-9a-z,.# =-]{0,20}|.{0,20}"),
    )
        .prop_map(
            |(how, at, remove, value, (byte, x, extra), (line_how, line))| {
                let text = record_json();
                match how {
                    0 => {
                        let mut v: Value = serde_json::from_str(text).unwrap();
                        json_props::damage(&mut v, at, remove, value);
                        (serde_json::to_vec(&v).unwrap(), None)
                    }
                    1 => {
                        let mut b = text.as_bytes().to_vec();
                        let i = byte.index(b.len());
                        match x % 3 {
                            0 => b[i] ^= x,
                            1 => b.truncate(i),
                            _ => {
                                let tail = b.split_off(i);
                                b.extend(extra);
                                b.extend(tail);
                            }
                        }
                        (b, None)
                    }
                    _ => {
                        let mut v: Value = serde_json::from_str(text).unwrap();
                        let parts = ["train", "msgs", "rr", "crr"];
                        let part = parts[at.index(parts.len())];
                        let slot = &mut v["samples"][part];
                        let mut lines: Vec<String> =
                            slot.as_str().unwrap().lines().map(str::to_owned).collect();
                        let i = byte.index(lines.len());
                        match line_how {
                            0 => lines[i] = line,
                            1 => {
                                lines.remove(i);
                            }
                            _ => lines.insert(i, line),
                        }
                        let text = lines.join("\n");
                        let unread = tcplab_results::samples::parse(&text)
                            .is_err()
                            .then_some(part);
                        *slot = Value::from(text);
                        (serde_json::to_vec(&v).unwrap(), unread)
                    }
                }
            },
        )
}

/// Loads a directory holding `bytes` as `case.01.json` (and a valid record beside it), and
/// scores what loads as `tcplab corpus score` does, with and without `--blind`. Raw samples
/// of `unread` that do not read must be named, not left out.
fn records_hold(bytes: Vec<u8>, unread: Option<&str>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("case.01.json"), &bytes).unwrap();
    std::fs::write(dir.path().join("case.02.json"), record_json()).unwrap();
    let root = dir.path().to_owned();
    let result = bounded("load_records", move || {
        load_records(&root)
            .map(|records| {
                // The damaged one is scored (the other is the same in every case).
                for (path, r) in &records {
                    if path.ends_with("case.01.json") {
                        let _ = r.outcome();
                        let _ = r.outcome_blind();
                    }
                }
                records.len()
            })
            .map_err(|e| e.to_string())
    })?;
    match result {
        Ok(n) => {
            prop_assert!(
                unread.is_none(),
                "samples.{:?} that do not read were left out",
                unread
            );
            prop_assert_eq!(n, 2);
        }
        Err(e) => {
            check_error(&e, &["case.01.json"])?;
            if let Some(part) = unread {
                prop_assert!(e.contains(&format!("samples.{part}: line ")), "{}", e);
            }
        }
    }
    Ok(())
}

/// Loading the records takes the doctor's battery per case (a debug build scores one in a few
/// milliseconds): a quarter of the cases of the others.
fn records_config() -> ProptestConfig {
    let base = props::config();
    ProptestConfig {
        cases: (base.cases / 4).max(8),
        ..base
    }
}

proptest! {
    #![proptest_config(records_config())]

    #[test]
    fn stored_records_damaged((bytes, unread) in damaged_record()) {
        records_hold(bytes, unread)?;
    }

    #[test]
    fn stored_records_of_any_text(text in prop_oneof![any::<String>(), "\\{\"label\": ?\\{.{0,40}"]) {
        records_hold(text.into_bytes(), None)?;
    }
}

/// Found by `stored_records_damaged`: a part's raw samples that did not read were dropped
/// without a word, and the doctor scored the part without them.
#[test]
fn a_records_damaged_samples_are_named() {
    let mut v: Value = serde_json::from_str(record_json()).unwrap();
    let text = v["samples"]["rr"]
        .as_str()
        .unwrap()
        .replace("\n1,", "\n1,x");
    v["samples"]["rr"] = Value::from(text);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("r.01.json"),
        serde_json::to_vec(&v).unwrap(),
    )
    .unwrap();
    let e = load_records(dir.path()).unwrap_err().to_string();
    assert!(e.contains("r.01.json: samples.rr: line 4: `x"), "{e}");
    assert!(e.contains("tcplab corpus run"), "{e}");
}
