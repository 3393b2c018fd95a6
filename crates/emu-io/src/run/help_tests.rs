//! Tests of how the two workers share the CPUs. `Tuning::help_due`: which worker helps which
//! direction, and (as root, on veth pairs in a private network namespace that vanishes with
//! its thread) that a helper sends a direction's frames only once they are overdue and only
//! while its owner is not running. `Tuning::lone_pause_ns`: that a send carrying a lone
//! frame is noted and ends the release, so the worker can pause before its next send.

use std::os::fd::{AsFd, AsRawFd};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;
use crate::io::port::open_ports;
use crate::io::sys::iface;
use crate::io::sys::socket::PacketSocket;
use crate::model::{BasicConfig, BasicModel};
use crate::options::{IoOptions, Threads};
use crate::report::counters::DirCounters;
use crate::run::direction::{DirSettings, Direction};
use crate::run::turn::help_overdue;
use crate::sched::lone::LoneSignal;
use crate::tuning::Tuning;

/// An ethertype from the IEEE local experimental range, so the capture ignores anything else.
const ETHERTYPE: u16 = 0x88b5;
const DELAY: Nanos = 20_000_000;

#[test]
fn each_worker_helps_only_the_other_direction_and_only_when_asked() {
    let (ab, ba): (Arc<&'static str>, Arc<&'static str>) = (Arc::new("a->b"), Arc::new("b->a"));
    let names = |opts: &IoOptions| {
        crate::run::bridge::thread_groups(opts, Arc::clone(&ab), Arc::clone(&ba))
            .into_iter()
            .map(|(own, helped)| {
                let n = |v: Vec<Arc<&'static str>>| v.iter().map(|d| **d).collect::<Vec<_>>();
                (n(own), n(helped))
            })
            .collect::<Vec<_>>()
    };
    let opts = IoOptions {
        tuning: Tuning {
            help_due: true,
            ..Tuning::default()
        },
        ..IoOptions::default()
    };
    assert_eq!(
        names(&opts),
        [(vec!["a->b"], vec!["b->a"]), (vec!["b->a"], vec!["a->b"])]
    );
    assert!(IoOptions::default().tuning.help_due, "on by default");
    let off = IoOptions {
        tuning: Tuning {
            help_due: false,
            ..Tuning::default()
        },
        ..IoOptions::default()
    };
    assert_eq!(
        names(&off),
        [(vec!["a->b"], vec![]), (vec!["b->a"], vec![])]
    );
    let single = IoOptions {
        threads: Threads::Single,
        ..IoOptions::default()
    };
    assert_eq!(names(&single), [(vec!["a->b", "b->a"], vec![])]);
}

#[test]
fn a_helper_sends_overdue_frames_in_order_and_never_while_the_owner_holds_them() {
    as_root_in_private_netns(help_on_veth);
}

/// Runs `test` in a thread of its own inside a new network namespace (fails unless root, as CI
/// runs the suite): the namespace and its veth pairs vanish with the thread, never in
/// `ip netns list`.
fn as_root_in_private_netns(test: fn()) {
    // Safety: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "needs root (a network namespace, packet sockets): run the suite as root"
    );
    std::thread::spawn(move || {
        enter_private_netns();
        test();
    })
    .join()
    .expect("the test thread panicked: see above");
}

/// A direction ea -> eb on two veth pairs in the calling thread's namespace (a 20 ms delay,
/// `due_batch` 8, a frame lone when its flow had none within `LONE_GAP`), with a socket that
/// injects frames into `pa` (they reach `ea`) and one that captures what leaves on `pb`.
struct Rig {
    dir: Shared<BasicModel>,
    counters: Arc<DirCounters>,
    inject: PacketSocket,
    capture: PacketSocket,
    _reconfig: mpsc::Sender<crate::run::direction::ReconfigRequest<BasicConfig>>,
}

