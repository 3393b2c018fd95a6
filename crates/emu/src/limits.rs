//! The accepted range of every setting, shared by flag parsing ([`crate::flags`]) and config
//! validation ([`crate::DirectionConfig::validate`]) so both reject the same values with the
//! same words.

use crate::Nanos;
use crate::QueueLimit;
use crate::error::ValueError;

/// Longest delay or jitter amount: 60 s. Anything longer is a typo, not an emulation.
pub const MAX_DELAY_NS: Nanos = 60_000_000_000;
/// Fastest bottleneck: 400 Gbit/s.
pub const MAX_RATE_BPS: u64 = 400_000_000_000;
/// The frame a queue must be able to hold: an MTU-sized Ethernet frame without FCS.
pub const MIN_QUEUE_BYTES: u64 = 1514;
/// Most packets a queue may hold (bounds the model's memory).
pub const MAX_QUEUE_PACKETS: u32 = 10_000_000;
/// Most bytes a queue may hold: 4 GiB.
pub const MAX_QUEUE_BYTES: u64 = 1 << 32;
/// Largest per-packet overhead in bytes.
pub const MAX_OVERHEAD_BYTES: u32 = 65_535;
/// Largest reorder gap.
pub const MAX_GAP: u32 = 1_000_000;

/// A delay or jitter amount.
pub fn delay(ns: Nanos) -> Result<(), ValueError> {
    if ns > MAX_DELAY_NS {
        return Err(ValueError::OutOfRange {
            what: "delay",
            range: "at most 60s",
        });
    }
    Ok(())
}

/// A bottleneck rate.
pub fn rate(bps: u64) -> Result<(), ValueError> {
    if bps == 0 || bps > MAX_RATE_BPS {
        return Err(ValueError::OutOfRange {
            what: "rate",
            range: "more than 0 and at most 400gbit",
        });
    }
    Ok(())
}

/// A probability, named `what` in the message.
pub fn probability(what: &'static str, p: f64) -> Result<(), ValueError> {
    if !(0.0..=1.0).contains(&p) {
        return Err(ValueError::OutOfRange {
            what,
            range: "between 0% and 100%",
        });
    }
    Ok(())
}

/// A correlation: 1 would freeze the stream at its first value.
pub fn correlation(c: f64) -> Result<(), ValueError> {
    if !(0.0..1.0).contains(&c) {
        return Err(ValueError::OutOfRange {
            what: "correlation",
            range: "at least 0% and below 100%",
        });
    }
    Ok(())
}

/// A queue limit: it must hold one MTU-sized frame.
pub fn queue(q: QueueLimit) -> Result<(), ValueError> {
    match q {
        QueueLimit::Packets(n) if n == 0 || n > MAX_QUEUE_PACKETS => Err(ValueError::OutOfRange {
            what: "queue",
            range: "between 1 and 10000000 packets",
        }),
        QueueLimit::Bytes(b) if !(MIN_QUEUE_BYTES..=MAX_QUEUE_BYTES).contains(&b) => {
            Err(ValueError::OutOfRange {
                what: "queue",
                range: "at least 1514b (one MTU-sized frame) and at most 4gb",
            })
        }
        _ => Ok(()),
    }
}

/// Per-packet overhead.
pub fn overhead(bytes: u32) -> Result<(), ValueError> {
    if bytes > MAX_OVERHEAD_BYTES {
        return Err(ValueError::OutOfRange {
            what: "overhead",
            range: "at most 65535 bytes",
        });
    }
    Ok(())
}

/// A reorder gap.
pub fn gap(n: u32) -> Result<(), ValueError> {
    if n > MAX_GAP {
        return Err(ValueError::OutOfRange {
            what: "gap",
            range: "at most 1000000",
        });
    }
    Ok(())
}
