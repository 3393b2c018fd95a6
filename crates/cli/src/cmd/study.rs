//! `tcplab sweep`, `tcplab run` and `tcplab report`: studies from scenario files, stored in one
//! SQLite file per study, and the reports made from that file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::Args;
use tcplab_study::executor::LabExecutor;
use tcplab_study::plan::{Plan, PlanOptions};
use tcplab_study::remote::RemoteExecutor;
use tcplab_study::runner::{Executor, SweepOptions, SweepReport, sweep};
use tcplab_study::scenario::ScenarioFile;
use tcplab_study::store::Store;

use crate::output;

/// Arguments of `tcplab sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The scenario file (docs/scenarios.md).
    file: PathBuf,
    /// The study's database (default: NAME.db in the current directory).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Continue the study in --db: runs already stored are skipped; a changed scenario is refused.
    #[arg(long)]
    resume: bool,
    /// Stop running configurations that are significantly worse than the best (see [race]).
    #[arg(long)]
    race: bool,
    /// Every configuration at a reduced size (the scenario's [quick] section): a smoke test.
    #[arg(long)]
    quick: bool,
    /// List the runs in order and estimate the time; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Seed of the run order (default: the scenario's `seed`).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the HTML report here (default: the database's path with .html).
    #[arg(long)]
    html: Option<PathBuf>,
    /// Run every configuration against a host running `tcplab serve` (ADDRESS[:PORT]), or with
    /// --hosts the host of that name, instead of labs: only socket options, workload
    /// parameters and (with --allow-host-sysctl) the server host's sysctls may vary.
    #[arg(long, value_name = "ADDRESS|NAME")]
    to: Option<String>,
    #[command(flatten)]
    fleet: FleetFlags,
}

/// The flags of a study against a host of a hosts file.
#[derive(Debug, Args)]
pub struct FleetFlags {
    /// A hosts file (docs/fleet.md): --to names one of its hosts, whose agent is launched as
    /// the file says (ssh, srun, or already running) and stopped at the end.
    #[arg(long, value_name = "FILE")]
    hosts: Option<PathBuf>,
    /// An option for OpenSSH's client when --hosts launches over ssh (repeatable).
    #[arg(long = "ssh-option", value_name = "OPT", allow_hyphen_values = true)]
    ssh_options: Vec<String>,
    /// Let configurations change the server host's sysctls ([lab.sysctl.server], [lab.sysctl.all]):
    /// its agent journals the old values and restores them after each run, and on its own
    /// when this process vanishes (a lease).
    #[arg(long)]
    allow_host_sysctl: bool,
}

/// Arguments of `tcplab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The scenario file.
    file: PathBuf,
    /// The configuration to run (its id from `tcplab sweep FILE --dry-run`; default: the baseline).
    #[arg(long)]
    config: Option<usize>,
    /// The database to write (default: NAME-run.db, replaced).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Reduced size (the scenario's [quick] section).
    #[arg(long)]
    quick: bool,
    /// Run against a host running `tcplab serve` instead of a lab (see `sweep --to`).
    #[arg(long, value_name = "ADDRESS|NAME")]
    to: Option<String>,
    #[command(flatten)]
    fleet: FleetFlags,
}

/// Arguments of `tcplab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A study database written by `tcplab sweep` or `tcplab run`; two to eight put the studies
    /// side by side (before/after a change of kernel, host or code), the first the reference.
    #[arg(required = true, num_args = 1..=8, value_name = "DB")]
    db: Vec<PathBuf>,
    /// Write the self-contained HTML report (tables, plots, facts, scenario) here; with several
    /// databases, the comparison page.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Write every run as CSV here (one database only: the runs are per study).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Print the whole study as one JSON document instead of the table; with several
    /// databases, the comparison (docs/results.md).
    #[arg(long)]
    json: bool,
    /// Print the table as Markdown.
    #[arg(long)]
    markdown: bool,
}

