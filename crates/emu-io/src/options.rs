//! [`IoOptions`]: how the bridge does its I/O (rings, threads, waiting), as opposed to what
//! the link does (the model's configuration).

use crate::error::IoError;
pub use crate::tuning::Tuning;

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
    /// (emu-io-bench.md, "AF_XDP on veth").
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
    /// 172-458 µs) and less worker CPU (emu-io-bench.md, "`sendmmsg` egress").
    #[default]
    Sendmmsg,
    /// The TX ring of the interface's AF_XDP socket, kicked with `sendto` (copy mode: the
    /// kernel copies each frame into a new skb, 32 frames per call at most). A tie with
    /// `Sendmmsg` (median ratio 1.01 over 34 interleaved pairs, emu-io-bench.md, "AF_XDP on veth"); needs
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
    /// `Single` on 2 shared cores, see emu-io-bench.md).
    #[default]
    PerDirection,
}

/// Which rings carry frames in and out, and how many frames they and the slab hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rings {
    /// RX ring layout.
    pub rx: RxRingKind,
    /// Egress path (always [`TxKind::Sendmmsg`] when frames carry a virtio-net header).
    pub tx: TxKind,
    /// Frames per RX ring and per TX ring (power of two, 64..=262144).
    pub frames: u32,
    /// Frames each direction can hold while they wait for departure (≥ 64). At 1 Gbit/s with
    /// 1514-byte frames, 10 ms of delay holds ~830 frames.
    pub slab_slots: u32,
}

impl Default for Rings {
    fn default() -> Self {
        Self {
            rx: RxRingKind::V2,
            tx: TxKind::Sendmmsg,
            frames: 4096,
            slab_slots: 16_384,
        }
    }
}

/// Whether frames carry a virtio-net header from RX to TX, and with it what offloads can cross.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Vnet {
    /// Plain frames: a partial checksum is completed in user space (counted as
    /// `csum_partial`) and verified again by the receiver.
    #[default]
    Off,
    /// For paths with segmentation offloads off and TX checksum offload on (a kernel lab's
    /// default): `PACKET_VNET_HDR` on both sockets carries each frame's partial checksum from
    /// RX to TX, so it stays partial as it would through a kernel bridge. Rings and slabs keep
    /// their MTU-sized slots.
    Header,
    /// GSO-aware mode, for paths with segmentation offloads left on: the header as in
    /// `Header`, ring and slab slots large enough for 64 KiB super-packets, so TSO/GSO
    /// super-packets cross whole. The model charges a super-packet as the wire packets it
    /// stands for (`tcplab_emu::DirectionModel::arrive_train`); a direction whose model needs
    /// per-packet granularity cuts them into wire segments instead (`crate::wire::segment`).
    /// RX rings then hold at most [`GSO_RING_FRAMES`] frames and slabs [`GSO_SLAB_SLOTS`]
    /// slots (64 KiB each).
    Gso,
}

/// The I/O choices a user makes: rings, threads and where they run, how they wait, and which
/// offloads cross. How the workers schedule, wait and pause in detail is [`Tuning`], passed
/// whole. `Default` is what the benchmarks (docs/notebook/emu-io-bench.md) picked; fields
/// missing from a serialized form take their defaults.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IoOptions {
    /// Rings, egress path and slab size.
    pub rings: Rings,
    /// Thread layout.
    pub threads: Threads,
    /// CPUs to pin workers to (worker i gets `cpus[i % len]`); empty = no pinning.
    pub cpus: Vec<usize>,
    /// Run workers as SCHED_FIFO with this priority (1..=99): their wake-ups then preempt
    /// ordinary tasks (the TCP endpoints, compilers) instead of waiting for a CFS slice.
    /// Default `Some(10)`: per direction it measured 0.30x → 0.65x and 0.74x → 0.87x of the
    /// kernel bridge in two runs (emu-io-bench.md), and a tighter wake-up tail. The kernel's
    /// RT throttling (sched_rt_runtime_us) still leaves 5 % of each CPU to others. The cost:
    /// when the emulator is saturated (a UDP flood), normal-priority endpoints on the same
    /// CPUs starve. `None` keeps SCHED_OTHER (needed without CAP_SYS_NICE).
    pub rt_priority: Option<u8>,
    /// Spin instead of sleeping (lowest lateness, one core per worker at 100 %).
    pub busy_poll: bool,
    /// While a frame waits for a later departure, run a `SCHED_IDLE` spinner on each CPU so
    /// no CPU halts (`run::awake`): a halted vCPU made wake-ups late by up to a 4 ms tick on
    /// the test VM. Default true; ignored with `busy_poll` (which never sleeps anyway).
    pub keep_awake: bool,
    /// The virtio-net header: plain frames, partial checksums carried, or GSO super-packets.
    pub vnet: Vnet,
    /// How the workers schedule, wait and pause: measured choices with their reasons
    /// ([`Tuning`]); the defaults are what the benchmarks picked.
    pub tuning: Tuning,
}

