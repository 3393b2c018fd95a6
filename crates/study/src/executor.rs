//! The real [`Executor`]: each run in a lab ([`LabSession`]: the lab with its tcplab server
//! already listening) built from its configuration — fresh for every run, reused while the
//! configuration stays the same (`reset = "reuse"`), or reused across configurations and reset
//! before every run (`reset = "reset"`) — its workloads run with `tcplab-load` from the lab's
//! first end host to its last, the summary figures flattened into metrics, the raw samples
//! packed ([`crate::codec`]), the emulator's fidelity judged over the run, and the run's time
//! split into the workloads' own, the lab's, the harness's and the packing's ([`RunTiming`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tcplab_results::run_facts::{EmulatorRecord, RunFacts};

use tcplab_lab::{Lab, LabError, Ownership, StateDir};
use tcplab_results::Report;
use tcplab_results::emulator::RunFidelity;
use tcplab_results::http::result::HttpResult;
use tcplab_results::report::numbers_under;

use crate::labsession::LabSession;
use crate::plan::PlannedRun;
use crate::runner::{Executor, Fidelity, RunError, RunOutcome, RunTiming};
use crate::scenario::Reset;
use tcplab_results::spec::WorkloadSpec;

use crate::workload::Workload;

/// The live-interval period handed to the HTTP run; nothing listens (a study keeps the
/// per-request samples instead), so it only has to be valid.
const HTTP_INTERVAL_MS: u64 = 1_000;

/// Runs every planned run in real labs.
#[derive(Debug)]
pub struct LabExecutor {
    state: StateDir,
    prefix: String,
    built: u32,
    collected: bool,
    current: Option<LabSession>,
}

impl LabExecutor {
    /// Labs are registered under `state` and named `<prefix>_<n>`.
    pub fn new(state: StateDir, prefix: &str) -> LabExecutor {
        retain_freed_memory();
        LabExecutor {
            state,
            prefix: prefix.to_string(),
            built: 0,
            collected: false,
            current: None,
        }
    }

    /// Labs built so far.
    pub fn labs_built(&self) -> u32 {
        self.built
    }

    /// The lab for this run, ready: the current one when the scenario lets it be reused (reset
    /// first with `reset = "reset"`), else a new one.
    fn lab_for(&mut self, run: &PlannedRun) -> Result<&mut LabSession, RunError> {
        let spec = run
            .config
            .lab_spec("probe")
            .map_err(|e| RunError::Rejected(e.to_string()))?;
        let reuse = !run.fresh_lab
            && self.current.as_ref().is_some_and(|s| match run.reset {
                Reset::Reset => s.same_shape(&spec),
                Reset::Fresh | Reset::Reuse => s.config_id == run.config.id,
            });
        if !reuse {
            self.build(run)?;
        }
        let Some(session) = self.current.as_mut() else {
            return Err(RunError::Failed("no lab".into()));
        };
        if run.reset == Reset::Reset {
            session.reset_to(&spec, run.config.id)?;
        }
        Ok(session)
    }

    /// Replaces the current lab with a new one for `run` (with `reset = "reset"` without its
    /// sysctls, which the reset applies after reading their fresh values).
    fn build(&mut self, run: &PlannedRun) -> Result<(), RunError> {
        // The old lab goes first: two labs at once would share the machine's CPUs.
        if let Some(old) = self.current.take() {
            old.close();
        }
        if !self.collected {
            // A sweep killed with SIGKILL left its lab behind; its owner is dead, so it goes now.
            self.collected = true;
            tcplab_lab::gc(&self.state, false).map_err(lab_error)?;
        }
        self.built += 1;
        let name = format!("{}_{}", self.prefix, self.built);
        let mut spec = run
            .config
            .lab_spec(&name)
            .map_err(|e| RunError::Rejected(e.to_string()))?;
        if run.reset == Reset::Reset {
            spec.sysctls.clear();
        }
        let lab = Lab::build_in(self.state.clone(), spec, Ownership::Process).map_err(lab_error)?;
        self.current = Some(LabSession::start(lab, run.config.id)?);
        Ok(())
    }
}

