//! A simulated CPU shared by one SCHED_FIFO worker and the endpoint threads woken on it: the
//! threads run, in the order they were woken, only while the worker sleeps or pauses.

use std::collections::VecDeque;

use crate::time::Nanos;

/// An endpoint thread woken on a CPU: it needs `work` ns of CPU, and then `done` happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Task<E> {
    /// When it was woken.
    pub woken: Nanos,
    /// CPU time it still needs.
    pub work: Nanos,
    /// What its completion does.
    pub done: E,
}

/// One CPU: the queue of woken threads, and since when the worker has left it free.
#[derive(Debug, Clone)]
pub(crate) struct Cpu<E> {
    queue: VecDeque<Task<E>>,
    free_since: Option<Nanos>,
}

impl<E: Copy> Default for Cpu<E> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            free_since: None,
        }
    }
}

impl<E: Copy> Cpu<E> {
    /// Wakes a thread at `at`.
    pub(crate) fn wake(&mut self, task: Task<E>) {
        self.queue.push_back(task);
    }

    /// The worker leaves the CPU free from `at` (it sleeps or pauses).
    pub(crate) fn free(&mut self, at: Nanos) {
        self.free_since = Some(at);
    }

    /// Runs the woken threads from the time the CPU was freed up to `until`, returning each
    /// completion with its time; the worker then takes the CPU back (at `until`, preempting a
    /// thread part way). A CPU the worker holds runs nothing.
    pub(crate) fn run_until(&mut self, until: Nanos, taken: bool) -> Vec<(Nanos, E)> {
        let mut done = Vec::new();
        let Some(mut t) = self.free_since else {
            return done;
        };
        while let Some(task) = self.queue.front_mut() {
            let start = t.max(task.woken);
            if start >= until {
                break;
            }
            let ran = task.work.min(until - start);
            task.work -= ran;
            t = start + ran;
            if task.work == 0 {
                done.push((t, task.done));
                self.queue.pop_front();
            } else {
                break;
            }
        }
        self.free_since = if taken { None } else { Some(until.max(t)) };
        done
    }

    /// The earliest time a queued thread could finish if the CPU stays free (None: nothing
    /// queued or the worker holds the CPU).
    pub(crate) fn next_completion(&self) -> Option<Nanos> {
        let t = self.free_since?;
        let task = self.queue.front()?;
        Some(t.max(task.woken) + task.work)
    }
}
