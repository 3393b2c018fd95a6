//! Property tests of the hosts file (`Inventory::parse`) and the mesh's workload names: a valid
//! file with one line changed, or any text, parses or fails with one line that names the file,
//! the host or the field, and says what to write instead. And of what the mesh reads back: an
//! agent's result read into a pair's figures (`outcome::figures`), and the mesh database's
//! JSON (the mesh's identity, each row's figures and emulator verdict, the full results), which
//! reads back as written, and when damaged says so, naming the file and the pair, never
//! skipping it in silence.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/json_props.rs"]
mod json_props;
#[path = "../../../tests/props.rs"]
mod props;

use props::{bounded, check_error};
use proptest::prelude::*;
use serde_json::Value;
use tcplab_fleet::inventory::Inventory;
use tcplab_fleet::mesh::outcome::{Figures, figures, parse_workload};
use tcplab_fleet::mesh::store::{EmulatorVerdict, MeshIdentity, MeshStore, PairRow};
use tcplab_load::Report;

const HOSTS: &str = r#"[defaults]
port = 5301
user = "root"
[[host]]
name = "h1"
address = "198.18.1.1"
ssh = "root@198.18.1.1"
labels = ["rack1", "gpu"]
[[host]]
name = "h2"
address = "198.18.1.2"
ssh = true
port = 5302
[[host]]
name = "h3"
address = "fd00::3"
srun = true
[[host]]
name = "h4"
address = "127.0.0.1"
port = 5304
"#;

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "\"[a-z0-9_.:@/ -]{0,20}\"",
        "\"\\PC{0,12}\"",
        prop::sample::select(vec![
            "true",
            "false",
            "-1",
            "0",
            "65536",
            "1e9",
            "\"\"",
            "[]",
            "{}",
            "[1]",
            "\"h1\"",
            "\"198.18.1.1\"",
            "\"198.18.1.300\"",
            "\"::1\"",
            "\"localhost\"",
            "\"root@\"",
            "\"-oProxyCommand=x\"",
            "\"tcplab-x25519 AAAA\"",
            "\"é\"",
            "\"\\u0000\"",
            "\"a-name-far-too-long-for-a-host-a-name-far-too-long-for-a-host-x\"",
        ])
        .prop_map(str::to_owned),
    ]
}

/// The hosts file with one line changed; the text and the line's key.
fn mutated() -> impl Strategy<Value = (String, String)> {
    let n = HOSTS.lines().count();
    (0..n, 0..4u8, toml_value(), ".{0,30}").prop_map(move |(i, how, value, junk)| {
        let mut out: Vec<String> = HOSTS.lines().map(str::to_owned).collect();
        let key = out[i]
            .split_once('=')
            .map(|(k, _)| k.trim().to_owned())
            .unwrap_or_default();
        match how {
            0 if !key.is_empty() => out[i] = format!("{key} = {value}"),
            1 => out[i] = String::new(),
            2 => {
                let l = out[i].clone();
                out.insert(i, l);
            }
            _ => out[i] = junk,
        }
        (out.join("\n"), key)
    })
}

fn hosts_hold(text: String) -> Result<(), TestCaseError> {
    let result = bounded("Inventory::parse", move || {
        Inventory::parse(&text, "hosts.toml").map_err(|e| e.to_string())
    })?;
    if let Err(e) = result {
        check_error(&e, &["hosts.toml"])?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn hosts_files_with_one_line_changed((text, key) in mutated()) {
        let result = bounded("Inventory::parse", move || {
            Inventory::parse(&text, "hosts.toml").map_err(|e| e.to_string())
        })?;
        if let Err(e) = result {
            check_error(&e, &["hosts.toml"])?;
            // The field, or what the change broke: the TOML, a host, a duplicate.
            let named = key.is_empty()
                || ["`", "line", "host", "TOML"].iter().any(|w| e.contains(w));
            prop_assert!(named, "`{}` not named: {}", key, e);
        }
    }

    #[test]
    fn hosts_files_of_any_text(text in any::<String>()) {
        hosts_hold(text)?;
    }

    /// Many hosts: the checks stay fast (duplicates are found by map, not by pairs).
    #[test]
    fn many_hosts(n in 1usize..2000, dup in any::<prop::sample::Index>()) {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("[[host]]\nname = \"h{i}\"\naddress = \"198.18.{}.{}\"\n", i / 250, i % 250 + 1));
        }
        let d = dup.index(n);
        text.push_str(&format!("[[host]]\nname = \"h{d}\"\naddress = \"198.19.0.1\"\n"));
        hosts_hold(text)?;
    }

    #[test]
    fn mesh_workloads(name in prop_oneof![
        prop::sample::select(vec!["msgs", "rr", "stream", "crr", "MSGS", "http", ""]).prop_map(str::to_owned),
        any::<String>(),
    ]) {
        match parse_workload(&name) {
            Ok(w) => prop_assert_eq!(parse_workload(w.name()), Ok(w)),
            Err(e) => check_error(&e, &[])?,
        }
    }
}

