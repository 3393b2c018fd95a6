//! [`IoOptions`]: how the bridge does its I/O (rings, threads, waiting), as opposed to what
//! the link does (the model's configuration).

use crate::error::IoError;

/// Which RX ring layout to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RxRingKind {
    /// TPACKET_V2: per-frame hand-over, `poll` wakes for every frame. Default: low latency.
    #[default]
    V2,
    /// TPACKET_V3: block hand-over; wakes only when a block fills or its retire timer fires
    /// (ms, rounded to jiffies), so it adds up to a timer tick of delay at low rates.
    V3,
    /// AF_XDP: an XDP program on each interface (native mode, veth's NAPI) stamps each frame
    /// and redirects it to an AF_XDP socket's RX ring (copy mode: veth has no zero-copy).
    /// The frames never reach the middle host's stack or its packet taps. Needs offloads off
    /// (XDP sees neither partial checksums nor GSO sizes) and no other XDP program. Not the
    /// default: 0.79-0.88x of the kernel bridge against 0.81-0.92x for V2 in the same
    /// interleaved runs, because veth must copy TCP's cloned skbs before XDP
    /// (`skb_pp_cow_data`) and copy mode copies again into the UMEM: two copies, V2 one
    /// (BENCH.md, "AF_XDP on veth").
    Xdp,
}

/// How frames leave on the egress interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum TxKind {
    /// A TPACKET_V2 TX ring and one zero-length `send` per batch. Costs two copies of each
    /// frame: into the ring, and again in the kernel (`skb_copy_ubufs`), because ring skbs are
    /// zero-copy and veth must copy them before handing them to another namespace.
    Ring,
    /// One `sendmmsg` per batch from where the frame lies (a slab slot, or the RX ring itself
    /// when a frame is due on arrival): one copy. Default: equal throughput within the noise
    /// (+3 % over six interleaved pairs), lower data-direction lateness median (43-163 µs vs
    /// 172-458 µs) and less worker CPU (BENCH.md, "`sendmmsg` egress").
    #[default]
    Sendmmsg,
    /// The TX ring of the interface's AF_XDP socket, kicked with `sendto` (copy mode: the
    /// kernel copies each frame into a new skb, 32 frames per call at most). A tie with
    /// `Sendmmsg` (median ratio 1.01 over 34 interleaved pairs, BENCH.md, "AF_XDP on veth"); needs
    /// no XDP program, but no other AF_XDP socket on the interface.
    Xsk,
}

/// How directions map to worker threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Threads {
    /// One thread serves both directions (fewer threads; slower: the data direction's TX
    /// kick, which runs the receiver's stack in softirq, delays the ACK direction).
    Single,
    /// One thread per direction (default: 0.49-1.03x the kernel bridge vs 0.44-0.71x for
    /// `Single` on 2 shared cores, see BENCH.md).
    #[default]
    PerDirection,
}

