//! Pauses after a lone frame leaves (`Tuning::lone_pause_ns`).
//!
//! A frame alone in its flow (a ping, a request or a response: [`crate::sched::schedule::Entry::lone`])
//! usually wakes a thread on the receiving host that waits for it. On the shared test VM that
//! thread is queued on the *other* CPU, behind the SCHED_FIFO worker running there (emu-io-bench.md,
//! "what the normal-priority rr threads wait for": the rr server, woken by the forward worker's send, spent 79 % of its CPU wait
//! behind the data direction's worker). So the [`LoneSignal`] counts lone sends by the CPU
//! they were made on, and a busy worker on any other CPU pauses once ([`LonePause`]) so the
//! woken thread gets that CPU before the worker's next send. The worker that sent keeps
//! running and can send the pausing worker's overdue frames meanwhile (`help_due`).
//!
//! While the pausing worker holds no lone frame, the pause may make its next frame up to
//! `Tuning::lone_pause_late_ns` late: under a flow paced at 1 Gbit/s a frame leaves every
//! 12 µs, and a pause that had to end before it never happened (emu-io-bench.md, "a lone pause may make a bulk frame up to 60 µs late").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::time::Nanos;

/// Least time between two lone pauses of one worker: with many lone flows (short
/// connections) pauses of 30 µs then cost at most 6 % of a worker's time.
pub const LONE_PAUSE_SPACING: Nanos = 500_000;

/// Shortest pause worth a sleep: below it the sleep's own cost is most of it.
pub const MIN_LONE_PAUSE: Nanos = 5_000;

/// How long a worker that owes a lone pause pauses at `now`, given its own next departure
/// `next` and how late the pause may make that frame (`late`, 0 for a lone frame):
/// - none scheduled: `len`;
/// - not yet due, or due by less than `behind` (the late limit): `len`, cut short to end
///   `late` after the departure, or with `late` 0 a spin margin (`margin`) before it, so
///   the pause never makes that frame late; a frame just due then leaves now instead;
/// - overdue by `behind` or more: `len`. The worker is behind its schedule and its frames
///   already count as late; without a pause the woken thread waits behind the whole backlog
///   (and the worker that sent the lone frame sends overdue frames meanwhile, `help_due`).
///
/// 0 also when less than [`MIN_LONE_PAUSE`] would be left: not worth a sleep.
pub fn pause_len(
    len: Nanos,
    (margin, behind, late): (Nanos, Nanos, Nanos),
    next: Option<Nanos>,
    now: Nanos,
) -> Nanos {
    let len = match next {
        None => len,
        Some(t) if now.saturating_sub(t) >= behind => len,
        Some(t) => {
            let end = if late > 0 {
                t.saturating_add(late)
            } else {
                t.saturating_sub(margin)
            };
            end.saturating_sub(now).min(len)
        }
    };
    if len < MIN_LONE_PAUSE { 0 } else { len }
}

/// Counts of sends that carried a lone frame, one per CPU they were made on, shared by both
/// directions and both workers. `off` never counts, so a bridge without lone pauses behaves
/// as before.
#[derive(Debug, Clone, Default)]
pub struct LoneSignal(Option<Arc<[AtomicU64]>>);

impl LoneSignal {
    /// A signal that counts, with one slot per CPU of `cpus` (CPU numbers wrap around).
    pub fn on(cpus: usize) -> Self {
        Self(Some((0..cpus.max(1)).map(|_| AtomicU64::new(0)).collect()))
    }

    /// A signal with a slot for every CPU in `allowed` (the CPUs this process may run on; CPU
    /// numbers need not be contiguous under an affinity mask, so up to the highest one).
    pub fn on_cpus(allowed: &[usize]) -> Self {
        Self::on(allowed.iter().max().map_or(1, |c| c + 1))
    }

    /// A signal that never changes.
    pub fn off() -> Self {
        Self(None)
    }

