//! The asks of an agent (`tcplab_agent::remote`) against agents started in this process on
//! loopback: facts, clock probes, a test run by one agent toward another, and sysctls held
//! under a lease. Sysctl tests run their agent on a thread entered into a fresh network
//! namespace (unshare(CLONE_NEWNET), lo up), so the host's own values are never touched;
//! they need root and assert it. Every agent is stopped by a guard, every wait is bounded.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tcplab_results::spec::WorkloadSpec;

use tcplab_agent::Server;
use tcplab_agent::remote::{self, SysctlHold};
use tcplab_agent::{AgentConfig, Limits};
use tcplab_auth::noise::Initiator;
use tcplab_auth::{Channel, ClientAuth, KeyList, KeyPair, PublicKey};
use tcplab_load::proto::{self, Answer, Ask, Ctrl};
use tcplab_load::{LoadError, Report, msgs};

const WAIT: Duration = Duration::from_secs(5);

/// An agent served from its own thread; dropping it stops it (and restores what it holds).
struct TestAgent {
    addr: SocketAddr,
    key: PublicKey,
    /// Its network namespace, when it has its own (kept open to read values in it).
    netns: Option<OwnedFd>,
    /// What a leftover journal held, restored at start.
    restored: Vec<(String, String)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How to start one.
struct Setup {
    /// Clients allowed (None: no --keys, loopback and lab only).
    clients: Option<Vec<PublicKey>>,
    /// The agent's own key.
    key: KeyPair,
    /// `--allow-sysctl` with this `--journal`.
    journal: Option<PathBuf>,
    /// In a fresh network namespace (root).
    own_netns: bool,
    /// Runs in the agent's namespace before it binds (to leave a journal behind, say).
    before: Option<Box<dyn FnOnce() + Send>>,
    /// `--max-concurrent`.
    max_concurrent: u32,
}

impl Setup {
    fn keyed(clients: &[PublicKey]) -> Self {
        Self {
            clients: Some(clients.to_vec()),
            key: KeyPair::generate("agent").expect("key"),
            journal: None,
            own_netns: false,
            before: None,
            max_concurrent: Limits::default().max_tests,
        }
    }

    fn config(&self) -> AgentConfig {
        AgentConfig {
            key: self.key.clone(),
            authorized: self.clients.clone().map(KeyList::of),
            keys_source: "the test".into(),
            insecure: false,
            limits: Limits {
                handshake_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(5),
                max_tests: self.max_concurrent,
                ..Limits::default()
            },
            log: true,
            allow_sysctl: self.journal.is_some(),
            journal: self.journal.clone(),
            machine: tcplab_host::facts::machine,
        }
    }
}

/// Moves the calling thread into a new network namespace with lo up.
fn enter_fresh_netns() -> OwnedFd {
    // Safety: CLONE_NEWNET changes only this thread's network namespace.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
    let lo = tcplab_host::rtnl::ifindex("lo").expect("lo");
    tcplab_host::rtnl::Rtnl::open()
        .expect("netlink")
        .set_link(lo, true, None, None)
        .expect("lo up");
    std::fs::File::open("/proc/thread-self/ns/net")
        .expect("nsfs")
        .into()
}

impl TestAgent {
    fn start(mut setup: Setup) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("test-agent".into())
            .spawn(move || {
                let ns = setup.own_netns.then(enter_fresh_netns);
                if let Some(f) = setup.before.take() {
                    f();
                }
                let server =
                    match Server::with_config("127.0.0.1:0".parse().expect("addr"), setup.config())
                    {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                let started = (
                    server.local_addr().expect("addr"),
                    server.public_key(),
                    ns,
                    server.restored_at_start().to_vec(),
                );
                let _ = tx.send(Ok(started));
                let _ = server.serve(&s2, None);
            })
            .expect("spawn");
        let (addr, key, netns, restored) = rx
            .recv_timeout(WAIT)
            .expect("agent started")
            .unwrap_or_else(|e| panic!("agent: {e}"));
        Self {
            addr,
            key,
            netns,
            restored,
            stop,
            thread: Some(thread),
        }
    }