fn load_plan(file: &Path, seed: Option<u64>, quick: bool) -> anyhow::Result<Plan> {
    let scenario = ScenarioFile::load(file)?;
    Ok(Plan::new(&scenario, PlanOptions { seed, quick })?)
}

/// The remote agent of `--to` (and `--hosts`), after checking that no configuration needs a
/// lab; its credentials become the process's.
fn remote_target(
    to: Option<&str>,
    fleet: &FleetFlags,
    plan: &Plan,
) -> anyhow::Result<Option<super::remote::Remote>> {
    if to.is_none() && fleet.hosts.is_none() {
        if fleet.allow_host_sysctl {
            anyhow::bail!(
                "--allow-host-sysctl: only with --to or --hosts (a lab's sysctls need no permission)"
            );
        }
        return Ok(None);
    }
    if fleet.allow_host_sysctl && fleet.hosts.is_none() {
        anyhow::bail!(
            "--allow-host-sysctl: needs --hosts FILE (the agent must be started with --allow-sysctl; with --to ADDRESS alone, start it so and use --hosts with that host as already running)"
        );
    }
    for c in &plan.configurations {
        if let Some(why) = tcplab_study::remote::needs_lab(&c.settings.lab, fleet.allow_host_sysctl)
            .or_else(|| tcplab_study::remote::needs_lab_for(&c.settings.workloads))
        {
            anyhow::bail!("--to: configuration {} ({}): {why}", c.id, c.label);
        }
    }
    super::remote::resolve(&super::remote::HostsChoice {
        hosts: fleet.hosts.as_deref(),
        to,
        ssh_options: &fleet.ssh_options,
        allow_sysctl: fleet.allow_host_sysctl,
    })
}

/// Runs a plan into a store in labs, or against `remote`; Ctrl-C/SIGTERM stop after the run in
/// flight.
fn execute(
    plan: &Plan,
    store: &Store,
    race: bool,
    remote: Option<&super::remote::Remote>,
    host_sysctl: bool,
) -> anyhow::Result<SweepReport> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let mut executor: Box<dyn Executor> = match remote {
        Some(r) if host_sysctl => {
            Box::new(RemoteExecutor::new(r.addr).with_host_sysctls(r.auth.clone()))
        }
        Some(r) => Box::new(RemoteExecutor::new(r.addr)),
        None => {
            tcplab_lab::require_root("running a study in labs")?;
            Box::new(LabExecutor::new(
                tcplab_lab::StateDir::from_env(),
                &format!("st{}", std::process::id() % 100_000),
            ))
        }
    };
    let report = sweep(
        plan,
        store,
        executor.as_mut(),
        SweepOptions {
            race,
            progress: true,
            stop: Some(&stop),
            max_runs: None,
        },
    )?;
    Ok(report)
}

/// Prints the table, writes the HTML report, and says where it is.
fn summarise(store: &Store, html: &Path, report: &SweepReport) -> anyhow::Result<()> {
    let input = tcplab_study::to_report::report_input(store)?;
    let table = tcplab_report::Table::from_input(&input)?;
    out!("{}", table.to_text_with(&output::stdout_layout()));
    let page = tcplab_report::html::render_with_table(&input, &table)?;
    std::fs::write(html, page).with_context(|| format!("writing {}", html.display()))?;
    let width = output::stdout_layout().width;
    let counts = format!(
        "{} runs executed ({} already stored, {} skipped, {} failed): {}",
        report.executed,
        report.already_done,
        report.skipped,
        report.failed,
        report.overhead().line()
    );
    // Racing's and the failures' reasons are under the table, by label; `sweep --dry-run`
    // lists the configurations' ids for `tcplab run --config ID`.
    outln!("{}", output::wrapped(&counts, width));
    outln!(
        "database: {}\nreport:   {}",
        store.path().display(),
        html.display()
    );
    if report.stopped {
        outln!("stopped early: continue with --resume");
    }
    Ok(())
}

