//! [`Tuning`]: how the workers schedule, wait and pause. Each field is a choice measured on the
//! 2-vCPU test machine (the reason and the figure are in its doc, the runs in `emu-io-bench.md`);
//! users set [`crate::IoOptions`] and leave these at their defaults. The whole struct is passed
//! to the workers and directions, never copied field by field.

use crate::error::IoError;

/// The workers' scheduling knobs. `Default` is what the benchmarks picked; missing fields in
/// a serialized form take their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tuning {
    /// Wake this long before a departure and spin the rest (absorbs hrtimer wake-up latency:
    /// p50 10-30 µs, p99 40-110 µs with SCHED_FIFO on the loaded 2-vCPU test VM). Default
    /// 100 µs: idle lateness p99 4-74 µs, against 1.5-2.9 ms with 50 µs (emu-io-bench.md).
    pub spin_ns: u64,
    /// Most time a worker may spin in each 10 ms, ns; past it, it sleeps to the exact
    /// departure. Departures closer together than `spin_ns` (a paced flow) would otherwise keep
    /// a SCHED_FIFO worker spinning, and the kernel's RT throttling would stop it for 50 ms.
    /// Default 2.5 ms; 250 µs did not consistently shorten the endpoints' CPU waits under a
    /// paced flow (emu-io-bench.md, "the worker's pause").
    pub spin_budget_ns: u64,
    /// Spin to every departure, not only to frames lone in their flow (`sched::schedule::
    /// LONE_GAP`: a ping, a request or a response); the others then leave on the hrtimer
    /// wake-up. Which frames count as lone does not change with it (nor the pauses or the
    /// verdict that read it). Default false: spinning before each of a bulk flow's frames kept
    /// a SCHED_FIFO worker busy for about a fifth of a CPU that the flow's endpoints and the
    /// probes queued behind; under a paced 1 Gbit/s flow normal-priority rr's median fell from
    /// 20.30-20.35 to 20.12-20.15 ms, and SCHED_FIFO probes' to 20.07-20.10 (emu-io-bench.md, "spin
    /// only to frames alone in their flow"). The harness (docs/scheduling-harness.md), which
    /// does not charge a spin to the endpoints, shows the frames' own side: every class
    /// leaves closer to its time when every departure is spun to.
    pub spin_to_every_departure: bool,
    /// Most frames moved per ring per loop turn (bounds the time one direction can starve the
    /// other and the size of one TX kick). Default 64: 0.79/0.87x of the kernel bridge against
    /// 0.68/0.81x for 256 and 0.75/0.78x for 32 in two interleaved runs (emu-io-bench.md).
    pub batch: u32,
    /// Most frames per send taken from the schedule (1..=batch). A frame of another flow that
    /// falls due while a send runs the receivers' stacks waits for the whole send, so sends
    /// of frames that waited for their departure are kept short. Default 8 (emu-io-bench.md,
    /// "overdue frames take turns by flow"). The direct path (frames due on arrival) still sends up to `batch`.
    pub due_batch: u32,
    /// Due frames take turns by flow, each flow's frames in schedule order (`crate::sched::due`):
    /// when the emulator is behind, a sparse flow does not wait for a burst's overdue frames.
    /// Default true (emu-io-bench.md, "overdue frames take turns by flow"); false keeps one FIFO for all flows.
    pub flow_turns: bool,
    /// One thread per direction: a worker that is awake also sends the other direction's
    /// overdue frames (taking that direction's lock only if free), so a frame whose own worker
    /// wakes late (an hrtimer wake-up queued behind a task inside the kernel, which a
    /// `PREEMPT_NONE` kernel lets finish) leaves with the next turn of the busy one. Frames
    /// due on arrival and the RX rings stay with their own worker. A helper makes one send
    /// (`due_batch`) at a time and takes its own turn in between (emu-io-bench.md, "a helper sends one batch at a time": its
    /// own frames' lateness p99 0.09-0.13 ms instead of 0.12-0.21 beside an unpaced bulk flow
    /// in the other direction). Default true: under an unpaced bulk flow the probes' rr p99
    /// was 0.00-0.03 ms over its target with it against 0.08-0.12 without (emu-io-bench.md, "the
    /// awake worker sends the other direction's overdue frames"); false keeps each direction to its worker.
    pub help_due: bool,
    /// A worker that has run this long without sleeping while it holds frames for later
    /// departures sleeps `Tuning::yield_for_ns` before its next turn (the other worker
    /// sends its overdue frames meanwhile), so a normal-priority task woken on its CPU (an
    /// endpoint) is not held off for the whole busy stretch: a SCHED_FIFO worker otherwise
    /// keeps the CPU until it runs out of work, 1-5 ms at a time behind a bulk flow through a
    /// 10 ms delay. Default 200 µs (pauses of 20 µs): an rr's server thread waited 0.12-0.17 ms
    /// per transaction for a CPU under such a flow, against 1.1-1.7 ms without, and its median
    /// fell from 21.4-22.1 to 20.2 ms (emu-io-bench.md, "the worker's pause"). Frames due on arrival (no
    /// impairment) never pause, so throughput is unchanged. 0 = never.
    pub yield_after_ns: u64,
    /// How long such a pause lasts, ns (1 µs..=1 ms).
    pub yield_for_ns: u64,
    /// After a send that carried a frame alone in its flow (`sched::schedule::Entry::lone`: a ping, a
    /// request, a response), a worker on another CPU that would keep running (frames
    /// received, overdue or to help) pauses up to this long, at most once per
    /// `sched::lone::LONE_PAUSE_SPACING`: such a frame wakes a thread on the receiving host,
    /// and on shared CPUs that thread is queued on the other CPU, behind that CPU's SCHED_FIFO
    /// worker (`crate::sched::lone`). A pause never makes a lone frame late, nor any frame by more
    /// than `lone_pause_late_ns`; a worker already behind by the late limit pauses with
    /// frames due (`crate::sched::lone::pause_len`). 0 = never (at most 1 ms).
    pub lone_pause_ns: u64,
    /// How late a lone pause may make the pausing worker's next frame, ns, while the worker
    /// holds no lone frame (only a bulk flow's: a late lone frame would be someone's probe).
    /// 0 = never: the pause then ends a spin margin before the next departure, so under a
    /// flow paced at 1 Gbit/s (a frame every 12 µs) it never happens. Default 60 µs: the
    /// normal-priority rr threads' CPU wait per transaction under that flow halved (100-136
    /// against 178-310 µs, emu-io-bench.md, "a lone pause may make a bulk frame up to 60 µs late"); at most 100 µs (the late limit).
    pub lone_pause_late_ns: u64,
    /// V3 only: block retire timeout in ms.
    pub v3_retire_ms: u32,
    /// Take a frame's arrival time from the kernel's receive timestamp (true) rather than the
    /// clock reading at the start of each RX batch (false).
    pub ring_timestamps: bool,
    /// A SCHED_FIFO worker whose turns have been light this long (no frame held for a later
    /// departure, fewer than `sched::policy::BUSY_FRAMES_PER_SEC` frames received a second:
    /// the ACKs of a bulk flow through an unimpaired direction) runs SCHED_OTHER until it
    /// holds a frame or falls behind again, so it stops preempting the flow's sender for every
    /// few ACKs and the scheduler can run it on an idle CPU (`crate::sched::policy`). A worker
    /// holding a frame for a later departure is SCHED_FIFO again before it sleeps to it.
    /// Default 10 ms: one unimpaired iperf3 flow was ahead with it in 24 of 36 alternating
    /// rounds, at 0.90x the kernel bridge against 0.88x (geometric means; emu-io-bench.md,
    /// "a light worker runs SCHED_OTHER"). 0 = always SCHED_FIFO; ignored without `rt_priority`. At most 10 s.
    pub light_other_after_ns: u64,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            spin_ns: 100_000,
            spin_budget_ns: 2_500_000,
            spin_to_every_departure: false,
            batch: 64,
            due_batch: 8,
            flow_turns: true,
            help_due: true,
            yield_after_ns: 200_000,
            yield_for_ns: 20_000,
            lone_pause_ns: 80_000,
            lone_pause_late_ns: 60_000,
            v3_retire_ms: 1,
            ring_timestamps: true,
            light_other_after_ns: 10_000_000,
        }
    }
}

