//! The result store: one SQLite file per study, written run by run.
//!
//! Tables (schema version 2, `PRAGMA application_id` = `0x74636c62` "tclb", so a foreign
//! SQLite file is recognised and refused; version 1 files are upgraded in place, see
//! [`schema`]):
//! - `study`: one row: name, scenario text, its canonical hash, order seed, quick flag.
//! - `configuration`: id, label, factors (JSON), baseline flag, settings (JSON), status
//!   (`active`, `failed`, `dropped`) and the reason.
//! - `run`: config id, repetition, order, status (`ok`, `failed`), error, metrics (JSON
//!   object of dotted names), facts (JSON), fidelity (trustworthy + reasons JSON), samples
//!   (a compressed blob, its codec and raw length: `lz4` of the packed format of
//!   [`crate::codec`], or version 1's `zlib` text), start time, wall times and their breakdown
//!   (`timing`). `UNIQUE(config_id, rep)`: a run can never be stored twice.
//! - `race`: every racing verdict: round, runs completed so far, action, p-values, reason.
//! - `sweep_session`: one row per `sweep` call: wall time, the workloads' own time and the
//!   overhead beyond it, broken down.
//!
//! Each run is written in its own transaction when it ends, in WAL mode: a process killed at
//! any moment (SIGKILL included) leaves every finished run in the file and loses at most the
//! one in flight. Resuming checks the scenario hash, the seed and the quick flag, so a changed
//! study is refused instead of mixing results.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreError;
use crate::plan::{Plan, PlannedRun};
use crate::runner::{Overhead, RunError, RunOutcome, RunTiming};

mod schema;

pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

/// A configuration as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoredConfig {
    /// Id (as in the plan).
    pub id: usize,
    /// Label.
    pub label: String,
    /// Factor name → value text, in factor order.
    pub factors: Vec<(String, String)>,
    /// Baseline flag.
    pub is_baseline: bool,
    /// `active`, `failed` or `dropped`.
    pub status: String,
    /// Why it failed or was dropped.
    pub reason: Option<String>,
}

/// A run as stored (without its samples blob; see [`Store::samples`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoredRun {
    /// Row id.
    pub id: i64,
    /// Configuration id.
    pub config_id: usize,
    /// Repetition.
    pub rep: u32,
    /// Position in the order.
    pub order: usize,
    /// `ok` or `failed`.
    pub status: String,
    /// The failure, if any.
    pub error: Option<String>,
    /// Summary metrics.
    pub metrics: BTreeMap<String, f64>,
    /// Facts.
    pub facts: serde_json::Value,
    /// Fidelity verdict.
    pub trustworthy: bool,
    /// Why not trustworthy.
    pub fidelity_reasons: Vec<String>,
    /// Raw (uncompressed) samples length.
    pub samples_len: usize,
    /// Start, ms since the Unix epoch.
    pub started_ms: i64,
    /// Wall time of the run as the runner saw it.
    pub wall_s: f64,
    /// Wall time the executor reported.
    pub executor_wall_s: f64,
    /// Where the executor's time went (zeros for runs stored by tcplab before schema 2).
    pub timing: RunTiming,
}

/// One stored racing verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoredRace {
    /// Racing round (1-based).
    pub round: u32,
    /// Runs completed in the study when the round was held.
    pub completed_runs: usize,
    /// Configuration id.
    pub config_id: usize,
    /// `keep` or `drop`.
    pub action: String,
    /// Label of the best at that time.
    pub best: Option<String>,
    /// Raw p-value.
    pub p_value: Option<f64>,
    /// Holm-adjusted p-value.
    pub p_adjusted: Option<f64>,
    /// The sentence with the figures.
    pub reason: String,
}

