//! Study databases that are damaged or old: a study written with the current schema (by a
//! sweep with the mock executor) and one in schema 1 (the tables as `store/schema.rs` keeps
//! them, before its upgrade), then truncated at any offset and with bytes flipped. Every one
//! opens and reads, or fails with one line naming the file and the fix; none panics.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

#[path = "../../../tests/props.rs"]
mod props;

use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;

use props::{bounded, check_error};
use proptest::prelude::*;
use tcplab_study::mock::MockExecutor;
use tcplab_study::{Plan, PlanOptions, ScenarioFile, Store, SweepOptions, sweep};

const SCENARIO: &str = r#"
name = "damaged"
repetitions = 2
objective = { metric = "throughput_bps", goal = "maximise" }

[[workload]]
kind = "stream"
duration = "1s"

[[factor]]
name = "socket.congestion"
values = ["cubic", "reno", "bbr"]
"#;

/// Schema 1, as `store/schema.rs` keeps it verbatim for its upgrade.
const SCHEMA_V1: &str = "
CREATE TABLE study (id INTEGER PRIMARY KEY CHECK (id = 1), name TEXT NOT NULL, scenario TEXT NOT NULL,
    scenario_hash TEXT NOT NULL, seed TEXT NOT NULL, quick INTEGER NOT NULL, objective_metric TEXT NOT NULL,
    objective_goal TEXT NOT NULL, created_ms INTEGER NOT NULL, tool_version TEXT NOT NULL);
CREATE TABLE configuration (id INTEGER PRIMARY KEY, label TEXT NOT NULL, factors TEXT NOT NULL,
    is_baseline INTEGER NOT NULL, settings TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'active', reason TEXT);
CREATE TABLE run (id INTEGER PRIMARY KEY, config_id INTEGER NOT NULL REFERENCES configuration(id),
    rep INTEGER NOT NULL, run_order INTEGER NOT NULL, status TEXT NOT NULL, error TEXT, metrics TEXT NOT NULL,
    facts TEXT NOT NULL, trustworthy INTEGER NOT NULL, fidelity_reasons TEXT NOT NULL, samples BLOB,
    samples_raw_len INTEGER NOT NULL DEFAULT 0, started_ms INTEGER NOT NULL, wall_s REAL NOT NULL,
    executor_wall_s REAL NOT NULL, UNIQUE (config_id, rep));
CREATE TABLE race (id INTEGER PRIMARY KEY, round INTEGER NOT NULL, completed_runs INTEGER NOT NULL,
    config_id INTEGER NOT NULL REFERENCES configuration(id), action TEXT NOT NULL, best TEXT, p_value REAL,
    p_adjusted REAL, reason TEXT NOT NULL, decided_ms INTEGER NOT NULL);
";

fn plan() -> Plan {
    Plan::new(
        &ScenarioFile::parse("damaged.toml", SCENARIO).unwrap(),
        PlanOptions::default(),
    )
    .unwrap()
}

/// The bytes of a study file of the current schema: three configurations, six runs with
/// samples, all checkpointed into the main file.
fn current() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("study.db");
        let plan = plan();
        let store = Store::create(&path, &plan).unwrap();
        let mut exec = MockExecutor::new(
            "throughput_bps",
            Box::new(|c| Ok(1e9 + c.id as f64)),
            0.01,
            3,
        );
        sweep(&plan, &store, &mut exec, SweepOptions::default()).unwrap();
        store.checkpoint().unwrap();
        drop(store);
        std::fs::read(&path).unwrap()
    })
}

/// The bytes of a schema 1 study: one configuration, one run with zlib-deflated text samples.
fn version_1() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA application_id = {}; PRAGMA user_version = 1;",
            tcplab_study::store::APPLICATION_ID
        ))
        .unwrap();
        conn.execute_batch(
            "INSERT INTO study VALUES (1, 'old', 'name = \"old\"', 'h', '1', 0, 'm', 'minimise', 0, '0.1.0');
             INSERT INTO configuration (id, label, factors, is_baseline, settings) VALUES (0, 'default', '[]', 1, '{}');",
        )
        .unwrap();
        let text = b"# tcplab-samples 1 workload=msgs\n# section=message size=1 t0_ns=5 columns=seq,send_ns,recv_ns\n0,0,41200\n";
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(text).unwrap();
        conn.execute(
            "INSERT INTO run (config_id, rep, run_order, status, metrics, facts, trustworthy, fidelity_reasons, samples, samples_raw_len, started_ms, wall_s, executor_wall_s)
             VALUES (0, 0, 0, 'ok', '{\"m\": 1.5}', 'null', 1, '[]', ?1, ?2, 0, 0.2, 0.2)",
            rusqlite::params![z.finish().unwrap(), text.len() as i64],
        )
        .unwrap();
        drop(conn);
        std::fs::read(&path).unwrap()
    })
}

