//! Running both sides inside a tcplab lab (crates/lab): the server (the agent's, in process) is
//! bound to the server host's lab address from a thread entered into that host, and served
//! from another such thread (so the per-test threads it spawns, and their data sockets, live
//! there too); the client runs on a thread entered into the client host. The lab's facts go
//! into the result, and an emulated lab's verdict on itself over the run.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use tcplab_results::facts::Facts;
use tcplab_results::run_facts::EmulatorRecord;

use tcplab_emu::LinkConfig;
use tcplab_lab::Lab;
use tcplab_lab::emulation::{self, Need};

use tcplab_agent::Server;
use tcplab_load::error::{LoadError, Result};
use tcplab_load::report::Report;

fn lab_err(e: tcplab_lab::LabError) -> LoadError {
    LoadError::Lab(e.to_string())
}

/// Opens lab `lab` (by name, from the default state directory) and runs there.
pub fn run_in_lab<F>(lab: &str, client_host: &str, server_host: &str, client: F) -> Result<Report>
where
    F: FnOnce(SocketAddr, Option<Facts>) -> Result<Report> + Send,
{
    let lab = Lab::open(lab).map_err(lab_err)?;
    run_on(&lab, client_host, server_host, client)
}

/// Runs `client` in `client_host` of `lab` against a server in `server_host`.
pub fn run_on<F>(lab: &Lab, client_host: &str, server_host: &str, client: F) -> Result<Report>
where
    F: FnOnce(SocketAddr, Option<Facts>) -> Result<Report> + Send,
{
    let chost = lab.host(client_host).map_err(lab_err)?;
    let shost = lab.host(server_host).map_err(lab_err)?;
    let ip = host_ip(shost, server_host)?;
    let facts = Some(tcplab_lab::facts::collect(lab).map_err(lab_err)?);
    // An emulated lab: its counters before the run, to judge the emulator over exactly this run.
    let emulator_before = lab.emulator_status().ok();
    let server = shost
        .run(|| Server::bind(SocketAddr::new(ip, 0)))
        .map_err(lab_err)??;
    let addr = server.local_addr()?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let serving = shost
            .spawn_scoped(s, "tcplab-serve", || server.serve(&stop, None))
            .map_err(lab_err)?;
        // Stops the server even if the client panics, or the scope would wait for it forever.
        let _stop_on_exit = StopOnDrop(&stop);
        let result = chost.run(|| client(addr, facts)).map_err(lab_err);
        stop.store(true, Ordering::Relaxed);
        let served = serving
            .join()
            .unwrap_or_else(|_| Err(LoadError::Protocol("server thread panicked".into())));
        let mut report = result??;
        served?;
        if let Some(before) = emulator_before {
            attach_emulator(lab, &before, &mut report);
        }
        Ok(report)
    })
}

/// The address a server in lab host `host` (named `name`) listens on: its IPv4, else its IPv6.
pub fn host_ip(host: &tcplab_lab::Host, name: &str) -> Result<IpAddr> {
    match (host.ipv4(), host.ipv6()) {
        (Some(v4), _) => Ok(v4.into()),
        (None, Some(v6)) => Ok(v6.into()),
        (None, None) => Err(LoadError::config(
            "server",
            format!("lab host {name:?} has no address"),
        )),
    }
}

/// What a workload's figures need of the emulator (`tcplab_emu_io::need`): a stream's
/// throughput, over the round trip `link` is configured for; latency under load (rrul) the
/// same, since what it reports is how much the load inflates latency, a quantity on the scale
/// of the round trip; every other workload (msgs, rr, crr) measures latencies, which its own
/// frames' lateness adds to directly.
pub fn need_of(report: &Report, link: &LinkConfig) -> Need {
    match report {
        Report::Stream(_) | Report::Rrul(_) => emulation::throughput_over(link),
        Report::Msgs(_) | Report::Rr(_) | Report::Crr(_) | Report::Http(_) => Need::Latency,
    }
}

/// The emulator's verdict over one workload, judged for what its figures need ([`need_of`]),
/// from the emulator's status before it and after it (`None`: the emulator did not answer).
pub fn judge_workload(
    report: &Report,
    before: &emulation::EmulatorStatus,
    after: Option<&emulation::EmulatorStatus>,
) -> emulation::RunFidelity {
    let need = need_of(report, &before.link);
    match after {
        Some(a) => emulation::judge_for(&before.counters, &a.counters, a.running, need),
        None => emulation::RunFidelity {
            trustworthy: false,
            reasons: vec!["the emulator did not answer after the run (did it die?)".into()],
            need: Some(need),
        },
    }
}

/// Records the emulator's settings, seed and fidelity verdict over the run in the result's facts,
/// so every result that crossed an emulator that fell behind what it measures says it is
/// untrustworthy, and what its model really gave during the run (queue stay, realised delay and
/// jitter).
pub fn attach_emulator(lab: &Lab, before: &emulation::EmulatorStatus, report: &mut Report) {
    let after = lab.emulator_status().ok();
    let account = after
        .as_ref()
        .and_then(|a| emulation::account(&before.counters, &a.counters));
    let fidelity = judge_workload(report, before, after.as_ref());
    report.meta_mut().facts.emulator = Some(EmulatorRecord {
        seed: before.seed,
        link: before.link.clone(),
        fidelity,
        realised: account,
        workloads: Vec::new(),
    });
}

/// Sets the flag when dropped, including during unwinding: a server thread in a scope stops
/// even if the client side panics, or the scope would wait for it forever.
#[derive(Debug)]
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An emulator status over a 5 ms + 15 ms path whose forward direction released
    /// `frames` frames, `late` of them 150 µs late and the rest 20 µs.
    fn status(frames: u64, late: u64) -> emulation::EmulatorStatus {
        let mut link = LinkConfig::default();
        link.forward.delay_ns = 5_000_000;
        link.reverse.delay_ns = 15_000_000;
        let mut counters = emulation::Snapshot::default();
        let l = &mut counters.forward.lateness;
        l.count = frames;
        l.late_count = late;
        l.sum_ns = late * 150_000 + (frames - late) * 20_000;
        l.mean_ns = l.sum_ns.checked_div(frames).unwrap_or(0);
        emulation::EmulatorStatus {
            running: true,
            seed: 1,
            link,
            counters: serde_json::to_value(counters).unwrap(),
        }
    }

    #[test]
    fn a_stream_is_judged_as_throughput_over_the_lab_rtt_and_the_rest_as_latency() {
        let stream = Report::Stream(Default::default());
        let rr = Report::Rr(Default::default());
        let (before, after) = (status(0, 0), status(100_000, 3_000));
        assert_eq!(
            need_of(&stream, &before.link),
            Need::Throughput { rtt_ns: 20_000_000 }
        );
        assert_eq!(need_of(&rr, &before.link), Need::Latency);
        let f = judge_workload(&stream, &before, Some(&after));
        assert!(f.trustworthy, "{:?}", f.reasons);
        let f = judge_workload(&rr, &before, Some(&after));
        assert!(!f.trustworthy);
        assert_eq!(f.need, Some(Need::Latency));
        let gone = judge_workload(&stream, &before, None);
        assert!(!gone.trustworthy && gone.reasons[0].contains("did not answer"));
    }
}
