//! The monitor's database (SQLite): every run's figures, the last full result per slot, and
//! the alerts with the doctor's evidence. Its size is bounded: a run keeps only its figures
//! (about 200 bytes), the full result is kept for a slot's last run only, and [`MonitorStore::
//! prune`] drops runs older than `--keep` and beyond a count per slot.
//!
//! A run is keyed by its slot (host names and workload, so a hosts file that changes keeps
//! each pair's history) and its index in that slot: a monitor killed after a test ended but
//! before it noted the fact records the same run again on restart, and the second insert is
//! ignored, so nothing is counted twice; the schedule resumes from [`MonitorStore::
//! slot_histories`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use tcplab_stats::RegressionCheck;

use crate::evidence::Evidence;
use crate::figures::Figure;
use crate::metrics::Outcome;
use crate::schedule::SlotHistory;

/// A slot by name: (client host, server host, workload).
pub type SlotKey = (String, String, String);

/// One finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The client's host name.
    pub src: String,
    /// The server's host name.
    pub dst: String,
    /// The workload's label.
    pub workload: String,
    /// Its index among the slot's runs (0, 1, ...).
    pub index: u64,
    /// When it started, Unix ms.
    pub started_ms: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// What it measured.
    pub figures: Vec<(Figure, f64)>,
    /// On a lab: whether the emulator kept its schedule.
    pub emulator_trustworthy: Option<bool>,
}

impl Run {
    /// Its slot's key.
    pub fn slot(&self) -> SlotKey {
        (self.src.clone(), self.dst.clone(), self.workload.clone())
    }
}

/// An alert as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertRow {
    /// Its id.
    pub id: i64,
    /// The slot.
    pub src: String,
    /// The slot.
    pub dst: String,
    /// The slot.
    pub workload: String,
    /// The figure that regressed.
    pub figure: String,
    /// When it opened, Unix ms.
    pub opened_ms: u64,
    /// When it closed (the pair recovered), Unix ms.
    pub closed_ms: Option<u64>,
    /// The regression check that opened it.
    pub check: RegressionCheck,
    /// The doctor's findings on the pair when it opened, once the doctor has run.
    pub evidence: Option<Evidence>,
}

/// What went wrong with the database; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused (a file that is not a database, a full disk, a lock).
    #[error("monitor database {path}: {source}; check the file, or start over with another --db")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A row that does not read back (a database another version wrote).
    #[error("monitor database {path}: {problem}; start over with another --db")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What did not read.
        problem: String,
    },
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS monitor_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS monitor_run (
  src TEXT NOT NULL,
  dst TEXT NOT NULL,
  workload TEXT NOT NULL,
  idx INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('complete', 'incomplete', 'failed')),
  figures TEXT NOT NULL,
  emulator INTEGER,
  PRIMARY KEY (src, dst, workload, idx)
);
CREATE INDEX IF NOT EXISTS monitor_run_time ON monitor_run (started_ms);
CREATE TABLE IF NOT EXISTS monitor_last_result (
  src TEXT NOT NULL,
  dst TEXT NOT NULL,
  workload TEXT NOT NULL,
  result TEXT NOT NULL,
  PRIMARY KEY (src, dst, workload)
);
CREATE TABLE IF NOT EXISTS monitor_alert (
  id INTEGER PRIMARY KEY,
  src TEXT NOT NULL,
  dst TEXT NOT NULL,
  workload TEXT NOT NULL,
  figure TEXT NOT NULL,
  opened_ms INTEGER NOT NULL,
  closed_ms INTEGER,
  check_json TEXT NOT NULL,
  evidence TEXT
);
";

/// An open monitor database.
#[derive(Debug)]
pub struct MonitorStore {
    conn: Connection,
    path: PathBuf,
}

impl MonitorStore {
    /// Opens the database at `path`, creating it if missing.
    pub fn open(path: &Path) -> Result<MonitorStore, StoreError> {
        let sql = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(sql)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(sql)?;
        conn.execute_batch(SCHEMA).map_err(sql)?;
        Ok(MonitorStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn corrupt(&self, problem: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            problem,
        }
    }

    /// The schedule's seed: the one stored, or `fresh` stored now. A restarted monitor takes
    /// the same seed, so its jittered times are the stopped one's.
    pub fn seed(&self, fresh: u64) -> Result<u64, StoreError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO monitor_meta (key, value) VALUES ('seed', ?1)",
                params![fresh.to_string()],
            )
            .map_err(|e| self.err(e))?;
        let text: String = self
            .conn
            .query_row(
                "SELECT value FROM monitor_meta WHERE key = 'seed'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        text.parse()
            .map_err(|_| self.corrupt(format!("the stored seed {text:?} is not a number")))
    }

