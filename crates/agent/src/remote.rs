//! The coordinator's side of the asks (docs/fleet.md): what a program that drives many agents
//! asks of each besides tests. [`facts`] (what the agent is and sees), [`clock`] (its clock's
//! offset from ours, with a bound), [`run_from`] (a test with that agent as the client, toward
//! another agent), [`SysctlHold`] (`net.` sysctls set on that agent's host for as long as the
//! hold lives).
//!
//! Each opens its own control connection, authenticated like a test's
//! ([`ClientAuth`]: this program's key, the agent's pinned key), whose first sealed frame is
//! an [`Ask`] instead of a Hello.

use std::net::SocketAddr;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tcplab_results::spec::WorkloadSpec;

use serde::{Deserialize, Serialize};

pub use tcplab_load::proto::AgentFacts;

use tcplab_auth::{Channel, ClientAuth, PublicKey};
use tcplab_load::error::{LoadError, Result};
use tcplab_load::proto::{self, Answer, Ask, Cause, Ctrl, MAX_PROBES};

use crate::limits::Needs;

/// How long [`SysctlHold`] waits to connect, for the agent's answer, and for its release.
const HOLD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long dropping a [`SysctlHold`] waits for the agent to confirm the release (the agent
/// restores on its own when the connection closes anyway).
const DROP_TIMEOUT: Duration = Duration::from_secs(2);

/// An agent's clock relative to ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Agent clock − our clock (CLOCK_REALTIME), ns.
    pub offset_ns: i64,
    /// The true offset is within ±this of `offset_ns` (half the network round trip of the
    /// probe used), ns.
    pub uncertainty_ns: u64,
    /// Network round trip of the probe used (the agent's turnaround excluded), ns.
    pub min_rtt_ns: u64,
    /// Probes exchanged.
    pub probes: u32,
}

/// One Ping/Pong exchange: t1 we sent, t2 the agent received, t3 it answered, t4 we
/// received (t1, t4 on our clock; t2, t3 on the agent's), ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Our clock at send.
    pub t1_ns: i64,
    /// Agent clock on receipt.
    pub t2_ns: i64,
    /// Agent clock at answer.
    pub t3_ns: i64,
    /// Our clock on receipt of the answer.
    pub t4_ns: i64,
}

impl ClockSample {
    /// Network round trip, the agent's turnaround excluded; None for an impossible sample
    /// (a clock stepped during it).
    fn rtt(&self) -> Option<u64> {
        let total = i128::from(self.t4_ns) - i128::from(self.t1_ns);
        let turn = i128::from(self.t3_ns) - i128::from(self.t2_ns);
        if total < 0 || turn < 0 || turn > total {
            return None;
        }
        u64::try_from(total - turn).ok()
    }
}

/// NTP's estimate from the sample with the least round trip: offset ((t2−t1)+(t3−t4))/2,
/// which is off by half the difference of the two one-way delays, so by at most half the
/// round trip (the uncertainty). The quickest sample is the one queues delayed least. None
/// without a usable sample.
pub fn estimate_offset(samples: &[ClockSample]) -> Option<ClockOffset> {
    let (best, rtt) = samples
        .iter()
        .filter_map(|s| s.rtt().map(|r| (s, r)))
        .min_by_key(|&(_, r)| r)?;
    let sum = (i128::from(best.t2_ns) - i128::from(best.t1_ns))
        + (i128::from(best.t3_ns) - i128::from(best.t4_ns));
    Some(ClockOffset {
        offset_ns: i64::try_from(sum / 2).ok()?,
        uncertainty_ns: rtt.div_ceil(2),
        min_rtt_ns: rtt,
        probes: u32::try_from(samples.len()).unwrap_or(u32::MAX),
    })
}

