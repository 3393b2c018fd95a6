//! A thread kept inside one lab host that runs jobs sent to it.
//!
//! `Host::run` starts a thread per call: create it, enter the namespace, hand back "entered",
//! run, join. A reset lab does that several times per run (each sysctl write, the client), and
//! on a busy machine every one of those hand-offs waits for a CPU. A [`HostWorker`] enters its
//! host once, when the session starts it, and each job is then one hand-off there and one back.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::mpsc;
use std::thread::JoinHandle;

use tcplab_lab::Host;

use crate::runner::RunError;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A job's result on its way back (a panic travels back to the caller, the worker lives on).
pub type Pending<T> = mpsc::Receiver<std::thread::Result<T>>;

/// One thread inside one host, running the jobs sent to it in order.
#[derive(Debug)]
pub struct HostWorker {
    host: String,
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl HostWorker {
    /// Starts the thread inside `host`.
    pub fn start(host: &Host) -> Result<HostWorker, RunError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = host
            .spawn("tcplab-host-worker", move || {
                for job in queue {
                    job();
                }
            })
            .map_err(|e| {
                RunError::Failed(format!("starting a thread in host {}: {e}", host.name()))
            })?;
        Ok(HostWorker {
            host: host.name().to_string(),
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Sends `f` to the host's thread without waiting; [`HostWorker::wait`] takes its result.
    pub fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Pending<T>, RunError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
        });
        self.jobs
            .as_ref()
            .and_then(|j| j.send(job).ok())
            .ok_or_else(|| self.gone())?;
        Ok(rx)
    }

    /// The result of a submitted job (a panic in it is resumed here, as `Host::run` does).
    pub fn wait<T>(&self, pending: Pending<T>) -> Result<T, RunError> {
        match pending.recv() {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => Err(self.gone()),
        }
    }

    /// Runs `f` in the host and waits for it.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, RunError> {
        let pending = self.submit(f)?;
        self.wait(pending)
    }

    fn gone(&self) -> RunError {
        RunError::Failed(format!("the thread in host {} has stopped", self.host))
    }
}

impl Drop for HostWorker {
    /// Closes the queue (the thread ends after the job in hand) and joins the thread.
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
