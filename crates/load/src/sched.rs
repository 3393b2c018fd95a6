//! A real-time priority for a workload's threads (`--rt-priority N`).
//!
//! On a busy host a latency workload measures the host's scheduler as much as the network: a
//! woken rr thread waits for a CPU behind whatever runs there (a bulk flow's endpoints, the
//! lab's emulator), 0.1-0.5 ms per transaction on the 2-vCPU test VM under a bulk flow
//! (docs/notebook/emu-io-bench.md, "what the normal-priority rr threads wait for"). At SCHED_FIFO its wake-ups preempt ordinary
//! tasks, which takes that wait out, as cyclictest's `-p` does for timer latency.
//!
//! The priority is set on the thread that starts the run; every thread it creates afterwards
//! (clients, and in a lab the server) inherits it, and [`RtGuard`] puts the old policy back
//! when the run ends. Above 10, the lab emulator's own priority, the workload also preempts
//! the emulator's workers, so keep it to workloads that sleep between messages (rr, crr,
//! msgs); the kernel's RT throttling still leaves 5 % of each CPU to everything else.

use crate::error::LoadError;

/// The calling thread's policy and priority before [`raise`], restored on drop.
#[derive(Debug)]
pub struct RtGuard {
    policy: libc::c_int,
    priority: libc::c_int,
}

/// Moves the calling thread to SCHED_FIFO at `priority` (1-99). Threads it creates from now
/// on inherit the policy.
pub fn raise(priority: u8) -> Result<RtGuard, LoadError> {
    if !(1..=99).contains(&priority) {
        return Err(LoadError::config(
            "rt-priority",
            format!("{priority} is not a SCHED_FIFO priority: use 1 to 99"),
        ));
    }
    let (policy, old) = current();
    set(libc::SCHED_FIFO, libc::c_int::from(priority)).map_err(|e| {
        LoadError::config(
            "rt-priority",
            format!(
                "SCHED_FIFO {priority} refused ({e}): it needs CAP_SYS_NICE (run as root) or an \
                 RLIMIT_RTPRIO of at least {priority}; or drop --rt-priority"
            ),
        )
    })?;
    Ok(RtGuard {
        policy,
        priority: old,
    })
}

impl Drop for RtGuard {
    fn drop(&mut self) {
        // Going back to a lower policy needs no privilege; if it fails the process is about to
        // print and exit anyway.
        let _ = set(self.policy, self.priority);
    }
}

/// The calling thread's scheduling policy and static priority.
pub fn current() -> (libc::c_int, libc::c_int) {
    // Safety: sched_getscheduler(0) and sched_getparam(0, ..) read the calling thread's own
    // attributes into a stack value of the type the kernel writes.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut param = libc::sched_param { sched_priority: 0 };
        libc::sched_getparam(0, &mut param);
        (policy, param.sched_priority)
    }
}

fn set(policy: libc::c_int, priority: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // Safety: sched_setscheduler(0, ..) changes only the calling thread, and reads `param`,
    // a valid stack value, for the duration of the call.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        // Safety: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn out_of_range_priorities_are_refused_naming_the_flag() {
        for p in [0, 100] {
            let e = raise(p).unwrap_err();
            assert!(e.is_usage(), "{e}");
            assert!(e.to_string().contains("rt-priority"), "{e}");
        }
    }

    #[test]
    fn a_raised_thread_and_its_children_run_sched_fifo_until_the_guard_goes() {
        assert!(is_root(), "SCHED_FIFO needs root: run the suite as root");
        // On a thread of its own, so the test harness's threads keep their policy.
        std::thread::spawn(|| {
            let before = current();
            let guard = raise(7).unwrap();
            assert_eq!(current(), (libc::SCHED_FIFO, 7));
            let child = std::thread::spawn(current).join().unwrap();
            assert_eq!(
                child,
                (libc::SCHED_FIFO, 7),
                "threads created now inherit it"
            );
            drop(guard);
            assert_eq!(current(), before);
        })
        .join()
        .unwrap();
    }
}
