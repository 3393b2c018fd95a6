//! The end-of-run [`Report`] and its fidelity verdict: did the emulator keep its schedule?
//!
//! Pure: built from counters and CPU times, judged against [`Thresholds`]. A run is
//! untrustworthy if frames left too late (lateness p99 above the threshold, of all frames or of
//! the lone ones, the probes, on their own: `DirSnapshot::lone_lateness`), if the kernel
//! dropped frames because the emulator fell behind (ring overflow), if the emulator itself lost
//! frames (slab full, oversize, TX failure), if a worker thread was CPU-saturated while it was
//! supposed to sleep between departures, or if a worker failed.

use crate::emulator::counters::DirSnapshot;

/// CPU use of one worker thread.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ThreadUsage {
    /// Which directions it served ("a->b", "b->a" or both).
    pub name: String,
    /// CPU time the thread consumed.
    pub cpu_ns: u64,
    /// Wall time it ran.
    pub wall_ns: u64,
}

impl ThreadUsage {
    /// CPU time / wall time (1.0 = never slept).
    pub fn ratio(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            self.cpu_ns as f64 / self.wall_ns as f64
        }
    }
}

/// What the bridge did, returned by `tcplab_emu_io::Bridge::stop`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Report {
    /// Interface A → interface B.
    pub forward: DirSnapshot,
    /// Interface B → interface A.
    pub reverse: DirSnapshot,
    /// Wall time from start to stop.
    pub wall_ns: u64,
    /// Per worker thread CPU use.
    pub threads: Vec<ThreadUsage>,
    /// CPU time of the keep-awake spinners (idle time they filled; not judged).
    pub keep_awake_cpu_ns: u64,
    /// Workers spun instead of sleeping (CPU saturation is then by design, not judged).
    pub busy_poll: bool,
    /// The models' seed (replay with it), when the bridge built the models.
    pub seed: Option<u64>,
    /// Worker failures and rejected reconfigurations, in order.
    pub errors: Vec<String>,
}

/// Limits a run must stay within to be trusted.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Thresholds {
    /// Maximum lateness p99 per direction. Default 100 µs: the delay-accuracy target of the
    /// emulator (RTT within 0.1 ms of configured) — a schedule kept to worse than that cannot
    /// meet it, whatever the configured delay. An absolute bound rather than a fraction of the
    /// delay, because a 0 ms delay must be judged too.
    pub lateness_p99_ns: u64,
    /// Maximum CPU time / wall time of a sleeping worker. Default 0.9: above it the thread
    /// was rarely idle, so departures queued behind work and lateness is about to grow.
    pub max_cpu_ratio: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            lateness_p99_ns: crate::emulator::counters::LATE_LIMIT_NS,
            max_cpu_ratio: 0.9,
        }
    }
}

/// The verdict: trustworthy, or not with the reasons.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fidelity {
    /// True if no reason was found.
    pub trustworthy: bool,
    /// One line per violated limit, naming the direction and the figure.
    pub reasons: Vec<String>,
}

impl Report {
    /// Judges the run against `t`.
    pub fn verdict(&self, t: &Thresholds) -> Fidelity {
        let mut reasons = Vec::new();
        for (name, d) in [("a->b", &self.forward), ("b->a", &self.reverse)] {
            direction_reasons(name, d, t, &mut reasons);
        }
        if !self.busy_poll {
            for th in &self.threads {
                if th.ratio() > t.max_cpu_ratio {
                    reasons.push(format!(
                        "worker {} CPU-saturated: {:.0}% of wall time (limit {:.0}%)",
                        th.name,
                        th.ratio() * 100.0,
                        t.max_cpu_ratio * 100.0
                    ));
                }
            }
        }
        reasons.extend(self.errors.iter().map(|e| format!("error: {e}")));
        Fidelity {
            trustworthy: reasons.is_empty(),
            reasons,
        }
    }
}

fn direction_reasons(name: &str, d: &DirSnapshot, t: &Thresholds, out: &mut Vec<String>) {
    // All frames, then the lone ones on their own: under a bulk flow a probe's frames are too
    // few to move the first p99, yet late ones are exactly what the probe measures.
    for (which, l) in [("", &d.lateness), ("lone frames' ", &d.lone_lateness)] {
        if l.p99_ns > t.lateness_p99_ns {
            out.push(format!(
                "{name}: {which}lateness p99 {} µs above {} µs (max {} µs)",
                l.p99_ns / 1_000,
                t.lateness_p99_ns / 1_000,
                l.max_ns / 1_000
            ));
        }
    }
    for (n, what) in d.own_faults() {
        if n > 0 {
            out.push(format!("{name}: {n} {what}"));
        }
    }
}

