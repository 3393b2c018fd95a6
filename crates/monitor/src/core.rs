//! The monitor's decisions in one place, pure: which tests and doctor runs start, what a
//! finished test changes (its run, its alerts, the pair's state on the metrics page), what a
//! doctor's verdict changes (the cause its pair's alerts name), resumed from the runs and
//! alerts a database kept. The coordinator (I/O) asks it what to start, runs the tasks, and
//! hands each outcome back; a simulation drives the same code in virtual time.
//!
//! A regression queues the doctor on its pair. The doctor needs both hosts to itself, as a
//! test does: from the moment it is queued no test starts on either host, so it starts as soon
//! as the tests in flight there end, and the pair's other tests wait for it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tcplab_results::report::Report;
use tcplab_stats::{RegressionConfig, StatsError};

use crate::alerts::{Alerts, Event, Watched};
use crate::evidence::Cause;
use crate::figures::{self, Figure};
use crate::metrics::{Outcome, PairState, Snapshot};
use crate::schedule::{Cadence, Pair, Schedule, ScheduleError, Slot, SlotHistory};
use crate::store::Run;

/// A workload the monitor runs on every pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its label in the database, the metrics and alerts (its kind, or kind and a name).
    pub label: String,
    /// How often.
    pub cadence: Cadence,
}

/// What the coordinator starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// A slot's test.
    Test(Slot),
    /// The doctor on a pair with a newly opened alert.
    Diagnose(Pair),
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
    /// Whether a regression queues the doctor (`--no-doctor` says not).
    diagnose: bool,
    /// Pairs waiting for the doctor, oldest first; their hosts take no new test.
    to_diagnose: VecDeque<Pair>,
    /// Pairs the doctor is on now.
    diagnosing: BTreeSet<Pair>,
    /// What each pair with an open alert is known to suffer from.
    causes: BTreeMap<Pair, Cause>,
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
            diagnose: true,
            to_diagnose: VecDeque::new(),
            diagnosing: BTreeSet::new(),
            causes: BTreeMap::new(),
        };
        for (slot, r) in placed {
            // Replaying what was already judged: the events were stored when they happened.
            let _ = monitor.absorb(slot, r);
        }
        Ok(monitor)
    }

    /// Without the doctor: a regression's cause is [`Cause::NotDiagnosed`] and nothing is
    /// queued.
    pub fn without_doctor(mut self) -> Monitor {
        self.diagnose = false;
        self
    }

    /// Picks up the alerts a database kept open (after [`Monitor::new`] replayed the runs):
    /// each pair's cause as its evidence said, and the doctor queued again on pairs whose
    /// alert never got its evidence (the monitor stopped first). `open` gives (source, target)
    /// host names and the stored cause, if any.
    pub fn resume_alerts<'a>(
        &mut self,
        open: impl IntoIterator<Item = (&'a str, &'a str, Option<Cause>)>,
    ) {
        for (src, dst, cause) in open {
            let (Some(src), Some(dst)) = (self.host_index(src), self.host_index(dst)) else {
                continue;
            };
            let pair = Pair { src, dst };
            match cause {
                Some(c) => {
                    self.causes.insert(pair, c);
                }
                None => self.queue_doctor(pair),
            }
        }
    }

    fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h == name)
    }

    /// The tasks to start at `now_ms` (no host in two at once): the doctor on queued pairs
    /// whose hosts are free first, then the tests that are due on hosts neither busy nor
    /// waiting for the doctor. Each is marked running.
    pub fn start(&mut self, now_ms: u64) -> Vec<Task> {
        let mut busy: BTreeSet<usize> = self
            .running
            .keys()
            .map(|s| s.pair())
            .chain(self.diagnosing.iter().copied())
            .flat_map(|p| [p.src, p.dst])
            .collect();
        let mut tasks = Vec::new();
        let mut waiting = VecDeque::new();
        while let Some(pair) = self.to_diagnose.pop_front() {
            if busy.contains(&pair.src) || busy.contains(&pair.dst) {
                waiting.push_back(pair);
            } else {
                busy.extend([pair.src, pair.dst]);
                self.diagnosing.insert(pair);
                tasks.push(Task::Diagnose(pair));
            }
        }
        // A queued doctor holds its hosts: tests there would keep it waiting for ever.
        busy.extend(waiting.iter().flat_map(|p| [p.src, p.dst]));
        self.to_diagnose = waiting;
        for slot in self.schedule.to_start(now_ms, &busy) {
            let index = self.schedule.slot(slot).map_or(0, |(_, runs)| runs);
            self.schedule.started(slot, now_ms);
            self.running.insert(slot, (now_ms, index));
            tasks.push(Task::Test(slot));
        }
        tasks
    }

    /// Takes the doctor's verdict on `pair` (started by [`Monitor::start`]): the cause its
    /// open alerts name from now on. A pair the doctor was not on changes nothing.
    pub fn diagnosed(&mut self, pair: Pair, cause: Cause) -> bool {
        if !self.diagnosing.remove(&pair) {
            return false;
        }
        if self.pair_has_open_alert(pair) {
            self.causes.insert(pair, cause);
        } else {
            // The pair recovered while the doctor ran: nothing is open to name a cause.
            self.causes.remove(&pair);
        }
        true
    }

    fn queue_doctor(&mut self, pair: Pair) {
        if !self.diagnose {
            self.causes.insert(pair, Cause::NotDiagnosed);
            return;
        }
        self.causes.insert(pair, Cause::Pending);
        if !self.to_diagnose.contains(&pair) && !self.diagnosing.contains(&pair) {
            self.to_diagnose.push_back(pair);
        }
    }

    fn pair_has_open_alert(&self, pair: Pair) -> bool {
        self.pairs
            .iter()
            .any(|(slot, p)| slot.pair() == pair && !p.regressed.is_empty())
    }

    /// The cause the open alerts of `pair` name (None: it has none open).
    pub fn cause(&self, pair: Pair) -> Option<&Cause> {
        self.causes.get(&pair)
    }

    /// Doctor runs queued or running.
    pub fn diagnoses(&self) -> usize {
        self.to_diagnose.len() + self.diagnosing.len()
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
        for e in &events {
            match e {
                Event::Opened { .. } => self.queue_doctor(slot.pair()),
                Event::Closed { .. } if !self.pair_has_open_alert(slot.pair()) => {
                    self.causes.remove(&slot.pair());
                }
                Event::Closed { .. } => {}
            }
        }
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
            cause: None,
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
            pairs: self
                .pairs
                .iter()
                .map(|(slot, p)| PairState {
                    cause: self.causes.get(&slot.pair()).map(|c| c.label().to_string()),
                    ..p.clone()
                })
                .collect(),
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

    /// Tests and doctor runs in flight now.
    pub fn running(&self) -> usize {
        self.running.len() + self.diagnosing.len()
    }

    /// The names of a pair's hosts.
    pub fn pair_names(&self, pair: Pair) -> (&str, &str) {
        (&self.hosts[pair.src], &self.hosts[pair.dst])
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