/// Everything a report or a resume reads from a study file, as error texts.
fn read_all(path: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    let mut note = |r: Result<(), tcplab_study::StoreError>| {
        if let Err(e) = r {
            errors.push(e.to_string());
        }
    };
    match Store::open(path) {
        Err(e) => note(Err(e)),
        Ok(store) => {
            note(store.study().map(|_| ()));
            note(store.configurations().map(|_| ()));
            note(store.race().map(|_| ()));
            note(store.sessions().map(|_| ()));
            note(store.done().map(|_| ()));
            match store.runs() {
                Err(e) => note(Err(e)),
                Ok(runs) => {
                    for r in runs {
                        note(store.samples(r.id).map(|_| ()));
                    }
                }
            }
        }
    }
    if let Err(e) = Store::resume(path, &plan()) {
        errors.push(e.to_string());
    }
    errors
}

/// Writes `bytes` damaged as told to a fresh file and reads everything from it.
fn damaged(
    bytes: &[u8],
    cut: Option<usize>,
    flips: Vec<(prop::sample::Index, u8)>,
) -> Result<(), TestCaseError> {
    let mut bytes = bytes.to_vec();
    for (at, byte) in flips {
        let i = at.index(bytes.len());
        bytes[i] ^= byte.max(1);
    }
    if let Some(n) = cut {
        bytes.truncate(n);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("study.db");
    std::fs::write(&path, &bytes).unwrap();
    let errors = bounded("study file", move || read_all(&path))?;
    for e in errors {
        check_error(&e, &["study.db"])?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(props::config())]

    #[test]
    fn truncated_studies(at in any::<prop::sample::Index>()) {
        let bytes = current();
        damaged(bytes, Some(at.index(bytes.len())), Vec::new())?;
    }

    #[test]
    fn studies_with_bytes_flipped(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        damaged(current(), None, flips)?;
    }

    #[test]
    fn old_studies_truncated_or_flipped(
        at in any::<prop::sample::Index>(),
        cut in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let bytes = version_1();
        let cut = cut.then(|| at.index(bytes.len()));
        damaged(bytes, cut, flips)?;
    }
}

/// Both files read whole before any damage: the damage is what the properties test.
#[test]
fn undamaged_studies_read_whole() {
    for bytes in [current(), version_1()] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("study.db");
        std::fs::write(&path, bytes).unwrap();
        let store = Store::open(&path).unwrap();
        for r in store.runs().unwrap() {
            assert!(!store.samples(r.id).unwrap().is_empty());
        }
    }
}

/// Writes `bytes` to a fresh study file, changes it with `sql`, and returns its path.
fn edited(dir: &Path, bytes: &[u8], sql: &str) -> std::path::PathBuf {
    let path = dir.join("study.db");
    std::fs::write(&path, bytes).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(sql).unwrap();
    drop(conn);
    path
}

/// A stored hash that is not ASCII was cut at byte 12 for the message, inside a character.
#[test]
fn a_hash_of_wide_characters_is_shown_not_sliced() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited(
        dir.path(),
        current(),
        "UPDATE study SET scenario_hash = 'aaaaaaaaaaaéé';",
    );
    let e = Store::resume(&path, &plan()).unwrap_err().to_string();
    assert!(e.contains("stored hash aaaaaaaaaaaé…"), "{e}");
}

/// A flipped byte made the stored hash hold a newline (benches/fuzz.sh found it), and the
/// message printed it as is, over two lines; a stored seed may hold one too.
#[test]
fn stored_values_with_line_breaks_are_shown_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited(
        dir.path(),
        current(),
        "UPDATE study SET scenario_hash = 'aaaaa' || char(10) || 'aaaaaa';",
    );
    let e = Store::resume(&path, &plan()).unwrap_err().to_string();
    assert!(
        e.contains("stored hash aaaaa\\naaaaaa…") && e.lines().count() == 1,
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let hash = plan().scenario_hash;
    let path = edited(
        dir.path(),
        current(),
        &format!("UPDATE study SET scenario_hash = '{hash}', seed = '7' || char(13) || '1';"),
    );
    let e = Store::resume(&path, &plan()).unwrap_err().to_string();
    assert!(
        e.contains("study seed 7\\r1, now") && e.lines().count() == 1,
        "{e}"
    );
}

/// A damaged LZ4 size asked for up to 4 GiB before a byte was read; a zlib blob could inflate
/// without bound. Both are held to the length the row stored.
#[test]
fn damaged_sample_lengths_are_refused_before_they_allocate() {
    let dir = tempfile::tempdir().unwrap();
    let path = edited(
        dir.path(),
        current(),
        "UPDATE run SET samples = X'FFFFFFFF00' WHERE id = 1;",
    );
    let store = Store::open(&path).unwrap();
    let e = store.samples(1).unwrap_err().to_string();
    assert!(
        e.contains("the compressed block says 4294967295 bytes"),
        "{e}"
    );
    drop(store);

    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&vec![b'x'; 10 << 20]).unwrap();
    let bomb: String = z
        .finish()
        .unwrap()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = edited(
        dir.path(),
        version_1(),
        &format!("UPDATE run SET samples = X'{bomb}';"),
    );
    let store = Store::open(&path).unwrap();
    let id = store.runs().unwrap()[0].id;
    let e = store.samples(id).unwrap_err().to_string();
    assert!(e.contains("inflate to") && e.lines().count() == 1, "{e}");
}
