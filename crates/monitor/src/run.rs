//! The coordinator: asks the [`Monitor`] what to start, runs each test on its own thread
//! through the mesh's [`PairRunner`] (the source agent runs the client toward the
//! destination's) and each doctor run through a [`PairDoctor`], records each outcome as it
//! ends, tells the world of each alert's change ([`Notice`]), and keeps the metrics page's
//! snapshot current. A stop request lets the tasks in flight end and records them; nothing
//! else starts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tcplab_doctor::Finding;
use tcplab_fleet::mesh::run::{MeshHost, PairRunner};
use tcplab_results::report::Report;

use crate::alerts::Event;
use crate::core::{Finished, Monitor, Task};
use crate::evidence::Evidence;
use crate::metrics::{Outcome, Snapshot};
use crate::schedule::{Pair, Slot};
use crate::store::{AlertRow, MonitorStore, StoreError};

/// Runs the doctor on a pair: its findings, ranked, or why it could not run.
pub trait PairDoctor: Send + Sync {
    /// `src`'s agent runs the battery's clients toward `dst`'s agent.
    fn diagnose(&self, src: &MeshHost, dst: &MeshHost) -> Result<Vec<Finding>, String>;
}

/// What changed about an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// A figure regressed.
    Opened,
    /// The doctor's evidence arrived.
    Diagnosed,
    /// The pair is back.
    Closed,
}

/// An alert's change, with the alert as the database now holds it: what the log line, the
/// webhook's payload and `tcplab monitor alerts` all show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// What changed.
    pub change: Change,
    /// The alert.
    pub alert: AlertRow,
}

/// A runner per workload, in the monitor's workload order.
pub type Runners = Vec<Arc<dyn PairRunner + Send + Sync>>;

/// How the history is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Runs older than this are dropped, ms (`--keep`).
    pub for_ms: u64,
    /// And each slot keeps at most this many.
    pub per_slot: u64,
    /// How often the database is pruned, ms.
    pub prune_every_ms: u64,
}

/// What a stopped coordinator did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Tests that ended (any outcome).
    pub runs: u64,
    /// Of them, with no result.
    pub failed: u64,
    /// Alerts opened.
    pub opened: u64,
    /// Alerts closed.
    pub closed: u64,
    /// Doctor runs that ended.
    pub diagnoses: u64,
}

/// The fleet the tests run on.
#[derive(Clone, Copy)]
pub struct Fleet<'a> {
    /// The hosts, in the monitor's order.
    pub hosts: &'a [MeshHost],
    /// A runner per workload.
    pub runners: &'a Runners,
    /// The doctor a regression calls on its pair (None: the monitor was made
    /// [`Monitor::without_doctor`], and queues none).
    pub doctor: Option<&'a Arc<dyn PairDoctor>>,
}

impl std::fmt::Debug for Fleet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("hosts", &self.hosts)
            .field("runners", &self.runners.len())
            .finish()
    }
}

/// Where the coordinator tells the world: the metrics page's snapshot and each alert's change.
pub struct Outputs<'a> {
    /// The snapshot `/metrics` renders.
    pub page: &'a Mutex<Snapshot>,
    /// Called for every alert opened, diagnosed or closed.
    pub on_notice: &'a mut dyn FnMut(&Notice),
}

/// A task's end, as its thread sends it.
enum Done {
    Test(Slot, Result<Box<Report>, String>),
    Diagnosis(Pair, Result<Vec<Finding>, String>),
}

impl std::fmt::Debug for Outputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outputs").field("page", &self.page).finish()
    }
}

