//! `tcplab monitor`: every ordered pair of a fleet measured on a schedule, the history kept, the
//! page for Prometheus served, regressions against each pair's own history found and the
//! doctor run on each regressed pair (crates/monitor; docs/monitor.md). `tcplab monitor
//! alerts` lists what was found.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::{Args, Subcommand};
use tcplab_auth::ClientAuth;
use tcplab_battery::run::{self as battery, AgentAt, Target};
use tcplab_fleet::mesh::outcome::{WorkloadKind, parse_workload};
use tcplab_fleet::mesh::run::{AgentPairs, MeshHost};
use tcplab_monitor::RegressionConfig;
use tcplab_monitor::core::{Monitor, Workload};
use tcplab_monitor::metrics::{Snapshot, render};
use tcplab_monitor::run::{Fleet, Keep, Notice, Outputs, PairDoctor, Runners, coordinate};
use tcplab_monitor::schedule::Cadence;
use tcplab_monitor::serve::{Access, bind, serve};
use tcplab_monitor::store::MonitorStore;
use tcplab_monitor::webhook::{Retry, Webhook};
use tcplab_results::units::Dur;

use super::fleet::{LaunchArgs, TestArgs, mesh_hosts, stop_flag};
use crate::output;

/// `tcplab monitor [alerts]`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct MonitorArgs {
    #[command(subcommand)]
    command: Option<MonitorCommand>,
    #[command(flatten)]
    run: RunArgs,
}

/// What `tcplab monitor` does besides monitoring.
#[derive(Debug, Subcommand)]
enum MonitorCommand {
    /// The regressions found, newest first, with the check that found each.
    Alerts(AlertsArgs),
}

/// `tcplab monitor --hosts FILE ...`.
#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    launch: LaunchArgs,
    /// A workload every ordered pair runs on the schedule: msgs, rr, stream or crr
    /// (repeatable; default stream).
    #[arg(long = "workload", value_name = "NAME", value_parser = parse_workload)]
    workloads: Vec<WorkloadKind>,
    /// How often each pair runs each workload: a duration (10m) for all, or NAME=DURATION
    /// (rr=1m) for one (repeatable).
    #[arg(long = "every", value_name = "[NAME=]DURATION", default_value = "10m")]
    every: Vec<String>,
    /// Each interval is moved by up to this share of it, earlier or later, so a large fleet's
    /// tests spread out (0..=0.5).
    #[arg(long, value_name = "SHARE", default_value_t = 0.1)]
    jitter: f64,
    #[command(flatten)]
    test: TestArgs,
    /// The history: every run's figures, the alerts (created if missing; a restart resumes
    /// from it).
    #[arg(long, value_name = "FILE", default_value = "monitor.db")]
    db: PathBuf,
    /// Drop runs older than this (the newest run of each pair is always kept).
    #[arg(long, value_name = "DURATION", default_value = "30d")]
    keep: Dur,
    /// And keep at most this many runs per pair and workload.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_runs: u64,
    /// Where Prometheus scrapes /metrics.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    metrics: SocketAddr,
    /// A file whose first line is the bearer token Prometheus must send (needed off loopback).
    #[arg(long, value_name = "FILE")]
    metrics_token_file: Option<PathBuf>,
    /// Serve /metrics off loopback without a token.
    #[arg(long)]
    insecure: bool,
    /// Stop after this long (default: until SIGINT or SIGTERM).
    #[arg(long = "for", value_name = "DURATION")]
    run_for: Option<Dur>,
    /// The doctor's time on a regressed pair (its battery, run from the pair's client agent
    /// toward its server agent; both hosts take no other test meanwhile). At least 10s.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    doctor_budget: Dur,
    /// Do not run the doctor on regressed pairs (their alerts' cause is then not_diagnosed).
    #[arg(long)]
    no_doctor: bool,
    /// POST every alert's change (opened, diagnosed with the doctor's findings, closed) as
    /// JSON to this http:// URL.
    #[arg(long, value_name = "URL")]
    webhook: Option<String>,
}

/// The doctor on a pair of the fleet: the battery from the source's agent toward the
/// destination's, judged by the doctor's rules.
struct FleetDoctor {
    auth: std::collections::BTreeMap<String, ClientAuth>,
    budget: Duration,
}

impl FleetDoctor {
    fn agent(&self, host: &MeshHost) -> Result<AgentAt, String> {
        let auth = self
            .auth
            .get(&host.name)
            .ok_or_else(|| format!("no credentials for host {}", host.name))?;
        Ok(AgentAt {
            addr: host.addr,
            key: host.key,
            auth: auth.clone(),
        })
    }
}