/// I/O options. `Default` is what the benchmarks in BENCH.md picked; missing fields in a
/// serialized form take their defaults.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IoOptions {
    /// RX ring layout.
    pub rx_ring: RxRingKind,
    /// Frames per RX ring and per TX ring (power of two, 64..=262144).
    pub ring_frames: u32,
    /// Frames each direction can hold while they wait for departure (≥ 64). At 1 Gbit/s with
    /// 1514-byte frames, 10 ms of delay holds ~830 frames.
    pub slab_slots: u32,
    /// Thread layout.
    pub threads: Threads,
    /// Spin instead of sleeping (lowest lateness, one core per worker at 100 %).
    pub busy_poll: bool,
    /// CPUs to pin workers to (worker i gets `cpus[i % len]`); empty = no pinning.
    pub cpus: Vec<usize>,
    /// Wake this long before a departure and spin the rest (absorbs hrtimer wake-up latency:
    /// p50 10-30 µs, p99 40-110 µs with SCHED_FIFO on the loaded 2-vCPU test VM). Default
    /// 100 µs: idle lateness p99 4-74 µs, against 1.5-2.9 ms with 50 µs (BENCH.md).
    pub spin_ns: u64,
    /// Most time a worker may spin in each 10 ms, ns; past it, it sleeps to the exact
    /// departure. Departures closer together than `spin_ns` (a paced flow) would otherwise keep
    /// a SCHED_FIFO worker spinning, and the kernel's RT throttling would stop it for 50 ms.
    /// Default 2.5 ms; 250 µs did not consistently shorten the endpoints' CPU waits under a
    /// paced flow (BENCH.md, "the worker's pause").
    pub spin_budget_ns: u64,
    /// Spin only to a frame whose flow's previous frame departs at least this long from it
    /// (0 = spin to every departure); other frames leave on the hrtimer wake-up. A ping or a
    /// request/response (one frame per flow every few ms) keeps its spin, also in the middle
    /// of a bulk flow, while the bulk flow's own frames (a TCP flow paced at 1 Gbit/s arrived
    /// in bursts 0.5-1 ms apart, its ACKs 20-50 µs apart) no longer keep a SCHED_FIFO worker
    /// spinning before each, about a fifth of a CPU that the flow's endpoints and the probes
    /// queue behind. Flows are those of `flow_turns` (one per direction when that is off).
    /// Default 2 ms: under a paced 1 Gbit/s flow normal-priority rr's median fell from
    /// 20.30-20.35 to 20.12-20.15 ms, and SCHED_FIFO probes' to 20.07-20.10 (BENCH.md,
    /// "spin only to frames alone in their flow").
    pub spin_min_gap_ns: u64,
    /// Most frames moved per ring per loop turn (bounds the time one direction can starve the
    /// other and the size of one TX kick). Default 64: 0.79/0.87x of the kernel bridge against
    /// 0.68/0.81x for 256 and 0.75/0.78x for 32 in two interleaved runs (BENCH.md).
    pub batch: u32,
    /// Most frames per send taken from the schedule (1..=batch). A frame of another flow that
    /// falls due while a send runs the receivers' stacks waits for the whole send, so sends
    /// of frames that waited for their departure are kept short. Default 8 (BENCH.md,
    /// "overdue frames take turns by flow"). The direct path (frames due on arrival) still sends up to `batch`.
    pub due_batch: u32,
    /// Due frames take turns by flow, each flow's frames in schedule order (`crate::sched::due`):
    /// when the emulator is behind, a sparse flow does not wait for a burst's overdue frames.
    /// Default true (BENCH.md, "overdue frames take turns by flow"); false keeps one FIFO for all flows.
    pub flow_turns: bool,
    /// One thread per direction: a worker that is awake also sends the other direction's
    /// overdue frames (taking that direction's lock only if free), so a frame whose own worker
    /// wakes late (an hrtimer wake-up queued behind a task inside the kernel, which a
    /// `PREEMPT_NONE` kernel lets finish) leaves with the next turn of the busy one. Frames
    /// due on arrival and the RX rings stay with their own worker. A helper makes one send
    /// (`due_batch`) at a time and takes its own turn in between (BENCH.md, "a helper sends one batch at a time": its
    /// own frames' lateness p99 0.09-0.13 ms instead of 0.12-0.21 beside an unpaced bulk flow
    /// in the other direction). Default true: under an unpaced bulk flow the probes' rr p99
    /// was 0.00-0.03 ms over its target with it against 0.08-0.12 without (BENCH.md, "the
    /// awake worker sends the other direction's overdue frames"); false keeps each direction to its worker.
    pub help_due: bool,
    /// A worker that has run this long without sleeping while it holds frames for later
    /// departures sleeps [`IoOptions::yield_for_ns`] before its next turn (the other worker
    /// sends its overdue frames meanwhile), so a normal-priority task woken on its CPU (an
    /// endpoint) is not held off for the whole busy stretch: a SCHED_FIFO worker otherwise
    /// keeps the CPU until it runs out of work, 1-5 ms at a time behind a bulk flow through a
    /// 10 ms delay. Default 200 µs (pauses of 20 µs): an rr's server thread waited 0.12-0.17 ms
    /// per transaction for a CPU under such a flow, against 1.1-1.7 ms without, and its median
    /// fell from 21.4-22.1 to 20.2 ms (BENCH.md, "the worker's pause"). Frames due on arrival (no
    /// impairment) never pause, so throughput is unchanged. 0 = never.
    pub yield_after_ns: u64,
    /// How long such a pause lasts, ns (1 µs..=1 ms).
    pub yield_for_ns: u64,
    /// After a send that carried a frame alone in its flow (see `spin_min_gap_ns`: a ping, a
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
    /// against 178-310 µs, BENCH.md, "a lone pause may make a bulk frame up to 60 µs late"); at most 100 µs (the late limit).
    pub lone_pause_late_ns: u64,
    /// V3 only: block retire timeout in ms.
    pub v3_retire_ms: u32,
    /// Take a frame's arrival time from the kernel's receive timestamp (true) rather than the
    /// clock reading at the start of each RX batch (false).
    pub ring_timestamps: bool,
    /// Run workers as SCHED_FIFO with this priority (1..=99): their wake-ups then preempt
    /// ordinary tasks (the TCP endpoints, compilers) instead of waiting for a CFS slice.
    /// Default `Some(10)`: per direction it measured 0.30x → 0.65x and 0.74x → 0.87x of the
    /// kernel bridge in two runs (BENCH.md), and a tighter wake-up tail. The kernel's RT throttling
    /// (sched_rt_runtime_us) still leaves 5 % of each CPU to others. The cost: when the
    /// emulator is saturated (a UDP flood), normal-priority endpoints on the same CPUs starve. `None` keeps SCHED_OTHER
    /// (needed without CAP_SYS_NICE).
    pub rt_priority: Option<u8>,
    /// A SCHED_FIFO worker whose turns have been light this long (no frame held for a later
    /// departure, fewer than `sched::policy::BUSY_FRAMES_PER_SEC` frames received a second:
    /// the ACKs of a bulk flow through an unimpaired direction) runs SCHED_OTHER until it
    /// holds a frame or falls behind again, so it stops preempting the flow's sender for every
    /// few ACKs and the scheduler can run it on an idle CPU (`crate::sched::policy`). A worker
    /// holding a frame for a later departure is SCHED_FIFO again before it sleeps to it.
    /// Default 10 ms: one unimpaired iperf3 flow was ahead with it in 24 of 36 alternating
    /// rounds, at 0.90x the kernel bridge against 0.88x (geometric means; BENCH.md,
    /// "a light worker runs SCHED_OTHER"). 0 = always SCHED_FIFO; ignored without `rt_priority`. At most 10 s.
    pub light_other_after_ns: u64,
    /// Egress path (always [`TxKind::Sendmmsg`] when `gso` is on).
    pub tx: TxKind,
    /// GSO-aware mode, for paths with segmentation offloads left on: `PACKET_VNET_HDR` on
    /// both sockets, ring and slab slots large enough for 64 KiB super-packets, and each
    /// frame's virtio-net header carried from RX to TX unchanged, so TSO/GSO super-packets
    /// cross whole and partial checksums stay partial. The model charges a super-packet as
    /// the wire packets it stands for (`tcplab_emu::DirectionModel::arrive_train`); a
    /// direction whose model needs per-packet granularity cuts them into wire segments
    /// instead (`crate::wire::segment`). RX rings then
    /// hold at most [`GSO_RING_FRAMES`] frames and slabs [`GSO_SLAB_SLOTS`] slots (64 KiB each).
    pub gso: bool,
    /// The virtio-net header without super-packets, for paths with segmentation offloads off
    /// and TX checksum offload on (a kernel lab's default): `PACKET_VNET_HDR` on both sockets
    /// carries each frame's partial checksum from RX to TX, so it stays partial as it would
    /// through a kernel bridge. Without it such frames are completed in user space (counted
    /// as `csum_partial`) and verified again by the receiver. Rings and slabs keep their
    /// MTU-sized slots. Implied by `gso`.
    pub vnet_hdr: bool,
    /// While a frame waits for a later departure, run a `SCHED_IDLE` spinner on each CPU so
    /// no CPU halts (crate `awake`): a halted vCPU made wake-ups late by up to a 4 ms tick on
    /// the test VM. Default true; ignored with `busy_poll` (which never sleeps anyway).
    pub keep_awake: bool,
}