/// RX-ring frames per interface in GSO mode (68 KiB each: 35 MiB per ring).
pub const GSO_RING_FRAMES: u32 = 512;
/// Slab slots per direction in GSO mode (68 KiB each, touched only when used).
pub const GSO_SLAB_SLOTS: u32 = 4096;

impl Default for IoOptions {
    fn default() -> Self {
        Self {
            rings: Rings::default(),
            threads: Threads::PerDirection,
            cpus: Vec::new(),
            rt_priority: Some(10),
            busy_poll: false,
            keep_awake: true,
            vnet: Vnet::Off,
            tuning: Tuning::default(),
        }
    }
}

impl IoOptions {
    /// GSO-aware mode ([`Vnet::Gso`]).
    pub fn gso(&self) -> bool {
        self.vnet == Vnet::Gso
    }

    /// Whether frames carry a virtio-net header ([`Vnet::Header`] or [`Vnet::Gso`]).
    pub fn carries_vnet(&self) -> bool {
        self.vnet != Vnet::Off
    }

    /// Whether the chosen rings carry a virtio-net header as they are: the AF_XDP route cannot,
    /// and the TX ring is replaced by `sendmmsg` when frames carry one, so a lab turns the
    /// header on by itself only where neither was chosen.
    pub fn rings_carry_vnet(&self) -> bool {
        self.rings.rx != RxRingKind::Xdp && self.rings.tx == TxKind::Sendmmsg
    }

    /// RX/TX ring frames actually used (fewer, larger ones in GSO mode).
    pub fn effective_ring_frames(&self) -> u32 {
        if self.gso() {
            self.rings.frames.min(GSO_RING_FRAMES)
        } else {
            self.rings.frames
        }
    }

    /// Slab slots actually used per direction.
    pub fn effective_slab_slots(&self) -> u32 {
        if self.gso() {
            self.rings.slab_slots.min(GSO_SLAB_SLOTS)
        } else {
            self.rings.slab_slots
        }
    }

    /// Egress path actually used (`sendmmsg` whenever frames carry a virtio-net header).
    pub fn effective_tx(&self) -> TxKind {
        if self.carries_vnet() {
            TxKind::Sendmmsg
        } else {
            self.rings.tx
        }
    }