/// Asks the C allocator (glibc) to keep freed memory for the next allocation instead of
/// returning it to the kernel, once per process: every run allocates the same few megabytes
/// (stamps, the server's report, summaries' scratch, packed samples), and fresh pages cost a
/// page fault each (about 2 ms a run here), while reused ones are already mapped. Blocks under
/// 32 MiB (the largest threshold glibc takes) come from the heap instead of their own mapping;
/// up to 256 MiB of free heap stays mapped. A no-op elsewhere (not glibc).
pub fn retain_freed_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(set_malloc_retention);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_malloc_retention() {
    // Safety: mallopt only sets allocator parameters; the values are in the ranges glibc
    // documents (it returns 0 and changes nothing otherwise), and it takes the allocator's own
    // lock, so calling it while other threads allocate is allowed.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_malloc_retention() {}

/// Kernel refusals of a configuration's values fail that configuration; missing privileges stop
/// the study; anything else fails the run.
pub(crate) fn lab_error(e: LabError) -> RunError {
    match e {
        LabError::NotRoot { .. } => RunError::Fatal(e.to_string()),
        LabError::SysctlRejected { .. }
        | LabError::UnknownSysctl { .. }
        | LabError::GlobalSysctl { .. }
        | LabError::Invalid { .. } => RunError::Rejected(e.to_string()),
        other => RunError::Failed(other.to_string()),
    }
}

fn load_error(e: tcplab_load::LoadError) -> RunError {
    use tcplab_load::LoadError;
    match e {
        // The server refuses a test when the kernel rejects its socket options: a property of
        // the configuration, not of this run.
        LoadError::Config { .. } | LoadError::Unsupported { .. } | LoadError::SockOpt { .. } => {
            RunError::Rejected(e.to_string())
        }
        // A refusal the server would repeat (the test's parameters, a limit it is over) is the
        // configuration's; a busy or failing server only this run's.
        LoadError::Refused { cause, .. } if cause.is_permanent() => {
            RunError::Rejected(e.to_string())
        }
        other => RunError::Failed(other.to_string()),
    }
}

impl Executor for LabExecutor {
    fn run(&mut self, run: &PlannedRun) -> Result<RunOutcome, RunError> {
        let start = Instant::now();
        let session = self.lab_for(run)?;
        let lab_s = start.elapsed().as_secs_f64();
        let facts = session.facts()?;
        let addr = session.addr();
        let hosts = (session.client().to_string(), session.server().to_string());
        let (client, lab) = session.client_and_lab()?;
        let first = lab.emulator_status().ok();
        // Each workload is judged on its own frames, for what its figures need: a stream's
        // throughput by its distortion over the path's RTT, the others' latencies by the
        // absolute bound (`tcplab_emu_io::need`).
        let mut verdicts = Vec::new();
        let collected = run_workloads(&run.config.settings.workloads, |w| {
            let before = lab.emulator_status().ok();
            let report = match &w.spec {
                // The web server is started in the server host for the run and the client's
                // event loops in the client host, by the load crate itself: the session's
                // tcplab server and kept client thread have no part in it.
                WorkloadSpec::Http(h) => tcplab_front::http::run_in_lab(
                    lab,
                    &hosts.0,
                    &hosts.1,
                    &h.server,
                    &h.config,
                    HTTP_INTERVAL_MS,
                    None,
                )?,
                _ => {
                    let (w, facts) = (w.clone(), Some(facts.clone()));
                    client
                        .run(move || tcplab_load::client::run(&w.spec, addr, facts))
                        .map_err(|e| tcplab_load::LoadError::Lab(e.to_string()))??
                }
            };
            if let Some(b) = &before {
                let after = lab.emulator_status().ok();
                let verdict = tcplab_front::lab::judge_workload(&report, b, after.as_ref());
                verdicts.push((kind_of(&report), verdict));
            }
            Ok(report)
        })?;
        let fidelity = combine(&verdicts);
        let mut facts = collected.facts.unwrap_or_default();
        facts.emulator = first.map(|b| EmulatorRecord {
            seed: b.seed,
            link: b.link,
            fidelity: RunFidelity {
                trustworthy: fidelity.trustworthy,
                reasons: fidelity.reasons.clone(),
                need: None,
            },
            realised: None,
            workloads: verdicts.iter().map(|(_, v)| v.clone()).collect(),
        });
        Ok(RunOutcome {
            metrics: collected.metrics,
            samples: collected.samples,
            facts: record(&facts)?,
            fidelity,
            wall: start.elapsed(),
            timing: RunTiming {
                workload_s: collected.workload_s,
                lab_s,
                encode_s: collected.encode.as_secs_f64(),
                ..collected.harness
            },
        })
    }

    fn finish(&mut self) -> Duration {
        let t = Instant::now();
        if let Some(session) = self.current.take() {
            session.close();
        }
        t.elapsed()
    }
}

/// What a run's workloads produced, in the store's shape.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// Summary figures, flattened (`latency_us.p99`; later workloads prefixed `workload.N.`).
    pub metrics: BTreeMap<String, f64>,
    /// Every workload's raw samples, packed ([`crate::codec`]).
    pub samples: Vec<u8>,
    /// The first workload's facts.
    pub facts: Option<RunFacts>,
    /// The workloads' own measured time, s ([`own_time`]).
    pub workload_s: f64,
    /// Time spent packing samples.
    pub encode: Duration,
    /// The harness's measured parts ([`harness_split`]; the other fields are left at zero).
    pub harness: RunTiming,
}

