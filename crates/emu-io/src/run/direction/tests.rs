//! Tests of `Direction`'s pure parts.

use super::receive::{arrival_time, intact_departure};
use crate::time::Nanos;
use tcplab_emu::{Corruption, Departure, DropCause, Verdict};

fn send(at: Nanos) -> Verdict {
    Verdict::send_at(at)
}

#[test]
fn a_super_packet_is_intact_only_if_every_segment_leaves_once_unchanged_in_order() {
    let ds = [send(100), send(112), send(112), send(124)];
    assert_eq!(
        intact_departure(&ds, 90),
        Some(124),
        "leaves at the last one"
    );
    assert_eq!(intact_departure(&ds, 100), Some(124), "ties keep order");
    // The first segment was reordered ahead of something already scheduled.
    assert_eq!(intact_departure(&ds, 101), None);
    // A later segment skipped the delay line (reorder) and overtook the one ahead.
    assert_eq!(intact_departure(&[send(100), send(50)], 0), None);
    let lost = [send(100), Verdict::Drop(DropCause::Loss)];
    assert_eq!(intact_departure(&lost, 0), None);
    let full = [Verdict::Drop(DropCause::QueueFull), send(100)];
    assert_eq!(intact_departure(&full, 0), None);
    let once = Departure {
        at: 100,
        corrupt: None,
    };
    let dup = Verdict::Send(tcplab_emu::Departures::two(once, once));
    assert_eq!(intact_departure(&[send(90), dup], 0), None);
    let corrupt = Verdict::Send(tcplab_emu::Departures::one(Departure {
        at: 100,
        corrupt: Some(Corruption { offset: 7, mask: 1 }),
    }));
    assert_eq!(intact_departure(&[corrupt, send(100)], 0), None);
    assert_eq!(dup.latest(), 100);
    assert_eq!(lost[1].latest(), 0);
}

#[test]
fn arrival_time_subtracts_the_ring_wait_and_rejects_bad_stamps() {
    let (real, mono) = (1_700_000_000_000_000_000, 5_000_000_000);
    assert_eq!(arrival_time(real - 30_000, real, mono), mono - 30_000);
    assert_eq!(arrival_time(real, real, mono), mono);
    assert_eq!(arrival_time(0, real, mono), mono, "missing stamp");
    assert_eq!(
        arrival_time(real + 5, real, mono),
        mono,
        "stamp in the future"
    );
    assert_eq!(
        arrival_time(real - 2_000_000_000, real, mono),
        mono,
        "clock step"
    );
}
