//! `tcplab corpus`: how often the doctor is right, on a labelled corpus of pathologies.
//! `run` builds each case's lab at each of its points, runs the doctor's battery (through the
//! lab, or `--remote` as against a real host) and keeps every battery; `score` diagnoses kept
//! batteries again with this build's doctor. Both print the confusion matrix and exit 1 when a
//! goal is missed. `draw` writes a corpus of cases at random points, the held-out set.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use tcplab_battery::corpus::{CorpusFile, Mode, Selection};
use tcplab_doctor::corpus::{Goals, Outcome, Scorecard};

use crate::output;

/// `tcplab corpus run|score`.
#[derive(Debug, Subcommand)]
pub enum CorpusCommand {
    /// Run every case of a corpus file on labs built for it, keep the batteries, score them.
    Run(RunArgs),
    /// Score the batteries kept by `run` again with this build's doctor (no lab needed).
    Score(ScoreArgs),
    /// Write a corpus of cases drawn at random points (seeded: the same seed, the same cases).
    Draw(DrawArgs),
}

/// Arguments of `tcplab corpus draw`.
#[derive(Debug, Args)]
pub struct DrawArgs {
    /// The draw's seed (default: a fresh one, printed); the same seed gives the same corpus.
    #[arg(long)]
    seed: Option<u64>,
    /// How many cases (at least 1).
    #[arg(long, default_value = "40")]
    count: usize,
    /// Where to write the corpus (default: standard output).
    #[arg(long)]
    out: Option<PathBuf>,
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
    /// Run each case as a user meets a real path: an agent in the lab's server host, the
    /// battery from its client host against the agent's address (`tcplab doctor --to`), and
    /// nothing of the lab given to the doctor (no emulator account, no configured path, no lab
    /// hosts).
    #[arg(long)]
    remote: bool,
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
            Self::Draw(a) => output::finish(false, a.run()),
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
        let mode = if self.remote {
            Mode::Remote
        } else {
            Mode::Emulated
        };
        let outcomes = tcplab_battery::corpus::run(&corpus, &selection, mode, &self.out, &say)?;
        if outcomes.is_empty() {
            anyhow::bail!(
                "--only {:?}: no case of {} matches",
                self.only,
                self.file.display()
            );
        }
        let name = if self.remote {
            "scorecard-remote"
        } else {
            "scorecard"
        };
        finish(outcomes, &self.out, name, self.json)
    }
}

impl DrawArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        if self.count == 0 {
            anyhow::bail!("--count 0: draw at least one case, e.g. --count 40");
        }
        let seed = self.seed.unwrap_or_else(fresh_seed);
        let corpus = tcplab_battery::corpus::draw::draw(seed, self.count);
        let text = format!(
            "# Drawn by `tcplab corpus draw --seed {seed} --count {}`: {} cases at random points \
             (crates/battery/src/corpus/draw.rs).\n{}",
            self.count,
            corpus.cases.len(),
            corpus.to_toml()?
        );
        match &self.out {
            Some(path) => {
                std::fs::write(path, text).map_err(|e| {
                    anyhow::anyhow!("--out {}: cannot write the corpus: {e}", path.display())
                })?;
                eprintln!(
                    "tcplab corpus: seed {seed}: {} cases written to {} (replay with --seed {seed})",
                    corpus.cases.len(),
                    path.display()
                );
            }
            None => {
                eprintln!("tcplab corpus: seed {seed} (replay with --seed {seed})");
                out!("{text}");
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// A seed no earlier draw is likely to have used: the clock's nanoseconds and the process id.
fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

impl ScoreArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let records = tcplab_battery::corpus::load_records(&self.dir)?;
        let mut outcomes = Vec::new();
        let mut details = String::new();
        let mut doubtful = 0usize;
        let wanted = |case: &str| {
            self.only.is_empty() || self.only.iter().any(|o| case.contains(o.as_str()))
        };
        for (path, record) in records.iter().filter(|(_, r)| wanted(&r.label.case)) {
            if record.mode == Mode::Remote && record.about_the_emulator() {
                continue;
            }
            if record.truth_doubtful() {
                doubtful += 1;
            }
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
            if doubtful > 0 {
                out!(
                    "{doubtful} remote run(s) crossed an emulator that fell behind: their path was not quite the one labelled"
                );
            }
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