    /// Notes that a send made on CPU `cpu` carried a lone frame.
    pub fn note(&self, cpu: usize) {
        if let Some(slots) = &self.0 {
            slots[cpu % slots.len()].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lone sends so far on every CPU (0 when off): a change tells a release to stop between
    /// sends, so a worker that is to pause does so before its next one.
    pub fn epoch(&self) -> u64 {
        self.sum(|_| true)
    }

    /// Lone sends so far made on CPUs other than `cpu`: what a worker running on `cpu`
    /// pauses for.
    pub fn elsewhere(&self, cpu: usize) -> u64 {
        let own = self.0.as_ref().map_or(0, |slots| cpu % slots.len());
        self.sum(|i| i != own)
    }

    fn sum(&self, take: impl Fn(usize) -> bool) -> u64 {
        self.0.as_ref().map_or(0, |slots| {
            let counts = slots.iter().map(|n| n.load(Ordering::Relaxed));
            counts
                .enumerate()
                .filter(|&(i, _)| take(i))
                .map(|(_, n)| n)
                .sum()
        })
    }
}

/// One worker's view of the signal: which lone sends it has already paused for, and when it
/// last paused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LonePause {
    seen: u64,
    last: Option<Nanos>,
}

impl LonePause {
    /// Whether to pause at `now`, given the lone sends made elsewhere so far (`count`,
    /// [`LoneSignal::elsewhere`]) and whether the worker would otherwise keep the CPU
    /// (`busy`: frames overdue, received or still to help). A worker about to sleep gives
    /// the CPU up anyway; its unseen sends are then taken as seen.
    pub fn take(&mut self, count: u64, now: Nanos, busy: bool) -> bool {
        if count == self.seen {
            return false;
        }
        if !busy {
            self.seen = count;
            return false;
        }
        if self
            .last
            .is_some_and(|t| now.saturating_sub(t) < LONE_PAUSE_SPACING)
        {
            return false;
        }
        self.seen = count;
        self.last = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_off_signal_never_changes() {
        let s = LoneSignal::off();
        s.note(0);
        assert_eq!((s.epoch(), s.elsewhere(1)), (0, 0));
    }

    #[test]
    fn sends_count_by_cpu_and_a_worker_sees_only_the_other_cpus() {
        let on = LoneSignal::on(2);
        let other = on.clone();
        other.note(0);
        other.note(0);
        other.note(3); // CPU 3 of a 2-slot signal shares slot 1
        assert_eq!(on.epoch(), 3, "clones share the counts");
        assert_eq!(on.elsewhere(1), 2, "a worker on CPU 1 sees CPU 0's sends");
        assert_eq!(on.elsewhere(0), 1, "and one on CPU 0 sees CPU 1's");
        assert_eq!(on.elsewhere(2), 1, "CPU 2 wraps to slot 0");
        let single = LoneSignal::on(1);
        single.note(5);
        assert_eq!(
            (single.epoch(), single.elsewhere(0)),
            (1, 0),
            "one CPU: no other"
        );
    }

    #[test]
    fn every_allowed_cpu_has_a_slot_of_its_own() {
        let cpus = [0, 1, 5];
        for &a in &cpus {
            let s = LoneSignal::on_cpus(&cpus);
            s.note(a);
            assert_eq!(s.elsewhere(a), 0, "CPU {a}'s own send");
            for &b in cpus.iter().filter(|&&b| b != a) {
                assert_eq!(s.elsewhere(b), 1, "CPU {b} sees CPU {a}'s send");
            }
        }
    }

    #[test]
    fn a_pause_never_delays_a_frame_that_is_on_time() {
        let (len, margin, behind, now) = (80_000, 100_000, 100_000, 1_000_000);
        let p = |next| pause_len(len, (margin, behind, 0), next, now);
        assert_eq!(p(None), 80_000, "nothing scheduled");
        assert_eq!(p(Some(now + 1_000_000)), 80_000, "far off");
        assert_eq!(
            p(Some(now + 150_000)),
            50_000,
            "cut short a margin before it"
        );
        assert_eq!(p(Some(now + 105_000)), 5_000);
        assert_eq!(p(Some(now + 104_999)), 0, "under 5 µs left");
        assert_eq!(p(Some(now + 50_000)), 0, "inside the margin");
        assert_eq!(p(Some(now)), 0, "due now: it leaves now");
        assert_eq!(p(Some(now - 99_999)), 0, "late, but less than the limit");
        assert_eq!(p(Some(now - 100_000)), 80_000, "behind: late already");
        assert_eq!(p(Some(10)), 80_000, "far behind");
        assert_eq!(
            pause_len(4_000, (margin, behind, 0), None, now),
            0,
            "too short to sleep"
        );
    }

    #[test]
    fn a_pause_may_make_a_bulk_frame_late_by_at_most_the_allowance() {
        let (len, margin, behind, late, now) = (80_000, 100_000, 100_000, 60_000, 1_000_000);
        let p = |next| pause_len(len, (margin, behind, late), next, now);
        assert_eq!(p(None), 80_000, "nothing scheduled");
        assert_eq!(p(Some(now + 1_000_000)), 80_000, "far off");
        assert_eq!(p(Some(now + 10_000)), 70_000, "ends 60 µs after it");
        assert_eq!(p(Some(now)), 60_000, "due now: 60 µs late at most");
        assert_eq!(
            p(Some(now - 50_000)),
            10_000,
            "due: what is left of the 60 µs"
        );
        assert_eq!(p(Some(now - 56_000)), 0, "under 5 µs left");
        assert_eq!(p(Some(now - 60_000)), 0, "as late as allowed already");
        assert_eq!(p(Some(now - 99_999)), 0, "late, but less than the limit");
        assert_eq!(p(Some(now - 100_000)), 80_000, "behind: late already");
    }

    #[test]
    fn a_busy_worker_pauses_once_per_lone_send_and_at_most_once_per_spacing() {
        let mut p = LonePause::default();
        assert!(!p.take(0, 1_000, true), "nothing sent yet");
        assert!(p.take(1, 1_000, true), "a lone send while busy");
        assert!(!p.take(1, 2_000, true), "already paused for it");
        // Another lone send 100 µs later: too soon after the last pause...
        assert!(!p.take(2, 101_000, true));
        // ...still owed once the spacing has passed.
        assert!(p.take(2, 1_000 + LONE_PAUSE_SPACING, true));
        assert!(!p.take(2, 2_000_000, true));
    }

    #[test]
    fn a_worker_about_to_sleep_does_not_pause_and_forgets_the_send() {
        let mut p = LonePause::default();
        assert!(!p.take(1, 1_000, false));
        assert!(!p.take(1, 2_000, true), "seen while idle: nothing owed");
        assert!(p.take(2, 3_000, true));
    }
}