impl SweepArgs {
    /// Runs the study.
    pub fn run(self) -> ExitCode {
        output::finish(false, self.run_inner())
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        let plan = load_plan(&self.file, self.seed, self.quick)?;
        if self.dry_run {
            for c in &plan.configurations {
                let remote = self.to.is_some() || self.fleet.hosts.is_some();
                if let Some(why) = remote
                    .then(|| {
                        tcplab_study::remote::needs_lab(
                            &c.settings.lab,
                            self.fleet.allow_host_sysctl,
                        )
                        .or_else(|| tcplab_study::remote::needs_lab_for(&c.settings.workloads))
                    })
                    .flatten()
                {
                    anyhow::bail!("--to: configuration {} ({}): {why}", c.id, c.label);
                }
            }
            out!("{}", plan.dry_run());
            return Ok(ExitCode::SUCCESS);
        }
        let db = self
            .db
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.db", plan.name)));
        if !self.resume && db.exists() {
            anyhow::bail!(
                "--db {}: the file exists; pass --resume to continue that study, or another --db",
                db.display()
            );
        }
        // SQLite writes its journal beside the database, so even a resumed study needs a
        // writable directory.
        tcplab::writable::file("--db", &db)?;
        let html = self.html.unwrap_or_else(|| db.with_extension("html"));
        tcplab::writable::file("--html", &html)?;
        let remote = remote_target(self.to.as_deref(), &self.fleet, &plan)?;
        let store = if self.resume {
            Store::resume(&db, &plan)?
        } else {
            if db.exists() {
                anyhow::bail!(
                    "--db {}: the file exists; pass --resume to continue that study, or another --db",
                    db.display()
                );
            }
            Store::create(&db, &plan)?
        };
        let report = execute(
            &plan,
            &store,
            self.race,
            remote.as_ref(),
            self.fleet.allow_host_sysctl,
        )?;
        summarise(&store, &html, &report)?;
        Ok(ExitCode::SUCCESS)
    }
}

impl RunArgs {
    /// Runs one configuration.
    pub fn run(self) -> ExitCode {
        output::finish(false, self.run_inner())
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        let plan = load_plan(&self.file, None, self.quick)?;
        let id = match self.config {
            Some(id) => id,
            None => plan.baseline().map(|c| c.id).unwrap_or(0),
        };
        let one = plan.only(id).ok_or_else(|| {
            anyhow::anyhow!(
                "--config {id}: no such configuration; `tcplab sweep FILE --dry-run` lists them"
            )
        })?;
        let remote = remote_target(self.to.as_deref(), &self.fleet, &one)?;
        let db = self
            .db
            .unwrap_or_else(|| PathBuf::from(format!("{}-run.db", plan.name)));
        if db.exists() {
            std::fs::remove_file(&db).with_context(|| format!("replacing {}", db.display()))?;
        }
        let store = Store::create(&db, &one)?;
        let report = execute(
            &one,
            &store,
            false,
            remote.as_ref(),
            self.fleet.allow_host_sysctl,
        )?;
        summarise(&store, &db.with_extension("html"), &report)?;
        Ok(ExitCode::SUCCESS)
    }
}