/// Runs until `stop` is set, then waits for the tests in flight. `clock` gives Unix ms.
pub fn coordinate(
    monitor: &mut Monitor,
    store: &MonitorStore,
    fleet: Fleet<'_>,
    out: Outputs<'_>,
    clock: &dyn Fn() -> u64,
    stop: &AtomicBool,
    keep: Keep,
) -> Result<Totals, StoreError> {
    let (tx, rx) = mpsc::channel::<Done>();
    let mut totals = Totals::default();
    let mut up: BTreeMap<usize, bool> = BTreeMap::new();
    let mut pruned_at = clock();
    loop {
        let now = clock();
        if !stop.load(Ordering::Relaxed) {
            for task in monitor.start(now) {
                spawn(task, fleet, tx.clone());
            }
        } else if monitor.running() == 0 {
            return Ok(totals);
        }
        let wait = monitor
            .next_due()
            .map_or(1_000, |due| due.saturating_sub(now))
            .clamp(5, 1_000);
        match rx.recv_timeout(Duration::from_millis(wait)) {
            Ok(Done::Test(slot, result)) => {
                let ok = result.is_ok();
                up.insert(slot.src, ok);
                up.insert(slot.dst, ok);
                record(monitor, store, slot, result, &mut totals, out.on_notice)?;
            }
            Ok(Done::Diagnosis(pair, findings)) => {
                totals.diagnoses += 1;
                let evidence = match findings {
                    Ok(f) => Evidence::of(f, clock()),
                    Err(why) => Evidence::failed(why, clock()),
                };
                if monitor.diagnosed(pair, evidence.cause.clone()) {
                    let (src, dst) = monitor.pair_names(pair);
                    for alert in store.set_evidence(src, dst, &evidence)? {
                        (out.on_notice)(&Notice {
                            change: Change::Diagnosed,
                            alert,
                        });
                    }
                }
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        let now = clock();
        if now.saturating_sub(pruned_at) >= keep.prune_every_ms {
            store.prune(now, keep.for_ms, keep.per_slot)?;
            pruned_at = now;
        }
        let hosts_up = up.values().filter(|u| **u).count();
        *out.page.lock().unwrap_or_else(|e| e.into_inner()) = monitor.snapshot(now, hosts_up);
    }
}

/// Starts a task on its own thread; its end comes back on `tx`.
fn spawn(task: Task, fleet: Fleet<'_>, tx: mpsc::Sender<Done>) {
    match task {
        Task::Test(slot) => {
            let (src, dst) = (fleet.hosts[slot.src].clone(), fleet.hosts[slot.dst].clone());
            let runner = fleet.runners[slot.workload].clone();
            std::thread::spawn(move || {
                let _ = tx.send(Done::Test(slot, runner.run(&src, &dst).map(Box::new)));
            });
        }
        Task::Diagnose(pair) => {
            let (src, dst) = (fleet.hosts[pair.src].clone(), fleet.hosts[pair.dst].clone());
            let doctor = fleet.doctor.cloned();
            std::thread::spawn(move || {
                let findings = match doctor {
                    Some(d) => d.diagnose(&src, &dst),
                    None => Err("the monitor has no doctor to run".to_string()),
                };
                let _ = tx.send(Done::Diagnosis(pair, findings));
            });
        }
    }
}

/// Folds one ended test into the monitor and the database.
fn record(
    monitor: &mut Monitor,
    store: &MonitorStore,
    slot: Slot,
    result: Result<Box<Report>, String>,
    totals: &mut Totals,
    on_notice: &mut dyn FnMut(&Notice),
) -> Result<(), StoreError> {
    let (finished, json) = match result {
        Ok(report) => {
            let trustworthy = report
                .meta()
                .facts
                .emulator
                .as_ref()
                .map(|e| e.fidelity.trustworthy);
            let json = serde_json::to_string(&report).ok();
            (
                Finished::Result {
                    report,
                    emulator_trustworthy: trustworthy,
                },
                json,
            )
        }
        Err(_) => (Finished::Failed, None),
    };
    let Some((run, events)) = monitor.finish(slot, finished) else {
        return Ok(());
    };
    totals.runs += 1;
    totals.failed += u64::from(run.outcome == Outcome::Failed);
    store.record(&run, json.as_deref())?;
    for event in &events {
        let (change, id) = match event {
            Event::Opened {
                watched,
                at_ms,
                check,
            } => {
                totals.opened += 1;
                let id = store.open_alert(&run.slot(), &watched.figure, *at_ms, check)?;
                (Change::Opened, Some(id))
            }
            Event::Closed { watched, at_ms, .. } => {
                totals.closed += 1;
                let id = store.close_alert(&run.slot(), &watched.figure, *at_ms)?;
                (Change::Closed, id)
            }
        };
        if let Some(alert) = id.map(|id| store.alert(id)).transpose()?.flatten() {
            on_notice(&Notice { change, alert });
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