impl Tuning {
    /// Rejects values the schedule cannot work with; `ring_frames` is the rings' size in use
    /// (a batch cannot be larger).
    pub fn validate(&self, ring_frames: u32) -> Result<(), IoError> {
        let bad = |field, value: String, fix| Err(IoError::BadOption { field, value, fix });
        if self.batch == 0 || self.batch > ring_frames {
            return bad(
                "tuning.batch",
                self.batch.to_string(),
                "use 1..=ring_frames",
            );
        }
        if self.due_batch == 0 || self.due_batch > self.batch {
            return bad(
                "tuning.due_batch",
                self.due_batch.to_string(),
                "use 1..=batch",
            );
        }
        if self.spin_ns > 10_000_000 {
            return bad(
                "tuning.spin_ns",
                self.spin_ns.to_string(),
                "use at most 10 ms (10000000)",
            );
        }
        if self.yield_after_ns > 0 && !(1_000..=1_000_000).contains(&self.yield_for_ns) {
            return bad(
                "tuning.yield_for_ns",
                self.yield_for_ns.to_string(),
                "use 1000..=1000000 (1 µs to 1 ms), or yield_after_ns 0 for no pauses",
            );
        }
        if self.lone_pause_ns > 1_000_000 {
            return bad(
                "tuning.lone_pause_ns",
                self.lone_pause_ns.to_string(),
                "use at most 1 ms (1000000), or 0 for no pauses after lone frames",
            );
        }
        if self.lone_pause_late_ns > crate::report::lateness::LATE_LIMIT_NS {
            return bad(
                "tuning.lone_pause_late_ns",
                self.lone_pause_late_ns.to_string(),
                "use at most 100000 (100 µs, the late limit), or 0 so a pause never makes a frame late",
            );
        }
        if self.light_other_after_ns > 10_000_000_000 {
            return bad(
                "tuning.light_other_after_ns",
                self.light_other_after_ns.to_string(),
                "use at most 10 s (10000000000), or 0 to keep workers SCHED_FIFO",
            );
        }
        if self.spin_budget_ns > 9_000_000 {
            return bad(
                "tuning.spin_budget_ns",
                self.spin_budget_ns.to_string(),
                "use at most 9 ms (9000000) of each 10 ms: the kernel throttles a SCHED_FIFO thread that never sleeps",
            );
        }
        if self.v3_retire_ms == 0 || self.v3_retire_ms > 1_000 {
            return bad(
                "tuning.v3_retire_ms",
                self.v3_retire_ms.to_string(),
                "use 1..=1000",
            );
        }
        Ok(())
    }
}