impl PairDoctor for FleetDoctor {
    fn diagnose(
        &self,
        src: &MeshHost,
        dst: &MeshHost,
    ) -> Result<Vec<tcplab_doctor::Finding>, String> {
        let (client, server) = (self.agent(src)?, self.agent(dst)?);
        let target = Target::Between {
            client: &client,
            server: &server,
        };
        let plan = tcplab_doctor::plan::Request::new(self.budget);
        let found = battery::run(&target, &plan, battery::path_of(None), &|_| {})
            .map_err(|e| format!("the doctor on {} -> {}: {e}", src.name, dst.name))?;
        Ok(tcplab_doctor::diagnosis(&found).findings)
    }
}

/// `tcplab monitor alerts`.
#[derive(Debug, Args)]
struct AlertsArgs {
    /// The monitor's database.
    #[arg(long, value_name = "FILE", default_value = "monitor.db")]
    db: PathBuf,
    /// Closed alerts too.
    #[arg(long)]
    all: bool,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

impl MonitorArgs {
    /// Runs the monitor, or lists its alerts.
    pub fn run(self) -> ExitCode {
        match self.command {
            Some(MonitorCommand::Alerts(a)) => {
                let json = a.json;
                output::finish(json, a.run())
            }
            None => output::finish(false, self.run.run()),
        }
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl RunArgs {
    /// The workloads with their cadences, in the order given.
    fn workloads(&self) -> anyhow::Result<Vec<(WorkloadKind, Cadence)>> {
        let kinds = if self.workloads.is_empty() {
            vec![WorkloadKind::Stream]
        } else {
            self.workloads.clone()
        };
        let mut all: Option<Dur> = None;
        let mut one: Vec<(WorkloadKind, Dur)> = Vec::new();
        for e in &self.every {
            match e.split_once('=') {
                Some((name, d)) => {
                    let kind = parse_workload(name.trim())
                        .map_err(|m| anyhow::anyhow!("--every {e}: {m}"))?;
                    if !kinds.contains(&kind) {
                        anyhow::bail!("--every {e}: {name} is not among the --workload given");
                    }
                    let d: Dur = d.parse().map_err(|m| anyhow::anyhow!("--every {e}: {m}"))?;
                    one.push((kind, d));
                }
                None => all = Some(e.parse().map_err(|m| anyhow::anyhow!("--every {e}: {m}"))?),
            }
        }
        let default = all.unwrap_or(Dur::from_ns(600_000_000_000));
        kinds
            .into_iter()
            .map(|kind| {
                let every = one
                    .iter()
                    .rev()
                    .find(|(k, _)| *k == kind)
                    .map_or(default, |(_, d)| *d);
                let every_ms = every.ns() / 1_000_000;
                if every_ms == 0 {
                    anyhow::bail!(
                        "--every: {} needs an interval of at least 1 ms",
                        kind.name()
                    );
                }
                Ok((
                    kind,
                    Cadence {
                        every_ms,
                        jitter: self.jitter,
                    },
                ))
            })
            .collect()
    }

    fn access(&self) -> anyhow::Result<Access> {
        match &self.metrics_token_file {
            None => Ok(Access::Open),
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("--metrics-token-file {}: cannot read it", path.display())
                })?;
                let token = text.lines().next().unwrap_or("").trim().to_string();
                if token.len() < 16 {
                    anyhow::bail!(
                        "--metrics-token-file {}: the token's first line has {} characters; \
                         give at least 16 (e.g. head -c 32 /dev/urandom | base64)",
                        path.display(),
                        token.len()
                    );
                }
                Ok(Access::Token(token))
            }
        }
    }

