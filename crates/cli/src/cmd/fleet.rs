//! `tcplab fleet check` and `tcplab mesh`: many hosts, named in a hosts file (docs/fleet.md).
//! Agents are launched (ssh, srun) or found running, used, and stopped when the command ends,
//! also on Ctrl-C.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tcplab_results::spec::WorkloadSpec;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tcplab_fleet::inventory::Inventory;
use tcplab_fleet::launch::{Fleet, LaunchOptions, launch};
use tcplab_fleet::mesh::outcome::{MeshFigure, WorkloadKind, parse_workload};
use tcplab_fleet::mesh::run::{AgentPairs, MeshHost, MeshTiming, run_mesh};
use tcplab_fleet::mesh::schedule::{Pair, Step, concurrent, tournament, without};
use tcplab_fleet::mesh::store::{MeshIdentity, MeshStore};
use tcplab_fleet::mesh::{grid, html};

use crate::output;

/// How agents are launched: shared by every command that takes `--hosts`.
#[derive(Debug, Clone, Args)]
pub struct LaunchArgs {
    /// The hosts file (TOML; docs/fleet.md): each host's name, address and how its agent is
    /// reached (ssh, srun, or already running).
    // An Option that clap requires: `tcplab monitor alerts` (a subcommand) can then leave it out.
    #[arg(long, value_name = "FILE", required = true)]
    hosts: Option<PathBuf>,
    /// An option for OpenSSH's client, before the destination (repeatable), e.g.
    /// `--ssh-option=-i --ssh-option=KEY` or `--ssh-option=-oPort=2222`.
    #[arg(long = "ssh-option", value_name = "OPT", allow_hyphen_values = true)]
    pub ssh_options: Vec<String>,
    /// Where ssh hosts keep the copied tcplab and each launch's files (relative to the remote
    /// home, or absolute).
    #[arg(long, value_name = "DIR", default_value = ".cache/tcplab")]
    pub remote_dir: String,
    /// The coordinator's key for agents already running (default: TCPLAB_KEY, then
    /// ~/.config/tcplab/key).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Seconds an agent may take to start.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub start_timeout: u64,
    /// srun hosts: a directory every node sees at the same path, for the tcplab binary and the
    /// launch's key files (default: ~/.cache/tcplab).
    #[arg(long, value_name = "DIR")]
    pub shared_dir: Option<PathBuf>,
}

impl LaunchArgs {
    /// The hosts file (clap requires `--hosts` wherever these arguments are parsed).
    pub fn hosts_file(&self) -> &std::path::Path {
        self.hosts
            .as_deref()
            .unwrap_or(std::path::Path::new("hosts.toml"))
    }

    /// Reads the hosts file and starts (or finds) every agent.
    pub fn launch(&self, allow_sysctl: bool) -> anyhow::Result<(Inventory, Fleet)> {
        let inv = Inventory::load(self.hosts_file())?;
        let opts = LaunchOptions {
            allow_sysctl,
            start_timeout: Duration::from_secs(self.start_timeout.max(1)),
            remote_dir: self.remote_dir.clone(),
            ssh_options: self.ssh_options.clone(),
            key: self.key.clone(),
            shared_dir: self.shared_dir.clone(),
            ..LaunchOptions::default()
        };
        let fleet = launch(&inv, &opts).with_context(|| {
            format!(
                "--hosts {}: starting the agents",
                self.hosts_file().display()
            )
        })?;
        Ok((inv, fleet))
    }
}

/// Stops the agents when Ctrl-C or SIGTERM arrives: the flag is polled between tests, and the
/// fleet's guard stops the agents when the command returns.
/// The fleet's agents as the mesh's hosts, and the coordinator's credentials per host name,
/// each pinning that host's agent's key (a fleet may mix pinned agents with unpinned lab ones).
pub(crate) fn mesh_hosts(
    fleet: &Fleet,
) -> (
    Vec<MeshHost>,
    std::collections::BTreeMap<String, tcplab_auth::ClientAuth>,
) {
    let hosts = fleet
        .agents
        .iter()
        .map(|a| MeshHost {
            name: a.name.clone(),
            addr: a.addr,
            key: a.server_key,
        })
        .collect();
    let auth = fleet
        .agents
        .iter()
        .filter_map(|a| Some((a.name.clone(), fleet.auth_for(&a.name)?)))
        .collect();
    (hosts, auth)
}

pub(crate) fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    stop
}

