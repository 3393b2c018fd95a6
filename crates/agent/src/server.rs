//! The agent's server: one listener for control connections, admitted by [`crate::admit`]
//! (address scope, connection rate, handshake slots), each on its own thread through the
//! authenticated handshake and the limits; per test a data listener on the same IP with the
//! test's socket options that takes only the control connection's peer, then the workload's
//! server routine (`tcplab_load::serve::routine`), guarded by the [`crate::watch`]. Each thread
//! inherits the network namespace of the thread that called [`Server::serve`], so a server
//! entered into a lab host stays there.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tcplab_results::spec::{WorkloadKind, WorkloadSpec};

use tcplab_auth::scope::{LAB_RANGES, is_lab_or_loopback, is_wildcard};
use tcplab_auth::{Channel, PublicKey};
use tcplab_load::bpf;
use tcplab_load::error::{LoadError, Result};
use tcplab_load::net::{self, ConnectError};
use tcplab_load::proto::{self, Ask, Cause, Ctrl};
use tcplab_load::serve::routine;
use tcplab_load::serve_ctx::ServerCtx;
use tcplab_load::sockopt::{SockOpts, set_timeouts};

use crate::admit::Admission;
use crate::ask::{self, AskCtx};
use crate::handshake::{self, Keys, Request};
use crate::hold::{self, Holds};
use crate::limits::Needs;
use crate::watch::Watch;
use crate::{AgentConfig, Counts, LogGate, Refusal};

/// The name of every connection's thread (and, inherited, of its workload's threads).
pub const CONN_THREAD: &str = "tcplab-conn";

/// How often the accept loop looks at the stop flag and the running tests.
const POLL: Duration = Duration::from_millis(100);

/// A tcplab server: `tcplab serve --listen ADDR:PORT` (default port [`proto::DEFAULT_PORT`]).
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    agent: Agent,
}

/// What every connection's thread shares.
#[derive(Debug)]
struct Agent {
    config: AgentConfig,
    admission: Mutex<Admission>,
    watch: Watch,
    log: LogGate,
    /// Held sysctls (`--allow-sysctl`); dropping them restores whatever is still held.
    holds: Option<Holds>,
    /// What a leftover journal held, restored when the agent started.
    restored: Vec<(String, String)>,
    /// Asks other than Run in progress (each holds a thread; a sysctl hold, for long).
    asks: AtomicU32,
}

impl Server {
    /// Binds a server for use inside this program (a lab run, a test):
    /// [`AgentConfig::in_process`], so `addr` must be a loopback or lab address (or a wildcard,
    /// then filtered to those). A busy port is [`LoadError::Listen`] naming the address.
    pub fn bind(addr: SocketAddr) -> Result<Self> {
        Self::with_config(addr, AgentConfig::in_process()?)
    }

    /// Binds an agent with `config`. Without client keys (and without `insecure`), a specific
    /// address outside loopback and lab ranges is refused, and a wildcard is filtered to them.
    pub fn with_config(addr: SocketAddr, config: AgentConfig) -> Result<Self> {
        let lab_only = config.lab_only();
        if lab_only && !is_wildcard(addr.ip()) && !is_lab_or_loopback(addr.ip()) {
            return Err(LoadError::config(
                "listen",
                format!(
                    "{} is not a loopback or lab address ({LAB_RANGES}) and there are no --keys: \
                     an unauthenticated server serves only those; give --keys FILE (clients' \
                     public keys, see `tcplab key gen`) to serve it, or --insecure",
                    addr.ip()
                ),
            ));
        }
        let listener = match net::listen_with(addr, &SockOpts::default(), 128, |fd| {
            if lab_only {
                bpf::attach(fd, &bpf::only_lab())
            } else {
                Ok(())
            }
        }) {
            Ok(l) => l,
            Err(ConnectError::Io(source)) => return Err(LoadError::Listen { addr, source }),
            Err(ConnectError::Option(e)) => return Err(e),
        };
        set_timeouts(listener.as_raw_fd(), POLL)
            .map_err(|e| LoadError::io("setting the accept timeout", e))?;
        let admission = Mutex::new(Admission::new(config.limits.clone()));
        let (holds, restored) = if config.allow_sysctl {
            let journal = config.journal.clone().unwrap_or_else(hold::default_journal);
            let (h, r) = Holds::open(&journal)?;
            (Some(h), r)
        } else {
            (None, Vec::new())
        };
        Ok(Self {
            listener,
            agent: Agent {
                config,
                admission,
                watch: Watch::default(),
                log: LogGate::default(),
                holds,
                restored,
                asks: AtomicU32::new(0),
            },
        })
    }