/// Runs `workloads` in order with `run_one` (which places the client and server: a lab's hosts
/// or a remote `tcplab serve`) and collects their figures; an incomplete workload fails the run.
pub(crate) fn run_workloads(
    workloads: &[Workload],
    mut run_one: impl FnMut(&Workload) -> tcplab_load::Result<Report>,
) -> Result<Collected, RunError> {
    let mut out = Collected::default();
    for (i, w) in workloads.iter().enumerate() {
        let report = run_one(w).map_err(load_error)?;
        out.workload_s += own_time(&report);
        let split = harness_split(&report);
        out.harness.setup_s += split.setup_s;
        out.harness.report_s += split.report_s;
        out.harness.summary_s += split.summary_s;
        let prefix = if i == 0 {
            String::new()
        } else {
            format!("workload.{i}.")
        };
        for (key, value) in report.summary_metrics() {
            out.metrics.insert(format!("{prefix}{key}"), value);
        }
        if let Report::Http(r) = &report {
            http_evidence(&prefix, r, &mut out.metrics);
        }
        let meta = report.meta();
        if !meta.complete {
            return Err(RunError::Failed(format!(
                "incomplete: {}",
                meta.incomplete_reason
                    .as_deref()
                    .unwrap_or("peer went away")
            )));
        }
        let t = Instant::now();
        crate::codec::pack(&report, &mut out.samples)
            .map_err(|e| RunError::Failed(format!("writing samples: {e}")))?;
        out.encode += t.elapsed();
        if out.facts.is_none() {
            out.facts = Some(report.meta().facts.clone());
        }
    }
    Ok(out)
}

/// A run's facts as the store records them.
pub(crate) fn record(facts: &RunFacts) -> Result<serde_json::Value, RunError> {
    serde_json::to_value(facts).map_err(|e| RunError::Failed(format!("recording the facts: {e}")))
}

/// A workload's own measured time, s: msgs from the first write to the later of the last
/// write's return and the last message's arrival (what is still in flight is the workload's
/// too); stream, rr, crr and http the client's elapsed time; rrul its probes' (the whole span).
pub fn own_time(report: &Report) -> f64 {
    match report {
        Report::Msgs(r) => r
            .runs
            .iter()
            .map(|run| {
                let first = run.send_ns.first().unwrap_or(0);
                let last_recv = run.recv_ns.last().unwrap_or(0);
                let drained = last_recv.saturating_sub(first) as f64 / 1e9;
                run.total_s.max(drained)
            })
            .sum(),
        Report::Stream(r) => r.elapsed_s,
        Report::Rr(r) => r.points.iter().map(|p| p.elapsed_s).sum(),
        Report::Crr(r) => r.elapsed_s,
        Report::Rrul(r) => r.probes.points.iter().map(|p| p.elapsed_s).sum(),
        Report::Http(r) => r.elapsed_s,
    }
}