/// Results of each workload a mesh runs, with figures in them.
fn result(kind: u8, n: u64, x: f64) -> Value {
    let report = match kind % 4 {
        0 => Report::Msgs(tcplab_load::msgs::MsgsResult {
            runs: vec![tcplab_load::msgs::MsgsRun {
                count: n,
                received: n / 2,
                stalls: n % 7,
                total_s: x,
                stall_every: Some(x),
                ..Default::default()
            }],
            ..Default::default()
        }),
        1 => {
            let mut r = tcplab_load::rr::RrResult::default();
            r.summary.transactions = n;
            r.summary.stalls = n % 5;
            r.summary.latency_us.p99 = Some(x);
            r.points = vec![tcplab_load::rr::RrPoint {
                elapsed_s: x,
                ..Default::default()
            }];
            Report::Rr(r)
        }
        2 => {
            let mut r = tcplab_load::crr::CrrResult::default();
            r.summary.connections_per_s = Some(x);
            r.elapsed_s = x;
            Report::Crr(r)
        }
        _ => {
            let mut r = tcplab_load::stream::StreamResult::default();
            r.summary.throughput_bps = Some(x);
            r.elapsed_s = x;
            Report::Stream(r)
        }
    };
    serde_json::to_value(&report).unwrap()
}

/// Every JSON pointer in `v`.
/// A value of any shape, long text with newlines among them.
fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => json_props::json_value(vec![
        serde_json::json!("rrul"),
        serde_json::json!("http"),
        serde_json::json!({"workload": "rrul"}),
    ]),
        1 => "[a-z\\n ]{500,2000}".prop_map(Value::from),
    ]
}

/// A result with one value replaced or removed, or a value of any shape in its place.
fn damaged_result() -> impl Strategy<Value = Value> {
    let changed = (
        0..4u8,
        any::<u64>(),
        prop_oneof![0.0f64..1e6, any::<f64>()],
        any::<prop::sample::Index>(),
        any::<bool>(),
        json_value(),
    )
        .prop_map(|(kind, n, x, at, remove, value)| {
            let mut v = result(kind, n, x);
            json_props::damage(&mut v, at, remove, value);
            v
        });
    prop_oneof![
        3 => changed,
        1 => json_value(),
        1 => ".{0,2000}".prop_map(|w| serde_json::json!({ "workload": w })),
    ]
}

/// A pair's figures, finite or not.
fn pair_row(i: usize, n: u64, x: f64, failed: bool, verdict: bool) -> PairRow {
    PairRow {
        src: format!("h{i}"),
        dst: format!("h{}", i + 1),
        round: i,
        figures: (!failed).then(|| Figures {
            value: Some(x),
            stalls: None,
            workload_s: x,
            complete: n % 2 == 0,
            incomplete_reason: (n % 3 == 0).then(|| "cut \n short".into()),
            detail: format!("{n} of {n}"),
        }),
        failure: failed.then(|| "agent h1: connection refused".into()),
        started_unix_ms: n >> 1,
        // The harness's own clock: always finite.
        wall_s: if x.is_finite() {
            x.abs() % 1e6 + 0.5
        } else {
            1.0
        },
        emulator: verdict.then(|| EmulatorVerdict {
            trustworthy: n % 2 == 1,
            reasons: vec!["fell behind".into()],
        }),
    }
}

fn identity() -> MeshIdentity {
    MeshIdentity {
        hosts: (0..4)
            .map(|i| (format!("h{i}"), format!("198.18.0.{i}")))
            .collect(),
        workload: "msgs".into(),
        test: "{}".into(),
    }
}

/// A stored JSON text changed: a byte flipped, cut, or replaced by any text.
fn damaged_text() -> impl Strategy<Value = (u8, prop::sample::Index, u8, String)> {
    (0..3u8, any::<prop::sample::Index>(), 1..=255u8, ".{0,40}")
}