/// What one pair's test is: the mesh's and the monitor's flags.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// msgs: messages per test; rr/crr: transactions per test.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// msgs: message size; rr/crr: request and response size, bytes.
    #[arg(long, value_name = "BYTES")]
    size: Option<u32>,
    /// stream (and rr/crr without --count): seconds per test.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    duration: f64,
    /// msgs: a receive gap above this many ms is a stall; rr: a transaction slower than it.
    #[arg(long, value_name = "MS")]
    stall_ms: Option<f64>,
}

impl TestArgs {
    /// The test every pair runs for a workload of `kind`.
    pub fn spec(&self, kind: WorkloadKind) -> anyhow::Result<WorkloadSpec> {
        let ms = (self.duration * 1e3).round() as u64;
        if !(self.duration > 0.0 && self.duration <= 3600.0) {
            anyhow::bail!("--duration {}: give 0 < SECS <= 3600", self.duration);
        }
        let test = match kind {
            WorkloadKind::Msgs => {
                let mut c = tcplab_load::msgs::MsgsConfig::default();
                c.count = self.count.unwrap_or(c.count);
                c.size = self.size.unwrap_or(c.size);
                c.stall_ms = self.stall_ms.unwrap_or(c.stall_ms);
                WorkloadSpec::Msgs(c)
            }
            WorkloadKind::Rr => {
                let mut c = tcplab_load::rr::RrConfig::default();
                let size = self.size.unwrap_or(c.req);
                (c.req, c.resp) = (size, size);
                c.count = self.count;
                c.duration_ms = self.count.is_none().then_some(ms);
                c.stall_ms = self.stall_ms.unwrap_or(c.stall_ms);
                WorkloadSpec::Rr(c)
            }
            WorkloadKind::Stream => {
                let c = tcplab_load::stream::StreamConfig {
                    duration_ms: Some(ms),
                    ..Default::default()
                };
                WorkloadSpec::Stream(c)
            }
            WorkloadKind::Crr => {
                let mut c = tcplab_load::crr::CrrConfig::default();
                let size = self.size.unwrap_or(c.req);
                (c.req, c.resp) = (size, size);
                c.count = self.count;
                c.duration_ms = self.count.is_none().then_some(ms);
                WorkloadSpec::Crr(c)
            }
            other @ (WorkloadKind::Rrul | WorkloadKind::Http) => {
                anyhow::bail!("--workload {other}: a mesh runs msgs, rr, stream or crr")
            }
        };
        test.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(test)
    }
}

/// `tcplab fleet ...`.
#[derive(Debug, clap::Subcommand)]
pub enum FleetCommand {
    /// Reach every agent of a hosts file: version, authentication, facts (kernel, HZ,
    /// congestion control, buffers) and its clock's offset to this one, with its uncertainty.
    Check(CheckArgs),
}

impl FleetCommand {
    /// Runs the subcommand.
    pub fn run(self) -> ExitCode {
        match self {
            Self::Check(a) => {
                let json = a.json;
                output::finish(json, a.run())
            }
        }
    }
}

/// Arguments of `tcplab fleet check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    launch: LaunchArgs,
    /// Clock probes per host (the one with the least round trip is used).
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    probes: u32,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

/// One host's line of `fleet check`.
#[derive(Debug, Serialize)]
struct HostCheck {
    name: String,
    address: String,
    ok: bool,
    error: Option<String>,
    facts: Option<tcplab_agent::remote::AgentFacts>,
    clock: Option<tcplab_agent::remote::ClockOffset>,
}

