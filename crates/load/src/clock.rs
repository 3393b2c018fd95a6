//! Clocks. CLOCK_MONOTONIC in nanoseconds is the one timestamp of the crate: all network
//! namespaces of one machine share it, so a send stamp taken in one lab host and a receive stamp
//! taken in another give an exact one-way delay. Thread CPU time gives the CPU cost of a flow.

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

/// CPU time consumed so far by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
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