/// The parts of the harness a workload timed itself (msgs: connections, the server's report,
/// summaries; zero for the others).
pub fn harness_split(report: &Report) -> RunTiming {
    let mut t = RunTiming::default();
    if let Report::Msgs(r) = report {
        for p in r.runs.iter().map(|run| run.phases) {
            t.setup_s += p.setup_ns as f64 / 1e9;
            t.report_s += p.report_ns as f64 / 1e9;
            t.summary_s += p.summary_ns as f64 / 1e9;
        }
    }
    t
}

/// The server host's kernel counters an http run's metrics always carry (0 when they did not
/// move): an accept queue that overflowed and SYN cookies sent instead of queueing, what seed
/// 003's somaxconn and syncookies factors act on, and the TIME_WAIT sockets the server entered
/// (`TcpExt.TW`, counted when one starts its full timeout), which `server_time_wait.max` falls
/// short of when new SYNs take over TIME_WAIT sockets of the same ports.
const HTTP_SERVER_COUNTERS: &[&str] = &[
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.SyncookiesSent",
    "TcpExt.SyncookiesRecv",
    "TcpExt.TCPReqQFullDrop",
    "TcpExt.TCPReqQFullDoCookies",
    "TcpExt.TW",
];

/// Seed 003's evidence beside an http run's summary: TIME_WAIT on both hosts, SYNs sent again,
/// errors by kind (EADDRNOTAVAIL among them) and the server's accept-queue counters. Not in
/// the load crate's `summary` (which is what `tcplab http` prints first), but what tells a
/// throughput loss from port exhaustion, a full accept queue or SYNs lost to TIME_WAIT.
fn http_evidence(prefix: &str, r: &HttpResult, out: &mut BTreeMap<String, f64>) {
    // Each group's numbers by their field names (`time_wait.max`), as the summary's are.
    let mut group = |name: &str, value: serde_json::Result<serde_json::Value>| {
        if let Ok(v) = value {
            numbers_under(&format!("{prefix}{name}."), &v, out);
        }
    };
    group("time_wait", serde_json::to_value(&r.time_wait));
    if let Some(server) = &r.server_time_wait {
        group("server_time_wait", serde_json::to_value(server));
    }
    group("syn_retrans", serde_json::to_value(r.syn_retrans));
    // The totals' `second` is the sample's index, not a count.
    group(
        "errors_total",
        serde_json::to_value(r.errors_total).map(|mut v| {
            if let Some(map) = v.as_object_mut() {
                map.remove("second");
            }
            v
        }),
    );
    for key in HTTP_SERVER_COUNTERS {
        let moved = r.server_counters.get(*key).copied().unwrap_or(0);
        out.insert(format!("{prefix}server.{key}"), moved as f64);
    }
}

/// The emulator's verdict over one run judged as latency, the stricter need, for callers that
/// do not know what the run measured (see `tcplab_lab::emulation::judge`;
/// `tcplab_lab::emulation::judge_for` takes the need).
pub fn judge(before: &serde_json::Value, after: &serde_json::Value, running: bool) -> Fidelity {
    let f = tcplab_lab::emulation::judge(before, after, running);
    Fidelity {
        trustworthy: f.trustworthy,
        reasons: f.reasons,
    }
}

/// The workload a result came from, as scenarios name it.
fn kind_of(report: &Report) -> &'static str {
    match report {
        Report::Stream(_) => "stream",
        Report::Msgs(_) => "msgs",
        Report::Rr(_) => "rr",
        Report::Crr(_) => "crr",
        Report::Rrul(_) => "rrul",
        Report::Http(_) => "http",
    }
}