impl Rig {
    fn new(lone: LoneSignal) -> Self {
        quiet_ipv6();
        for args in [
            "link add ea type veth peer name pa",
            "link add eb type veth peer name pb",
        ] {
            ip(args);
        }
        for dev in ["ea", "pa", "eb", "pb"] {
            let off =
                std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"));
            assert!(
                off.is_err() || off.unwrap().trim() == "1",
                "IPv6 still on for {dev}"
            );
            ip(&format!("link set {dev} up"));
        }
        let info = |n: &str| iface::lookup(n).expect("look-up").expect("exists");
        let (ports, _) =
            open_ports(&info("ea"), &info("eb"), &IoOptions::default()).expect("ports");
        let counters = Arc::new(DirCounters::default());
        let (reconfig, reconfig_rx) = mpsc::channel();
        let model = BasicModel::new(
            BasicConfig {
                delay_ns: DELAY,
                loss: 0.0,
            },
            1,
        );
        let settings = DirSettings {
            slab_slots: 64,
            vnet: false,
            gso: false,
            tuning: Tuning {
                batch: 64,
                ring_timestamps: true,
                due_batch: 8,
                flow_turns: true,
                ..Tuning::default()
            },
        };
        let dir = Direction::new(
            "a->b",
            ports,
            model,
            settings,
            Arc::clone(&counters),
            reconfig_rx,
        )
        .with_lone_signal(lone);
        Self {
            dir: Arc::new(Mutex::new(dir)),
            counters,
            inject: raw_socket(&info("pa")),
            capture: raw_socket(&info("pb")),
            _reconfig: reconfig,
        }
    }