fn damage(text: &str, (how, at, x, junk): &(u8, prop::sample::Index, u8, String)) -> String {
    let mut b = text.as_bytes().to_vec();
    let i = at.index(b.len().max(1));
    match how {
        0 if !b.is_empty() => b[i] ^= x,
        1 => b.truncate(i),
        _ => return junk.clone(),
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// Each case of the store's property writes a SQLite database (about 30 ms in a debug build):
/// a quarter of the cases of the others.
fn store_config() -> ProptestConfig {
    let base = props::config();
    ProptestConfig {
        cases: (base.cases / 4).max(8),
        ..base
    }
}

proptest! {
    #![proptest_config(props::config())]

    /// An agent's result, damaged or of any shape: it decodes as a report or not at all (the
    /// protocol's one-line error, below), and a report gives figures or an error on one line
    /// that says what to check; figures that are read write and read back.
    #[test]
    fn figures_of_any_result(v in damaged_result()) {
        let Ok(report) = serde_json::from_value::<tcplab_load::Report>(v) else {
            return Ok(());
        };
        let result = bounded("figures", move || figures(&report))?;
        match result {
            Ok(f) => {
                let text = serde_json::to_string(&f).unwrap();
                let back: Figures = serde_json::from_str(&text)
                    .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
                prop_assert_eq!(serde_json::to_string(&back).unwrap(), text);
                prop_assert!(!f.detail.contains('\n'), "{:?}", f.detail);
            }
            Err(e) => check_error(&e, &["result", "mesh"])?,
        }
    }
}

proptest! {
    #![proptest_config(store_config())]

    /// Rows written read back as written; damaged JSON in a row, in the mesh's identity or in
    /// a stored result is reported, naming the file (and the pair), with what to do.
    #[test]
    fn stored_rows_read_back_and_damage_is_reported(
        rows in prop::collection::vec((any::<u64>(), prop_oneof![0.0f64..1e9, any::<f64>()], any::<bool>(), any::<bool>()), 1..4),
        which in 0..4u8,
        row_at in any::<prop::sample::Index>(),
        d in damaged_text(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let written: Vec<PairRow> = rows
            .iter()
            .enumerate()
            .map(|(i, &(n, x, failed, verdict))| pair_row(i, n, x, failed, verdict))
            .collect();
        {
            let store = MeshStore::open(&path, &identity(), false).unwrap();
            for r in &written {
                let full = serde_json::json!({"workload": "msgs", "n": r.round});
                store.record(r, Some(&full)).unwrap();
                if let Some(v) = &r.emulator {
                    store.set_emulator(&[(r.src.clone(), r.dst.clone())], v).unwrap();
                }
            }
            let back = store.rows().unwrap();
            prop_assert_eq!(back.len(), written.len());
            for (b, w) in back.iter().zip(&written) {
                prop_assert_eq!(&b.failure, &w.failure);
                prop_assert_eq!(&b.emulator, &w.emulator);
                // JSON has no NaN or infinity: a figure that is not finite reads back as none.
                let want = w.figures.clone().map(|mut f| {
                    f.value = f.value.filter(|v| v.is_finite());
                    f
                });
                let got = b.figures.clone();
                prop_assert_eq!(got.as_ref().map(|f| f.value), want.as_ref().map(|f| f.value));
                prop_assert_eq!(got.as_ref().map(|f| &f.detail), want.as_ref().map(|f| &f.detail));
                if let (Some(g), Some(w)) = (&got, &want) {
                    prop_assert!(g.workload_s == w.workload_s || !w.workload_s.is_finite(), "{} for {}", g.workload_s, w.workload_s);
                }
            }
        }
        // Damage one JSON value in the file.
        let r = &written[row_at.index(written.len())];
        let conn = rusqlite::Connection::open(&path).unwrap();
        let (column, original): (&str, Option<String>) = match which {
            0 => ("identity", Some(serde_json::to_string(&identity()).unwrap())),
            1 => ("figures", r.figures.as_ref().map(|f| serde_json::to_string(f).unwrap())),
            2 => ("emulator", r.emulator.as_ref().map(|v| serde_json::to_string(v).unwrap())),
            _ => ("result", Some(serde_json::json!({"workload": "msgs", "n": r.round}).to_string())),
        };
        let Some(original) = original else { return Ok(()) };
        let bad = damage(&original, &d);
        if column == "identity" {
            conn.execute("UPDATE mesh_meta SET value = ?1 WHERE key = 'identity'", [&bad]).unwrap();
        } else {
            conn.execute(
                &format!("UPDATE mesh_pair SET {column} = ?1 WHERE src = ?2 AND dst = ?3"),
                [&bad, &r.src, &r.dst],
            )
            .unwrap();
        }
        drop(conn);
        let (src, dst) = (r.src.clone(), r.dst.clone());
        let (opened, rows, full) = bounded("the mesh store", move || {
            let opened = MeshStore::open(&path, &identity(), true).map(|_| ()).map_err(|e| e.to_string());
            let store = MeshStore::read(&path).unwrap();
            let rows = store.rows().map_err(|e| e.to_string());
            let full = store.result(&src, &dst).map(|_| ()).map_err(|e| e.to_string());
            (opened, rows, full)
        })?;
        let parses = match column {
            "identity" => serde_json::from_str::<MeshIdentity>(&bad).is_ok(),
            "figures" => serde_json::from_str::<Figures>(&bad).is_ok(),
            "emulator" => serde_json::from_str::<EmulatorVerdict>(&bad).is_ok(),
            _ => serde_json::from_str::<Value>(&bad).is_ok(),
        };
        if let Err(e) = &opened {
            check_error(e, &["--db"])?;
        }
        if let Err(e) = &full {
            check_error(e, &["--db"])?;
        }
        let rows = rows.map_err(TestCaseError::fail)?;
        let row = rows.iter().find(|x| x.src == r.src).unwrap();
        match (column, parses) {
            ("identity", false) => prop_assert!(opened.is_err(), "a damaged identity was taken for none"),
            ("figures", false) => {
                let why = row.failure.as_deref().unwrap_or_default();
                check_error(why, &["--db"])?;
                prop_assert!(why.contains("figures"), "{}", why);
            }
            ("emulator", false) => {
                let v = row.emulator.as_ref().unwrap();
                prop_assert!(!v.trustworthy);
                check_error(&v.reasons.join("; "), &["--db"])?;
            }
            ("result", false) => prop_assert!(full.is_err(), "a damaged result was taken for none"),
            _ => {}
        }
    }
}

/// Found by `stored_rows_read_back_and_damage_is_reported`: a pair whose workload time was not
/// finite (a sum of sweep points past f64's range) was stored as `null` and could not be read
/// back: its figures were dropped without a word.
#[test]
fn figures_that_are_not_finite_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let store = MeshStore::open(&path, &identity(), false).unwrap();
    store
        .record(&pair_row(0, 2, f64::INFINITY, false, false), None)
        .unwrap();
    let rows = store.rows().unwrap();
    assert_eq!(rows[0].failure, None);
    let f = rows[0].figures.as_ref().unwrap();
    assert!(f.workload_s.is_nan() && f.value.is_none());
}

/// Found by `stored_rows_read_back_and_damage_is_reported`: a row whose figures did not parse
/// read as a pair with no figures and no failure, so `--resume` never ran it again and the
/// report said only "no result"; a damaged identity read as none, and a resume wrote the new
/// one over it.
#[test]
fn damaged_json_in_the_mesh_database_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    {
        let store = MeshStore::open(&path, &identity(), false).unwrap();
        store
            .record(&pair_row(0, 2, 1.5, false, false), None)
            .unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE mesh_pair SET figures = '{\"value\": 1.5'", [])
        .unwrap();
    conn.execute("UPDATE mesh_meta SET value = 'hosts'", [])
        .unwrap();
    drop(conn);
    let rows = MeshStore::read(&path).unwrap().rows().unwrap();
    let why = rows[0].failure.as_deref().unwrap();
    assert!(
        why.contains("stored figures") && why.contains("--resume"),
        "{why}"
    );
    let e = MeshStore::open(&path, &identity(), true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the stored mesh") && e.contains("does not parse"),
        "{e}"
    );
}

/// Found by `figures_of_any_result`: a result whose workload was not a known one was quoted
/// whole, and over several lines when its name had a newline.
#[test]
fn a_result_of_an_unknown_workload_is_one_short_line() {
    let name = format!("a\n{}", "b".repeat(3_000));
    let frame = serde_json::json!({
        "type": "answer",
        "answer": "run",
        "result": { "workload": name },
    });
    let e = tcplab_load::proto::decode(frame.to_string().as_bytes())
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n') && e.chars().count() < 600, "{e}");
    assert!(
        e.contains("check that the peer is a tcplab of protocol version"),
        "{e}"
    );
}