/// The study file, open for writing.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Store {
    fn sql(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Creates a new study file for `plan`; refuses an existing file.
    pub fn create(path: &Path, plan: &Plan) -> Result<Store, StoreError> {
        if path.exists() {
            return Err(StoreError::Exists { path: path.into() });
        }
        // Written whole beside its path, then linked into place: a sweep killed while it
        // creates its study leaves no file at `path` that `--resume` would find without its
        // identity or schema, only a hidden `.NAME.creating-PID` it can be started again over.
        let name = path
            .file_name()
            .map_or_else(|| "study.db".into(), |n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{name}.creating-{}", std::process::id()));
        remove_database_files(&tmp);
        let created = (|| {
            let store = Store::connect(&tmp)?;
            store.init(plan)?;
            store.checkpoint()
        })();
        let placed = created.and_then(|()| {
            // A link never replaces a study that appeared meanwhile; a file system without
            // links gets a rename (the path was checked free above).
            match std::fs::hard_link(&tmp, path) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    Err(StoreError::Exists { path: path.into() })
                }
                Err(_) => std::fs::rename(&tmp, path).map_err(|source| StoreError::Create {
                    path: path.into(),
                    source,
                }),
                Ok(()) => Ok(()),
            }
        });
        remove_database_files(&tmp);
        placed?;
        Store::connect(path)
    }

    /// Reopens a study for `plan`: refuses a foreign file or a changed scenario/seed/quick,
    /// and marks nothing as done that the file does not hold.
    pub fn resume(path: &Path, plan: &Plan) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing { path: path.into() });
        }
        let store = Store::open(path)?;
        store.check_same_study(plan)?;
        Ok(store)
    }

    /// Opens an existing study file (for export and reports), checking it is one.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing { path: path.into() });
        }
        let store = Store::connect(path)?;
        store.check_identity()?;
        Ok(store)
    }

    fn connect(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: path.into(),
            source,
        })?;
        let store = Store {
            conn,
            path: path.into(),
        };
        // WAL: a commit is durable against a killed process as soon as it returns; NORMAL
        // sync only risks the last commits on an OS crash, which the study can re-run.
        let foreign = |e: rusqlite::Error| StoreError::Foreign {
            path: path.into(),
            reason: e.to_string(),
        };
        store
            .conn
            .busy_timeout(Duration::from_secs(5))
            .map_err(store.sql())?;
        store
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .map_err(foreign)?;
        store
            .conn
            .execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(store.sql())?;
        // A run of 100,000 messages writes ~60 pages; at SQLite's default of a checkpoint
        // every 1,000 WAL pages a sweep paid a copy and an fsync every ~16 runs. Every commit is
        // in the WAL either way (a killed sweep loses nothing it committed); the sweep
        // checkpoints once at its end ([`Store::checkpoint`]).
        store
            .conn
            .execute_batch("PRAGMA wal_autocheckpoint = 16384;")
            .map_err(store.sql())?;
        Ok(store)
    }

    /// Copies the WAL into the database file and empties it (a sweep's last store step, so its
    /// cost is counted in the sweep's storing time rather than at close).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(self.sql())
    }

    fn check_identity(&self) -> Result<(), StoreError> {
        let foreign = |reason: String| StoreError::Foreign {
            path: self.path.clone(),
            reason,
        };
        let app: i32 = self
            .conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(|e| foreign(e.to_string()))?;
        if app != APPLICATION_ID {
            return Err(foreign(format!(
                "application_id is {app:#x}, not tcplab's {APPLICATION_ID:#x}"
            )));
        }
        let version: i32 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| foreign(e.to_string()))?;
        if !(1..=SCHEMA_VERSION).contains(&version) {
            return Err(foreign(format!(
                "schema version {version}, this tcplab reads 1 to {SCHEMA_VERSION}"
            )));
        }
        schema::upgrade(&self.conn, version).map_err(self.sql())?;
        let ok: String = self
            .conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| foreign(e.to_string()))?;
        if ok != "ok" {
            return Err(foreign(format!("integrity check failed: {ok}")));
        }
        Ok(())
    }

    fn init(&self, plan: &Plan) -> Result<(), StoreError> {
        let tx = self.conn.unchecked_transaction().map_err(self.sql())?;
        schema::create(&tx).map_err(self.sql())?;
        let goal = serde_json::to_value(plan.objective.goal)
            .map_or_else(|_| String::new(), |v| v.as_str().unwrap_or("").to_string());
        tx.execute(
            "INSERT INTO study (id, name, scenario, scenario_hash, seed, quick, objective_metric, objective_goal, created_ms, tool_version)
             VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                plan.name,
                plan.scenario_text,
                plan.scenario_hash,
                plan.seed.to_string(),
                plan.quick,
                plan.objective.metric,
                goal,
                now_ms(),
                tcplab_lab::facts::build()
            ],
        )
        .map_err(self.sql())?;
        for c in &plan.configurations {
            let factors = serde_json::to_string(&c.factors).unwrap_or_default();
            let settings = serde_json::to_string(&c.settings).unwrap_or_default();
            tx.execute(
                "INSERT INTO configuration (id, label, factors, is_baseline, settings) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![c.id as i64, c.label, factors, c.is_baseline, settings],
            )
            .map_err(self.sql())?;
        }
        tx.commit().map_err(self.sql())
    }

    fn check_same_study(&self, plan: &Plan) -> Result<(), StoreError> {
        let (hash, seed, quick): (String, String, bool) = self
            .conn
            .query_row(
                "SELECT scenario_hash, seed, quick FROM study WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(self.sql())?;
        // The stored values come from the file, which may be damaged: escaped, so the
        // message stays on one line.
        let changed = |what, detail| StoreError::ScenarioChanged {
            path: self.path.clone(),
            what,
            detail,
        };
        if hash != plan.scenario_hash {
            return Err(changed(
                "the scenario",
                format!(
                    "stored hash {}…, file now hashes to {}…",
                    prefix(&hash).escape_debug(),
                    prefix(&plan.scenario_hash)
                ),
            ));
        }
        if seed != plan.seed.to_string() {
            return Err(changed(
                "the seed",
                format!("study seed {}, now {}", seed.escape_debug(), plan.seed),
            ));
        }
        if quick != plan.quick {
            return Err(changed(
                "--quick",
                format!("study quick = {quick}, now {}", plan.quick),
            ));
        }
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM configuration", [], |r| r.get(0))
            .map_err(self.sql())?;
        if n != plan.configurations.len() as i64 {
            return Err(changed(
                "the configuration list",
                format!("{n} stored, {} planned", plan.configurations.len()),
            ));
        }
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records one finished run (ok or failed) in its own transaction.
    pub fn record_run(
        &self,
        run: &PlannedRun,
        result: &Result<RunOutcome, RunError>,
        started_ms: i64,
        wall: Duration,
    ) -> Result<(), StoreError> {
        let timing = match result {
            Ok(o) => serde_json::to_string(&o.timing).unwrap_or_else(|_| "{}".into()),
            Err(_) => "{}".into(),
        };
        let (status, error, metrics, facts, trust, reasons, samples, raw_len, exec_wall) =
            match result {
                Ok(o) => {
                    let blob = lz4_flex::compress_prepend_size(&o.samples);
                    (
                        "ok",
                        None,
                        serde_json::to_string(&o.metrics).unwrap_or_else(|_| "{}".into()),
                        o.facts.to_string(),
                        o.fidelity.trustworthy,
                        serde_json::to_string(&o.fidelity.reasons).unwrap_or_else(|_| "[]".into()),
                        Some(blob),
                        o.samples.len(),
                        o.wall.as_secs_f64(),
                    )
                }
                Err(e) => (
                    "failed",
                    Some(e.to_string()),
                    "{}".to_string(),
                    "null".to_string(),
                    false,
                    "[]".to_string(),
                    None,
                    0,
                    wall.as_secs_f64(),
                ),
            };
        let tx = self.conn.unchecked_transaction().map_err(self.sql())?;
        tx.execute(
            "INSERT INTO run (config_id, rep, run_order, status, error, metrics, facts, trustworthy, fidelity_reasons, samples, samples_raw_len, started_ms, wall_s, executor_wall_s, samples_codec, timing)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 'lz4', ?15)",
            params![
                run.config.id as i64,
                run.rep,
                run.order as i64,
                status,
                error,
                metrics,
                facts,
                trust,
                reasons,
                samples,
                raw_len as i64,
                started_ms,
                wall.as_secs_f64(),
                exec_wall,
                timing
            ],
        )
        .map_err(self.sql())?;
        tx.commit().map_err(self.sql())
    }

    /// Marks a configuration failed or dropped, with the reason.
    pub fn set_config_status(
        &self,
        id: usize,
        status: &str,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE configuration SET status = ?1, reason = ?2 WHERE id = ?3",
                params![status, reason, id as i64],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// Records one racing round's verdicts in one transaction.
    pub fn record_race(&self, verdicts: &[StoredRace]) -> Result<(), StoreError> {
        let tx = self.conn.unchecked_transaction().map_err(self.sql())?;
        for v in verdicts {
            tx.execute(
                "INSERT INTO race (round, completed_runs, config_id, action, best, p_value, p_adjusted, reason, decided_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![v.round, v.completed_runs as i64, v.config_id as i64, v.action, v.best, v.p_value, v.p_adjusted, v.reason, now_ms()],
            )
            .map_err(self.sql())?;
            if v.action == "drop" {
                tx.execute(
                    "UPDATE configuration SET status = 'dropped', reason = ?1 WHERE id = ?2",
                    params![v.reason, v.config_id as i64],
                )
                .map_err(self.sql())?;
            }
        }
        tx.commit().map_err(self.sql())
    }

    /// (config id, rep) of every stored run.
    pub fn done(&self) -> Result<BTreeSet<(usize, u32)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT config_id, rep FROM run")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, i64>(0)? as usize, r.get::<_, u32>(1)?))
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// Every configuration as stored.
    pub fn configurations(&self) -> Result<Vec<StoredConfig>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, label, factors, is_baseline, status, reason FROM configuration ORDER BY id")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .map_err(self.sql())?;
        let mut out = Vec::new();
        for row in rows {
            let (id, label, factors, is_baseline, status, reason) = row.map_err(self.sql())?;
            let factors = serde_json::from_str(&factors)
                .map_err(|e| self.damaged("configuration.factors", &e))?;
            out.push(StoredConfig {
                id: id as usize,
                label,
                factors,
                is_baseline,
                status,
                reason,
            });
        }
        Ok(out)
    }

    fn damaged(&self, column: &'static str, e: &serde_json::Error) -> StoreError {
        StoreError::Damaged {
            path: self.path.clone(),
            column,
            message: e.to_string(),
        }
    }

    /// Every run in order.
    pub fn runs(&self) -> Result<Vec<StoredRun>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, config_id, rep, run_order, status, error, metrics, facts, trustworthy, fidelity_reasons, samples_raw_len, started_ms, wall_s, executor_wall_s, timing
                 FROM run ORDER BY run_order",
            )
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    (
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, u32>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, Option<String>>(5)?,
                    ),
                    (
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, bool>(8)?,
                        r.get::<_, String>(9)?,
                    ),
                    (
                        r.get::<_, i64>(10)?,
                        r.get::<_, i64>(11)?,
                        r.get::<_, f64>(12)?,
                        r.get::<_, f64>(13)?,
                        r.get::<_, String>(14)?,
                    ),
                ))
            })
            .map_err(self.sql())?;
        let mut out = Vec::new();
        for row in rows {
            let (
                (id, config_id, rep, order, status, error),
                (metrics, facts, trustworthy, reasons),
                (raw_len, started_ms, wall_s, executor_wall_s, timing),
            ) = row.map_err(self.sql())?;
            out.push(StoredRun {
                id,
                config_id: config_id as usize,
                rep,
                order: order as usize,
                status,
                error,
                metrics: serde_json::from_str(&metrics)
                    .map_err(|e| self.damaged("run.metrics", &e))?,
                facts: serde_json::from_str(&facts).map_err(|e| self.damaged("run.facts", &e))?,
                trustworthy,
                fidelity_reasons: serde_json::from_str(&reasons)
                    .map_err(|e| self.damaged("run.fidelity_reasons", &e))?,
                samples_len: raw_len as usize,
                started_ms,
                wall_s,
                executor_wall_s,
                timing: serde_json::from_str(&timing)
                    .map_err(|e| self.damaged("run.timing", &e))?,
            });
        }
        Ok(out)
    }

    /// Every racing verdict in order.
    pub fn race(&self) -> Result<Vec<StoredRace>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT round, completed_runs, config_id, action, best, p_value, p_adjusted, reason FROM race ORDER BY id")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(StoredRace {
                    round: r.get(0)?,
                    completed_runs: r.get::<_, i64>(1)? as usize,
                    config_id: r.get::<_, i64>(2)? as usize,
                    action: r.get(3)?,
                    best: r.get(4)?,
                    p_value: r.get(5)?,
                    p_adjusted: r.get(6)?,
                    reason: r.get(7)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The raw samples of a run as the text of docs/samples.md (unpacked and decompressed,
    /// whichever codec stored them).
    pub fn samples(&self, run_id: i64) -> Result<Vec<u8>, StoreError> {
        let raw = self.samples_stored(run_id)?;
        if crate::codec::is_packed(&raw) {
            crate::codec::unpack(&raw).map_err(|message| StoreError::Samples {
                path: self.path.clone(),
                run: run_id,
                message,
            })
        } else {
            Ok(raw)
        }
    }

    /// The raw samples of a run decompressed but not unpacked: packed ([`crate::codec`], a
    /// few bytes a message) or, for a run stored before packing, the text. A reader that
    /// streams a long table from the packed form ([`crate::codec::parts`]) starts here.
    pub fn samples_stored(&self, run_id: i64) -> Result<Vec<u8>, StoreError> {
        let row: Option<(Option<Vec<u8>>, String, i64)> = self
            .conn
            .query_row(
                "SELECT samples, samples_codec, samples_raw_len FROM run WHERE id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(self.sql())?;
        let bad = |message: String| StoreError::Samples {
            path: self.path.clone(),
            run: run_id,
            message,
        };
        let (Some(blob), codec, raw_len) = row.unwrap_or((None, String::new(), 0)) else {
            return Ok(Vec::new());
        };
        let raw_len =
            usize::try_from(raw_len).map_err(|_| bad(format!("a negative length {raw_len}")))?;
        match codec.as_str() {
            "zlib" => decompress_zlib(&blob, raw_len).map_err(bad),
            "lz4" => decompress_lz4(&blob, raw_len).map_err(bad),
            other => Err(bad(format!("unknown samples codec `{other}`"))),
        }
    }

    /// Records one `sweep` call's time breakdown.
    pub fn record_session(
        &self,
        ended_ms: i64,
        executed: usize,
        o: &Overhead,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO sweep_session (ended_ms, executed, wall_s, workload_s, lab_s, harness_s, encode_s, store_s, stats_s, other_s, overhead_fraction)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![ended_ms, executed as i64, o.wall_s, o.workload_s, o.lab_s, o.harness_s, o.encode_s, o.store_s, o.stats_s, o.other_s, o.fraction],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// Every `sweep` call's time breakdown, oldest first.
    pub fn sessions(&self) -> Result<Vec<Overhead>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT wall_s, workload_s, lab_s, harness_s, encode_s, store_s, stats_s, other_s, overhead_fraction FROM sweep_session ORDER BY id")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Overhead {
                    wall_s: r.get(0)?,
                    workload_s: r.get(1)?,
                    lab_s: r.get(2)?,
                    harness_s: r.get(3)?,
                    encode_s: r.get(4)?,
                    store_s: r.get(5)?,
                    stats_s: r.get(6)?,
                    other_s: r.get(7)?,
                    fraction: r.get(8)?,
                    // The harness's split is not a column; each run's `timing` holds it.
                    ..Overhead::default()
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The study row: name, scenario text, objective metric and goal.
    pub fn study(&self) -> Result<StudyInfo, StoreError> {
        self.conn
            .query_row("SELECT name, scenario, scenario_hash, seed, quick, objective_metric, objective_goal FROM study WHERE id = 1", [], |r| {
                Ok(StudyInfo {
                    name: r.get(0)?,
                    scenario: r.get(1)?,
                    scenario_hash: r.get(2)?,
                    seed: r.get(3)?,
                    quick: r.get(4)?,
                    objective_metric: r.get(5)?,
                    objective_goal: r.get(6)?,
                })
            })
            .map_err(self.sql())
    }
}

/// The `study` row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StudyInfo {
    /// Scenario name.
    pub name: String,
    /// Scenario text.
    pub scenario: String,
    /// Its canonical hash.
    pub scenario_hash: String,
    /// Order seed (text: SQLite integers are signed).
    pub seed: String,
    /// `--quick`.
    pub quick: bool,
    /// Objective metric.
    pub objective_metric: String,
    /// `minimise` or `maximise`.
    pub objective_goal: String,
}

/// The first characters of a stored hash, for a message (by characters: a damaged file's
/// hash need not be ASCII).
fn prefix(hash: &str) -> String {
    hash.chars().take(12).collect()
}

/// Version 1's codec, still read; never more than `raw_len` bytes, the length the row
/// stored, so a damaged blob cannot inflate without bound.
fn decompress_zlib(blob: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(blob)
        .take(raw_len as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() != raw_len {
        return Err(format!(
            "they inflate to {}{} bytes, the row says {raw_len}",
            out.len().min(raw_len),
            if out.len() > raw_len { "+" } else { "" }
        ));
    }
    Ok(out)
}

/// LZ4 with the size in front; the size must be the row's, so a damaged one cannot make the
/// reader allocate gigabytes.
fn decompress_lz4(blob: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let stated = blob
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    if stated != Some(raw_len) {
        return Err(format!(
            "the compressed block says {} bytes, the row says {raw_len}",
            stated.map_or_else(|| "no".to_string(), |n| n.to_string())
        ));
    }
    lz4_flex::decompress_size_prepended(blob).map_err(|e| e.to_string())
}
/// Removes a database file and its WAL and shared-memory files, where they exist.
fn remove_database_files(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(std::path::PathBuf::from(p));
    }
}