/// Opens an authenticated control connection to `agent` whose first frame is `ask`.
fn open(agent: SocketAddr, auth: &ClientAuth, ask: Ask, timeout: Duration) -> Result<Channel> {
    let ctrl = tcplab_load::session::connect_ctrl(agent, timeout)?;
    let first = proto::encode(&Ctrl::Ask {
        version: proto::VERSION,
        ask: Box::new(ask),
    })?;
    let ctrl = tcplab_load::session::handshake(ctrl, auth, agent, &first, timeout)?;
    ctrl.set_read_timeout(Some(timeout))
        .map_err(|e| LoadError::io("setting the control timeout", e))?;
    Ok(ctrl)
}

/// Reads the agent's answer; its refusals become errors naming what to fix.
fn answer(ctrl: &mut Channel, auth: &ClientAuth) -> Result<Answer> {
    match proto::read_frame(ctrl)? {
        Ctrl::Answer(a) => Ok(*a),
        msg => Err(refusal(msg, auth)),
    }
}

/// The error an agent's frame other than the one expected means.
fn refusal(msg: Ctrl, auth: &ClientAuth) -> LoadError {
    match msg {
        Ctrl::Error {
            message,
            cause: Cause::Auth,
        } => LoadError::Auth(format!(
            "{} (this client's key is from {})",
            proto::peer_text(&message),
            auth.key_source()
        )),
        Ctrl::Error { message, .. } => LoadError::Agent(proto::peer_text(&message)),
        other => LoadError::Protocol(format!(
            "expected the agent's answer, got {}; check that it is a tcplab agent of this \
             version",
            other.kind()
        )),
    }
}

fn unexpected(what: &str, got: &Answer) -> LoadError {
    // Named by its kind: its contents (facts, a whole result) may be large.
    let kind = match got {
        Answer::Facts(_) => "facts",
        Answer::Run { .. } => "a run",
        Answer::Sysctl { .. } => "sysctls",
        Answer::Released => "released",
    };
    LoadError::Protocol(format!(
        "asked for {what}, got the answer {kind}; check that the agent is a tcplab of protocol \
         version {}",
        proto::VERSION
    ))
}

/// What the agent at `agent` is and the machine it sees.
pub fn facts(agent: SocketAddr, auth: &ClientAuth, timeout: Duration) -> Result<AgentFacts> {
    let mut ctrl = open(agent, auth, Ask::Facts, timeout)?;
    match answer(&mut ctrl, auth)? {
        Answer::Facts(f) => Ok(*f),
        other => Err(unexpected("facts", &other)),
    }
}

/// The agent's clock offset from ours, from `probes` (1..=64) Ping/Pong exchanges on one
/// connection; each wait is bounded by `timeout`.
pub fn clock(
    agent: SocketAddr,
    auth: &ClientAuth,
    probes: u32,
    timeout: Duration,
) -> Result<ClockOffset> {
    if !(1..=MAX_PROBES).contains(&probes) {
        return Err(LoadError::config(
            "probes",
            format!("{probes} clock probes: give 1-{MAX_PROBES}"),
        ));
    }
    let mut ctrl = open(agent, auth, Ask::Clock { probes }, timeout)?;
    let mut samples = Vec::with_capacity(probes as usize);
    for _ in 0..probes {
        let t1_ns = tcplab_load::clock::realtime_ns();
        proto::write_frame(&mut ctrl, &Ctrl::Ping { t1_ns })?;
        let msg = proto::read_frame(&mut ctrl)?;
        let t4_ns = tcplab_load::clock::realtime_ns();
        match msg {
            Ctrl::Pong {
                t1_ns: echoed,
                t2_ns,
                t3_ns,
            } if echoed == t1_ns => samples.push(ClockSample {
                t1_ns,
                t2_ns,
                t3_ns,
                t4_ns,
            }),
            Ctrl::Pong { .. } => {
                return Err(LoadError::Protocol(
                    "the agent's Pong echoes another Ping; check that it is a tcplab agent of \
                     this version"
                        .into(),
                ));
            }
            other => return Err(refusal(other, auth)),
        }
    }
    estimate_offset(&samples).ok_or_else(|| {
        LoadError::Agent(
            "every clock probe was impossible (a clock stepped while probing); ask again".into(),
        )
    })
}

