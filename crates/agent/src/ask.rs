//! The agent's side of the asks: requests that come in place of a test's Hello
//! (`tcplab_load::proto::Ask`). Facts and clock probes answer what a coordinator needs to know
//! about a host before measuring it; Run makes this agent the client of a test toward another
//! agent (the server admits it like a test first, see `server.rs`); Sysctl holds `net.` values
//! of this agent's network namespace for as long as the client renews its lease.
//!
//! Nothing here panics on what a peer sends: every frame is decoded into a [`Ctrl`] or refused
//! with a message that names the field or the agent's flag to fix.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tcplab_results::spec::WorkloadSpec;

use tcplab_auth::scope::{LAB_RANGES, is_lab_or_loopback};
use tcplab_auth::{Channel, ClientAuth, KeyList, PublicKey};
use tcplab_load::error::{LoadError, Result};
use tcplab_load::proto::{self, AgentFacts, Answer, Ask, Cause, Ctrl, MAX_PROBES};

use crate::AgentConfig;
use crate::hold::{self, Event, Holds, Lease, Step};

/// How often a held connection looks at the agent's stop flag.
const POLL: Duration = Duration::from_millis(100);
/// Longest a frame may take to arrive once its first byte has (a renewal is a few dozen).
const FRAME_WAIT: Duration = Duration::from_secs(5);

/// What an ask's thread shares with the agent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AskCtx<'a> {
    /// The agent's configuration.
    pub config: &'a AgentConfig,
    /// The held sysctls (None without `--allow-sysctl`).
    pub holds: Option<&'a Holds>,
    /// Set when the agent stops.
    pub stop: &'a AtomicBool,
    /// The client's address, for the log.
    pub client: IpAddr,
}

/// Answers one ask other than Run (which the server admits under the limits first and hands
/// to [`run`]). Returns the refusal or failure, for the agent's log.
pub(crate) fn serve(ctx: &AskCtx<'_>, mut ctrl: Channel, ask: Ask) -> Result<()> {
    let _ = ctrl.set_write_timeout(Some(ctx.config.limits.idle_timeout));
    match ask {
        Ask::Facts => answer(&mut ctrl, Answer::Facts(Box::new(facts(ctx.config)))),
        Ask::Clock { probes } => clock(ctx, &mut ctrl, probes),
        Ask::Sysctl { set, lease_ms } => sysctl(ctx, &mut ctrl, &set, lease_ms),
        Ask::Run { .. } => refuse(
            &mut ctrl,
            failed("Run must be admitted as a test first (an agent bug)"),
        ),
    }
}

fn answer(ctrl: &mut Channel, a: Answer) -> Result<()> {
    proto::write_frame(ctrl, &Ctrl::Answer(Box::new(a)))
}

/// Sends a refusal and returns it as the error.
fn refuse(ctrl: &mut Channel, msg: Ctrl) -> Result<()> {
    proto::write_frame(ctrl, &msg)?;
    Err(LoadError::Agent(match msg {
        Ctrl::Error { message, .. } => message,
        _ => String::new(),
    }))
}

/// The ask is wrong as sent: the client's usage to fix.
fn invalid(message: impl Into<String>) -> Ctrl {
    Ctrl::refusal(Cause::Invalid, message)
}

/// The agent tried and could not.
fn failed(message: impl Into<String>) -> Ctrl {
    Ctrl::refusal(Cause::Failed, message)
}

/// The agent's configuration does not allow it (a flag it was not started with).
fn not_allowed(message: impl Into<String>) -> Ctrl {
    Ctrl::refusal(Cause::Limit, message)
}

/// What this agent is and the machine it sees from its network namespace.
pub fn facts(config: &AgentConfig) -> AgentFacts {
    AgentFacts {
        tcplab: tcplab_host::facts::build().into(),
        protocol: proto::VERSION,
        authenticated: config.authorized.is_some(),
        allow_sysctl: config.allow_sysctl,
        facts: Some((config.machine)()),
        host: tcplab_host::facts::this_host(&[]).ok(),
    }
}