    /// The bound control address (useful after binding port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| LoadError::io("reading the listen address", e))
    }

    /// The server's public key (clients pin it with `--server-key`).
    pub fn public_key(&self) -> PublicKey {
        self.agent.config.key.public()
    }

    /// The agent's configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.agent.config
    }

    /// The sysctls a leftover journal held, restored when this agent started (`--journal`).
    pub fn restored_at_start(&self) -> &[(String, String)] {
        &self.agent.restored
    }

    /// How many sysctls clients hold now (`--allow-sysctl`).
    pub fn held_sysctls(&self) -> usize {
        self.agent.holds.as_ref().map_or(0, Holds::len)
    }

    /// What the agent holds now (handshakes, tests, threads) and what it has refused, by the
    /// limit or check that refused it.
    pub fn counts(&self) -> Counts {
        self.agent.admission().counts()
    }

    /// Serves tests and asks until `stop` is set or `max_tests` connections were admitted;
    /// each connection runs on its own thread, and all are joined before returning. Once
    /// `stop` is set, running tests are stopped (their clients get a report saying why) and
    /// held sysctls restored, so the return is prompt.
    pub fn serve(&self, stop: &AtomicBool, max_tests: Option<u64>) -> Result<()> {
        let mut handled = 0u64;
        let agent = &self.agent;
        std::thread::scope(|scope| {
            while !stop.load(Ordering::Relaxed) && max_tests.is_none_or(|m| handled < m) {
                agent.watch.tick(Instant::now(), &agent.config.limits);
                match self.listener.accept() {
                    Ok((ctrl, peer)) => {
                        if let Some(ctrl) = agent.admit(ctrl, peer) {
                            handled += 1;
                            // Named, so `ps -L` (and the tests) can tell the agent's threads;
                            // a workload's threads inherit the name.
                            let spawned = std::thread::Builder::new()
                                .name(CONN_THREAD.into())
                                .spawn_scoped(scope, move || agent.handle(ctrl, peer.ip(), stop));
                            if spawned.is_err() {
                                // The connection went with the closure; its slot did not.
                                let mut a = agent.admission();
                                a.handshake_done(peer.ip());
                                a.count_refusal("resources");
                            }
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::Interrupted
                                | io::ErrorKind::ConnectionAborted
                        ) => {}
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                        ) =>
                    {
                        // Out of descriptors or memory: the connection waits in the backlog
                        // until a test ends; the server does not.
                        agent.admission().count_refusal("resources");
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => return Err(LoadError::io("accepting a control connection", e)),
                }
            }
            if stop.load(Ordering::Relaxed) {
                // The scope joins every connection thread: running tests end now, and held
                // sysctls are restored by their threads, which watch `stop` too.
                agent.watch.stop_all(&Refusal::AgentStopping);
            }
            Ok(())
        })
    }
}

impl Agent {
    fn admission(&self) -> std::sync::MutexGuard<'_, Admission> {
        self.admission.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides, in the accept loop, whether a connection gets a thread: its addresses are in
    /// scope, its address is under its rate and a handshake slot is free. A refused one is
    /// told why in clear and closed.
    fn admit(&self, mut ctrl: TcpStream, peer: SocketAddr) -> Option<TcpStream> {
        if self.config.lab_only() {
            let local = ctrl.local_addr().map(|a| a.ip());
            if !is_lab_or_loopback(peer.ip()) || !local.is_ok_and(is_lab_or_loopback) {
                // The socket filter drops these; this is the second lock on the same door.
                self.admission().count_refusal("scope");
                return None;
            }
        }
        let now = tcplab_load::clock::now_ns();
        let verdict = self.admission().connect(peer.ip(), now);
        match verdict {
            Ok(()) => Some(ctrl),
            Err(r) => {
                self.say(&format!("refused {peer}: {r}"));
                let _ = ctrl.set_nonblocking(true);
                handshake::answer_clear(&mut ctrl, &deny(&r));
                // Read what the client already sent, so the close is a FIN (the refusal
                // arrives) rather than a reset (it may not).
                let mut sink = [0u8; 4096];
                for _ in 0..16 {
                    if !matches!(ctrl.read(&mut sink), Ok(n) if n > 0) {
                        break;
                    }
                }
                None
            }
        }
    }

    fn say(&self, line: &str) {
        if self.config.log {
            self.log.say(line);
        }
    }