/// A run's verdict from its workloads' own (in order): trustworthy when every one is; with
/// more than one workload each reason names the workload it came from (`workload 2 (rr): …`,
/// 1-based), since one run's stream and rr are judged for different needs.
fn combine(verdicts: &[(&str, RunFidelity)]) -> Fidelity {
    let several = verdicts.len() > 1;
    let mut out = Fidelity::ok();
    for (i, (kind, v)) in verdicts.iter().enumerate() {
        out.trustworthy &= v.trustworthy;
        out.reasons.extend(v.reasons.iter().map(|r| match several {
            true => format!("workload {} ({kind}): {r}", i + 1),
            false => r.clone(),
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcplab_results::emulator::Need;

    fn verdict(reasons: &[&str], need: Need) -> RunFidelity {
        RunFidelity {
            trustworthy: reasons.is_empty(),
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
            need: Some(need),
        }
    }

    #[test]
    fn an_http_run_gives_its_summary_and_seed_003s_evidence_as_metrics() {
        use tcplab_results::crr::TimeWait;
        use tcplab_results::http::result::{HttpResult, HttpSample};
        let mut r = HttpResult {
            elapsed_s: 2.5,
            samples: vec![HttpSample {
                intended_ns: 5,
                done_ns: 9,
                ..Default::default()
            }],
            ..Default::default()
        };
        r.meta.complete = true;
        r.summary.ops_per_s = Some(612.0);
        r.summary.mean_response_ms = Some(13.2);
        r.summary.errors = 3;
        r.time_wait.max = 950;
        r.server_time_wait = Some(TimeWait {
            max: 12,
            ..Default::default()
        });
        r.errors_total.connect = 3;
        r.errors_total.addrnotavail = 3;
        r.server_counters.insert("TcpExt.ListenOverflows".into(), 7);
        let report = Report::Http(r);
        assert_eq!((kind_of(&report), own_time(&report)), ("http", 2.5));
        let w = Workload::from_table(toml::from_str("kind = 'http'\n").unwrap()).unwrap();
        let c = run_workloads(&[w.clone(), w], |_| Ok(report.clone())).unwrap();
        let m = &c.metrics;
        assert_eq!(m["ops_per_s"], 612.0);
        assert_eq!(m["mean_response_ms"], 13.2);
        assert_eq!(m["errors"], 3.0);
        assert_eq!(m["time_wait.max"], 950.0);
        assert_eq!(m["server_time_wait.max"], 12.0);
        assert_eq!(m["errors_total.addrnotavail"], 3.0);
        assert!(!m.contains_key("errors_total.second"));
        assert_eq!(m["server.TcpExt.ListenOverflows"], 7.0);
        assert_eq!(
            m["server.TcpExt.SyncookiesSent"], 0.0,
            "present when it did not move"
        );
        assert_eq!(m["workload.1.ops_per_s"], 612.0);
        assert_eq!(c.workload_s, 5.0);
        assert!(!c.samples.is_empty());
    }

    #[test]
    fn an_http_workload_against_a_tcplab_server_is_refused_as_a_configuration() {
        let w = Workload::from_table(toml::from_str("kind = 'http'\n").unwrap()).unwrap();
        let addr: std::net::SocketAddr = "198.18.0.1:9".parse().unwrap();
        let e = tcplab_load::client::run(&w.spec, addr, None).unwrap_err();
        assert!(e.to_string().contains("tcplab http --to"), "{e}");
        assert!(matches!(load_error(e), RunError::Rejected(_)));
    }

    #[test]
    fn a_run_is_trustworthy_when_each_workload_is_and_reasons_name_theirs() {
        let bulk = Need::Throughput { rtt_ns: 10_000_000 };
        assert_eq!(combine(&[]), Fidelity::ok(), "no emulator: nothing judged");
        let one = combine(&[("stream", verdict(&["forward: x"], bulk))]);
        assert_eq!(
            (one.trustworthy, one.reasons),
            (false, vec!["forward: x".to_string()]),
            "one workload's reasons as they are"
        );
        let two = combine(&[
            ("stream", verdict(&[], bulk)),
            ("rr", verdict(&["reverse: y"], Need::Latency)),
        ]);
        assert!(!two.trustworthy);
        assert_eq!(two.reasons, ["workload 2 (rr): reverse: y"]);
        assert!(
            combine(&[
                ("stream", verdict(&[], bulk)),
                ("rr", verdict(&[], Need::Latency))
            ])
            .trustworthy
        );
    }
}
