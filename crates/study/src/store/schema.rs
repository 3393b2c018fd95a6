//! The store's tables, and the upgrade of files written by older tcplab versions.
//!
//! Version 2 added, without touching what version 1 stored:
//! - `run.samples_codec`: `zlib` (version 1: the samples text, deflated) or `lz4` (the packed
//!   format of [`crate::codec`], LZ4-compressed). Old rows keep `zlib` and read as before.
//! - `run.timing`: where the run's time went ([`crate::runner::RunTiming`] as JSON).
//! - `sweep_session`: one row per `sweep` call with its overhead breakdown
//!   ([`crate::runner::Overhead`]).

use rusqlite::Connection;

/// `tclb` as a big-endian i32: marks the file as tcplab's.
pub const APPLICATION_ID: i32 = 0x7463_6c62;
/// Schema version stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i32 = 2;

/// The version 1 tables (kept verbatim: upgrades start from them).
pub(crate) const SCHEMA_V1: &str = "
CREATE TABLE study (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    name TEXT NOT NULL,
    scenario TEXT NOT NULL,
    scenario_hash TEXT NOT NULL,
    seed TEXT NOT NULL,
    quick INTEGER NOT NULL,
    objective_metric TEXT NOT NULL,
    objective_goal TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    tool_version TEXT NOT NULL
);
CREATE TABLE configuration (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    factors TEXT NOT NULL,
    is_baseline INTEGER NOT NULL,
    settings TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    reason TEXT
);
CREATE TABLE run (
    id INTEGER PRIMARY KEY,
    config_id INTEGER NOT NULL REFERENCES configuration(id),
    rep INTEGER NOT NULL,
    run_order INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    metrics TEXT NOT NULL,
    facts TEXT NOT NULL,
    trustworthy INTEGER NOT NULL,
    fidelity_reasons TEXT NOT NULL,
    samples BLOB,
    samples_raw_len INTEGER NOT NULL DEFAULT 0,
    started_ms INTEGER NOT NULL,
    wall_s REAL NOT NULL,
    executor_wall_s REAL NOT NULL,
    UNIQUE (config_id, rep)
);
CREATE TABLE race (
    id INTEGER PRIMARY KEY,
    round INTEGER NOT NULL,
    completed_runs INTEGER NOT NULL,
    config_id INTEGER NOT NULL REFERENCES configuration(id),
    action TEXT NOT NULL,
    best TEXT,
    p_value REAL,
    p_adjusted REAL,
    reason TEXT NOT NULL,
    decided_ms INTEGER NOT NULL
);
";

/// Version 1 → 2.
const UPGRADE_V2: &str = "
ALTER TABLE run ADD COLUMN samples_codec TEXT NOT NULL DEFAULT 'zlib';
ALTER TABLE run ADD COLUMN timing TEXT NOT NULL DEFAULT '{}';
CREATE TABLE sweep_session (
    id INTEGER PRIMARY KEY,
    ended_ms INTEGER NOT NULL,
    executed INTEGER NOT NULL,
    wall_s REAL NOT NULL,
    workload_s REAL NOT NULL,
    lab_s REAL NOT NULL,
    harness_s REAL NOT NULL,
    encode_s REAL NOT NULL,
    store_s REAL NOT NULL,
    stats_s REAL NOT NULL,
    other_s REAL NOT NULL,
    overhead_fraction REAL NOT NULL
);
";

/// Creates every table of the current version in a new file (inside the caller's transaction).
pub(crate) fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA_V1)?;
    conn.execute_batch(UPGRADE_V2)?;
    conn.execute_batch(&format!(
        "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
    ))
}

/// Brings a file of an older version up to [`SCHEMA_VERSION`] in one transaction; returns the
/// version it found. Versions newer than this tcplab are left alone (the caller refuses them).
pub(crate) fn upgrade(conn: &Connection, found: i32) -> rusqlite::Result<i32> {
    if found == 1 {
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(UPGRADE_V2)?;
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))?;
        tx.commit()?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::runner::{Overhead, RunTiming};
    use crate::store::Store;

    /// A study file as tcplab wrote it before schema 2: one run with zlib-deflated text samples.
    fn write_v1(path: &std::path::Path, samples: &[u8]) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;"
        ))
        .unwrap();
        conn.execute_batch(
            "INSERT INTO study VALUES (1, 'old', 'name = \"old\"', 'h', '1', 0, 'm', 'minimise', 0, '0.1.0');
             INSERT INTO configuration (id, label, factors, is_baseline, settings) VALUES (0, 'default', '[]', 1, '{}');",
        )
        .unwrap();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(samples).unwrap();
        let blob = z.finish().unwrap();
        conn.execute(
            "INSERT INTO run (config_id, rep, run_order, status, metrics, facts, trustworthy, fidelity_reasons, samples, samples_raw_len, started_ms, wall_s, executor_wall_s)
             VALUES (0, 0, 0, 'ok', '{\"m\": 1.5}', 'null', 1, '[]', ?1, ?2, 0, 0.2, 0.2)",
            rusqlite::params![blob, samples.len() as i64],
        )
        .unwrap();
    }

    #[test]
    fn version_1_files_are_upgraded_and_their_samples_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        let text = b"# tcplab-samples 1 workload=msgs\n# section=message size=1 t0_ns=5 columns=seq,send_ns,recv_ns\n0,0,41200\n1,1500,-\n";
        write_v1(&path, text);
        let store = Store::open(&path).unwrap();
        let runs = store.runs().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].metrics["m"], 1.5);
        assert_eq!(runs[0].timing, RunTiming::default());
        assert_eq!(store.samples(runs[0].id).unwrap(), text);
        assert!(store.sessions().unwrap().is_empty());
        let o = Overhead {
            wall_s: 2.0,
            workload_s: 1.9,
            fraction: 0.05,
            ..Overhead::default()
        };
        store.record_session(1, 1, &o).unwrap();
        assert_eq!(store.sessions().unwrap(), vec![o]);
        drop(store);
        let conn = Connection::open(&path).unwrap();
        let version: i32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }
}