/// Runs `test` with the agent at `agent` as the CLIENT, toward the agent at `target` (pinning
/// `target_key`; None: `target` must be a loopback or lab address); returns the result as
/// `tcplab <workload> --json` prints it. `timeout` bounds connecting and the handshake, and
/// the wait for the result beyond the test's own length (its duration, when it has one), so
/// a count-bounded test needs a `timeout` it fits in.
pub fn run_from(
    agent: SocketAddr,
    auth: &ClientAuth,
    target: SocketAddr,
    target_key: Option<PublicKey>,
    test: WorkloadSpec,
    timeout: Duration,
) -> Result<tcplab_load::Report> {
    let length = Needs::of(&test)
        .and_then(|n| n.duration)
        .unwrap_or_default();
    let ask = Ask::Run {
        target,
        server_key: target_key.map(|k| k.to_string()),
        test: Box::new(test),
    };
    let mut ctrl = open(agent, auth, ask, timeout)?;
    ctrl.set_read_timeout(Some(timeout + length))
        .map_err(|e| LoadError::io("setting the control timeout", e))?;
    match answer(&mut ctrl, auth)? {
        Answer::Run { result } => Ok(*result),
        other => Err(unexpected("a run", &other)),
    }
}

/// `net.` sysctls set on an agent's host (its network namespace) for as long as this lives:
/// a thread renews the lease every third of it; [`SysctlHold::release`] (or dropping it, best
/// effort) puts the old values back. If this program dies, the agent restores on its own when
/// the connection closes or the lease runs out.
#[derive(Debug)]
pub struct SysctlHold {
    agent: SocketAddr,
    ctrl: Channel,
    auth: Arc<ClientAuth>,
    previous: Vec<(String, String)>,
    renewer: Option<Renewer>,
}

/// The renewing thread: it stops when `stop` is dropped; `lost` says why renewing failed.
#[derive(Debug)]
struct Renewer {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
    lost: Arc<Mutex<Option<String>>>,
}

impl SysctlHold {
    /// Sets `set` ((key, value) pairs, keys under `net.`) on the agent at `agent`, which holds
    /// them while renewed within `lease` (100 ms to 1 h; needs the agent's `--allow-sysctl`).
    pub fn acquire(
        agent: SocketAddr,
        auth: &ClientAuth,
        set: Vec<(String, String)>,
        lease: Duration,
    ) -> Result<Self> {
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        let mut ctrl = open(agent, auth, Ask::Sysctl { set, lease_ms }, HOLD_TIMEOUT)?;
        let previous = match answer(&mut ctrl, auth)? {
            Answer::Sysctl { previous } => previous,
            other => return Err(unexpected("sysctls", &other)),
        };
        let renewer = renew_every(
            ctrl.try_clone()
                .map_err(|e| LoadError::io("sharing the control connection", e))?,
            lease / 3,
        )?;
        Ok(Self {
            agent,
            ctrl,
            auth: Arc::new(auth.clone()),
            previous,
            renewer: Some(renewer),
        })
    }

    /// The values the hold replaced, (key, value before), in the order asked.
    pub fn previous(&self) -> &[(String, String)] {
        &self.previous
    }

    /// Restores the old values and waits for the agent to confirm.
    pub fn release(mut self) -> Result<()> {
        self.finish(HOLD_TIMEOUT)
    }

