//! What the simulated machine charges for the workers' steps, and how late a sleeper wakes.

use crate::time::Nanos;

/// What the machine charges for the workers' steps (ns), and how late a sleeper wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Costs {
    /// A turn's fixed cost (locks, reconfiguration check, bookkeeping).
    pub turn: Nanos,
    /// Receiving one frame through the model into the schedule.
    pub rx_frame: Nanos,
    /// A `sendmmsg` call's fixed cost.
    pub send_call: Nanos,
    /// Handing one frame to veth, which runs the receiving host's stack for it.
    pub handoff: Nanos,
    /// Least delay from a wake-up (timer or frame) to the worker running.
    pub wake: Nanos,
    /// Extra wake-up delay, uniform in [0, this).
    pub wake_jitter: Nanos,
    /// Wake-ups in 1,000 that come much later: the timer's wake-up queued behind a task
    /// inside the kernel (softirq work, which a `PREEMPT_NONE` kernel lets finish).
    pub late_wakes_per_mille: u64,
    /// How much later such a wake-up comes, uniform in [this, 2x this).
    pub late_wake: Nanos,
    /// CPU the probe's server thread needs to answer a request.
    pub server: Nanos,
    /// CPU the probe's client thread needs to take a response.
    pub client: Nanos,
}

impl Default for Costs {
    /// Figures of the 2-vCPU test machine (`emu-io-bench.md`): 2.7 µs per veth hand-off, hrtimer
    /// wake-ups of a SCHED_FIFO thread 10-40 µs late, and 1 % of them 0.3-0.6 ms late (the
    /// emulator's lateness p99 under an unpaced bulk flow was 0.7-2.4 ms).
    fn default() -> Self {
        Self {
            turn: 1_000,
            rx_frame: 300,
            send_call: 1_000,
            handoff: 2_700,
            wake: 10_000,
            wake_jitter: 30_000,
            late_wakes_per_mille: 10,
            late_wake: 300_000,
            server: 15_000,
            client: 10_000,
        }
    }
}