    /// Records a finished run and, if given, its full result as the slot's last. False when
    /// the run was already recorded (a restart noting it again).
    pub fn record(&self, run: &Run, result: Option<&str>) -> Result<bool, StoreError> {
        let figures =
            serde_json::to_string(&run.figures).map_err(|e| self.corrupt(e.to_string()))?;
        let outcome = serde_json::to_value(run.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let inserted = self
            .conn
            .execute(
                "INSERT OR IGNORE INTO monitor_run
                 (src, dst, workload, idx, started_ms, outcome, figures, emulator)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    run.src,
                    run.dst,
                    run.workload,
                    run.index as i64,
                    run.started_ms as i64,
                    outcome,
                    figures,
                    run.emulator_trustworthy
                ],
            )
            .map_err(|e| self.err(e))?;
        if let (Some(result), 1) = (result, inserted) {
            self.conn
                .execute(
                    "INSERT OR REPLACE INTO monitor_last_result (src, dst, workload, result)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![run.src, run.dst, run.workload, result],
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(inserted == 1)
    }

    /// Each slot's last start and run count, for resuming the schedule.
    pub fn slot_histories(&self) -> Result<BTreeMap<SlotKey, SlotHistory>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT src, dst, workload, MAX(started_ms), MAX(idx) + 1
                 FROM monitor_run GROUP BY src, dst, workload",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                    ),
                    SlotHistory {
                        last_start_ms: r.get::<_, i64>(3)?.max(0) as u64,
                        runs: r.get::<_, i64>(4)?.max(0) as u64,
                    },
                ))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Every kept run, oldest first (to rebuild the alerts' histories on restart).
    pub fn runs(&self) -> Result<Vec<Run>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT src, dst, workload, idx, started_ms, outcome, figures, emulator
                 FROM monitor_run ORDER BY started_ms, src, dst, workload",
            )
            .map_err(|e| self.err(e))?;
        let raw = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<bool>>(7)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        raw.into_iter()
            .map(
                |(src, dst, workload, idx, started, outcome, figures, emulator)| {
                    let outcome = serde_json::from_value(serde_json::Value::String(outcome))
                        .map_err(|e| self.corrupt(format!("a run's outcome: {e}")))?;
                    let figures = serde_json::from_str(&figures)
                        .map_err(|e| self.corrupt(format!("a run's figures: {e}")))?;
                    Ok(Run {
                        src,
                        dst,
                        workload,
                        index: idx.max(0) as u64,
                        started_ms: started.max(0) as u64,
                        outcome,
                        figures,
                        emulator_trustworthy: emulator,
                    })
                },
            )
            .collect()
    }

    /// The slot's last full result (JSON), if kept.
    pub fn last_result(&self, slot: &SlotKey) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT result FROM monitor_last_result WHERE src = ?1 AND dst = ?2 AND workload = ?3",
                params![slot.0, slot.1, slot.2],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Drops runs that started before `now_ms - keep_ms`, and each slot's runs beyond its
    /// newest `max_per_slot`; returns how many went. A slot keeps its newest run whatever its
    /// age, so the schedule always resumes from the right count.
    pub fn prune(&self, now_ms: u64, keep_ms: u64, max_per_slot: u64) -> Result<usize, StoreError> {
        let cutoff = now_ms.saturating_sub(keep_ms) as i64;
        let old = self
            .conn
            .execute(
                "DELETE FROM monitor_run AS r WHERE r.started_ms < ?1
                 AND r.idx < (SELECT MAX(idx) FROM monitor_run AS n
                              WHERE n.src = r.src AND n.dst = r.dst AND n.workload = r.workload)",
                params![cutoff],
            )
            .map_err(|e| self.err(e))?;
        let beyond = self
            .conn
            .execute(
                "DELETE FROM monitor_run AS r
                 WHERE r.idx <= (SELECT MAX(idx) FROM monitor_run AS n
                                 WHERE n.src = r.src AND n.dst = r.dst AND n.workload = r.workload)
                                - ?1",
                params![max_per_slot.max(1) as i64],
            )
            .map_err(|e| self.err(e))?;
        let closed = self
            .conn
            .execute(
                "DELETE FROM monitor_alert WHERE closed_ms IS NOT NULL AND closed_ms < ?1",
                params![cutoff],
            )
            .map_err(|e| self.err(e))?;
        Ok(old + beyond + closed)
    }

    /// Opens an alert; returns its id.
    pub fn open_alert(
        &self,
        slot: &SlotKey,
        figure: &str,
        opened_ms: u64,
        check: &RegressionCheck,
    ) -> Result<i64, StoreError> {
        let check_json = serde_json::to_string(check).map_err(|e| self.corrupt(e.to_string()))?;
        self.conn
            .execute(
                "INSERT INTO monitor_alert (src, dst, workload, figure, opened_ms, check_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![slot.0, slot.1, slot.2, figure, opened_ms as i64, check_json],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Stores the doctor's findings on the pair `src` -> `dst` as the evidence of each of its
    /// open alerts that has none yet; returns those alerts.
    pub fn set_evidence(
        &self,
        src: &str,
        dst: &str,
        evidence: &Evidence,
    ) -> Result<Vec<AlertRow>, StoreError> {
        let json = serde_json::to_string(evidence).map_err(|e| self.corrupt(e.to_string()))?;
        let waiting: Vec<AlertRow> = self
            .alerts(true)?
            .into_iter()
            .filter(|a| a.src == src && a.dst == dst && a.evidence.is_none())
            .collect();
        for a in &waiting {
            self.conn
                .execute(
                    "UPDATE monitor_alert SET evidence = ?2 WHERE id = ?1",
                    params![a.id, json],
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(waiting
            .into_iter()
            .map(|a| AlertRow {
                evidence: Some(evidence.clone()),
                ..a
            })
            .collect())
    }

    /// Closes the open alert of this slot and figure, if any; returns its id.
    pub fn close_alert(
        &self,
        slot: &SlotKey,
        figure: &str,
        closed_ms: u64,
    ) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "UPDATE monitor_alert SET closed_ms = ?5
                 WHERE src = ?1 AND dst = ?2 AND workload = ?3 AND figure = ?4 AND closed_ms IS NULL
                 RETURNING id",
                params![slot.0, slot.1, slot.2, figure, closed_ms as i64],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The alerts, newest first (only the open ones with `open_only`).
    pub fn alerts(&self, open_only: bool) -> Result<Vec<AlertRow>, StoreError> {
        let filter = if open_only {
            "WHERE closed_ms IS NULL"
        } else {
            ""
        };
        self.select_alerts(filter, [])
    }

    /// One alert by id.
    pub fn alert(&self, id: i64) -> Result<Option<AlertRow>, StoreError> {
        Ok(self.select_alerts("WHERE id = ?1", [id])?.pop())
    }

    fn select_alerts<P: rusqlite::Params>(
        &self,
        filter: &str,
        params: P,
    ) -> Result<Vec<AlertRow>, StoreError> {
        let sql = format!(
            "SELECT id, src, dst, workload, figure, opened_ms, closed_ms, check_json, evidence
             FROM monitor_alert {filter} ORDER BY opened_ms DESC, id DESC"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        type Raw = (
            i64,
            String,
            String,
            String,
            String,
            i64,
            Option<i64>,
            String,
            Option<String>,
        );
        let raw = stmt
            .query_map(params, |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<Raw>, _>>()
            .map_err(|e| self.err(e))?;
        raw.into_iter()
            .map(
                |(id, src, dst, workload, figure, opened, closed, check, evidence)| {
                    let check = serde_json::from_str(&check)
                        .map_err(|e| self.corrupt(format!("alert {id}'s check: {e}")))?;
                    let evidence = evidence
                        .map(|e| serde_json::from_str(&e))
                        .transpose()
                        .map_err(|e| self.corrupt(format!("alert {id}'s evidence: {e}")))?;
                    Ok(AlertRow {
                        id,
                        src,
                        dst,
                        workload,
                        figure,
                        opened_ms: opened.max(0) as u64,
                        closed_ms: closed.map(|v| v.max(0) as u64),
                        check,
                        evidence,
                    })
                },
            )
            .collect()
    }

    /// How many runs are kept.
    pub fn run_count(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM monitor_run", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.err(e))
    }
}

/// An alert for tests: h1 -> h2 stream throughput 67 % worse than its history, open.
#[cfg(test)]
pub(crate) fn sample_alert() -> AlertRow {
    AlertRow {
        id: 4,
        src: "h1".into(),
        dst: "h2".into(),
        workload: "stream".into(),
        figure: "throughput_bps".into(),
        opened_ms: 60_000,
        closed_ms: None,
        check: RegressionCheck {
            regressed: true,
            p_value: 0.0048,
            baseline: 9.4e8,
            recent: 3.1e8,
            worse_by: 0.67,
            worse_needed: 0.2,
            history_used: 19,
        },
        evidence: None,
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
