//! The doctor's battery: stream, msgs (plain, the write-write-read trap, a size sweep), rr and
//! crr against one path, sized to a time budget, with the emulator's fidelity over the whole
//! battery. The path is a lab (client and server threads entered into its hosts) or a remote
//! `tcplab serve`.

use std::net::SocketAddr;
use std::time::Duration;

use tcplab_doctor::{Battery, EmulatorFidelity, PathInfo};
use tcplab_lab::Lab;
use tcplab_load::{Report, crr, msgs, rr, stream};

use crate::error::{Result, TuneError};

/// Pulls one workload's result out of the report enum.
macro_rules! expect {
    ($report:expr, $variant:ident) => {
        match $report {
            Report::$variant(r) => r,
            _ => {
                return Err(TuneError::Battery(
                    "a workload returned another workload's result".into(),
                ))
            }
        }
    };
}

/// Where the battery runs.
#[derive(Debug)]
pub enum Target<'a> {
    /// Inside a lab, between two of its hosts.
    Lab {
        /// The lab.
        lab: &'a Lab,
        /// Client host.
        client: String,
        /// Server host.
        server: String,
    },
    /// Against a host running `tcplab serve`.
    Remote(SocketAddr),
}

/// Seconds of each workload for a budget: stream takes the largest share because throughput needs
/// time to settle; the rest are short by nature.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Stream duration.
    pub stream: Duration,
    /// rr duration.
    pub rr: Duration,
    /// crr duration.
    pub crr: Duration,
    /// Messages of the plain msgs run.
    pub msgs_count: u64,
    /// Messages of the write-write-read run (each stall can cost 40 ms); 0 leaves it out. It
    /// provokes the Nagle + delayed-ACK stall on purpose (seed 004), so it is off by default:
    /// the battery otherwise reports what limits the path, not what an application could do
    /// wrong on it.
    pub trap_count: u64,
}

impl Plan {
    /// Splits `budget`: stream 40%, rr 15%, crr 15%; msgs are sized by count. Budgets under 10 s
    /// are raised to 10 s (below that no workload says anything).
    pub fn for_budget(budget: Duration) -> Plan {
        let secs = budget.as_secs_f64().max(10.0);
        Plan {
            stream: Duration::from_secs_f64(secs * 0.4),
            rr: Duration::from_secs_f64(secs * 0.15),
            crr: Duration::from_secs_f64(secs * 0.15),
            msgs_count: 100_000,
            trap_count: 0,
        }
    }
}

/// Runs the battery. `progress` is told which workload starts.
pub fn run(
    target: &Target<'_>,
    plan: Plan,
    path: PathInfo,
    progress: &dyn Fn(&str),
) -> Result<Battery> {
    let status_before = match target {
        Target::Lab { lab, .. } => lab.emulator_status().ok(),
        Target::Remote(_) => None,
    };
    let mut battery = Battery {
        path,
        ..Battery::default()
    };
    let ms = |d: Duration| Some(d.as_millis() as u64);

    progress("stream");
    let cfg = stream::StreamConfig {
        duration_ms: ms(plan.stream),
        omit_ms: 1_000.min(plan.stream.as_millis() as u64 / 4),
        ..Default::default()
    };
    battery.stream = Some(expect!(
        one(target, |t, f| stream::run_client(&cfg, t, f, None)
            .map(Report::Stream))?,
        Stream
    ));

    progress("msgs");
    let cfg = msgs::MsgsConfig {
        count: plan.msgs_count,
        link_rate_bps: battery.path.rate_bps.map(|r| r as u64),
        ..Default::default()
    };
    battery.msgs = Some(expect!(
        one(target, |t, f| msgs::run_client(&cfg, t, f)
            .map(Report::Msgs))?,
        Msgs
    ));

    let trap = if plan.trap_count > 0 {
        progress("msgs write-write-read");
        let cfg = msgs::MsgsConfig {
            count: plan.trap_count,
            size: 64,
            pattern: msgs::Pattern::WriteWriteRead,
            ..Default::default()
        };
        Some(expect!(
            one(target, |t, f| msgs::run_client(&cfg, t, f)
                .map(Report::Msgs))?,
            Msgs
        ))
    } else {
        None
    };
    progress("msgs size sweep");
    let cfg = msgs::MsgsConfig {
        count: 2_000,
        sizes: vec![1, 16, 64, 128, 256, 512, 1024, 1448, 4096],
        ..Default::default()
    };
    battery.msgs_sweep = Some(expect!(
        one(target, |t, f| msgs::run_client(&cfg, t, f)
            .map(Report::Msgs))?,
        Msgs
    ));
    // The trap run is what the stall rules read when the plain run shows nothing: keep the one
    // with the larger receive gaps as `msgs`.
    if let Some(trap) = trap {
        if worst_gap(&trap) > battery.msgs.as_ref().map_or(0.0, worst_gap) {
            battery.msgs = Some(trap);
        }
    }

    progress("rr");
    let cfg = rr::RrConfig {
        req: 64,
        resp: 64,
        duration_ms: ms(plan.rr),
        ..Default::default()
    };
    battery.rr = Some(expect!(
        one(target, |t, f| rr::run_client(&cfg, t, f).map(Report::Rr))?,
        Rr
    ));

    progress("crr");
    let cfg = crr::CrrConfig {
        concurrency: 2,
        duration_ms: ms(plan.crr),
        ..Default::default()
    };
    battery.crr = Some(expect!(
        one(target, |t, f| crr::run_client(&cfg, t, f).map(Report::Crr))?,
        Crr
    ));

    if let Target::Lab {
        lab,
        client,
        server,
    } = target
    {
        battery.facts = tcplab_lab::Facts::collect(lab).ok();
        battery.client_host = Some(client.clone());
        battery.server_host = Some(server.clone());
        if let (Some(before), Ok(after)) = (status_before, lab.emulator_status()) {
            let f = tcplab_study::executor::judge(&before.counters, &after.counters, after.running);
            battery.fidelity = Some(EmulatorFidelity {
                trustworthy: f.trustworthy,
                reasons: f.reasons,
            });
        }
    } else {
        battery.facts = Some(tcplab_lab::Facts::machine());
    }
    Ok(battery)
}

/// The number of stalled receives of a msgs result (all sizes).
fn worst_gap(m: &msgs::MsgsResult) -> f64 {
    m.runs.iter().map(|r| r.stalls as f64).sum()
}

/// Runs one workload on the target.
fn one<F>(target: &Target<'_>, client: F) -> Result<Report>
where
    F: FnOnce(SocketAddr, serde_json::Value) -> tcplab_load::Result<Report> + Send,
{
    let report = match target {
        Target::Lab {
            lab,
            client: c,
            server: s,
        } => tcplab_load::lab::run_on(lab, c, s, client),
        Target::Remote(addr) => {
            let facts = serde_json::to_value(tcplab_lab::Facts::machine()).unwrap_or_default();
            client(*addr, facts)
        }
    };
    report.map_err(|e| TuneError::Battery(e.to_string()))
}
