//! The errors of a study, one enum per layer: the scenario file, the store, the sweep.

use std::fmt;
use std::path::PathBuf;

/// A quoted message (SQLite's may hold its SQL statement over several lines, an integrity
/// check one line a problem) on one line: whitespace runs become one space, and it is cut
/// after 300 characters.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    tcplab_emu::error::one_line(&flat)
}

/// One problem in a scenario file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The field in dotted form (`workload[0].size`, `factor[1].values`), empty for the document.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.field, self.message)
        }
    }
}

/// A scenario file that cannot be used: every problem found, each with its line and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The problems, in file order where known.
    pub diagnostics: Vec<Diagnostic>,
}

impl ScenarioError {
    /// The first problem (there is always at least one).
    pub fn first(&self) -> Option<&Diagnostic> {
        self.diagnostics.first()
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Errors of the result store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A new study was asked for but the file exists.
    #[error(
        "{path}: a study file already exists here; pass --resume to continue it or choose another --db path"
    )]
    Exists {
        /// The database path.
        path: PathBuf,
    },
    /// `--resume` was asked for but there is no file.
    #[error(
        "{path}: no study to resume (the file does not exist); run without --resume to start one"
    )]
    Missing {
        /// The database path.
        path: PathBuf,
    },
    /// The new study, written beside its path, could not be put in place.
    #[error(
        "{path}: cannot put the new study in place ({source}); check that the directory is writable, or choose another --db path"
    )]
    Create {
        /// The database path.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a SQLite database, or one that tcplab did not write.
    #[error(
        "{path}: not a tcplab study database ({}); point --db at a study file or a new path",
        one_line(.reason)
    )]
    Foreign {
        /// The database path.
        path: PathBuf,
        /// What gave it away.
        reason: String,
    },
    /// The scenario (or seed, or --quick) differs from the one the study was started with.
    #[error(
        "{path}: refusing to resume: {what} changed since the study began ({detail}); restore it, or start a new study with another --db path"
    )]
    ScenarioChanged {
        /// The database path.
        path: PathBuf,
        /// `the scenario`, `the seed` or `--quick`.
        what: &'static str,
        /// Old and new values.
        detail: String,
    },
    /// SQLite failed (disk full, I/O error, a damaged page).
    #[error("{path}: {}", sqlite_problem(source))]
    Sqlite {
        /// The database path.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A stored JSON column did not parse (the file was edited or damaged).
    #[error(
        "{path}: damaged {column} in the store: {}; restore a copy of the study file or \
         start a new study with another --db path",
        one_line(.message)
    )]
    Damaged {
        /// The database path.
        path: PathBuf,
        /// The table.column.
        column: &'static str,
        /// The parse error.
        message: String,
    },
    /// Compressing or decompressing samples failed.
    #[error(
        "{path}: the samples of run {run} are damaged ({}); restore a copy of the study \
         file, or run that configuration again",
        one_line(.message)
    )]
    Samples {
        /// The database path.
        path: PathBuf,
        /// The run id.
        run: i64,
        /// The codec error.
        message: String,
    },
}

/// Errors that stop a sweep (a failing run does not: it is recorded and the study goes on).
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// The scenario is invalid.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// The store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The executor reported a fault that no other run can avoid either (no privileges, ...).
    #[error("the study stopped: {0}")]
    Fatal(String),
    /// Statistics failed on the stored samples.
    #[error("statistics: {0}")]
    Stats(#[from] tcplab_stats::StatsError),
    /// Writing an export failed.
    #[error("export: {0}")]
    Io(#[from] std::io::Error),
}

/// What a SQLite failure means for the user's study and what to do, in one line. SQLite
/// commits each run in its own transaction, so whatever failed, the runs committed before it
/// are intact; the fix says how to go on from them.
pub fn sqlite_problem(e: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode as C;
    let code = match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    };
    let what = match code {
        Some(C::DiskFull) => {
            "the file system is full: free space on it (or give --db a path on \
                              another), then run again; a sweep continues with --resume, and \
                              the runs stored before are intact"
        }
        Some(C::ReadOnly | C::CannotOpen | C::PermissionDenied) => {
            "cannot write the database there (read-only file system, no such directory or no \
             permission): give --db a path on a writable file system; a sweep continues with \
             --resume once it is writable, and the runs stored before are intact"
        }
        Some(C::SystemIoFailure) => {
            "the disk failed to read or write it: check the file system; \
                                     the runs committed before the failure are intact"
        }
        Some(C::DatabaseCorrupt | C::NotADatabase) => {
            "the file is damaged or not a study \
                                                       database: give the .db file that \
                                                       `tcplab sweep` or `tcplab run` wrote"
        }
        Some(C::DatabaseBusy | C::DatabaseLocked) => {
            "another process holds the database: \
                                                      wait for it or stop it"
        }
        _ => "",
    };
    if what.is_empty() {
        // rusqlite's own text, on one line, for what is not named above.
        format!(
            "database error: {}; check the disk, and if the file is damaged restore a copy or \
             start a new study with another --db path",
            one_line(&e.to_string())
        )
    } else {
        // The error's source (SQLite's own words) follows in the chain.
        what.to_owned()
    }
}