/// `probes` Ping/Pong exchanges, stamped with CLOCK_REALTIME on receipt and before sending.
fn clock(ctx: &AskCtx<'_>, ctrl: &mut Channel, probes: u32) -> Result<()> {
    if !(1..=MAX_PROBES).contains(&probes) {
        return refuse(
            ctrl,
            invalid(format!(
                "Clock probes {probes} is out of range: ask for 1-{MAX_PROBES}"
            )),
        );
    }
    let wait = ctx.config.limits.idle_timeout;
    for _ in 0..probes {
        let body = ctrl.recv_by(Some(Instant::now() + wait))?;
        let t2_ns = tcplab_load::clock::realtime_ns();
        match proto::decode(&body) {
            Ok(Ctrl::Ping { t1_ns }) => {
                let t3_ns = tcplab_load::clock::realtime_ns();
                proto::write_frame(
                    ctrl,
                    &Ctrl::Pong {
                        t1_ns,
                        t2_ns,
                        t3_ns,
                    },
                )?;
            }
            Ok(other) => {
                return refuse(
                    ctrl,
                    Ctrl::refusal(
                        Cause::Protocol,
                        format!("expected Ping, got {}", other.kind()),
                    ),
                );
            }
            Err(e) => return refuse(ctrl, failed(e.to_string())),
        }
    }
    Ok(())
}

/// Runs the client side of `test` toward the agent at `target` with this agent's key, and
/// answers with the result as `tcplab <workload> --json` prints it. The caller has admitted
/// the test under the limits.
pub(crate) fn run(
    config: &AgentConfig,
    mut ctrl: Channel,
    target: SocketAddr,
    server_key: Option<&str>,
    test: WorkloadSpec,
) -> Result<()> {
    let auth = match run_auth(config, target, server_key) {
        Ok(a) => Arc::new(a),
        Err(why) => return refuse(&mut ctrl, invalid(why)),
    };
    let _ = ctrl.set_write_timeout(Some(config.limits.idle_timeout));
    let workload = test.kind().name();
    let before = tcplab_load::sysinfo::all_counters();
    let outcome = auth.scoped(|| tcplab_load::client::run(&test, target, None));
    let msg = match outcome {
        Ok(mut result) => {
            // The caller is elsewhere: what moved in this host's TCP stack goes with the result
            // (the doctor reads a far client's retransmissions and drops from it).
            let after = tcplab_load::sysinfo::all_counters();
            result.meta_mut().client_counters = Some(tcplab_results::peer::moved(&before, &after));
            Ctrl::Answer(Box::new(Answer::Run {
                result: Box::new(result),
            }))
        }
        Err(e) => Ctrl::refusal(
            run_cause(&e),
            format!("running {workload} toward {target}: {e}"),
        ),
    };
    proto::write_frame(&mut ctrl, &msg)
}

/// The credentials the agent runs a test with: its own key, pinning `server_key`; without a
/// pin, only loopback and lab targets (as any unpinned client), and an agent without `--keys`
/// reaches nothing else either.
fn run_auth(
    config: &AgentConfig,
    target: SocketAddr,
    server_key: Option<&str>,
) -> std::result::Result<ClientAuth, String> {
    let lab = is_lab_or_loopback(target.ip());
    if config.lab_only() && !lab {
        return Err(format!(
            "this agent has no --keys, so it runs tests only toward loopback and lab addresses \
             ({LAB_RANGES}), and {target} is neither; start it with --keys FILE"
        ));
    }
    let auth = ClientAuth::new(config.key.clone(), "this agent's key (its --key)");
    match server_key {
        Some(line) => {
            let (key, _) = PublicKey::parse(line).map_err(|e| format!("server_key: {e}"))?;
            Ok(auth.with_pins(KeyList::of([key]), "the Run ask's server_key"))
        }
        None if lab => Ok(auth),
        None => Err(format!(
            "server_key: {target} is not a loopback or lab address ({LAB_RANGES}), so the \
             target agent's key must be pinned: give its public key (it prints it at start)"
        )),
    }
}

