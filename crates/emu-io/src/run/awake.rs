//! Keep-awake: while the bridge holds a frame for a later departure, one `SCHED_IDLE` spinner
//! process per CPU keeps the CPUs from halting, so the worker's hrtimer and the endpoints' wake-ups
//! land on a running CPU.
//!
//! Why: in a VM an idle vCPU executes HLT and the host must wake it when its timer fires. On
//! the 2-vCPU test VM that exit made hrtimer sleeps late by p50 74 µs, p99 1.8 ms, max 4.1 ms
//! (a pure `ppoll` test at SCHED_FIFO, idle machine), against p99 134 ns, max 116 µs with a
//! spinner on each CPU: 10 ms of emulated delay then measured 20.1/23.1 ms ping RTT
//! (median/p99) without keep-awake and 20.1/20.3 ms with it (emu-io-bench.md, "keep-awake"). Bare
//! metal with deep C-states pays the same kind of exit latency.
//!
//! Cost: the spinners take only CPU time nobody else wants (`SCHED_IDLE` in a session of
//! their own at nice 19: every other task preempts them at once), and only while a frame
//! waits for its departure plus [`LINGER`]; an unimpaired bridge releases frames on arrival
//! and never wakes them. They are processes, not threads: `sys::spinner` says why.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::io::sys::clock::allowed_cpus;
use crate::io::sys::spinner::{SharedPage, fork_spinner, futex_wake_all, reap};
use crate::time::Nanos;

/// How long the CPUs stay awake after the last held frame's departure: covers the receiver's
/// wake-up and its answer reaching the bridge again (tens of µs), with a wide margin.
pub const LINGER: Nanos = 2_000_000;

/// What a worker holds: extends the awake window, waking the spinners when it had lapsed.
#[derive(Debug, Clone)]
pub struct AwakeHandle {
    page: Arc<SharedPage>,
}

/// The new window end for a hold until `t` at `now` when the window ends at `until`, and
/// whether the spinners may be asleep (the window had lapsed) and must be woken. Pure.
pub fn extend(until: Nanos, t: Nanos, now: Nanos) -> Option<(Nanos, bool)> {
    (t > until).then_some((t, until <= now))
}

impl AwakeHandle {
    /// Keeps the CPUs awake until `t` (absolute), `now` being the current time.
    pub fn hold_until(&self, t: Nanos, now: Nanos) {
        let w = self.page.words();
        let Some((new_until, lapsed)) = extend(w.until.load(Ordering::Acquire), t, now) else {
            return;
        };
        // fetch_max: two workers may extend at once; the later end wins.
        w.until.fetch_max(new_until, Ordering::AcqRel);
        if lapsed {
            // A spinner that saw the window closed re-checks it after reading seq, so a bump
            // after its read makes its futex wait return at once (no lost wake-up).
            w.seq.fetch_add(1, Ordering::AcqRel);
            futex_wake_all(&w.seq);
        }
    }
}

/// The spinner processes; stopped and reaped by [`KeepAwake::stop`] or on drop.
#[derive(Debug)]
pub struct KeepAwake {
    page: Arc<SharedPage>,
    pids: Vec<libc::pid_t>,
}

impl KeepAwake {
    /// Forks one spinner per CPU the calling thread may run on (see `sys::spinner`).
    pub fn start() -> std::io::Result<Self> {
        let mut k = Self {
            page: Arc::new(SharedPage::new()?),
            pids: Vec::new(),
        };
        for cpu in allowed_cpus()? {
            // On failure, `k` is dropped and reaps the spinners forked so far.
            k.pids.push(fork_spinner(&k.page, cpu)?);
        }
        Ok(k)
    }

    /// A handle for a worker.
    pub fn handle(&self) -> AwakeHandle {
        AwakeHandle {
            page: Arc::clone(&self.page),
        }
    }

    #[cfg(test)]
    /// How many spinners run.
    pub fn spinners(&self) -> usize {
        self.pids.len()
    }

