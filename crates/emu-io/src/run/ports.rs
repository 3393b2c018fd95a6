//! What a [`crate::run::direction::Direction`] receives from and sends to, as traits: the
//! real worker's ports are the packet sockets' rings (`run::ring_ports`), the scheduling
//! harness's are simulated in virtual time (`sim::ports`), so the harness runs the direction's
//! own receive, store and send code. The direction is generic over them (monomorphised: no
//! dynamic dispatch added on the packet path).

use crate::io::ring::tx_v2::TxPush;
use crate::io::ring::{RingMem, RxNext};
use crate::io::sys::batch::SendOutcome;
use crate::time::Nanos;

/// Where a direction's frames arrive: an RX ring's cursor over memory shared with whoever
/// fills it, with the hold protocol of the direct path (`io::ring::RxRing`).
pub trait RecvPort {
    /// The next ready frame, not taken yet.
    fn peek(&mut self) -> RxNext;
    /// Gives the current frame (or malformed entry) back and advances.
    fn consume(&mut self);
    /// Steps past the current frame without giving it back, so it can be sent straight from
    /// the port's memory; false (nothing done) if the port cannot hold it.
    fn hold(&mut self) -> bool;
    /// Gives every held frame back.
    fn release_held(&mut self);
    /// The memory the frames lie in.
    fn mem(&self) -> RingMem;
    /// Frames lost before they reached the port (a full ring) since the last call.
    fn take_drops(&mut self) -> u64;
}

/// Where a direction's frames leave: in batches from wherever they lie (`sendmmsg`, an
/// AF_XDP TX ring), or queued one by one in a TX ring and then kicked ([`SendPort::queues`]).
pub trait SendPort {
    /// The largest frame it takes (the slab's slot size).
    fn max_frame(&self) -> usize;
    /// True if frames are queued ([`SendPort::push`]) and then handed over together
    /// ([`SendPort::kick`]); false if they are sent in batches ([`SendPort::send`]), which also
    /// lets a frame due on arrival leave straight from the RX ring (the direct path).
    fn queues(&self) -> bool;
    /// Sends each frame, given with its scheduled departure (what a simulated receiver
    /// measures its lateness against; the sockets send at once and ignore it).
    fn send<'a>(&mut self, frames: impl Iterator<Item = (&'a [u8], Nanos)>) -> SendOutcome;
    /// Queues one frame (queuing ports).
    fn push(&mut self, frame: &[u8]) -> TxPush;
    /// Hands the queued frames to the kernel (queuing ports).
    fn kick(&mut self) -> Kicked;
}

/// What one [`SendPort::kick`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kicked {
    /// Frames queued since the last kick.
    pub queued: u32,
    /// The kick failed: the kernel stopped at a frame and dropped it; the rest stay queued
    /// and go with the next kick.
    pub failed: bool,
    /// Frames the kernel refused since the last kick.
    pub refused: u64,
}