    /// Runs `f` on a thread in the agent's network namespace (its 127.0.0.1 is reachable only
    /// from there; connections opened there keep working from anywhere).
    fn within<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let Some(ns) = &self.netns else {
            return f();
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                tcplab_lab::netns::enter(ns.as_fd()).expect("setns");
                f()
            })
            .join()
            .expect("thread in the agent's namespace")
        })
    }

    /// A sysctl's value in the agent's network namespace.
    fn sysctl(&self, key: &str) -> String {
        assert!(self.netns.is_some(), "an agent with its own namespace");
        self.within(|| tcplab_host::sysctl::read(key).expect("read"))
    }

    /// Waits up to `within` for `key` to read `value` in the agent's namespace.
    fn sysctl_becomes(&self, key: &str, value: &str, within: Duration) -> bool {
        let end = Instant::now() + within;
        loop {
            if self.sysctl(key) == value {
                return true;
            }
            if Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.shut();
    }
}

fn client(agent: &TestAgent, key: &KeyPair) -> ClientAuth {
    ClientAuth::new(key.clone(), "the test's key").with_pins(KeyList::of([agent.key]), "the pin")
}

fn assert_root() {
    // Safety: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "this test needs root (a network namespace of its own for the agent)"
    );
}

fn msgs_test(count: u64) -> WorkloadSpec {
    WorkloadSpec::Msgs(msgs::MsgsConfig {
        count,
        size: 1,
        timeout_ms: 5_000,
        ..msgs::MsgsConfig::default()
    })
}

#[test]
fn facts_round_trip_authenticated_and_not() {
    let me = KeyPair::generate("coordinator").expect("key");
    let keyed = TestAgent::start(Setup::keyed(&[me.public()]));
    let f = remote::facts(keyed.addr, &client(&keyed, &me), WAIT).expect("facts");
    assert!(f.authenticated && !f.allow_sysctl, "{f:?}");
    assert_eq!(f.protocol, proto::VERSION);
    assert_eq!(f.tcplab, env!("CARGO_PKG_VERSION"));
    let machine = f.facts.as_ref().expect("the agent's machine");
    assert!(!machine.kernel_release.is_empty(), "{machine:?}");
    assert!(machine.hz.hz > 0, "{machine:?}");

    let open = TestAgent::start(Setup {
        clients: None,
        ..Setup::keyed(&[])
    });
    let anyone = ClientAuth::ephemeral().expect("key");
    let f = remote::facts(open.addr, &anyone, WAIT).expect("facts");
    assert!(!f.authenticated, "{f:?}");

    // A key the keyed agent does not list is refused, naming --keys.
    let e = remote::facts(keyed.addr, &client(&keyed, &anyone.key().clone()), WAIT)
        .expect_err("unlisted key");
    assert!(
        matches!(e, LoadError::Auth(_)) && e.to_string().contains("--keys"),
        "{e}"
    );
}

#[test]
fn clock_on_loopback_is_within_its_uncertainty() {
    let me = KeyPair::generate("coordinator").expect("key");
    let agent = TestAgent::start(Setup::keyed(&[me.public()]));
    let auth = client(&agent, &me);
    let c = remote::clock(agent.addr, &auth, 16, WAIT).expect("clock");
    eprintln!("clock on loopback: {c:?}");
    assert_eq!(c.probes, 16);
    assert!(
        c.offset_ns.unsigned_abs() <= c.uncertainty_ns + 1_000_000,
        "{c:?}"
    );
    assert!(c.min_rtt_ns < 100_000_000, "{c:?}");
    let e = remote::clock(agent.addr, &auth, 65, WAIT).expect_err("too many");
    assert!(e.to_string().contains("1-64"), "{e}");
}