    /// Sends frames `0..n` (one flow) and has the direction take them in.
    fn send_and_take(&self, n: u8) {
        for seq in 0..n {
            send_frame(&self.inject, seq);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut taken = 0;
        while taken < usize::from(n) && Instant::now() < deadline {
            taken += self.dir.lock().unwrap().receive(&SysClock);
        }
        assert_eq!(taken, usize::from(n), "the frames reached the RX ring");
    }
}

/// The test proper, in a namespace of its own.
fn help_on_veth() {
    let rig = Rig::new(LoneSignal::off());
    let (shared, counters) = (&rig.dir, &rig.counters);
    // More than one send's worth (due_batch 8): a helper sends one batch per call.
    const FRAMES: u8 = 11;
    // The owner's turn: it takes the frames in and schedules them 20 ms on.
    rig.send_and_take(FRAMES);
    let helped = || helped_locks(std::slice::from_ref(shared));
    assert!(
        !help_overdue(helped(), &SysClock),
        "nothing to come back for"
    );
    assert_eq!(counters.snapshot().helped, 0, "nothing is due yet");
    std::thread::sleep(Duration::from_nanos(DELAY + 5_000_000));
    {
        // The owner is running a turn: the helper must keep off.
        let _owner = shared.lock().unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        let other = Arc::clone(shared);
        std::thread::spawn(move || {
            help_overdue(helped_locks(std::slice::from_ref(&other)), &SysClock);
            let _ = done_tx.send(());
        });
        assert!(
            done_rx.recv_timeout(Duration::from_secs(1)).is_ok(),
            "the helper waited for a lock its owner holds"
        );
        let s = counters.snapshot();
        assert_eq!((s.helped, s.frames_out), (0, 0), "{s:?}");
    }
    assert!(
        help_overdue(helped(), &SysClock),
        "one send of 8; 3 still overdue"
    );
    let s = counters.snapshot();
    assert_eq!((s.helped, s.frames_out, s.queued), (8, 8, 3), "{s:?}");
    assert!(
        !help_overdue(helped(), &SysClock),
        "the rest, and nothing left"
    );
    let s = counters.snapshot();
    let n = u64::from(FRAMES);
    assert_eq!((s.helped, s.frames_out, s.queued), (n, n, 0), "{s:?}");
    assert_eq!(
        captured(&rig.capture, usize::from(FRAMES)),
        (0..FRAMES).collect::<Vec<_>>(),
        "all of them, in order, on the far side"
    );
}

#[test]
fn a_release_that_sends_a_lone_frame_notes_it_and_stops_before_its_next_send() {
    as_root_in_private_netns(lone_on_veth);
}

/// Eleven frames of one flow arrive together: the first is lone (its flow had nothing within
/// 2 ms), the other ten are not. A release sends the first eight, notes the lone frame on the
/// CPU that sent it and stops (a worker on another CPU may now pause); the next release sends
/// the rest without noting.
fn lone_on_veth() {
    let cpu = *crate::io::sys::clock::allowed_cpus()
        .expect("affinity")
        .first()
        .expect("a CPU");
    crate::io::sys::clock::pin_to_cpu(cpu).expect("pin the test thread");
    let lone = LoneSignal::on(2);
    let rig = Rig::new(lone.clone());
    const FRAMES: u8 = 11;
    rig.send_and_take(FRAMES);
    std::thread::sleep(Duration::from_nanos(DELAY + 5_000_000));
    let mut d = rig.dir.lock().unwrap();
    assert_eq!(
        d.release(&SysClock, monotonic_ns()),
        8,
        "one send, then a stop"
    );
    assert_eq!(lone.epoch(), 1, "the send carried the lone frame");
    assert_eq!(lone.elsewhere(cpu), 0, "noted on the sender's own CPU");
    assert_eq!(
        lone.elsewhere(cpu + 1),
        1,
        "what a worker on another CPU pauses for"
    );
    assert_eq!(
        d.release(&SysClock, monotonic_ns()),
        3,
        "the rest in one go"
    );
    assert_eq!(lone.epoch(), 1, "none of them lone");
    drop(d);
    assert_eq!(
        captured(&rig.capture, usize::from(FRAMES)),
        (0..FRAMES).collect::<Vec<_>>(),
        "all of them, in order"
    );
}

/// Moves the calling thread into a new, empty network namespace; it is freed when the last
/// socket in it closes and the thread exits, and never appears in `ip netns list`.
fn enter_private_netns() {
    // Safety: unshare(2) affects only the calling thread's namespaces.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
}

/// Turns IPv6 off in the calling thread's namespace before any link exists: otherwise a link
/// coming up sends its own frames (MLD reports, router solicitations), and the owner's receive
/// counts one more frame than the test sent (seen in CI: 4 taken for 3 sent).
fn quiet_ipv6() {
    // /proc/sys/net resolves to the namespace of the thread that opens it.
    for conf in ["all", "default"] {
        let path = format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6");
        if let Err(e) = std::fs::write(&path, "1") {
            // A kernel without IPv6 has no such file and sends no such frames.
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{path}: {e}");
        }
    }
}

/// Runs `ip` in the calling thread's namespace (a child inherits it).
fn ip(args: &str) {
    let out = Command::new("ip")
        .args(args.split(' '))
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A packet socket bound to `iface` for [`ETHERTYPE`] frames.
fn raw_socket(iface: &iface::IfaceInfo) -> PacketSocket {
    let sock = PacketSocket::open().expect("packet socket");
    sock.bind(iface.index, ETHERTYPE).expect("bind");
    sock
}

/// Sends a 64-byte broadcast frame carrying `seq`.
fn send_frame(sock: &PacketSocket, seq: u8) {
    let mut frame = [0_u8; 64];
    frame[..6].fill(0xff);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    frame[14] = seq;
    // Safety: frame is a live buffer of the length passed.
    let n = unsafe {
        libc::send(
            sock.as_fd().as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
        )
    };
    assert_eq!(n, 64, "send: {}", std::io::Error::last_os_error());
}

/// The sequence numbers of up to `n` frames received within a second.
fn captured(sock: &PacketSocket, n: usize) -> Vec<u8> {
    let (mut seqs, mut buf) = (Vec::new(), [0_u8; 128]);
    let deadline = Instant::now() + Duration::from_secs(1);
    while seqs.len() < n && Instant::now() < deadline {
        // Safety: buf is a live buffer of the length passed.
        let got = unsafe {
            libc::recv(
                sock.as_fd().as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
            )
        };
        if got >= 15 {
            seqs.push(buf[14]);
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    seqs
}