/// RX-ring frames per interface in GSO mode (68 KiB each: 35 MiB per ring).
pub const GSO_RING_FRAMES: u32 = 512;
/// Slab slots per direction in GSO mode (68 KiB each, touched only when used).
pub const GSO_SLAB_SLOTS: u32 = 4096;

impl Default for IoOptions {
    fn default() -> Self {
        Self {
            rx_ring: RxRingKind::V2,
            ring_frames: 4096,
            slab_slots: 16_384,
            threads: Threads::PerDirection,
            busy_poll: false,
            cpus: Vec::new(),
            spin_ns: 100_000,
            spin_budget_ns: 2_500_000,
            spin_min_gap_ns: 2_000_000,
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
            rt_priority: Some(10),
            light_other_after_ns: 10_000_000,
            tx: TxKind::Sendmmsg,
            gso: false,
            vnet_hdr: false,
            keep_awake: true,
        }
    }
}

impl IoOptions {
    /// RX/TX ring frames actually used (fewer, larger ones in GSO mode).
    pub fn effective_ring_frames(&self) -> u32 {
        if self.gso {
            self.ring_frames.min(GSO_RING_FRAMES)
        } else {
            self.ring_frames
        }
    }

    /// Slab slots actually used per direction.
    pub fn effective_slab_slots(&self) -> u32 {
        if self.gso {
            self.slab_slots.min(GSO_SLAB_SLOTS)
        } else {
            self.slab_slots
        }
    }

