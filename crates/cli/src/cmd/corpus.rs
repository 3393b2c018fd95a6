//! `tcplab corpus`: how often the doctor is right, on a labelled corpus of pathologies.
//! `run` builds each case's lab at each of its points, runs the doctor's battery and keeps
//! every battery; `score` diagnoses kept batteries again with this build's doctor. Both print
//! the confusion matrix and exit 1 when a goal is missed.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use tcplab_doctor::corpus::{Goals, Outcome, Scorecard};
use tcplab_tune::corpus::{CorpusFile, Selection};

use crate::output;

/// `tcplab corpus run|score`.
#[derive(Debug, Subcommand)]
pub enum CorpusCommand {
    /// Run every case of a corpus file on labs built for it, keep the batteries, score them.
    Run(RunArgs),
    /// Score the batteries kept by `run` again with this build's doctor (no lab needed).
    Score(ScoreArgs),
}

/// Arguments of `tcplab corpus run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The corpus file (e.g. benches/doctor/corpus.toml).
    file: PathBuf,
    /// Where each run's battery is kept (one JSON file per run) with the scorecard.
    #[arg(long, default_value = "tcplab-corpus")]
    out: PathBuf,
    /// Only cases whose name contains this; repeatable.
    #[arg(long, value_name = "TEXT")]
    only: Vec<String>,
    /// Print the scorecard as one JSON document.
    #[arg(long)]
    json: bool,
}

/// Arguments of `tcplab corpus score`.
#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// A directory written by `tcplab corpus run --out DIR`.
    dir: PathBuf,
    /// Print each run's findings in full (evidence, explanation, fixes) under the tables.
    #[arg(long)]
    verbose: bool,
    /// Only runs of cases whose name contains this; repeatable.
    #[arg(long, value_name = "TEXT")]
    only: Vec<String>,
    /// Score as if each battery had run against a real host (`doctor --to`): without the
    /// emulator's verdict and account, the configured rate, RTT and loss, or the server's
    /// kernel counters. Cases about the emulator itself are left out.
    #[arg(long)]
    blind: bool,
    /// Print the scorecard as one JSON document.
    #[arg(long)]
    json: bool,
}

impl CorpusCommand {
    /// Runs the subcommand.
    pub fn run(self) -> ExitCode {
        match self {
            Self::Run(a) => {
                let json = a.json;
                output::finish(json, a.run())
            }
            Self::Score(a) => {
                let json = a.json;
                output::finish(json, a.run())
            }
        }
    }
}

impl RunArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        tcplab_lab::require_root("tcplab corpus run (it builds emulated networks)")?;
        let corpus = CorpusFile::load(&self.file)?;
        tcplab_lab::teardown_on_signals()?;
        let selection = Selection {
            only: self.only.clone(),
        };
        let quiet = self.json;
        let say = |m: &str| {
            if !quiet {
                eprintln!("tcplab corpus: {m}");
            }
        };
        let outcomes = tcplab_tune::corpus::run(&corpus, &selection, &self.out, &say)?;
        if outcomes.is_empty() {
            anyhow::bail!(
                "--only {:?}: no case of {} matches",
                self.only,
                self.file.display()
            );
        }
        finish(outcomes, &self.out, "scorecard", self.json)
    }
}

impl ScoreArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let records = tcplab_tune::corpus::load_records(&self.dir)?;
        let mut outcomes = Vec::new();
        let mut details = String::new();
        let wanted = |case: &str| {
            self.only.is_empty() || self.only.iter().any(|o| case.contains(o.as_str()))
        };
        for (path, record) in records.iter().filter(|(_, r)| wanted(&r.label.case)) {
            let scored = if self.blind {
                record.outcome_blind()
            } else {
                Some(record.outcome())
            };
            let Some((outcome, findings)) = scored else {
                continue;
            };
            if self.verbose {
                details.push_str(&format!(
                    "\n{} ({}, {}):\n",
                    path.file_name().unwrap_or_default().to_string_lossy(),
                    record.label.case,
                    record.label.point
                ));
                for f in &findings {
                    details.push_str(&f.to_string());
                }
            }
            outcomes.push(outcome);
        }
        let name = if self.blind {
            "scorecard-blind"
        } else {
            "scorecard"
        };
        let code = finish(outcomes, &self.dir, name, self.json)?;
        if !self.json {
            out!("{details}");
        }
        Ok(code)
    }
}

/// Scores, writes `NAME.json` and `NAME.txt` into `dir`, prints, and exits 1 when a goal is
/// missed.
fn finish(
    outcomes: Vec<Outcome>,
    dir: &std::path::Path,
    name: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let card = Scorecard::new(outcomes);
    let missed = card.missed(&Goals::default());
    let mut text = card.to_string();
    if missed.is_empty() {
        text.push_str("every goal met\n");
    } else {
        for m in &missed {
            text.push_str(&format!("goal missed: {m}\n"));
        }
    }
    let doc = serde_json::json!({ "scorecard": card, "missed": missed });
    std::fs::write(dir.join(format!("{name}.txt")), &text)?;
    std::fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_string_pretty(&doc)?,
    )?;
    if json {
        output::print_json(&doc);
    } else {
        out!("{text}");
    }
    Ok(if missed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
