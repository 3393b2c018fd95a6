//! Clocks, sleeps and waits: CLOCK_MONOTONIC in ns (shared by every namespace of the machine),
//! per-thread CPU time, an absolute hrtimer sleep, `ppoll` with a ns timeout, timer slack and CPU
//! pinning.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::time::Clock;

/// Nanoseconds on CLOCK_MONOTONIC (the pure type of [`crate::time`], re-used here).
pub use crate::time::Nanos;

fn clock_ns(clock: libc::clockid_t) -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // Safety: ts is a valid out-pointer; the clock ids used here always exist on Linux.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC now (vDSO, ~20 ns).
pub fn monotonic_ns() -> Nanos {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME now (the clock of the kernel's packet timestamps).
pub fn realtime_ns() -> Nanos {
    clock_ns(libc::CLOCK_REALTIME)
}

/// The machine's clocks and the CPU the caller runs on, as the packet path reads them: a
/// zero-sized [`Clock`] whose calls are the vDSO reads above.
#[derive(Debug, Clone, Copy, Default)]
pub struct SysClock;

impl Clock for SysClock {
    #[inline]
    fn now(&self) -> Nanos {
        monotonic_ns()
    }

    #[inline]
    fn realtime(&self) -> Nanos {
        realtime_ns()
    }

    #[inline]
    fn cpu(&self) -> usize {
        current_cpu()
    }
}

/// CPU time consumed by the calling thread.
pub fn thread_cpu_ns() -> Nanos {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn timespec(ns: Nanos) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline` (absolute, so no drift accumulates).
pub fn sleep_until(deadline: Nanos) {
    let ts = timespec(deadline);
    loop {
        // Safety: ts is valid; a NULL remainder is allowed with TIMER_ABSTIME.
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

/// Which of the fds given to [`wait_readable`] were ready, one bit per position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready(u8);

impl Ready {
    /// Whether any fd was ready.
    pub fn any(self) -> bool {
        self.0 != 0
    }

    /// Whether the fd at `index` (its position in the slice given) was ready.
    pub fn has(self, index: usize) -> bool {
        index < 8 && self.0 & (1 << index) != 0
    }
}

/// Waits until one of `fds` (at most 4) is readable or `timeout` ns passed (`None` = no
/// timeout), and says which were. `ppoll` uses an hrtimer, so with a 1 ns timer slack
/// ([`set_timer_slack_min`]) it wakes within a few µs of the requested time.
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout: Option<Nanos>) -> io::Result<Ready> {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 4];
    let n = fds.len().min(pfds.len());
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd.as_raw_fd();
        p.events = libc::POLLIN;
    }
    let ts = timeout.map(timespec);
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // Safety: pfds holds n initialised entries; ts_ptr is NULL or points to a live timespec.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            n as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(Ready::default());
        }
        return Err(err);
    }
    let mut ready = Ready::default();
    for (i, p) in pfds[..n].iter().enumerate() {
        if p.revents != 0 {
            ready.0 |= 1 << i;
        }
    }
    Ok(ready)
}

/// Sets the calling thread's timer slack to 1 ns so hrtimer sleeps are not rounded up by the
/// default 50 µs slack.
pub fn set_timer_slack_min() {
    // Safety: PR_SET_TIMERSLACK takes an unsigned long and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The calling thread's kernel id (`/proc/self/task/<tid>`).
pub fn current_tid() -> i32 {
    // Safety: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Makes the calling thread SCHED_FIFO with `priority`.
pub fn set_fifo(priority: u8) -> io::Result<()> {
    set_policy(libc::SCHED_FIFO, i32::from(priority))
}

/// Makes the calling thread SCHED_OTHER (from SCHED_FIFO; its nice value is kept).
pub fn set_other() -> io::Result<()> {
    set_policy(libc::SCHED_OTHER, 0)
}

fn set_policy(policy: i32, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // Safety: param is a valid sched_param; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The CPUs the calling thread may run on (its affinity mask), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // Safety: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // Safety: set is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: every index is < CPU_SETSIZE, inside `set`.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// The CPU the calling thread runs on now (0 if the kernel cannot say). It may change the
/// moment after; callers use it as a hint.
pub fn current_cpu() -> usize {
    // Safety: sched_getcpu has no preconditions; it returns -1 on failure.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).unwrap_or(0)
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // Safety: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // Safety: cpu < CPU_SETSIZE was checked, so the bit index is inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // Safety: set is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_cpu_is_the_one_a_pinned_thread_runs_on() {
        let allowed = allowed_cpus().expect("affinity");
        let last = *allowed.last().expect("at least one CPU");
        std::thread::spawn(move || {
            pin_to_cpu(last).expect("pin");
            assert_eq!(current_cpu(), last);
        })
        .join()
        .expect("the pinned thread");
    }

    #[test]
    fn sleep_until_is_absolute_and_tight() {
        set_timer_slack_min();
        // Never early, on any attempt. Late only by the scheduler: on CPUs shared with the rest
        // of the suite one wake-up can be milliseconds late, so the bound is on the median of
        // 20. A timer of jiffy (4 ms) granularity wakes under 1 ms late a quarter of the time,
        // so its median fails the bound (all but 1.4 % of the time); an hrtimer's passes.
        let mut late = Vec::with_capacity(20);
        for _ in 0..20 {
            let deadline = monotonic_ns() + 500_000;
            sleep_until(deadline);
            let woke = monotonic_ns();
            assert!(woke >= deadline, "woke {} ns early", deadline - woke);
            late.push(woke - deadline);
        }
        late.sort_unstable();
        assert!(
            late[10] < 1_000_000,
            "wake-ups late by (ns, sorted): {late:?}"
        );
    }

    #[test]
    fn thread_cpu_time_advances_with_work() {
        let before = thread_cpu_ns();
        let mut x = 0_u64;
        while thread_cpu_ns() - before < 1_000_000 {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        assert!(thread_cpu_ns() - before >= 1_000_000);
    }
}