    /// Whether frames carry a virtio-net header (`gso` or `vnet_hdr`).
    pub fn carries_vnet(&self) -> bool {
        self.gso || self.vnet_hdr
    }

    /// Egress path actually used (`sendmmsg` whenever frames carry a virtio-net header).
    pub fn effective_tx(&self) -> TxKind {
        if self.carries_vnet() {
            TxKind::Sendmmsg
        } else {
            self.tx
        }
    }

    /// Rejects values the rings or the schedule cannot work with.
    pub fn validate(&self) -> Result<(), IoError> {
        let bad = |field, value: String, fix| Err(IoError::BadOption { field, value, fix });
        if !self.ring_frames.is_power_of_two() || !(64..=262_144).contains(&self.ring_frames) {
            return bad(
                "ring_frames",
                self.ring_frames.to_string(),
                "use a power of two in 64..=262144",
            );
        }
        if !(64..=4_194_304).contains(&self.slab_slots) {
            return bad(
                "slab_slots",
                self.slab_slots.to_string(),
                "use 64..=4194304",
            );
        }
        if self.batch == 0 || self.batch > self.effective_ring_frames() {
            return bad("batch", self.batch.to_string(), "use 1..=ring_frames");
        }
        if self.due_batch == 0 || self.due_batch > self.batch {
            return bad("due_batch", self.due_batch.to_string(), "use 1..=batch");
        }
        if self.spin_ns > 10_000_000 {
            return bad(
                "spin_ns",
                self.spin_ns.to_string(),
                "use at most 10 ms (10000000)",
            );
        }
        if self.spin_min_gap_ns > 1_000_000_000 {
            return bad(
                "spin_min_gap_ns",
                self.spin_min_gap_ns.to_string(),
                "use at most 1 s (1000000000), or 0 to spin to every departure",
            );
        }
        if self.yield_after_ns > 0 && !(1_000..=1_000_000).contains(&self.yield_for_ns) {
            return bad(
                "yield_for_ns",
                self.yield_for_ns.to_string(),
                "use 1000..=1000000 (1 µs to 1 ms), or yield_after_ns 0 for no pauses",
            );
        }
        if self.lone_pause_ns > 1_000_000 {
            return bad(
                "lone_pause_ns",
                self.lone_pause_ns.to_string(),
                "use at most 1 ms (1000000), or 0 for no pauses after lone frames",
            );
        }
        if self.lone_pause_late_ns > crate::report::lateness::LATE_LIMIT_NS {
            return bad(
                "lone_pause_late_ns",
                self.lone_pause_late_ns.to_string(),
                "use at most 100000 (100 µs, the late limit), or 0 so a pause never makes a frame late",
            );
        }
        if self.light_other_after_ns > 10_000_000_000 {
            return bad(
                "light_other_after_ns",
                self.light_other_after_ns.to_string(),
                "use at most 10 s (10000000000), or 0 to keep workers SCHED_FIFO",
            );
        }
        if self.spin_budget_ns > 9_000_000 {
            return bad(
                "spin_budget_ns",
                self.spin_budget_ns.to_string(),
                "use at most 9 ms (9000000) of each 10 ms: the kernel throttles a SCHED_FIFO thread that never sleeps",
            );
        }
        if self.v3_retire_ms == 0 || self.v3_retire_ms > 1_000 {
            return bad(
                "v3_retire_ms",
                self.v3_retire_ms.to_string(),
                "use 1..=1000",
            );
        }
        if let Some(p) = self.rt_priority.filter(|p| !(1..=99).contains(p)) {
            return bad(
                "rt_priority",
                p.to_string(),
                "use 1..=99 (SCHED_FIFO priority)",
            );
        }
        if self.busy_poll && self.rt_priority.is_some() {
            return bad(
                "rt_priority",
                format!("{:?} with busy_poll", self.rt_priority),
                "a SCHED_FIFO thread that never sleeps starves the TCP endpoints on its CPU: set rt_priority to None or busy_poll to false",
            );
        }
        if self.gso && (self.rx_ring == RxRingKind::Xdp || self.tx == TxKind::Xsk) {
            return bad(
                "rx_ring",
                format!("{:?} / tx {:?} with gso", self.rx_ring, self.tx),
                "AF_XDP carries no virtio-net header, so super-packets cannot cross it: turn gso off (and offloads off) or use rx_ring V2 and tx Sendmmsg",
            );
        }
        if self.vnet_hdr && (self.rx_ring == RxRingKind::Xdp || self.tx == TxKind::Xsk) {
            return bad(
                "vnet_hdr",
                format!("true with rx_ring {:?} / tx {:?}", self.rx_ring, self.tx),
                "AF_XDP carries no virtio-net header: turn vnet_hdr off (and TX checksum offload off on the path) or use rx_ring V2 and tx Sendmmsg",
            );
        }
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        if let Some(c) = self.cpus.iter().find(|&&c| c >= ncpu) {
            return bad("cpus", c.to_string(), "name CPUs that exist (0..nproc)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_json_takes_defaults_and_unknown_fields_are_rejected() {
        let o: IoOptions = serde_json::from_str(r#"{"threads":"Single","spin_ns":5000}"#).unwrap();
        assert_eq!(o.threads, Threads::Single);
        assert_eq!(o.spin_ns, 5_000);
        assert_eq!(o.ring_frames, IoOptions::default().ring_frames);
        let e = serde_json::from_str::<IoOptions>(r#"{"spin":1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `spin`"), "{e}");
    }

    /// The error `validate` gives for `o`, which must be rejected.
    fn rejection(o: IoOptions) -> String {
        o.validate().unwrap_err().to_string()
    }

    #[test]
    fn defaults_validate_and_bad_values_name_the_field() {
        IoOptions::default().validate().unwrap();
        let e = rejection(IoOptions {
            ring_frames: 1000,
            ..Default::default()
        });
        assert_eq!(
            e,
            "IoOptions.ring_frames = 1000: use a power of two in 64..=262144"
        );
        let e = rejection(IoOptions {
            batch: 0,
            ..Default::default()
        });
        assert!(e.starts_with("IoOptions.batch = 0"), "{e}");
        let e = rejection(IoOptions {
            due_batch: 65,
            ..Default::default()
        });
        assert_eq!(e, "IoOptions.due_batch = 65: use 1..=batch");
        let e = rejection(IoOptions {
            slab_slots: 1,
            ..Default::default()
        });
        assert!(e.starts_with("IoOptions.slab_slots = 1"), "{e}");
        let e = rejection(IoOptions {
            rx_ring: RxRingKind::Xdp,
            gso: true,
            ..Default::default()
        });
        assert!(
            e.starts_with(
                "IoOptions.rx_ring = Xdp / tx Sendmmsg with gso: AF_XDP carries no virtio-net header"
            ),
            "{e}"
        );
        let e = rejection(IoOptions {
            tx: TxKind::Xsk,
            vnet_hdr: true,
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.vnet_hdr = true with rx_ring V2 / tx Xsk: AF_XDP carries"),
            "{e}"
        );
        IoOptions {
            rx_ring: RxRingKind::Xdp,
            tx: TxKind::Xsk,
            ..Default::default()
        }
        .validate()
        .unwrap();
        let e = rejection(IoOptions {
            yield_for_ns: 0,
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.yield_for_ns = 0: use 1000..=1000000"),
            "{e}"
        );
        // Without pauses, their length is not looked at.
        IoOptions {
            yield_after_ns: 0,
            yield_for_ns: 0,
            ..Default::default()
        }
        .validate()
        .unwrap();
        let e = rejection(IoOptions {
            spin_budget_ns: 9_000_001,
            ..Default::default()
        });
        assert!(e.starts_with("IoOptions.spin_budget_ns = 9000001"), "{e}");
        let e = rejection(IoOptions {
            spin_min_gap_ns: 1_000_000_001,
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.spin_min_gap_ns = 1000000001: use at most 1 s"),
            "{e}"
        );
        IoOptions {
            spin_min_gap_ns: 0,
            ..Default::default()
        }
        .validate()
        .unwrap();
        let e = rejection(IoOptions {
            lone_pause_ns: 1_000_001,
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.lone_pause_ns = 1000001: use at most 1 ms"),
            "{e}"
        );
        let e = rejection(IoOptions {
            lone_pause_late_ns: 100_001,
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.lone_pause_late_ns = 100001: use at most 100000"),
            "{e}"
        );
        let e = rejection(IoOptions {
            light_other_after_ns: 10_000_000_001,
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.light_other_after_ns = 10000000001: use at most 10 s"),
            "{e}"
        );
    }
}
