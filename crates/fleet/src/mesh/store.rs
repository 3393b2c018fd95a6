//! The mesh's database: one SQLite file, one row per ordered pair written when its test ends,
//! so a mesh killed at any point keeps every finished pair and `--resume` runs only the rest.
//! What the mesh was (hosts, workload, test) is stored first, and a resume that asks for a
//! different mesh is refused with what differs.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::outcome::Figures;

/// What makes two meshes the same mesh: a resume must match it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeshIdentity {
    /// Host names and addresses, in the inventory's order.
    pub hosts: Vec<(String, String)>,
    /// The workload's name.
    pub workload: String,
    /// The test's parameters (JSON).
    pub test: String,
}

/// One pair's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRow {
    /// The client's host.
    pub src: String,
    /// The server's host.
    pub dst: String,
    /// The tournament round it ran in.
    pub round: usize,
    /// The figures; None when the test failed.
    pub figures: Option<Figures>,
    /// Why it failed.
    pub failure: Option<String>,
    /// Start, ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// The harness's wall time for it (connect to the agent, the test, the answer), s.
    pub wall_s: f64,
    /// The lab emulator's verdict over the step the test ran in, when the hosts are a lab's.
    #[serde(default)]
    pub emulator: Option<EmulatorVerdict>,
}

/// Whether the lab's emulator kept its schedule while a step's tests crossed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulatorVerdict {
    /// False when it fell behind what the workload needs.
    pub trustworthy: bool,
    /// One sentence per problem.
    pub reasons: Vec<String>,
}

/// Errors of the mesh database; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("--db {path}: {source}")]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The file exists and --resume was not given.
    #[error(
        "--db {0}: the file exists; pass --resume to finish that mesh, or another --db (or remove it)"
    )]
    Exists(PathBuf),
    /// --resume with a file that holds another mesh.
    #[error(
        "--db {path}: it holds another mesh ({what} differ); resume with the same --hosts and workload flags, or use another --db"
    )]
    Different {
        /// The file.
        path: PathBuf,
        /// What differs.
        what: String,
    },
    /// --resume with no file.
    #[error("--db {0}: --resume needs the database of the mesh to finish, and there is none")]
    Missing(PathBuf),
    /// A value the database holds does not parse: the file was changed or damaged.
    #[error("--db {path}: {what} does not parse ({why}); {fix}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What was read, e.g. "the stored mesh (hosts, workload, test)".
        what: String,
        /// The parser's words, on one line.
        why: String,
        /// What to do.
        fix: &'static str,
    },
}

/// The parser's words about a stored value, on one line.
fn why(e: &serde_json::Error) -> String {
    tcplab_emu::error::one_line(&e.to_string())
}

/// An open mesh database.
#[derive(Debug)]
pub struct MeshStore {
    conn: Connection,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS mesh_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS mesh_pair (
  src TEXT NOT NULL,
  dst TEXT NOT NULL,
  round INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
  reason TEXT,
  started_unix_ms INTEGER NOT NULL,
  wall_s REAL NOT NULL,
  figures TEXT,
  result TEXT,
  emulator TEXT,
  PRIMARY KEY (src, dst)
);
";

impl MeshStore {
    /// Creates a new database for `identity` (refused if `path` exists), or with `resume` opens
    /// the existing one and checks it holds the same mesh.
    pub fn open(path: &Path, identity: &MeshIdentity, resume: bool) -> Result<Self, StoreError> {
        match (path.exists(), resume) {
            (true, false) => return Err(StoreError::Exists(path.to_path_buf())),
            (false, true) => return Err(StoreError::Missing(path.to_path_buf())),
            _ => {}
        }
        let sql = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(sql)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(sql)?;
        conn.execute_batch(SCHEMA).map_err(sql)?;
        let store = Self {
            conn,
            path: path.to_path_buf(),
        };
        let stored = store.identity()?;
        match stored {
            None => store.set_identity(identity)?,
            Some(old) => {
                let mut what = Vec::new();
                if old.hosts != identity.hosts {
                    what.push("hosts");
                }
                if old.workload != identity.workload {
                    what.push("workload");
                }
                if old.test != identity.test {
                    what.push("workload flags");
                }
                if !what.is_empty() {
                    return Err(StoreError::Different {
                        path: path.to_path_buf(),
                        what: what.join(", "),
                    });
                }
            }
        }
        Ok(store)
    }

    /// Opens an existing database to read (the report of a finished or interrupted mesh).
    pub fn read(path: &Path) -> Result<Self, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
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