    /// Stops renewing, sends Release, waits up to `wait` for `Released`.
    fn finish(&mut self, wait: Duration) -> Result<()> {
        let Some(renewer) = self.renewer.take() else {
            return Ok(());
        };
        drop(renewer.stop);
        let _ = renewer.thread.join();
        let lost = renewer.lost.lock().map(|l| l.clone()).unwrap_or(None);
        let gone = |e: LoadError| {
            LoadError::Agent(format!(
                "the agent at {} did not confirm the release ({e}){}; it restores on its own \
                 when the connection closes or the lease runs out",
                self.agent,
                lost.as_deref()
                    .map(|l| format!("; renewing had failed: {l}"))
                    .unwrap_or_default()
            ))
        };
        proto::write_frame(&mut self.ctrl, &Ctrl::Release).map_err(gone)?;
        self.ctrl
            .set_read_timeout(Some(wait))
            .map_err(|e| LoadError::io("setting the control timeout", e))?;
        match answer(&mut self.ctrl, &self.auth) {
            Ok(Answer::Released) => Ok(()),
            Ok(other) => Err(unexpected("a release", &other)),
            Err(e @ LoadError::Agent(_)) => Err(e),
            Err(e) => Err(gone(e)),
        }
    }
}

impl Drop for SysctlHold {
    fn drop(&mut self) {
        let _ = self.finish(DROP_TIMEOUT);
    }
}

/// Starts the thread that sends Renew every `every` until its sender is dropped.
fn renew_every(mut ctrl: Channel, every: Duration) -> Result<Renewer> {
    let (stop, stopped) = mpsc::channel::<()>();
    let lost = Arc::new(Mutex::new(None));
    let lost2 = lost.clone();
    let thread = std::thread::Builder::new()
        .name("tcplab-renew".into())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                if let Err(e) = proto::write_frame(&mut ctrl, &Ctrl::Renew) {
                    if let Ok(mut l) = lost2.lock() {
                        *l = Some(e.to_string());
                    }
                    return;
                }
            }
        })
        .map_err(|e| LoadError::io("starting the renewing thread", e))?;
    Ok(Renewer { stop, thread, lost })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe through a path with one-way delays `up` and `down` and an agent turnaround
    /// `turn`, to an agent whose clock is `offset` ahead, sent at `t1`.
    fn probe(t1: i64, offset: i64, up: i64, down: i64, turn: i64) -> ClockSample {
        let t2 = t1 + up + offset;
        let t3 = t2 + turn;
        ClockSample {
            t1_ns: t1,
            t2_ns: t2,
            t3_ns: t3,
            t4_ns: t3 - offset + down,
        }
    }

    #[test]
    fn the_estimate_is_within_its_uncertainty_of_the_truth() {
        for offset in [0i64, 1_234_567, -987_654_321, 5_000_000_000] {
            let samples = [
                probe(1_000, offset, 900_000, 100_000, 20_000),
                probe(2_000_000, offset, 40_000, 160_000, 5_000),
                probe(4_000_000, offset, 3_000_000, 50_000, 1_000),
                probe(9_000_000, offset, 70_000, 10_000, 300_000),
            ];
            let est = estimate_offset(&samples).expect("estimate");
            let err = (est.offset_ns - offset).unsigned_abs();
            assert!(
                err <= est.uncertainty_ns,
                "offset {offset}: estimate {est:?} off by {err}"
            );
            // The quickest probe (70 + 10 µs) was used, the turnaround left out.
            assert_eq!(est.min_rtt_ns, 80_000);
            assert_eq!(est.uncertainty_ns, 40_000);
            assert_eq!(est.probes, 4);
        }
    }

    #[test]
    fn symmetric_delays_give_the_exact_offset() {
        let est = estimate_offset(&[probe(0, -42_000, 25_000, 25_000, 7_000)]).expect("one");
        assert_eq!(est.offset_ns, -42_000);
    }

    #[test]
    fn impossible_samples_are_left_out() {
        let stepped = ClockSample {
            t1_ns: 100,
            t2_ns: 50,
            t3_ns: 10,
            t4_ns: 90,
        };
        assert!(estimate_offset(&[stepped]).is_none());
        assert!(estimate_offset(&[]).is_none());
        let good = probe(0, 10, 5, 5, 1);
        assert_eq!(
            estimate_offset(&[stepped, good])
                .expect("one good")
                .offset_ns,
            10
        );
    }
}