    /// One connection: the handshake, then the test or the ask. Never panics on what a peer
    /// sends; every slot it takes is given back by a guard, however it ends.
    fn handle(&self, ctrl: TcpStream, ip: IpAddr, stop: &AtomicBool) {
        let slot = HandshakeSlot { agent: self, ip };
        let _ = ctrl.set_nodelay(true);
        // Best effort: a smaller buffer only costs the report's transfer some wake-ups.
        let buffer = i32::try_from(proto::CTRL_BUFFER).unwrap_or(i32::MAX);
        let _ = tcplab_load::sockopt::set_int(
            ctrl.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            buffer,
        );
        let limits = &self.config.limits;
        let _ = ctrl.set_write_timeout(Some(limits.handshake_timeout));
        let keys = Keys {
            me: &self.config.key,
            authorized: self.config.authorized.as_ref(),
        };
        let deadline = Instant::now() + limits.handshake_timeout;
        let (mut ctrl, request) = match handshake::accept(ctrl, keys, deadline) {
            Ok(x) => x,
            Err(rejected) => {
                self.admission().count_refusal(rejected.counter());
                self.say(&format!("refused {ip}: {rejected}"));
                return;
            }
        };
        drop(slot);
        match request {
            Request::Test(test) => {
                if let Some(_test_slot) = self.start_test(&mut ctrl, &test, ip) {
                    let _ = run_test(self, ctrl, test, ip);
                }
            }
            Request::Ask(Ask::Run {
                target,
                server_key,
                test,
            }) => {
                // The agent is the client here, but it spends what a test spends: the same
                // limits, the same slots.
                if let Some(_test_slot) = self.start_test(&mut ctrl, &test, ip) {
                    let _ = ask::run(&self.config, ctrl, target, server_key.as_deref(), *test);
                }
            }
            Request::Ask(other) => {
                let Some(_ask_slot) = self.start_ask(&mut ctrl, ip) else {
                    return;
                };
                let ctx = AskCtx {
                    config: &self.config,
                    holds: self.holds.as_ref(),
                    stop,
                    client: ip,
                };
                if let Err(e) = ask::serve(&ctx, ctrl, other) {
                    self.say(&format!("ask from {ip}: {e}"));
                }
            }
        }
    }

    /// Takes a place for an ask other than Run, or tells the client why not: as many may run
    /// at once as tests may (`--max-concurrent`), besides the tests, so a client holding
    /// sysctls or probing clocks cannot grow the agent's threads without bound.
    fn start_ask(&self, ctrl: &mut Channel, ip: IpAddr) -> Option<AskSlot<'_>> {
        let limit = self.config.limits.max_tests;
        let taken = self
            .asks
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok();
        if taken {
            return Some(AskSlot { agent: self });
        }
        self.admission().count_refusal("max-concurrent");
        self.say(&format!(
            "refused an ask from {ip}: {limit} asks in progress"
        ));
        let message = format!(
            "too many requests in progress: besides its tests, this agent answers at most \
             --max-concurrent {limit} asks (facts, clock, sysctl holds) at once; release a \
             sysctl hold or retry later"
        );
        let _ = refuse(ctrl, Ctrl::refusal(Cause::Busy, message));
        None
    }

    /// Validates a test and takes its place under the limits, or tells the client why not.
    fn start_test(
        &self,
        ctrl: &mut Channel,
        test: &WorkloadSpec,
        ip: IpAddr,
    ) -> Option<TestSlot<'_>> {
        if let Err(e) = test.validate() {
            let _ = refuse(ctrl, Ctrl::refusal(Cause::Invalid, e.to_string()));
            return None;
        }
        let Some(needs) = Needs::of(test) else {
            let _ = refuse(ctrl, Ctrl::refusal(Cause::Invalid, not_served(test.kind())));
            return None;
        };
        let started = self
            .config
            .limits
            .check(&needs)
            .and_then(|()| self.admission().start_test(needs.threads));
        if let Err(r) = started {
            if matches!(r, Refusal::Duration { .. } | Refusal::Bytes { .. }) {
                self.admission().count_refusal(r.flag());
            }
            self.say(&format!("refused a test from {ip}: {r}"));
            let _ = refuse(ctrl, deny(&r));
            return None;
        }
        Some(TestSlot {
            agent: self,
            threads: needs.threads,
        })
    }
}

/// A handshake slot, given back when dropped.
struct HandshakeSlot<'a> {
    agent: &'a Agent,
    ip: IpAddr,
}