    fn run(self) -> anyhow::Result<ExitCode> {
        let workloads = self.workloads()?;
        let doctor_budget = Duration::from_nanos(self.doctor_budget.ns());
        if !self.no_doctor && doctor_budget < Duration::from_secs(10) {
            anyhow::bail!(
                "--doctor-budget {}: the doctor's battery needs at least 10s",
                self.doctor_budget
            );
        }
        let mut webhook = self
            .webhook
            .as_deref()
            .map(|url| Webhook::start(url, Retry::DEFAULT, |m| eprintln!("tcplab monitor: {m}")))
            .transpose()?;
        let specs = workloads
            .iter()
            .map(|(kind, _)| self.test.spec(*kind))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let access = self.access()?;
        let listener = bind(self.metrics, &access, self.insecure)?;
        let store = MonitorStore::open(&self.db)?;
        let seed = store.seed(tcplab_emu_io::fresh_seed())?;
        let (inv, fleet) = self.launch.launch(false)?;
        if inv.hosts.len() < 2 {
            anyhow::bail!(
                "--hosts {}: a monitor needs at least 2 hosts, the file has {}",
                self.launch.hosts_file().display(),
                inv.hosts.len()
            );
        }
        let (hosts, auth) = mesh_hosts(&fleet);
        let runners: Runners = specs
            .into_iter()
            .map(|test| {
                Arc::new(AgentPairs {
                    auth: auth.clone(),
                    test,
                    timeout: Duration::from_secs(30),
                }) as Arc<dyn tcplab_fleet::mesh::run::PairRunner + Send + Sync>
            })
            .collect();
        let labels: Vec<Workload> = workloads
            .iter()
            .map(|(kind, cadence)| Workload {
                label: kind.name().to_string(),
                cadence: *cadence,
            })
            .collect();
        let names = hosts.iter().map(|h| h.name.clone()).collect();
        let past = store.runs()?;
        let mut monitor = Monitor::new(
            names,
            labels,
            seed,
            unix_ms(),
            RegressionConfig::default(),
            &past,
        )?;
        if self.no_doctor {
            monitor = monitor.without_doctor();
        }
        let open = store.alerts(true)?;
        monitor.resume_alerts(open.iter().map(|a| {
            (
                a.src.as_str(),
                a.dst.as_str(),
                a.evidence.as_ref().map(|e| e.cause.clone()),
            )
        }));
        let doctor: Option<Arc<dyn PairDoctor>> = (!self.no_doctor).then(|| {
            Arc::new(FleetDoctor {
                auth: auth.clone(),
                budget: doctor_budget,
            }) as Arc<dyn PairDoctor>
        });
        eprintln!(
            "tcplab monitor: {} hosts, {} workload(s), {} runs kept in {}; /metrics on {}",
            hosts.len(),
            workloads.len(),
            past.len(),
            self.db.display(),
            self.metrics
        );
        let stop = stop_flag();
        let page = Arc::new(Mutex::new(Snapshot::default()));
        let server = {
            let (page, stop) = (Arc::clone(&page), Arc::clone(&stop));
            std::thread::spawn(move || {
                let render_page = || {
                    let snap = page.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    render(&snap).unwrap_or_default()
                };
                serve(&listener, &access, &render_page, &stop);
            })
        };
        let deadline = self
            .run_for
            .map(|d| Instant::now() + Duration::from_nanos(d.ns()));
        let timer = deadline.map(|at| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || stop_at(at, &stop))
        });
        let mut on_notice = |n: &Notice| {
            eprintln!("tcplab monitor: {}", n.line());
            if let Some(hook) = webhook.as_mut() {
                hook.send(n);
            }
        };
        let totals = coordinate(
            &mut monitor,
            &store,
            Fleet {
                hosts: &hosts,
                runners: &runners,
                doctor: doctor.as_ref(),
            },
            Outputs {
                page: &page,
                on_notice: &mut on_notice,
            },
            &unix_ms,
            &stop,
            Keep {
                for_ms: self.keep.ns() / 1_000_000,
                per_slot: self.max_runs,
                prune_every_ms: 600_000,
            },
        )?;
        stop.store(true, Ordering::Relaxed);
        let _ = server.join();
        if let Some(t) = timer {
            let _ = t.join();
        }
        for p in fleet.stop() {
            eprintln!("tcplab monitor: stopping the agents: {p}");
        }
        eprintln!(
            "tcplab monitor: {} runs ({} without a result), {} regressions found, {} recovered, \
             {} doctor runs",
            totals.runs, totals.failed, totals.opened, totals.closed, totals.diagnoses
        );
        if let Some(hook) = webhook {
            let d = hook.finish();
            eprintln!(
                "tcplab monitor: webhook: {} notices delivered, {} given up on, {} dropped \
                 (queue full)",
                d.sent, d.failed, d.dropped
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Sets `stop` at `at`, or earlier if something else set it.
fn stop_at(at: Instant, stop: &AtomicBool) {
    while Instant::now() < at && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
}

impl AlertsArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        if !self.db.exists() {
            anyhow::bail!(
                "--db {}: no such monitor database (tcplab monitor --db writes one)",
                self.db.display()
            );
        }
        let store = MonitorStore::open(&self.db)?;
        let alerts = store.alerts(!self.all)?;
        if self.json {
            output::print_json(&alerts);
            return Ok(ExitCode::SUCCESS);
        }
        if alerts.is_empty() {
            outln!(
                "no {}alerts in {}",
                if self.all { "" } else { "open " },
                self.db.display()
            );
        }
        for a in &alerts {
            outln!("{}", a.report());
        }
        Ok(ExitCode::SUCCESS)
    }
}
