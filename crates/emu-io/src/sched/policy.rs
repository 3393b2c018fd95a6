//! When a worker gives up SCHED_FIFO: a worker that holds no frame for a later departure and
//! receives few frames a second (the ACKs of a bulk flow through an unimpaired
//! direction) runs as an ordinary task until it holds frames or falls behind again.
//!
//! Light means: no frame held for a later departure, and fewer than [`BUSY_FRAMES_PER_SEC`]
//! frames received per second over the last [`RATE_WINDOW`].
//!
//! Why: a SCHED_FIFO worker woken for every few ACKs preempts whatever runs on its CPU (on two
//! shared CPUs, usually the bulk flow's sender) ten thousand times a second, and the kernel
//! wakes an RT task on the CPU it last ran on even when the other CPU is idle. As a
//! SCHED_OTHER task the scheduler places it on an idle CPU (the data worker's, between its
//! batches) and the sender keeps its CPU. Side by side on the 2-vCPU test VM, one unimpaired
//! iperf3 flow was ahead with it in 24 of 36 alternating rounds, at a geometric mean of 0.90x
//! the kernel bridge against 0.88x with both workers kept SCHED_FIFO; with neither SCHED_FIFO
//! it fell to 0.78x (emu-io-bench.md, "a light worker runs SCHED_OTHER").
//!
//! Timing is unaffected where it matters: a worker that holds a frame for a later departure
//! (any delay, jitter or rate element) is SCHED_FIFO again before it sleeps to that departure,
//! and a frame's arrival time is the kernel's receive timestamp, so a late wake-up on arrival
//! does not move its departure. What an ordinary worker can add is the CPU wait of a frame due
//! on arrival, in an unimpaired direction only.

use crate::time::Nanos;

/// A worker receiving at least this many frames per second is busy: a bulk flow's data
/// direction (83 thousand frames a second at 1 Gbit/s, 350 thousand through an unimpaired
/// path on the test VM), not its ACKs (10-20 thousand a second) or probes. A busy worker may
/// be the path's bottleneck, so it must not wait for a CPU.
pub const BUSY_FRAMES_PER_SEC: u64 = 50_000;

/// The span over which the receive rate is measured (a sleeping worker's next turn closes
/// a longer one).
pub const RATE_WINDOW: Nanos = 10_000_000;

/// The scheduling class a worker should run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// SCHED_FIFO at the configured priority.
    Fifo,
    /// SCHED_OTHER.
    Other,
}

/// What one loop turn showed about the worker's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLoad {
    /// Frames received in the turn.
    pub received: usize,
    /// The worker holds frames for a later departure (own, or another direction's it helps).
    pub holds: bool,
}

/// Per-worker state: the class it runs in, its receive rate window and since when it has been
/// light. Pure: the caller applies the class changes it returns.
#[derive(Debug, Clone)]
pub struct ClassPolicy {
    /// How long the worker must stay light before it becomes SCHED_OTHER (0 = never).
    demote_after: Nanos,
    class: Class,
    light_since: Option<Nanos>,
    window_start: Option<Nanos>,
    window_frames: u64,
    /// The last closed window's verdict.
    busy: bool,
}

impl ClassPolicy {
    /// A worker that starts SCHED_FIFO and becomes SCHED_OTHER after `demote_after` ns of
    /// light turns (0 = it stays SCHED_FIFO).
    pub fn new(demote_after: Nanos) -> Self {
        Self {
            demote_after,
            class: Class::Fifo,
            light_since: None,
            window_start: None,
            window_frames: 0,
            busy: false,
        }
    }

    #[cfg(test)]
    /// The class the worker runs in now.
    pub fn class(&self) -> Class {
        self.class
    }

    /// Takes one turn's load at `now`; returns the new class if the worker must change.
    /// Holding a frame or a busy rate window makes it SCHED_FIFO at once; being light for
    /// `demote_after` makes it SCHED_OTHER.
    pub fn after_turn(&mut self, load: TurnLoad, now: Nanos) -> Option<Class> {
        if self.demote_after == 0 {
            return None;
        }
        self.count(load.received as u64, now);
        let want = if load.holds || self.busy {
            self.light_since = None;
            Class::Fifo
        } else {
            let since = *self.light_since.get_or_insert(now);
            if now.saturating_sub(since) >= self.demote_after {
                Class::Other
            } else {
                self.class
            }
        };
        (want != self.class).then(|| {
            self.class = want;
            want
        })
    }

