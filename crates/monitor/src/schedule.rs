//! Which tests start now: the monitor's decisions, pure (times are milliseconds the caller
//! reads from its clock; the randomness is a hash of the seed).
//!
//! Every *slot* (an ordered pair of hosts and one workload) comes due once per its workload's
//! interval. Each next time is jittered by up to `jitter` of the interval, from a hash of the
//! seed, the slot and its run count: tests of a large fleet spread out instead of marching in
//! step, and a restarted monitor that knows each slot's last start and run count (its database
//! does) computes exactly the times the stopped one would have. A slot never run before is
//! first due at a point of its first interval the same hash picks, so a fresh start does not
//! try the whole mesh at once.
//!
//! No host is in two tests at once (a throughput test sharing a host's NIC or CPU with another
//! measures both): a slot starts only when neither of its hosts is busy, and among due slots
//! the most overdue goes first, so a slot held back by busy hosts is not overtaken for ever.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One repeated test: `workload` run by `src`'s agent toward `dst`'s (indices into the
/// monitor's hosts and workloads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Slot {
    /// The host whose agent runs the client side.
    pub src: usize,
    /// The host it measures toward.
    pub dst: usize,
    /// Which workload.
    pub workload: usize,
}

/// An ordered pair of hosts (indices in the monitor's host list): the doctor's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pair {
    /// The client's index.
    pub src: usize,
    /// The server's index.
    pub dst: usize,
}

impl Slot {
    /// The slot's pair of hosts.
    pub fn pair(self) -> Pair {
        Pair {
            src: self.src,
            dst: self.dst,
        }
    }
}

/// How often one workload runs on every pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cadence {
    /// The interval between a slot's starts, ms (`--every`).
    pub every_ms: u64,
    /// Each interval is moved by up to this share of it, earlier or later (0..=0.5).
    pub jitter: f64,
}

/// What a restarted monitor knows of a slot from its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotHistory {
    /// When its last run started, ms.
    pub last_start_ms: u64,
    /// How many runs it has had.
    pub runs: u64,
}

/// Why a schedule cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// Fewer than two hosts: there is no pair to measure.
    #[error("the hosts file lists {0} host(s): a monitor needs at least two")]
    TooFewHosts(usize),
    /// An interval of zero, or a jitter outside 0..=0.5.
    #[error("workload {workload}: {problem}")]
    Cadence {
        /// Which workload (its position).
        workload: usize,
        /// What is wrong and the fix.
        problem: String,
    },
}

/// The monitor's plan: when each slot is next due.
#[derive(Debug, Clone)]
pub struct Schedule {
    cadences: Vec<Cadence>,
    seed: u64,
    /// Slot → (due time, runs so far).
    due: BTreeMap<Slot, (u64, u64)>,
}

impl Schedule {
    /// The schedule of `hosts` hosts and these workloads at `now_ms`, resuming each slot whose
    /// history is known.
    pub fn new(
        hosts: usize,
        cadences: Vec<Cadence>,
        seed: u64,
        now_ms: u64,
        known: &BTreeMap<Slot, SlotHistory>,
    ) -> Result<Schedule, ScheduleError> {
        if hosts < 2 {
            return Err(ScheduleError::TooFewHosts(hosts));
        }
        for (workload, c) in cadences.iter().enumerate() {
            if c.every_ms == 0 {
                return Err(ScheduleError::Cadence {
                    workload,
                    problem: "an interval of 0: give --every a duration such as 10m".into(),
                });
            }
            if !(0.0..=0.5).contains(&c.jitter) {
                return Err(ScheduleError::Cadence {
                    workload,
                    problem: format!("jitter {} is outside 0..=0.5 of the interval", c.jitter),
                });
            }
        }
        let mut schedule = Schedule {
            cadences,
            seed,
            due: BTreeMap::new(),
        };
        for workload in 0..schedule.cadences.len() {
            for src in 0..hosts {
                for dst in (0..hosts).filter(|&d| d != src) {
                    let slot = Slot { src, dst, workload };
                    let entry = match known.get(&slot) {
                        Some(h) => (schedule.after(slot, h.last_start_ms, h.runs), h.runs),
                        None => (now_ms + schedule.first_offset(slot), 0),
                    };
                    schedule.due.insert(slot, entry);
                }
            }
        }
        Ok(schedule)
    }

    /// The slots to start at `now_ms`, given the hosts already in a test: due slots, most
    /// overdue first, each only if neither host is busy (nor taken by an earlier slot of this
    /// call). The caller starts them and reports each with [`Schedule::started`].
    pub fn to_start(&self, now_ms: u64, busy: &BTreeSet<usize>) -> Vec<Slot> {
        let mut due: Vec<(u64, Slot)> = self
            .due
            .iter()
            .filter(|(_, (at, _))| *at <= now_ms)
            .map(|(slot, (at, _))| (*at, *slot))
            .collect();
        due.sort();
        let mut taken = busy.clone();
        let mut out = Vec::new();
        for (_, slot) in due {
            if !taken.contains(&slot.src) && !taken.contains(&slot.dst) {
                taken.insert(slot.src);
                taken.insert(slot.dst);
                out.push(slot);
            }
        }
        out
    }

    /// Records that `slot` started at `at_ms`: its next time is one jittered interval later.
    pub fn started(&mut self, slot: Slot, at_ms: u64) {
        let runs = self.due.get(&slot).map_or(0, |(_, r)| *r) + 1;
        let next = self.after(slot, at_ms, runs);
        self.due.insert(slot, (next, runs));
    }

    /// When the next slot comes due (the coordinator sleeps until then or a test ends).
    pub fn next_due(&self) -> Option<u64> {
        self.due.values().map(|(at, _)| *at).min()
    }

    /// How far behind the schedule is at `now_ms`: the most overdue slot's wait, ms (0 when
    /// none is due). A monitor whose tests cannot all fit their intervals shows it growing.
    pub fn lag_ms(&self, now_ms: u64) -> u64 {
        self.next_due().map_or(0, |at| now_ms.saturating_sub(at))
    }

    /// A slot's due time and run count.
    pub fn slot(&self, slot: Slot) -> Option<(u64, u64)> {
        self.due.get(&slot).copied()
    }

    /// The start after one at `start_ms`, the slot's `runs`-th: one interval, jittered.
    fn after(&self, slot: Slot, start_ms: u64, runs: u64) -> u64 {
        let c = self.cadences[slot.workload];
        let every = c.every_ms as f64;
        // u in [-1, 1): the same for the same slot and run, on every start of the monitor.
        let u = unit(hash(self.seed, slot, runs)) * 2.0 - 1.0;
        let interval = (every * (1.0 + c.jitter * u)).round().max(1.0);
        start_ms.saturating_add(interval as u64)
    }

    /// A never-run slot's first due time after the monitor starts: a point of its first
    /// interval, so the mesh's first round spreads over it.
    fn first_offset(&self, slot: Slot) -> u64 {
        let every = self.cadences[slot.workload].every_ms;
        (unit(hash(self.seed ^ 0x5eed_f1e5, slot, 0)) * every as f64) as u64
    }
}

/// A well-mixed 64-bit hash of the seed, the slot and the run (SplitMix64's finaliser, Steele
/// et al. 2014, over the fields in turn).
fn hash(seed: u64, slot: Slot, runs: u64) -> u64 {
    [slot.src as u64, slot.dst as u64, slot.workload as u64, runs]
        .iter()
        .fold(seed, |h, v| mix(h ^ mix(*v)))
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A hash as a float in [0, 1).
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