/// The cause a failed Run passes on: the target's own refusal as it said it, a usage error
/// of the test as the client's, anything else as the agent's failure. The agent failing to
/// authenticate the target (or being refused by it) is the ask's to fix (its `server_key`, the
/// target's `--keys`), not the coordinator's key, which this agent accepted.
fn run_cause(e: &LoadError) -> Cause {
    match e {
        LoadError::Refused { cause, .. } => *cause,
        LoadError::Auth(_) => Cause::Invalid,
        e if e.is_usage() => Cause::Invalid,
        _ => Cause::Failed,
    }
}

/// Holds `set` for the client: journal and apply, answer the old values, then keep them while
/// the lease is renewed; restores on Release (answered), on close, on lease end, on stop.
fn sysctl(
    ctx: &AskCtx<'_>,
    ctrl: &mut Channel,
    set: &[(String, String)],
    lease_ms: u64,
) -> Result<()> {
    let holds = match ctx.holds {
        Some(h) if ctx.config.allow_sysctl && ctx.config.authorized.is_some() => h,
        _ => {
            return refuse(
                ctrl,
                not_allowed(
                    "this agent does not allow sysctl changes: start it with --allow-sysctl \
                     (and --keys FILE listing this client's key)",
                ),
            );
        }
    };
    let lease = match hold::check_ask(set, lease_ms) {
        Ok(l) => l,
        Err(why) => return refuse(ctrl, invalid(format!("Sysctl: {why}"))),
    };
    let owner = holds.new_owner();
    let previous = match holds.acquire(owner, set) {
        Ok(p) => p,
        Err(why) => return refuse(ctrl, failed(format!("Sysctl: {why}"))),
    };
    let guard = Restore { holds, owner };
    answer(ctrl, Answer::Sysctl { previous })?;
    let step = hold_while_renewed(ctx, ctrl, lease);
    let problems = guard.now();
    match step {
        Step::Release if problems.is_empty() => answer(ctrl, Answer::Released),
        Step::Release => refuse(ctrl, failed(problems.join("; "))),
        Step::Restore(why) => {
            if ctx.config.log {
                eprintln!(
                    "tcplab serve: restored the sysctls {} held: {why}",
                    ctx.client
                );
            }
            for p in &problems {
                eprintln!("tcplab serve: {p}");
            }
            Ok(())
        }
        Step::Hold => Ok(()),
    }
}

/// Restores a hold when dropped (an error or a panic on the way), or when told to.
struct Restore<'a> {
    holds: &'a Holds,
    owner: u64,
}

impl Restore<'_> {
    /// Restores now; returns the problems.
    fn now(self) -> Vec<String> {
        let problems = self.holds.release(Some(self.owner));
        std::mem::forget(self);
        problems
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        for p in self.holds.release(Some(self.owner)) {
            eprintln!("tcplab serve: {p}");
        }
    }
}

/// Waits for Renew and Release frames until the hold ends; returns how it ended.
fn hold_while_renewed(ctx: &AskCtx<'_>, ctrl: &mut Channel, length: Duration) -> Step {
    let mut lease = Lease::new(Instant::now(), length);
    loop {
        let event = if ctx.stop.load(Ordering::Relaxed) {
            Event::Stopping
        } else {
            next_event(ctrl, lease.wait(Instant::now(), POLL))
        };
        match lease.step(Instant::now(), event) {
            Step::Hold => {}
            end => return end,
        }
    }
}

/// The next frame within `wait`, as a lease event. Waits with poll(2), not a read timeout,
/// so a wait that ends never cuts a frame in half.
fn next_event(ctrl: &mut Channel, wait: Duration) -> Event {
    let mut pfd = libc::pollfd {
        fd: ctrl.socket().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
    // Safety: one live pollfd for the duration of the call.
    match unsafe { libc::poll(&mut pfd, 1, ms) } {
        0 => return Event::Quiet,
        n if n < 0 => {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Event::Quiet;
            }
            return Event::Closed(e.to_string());
        }
        _ => {}
    }
    match ctrl
        .recv_by(Some(Instant::now() + FRAME_WAIT))
        .map_err(LoadError::from)
        .and_then(|b| proto::decode(&b))
    {
        Ok(Ctrl::Renew) => Event::Renew,
        Ok(Ctrl::Release) => Event::Release,
        Ok(other) => Event::Unexpected(other.kind()),
        Err(e) => Event::Closed(e.to_string()),
    }
}