    /// Stops the spinners; returns the CPU time they took in total (ns).
    pub fn stop(mut self) -> Nanos {
        self.stop_all()
    }

    fn stop_all(&mut self) -> Nanos {
        let w = self.page.words();
        w.stop.store(1, Ordering::Release);
        w.seq.fetch_add(1, Ordering::AcqRel);
        futex_wake_all(&w.seq);
        self.pids.drain(..).map(reap).sum()
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.stop_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sys::clock::monotonic_ns;

    #[test]
    fn a_hold_extends_only_forward_and_unparks_only_after_a_lapse() {
        // Window open until 5000 at now = 1000: a later end extends without unparking.
        assert_eq!(extend(5_000, 7_000, 1_000), Some((7_000, false)));
        // An earlier end changes nothing.
        assert_eq!(extend(5_000, 4_000, 1_000), None);
        assert_eq!(extend(5_000, 5_000, 1_000), None);
        // The window lapsed (until <= now): the spinners may be parked.
        assert_eq!(extend(5_000, 9_000, 5_000), Some((9_000, true)));
        assert_eq!(extend(0, 9_000, 6_000), Some((9_000, true)));
    }

    /// Field `n` (1-based, as in proc(5)) of /proc/PID/stat.
    fn stat_field(pid: libc::pid_t, n: usize) -> String {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // The command may hold spaces; fields after ")" are plain.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split_whitespace().nth(n - 3).unwrap().to_owned()
    }

    /// Field `n` of `pid`'s stat once it reads `want`, or what it reads after 5 s. A new or
    /// woken process on a loaded machine may wait a while for a CPU before it gets there.
    fn settled(pid: libc::pid_t, n: usize, want: &str) -> String {
        let start = std::time::Instant::now();
        loop {
            let v = stat_field(pid, n);
            if v == want || start.elapsed().as_secs() >= 5 {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn spinners_run_idle_in_their_own_session_only_while_a_frame_waits() {
        let k = KeepAwake::start().unwrap();
        assert_eq!(k.spinners(), allowed_cpus().unwrap().len());
        let pids = k.pids.clone();
        for &pid in &pids {
            // proc(5): 3 state, 6 session, 41 policy (5 = SCHED_IDLE). Each spinner sets its
            // own policy and session once it first runs.
            assert_eq!(
                settled(pid, 41, "5"),
                "5",
                "spinner {pid} is not SCHED_IDLE"
            );
            assert_eq!(
                settled(pid, 6, &pid.to_string()),
                pid.to_string(),
                "spinner {pid} leads no session"
            );
            let group =
                std::fs::read_to_string(format!("/proc/{pid}/autogroup")).unwrap_or_default();
            assert!(
                group.is_empty() || group.trim_end().ends_with("nice 19"),
                "{group}"
            );
            assert_eq!(
                settled(pid, 3, "S"),
                "S",
                "spinner {pid} spins with nothing held"
            );
        }
        // A frame held for 300 ms: every spinner is runnable (it may not get the CPU on a
        // loaded machine, which is the point of SCHED_IDLE).
        let now = monotonic_ns();
        k.handle().hold_until(now + 300_000_000, now);
        std::thread::sleep(std::time::Duration::from_millis(50));
        for &pid in &pids {
            assert_eq!(
                stat_field(pid, 3),
                "R",
                "spinner {pid} sleeps inside the window"
            );
        }
        // The window lapses: they sleep again, once each gets the CPU to see it (a runnable
        // SCHED_IDLE task may wait a while on a loaded machine, taking nothing meanwhile).
        std::thread::sleep(std::time::Duration::from_millis(300));
        for &pid in &pids {
            assert_eq!(
                settled(pid, 3, "S"),
                "S",
                "spinner {pid} spins after the window"
            );
        }
        k.stop();
        for &pid in &pids {
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "spinner {pid} outlived stop"
            );
        }
    }
}
