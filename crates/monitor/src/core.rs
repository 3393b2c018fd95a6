//! The monitor's decisions in one place, pure: which tests start, what a finished test changes
//! (its run, its alerts, the pair's state on the metrics page), resumed from the runs a
//! database kept. The coordinator (I/O) asks it what to start, runs the tests, and hands each
//! outcome back; a simulation drives the same code in virtual time.

use std::collections::{BTreeMap, BTreeSet};

use tcplab_results::report::Report;
use tcplab_stats::{RegressionConfig, StatsError};

use crate::alerts::{Alerts, Event, Watched};
use crate::figures::{self, Figure};
use crate::metrics::{Outcome, PairState, Snapshot};
use crate::schedule::{Cadence, Schedule, ScheduleError, Slot, SlotHistory};
use crate::store::Run;

/// A workload the monitor runs on every pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its label in the database, the metrics and alerts (its kind, or kind and a name).
    pub label: String,
    /// How often.
    pub cadence: Cadence,
}

/// How a test ended, as the coordinator saw it.
#[derive(Debug, Clone)]
pub enum Finished {
    /// The agent returned a result (complete or cut short).
    Result {
        /// The result.
        report: Box<Report>,
        /// On a lab: whether the emulator kept the test's schedule.
        emulator_trustworthy: Option<bool>,
    },
    /// No result: the agent could not be reached, refused, or timed out.
    Failed,
}

/// What the monitor knows and decides.
#[derive(Debug)]
pub struct Monitor {
    hosts: Vec<String>,
    workloads: Vec<Workload>,
    schedule: Schedule,
    alerts: Alerts,
    pairs: BTreeMap<Slot, PairState>,
    running: BTreeMap<Slot, (u64, u64)>,
}

impl Monitor {
    /// A monitor of `hosts` running `workloads`, at `now_ms`, resumed from `past` (the kept
    /// runs, oldest first: each slot's schedule goes on from its count, its alerts' histories
    /// are rebuilt by replaying them). Runs of hosts or workloads no longer listed are left out.
    pub fn new(
        hosts: Vec<String>,
        workloads: Vec<Workload>,
        seed: u64,
        now_ms: u64,
        regression: RegressionConfig,
        past: &[Run],
    ) -> Result<Monitor, ScheduleError> {
        let cadences = workloads.iter().map(|w| w.cadence).collect();
        let index = |names: &[String], name: &str| names.iter().position(|n| n == name);
        let labels: Vec<String> = workloads.iter().map(|w| w.label.clone()).collect();
        let slot_of = |r: &Run| -> Option<Slot> {
            Some(Slot {
                src: index(&hosts, &r.src)?,
                dst: index(&hosts, &r.dst)?,
                workload: index(&labels, &r.workload)?,
            })
        };
        let placed: Vec<(Slot, &Run)> =
            past.iter().filter_map(|r| Some((slot_of(r)?, r))).collect();
        let mut known: BTreeMap<Slot, SlotHistory> = BTreeMap::new();
        for (slot, r) in &placed {
            let h = known.entry(*slot).or_insert(SlotHistory {
                last_start_ms: 0,
                runs: 0,
            });
            h.last_start_ms = h.last_start_ms.max(r.started_ms);
            h.runs = h.runs.max(r.index + 1);
        }
        let schedule = Schedule::new(hosts.len(), cadences, seed, now_ms, &known)?;
        let mut monitor = Monitor {
            hosts,
            workloads,
            schedule,
            alerts: Alerts::new(regression),
            pairs: BTreeMap::new(),
            running: BTreeMap::new(),
        };
        for (slot, r) in placed {
            // Replaying what was already judged: the events were stored when they happened.
            let _ = monitor.absorb(slot, r);
        }
        Ok(monitor)
    }

    /// The tests to start at `now_ms` (no host in two at once); each is marked running.
    pub fn start(&mut self, now_ms: u64) -> Vec<Slot> {
        let busy: BTreeSet<usize> = self.running.keys().flat_map(|s| [s.src, s.dst]).collect();
        let slots = self.schedule.to_start(now_ms, &busy);
        for slot in &slots {
            let index = self.schedule.slot(*slot).map_or(0, |(_, runs)| runs);
            self.schedule.started(*slot, now_ms);
            self.running.insert(*slot, (now_ms, index));
        }
        slots
    }

