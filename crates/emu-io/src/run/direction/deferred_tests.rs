//! The deferred path through the real direction, in virtual time: frames in from a port,
//! through CoDel with ECN at a rate and a delay, out on a port that records what it sent.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc;

use tcplab_emu::aqm::{AqmConfig, CodelParams};
use tcplab_emu::deferred::DeferredDirection;
use tcplab_emu::{Direction as Dir, DirectionConfig, QueueLimit};

use super::{DirSettings, Direction};
use crate::io::ring::testmem::TestMem;
use crate::io::ring::tx_v2::TxPush;
use crate::io::ring::{RingMem, RxFrame, RxNext, TP_STATUS_USER};
use crate::io::sys::batch::SendOutcome;
use crate::report::counters::DirCounters;
use crate::run::ports::{Kicked, RecvPort, SendPort};
use crate::time::{Clock, Nanos};
use crate::tuning::Tuning;
use crate::wire::ecn::ecn_of;

const MS: Nanos = 1_000_000;
const US: Nanos = 1_000;
const SLOT: usize = 2048;

/// Frames with a time each: arrivals waiting, or departures sent.
type Frames<C> = Rc<RefCell<C>>;

struct VClock(Rc<Cell<Nanos>>);

impl Clock for VClock {
    fn now(&self) -> Nanos {
        self.0.get()
    }
    fn realtime(&self) -> Nanos {
        self.0.get() + 1_700_000_000_000_000_000
    }
    fn cpu(&self) -> usize {
        0
    }
}

/// Frames waiting to arrive: (arrival, bytes).
struct Rx {
    now: Rc<Cell<Nanos>>,
    queue: Frames<VecDeque<(Nanos, Vec<u8>)>>,
    mem: RingMem,
    _buf: TestMem,
}

impl RecvPort for Rx {
    fn peek(&mut self) -> RxNext {
        let q = self.queue.borrow();
        let Some((at, bytes)) = q.front().filter(|(at, _)| *at <= self.now.get()) else {
            return RxNext::Empty;
        };
        self.mem.copy_in(0, bytes);
        RxNext::Frame(RxFrame {
            data_off: 0,
            snaplen: bytes.len() as u32,
            wire_len: bytes.len() as u32,
            pkttype: 0,
            vlan: None,
            ts_ns: at + 1_700_000_000_000_000_000,
            status: TP_STATUS_USER,
        })
    }
    fn consume(&mut self) {
        self.queue.borrow_mut().pop_front();
    }
    fn hold(&mut self) -> bool {
        false
    }
    fn release_held(&mut self) {}
    fn mem(&self) -> RingMem {
        self.mem
    }
    fn take_drops(&mut self) -> u64 {
        0
    }
}

/// Records (scheduled departure, bytes) of every frame sent.
struct Tx(Frames<Vec<(Nanos, Vec<u8>)>>);

impl SendPort for Tx {
    fn max_frame(&self) -> usize {
        SLOT
    }
    fn queues(&self) -> bool {
        false
    }
    fn send<'a>(&mut self, frames: impl Iterator<Item = (&'a [u8], Nanos)>) -> SendOutcome {
        let mut out = SendOutcome {
            calls: 1,
            ..SendOutcome::default()
        };
        for (bytes, at) in frames {
            out.sent += 1;
            out.sent_bytes += bytes.len() as u64;
            self.0.borrow_mut().push((at, bytes.to_vec()));
        }
        out
    }
    fn push(&mut self, _frame: &[u8]) -> TxPush {
        TxPush::TooBig
    }
    fn kick(&mut self) -> Kicked {
        Kicked::default()
    }
}

/// An ECT(0) TCP segment of 1514 bytes, numbered `n` in its payload.
fn segment(n: u32) -> Vec<u8> {
    let mut f = vec![0u8; 1514];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[1] = 0x02;
    ip[2..4].copy_from_slice(&1500u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    let check = !fold(ip);
    ip[10..12].copy_from_slice(&check.to_be_bytes());
    f[34..36].copy_from_slice(&40_000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5_201u16.to_be_bytes());
    f[60..64].copy_from_slice(&n.to_be_bytes());
    f
}

/// The ones' complement sum of an IPv4 header's 16-bit words.
fn fold(ip: &[u8]) -> u16 {
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// A sender at twice a 10 Mbit/s link's rate for 2 s, through CoDel with ECN and 20 ms of
/// delay: every frame leaves (ECT frames are marked, not dropped), in order, spaced by the
/// link's rate, 20 ms after its serialisation; the marked ones carry CE with a valid header.
#[test]
fn codel_with_ecn_through_the_direction_marks_frames_and_keeps_the_rate() {
    let now = Rc::new(Cell::new(0));
    let arrivals = Rc::new(RefCell::new(VecDeque::new()));
    for n in 0..3_300u32 {
        arrivals
            .borrow_mut()
            .push_back((Nanos::from(n) * 600 * US, segment(n)));
    }
    let sent = Rc::new(RefCell::new(Vec::new()));
    let mut buf = TestMem::new(SLOT);
    let rx = Rx {
        now: now.clone(),
        queue: arrivals.clone(),
        mem: buf.mem(),
        _buf: buf,
    };
    let cfg = DirectionConfig {
        delay_ns: 20 * MS,
        rate_bps: Some(10_000_000),
        queue: Some(QueueLimit::Packets(10_000)),
        ..DirectionConfig::default()
    };
    let codel = AqmConfig::Codel(CodelParams {
        ecn: true,
        ..CodelParams::default()
    });
    let model = DeferredDirection::new(&cfg, codel, 1, Dir::Forward).unwrap();
    let counters = Arc::new(DirCounters::default());
    let (_tx, reconfig) = mpsc::channel();
    let mut d = Direction::new(
        "a->b",
        (rx, Tx(sent.clone())),
        model,
        DirSettings {
            slab_slots: 8_192,
            vnet: false,
            gso: false,
            tuning: Tuning::default(),
        },
        counters.clone(),
        reconfig,
    );
    let clock = VClock(now.clone());
    // Event by event: the next arrival or the direction's next departure or decision.
    loop {
        let next_rx = arrivals.borrow().front().map(|(at, _)| *at);
        let Some(t) = [next_rx, d.next_departure()].into_iter().flatten().min() else {
            break;
        };
        now.set(now.get().max(t));
        d.release(&clock, now.get());
        d.receive(&clock);
        d.release(&clock, now.get());
    }
    let sent = sent.borrow();
    assert_eq!(sent.len(), 3_300, "no frame lost");
    let numbers: Vec<u32> = sent
        .iter()
        .map(|(_, f)| u32::from_be_bytes(f[60..64].try_into().unwrap()))
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "in order");
    // 1514 bytes at 10 Mbit/s: 1.2112 ms apart once the queue has built.
    let (a, b) = (sent[1000].0, sent[1001].0);
    assert_eq!(b - a, 1_211_200);
    assert_eq!(sent[0].0, 1_211_200 + 20 * MS, "serialised, then delayed");
    let marked: Vec<&Vec<u8>> = sent
        .iter()
        .map(|(_, f)| f)
        .filter(|f| ecn_of(f) == tcplab_emu::aqm::Ecn::Ce)
        .collect();
    assert!(marked.len() > 5, "{} marked", marked.len());
    let snap = counters.snapshot();
    assert_eq!(snap.marked_ce, marked.len() as u64);
    assert_eq!(snap.drops.aqm, 0);
    for f in marked {
        assert_eq!(
            fold(&f[14..34]),
            0xffff,
            "a marked header's checksum is valid"
        );
    }
}