impl ReportArgs {
    /// Prints or writes the report.
    pub fn run(self) -> ExitCode {
        let json = self.json;
        output::finish(json, self.run_inner())
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        let [db] = self.db.as_slice() else {
            return self.compare();
        };
        if !db.exists() {
            anyhow::bail!("{}: no such study database", db.display());
        }
        let store = Store::open(db)?;
        if self.json {
            tcplab_study::export::write_json(&store, &mut std::io::stdout().lock())?;
            return Ok(ExitCode::SUCCESS);
        }
        let input = tcplab_study::to_report::report_input(&store)?;
        let table = tcplab_report::Table::from_input(&input)?;
        if self.markdown {
            out!("{}", table.to_markdown());
        } else {
            out!("{}", table.to_text_with(&output::stdout_layout()));
        }
        if let Some(path) = &self.html {
            let page = tcplab_report::html::render_with_table(&input, &table)?;
            std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
            outln!("report: {}", path.display());
        }
        if let Some(path) = &self.csv {
            let mut f = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            tcplab_study::export::write_runs_csv(&store, &mut f)?;
            outln!("runs: {}", path.display());
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `tcplab report A.db B.db ...`: the studies side by side, each named by its file stem.
    fn compare(&self) -> anyhow::Result<ExitCode> {
        if self.csv.is_some() {
            anyhow::bail!(
                "--csv: the runs are exported one study at a time (`tcplab report A.db --csv a.csv`); with several databases use --json for the comparison"
            );
        }
        let names = study_names(&self.db)?;
        let mut studies = Vec::with_capacity(self.db.len());
        for (path, name) in self.db.iter().zip(names) {
            studies.push((name, study_input(path)?));
        }
        // Checked here too, so the error names the files rather than their stems.
        let files: Vec<String> = self.db.iter().map(|p| p.display().to_string()).collect();
        let named: Vec<(&str, &tcplab_report::ObjectiveSpec)> = files
            .iter()
            .zip(&studies)
            .map(|(f, (_, input))| (f.as_str(), &input.objective))
            .collect();
        tcplab_report::compare::check_objectives(&named)?;
        let comparison = tcplab_report::compare::compare(&studies)?;
        if self.json {
            outln!("{}", comparison.to_json()?);
            return Ok(ExitCode::SUCCESS);
        }
        if self.markdown {
            out!("{}", comparison.to_markdown());
        } else {
            out!("{}", comparison.to_text_with(&output::stdout_layout()));
        }
        if let Some(path) = &self.html {
            std::fs::write(path, comparison.to_html()?)
                .with_context(|| format!("writing {}", path.display()))?;
            outln!("report: {}", path.display());
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// One study's report input, with the errors of `tcplab report` (a missing file, a file that
/// is not a study) saying what to give instead.
fn study_input(path: &Path) -> anyhow::Result<tcplab_report::ReportInput> {
    if !path.exists() {
        anyhow::bail!(
            "{}: no such study database; give the .db file that `tcplab sweep` or `tcplab run` wrote",
            path.display()
        );
    }
    let store = Store::open(path).map_err(|e| match e {
        tcplab_study::StoreError::Foreign { path, reason } => anyhow::anyhow!(
            "{}: not a tcplab study database ({reason}); give the .db file that `tcplab sweep` or `tcplab run` wrote",
            path.display()
        ),
        other => other.into(),
    })?;
    Ok(tcplab_study::to_report::report_input(&store)?)
}

/// Each study's name in the comparison: its file stem, or `dir/stem` when stems repeat
/// (`before/study.db`, `after/study.db`); the same file twice is refused.
fn study_names(paths: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    let unique = |names: &[String]| {
        names
            .iter()
            .enumerate()
            .all(|(i, n)| !names[..i].contains(n))
    };
    let stem = |p: &Path| {
        p.file_stem().map_or_else(
            || p.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        )
    };
    let stems: Vec<String> = paths.iter().map(|p| stem(p)).collect();
    if unique(&stems) {
        return Ok(stems);
    }
    let with_dir: Vec<String> = paths
        .iter()
        .map(|p| match p.parent().and_then(Path::file_name) {
            Some(dir) => format!("{}/{}", dir.to_string_lossy(), stem(p)),
            None => stem(p),
        })
        .collect();
    if unique(&with_dir) {
        return Ok(with_dir);
    }
    let full: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    match full
        .iter()
        .enumerate()
        .find(|(i, f)| full[..*i].contains(f))
    {
        Some((_, twice)) => anyhow::bail!("{twice}: given twice; compare different studies"),
        None => Ok(full),
    }
}
