//! [`Bridge`]: opens both interfaces, starts the worker thread(s), and offers live counters,
//! reconfiguration and an orderly stop with a [`Report`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{IoError, WorkerError};
use crate::io::port::open_ports;
use crate::io::sys::clock::{allowed_cpus, monotonic_ns};
use crate::io::sys::iface::{self, IfaceInfo};
use crate::io::sys::wake::Waker;
use crate::model::Model;
use crate::options::{IoOptions, Threads};
use crate::report::counters::DirCounters;
use crate::report::verdict::{Report, ThreadUsage};
use crate::run::awake::KeepAwake;
use crate::run::direction::{DirSettings, Direction, ReconfigRequest};
use crate::run::worker::{self, WorkerCtl};
use crate::sched::lone::LoneSignal;
/// Live counters of both directions (`tcplab_results::emulator`).
pub use tcplab_results::emulator::Snapshot;

/// How long `reconfigure` waits for a worker to apply a change.
const RECONFIGURE_TIMEOUT: Duration = Duration::from_secs(2);

/// A running layer-2 bridge between two interfaces with a link model per direction.
#[derive(Debug)]
pub struct Bridge<M: Model> {
    counters: [Arc<DirCounters>; 2],
    reconfig: [Sender<ReconfigRequest<M::Config>>; 2],
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    workers: Vec<JoinHandle<Result<ThreadUsage, WorkerError>>>,
    /// The workers' kernel thread ids, in start order.
    worker_tids: Vec<i32>,
    errors: Mutex<Vec<String>>,
    started: u64,
    busy_poll: bool,
    /// The keep-awake spinners (None when off or busy-polling).
    keep_awake: Option<KeepAwake>,
    /// The models' seed, when the bridge built them (see `EmuBridge::start`).
    pub(crate) seed: Option<u64>,
}

const NAMES: [&str; 2] = ["a->b", "b->a"];

/// Each worker's own directions and the directions whose overdue frames it helps send.
type Group<T> = (Vec<Arc<T>>, Vec<Arc<T>>);

/// The directions each worker thread serves ([`Threads`]) and helps (`Tuning::help_due`).
pub(crate) fn thread_groups<T>(opts: &IoOptions, ab: Arc<T>, ba: Arc<T>) -> Vec<Group<T>> {
    match opts.threads {
        Threads::Single => vec![(vec![ab, ba], Vec::new())],
        Threads::PerDirection if opts.tuning.help_due => vec![
            (vec![Arc::clone(&ab)], vec![Arc::clone(&ba)]),
            (vec![ba], vec![ab]),
        ],
        Threads::PerDirection => vec![(vec![ab], Vec::new()), (vec![ba], Vec::new())],
    }
}

fn check_iface(name: &str) -> Result<IfaceInfo, IoError> {
    let info = iface::lookup(name)
        .map_err(|e| IoError::setup(name, "interface look-up", e))?
        .ok_or_else(|| IoError::NoSuchInterface {
            iface: name.to_owned(),
        })?;
    if !info.up {
        return Err(IoError::InterfaceDown {
            iface: name.to_owned(),
        });
    }
    Ok(info)
}