#[test]
fn run_from_one_agent_toward_another() {
    let me = KeyPair::generate("coordinator").expect("key");
    let x_key = KeyPair::generate("x").expect("key");
    // Y takes tests from X's key only; X takes asks from the coordinator.
    let y = TestAgent::start(Setup::keyed(&[x_key.public()]));
    let x = TestAgent::start(Setup {
        key: x_key,
        ..Setup::keyed(&[me.public()])
    });
    let result = remote::run_from(
        x.addr,
        &client(&x, &me),
        y.addr,
        Some(y.key),
        msgs_test(2_000),
        Duration::from_secs(20),
    )
    .expect("run from X toward Y");
    let Report::Msgs(m) = &result else {
        panic!("a msgs result: {result:?}")
    };
    assert!(m.meta.complete, "{:?}", m.meta.incomplete_reason);
    assert_eq!(m.config.count, 2_000);
    assert_eq!(m.meta.target, y.addr.to_string());
    assert_eq!(m.runs.first().map(|r| r.received), Some(2_000));
    // The caller is not on X: what moved in X's TCP stack comes with the result (the doctor
    // between two agents reads the client's retransmissions from it).
    let moved = m.meta.client_counters.as_ref().expect("X's counters");
    assert!(
        moved.get("Tcp.ActiveOpens").is_some_and(|n| *n >= 1),
        "the client's connection is among X's counters: {moved:?}"
    );
}

/// rrul is a client's two tests side by side: an agent asked to Run it runs both toward the
/// other agent, and a Hello of rrul itself (which no single server routine runs) is refused
/// as the client's usage, naming what to run instead.
#[test]
fn run_from_runs_rrul_and_a_hello_of_rrul_is_refused_as_invalid() {
    let me = KeyPair::generate("coordinator").expect("key");
    let x_key = KeyPair::generate("x").expect("key");
    let y = TestAgent::start(Setup::keyed(&[x_key.public(), me.public()]));
    let x = TestAgent::start(Setup {
        key: x_key,
        ..Setup::keyed(&[me.public()])
    });
    let rrul = tcplab_results::rrul::RrulConfig {
        flows: 1,
        before_ms: 200,
        during_ms: 300,
        after_ms: 200,
        drain_ms: 200,
        interval_ms: 100,
        ..Default::default()
    };
    let result = remote::run_from(
        x.addr,
        &client(&x, &me),
        y.addr,
        Some(y.key),
        WorkloadSpec::Rrul(rrul.clone()),
        Duration::from_secs(20),
    )
    .expect("rrul from X toward Y");
    let Report::Rrul(r) = &result else {
        panic!("an rrul result: {result:?}")
    };
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    assert!(
        r.summary.inflation.during_p99_us.is_some(),
        "{:?}",
        r.summary
    );

    let e = tcplab_load::session::Session::open_with(
        y.addr,
        WorkloadSpec::Rrul(rrul),
        WAIT,
        &client(&y, &me),
    )
    .expect_err("a single rrul test is not served");
    assert!(
        matches!(
            e,
            LoadError::Refused {
                cause: proto::Cause::Invalid,
                ..
            }
        ) && e.to_string().contains("tcplab rrul --to"),
        "{e}"
    );
    assert!(e.is_usage(), "{e}");
}

#[test]
fn run_from_with_a_wrong_pin_is_refused() {
    let me = KeyPair::generate("coordinator").expect("key");
    let x_key = KeyPair::generate("x").expect("key");
    let y = TestAgent::start(Setup::keyed(&[x_key.public()]));
    let x = TestAgent::start(Setup {
        key: x_key,
        ..Setup::keyed(&[me.public()])
    });
    let wrong = KeyPair::generate("not y").expect("key").public();
    let e = remote::run_from(
        x.addr,
        &client(&x, &me),
        y.addr,
        Some(wrong),
        msgs_test(100),
        Duration::from_secs(10),
    )
    .expect_err("wrong pin");
    let msg = e.to_string();
    assert!(matches!(e, LoadError::Agent(_)), "{msg}");
    assert!(
        msg.contains("running msgs toward") && msg.contains("server_key"),
        "{msg}"
    );
    // A target outside loopback and lab ranges without a pin is refused before connecting.
    let e = remote::run_from(
        x.addr,
        &client(&x, &me),
        "192.0.2.1:5301".parse().expect("addr"),
        None,
        msgs_test(100),
        Duration::from_secs(10),
    )
    .expect_err("unpinned, not lab");
    assert!(e.to_string().contains("server_key"), "{e}");
}