impl DirSnapshot {
    /// The frames this direction lost or mishandled for reasons of the emulator's own (not the
    /// link model's), each with what it means and its fix. One list for every judge: the
    /// end-of-run verdict here and the lab's per-run judgement over two snapshots.
    pub fn own_faults(&self) -> [(u64, &'static str); 5] {
        [
            (
                self.drops.ring_overflow,
                "frames dropped by the kernel: RX ring overflow (emulator fell behind)",
            ),
            (
                self.drops.slab_full,
                "frames dropped: slab full (raise slab_slots)",
            ),
            (
                self.drops.oversize,
                "frames dropped: larger than a ring slot (turn GRO/TSO offloads off)",
            ),
            (self.drops.tx_failed, "frames failed to transmit"),
            (
                self.csum_partial,
                "frames forwarded with a partial checksum (turn vnet_hdr on, or tx checksum offload off)",
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::counters::Drops;
    use crate::emulator::counters::LatenessSummary;

    fn clean() -> Report {
        let d = DirSnapshot {
            frames_in: 1_000,
            frames_out: 1_000,
            lateness: LatenessSummary {
                count: 1_000,
                p99_ns: 20_000,
                max_ns: 90_000,
                ..Default::default()
            },
            ..Default::default()
        };
        Report {
            forward: d,
            reverse: d,
            wall_ns: 1_000_000_000,
            threads: vec![ThreadUsage {
                name: "a<->b".into(),
                cpu_ns: 300_000_000,
                wall_ns: 1_000_000_000,
            }],
            keep_awake_cpu_ns: 0,
            busy_poll: false,
            seed: None,
            errors: vec![],
        }
    }

    #[test]
    fn a_clean_run_is_trustworthy() {
        let v = clean().verdict(&Thresholds::default());
        assert!(v.trustworthy, "{:?}", v.reasons);
    }

    #[test]
    fn each_violation_is_named() {
        let mut r = clean();
        r.forward.lateness.p99_ns = 150_000;
        r.reverse.drops = Drops {
            ring_overflow: 3,
            ..Default::default()
        };
        r.threads[0].cpu_ns = 950_000_000;
        r.errors.push("worker a->b: boom".into());
        let v = r.verdict(&Thresholds::default());
        assert!(!v.trustworthy);
        assert_eq!(v.reasons.len(), 4, "{:?}", v.reasons);
        assert!(v.reasons[0].starts_with("a->b: lateness p99 150 µs above 100 µs"));
        assert!(v.reasons[1].starts_with("b->a: 3 frames dropped by the kernel"));
        assert!(v.reasons[2].contains("CPU-saturated: 95%"));
        assert_eq!(v.reasons[3], "error: worker a->b: boom");
    }

    #[test]
    fn late_lone_frames_are_a_reason_even_when_all_frames_kept_time() {
        let mut r = clean();
        // 100 000 bulk frames on time; 40 lone frames of a probe, 2 of them 4 ms late (a p99
        // of 40 frames is its second-largest value).
        r.reverse.lateness.count = 100_040;
        r.reverse.lone_lateness = LatenessSummary {
            count: 40,
            p50_ns: 8_000,
            p99_ns: 4_000_000,
            max_ns: 4_100_000,
            late_count: 2,
            ..Default::default()
        };
        let v = r.verdict(&Thresholds::default());
        assert_eq!(
            v.reasons,
            ["b->a: lone frames' lateness p99 4000 µs above 100 µs (max 4100 µs)"]
        );
        r.reverse.lone_lateness.p99_ns = 60_000;
        assert!(r.verdict(&Thresholds::default()).trustworthy);
    }

    #[test]
    fn busy_poll_is_not_judged_on_cpu_and_thresholds_are_honoured() {
        let mut r = clean();
        r.busy_poll = true;
        r.threads[0].cpu_ns = r.threads[0].wall_ns;
        assert!(r.verdict(&Thresholds::default()).trustworthy);
        let strict = Thresholds {
            lateness_p99_ns: 10_000,
            ..Default::default()
        };
        assert!(!r.verdict(&strict).trustworthy);
    }
}