impl<M: Model> Bridge<M> {
    /// Bridges `iface_a` and `iface_b` (in the calling thread's network namespace): frames
    /// from A go through `forward` to B, frames from B through `reverse` to A. Sockets are
    /// opened here, so every setup error is returned before any thread starts.
    pub fn with_models(
        iface_a: &str,
        iface_b: &str,
        forward: M,
        reverse: M,
        opts: &IoOptions,
    ) -> Result<Self, IoError> {
        opts.validate()?;
        if iface_a == iface_b {
            return Err(IoError::SameInterface {
                iface: iface_a.to_owned(),
            });
        }
        let (a, b) = (check_iface(iface_a)?, check_iface(iface_b)?);
        if opts.gso() {
            if let Some(off) = [&a, &b].into_iter().find(|i| !(i.tso && i.tx_csum)) {
                return Err(IoError::GsoOffloadsOff {
                    iface: off.name.clone(),
                });
            }
        }
        // The spinners are forked before any socket opens: a forked child holds a copy of
        // every open fd until its first instruction closes them, and a copy of an XDP link
        // keeps the program attached (an AF_XDP test saw it outlive `stop` that way).
        let keep_awake = if opts.keep_awake && !opts.busy_poll {
            Some(KeepAwake::start().map_err(IoError::Spawn)?)
        } else {
            None
        };
        let (ports_ab, ports_ba) = open_ports(&a, &b, opts)?;
        let counters = [
            Arc::new(DirCounters::default()),
            Arc::new(DirCounters::default()),
        ];
        let (tx_ab, rx_ab) = mpsc::channel();
        let (tx_ba, rx_ba) = mpsc::channel();
        let dir = |i: usize, ports, model, rx| {
            Direction::new(
                NAMES[i],
                ports,
                model,
                DirSettings {
                    slab_slots: opts.effective_slab_slots(),
                    vnet: opts.carries_vnet(),
                    gso: opts.gso(),
                    tuning: opts.tuning,
                },
                Arc::clone(&counters[i]),
                rx,
            )
        };
        let lone = if opts.tuning.lone_pause_ns > 0 {
            LoneSignal::on_cpus(&allowed_cpus().unwrap_or_default())
        } else {
            LoneSignal::off()
        };
        let d_ab = dir(0, ports_ab, forward, rx_ab).with_lone_signal(lone.clone());
        let d_ba = dir(1, ports_ba, reverse, rx_ba).with_lone_signal(lone.clone());
        let (d_ab, d_ba) = (Arc::new(Mutex::new(d_ab)), Arc::new(Mutex::new(d_ba)));
        let groups = thread_groups(opts, d_ab, d_ba);
        let stop = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Waker::new().map_err(IoError::Spawn)?);
        let started = monotonic_ns();
        let mut workers = Vec::new();
        let mut worker_tids = Vec::new();
        for (i, (own, helped)) in groups.into_iter().enumerate() {
            let ctl = WorkerCtl {
                stop: Arc::clone(&stop),
                waker: Arc::clone(&waker),
                busy_poll: opts.busy_poll,
                tuning: opts.tuning,
                lone: lone.clone(),
                cpu: (!opts.cpus.is_empty()).then(|| opts.cpus[i % opts.cpus.len()]),
                rt_priority: opts.rt_priority,
                awake: keep_awake.as_ref().map(KeepAwake::handle),
            };
            let (ready_tx, ready_rx) = mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name(format!("emu-io-{i}"))
                .spawn(move || worker::run(&own, &helped, &ctl, &ready_tx));
            let failure = match spawned {
                Ok(h) => match ready_rx.recv_timeout(RECONFIGURE_TIMEOUT) {
                    Ok(Some(tid)) => {
                        worker_tids.push(tid);
                        workers.push(h);
                        None
                    }
                    // The set-up failed and the worker returned why: its join has the error.
                    Ok(None) => Some(IoError::WorkerSetup(match h.join() {
                        Ok(Err(e)) => e,
                        _ => WorkerError::NotStarted,
                    })),
                    Err(_) => {
                        workers.push(h);
                        Some(IoError::WorkerSetup(WorkerError::NotStarted))
                    }
                },
                Err(e) => Some(IoError::Spawn(e)),
            };
            if let Some(err) = failure {
                stop.store(true, Ordering::Release);
                waker.wake();
                workers.into_iter().for_each(|h| drop(h.join()));
                return Err(err);
            }
        }
        Ok(Self {
            counters,
            reconfig: [tx_ab, tx_ba],
            stop,
            waker,
            workers,
            worker_tids,
            errors: Mutex::new(Vec::new()),
            started,
            busy_poll: opts.busy_poll,
            keep_awake,
            seed: None,
        })
    }

    /// The worker threads' kernel ids, in start order (`emu-io-0`, `emu-io-1`): where to look
    /// for their CPU, scheduling class and counters (`/proc/self/task/<tid>`, `chrt -p`).
    pub fn worker_tids(&self) -> &[i32] {
        &self.worker_tids
    }

    /// The seed the models were built with, if the bridge built them: print it to replay.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Live counters (readable while frames flow; each field is individually consistent).
    pub fn stats(&self) -> Snapshot {
        Snapshot {
            forward: self.counters[0].snapshot(),
            reverse: self.counters[1].snapshot(),
            elapsed_ns: monotonic_ns().saturating_sub(self.started),
        }
    }

    /// False once a worker thread has exited (it failed; `stop` reports why).
    pub fn is_running(&self) -> bool {
        self.workers.iter().all(|h| !h.is_finished())
    }

    /// Applies new configurations to the running models without dropping queued frames.
    /// Waits for both workers to answer; a rejected direction keeps its old configuration.
    pub fn reconfigure(&self, forward: M::Config, reverse: M::Config) -> Result<(), IoError> {
        let mut answers = Vec::with_capacity(2);
        for (i, cfg) in [forward, reverse].into_iter().enumerate() {
            let (tx, rx) = mpsc::channel();
            self.reconfig[i]
                .send((cfg, tx))
                .map_err(|_| IoError::WorkerGone {
                    direction: NAMES[i],
                })?;
            answers.push(rx);
        }
        self.waker.wake();
        for (i, rx) in answers.into_iter().enumerate() {
            let answer = rx.recv_timeout(RECONFIGURE_TIMEOUT);
            let direction = NAMES[i];
            match answer {
                Ok(Ok(())) => {}
                Ok(Err(reason)) => {
                    self.note_error(format!("reconfigure {direction} rejected: {reason}"));
                    return Err(IoError::Reconfigure { direction, reason });
                }
                Err(_) => return Err(IoError::WorkerGone { direction }),
            }
        }
        Ok(())
    }

    fn note_error(&self, e: String) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(e);
        }
    }

    /// Stops the workers and returns the final counters and CPU use. Frames still waiting for
    /// their departure are not sent; they show as `queued`.
    pub fn stop(mut self) -> Report {
        self.stop.store(true, Ordering::Release);
        self.waker.wake();
        let mut threads = Vec::new();
        let mut errors = self.errors.lock().map(|e| e.clone()).unwrap_or_default();
        for h in std::mem::take(&mut self.workers) {
            match h.join() {
                Ok(Ok(usage)) => threads.push(usage),
                Ok(Err(e)) => errors.push(format!("worker failed: {e}")),
                Err(_) => errors.push("worker panicked".to_owned()),
            }
        }
        let keep_awake_cpu_ns = self.keep_awake.take().map_or(0, KeepAwake::stop);
        let wall_ns = monotonic_ns().saturating_sub(self.started);
        Report {
            forward: self.counters[0].snapshot(),
            reverse: self.counters[1].snapshot(),
            wall_ns,
            threads,
            keep_awake_cpu_ns,
            busy_poll: self.busy_poll,
            seed: self.seed,
            errors,
        }
    }
}

impl<M: Model> Drop for Bridge<M> {
    /// A bridge dropped without `stop` (an early return, a panicking test) still ends its
    /// threads, so its sockets close and its namespace can go away.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.waker.wake();
        for h in std::mem::take(&mut self.workers) {
            drop(h.join());
        }
    }
}