impl CheckArgs {
    fn run(self) -> anyhow::Result<ExitCode> {
        let (_inv, fleet) = self.launch.launch(false)?;
        let timeout = Duration::from_secs(10);
        let checks: Vec<HostCheck> = fleet
            .agents
            .iter()
            .map(|a| {
                let auth = fleet
                    .auth_for(&a.name)
                    .unwrap_or_else(|| fleet.auth.clone());
                let facts = tcplab_agent::remote::facts(a.addr, &auth, timeout);
                let clock = facts
                    .as_ref()
                    .ok()
                    .map(|_| tcplab_agent::remote::clock(a.addr, &auth, self.probes, timeout));
                let error = match (&facts, &clock) {
                    (Err(e), _) | (_, Some(Err(e))) => Some(e.to_string()),
                    _ => None,
                };
                HostCheck {
                    name: a.name.clone(),
                    address: a.addr.to_string(),
                    ok: error.is_none(),
                    error,
                    facts: facts.ok(),
                    clock: clock.and_then(Result::ok),
                }
            })
            .collect();
        let problems = fleet.stop();
        for p in &problems {
            eprintln!("tcplab fleet: stopping: {p}");
        }
        let all_ok = checks.iter().all(|c| c.ok);
        if self.json {
            output::print_json(&checks);
        } else {
            out!("{}", check_table(&checks));
        }
        Ok(if all_ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// `fleet check` as a table, one host per line.
fn check_table(checks: &[HostCheck]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:<22} {:<8} {:<6} {:<18} {:>4} {:<6} {:>10} {:>22}",
        "host", "agent", "tcplab", "auth", "kernel", "HZ", "cc", "rmem_max", "clock offset"
    );
    for c in checks {
        match (&c.facts, &c.error) {
            (Some(f), None) => {
                let facts = f.facts.as_ref();
                let s = |v: Option<&String>| v.map_or("?", String::as_str).to_string();
                let clock = c.clock.as_ref().map_or("?".into(), |k| {
                    format!(
                        "{:+.3} ± {:.3} ms",
                        k.offset_ns as f64 / 1e6,
                        k.uncertainty_ns as f64 / 1e6
                    )
                });
                let _ = writeln!(
                    out,
                    "{:<12} {:<22} {:<8} {:<6} {:<18} {:>4} {:<6} {:>10} {:>22}",
                    c.name,
                    c.address,
                    f.tcplab,
                    if f.authenticated { "keys" } else { "none" },
                    s(facts.map(|m| &m.kernel_release)),
                    facts.map_or(0, |m| m.hz.hz),
                    s(facts.map(|m| &m.congestion_control.default)),
                    s(facts.and_then(|m| m.machine_sysctls.get("net.core.rmem_max"))),
                    clock
                );
            }
            (_, err) => {
                let _ = writeln!(
                    out,
                    "{:<12} {:<22} UNREACHABLE: {}",
                    c.name,
                    c.address,
                    err.as_deref().unwrap_or("?")
                );
            }
        }
    }
    out
}

/// Arguments of `tcplab mesh`.
#[derive(Debug, Args)]
pub struct MeshArgs {
    #[command(flatten)]
    launch: LaunchArgs,
    /// The workload every ordered pair runs: msgs, rr, stream or crr.
    #[arg(long, value_name = "NAME", value_parser = parse_workload)]
    workload: WorkloadKind,
    #[command(flatten)]
    test: TestArgs,
    /// msgs and rr only: run up to N tests at once whatever hosts they share (default: the
    /// tournament, where no host is in two tests at once).
    #[arg(long, value_name = "N")]
    concurrent: Option<usize>,
    /// The mesh's database: one row per pair as it ends.
    #[arg(long, value_name = "FILE", default_value = "mesh.db")]
    db: PathBuf,
    /// Finish the mesh in --db: run only the pairs it does not hold a result for.
    #[arg(long)]
    resume: bool,
    /// Write the heatmap page here (default: the database's name with .html).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// The hosts are this lab's (`tcplab lab up`): judge each step by its emulator, so a pair
    /// measured while the emulator fell behind is marked untrustworthy (default: the emulated
    /// lab whose hosts hold every address of the hosts file, if one is up).
    #[arg(long, value_name = "NAME")]
    lab: Option<String>,
    /// Print the report as one JSON document.
    #[arg(long)]
    json: bool,
}

/// What `mesh --json` prints.
#[derive(Debug, Serialize)]
struct MeshReport<'a> {
    grid: &'a grid::Grid,
    db: String,
    html: String,
    timing: Timing,
}

/// The harness's cost, as `mesh` reports it.
#[derive(Debug, Serialize)]
struct Timing {
    wall_s: f64,
    tests: usize,
    steps: usize,
    workload_s: f64,
    critical_s: f64,
    harness_per_test_ms: Option<f64>,
}

impl From<MeshTiming> for Timing {
    fn from(t: MeshTiming) -> Self {
        Self {
            wall_s: t.wall_s,
            tests: t.tests,
            steps: t.steps,
            workload_s: t.workload_s,
            critical_s: t.critical_s,
            harness_per_test_ms: (t.tests > 0)
                .then(|| t.per_test_overhead_s / t.tests as f64 * 1e3),
        }
    }
}

impl MeshArgs {
    /// Runs the mesh and prints its report.
    pub fn run(self) -> ExitCode {
        let json = self.json;
        output::finish(json, self.run_inner())
    }

