//! Clocks. CLOCK_MONOTONIC in nanoseconds is the one timestamp of the crate: all network
//! namespaces of one machine share it, so a send stamp taken in one lab host and a receive stamp
//! taken in another give an exact one-way delay. Thread CPU time gives the CPU cost of a flow,
//! and the thread's schedstat run delay how long it was runnable but waited for a CPU: the
//! part of a latency figure that is the host's scheduler, not the network.

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // Safety: `ts` is a valid, writable timespec; clock_gettime only writes into it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC now, in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME now, in nanoseconds since the Unix epoch: the clock two machines compare
/// (`Ask::Clock`); never used to measure an interval.
pub fn realtime_ns() -> i64 {
    i64::try_from(clock_ns(libc::CLOCK_REALTIME)).unwrap_or(i64::MAX)
}

/// CPU time consumed so far by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// What the calling thread has taken so far: CPU time, and time spent runnable on a run queue
/// waiting for a CPU. Snapshots are subtracted ([`ThreadTimes::since`]) to cover one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadTimes {
    /// CLOCK_THREAD_CPUTIME_ID, ns.
    pub cpu_ns: u64,
    /// schedstat's run delay, ns; None where `/proc/thread-self/schedstat` is missing (a kernel
    /// without CONFIG_SCHED_INFO), so "not measured" is never reported as "no wait".
    pub wait_ns: Option<u64>,
}

impl ThreadTimes {
    /// The calling thread's figures now.
    pub fn now() -> Self {
        let wait_ns = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|t| parse_schedstat(&t))
            .map(|s| s.wait_ns);
        Self {
            cpu_ns: thread_cpu_ns(),
            wait_ns,
        }
    }

    /// Nothing taken, with the wait known (zero): the start of a sum over threads.
    pub fn zero() -> Self {
        Self {
            cpu_ns: 0,
            wait_ns: Some(0),
        }
    }

    /// What was taken between `earlier` and `self` (both of the same thread).
    pub fn since(self, earlier: Self) -> Self {
        Self {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            wait_ns: self
                .wait_ns
                .zip(earlier.wait_ns)
                .map(|(b, a)| b.saturating_sub(a)),
        }
    }
}

/// Sums another thread's (or run's) figures; a wait unknown in either stays unknown.
impl std::ops::Add for ThreadTimes {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            cpu_ns: self.cpu_ns.saturating_add(other.cpu_ns),
            wait_ns: self
                .wait_ns
                .zip(other.wait_ns)
                .map(|(a, b)| a.saturating_add(b)),
        }
    }
}

/// The three fields of `/proc/<pid>/task/<tid>/schedstat` (sched-stats.rst).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedStat {
    /// Time spent on the CPU, ns.
    pub run_ns: u64,
    /// Time spent runnable on a run queue, waiting for a CPU, ns.
    pub wait_ns: u64,
    /// Time slices run on this CPU (one per switch-in).
    pub slices: u64,
}

/// Parses a schedstat line ("run wait slices"); None for anything else.
pub fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut it = text.split_ascii_whitespace().map(str::parse::<u64>);
    let (Some(Ok(run_ns)), Some(Ok(wait_ns)), Some(Ok(slices)), None) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return None;
    };
    Some(SchedStat {
        run_ns,
        wait_ns,
        slices,
    })
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (absolute, so pacing never drifts by the
/// accumulated error of relative sleeps).
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // Safety: `ts` is a valid timespec; the remainder pointer may be null with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Waits until `deadline_ns` precisely: sleeps while more than 200 µs remain (waking 100 µs
/// early, since the default timer slack alone is 50 µs), then spins. Used for pacing, where
/// a late write is a measurement error; the spin costs at most ~100 µs of CPU per wait.
pub fn pace_until_ns(deadline_ns: u64) {
    let now = now_ns();
    if deadline_ns > now + 200_000 {
        sleep_until_ns(deadline_ns - 100_000);
    }
    while now_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_advances_and_sleep_until_waits() {
        let a = now_ns();
        sleep_until_ns(a + 2_000_000);
        let b = now_ns();
        assert!(b >= a + 2_000_000, "slept {} ns", b - a);
        assert!(b - a < 200_000_000, "slept far too long: {} ns", b - a);
    }

    #[test]
    fn pacing_is_precise() {
        let mut late = Vec::new();
        for _ in 0..20 {
            let at = now_ns() + 300_000;
            pace_until_ns(at);
            late.push(now_ns() - at);
        }
        late.sort_unstable();
        assert!(late[10] < 20_000, "median lateness {} ns", late[10]);
    }

    #[test]
    fn schedstat_lines_parse_exactly_and_anything_else_is_refused() {
        assert_eq!(
            parse_schedstat("837850 1079732 7\n"),
            Some(SchedStat {
                run_ns: 837_850,
                wait_ns: 1_079_732,
                slices: 7
            })
        );
        for bad in [
            "",
            "1 2",
            "1 2 3 4",
            "1 x 3",
            "-1 2 3",
            "1 2 18446744073709551616",
        ] {
            assert_eq!(parse_schedstat(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn thread_times_subtract_and_add_and_an_unknown_wait_stays_unknown() {
        let a = ThreadTimes {
            cpu_ns: 10,
            wait_ns: Some(100),
        };
        let b = ThreadTimes {
            cpu_ns: 25,
            wait_ns: Some(130),
        };
        let d = b.since(a);
        assert_eq!(
            d,
            ThreadTimes {
                cpu_ns: 15,
                wait_ns: Some(30)
            }
        );
        assert_eq!(
            d + d,
            ThreadTimes {
                cpu_ns: 30,
                wait_ns: Some(60)
            }
        );
        let unknown = ThreadTimes {
            cpu_ns: 40,
            wait_ns: None,
        };
        assert_eq!(unknown.since(a).wait_ns, None);
        assert_eq!((d + unknown).wait_ns, None);
        // A later snapshot never yields a negative (wrapped) figure.
        assert_eq!(a.since(b).cpu_ns, 0);
    }

    #[test]
    fn a_thread_kept_off_the_cpu_by_a_busy_sibling_shows_a_wait() {
        // Two busy threads pinned to one CPU: each waits for the other about half the time.
        let cpu = {
            // Safety: sched_getcpu has no preconditions.
            unsafe { libc::sched_getcpu().max(0) as usize }
        };
        let pin = move || {
            // Safety: a zeroed cpu_set_t is a valid empty set, passed with its size.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
            }
        };
        let burn = |ms: u64| {
            let end = now_ns() + ms * 1_000_000;
            while now_ns() < end {
                std::hint::spin_loop();
            }
        };
        let before = ThreadTimes::now();
        if before.wait_ns.is_none() {
            return; // No schedstat on this kernel: nothing to measure.
        }
        let waited = std::thread::scope(|s| {
            let hog = s.spawn(move || {
                pin();
                burn(300);
            });
            pin();
            let t0 = ThreadTimes::now();
            burn(300);
            let d = ThreadTimes::now().since(t0);
            hog.join().unwrap();
            d
        });
        let wait = waited.wait_ns.unwrap();
        assert!(
            wait >= 20_000_000,
            "a thread sharing one CPU with a hog for 300 ms waited only {wait} ns"
        );
    }

    #[test]
    fn thread_cpu_counts_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > a);
    }
}
