//! The coordinator: asks the [`Monitor`] what to start, runs each test on its own thread
//! through the mesh's [`PairRunner`] (the source agent runs the client toward the
//! destination's), records each outcome as it ends, and keeps the metrics page's snapshot
//! current. A stop request lets the tests in flight end and records them; nothing else starts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tcplab_fleet::mesh::run::{MeshHost, PairRunner};
use tcplab_results::report::Report;

use crate::alerts::Event;
use crate::core::{Finished, Monitor};
use crate::metrics::{Outcome, Snapshot};
use crate::schedule::Slot;
use crate::store::{MonitorStore, StoreError};

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
}

/// The fleet the tests run on.
#[derive(Clone, Copy)]
pub struct Fleet<'a> {
    /// The hosts, in the monitor's order.
    pub hosts: &'a [MeshHost],
    /// A runner per workload.
    pub runners: &'a Runners,
}

impl std::fmt::Debug for Fleet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("hosts", &self.hosts)
            .field("runners", &self.runners.len())
            .finish()
    }
}

/// Where the coordinator tells the world: the metrics page's snapshot and each alert's change
/// (with its id in the database, so the doctor's evidence can be attached to it).
pub struct Outputs<'a> {
    /// The snapshot `/metrics` renders.
    pub page: &'a Mutex<Snapshot>,
    /// Called for every alert opened or closed.
    pub on_event: &'a mut dyn FnMut(&Event, Option<i64>),
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
    let (tx, rx) = mpsc::channel::<(Slot, Result<Report, String>)>();
    let mut totals = Totals::default();
    let mut up: BTreeMap<usize, bool> = BTreeMap::new();
    let mut pruned_at = clock();
    loop {
        let now = clock();
        if !stop.load(Ordering::Relaxed) {
            for slot in monitor.start(now) {
                let (src, dst) = (fleet.hosts[slot.src].clone(), fleet.hosts[slot.dst].clone());
                let (runner, tx) = (fleet.runners[slot.workload].clone(), tx.clone());
                std::thread::spawn(move || {
                    let _ = tx.send((slot, runner.run(&src, &dst)));
                });
            }
        } else if monitor.running() == 0 {
            return Ok(totals);
        }
        let wait = monitor
            .next_due()
            .map_or(1_000, |due| due.saturating_sub(now))
            .clamp(5, 1_000);
        match rx.recv_timeout(Duration::from_millis(wait)) {
            Ok((slot, result)) => {
                let ok = result.is_ok();
                up.insert(slot.src, ok);
                up.insert(slot.dst, ok);
                record(monitor, store, slot, result, &mut totals, out.on_event)?;
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

/// Folds one ended test into the monitor and the database.
fn record(
    monitor: &mut Monitor,
    store: &MonitorStore,
    slot: Slot,
    result: Result<Report, String>,
    totals: &mut Totals,
    on_event: &mut dyn FnMut(&Event, Option<i64>),
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
                    report: Box::new(report),
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
        let id = match event {
            Event::Opened {
                watched,
                at_ms,
                check,
            } => {
                totals.opened += 1;
                let check = serde_json::to_string(check).unwrap_or_default();
                Some(store.open_alert(&run.slot(), &watched.figure, *at_ms, &check)?)
            }
            Event::Closed { watched, at_ms, .. } => {
                totals.closed += 1;
                store.close_alert(&run.slot(), &watched.figure, *at_ms)?;
                None
            }
        };
        on_event(event, id);
    }
    Ok(())
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