#[test]
fn stopping_the_agent_ends_its_running_tests() {
    let me = KeyPair::generate("coordinator").expect("key");
    let mut agent = TestAgent::start(Setup::keyed(&[me.public()]));
    let auth = Arc::new(client(&agent, &me));
    let addr = agent.addr;
    // 100,000 messages 1 ms apart: 100 s, unless the agent stops it.
    let cfg = msgs::MsgsConfig {
        count: 100_000,
        size: 1,
        gap_us: 1_000,
        timeout_ms: 5_000,
        ..msgs::MsgsConfig::default()
    };
    let runner = std::thread::spawn(move || auth.scoped(|| msgs::run_client(&cfg, addr, None)));
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    agent.shut();
    let r = runner.join().expect("client").expect("a partial result");
    assert!(start.elapsed() < WAIT, "{:?}", start.elapsed());
    let why = r.meta.incomplete_reason.unwrap_or_default();
    assert!(why.contains("the agent is stopping"), "{why}");
}

#[test]
fn asks_in_progress_are_bounded_by_max_concurrent() {
    let me = KeyPair::generate("coordinator").expect("key");
    let agent = TestAgent::start(Setup {
        max_concurrent: 1,
        ..Setup::keyed(&[me.public()])
    });
    let auth = client(&agent, &me);
    // A clock ask whose pings never come holds the one place (up to the idle timeout). The
    // place may still be the previous ask's for a moment (`client` asked for facts, and that
    // ask's thread lets go after its answer is out): ask until the clock ask is not denied.
    let held = (0..100)
        .find_map(|_| {
            let mut ch = raw_ask(&agent, &me, Ask::Clock { probes: 64 });
            match ch.recv_by(Some(Instant::now() + Duration::from_millis(200))) {
                Ok(body) => {
                    let said = String::from_utf8_lossy(&body).into_owned();
                    assert!(said.contains("--max-concurrent 1"), "{said}");
                    std::thread::sleep(Duration::from_millis(20));
                    None
                }
                // Nothing said: the agent waits for the first ping, holding the place.
                Err(_) => Some(ch),
            }
        })
        .expect("the clock ask never got the place");
    let e = remote::facts(agent.addr, &auth, WAIT).expect_err("no place left");
    assert!(e.to_string().contains("--max-concurrent 1"), "{e}");
    // Tests have places of their own.
    let cfg = msgs::MsgsConfig {
        count: 100,
        timeout_ms: 5_000,
        ..msgs::MsgsConfig::default()
    };
    let r = Arc::new(auth.clone())
        .scoped(|| msgs::run_client(&cfg, agent.addr, None))
        .expect("a test beside the ask");
    assert!(r.meta.complete, "{:?}", r.meta.incomplete_reason);
    drop(held);
    let end = Instant::now() + WAIT;
    let facts = loop {
        match remote::facts(agent.addr, &auth, WAIT) {
            Ok(f) => break f,
            Err(e) if Instant::now() > end => panic!("the place came back: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert!(facts.authenticated);
}

/// An agent in a namespace of its own with `--allow-sysctl` and a journal in `dir`.
fn sysctl_agent(me: &KeyPair, dir: &tempfile::TempDir) -> TestAgent {
    TestAgent::start(Setup {
        journal: Some(dir.path().join("journal")),
        own_netns: true,
        ..Setup::keyed(&[me.public()])
    })
}

/// Values different from `agent`'s current ones, for somaxconn and tcp_rmem.
fn changes(agent: &TestAgent) -> Vec<(String, String)> {
    let somax: u64 = agent.sysctl("net.core.somaxconn").parse().expect("number");
    vec![
        ("net.core.somaxconn".into(), (somax + 17).to_string()),
        ("net.ipv4.tcp_rmem".into(), "4096 65536 1048576".into()),
    ]
}

fn originals(agent: &TestAgent) -> Vec<(String, String)> {
    ["net.core.somaxconn", "net.ipv4.tcp_rmem"]
        .iter()
        .map(|k| (k.to_string(), agent.sysctl(k)))
        .collect()
}

#[test]
fn sysctl_is_held_and_restored_on_release() {
    assert_root();
    let me = KeyPair::generate("coordinator").expect("key");
    let dir = tempfile::tempdir().expect("tmp");
    let agent = sysctl_agent(&me, &dir);
    let before = originals(&agent);
    let set = changes(&agent);
    let hold = agent
        .within(|| {
            SysctlHold::acquire(
                agent.addr,
                &client(&agent, &me),
                set.clone(),
                Duration::from_millis(300),
            )
        })
        .expect("hold");
    assert_eq!(hold.previous(), &before[..]);
    // Held past several leases: the renewing thread keeps it.
    std::thread::sleep(Duration::from_millis(1_000));
    for (k, v) in &set {
        assert_eq!(&agent.sysctl(k), v, "{k} held");
    }
    let journal = std::fs::read_to_string(dir.path().join("journal")).expect("journal");
    assert!(journal.contains("net.core.somaxconn"), "{journal}");
    hold.release().expect("release");
    for (k, v) in &before {
        assert_eq!(&agent.sysctl(k), v, "{k} restored");
    }
    assert!(!dir.path().join("journal").exists(), "journal removed");
}

#[test]
fn sysctl_is_restored_when_the_client_goes_away() {
    assert_root();
    let me = KeyPair::generate("coordinator").expect("key");
    let dir = tempfile::tempdir().expect("tmp");
    let agent = sysctl_agent(&me, &dir);
    let before = originals(&agent);
    let set = changes(&agent);
    let ch = raw_sysctl(&agent, &me, &set, 60_000);
    assert_eq!(agent.sysctl("net.core.somaxconn"), set[0].1);
    drop(ch);
    for (k, v) in &before {
        assert!(agent.sysctl_becomes(k, v, WAIT), "{k} restored on close");
    }
}

#[test]
fn sysctl_is_restored_when_the_lease_runs_out() {
    assert_root();
    let me = KeyPair::generate("coordinator").expect("key");
    let dir = tempfile::tempdir().expect("tmp");
    let agent = sysctl_agent(&me, &dir);
    let before = originals(&agent);
    let set = changes(&agent);
    let start = Instant::now();
    let ch = raw_sysctl(&agent, &me, &set, 300);
    assert_eq!(agent.sysctl("net.ipv4.tcp_rmem"), set[1].1);
    for (k, v) in &before {
        assert!(
            agent.sysctl_becomes(k, v, Duration::from_millis(2_300)),
            "{k} restored within the lease + 2 s"
        );
    }
    eprintln!("restored {:?} after the hold began", start.elapsed());
    drop(ch);
}

#[test]
fn sysctl_is_restored_when_the_agent_stops() {
    assert_root();
    let me = KeyPair::generate("coordinator").expect("key");
    let dir = tempfile::tempdir().expect("tmp");
    let mut agent = sysctl_agent(&me, &dir);
    let before = originals(&agent);
    let set = changes(&agent);
    let hold = agent
        .within(|| {
            SysctlHold::acquire(
                agent.addr,
                &client(&agent, &me),
                set,
                Duration::from_secs(60),
            )
        })
        .expect("hold");
    agent.shut();
    for (k, v) in &before {
        assert_eq!(&agent.sysctl(k), v, "{k} restored when the agent stopped");
    }
    assert!(!dir.path().join("journal").exists(), "journal removed");
    // The agent is gone: the release cannot be confirmed, and says so.
    let e = hold.release().expect_err("agent gone");
    assert!(e.to_string().contains("did not confirm"), "{e}");
}

#[test]
fn a_leftover_journal_is_restored_at_start() {
    assert_root();
    let me = KeyPair::generate("coordinator").expect("key");
    let dir = tempfile::tempdir().expect("tmp");
    let journal = dir.path().join("journal");
    let j2 = journal.clone();
    let (tx, rx) = mpsc::channel();
    let agent = TestAgent::start(Setup {
        journal: Some(journal.clone()),
        own_netns: true,
        before: Some(Box::new(move || {
            // A previous agent changed somaxconn, journaled its old value and died.
            let old = tcplab_host::sysctl::read("net.core.somaxconn").expect("read");
            let changed = (old.parse::<u64>().expect("number") + 5).to_string();
            tcplab_host::sysctl::write_verified("test", "net.core.somaxconn", &changed)
                .expect("write");
            let text = serde_json::json!({
                "tcplab_journal": 1, "pid": 1, "held": [["net.core.somaxconn", old]]
            });
            std::fs::write(&j2, text.to_string()).expect("journal");
            let _ = tx.send(old);
        })),
        ..Setup::keyed(&[me.public()])
    });
    let old = rx.recv_timeout(WAIT).expect("old value");
    assert_eq!(
        agent.restored,
        vec![("net.core.somaxconn".to_string(), old.clone())]
    );
    assert_eq!(agent.sysctl("net.core.somaxconn"), old);
    assert!(!journal.exists(), "journal removed after restoring");
}

#[test]
fn sysctl_is_refused_without_allow_sysctl() {
    let me = KeyPair::generate("coordinator").expect("key");
    // Refused before anything changes, so the agent may share the host's namespace.
    let agent = TestAgent::start(Setup::keyed(&[me.public()]));
    let e = SysctlHold::acquire(
        agent.addr,
        &client(&agent, &me),
        vec![("net.core.somaxconn".into(), "4096".into())],
        Duration::from_secs(1),
    )
    .expect_err("not allowed");
    assert!(e.to_string().contains("--allow-sysctl"), "{e}");
}

#[test]
fn sysctl_keys_outside_net_and_bad_values_are_refused() {
    assert_root();
    let me = KeyPair::generate("coordinator").expect("key");
    let dir = tempfile::tempdir().expect("tmp");
    let agent = sysctl_agent(&me, &dir);
    let auth = client(&agent, &me);
    let lease = Duration::from_secs(1);
    let ask = |k: &str, v: &str| {
        agent
            .within(|| SysctlHold::acquire(agent.addr, &auth, vec![(k.into(), v.into())], lease))
            .expect_err("refused")
            .to_string()
    };
    let e = ask("kernel.panic", "1");
    assert!(e.contains("outside net."), "{e}");
    let e = ask("net/ipv4/../../kernel/panic", "1");
    assert!(e.contains("not a sysctl key"), "{e}");
    let e = ask("net.core.somaxconn", "1\nnet.core.other=2");
    assert!(e.contains("newlines"), "{e}");
    let e = ask("net.ipv4.no_such_key", "1");
    assert!(e.contains("no_such_key"), "{e}");
    assert!(!dir.path().join("journal").exists());
}

/// An ask by hand (the handshake with `me`, the ask sealed after it); the channel stays open
/// until dropped, and nothing renews anything.
fn raw_ask(agent: &TestAgent, me: &KeyPair, ask: Ask) -> Channel {
    let mut s = agent
        .within(|| TcpStream::connect(agent.addr))
        .expect("connect");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    let frame = |body: &[u8]| {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    };
    let (init, f1) = Initiator::start(me, proto::VERSION).expect("start");
    s.write_all(&frame(&f1)).expect("frame 1");
    let f2 = read_body(&mut s);
    let seen = init.on_reply(&f2).expect("frame 2");
    assert_eq!(seen.server_key(), agent.key);
    let (f3, transport) = seen.finish().expect("finish");
    s.write_all(&frame(&f3)).expect("frame 3");
    let mut ch = Channel::new(s, transport, 1 << 20);
    let ask = Ctrl::Ask {
        version: proto::VERSION,
        ask: Box::new(ask),
    };
    proto::write_frame(&mut ch, &ask).expect("ask");
    ch
}

/// A Sysctl ask by hand, answered; the hold lasts until the lease runs out or `Channel` drops.
fn raw_sysctl(agent: &TestAgent, me: &KeyPair, set: &[(String, String)], lease_ms: u64) -> Channel {
    let ask = Ask::Sysctl {
        set: set.to_vec(),
        lease_ms,
    };
    let mut ch = raw_ask(agent, me, ask);
    match proto::read_frame(&mut ch).expect("answer") {
        Ctrl::Answer(a) => assert!(matches!(*a, Answer::Sysctl { .. }), "{a:?}"),
        other => panic!("got {other:?}"),
    }
    ch
}

fn read_body(s: &mut TcpStream) -> Vec<u8> {
    use std::io::Read;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("length");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("body");
    body
}
