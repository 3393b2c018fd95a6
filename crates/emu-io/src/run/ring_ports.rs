//! The real worker's ports: [`RxPort`] (a TPACKET or AF_XDP RX ring and its socket) as a
//! [`RecvPort`], [`TxPort`] (`sendmmsg` batches, an AF_XDP TX ring, or a TPACKET TX ring and
//! its kick) as a [`SendPort`]. Each method is the call the direction made on the ring or
//! socket before it was generic over its ports.

use crate::io::port::{RxPort, TxPort};
use crate::io::ring::tx_v2::TxPush;
use crate::io::ring::{RingMem, RxNext};
use crate::io::sys::batch::SendOutcome;
use crate::run::ports::{Kicked, RecvPort, SendPort};
use crate::time::Nanos;

impl RecvPort for RxPort {
    #[inline]
    fn peek(&mut self) -> RxNext {
        self.ring.peek()
    }

    #[inline]
    fn consume(&mut self) {
        self.ring.consume();
    }

    #[inline]
    fn hold(&mut self) -> bool {
        self.ring.hold()
    }

    #[inline]
    fn release_held(&mut self) {
        self.ring.release_held();
    }

    #[inline]
    fn mem(&self) -> RingMem {
        self.ring.mem()
    }

    /// The kernel's count of frames dropped because the ring (for AF_XDP, the fill ring) was
    /// full, read and reset; 0 if it cannot be read.
    fn take_drops(&mut self) -> u64 {
        self.sock.take_stats().map_or(0, |st| st.drops)
    }
}

impl SendPort for TxPort {
    fn max_frame(&self) -> usize {
        TxPort::max_frame(self)
    }

    #[inline]
    fn queues(&self) -> bool {
        matches!(self, TxPort::Ring { .. })
    }

    #[inline]
    fn send<'a>(&mut self, frames: impl Iterator<Item = (&'a [u8], Nanos)>) -> SendOutcome {
        match self {
            TxPort::Send { batch, sock, .. } => batch.send(sock, frames.map(|(f, _)| (&[][..], f))),
            // A queuing port sends nothing in batches.
            TxPort::Ring { .. } => SendOutcome::default(),
        }
    }

    #[inline]
    fn push(&mut self, frame: &[u8]) -> TxPush {
        match self {
            TxPort::Ring { ring, .. } => ring.push(frame),
            // A batch port queues nothing.
            TxPort::Send { .. } => TxPush::TooBig,
        }
    }

    fn kick(&mut self) -> Kicked {
        let TxPort::Ring { ring, sock, .. } = self else {
            return Kicked::default();
        };
        let queued = ring.take_pending();
        let failed = sock.kick_tx().is_err();
        Kicked {
            queued,
            failed,
            refused: ring.take_refused(),
        }
    }
}
