//! `tcplab tune` (race candidate settings for a workload and say what to apply) and `tcplab demo`
//! (the embedded default: an emulated WAN path, doctor and tune on it, one HTML report).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use tcplab_battery::run::{self as battery, Target};
use tcplab_doctor::plan::Request;
use tcplab_stats::units::{Unit, human, metric_title};
use tcplab_tune::candidates::{TUNABLE, WorkloadKind};
use tcplab_tune::tune::{TuneOptions, TuneOutcome, tune};

use super::doctor::parse_budget;
use super::path::PathArgs;
use crate::output;
use tcplab::impair_args::ImpairArgs;

/// Arguments of `tcplab tune`.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The workload to make fast: msgs (per-message cost), rr (p99 latency), stream
    /// (throughput), crr (connections/s), rrul (p99 latency under load).
    #[arg(long)]
    workload: String,
    /// Wall time for the diagnosis, the race and the verification, e.g. 5m.
    #[arg(long, default_value = "5m")]
    budget: String,
    /// Where the study databases and the report go.
    #[arg(long, default_value = "tcplab-tune")]
    dir: PathBuf,
    /// Take the findings from `tcplab doctor --json` output instead of running the battery.
    #[arg(long)]
    findings: Option<PathBuf>,
    /// Skip the diagnosis: race only the presets.
    #[arg(long)]
    no_doctor: bool,
    /// One JSON document.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    path: PathArgs,
}