    /// Rejects values the rings or the schedule cannot work with.
    pub fn validate(&self) -> Result<(), IoError> {
        let bad = |field, value: String, fix| Err(IoError::BadOption { field, value, fix });
        let frames = self.rings.frames;
        if !frames.is_power_of_two() || !(64..=262_144).contains(&frames) {
            return bad(
                "rings.frames",
                frames.to_string(),
                "use a power of two in 64..=262144",
            );
        }
        if !(64..=4_194_304).contains(&self.rings.slab_slots) {
            return bad(
                "rings.slab_slots",
                self.rings.slab_slots.to_string(),
                "use 64..=4194304",
            );
        }
        self.tuning.validate(self.effective_ring_frames())?;
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
        let af_xdp = self.rings.rx == RxRingKind::Xdp || self.rings.tx == TxKind::Xsk;
        if self.carries_vnet() && af_xdp {
            return bad(
                "vnet",
                format!(
                    "{:?} with rings.rx {:?} / rings.tx {:?}",
                    self.vnet, self.rings.rx, self.rings.tx
                ),
                "AF_XDP carries no virtio-net header, so neither partial checksums nor super-packets can cross it: set vnet to Off (with offloads off on the path) or use rings.rx V2 and rings.tx Sendmmsg",
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
        let o: IoOptions =
            serde_json::from_str(r#"{"threads":"Single","tuning":{"spin_ns":5000}}"#).unwrap();
        assert_eq!(o.threads, Threads::Single);
        assert_eq!(o.tuning.spin_ns, 5_000);
        assert_eq!(o.rings, Rings::default());
        assert_eq!(o.tuning.batch, Tuning::default().batch);
        let o: IoOptions =
            serde_json::from_str(r#"{"rings":{"tx":"Ring"},"vnet":"Header"}"#).unwrap();
        assert_eq!((o.rings.tx, o.rings.frames), (TxKind::Ring, 4096));
        assert_eq!(o.vnet, Vnet::Header);
        let e = serde_json::from_str::<IoOptions>(r#"{"rx_ring":"Xdp"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `rx_ring`"), "{e}");
        let e = serde_json::from_str::<IoOptions>(r#"{"spin":1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `spin`"), "{e}");
        let e = serde_json::from_str::<IoOptions>(r#"{"tuning":{"spin":1}}"#).unwrap_err();
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
            rings: Rings {
                frames: 1000,
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(
            e,
            "IoOptions.rings.frames = 1000: use a power of two in 64..=262144"
        );
        let e = rejection(IoOptions {
            tuning: Tuning {
                batch: 0,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(e.starts_with("IoOptions.tuning.batch = 0"), "{e}");
        let e = rejection(IoOptions {
            tuning: Tuning {
                due_batch: 65,
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(e, "IoOptions.tuning.due_batch = 65: use 1..=batch");
        let e = rejection(IoOptions {
            rings: Rings {
                slab_slots: 1,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(e.starts_with("IoOptions.rings.slab_slots = 1"), "{e}");
        let xdp = Rings {
            rx: RxRingKind::Xdp,
            ..Default::default()
        };
        let e = rejection(IoOptions {
            rings: xdp,
            vnet: Vnet::Gso,
            ..Default::default()
        });
        assert!(
            e.starts_with(
                "IoOptions.vnet = Gso with rings.rx Xdp / rings.tx Sendmmsg: AF_XDP carries no virtio-net header"
            ),
            "{e}"
        );
        let xsk = Rings {
            tx: TxKind::Xsk,
            ..Default::default()
        };
        let e = rejection(IoOptions {
            rings: xsk,
            vnet: Vnet::Header,
            ..Default::default()
        });
        assert!(
            e.starts_with(
                "IoOptions.vnet = Header with rings.rx V2 / rings.tx Xsk: AF_XDP carries"
            ),
            "{e}"
        );
        // The TX ring gives way to sendmmsg when frames carry the header.
        let ring_gso = IoOptions {
            rings: Rings {
                tx: TxKind::Ring,
                ..Default::default()
            },
            vnet: Vnet::Gso,
            ..Default::default()
        };
        ring_gso.validate().unwrap();
        assert_eq!(ring_gso.effective_tx(), TxKind::Sendmmsg);
        assert!(!ring_gso.rings_carry_vnet());
        IoOptions {
            rings: Rings {
                rx: RxRingKind::Xdp,
                tx: TxKind::Xsk,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap();
        let e = rejection(IoOptions {
            tuning: Tuning {
                yield_for_ns: 0,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.tuning.yield_for_ns = 0: use 1000..=1000000"),
            "{e}"
        );
        // Without pauses, their length is not looked at.
        IoOptions {
            tuning: Tuning {
                yield_after_ns: 0,
                yield_for_ns: 0,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap();
        let e = rejection(IoOptions {
            tuning: Tuning {
                spin_budget_ns: 9_000_001,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.tuning.spin_budget_ns = 9000001"),
            "{e}"
        );
        let e = rejection(IoOptions {
            tuning: Tuning {
                lone_pause_ns: 1_000_001,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.tuning.lone_pause_ns = 1000001: use at most 1 ms"),
            "{e}"
        );
        let e = rejection(IoOptions {
            tuning: Tuning {
                lone_pause_late_ns: 100_001,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.tuning.lone_pause_late_ns = 100001: use at most 100000"),
            "{e}"
        );
        let e = rejection(IoOptions {
            tuning: Tuning {
                light_other_after_ns: 10_000_000_001,
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(
            e.starts_with("IoOptions.tuning.light_other_after_ns = 10000000001: use at most 10 s"),
            "{e}"
        );
    }
}