    /// The mesh this database holds, if any.
    pub fn identity(&self) -> Result<Option<MeshIdentity>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM mesh_meta WHERE key = 'identity'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(text) = text else { return Ok(None) };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::Damaged {
                path: self.path.clone(),
                what: "the stored mesh (hosts, workload, test)".into(),
                why: why(&e),
                fix: "use another --db for this mesh, or delete the file to start it again",
            })
    }

    fn set_identity(&self, identity: &MeshIdentity) -> Result<(), StoreError> {
        let text = serde_json::to_string(identity).unwrap_or_default();
        self.conn
            .execute(
                "INSERT OR REPLACE INTO mesh_meta (key, value) VALUES ('identity', ?1)",
                params![text],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records a pair's row (replacing an earlier failure of the same pair), with the full
    /// result when there is one.
    pub fn record(
        &self,
        row: &PairRow,
        result: Option<&serde_json::Value>,
    ) -> Result<(), StoreError> {
        let figures = row
            .figures
            .as_ref()
            .and_then(|f| serde_json::to_string(f).ok());
        let result = result.map(|r| r.to_string());
        self.conn
            .execute(
                "INSERT OR REPLACE INTO mesh_pair
                 (src, dst, round, status, reason, started_unix_ms, wall_s, figures, result)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    row.src,
                    row.dst,
                    row.round as i64,
                    if row.failure.is_some() {
                        "failed"
                    } else {
                        "ok"
                    },
                    row.failure,
                    row.started_unix_ms as i64,
                    row.wall_s,
                    figures,
                    result,
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records the emulator's verdict over a step on the rows of its pairs.
    pub fn set_emulator(
        &self,
        pairs: &[(String, String)],
        verdict: &EmulatorVerdict,
    ) -> Result<(), StoreError> {
        let text = serde_json::to_string(verdict).unwrap_or_default();
        for (src, dst) in pairs {
            self.conn
                .execute(
                    "UPDATE mesh_pair SET emulator = ?3 WHERE src = ?1 AND dst = ?2",
                    params![src, dst, text],
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Every pair's row (without the full results), in (src, dst) order. A row whose stored
    /// figures do not parse reads as a failed pair that says so (a report shows it, `--resume`
    /// runs it again); an emulator verdict that does not parse reads as one that vouches for
    /// nothing, with the reason.
    pub fn rows(&self) -> Result<Vec<PairRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT src, dst, round, reason, started_unix_ms, wall_s, figures, status, emulator
                 FROM mesh_pair ORDER BY src, dst",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                let figures: Option<String> = r.get(6)?;
                let status: String = r.get(7)?;
                let reason: Option<String> = r.get(3)?;
                let emulator: Option<String> = r.get(8)?;
                let (src, dst): (String, String) = (r.get(0)?, r.get(1)?);
                let mut failure = if status == "failed" {
                    Some(reason.unwrap_or_else(|| "failed".into()))
                } else {
                    None
                };
                let figures = match figures.map(|f| serde_json::from_str::<Figures>(&f)) {
                    Some(Ok(f)) => Some(f),
                    Some(Err(e)) => {
                        failure.get_or_insert(format!(
                            "its stored figures in --db {} do not parse ({}); run the mesh \
                             again with --resume to test the pair again",
                            self.path.display(),
                            why(&e)
                        ));
                        None
                    }
                    None => None,
                };
                let emulator = match emulator.map(|v| serde_json::from_str(&v)) {
                    Some(Ok(v)) => Some(v),
                    Some(Err(e)) => Some(EmulatorVerdict {
                        trustworthy: false,
                        reasons: vec![format!(
                            "its stored verdict in --db {} does not parse ({}); run the pair \
                             again to know",
                            self.path.display(),
                            why(&e)
                        )],
                    }),
                    None => None,
                };
                Ok(PairRow {
                    src,
                    dst,
                    round: r.get::<_, i64>(2)? as usize,
                    failure,
                    started_unix_ms: r.get::<_, i64>(4)? as u64,
                    wall_s: r.get(5)?,
                    figures,
                    emulator,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// The full result of one pair, if it ran.
    pub fn result(&self, src: &str, dst: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let text: Option<Option<String>> = self
            .conn
            .query_row(
                "SELECT result FROM mesh_pair WHERE src = ?1 AND dst = ?2",
                params![src, dst],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(text) = text.flatten() else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::Damaged {
                path: self.path.clone(),
                what: format!(
                    "the stored result of {} to {}",
                    tcplab_emu::error::shown(src),
                    tcplab_emu::error::shown(dst)
                ),
                why: why(&e),
                fix: "run the pair again with another --db to have its result",
            })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> MeshIdentity {
        MeshIdentity {
            hosts: vec![
                ("a".into(), "198.18.0.1".into()),
                ("b".into(), "198.18.0.2".into()),
            ],
            workload: "msgs".into(),
            test: "{}".into(),
        }
    }

    fn row(src: &str, dst: &str, failure: Option<&str>) -> PairRow {
        PairRow {
            src: src.into(),
            dst: dst.into(),
            round: 0,
            figures: None,
            failure: failure.map(String::from),
            started_unix_ms: 1,
            wall_s: 0.1,
            emulator: None,
        }
    }

    #[test]
    fn rows_survive_a_reopen_and_a_success_replaces_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        {
            let s = MeshStore::open(&path, &identity(), false).unwrap();
            s.record(&row("a", "b", Some("agent b: connection refused")), None)
                .unwrap();
            s.record(&row("b", "a", None), Some(&serde_json::json!({"x": 1})))
                .unwrap();
        }
        let s = MeshStore::open(&path, &identity(), true).unwrap();
        let rows = s.rows().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].failure.as_deref(),
            Some("agent b: connection refused")
        );
        s.record(&row("a", "b", None), None).unwrap();
        assert!(s.rows().unwrap().iter().all(|r| r.failure.is_none()));
        assert_eq!(
            s.result("b", "a").unwrap(),
            Some(serde_json::json!({"x": 1}))
        );
    }

    #[test]
    fn an_existing_file_needs_resume_and_resume_needs_the_same_mesh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        assert!(matches!(
            MeshStore::open(&path, &identity(), true),
            Err(StoreError::Missing(_))
        ));
        drop(MeshStore::open(&path, &identity(), false).unwrap());
        let e = MeshStore::open(&path, &identity(), false).unwrap_err();
        assert!(e.to_string().contains("--resume"), "{e}");
        let mut other = identity();
        other.workload = "rr".into();
        let e = MeshStore::open(&path, &other, true).unwrap_err();
        assert!(e.to_string().contains("workload differ"), "{e}");
    }
}