    fn steps(&self, n: usize) -> anyhow::Result<Vec<Step>> {
        match self.concurrent {
            None => Ok(tournament(n)),
            Some(_) if self.workload.is_throughput() => anyhow::bail!(
                "--concurrent: {} tests share their hosts' links and CPUs, so a mesh of them \
                 runs as a tournament (no host in two tests at once); drop --concurrent",
                self.workload.name()
            ),
            Some(0) => anyhow::bail!("--concurrent 0: give at least 1"),
            Some(w) => Ok(concurrent(n, w)),
        }
    }

    fn run_inner(self) -> anyhow::Result<ExitCode> {
        let test = self.test.spec(self.workload)?;
        let inv = Inventory::load(self.launch.hosts_file())?;
        if inv.hosts.len() < 2 {
            anyhow::bail!(
                "--hosts {}: a mesh needs at least 2 hosts, the file has {}",
                self.launch.hosts_file().display(),
                inv.hosts.len()
            );
        }
        let names: Vec<String> = inv.hosts.iter().map(|h| h.name.clone()).collect();
        let identity = MeshIdentity {
            hosts: inv
                .hosts
                .iter()
                .map(|h| (h.name.clone(), h.address.to_string()))
                .collect(),
            workload: self.workload.name().into(),
            test: serde_json::to_string(&test).unwrap_or_default(),
        };
        let html_path = self
            .html
            .clone()
            .unwrap_or_else(|| self.db.with_extension("html"));
        tcplab::writable::file("--html", &html_path)?;
        let store = MeshStore::open(&self.db, &identity, self.resume)?;
        let done: std::collections::BTreeSet<Pair> = store
            .rows()?
            .iter()
            .filter(|r| r.failure.is_none())
            .filter_map(|r| {
                Some(Pair {
                    src: names.iter().position(|n| *n == r.src)?,
                    dst: names.iter().position(|n| *n == r.dst)?,
                })
            })
            .collect();
        let steps = without(self.steps(names.len())?, &done);
        let addresses: Vec<std::net::IpAddr> = inv.hosts.iter().map(|h| h.address).collect();
        let watch = super::mesh_lab::watch(self.lab.as_deref(), &addresses, self.workload)?;
        let stop = stop_flag();
        let mut timing = MeshTiming::default();
        if !steps.is_empty() {
            let (_, fleet) = self.launch.launch(false)?;
            let (hosts, auth) = mesh_hosts(&fleet);
            let runner = AgentPairs {
                auth,
                test,
                timeout: Duration::from_secs(30),
            };
            let total: usize = steps.iter().map(|s| s.pairs.len()).sum();
            let mut seen = 0usize;
            eprintln!(
                "tcplab mesh: {} pairs to run in {} steps ({} already in {})",
                total,
                steps.len(),
                done.len(),
                self.db.display()
            );
            let watch = watch
                .as_ref()
                .map(|w| w as &dyn tcplab_fleet::mesh::run::StepWatch);
            timing = run_mesh(&hosts, &steps, &runner, &store, &stop, watch, &mut |row| {
                seen += 1;
                if let Some(f) = &row.failure {
                    eprintln!(
                        "tcplab mesh: [{seen}/{total}] {} -> {} failed: {f}",
                        row.src, row.dst
                    );
                }
            })?;
            for p in fleet.stop() {
                eprintln!("tcplab mesh: stopping the agents: {p}");
            }
        }
        let g = grid::grid(self.workload, &names, &store.rows()?);
        let title = format!(
            "tcplab mesh: {} among {} hosts",
            self.workload.name(),
            names.len()
        );
        std::fs::write(&html_path, html::page(&g, &title))
            .with_context(|| format!("--html {}: writing the heatmap", html_path.display()))?;
        if self.json {
            output::print_json(&MeshReport {
                grid: &g,
                db: self.db.display().to_string(),
                html: html_path.display().to_string(),
                timing: timing.into(),
            });
        } else {
            out!("{}\n{}", g.matrix_text(), g.summary_text());
            let t = Timing::from(timing);
            if t.tests > 0 {
                outln!(
                    "{} tests in {:.1} s ({} steps): workloads {:.1} s in all, longest per step \
                     {:.1} s in all; harness {:.1} ms per test",
                    t.tests,
                    t.wall_s,
                    t.steps,
                    t.workload_s,
                    t.critical_s,
                    t.harness_per_test_ms.unwrap_or(0.0)
                );
            }
            outln!(
                "database {}, heatmap {}",
                self.db.display(),
                html_path.display()
            );
        }
        Ok(if stop.load(Ordering::Relaxed) {
            eprintln!("tcplab mesh: interrupted; `--resume` finishes the missing pairs");
            ExitCode::from(130)
        } else if g.failed > 0 || g.missing > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}