impl TuneArgs {
    /// Runs tune.
    pub fn run(self) -> ExitCode {
        let json = self.json;
        output::finish(json, self.run_inner())
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        tcplab_lab::require_root("tuning")?;
        if self.path.lab.is_some() {
            anyhow::bail!(
                "--lab: tune builds a fresh lab per configuration; describe the path with --topology and the impairment flags, or race socket options against a host running `tcplab serve` with --to"
            );
        }
        let remote_agent = self.path.remote()?;
        let remote = remote_agent.as_ref().map(|r| r.addr);
        if remote.is_some() && (self.path.topology.is_some() || self.path.impair.any()) {
            anyhow::bail!(
                "--to: a remote path is measured as it is; drop --topology and the impairment flags"
            );
        }
        let workload = WorkloadKind::parse_among(&self.workload, TUNABLE)
            .map_err(|e| anyhow::anyhow!("--workload: {e}"))?;
        let budget = parse_budget("--budget", &self.budget)?;
        tcplab::writable::dir("--dir", &self.dir)?;
        let quiet = self.json;
        let err_width = output::stderr_width();
        let say = |m: &str| {
            if !quiet {
                eprintln!(
                    "{}",
                    output::wrapped(&format!("tcplab tune: {m}"), err_width)
                );
            }
        };
        let diagnosis = if self.no_doctor {
            Diagnosis::default()
        } else if let Some(file) = &self.findings {
            Diagnosis {
                findings: read_findings(file)?,
                sysctls: Default::default(),
            }
        } else if let Some(addr) = remote {
            diagnose_remote(addr, budget.mul_f64(0.2), &say)?
        } else {
            diagnose(&self.path, budget.mul_f64(0.2), &say)?.0
        };
        let outcome = run_tune(
            &self.path,
            remote,
            workload,
            budget.mul_f64(0.8),
            diagnosis,
            &self.dir,
            &say,
        )?;
        if self.json {
            output::print_json(&outcome);
        } else {
            print_outcome(&outcome);
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// What the battery found and what the client host has now (the candidates' baselines).
#[derive(Debug, Default)]
struct Diagnosis {
    findings: Vec<tcplab_doctor::Finding>,
    sysctls: std::collections::BTreeMap<String, String>,
}

/// Findings from `tcplab doctor --json` output.
fn read_findings(path: &Path) -> anyhow::Result<Vec<tcplab_doctor::Finding>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--findings {}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("--findings {}: not JSON", path.display()))?;
    serde_json::from_value(doc["findings"].clone())
        .with_context(|| format!("--findings {}: no findings array", path.display()))
}

/// A short battery on a lab built from the flags: the findings and the client's sysctls, and
/// the battery itself (with its raw samples, for a report that shows the evidence).
fn diagnose(
    path: &PathArgs,
    budget: std::time::Duration,
    say: &dyn Fn(&str),
) -> anyhow::Result<(Diagnosis, tcplab_doctor::Battery)> {
    let path = PathArgs {
        topology: Some(path.topology.clone().unwrap_or_else(|| {
            if path.impair.any() {
                "path".into()
            } else {
                "pair".into()
            }
        })),
        ..path.clone()
    };
    let lab = path
        .lab(&format!("dg{}", std::process::id() % 100_000))?
        .context("no lab to diagnose")?;
    let (client, server) = path.hosts_of(&lab)?;
    say(&format!(
        "diagnosing the path ({} s battery)",
        budget.as_secs()
    ));
    let target = Target::Lab {
        lab: &lab,
        client: client.clone(),
        server,
    };
    let b = battery::run(
        &target,
        &Request::new(budget),
        battery::path_of(Some(&lab)),
        &|w| say(w),
    )?;
    let findings = tcplab_doctor::diagnose(&b);
    for f in &findings {
        say(&format!("finding: [{}] {} ({})", f.severity, f.title, f.id));
    }
    let sysctls = b
        .facts
        .as_ref()
        .and_then(|f| f.hosts.get(&client))
        .map(|h| h.sysctls.clone())
        .unwrap_or_default();
    Ok((Diagnosis { findings, sysctls }, b))
}

/// The battery against a remote `tcplab serve`: the findings and this machine's sysctls (the
/// client end's baselines).
fn diagnose_remote(
    addr: std::net::SocketAddr,
    budget: std::time::Duration,
    say: &dyn Fn(&str),
) -> anyhow::Result<Diagnosis> {
    say(&format!(
        "diagnosing the path to {addr} ({} s battery)",
        budget.as_secs()
    ));
    let b = battery::run(
        &Target::Remote(addr),
        &Request::new(budget),
        battery::path_of(None),
        &|w| say(w),
    )?;
    let findings = tcplab_doctor::diagnose(&b);
    for f in &findings {
        say(&format!("finding: [{}] {} ({})", f.severity, f.title, f.id));
    }
    let sysctls = b
        .facts
        .as_ref()
        .and_then(|f| f.hosts.values().next())
        .map(|h| h.sysctls.clone())
        .unwrap_or_default();
    Ok(Diagnosis { findings, sysctls })
}

fn run_tune(
    path: &PathArgs,
    remote: Option<std::net::SocketAddr>,
    workload: WorkloadKind,
    budget: std::time::Duration,
    diagnosis: Diagnosis,
    dir: &Path,
    say: &dyn Fn(&str),
) -> anyhow::Result<TuneOutcome> {
    let Diagnosis {
        findings,
        mut sysctls,
    } = diagnosis;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    // The lab's own --sysctl values are what the hosts have now: candidates start from them.
    for s in &path.sysctls {
        let s = tcplab_lab::SysctlSetting::parse("--sysctl", s)?;
        if s.host == "all" || s.host == "client" {
            sysctls.insert(s.key, s.value);
        }
    }
    let opts = TuneOptions {
        workload,
        lab: path.lab_section()?,
        remote,
        budget,
        findings,
        sysctls,
        dir: dir.to_path_buf(),
        seed: 1,
        state: tcplab_lab::StateDir::from_env(),
    };
    Ok(tune(&opts, &stop, say)?)
}

/// The table (laid out for the terminal), the verification and the lines to apply.
fn print_outcome(o: &TuneOutcome) {
    let layout = output::stdout_layout();
    match o
        .report_input
        .as_ref()
        .map(tcplab_report::Table::from_input)
    {
        Some(Ok(table)) => out!("{}", table.to_text_with(&layout)),
        _ => out!("{}", o.table),
    }
    let say = |line: String| outln!("{}", output::wrapped(&line, layout.width));
    match (&o.winner_label, &o.verification) {
        (Some(w), Some(v)) => {
            let unit = Unit::parse(tcplab_study::to_report::unit_of(&v.metric));
            let confirmed = v.confirmed();
            say(if confirmed {
                format!("winner: {w}")
            } else {
                format!("race leader: {w}")
            });
            say(format!(
                "verified on {} fresh repetitions each: {} {} vs the baseline's {}; speed-up {:.2}x (95% CI {:.2}-{:.2})",
                v.n,
                metric_title(&v.metric),
                human(v.winner_mean, &unit),
                human(v.baseline_mean, &unit),
                v.speed_up.estimate,
                v.speed_up.lower,
                v.speed_up.upper
            ));
            if !confirmed {
                say(
                    "not better than the baseline on fresh repetitions (the speed-up's 95% CI does not \
                     lie above 1x): keep the current settings"
                        .to_string(),
                );
            }
        }
        (Some(w), None) if o.winner.is_empty() => say(format!(
            "the baseline ({w}) is as fast as any candidate: keep the current settings"
        )),
        (Some(w), None) => say(format!(
            "winner: {w} (not verified: too few successful runs)"
        )),
        (None, _) => say("no configuration completed".to_string()),
    }
    for scope in ["namespace", "host", "application"] {
        let lines: Vec<_> = o.apply.iter().filter(|a| a.scope == scope).collect();
        if lines.is_empty() {
            continue;
        }
        outln!(
            "{}",
            match scope {
                "namespace" =>
                    "# /etc/sysctl.d/90-tcplab.conf (per network namespace: set it where the application runs)",
                "host" =>
                    "# /etc/sysctl.d/90-tcplab.conf (machine-wide: needs the host, not tested in the lab)",
                _ => "# in the application, on each socket",
            }
        );
        for a in lines {
            outln!("{}", a.line);
        }
    }
    outln!("study: {}", o.db.display());
}

/// Arguments of `tcplab demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the databases and the HTML report go.
    #[arg(long, default_value = "tcplab-demo")]
    dir: PathBuf,
    /// Time for doctor and tune together.
    #[arg(long, default_value = "3m")]
    budget: String,
    /// Offloads on the demo's lab links: on (the default for an emulated path: the emulator
    /// carries TSO/GSO super-packets), off, or e.g. tso=on,gro=off.
    #[arg(long, value_name = "on|off|LIST")]
    offloads: Option<String>,
}