impl Drop for HandshakeSlot<'_> {
    fn drop(&mut self) {
        self.agent.admission().handshake_done(self.ip);
    }
}

/// An ask's place, given back when dropped.
struct AskSlot<'a> {
    agent: &'a Agent,
}

impl Drop for AskSlot<'_> {
    fn drop(&mut self) {
        self.agent.asks.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running test's place, given back when dropped.
struct TestSlot<'a> {
    agent: &'a Agent,
    threads: u32,
}

impl Drop for TestSlot<'_> {
    fn drop(&mut self) {
        self.agent.admission().end_test(self.threads);
    }
}

fn deny(r: &Refusal) -> Ctrl {
    Ctrl::refusal(r.cause(), r.to_string())
}

/// Why a test of `kind` is not served over one data listener: rrul is a stream and an rr test
/// that its client opens side by side, http a web server's.
fn not_served(kind: WorkloadKind) -> String {
    format!(
        "this server runs stream, msgs, rr and crr tests, not {}: rrul's client opens its rr \
         and stream tests itself (run `tcplab rrul --to`), and http is measured against a web \
         server (`tcplab http --to ADDR[:PORT]`)",
        kind.name()
    )
}

/// Runs an admitted test: its data listener (taking only `client`), Ready, the workload, the
/// report (marked stopped if the watch stopped it).
fn run_test(agent: &Agent, mut ctrl: Channel, test: WorkloadSpec, client: IpAddr) -> Result<()> {
    let ip = ctrl
        .local_addr()
        .map_err(|e| LoadError::io("reading the control address", e))?
        .ip();
    let Some(serve) = routine(&test) else {
        return refuse(
            &mut ctrl,
            Ctrl::refusal(Cause::Invalid, not_served(test.kind())),
        );
    };
    let opts = test.socket().clone();
    let only_client = bpf::only_from(client);
    let listener = match net::listen_with(SocketAddr::new(ip, 0), &opts, 4096, |fd| {
        bpf::attach(fd, &only_client)
    }) {
        Ok(l) => l,
        Err(ConnectError::Option(e)) => {
            return refuse(
                &mut ctrl,
                Ctrl::refusal(Cause::Invalid, format!("server: {e}")),
            );
        }
        Err(ConnectError::Io(e)) => {
            return refuse(
                &mut ctrl,
                Ctrl::refusal(
                    Cause::Failed,
                    format!("server cannot open a data port: {e}"),
                ),
            );
        }
    };
    set_timeouts(listener.as_raw_fd(), POLL)
        .map_err(|e| LoadError::io("setting the accept timeout", e))?;
    let data_port = listener
        .local_addr()
        .map_err(|e| LoadError::io("reading the data port", e))?
        .port();
    let timeout = test.timeout().min(agent.config.limits.idle_timeout);
    let _ = ctrl.set_write_timeout(Some(timeout));
    // The namespace's counters before the client can connect: the test's own connection
    // handshakes (crr's accept queue) are inside what moved.
    let counters_before = tcplab_load::sysinfo::all_counters();
    proto::write_frame(&mut ctrl, &Ctrl::Ready { data_port })?;
    let watched = agent.watch.add(ctrl.socket(), &listener);
    let mut ctx = ServerCtx {
        ctrl,
        listener,
        timeout,
        opts,
        client,
        guard: watched.test().clone(),
    };
    let mut report = serve(&mut ctx);
    report.view.counters =
        tcplab_results::peer::moved(&counters_before, &tcplab_load::sysinfo::all_counters());
    // A listening socket's tcp_info holds its accept-queue limit in `tcpi_sacked`.
    report.view.listen_backlog =
        tcplab_load::tcpinfo::read(ctx.listener.as_raw_fd()).map(|t| t.sacked);
    if let Some(why) = watched.test().stopped() {
        report.complete = false;
        report.incomplete_reason = Some(why.to_string());
        report.stopped = Some(why.cause());
        agent.admission().count_refusal(why.flag());
    }
    drop(watched);
    let _ = ctx.ctrl.set_write_timeout(Some(ctx.timeout));
    proto::write_frame(&mut ctx.ctrl, &Ctrl::Report(Box::new(report)))
}

fn refuse(ctrl: &mut Channel, msg: Ctrl) -> Result<()> {
    proto::write_frame(ctrl, &msg)?;
    Err(match msg {
        Ctrl::Error { message, cause } => LoadError::Refused { cause, message },
        _ => LoadError::Protocol("a refusal that is not an Error frame (a server bug)".into()),
    })
}