    /// Takes a started test's outcome: the run to record and the alerts it opened or closed.
    /// A slot that was not running (a stale outcome) changes nothing.
    pub fn finish(&mut self, slot: Slot, finished: Finished) -> Option<(Run, Vec<Event>)> {
        let (started_ms, index) = self.running.remove(&slot)?;
        let (outcome, figures, emulator_trustworthy) = match finished {
            Finished::Result {
                report,
                emulator_trustworthy,
            } => {
                let outcome = if report.meta().complete {
                    Outcome::Complete
                } else {
                    Outcome::Incomplete
                };
                (outcome, figures::of(&report), emulator_trustworthy)
            }
            Finished::Failed => (Outcome::Failed, Vec::new(), None),
        };
        let run = Run {
            src: self.hosts[slot.src].clone(),
            dst: self.hosts[slot.dst].clone(),
            workload: self.workloads[slot.workload].label.clone(),
            index,
            started_ms,
            outcome,
            figures,
            emulator_trustworthy,
        };
        let events = self.absorb(slot, &run).unwrap_or_default();
        Some((run, events))
    }

    /// Folds a run into the pair's state and its alerts.
    fn absorb(&mut self, slot: Slot, run: &Run) -> Result<Vec<Event>, StatsError> {
        let state = self.pairs.entry(slot).or_insert_with(|| PairState {
            src: run.src.clone(),
            dst: run.dst.clone(),
            workload: run.workload.clone(),
            last_run_unix_s: 0.0,
            last_outcome: Outcome::Failed,
            runs: [0; 3],
            figures: Vec::new(),
            emulator_trustworthy: None,
            regressed: Vec::new(),
        });
        state.last_run_unix_s = run.started_ms as f64 / 1e3;
        state.last_outcome = run.outcome;
        let k = Outcome::ALL
            .iter()
            .position(|o| *o == run.outcome)
            .unwrap_or(2);
        state.runs[k] += 1;
        if run.outcome == Outcome::Failed {
            return Ok(Vec::new());
        }
        state.figures = run.figures.clone();
        state.emulator_trustworthy = run.emulator_trustworthy;
        let mut events = Vec::new();
        // A run the emulator did not keep to its schedule says nothing about the path.
        if run.emulator_trustworthy == Some(false) {
            return Ok(events);
        }
        for (figure, value) in run.figures.iter().filter(|(f, _)| f.alerts()) {
            let watched = Watched {
                slot,
                figure: figure.name().to_string(),
            };
            if let Some(e) =
                self.alerts
                    .observe(&watched, *value, figure.objective(), run.started_ms)?
            {
                match &e {
                    Event::Opened { .. } => state.regressed.push(*figure),
                    Event::Closed { .. } => state.regressed.retain(|f| f != figure),
                }
                events.push(e);
            }
        }
        Ok(events)
    }

    /// When the next test comes due (the coordinator wakes then, or when a test ends).
    pub fn next_due(&self) -> Option<u64> {
        self.schedule.next_due()
    }

    /// The metrics page's state at `now_ms`.
    pub fn snapshot(&self, now_ms: u64, hosts_up: usize) -> Snapshot {
        Snapshot {
            hosts: self.hosts.len(),
            hosts_up,
            lag_s: self.schedule.lag_ms(now_ms) as f64 / 1e3,
            pairs: self.pairs.values().cloned().collect(),
        }
    }

    /// The names of a slot's hosts and its workload's label.
    pub fn names(&self, slot: Slot) -> (&str, &str, &str) {
        (
            &self.hosts[slot.src],
            &self.hosts[slot.dst],
            &self.workloads[slot.workload].label,
        )
    }

    /// Tests running now.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Figures with an open alert.
    pub fn open_alerts(&self) -> Vec<(Slot, Figure)> {
        self.pairs
            .iter()
            .flat_map(|(slot, p)| p.regressed.iter().map(move |f| (*slot, *f)))
            .collect()
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