impl DemoArgs {
    /// Runs the demo.
    pub fn run(self) -> ExitCode {
        output::finish(false, self.run_inner())
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        tcplab_lab::require_root("the demo (it builds an emulated network)")?;
        let start = Instant::now();
        let budget = parse_budget("--budget", &self.budget)?;
        tcplab::writable::dir("--dir", &self.dir)?;
        let path = PathArgs {
            offloads: self.offloads.clone(),
            ..demo_path()
        };
        let width = output::stdout_layout().width;
        outln!(
            "{}",
            output::wrapped(
                "tcplab demo: an emulated WAN path (client ─ emulator ─ server, 1 Gbit/s, 30 ms RTT, 0.01% loss) whose hosts \
                 still use 2008's socket buffer limits (tcp_rmem/tcp_wmem max 174760/131072 bytes, as Scientific Linux 4 shipped); \
                 doctor finds what limits TCP there, tune races the fixes and verifies the winner.",
                width
            )
        );
        let err_width = output::stderr_width();
        let say = |m: &str| {
            eprintln!(
                "{}",
                output::wrapped(&format!("tcplab demo: {m}"), err_width)
            )
        };
        let (diagnosis, battery) = diagnose(&path, budget.mul_f64(0.3), &say)?;
        let findings = diagnosis.findings.clone();
        let mut outcome = run_tune(
            &path,
            None,
            WorkloadKind::Stream,
            budget.mul_f64(0.7),
            diagnosis,
            &self.dir,
            &say,
        )?;
        print_outcome(&outcome);
        let report = self.dir.join("demo-report.html");
        if let Some(input) = outcome.report_input.as_mut() {
            input.title = "tcplab demo: bulk throughput on an emulated 30 ms, 1 Gbit/s WAN".into();
            // The doctor's evidence after tune's own runs: its msgs and rr delays with their
            // stalls, its latency under load.
            let evidence = tcplab_battery::evidence::battery_series(&battery);
            if !evidence.is_empty() {
                evidence.append_to(input);
                let doctor = "Plots labelled “doctor · …” show the doctor's battery, run once on the same path before the race.";
                input.runs_shown = Some(match input.runs_shown.take() {
                    Some(s) => format!("{s} {doctor}"),
                    None => doctor.to_string(),
                });
            }
            for f in &findings {
                input.notes.push(format!(
                    "doctor [{}] {}: {}",
                    f.severity, f.title, f.explanation
                ));
            }
            if let Some(v) = &outcome.verification {
                input.notes.push(format!(
                    "verified: the winner is {:.2}x the baseline (95% CI {:.2}-{:.2}) on {} fresh repetitions each",
                    v.speed_up.estimate, v.speed_up.lower, v.speed_up.upper, v.n
                ));
            }
            for a in &outcome.apply {
                input.notes.push(format!("apply ({}): {}", a.scope, a.line));
            }
            let page = tcplab_report::html::render(input)?;
            std::fs::write(&report, page)
                .with_context(|| format!("writing {}", report.display()))?;
        }
        outln!(
            "report: {}\ntook {:.0} s; every lab the demo built is gone",
            std::fs::canonicalize(&report).unwrap_or(report).display(),
            start.elapsed().as_secs_f64()
        );
        Ok(ExitCode::SUCCESS)
    }
}

/// The demo's path: 1 Gbit/s, 15 ms each way, 0.01% loss, 2008's buffer limits on both hosts.
fn demo_path() -> PathArgs {
    PathArgs {
        to: None,
        lab: None,
        topology: Some("path".into()),
        hosts: super::remote::HostsArg::Count(2),
        ssh_options: Vec::new(),
        sysctls: vec![
            "all:net.ipv4.tcp_rmem=4096 87380 174760".into(),
            "all:net.ipv4.tcp_wmem=4096 16384 131072".into(),
        ],
        offloads: None,
        client: None,
        server: None,
        impair: ImpairArgs::demo(),
    }
}
