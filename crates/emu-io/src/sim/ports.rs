//! The simulated machine as the real direction code sees it: a [`Clock`] of virtual time, and
//! ports in it. Frames show up on a [`SimRx`] once their arrival time has come; each one taken
//! costs `Costs::rx_frame`. A [`SimTx`] send costs `Costs::send_call` and `Costs::handoff` per
//! frame (veth runs the receiving host's stack for each), and notes when each frame reached
//! its host, for the world to deliver and for the lateness table.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use super::costs::Costs;
use super::frames::{DATA_LEN, Frame};
use crate::io::ring::testmem::TestMem;
use crate::io::ring::tx_v2::TxPush;
use crate::io::ring::{RingMem, RxFrame, RxNext, TP_STATUS_USER};
use crate::io::sys::batch::SendOutcome;
use crate::run::ports::{Kicked, RecvPort, SendPort};
use crate::time::{Clock, Nanos};

/// The simulated ports' frame size (the slab's slots).
pub(crate) const SLOT: usize = 2048;

/// Where the virtual CLOCK_REALTIME stands against the virtual CLOCK_MONOTONIC: any fixed
/// offset, as long as no receive stamp is 0 (the direction takes 0 for a missing stamp).
const REALTIME_OFFSET: Nanos = 1_700_000_000_000_000_000;

/// A frame one of the send ports handed to its host.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handoff {
    /// When the hand-off ended (the host's stack had taken it).
    pub at: Nanos,
    /// The CPU of the worker that sent it.
    pub cpu: usize,
    /// The frame.
    pub frame: Frame,
}

/// What the world shares with the ports: the time and the running worker's CPU, each
/// direction's RX queue (frames by arrival time and sequence), and what the sends did.
#[derive(Debug)]
pub(crate) struct Bench {
    /// Virtual CLOCK_MONOTONIC: the running worker's time.
    pub now: Cell<Nanos>,
    /// The CPU the running worker is on.
    pub cpu: Cell<usize>,
    /// What the work costs.
    pub costs: Costs,
    /// Each direction's frames not yet taken, by (arrival, sequence).
    pub rx: [RefCell<BTreeMap<(Nanos, u64), Frame>>; 2],
    /// Frames handed off since the world last delivered them.
    pub handed: RefCell<Vec<Handoff>>,
    /// Each frame's lateness (hand-off minus scheduled departure), per class.
    pub late: RefCell<[Vec<Nanos>; 4]>,
}

impl Bench {
    pub(crate) fn new(costs: Costs) -> Self {
        Self {
            now: Cell::new(0),
            cpu: Cell::new(0),
            costs,
            rx: Default::default(),
            handed: RefCell::new(Vec::new()),
            late: RefCell::new(Default::default()),
        }
    }

    /// Moves the clock on by `ns` of work.
    fn charge(&self, ns: Nanos) {
        self.now.set(self.now.get() + ns);
    }
}

/// Virtual time, read by the turn and the direction as they read the machine's clocks.
#[derive(Debug, Clone)]
pub(crate) struct SimClock(pub Rc<Bench>);

impl Clock for SimClock {
    fn now(&self) -> Nanos {
        self.0.now.get()
    }

    fn realtime(&self) -> Nanos {
        self.now() + REALTIME_OFFSET
    }

    fn cpu(&self) -> usize {
        self.0.cpu.get()
    }

    fn fixed_work_done(&self) {
        self.0.charge(self.0.costs.turn);
    }
}

/// Direction `dir`'s RX queue as a ring: the earliest frame that has arrived, written into
/// ring memory with its arrival as the kernel's receive stamp.
pub(crate) struct SimRx {
    bench: Rc<Bench>,
    dir: usize,
    mem: RingMem,
    /// Owns the memory `mem` points into.
    _buf: TestMem,
    scratch: Vec<u8>,
    /// The frame `peek` shows, by its queue key.
    current: Option<(Nanos, u64)>,
}

impl SimRx {
    pub(crate) fn new(bench: &Rc<Bench>, dir: usize) -> Self {
        let mut buf = TestMem::new(SLOT);
        Self {
            bench: Rc::clone(bench),
            dir,
            mem: buf.mem(),
            _buf: buf,
            scratch: vec![0; DATA_LEN as usize],
            current: None,
        }
    }
}

impl RecvPort for SimRx {
    fn peek(&mut self) -> RxNext {
        let now = self.bench.now.get();
        let first = self.bench.rx[self.dir]
            .borrow()
            .first_key_value()
            .map(|(&key, &frame)| (key, frame))
            .filter(|&((at, _), _)| at <= now);
        let Some((key, frame)) = first else {
            self.current = None;
            return RxNext::Empty;
        };
        let len = frame.wire_len() as usize;
        if self.current != Some(key) {
            frame.render(&mut self.scratch);
            self.mem.copy_in(0, &self.scratch[..len]);
            self.current = Some(key);
        }
        RxNext::Frame(RxFrame {
            data_off: 0,
            snaplen: len as u32,
            wire_len: len as u32,
            pkttype: 0,
            vlan: None,
            ts_ns: key.0 + REALTIME_OFFSET,
            status: TP_STATUS_USER,
        })
    }

    fn consume(&mut self) {
        if let Some(key) = self.current.take() {
            self.bench.rx[self.dir].borrow_mut().remove(&key);
            self.bench.charge(self.bench.costs.rx_frame);
        }
    }

    /// The harness's link has a delay: no frame is due on arrival, none is held.
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

/// A `sendmmsg` socket on veth: each frame's hand-off runs the receiving host's stack.
pub(crate) struct SimTx {
    bench: Rc<Bench>,
}

impl SimTx {
    pub(crate) fn new(bench: &Rc<Bench>) -> Self {
        Self {
            bench: Rc::clone(bench),
        }
    }
}

impl SendPort for SimTx {
    fn max_frame(&self) -> usize {
        SLOT
    }

    fn queues(&self) -> bool {
        false
    }

    /// One call from now: its fixed cost, then one hand-off after another.
    fn send<'a>(&mut self, frames: impl Iterator<Item = (&'a [u8], Nanos)>) -> SendOutcome {
        let b = &self.bench;
        let start = b.now.get() + b.costs.send_call;
        let cpu = b.cpu.get();
        let mut out = SendOutcome {
            calls: 1,
            ..SendOutcome::default()
        };
        for (bytes, departure) in frames {
            out.sent += 1;
            out.sent_bytes += bytes.len() as u64;
            let at = start + Nanos::from(out.sent) * b.costs.handoff;
            let frame = Frame::parse(bytes);
            b.late.borrow_mut()[frame.class as usize].push(at.saturating_sub(departure));
            b.handed.borrow_mut().push(Handoff { at, cpu, frame });
        }
        b.now.set(start + Nanos::from(out.sent) * b.costs.handoff);
        out
    }

    /// Not a queuing port ([`SendPort::queues`] is false): never called.
    fn push(&mut self, _frame: &[u8]) -> TxPush {
        TxPush::TooBig
    }

    fn kick(&mut self) -> Kicked {
        Kicked::default()
    }
}