    /// Adds a turn's frames to the rate window, closing it once it spans [`RATE_WINDOW`].
    fn count(&mut self, frames: u64, now: Nanos) {
        let start = *self.window_start.get_or_insert(now);
        self.window_frames += frames;
        let span = now.saturating_sub(start);
        if span >= RATE_WINDOW {
            self.busy = u128::from(self.window_frames) * 1_000_000_000
                >= u128::from(BUSY_FRAMES_PER_SEC) * u128::from(span);
            self.window_start = Some(now);
            self.window_frames = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;
    const US: Nanos = 1_000;

    fn turn(received: usize) -> TurnLoad {
        TurnLoad {
            received,
            holds: false,
        }
    }

    fn holds() -> TurnLoad {
        TurnLoad {
            received: 0,
            holds: true,
        }
    }

    #[test]
    fn light_turns_demote_only_after_the_whole_window() {
        let mut p = ClassPolicy::new(10 * MS);
        assert_eq!(p.after_turn(turn(2), 0), None);
        assert_eq!(p.after_turn(turn(2), 10 * MS - 1), None);
        assert_eq!(p.class(), Class::Fifo);
        assert_eq!(p.after_turn(turn(2), 10 * MS), Some(Class::Other));
        assert_eq!(
            p.after_turn(turn(2), 11 * MS),
            None,
            "no change, no syscall"
        );
        assert_eq!(p.class(), Class::Other);
    }

    #[test]
    fn holding_a_frame_promotes_at_once_and_restarts_the_light_window() {
        let mut p = ClassPolicy::new(10 * MS);
        p.after_turn(turn(0), 0);
        assert_eq!(p.after_turn(turn(0), 10 * MS), Some(Class::Other));
        assert_eq!(p.after_turn(holds(), 12 * MS), Some(Class::Fifo));
        assert_eq!(p.after_turn(turn(1), 13 * MS), None);
        assert_eq!(p.after_turn(turn(1), 22 * MS), None, "light since 13 ms");
        assert_eq!(p.after_turn(turn(1), 23 * MS), Some(Class::Other));
    }

    #[test]
    fn acks_of_a_bulk_flow_stay_light_and_its_data_is_busy() {
        // 20 ACK turns of one frame each per ms (20 thousand a second), for 50 ms.
        let mut acks = ClassPolicy::new(10 * MS);
        let mut changes = Vec::new();
        for i in 0..1000 {
            changes.extend(acks.after_turn(turn(1), i * 50 * US));
        }
        assert_eq!(changes, [Class::Other], "demoted once, never promoted");
        // A turn of 20 frames after a wait for a CPU does not make it busy either.
        assert_eq!(acks.after_turn(turn(20), 50 * MS), None);
        assert_eq!(acks.after_turn(turn(0), 51 * MS), None);
        // The data direction: 64 frames every 200 µs (320 thousand a second).
        let mut data = ClassPolicy::new(10 * MS);
        data.after_turn(turn(0), 0);
        assert_eq!(
            data.after_turn(turn(0), 10 * MS),
            Some(Class::Other),
            "idle first"
        );
        let mut changes = Vec::new();
        for i in 1..=100 {
            changes.extend(data.after_turn(turn(64), 10 * MS + i * 200 * US));
        }
        assert_eq!(
            changes,
            [Class::Fifo],
            "busy within the first window, and stays so"
        );
    }

    #[test]
    fn the_rate_is_measured_over_the_whole_span_a_sleep_included() {
        let mut p = ClassPolicy::new(10 * MS);
        p.after_turn(turn(0), 0);
        p.after_turn(turn(0), 10 * MS);
        assert_eq!(p.class(), Class::Other);
        // 600 frames over the next 10 ms: 60 thousand a second, busy.
        assert_eq!(p.after_turn(turn(599), 15 * MS), None, "window still open");
        assert_eq!(p.after_turn(turn(1), 20 * MS), Some(Class::Fifo));
        // 600 frames after a 20 ms sleep: 30 thousand a second, light again.
        assert_eq!(p.after_turn(turn(600), 40 * MS), None);
        assert_eq!(p.after_turn(turn(0), 50 * MS), Some(Class::Other));
    }

    #[test]
    fn zero_keeps_the_worker_fifo() {
        let mut p = ClassPolicy::new(0);
        for t in 0..100 {
            assert_eq!(p.after_turn(turn(500), t * MS), None);
            assert_eq!(p.after_turn(turn(0), t * MS + 1), None);
        }
        assert_eq!(p.class(), Class::Fifo);
    }
}
