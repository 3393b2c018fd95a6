//! One direction's chain with a queue discipline at the bottleneck ([`DeferredDirection`]):
//! loss → duplicate → discipline and rate ([`crate::aqm::server::Server`]) → reorder or delay
//! line → corrupt, where a packet's departure is decided when the link takes it, not when it
//! arrives (see [`crate::aqm`] for why).
//!
//! The I/O layer offers each frame with a handle ([`Frame::id`]) and keeps it until a
//! [`Decision`] names the handle: a departure (through the delay line, maybe marked CE) or a
//! drop. Decisions come out of [`DeferredDirection::offer`] and [`DeferredDirection::advance`],
//! which the caller runs at [`DeferredDirection::next_due`].
//!
//! Random draws are those of [`crate::DirectionModel`], made at arrival in the same fixed
//! order (loss, duplicate, reorder, jitter, corruption), so with drop-tail as the discipline
//! every departure equals the arrival-time model's. The reorder element judges a packet when
//! it is served (in service order).

use std::collections::HashMap;

use crate::aqm::server::{Served, Server};
use crate::aqm::{AqmConfig, AqmCounters, AqmDrop, Discipline, Dropped, Ecn, Packet};
use crate::corrupt::{CorruptElement, Corruption};
use crate::delay::DelayLine;
use crate::duplicate::DuplicateElement;
use crate::error::ConfigError;
use crate::jitter::JitterSource;
use crate::loss::LossElement;
use crate::model::{Departure, DirectionCounters};
use crate::reorder::ReorderElement;
use crate::rng::{Direction, Stream, stream};
use crate::{DirectionConfig, Nanos};

/// A frame as offered: the caller's handle and what the discipline reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The caller's handle (its slab slot).
    pub id: u64,
    /// Layer-2 bytes.
    pub len: u32,
    /// Hash of the flow's 5-tuple (FQ-CoDel's bucket).
    pub flow: u32,
    /// The IP header's ECN codepoint.
    pub ecn: Ecn,
}

/// Why a deferred direction dropped a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferredDrop {
    /// The loss model.
    Loss,
    /// The queue's limit.
    QueueFull,
    /// The discipline (early drop, CoDel, the memory limit).
    Aqm(AqmDrop),
}

/// The fate of one copy of an offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// It leaves.
    Depart {
        /// The frame's handle.
        id: u64,
        /// This is the duplicate copy.
        copy: bool,
        /// When, and the bit to flip if any.
        departure: Departure,
        /// Set CE in its IP header (the discipline marked it).
        mark_ce: bool,
    },
    /// It is gone.
    Drop {
        /// The frame's handle.
        id: u64,
        /// This is the duplicate copy.
        copy: bool,
        /// Why.
        cause: DeferredDrop,
    },
}

/// What a copy in the queue carries until it is served: its handle and the draws made for it
/// at arrival.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u64,
    copy: bool,
    len: u32,
    reorder_draw: f64,
    offset: i64,
    corruption: Option<Corruption>,
}

/// One direction with a queue discipline.
#[derive(Debug, Clone)]
pub struct DeferredDirection {
    cfg: DirectionConfig,
    loss: LossElement,
    duplicate: DuplicateElement,
    server: Server,
    reorder: ReorderElement,
    jitter: JitterSource,
    delay: DelayLine,
    corrupt: CorruptElement,
    counters: DirectionCounters,
    /// Copies in the queue, by the server's packet id.
    pending: HashMap<u64, Pending>,
    next_packet: u64,
    last_now: Nanos,
    served: Vec<Served>,
    dropped: Vec<Dropped>,
}

impl DeferredDirection {
    /// `cfg` with its own `queue_discipline` (drop-tail if it names none), drawing from
    /// `seed`'s streams for `direction`.
    pub fn of(cfg: &DirectionConfig, seed: u64, direction: Direction) -> Result<Self, ConfigError> {
        let discipline = cfg.queue_discipline.unwrap_or_default();
        Self::new(cfg, discipline, seed, direction)
    }

    /// `cfg` with `discipline` at its bottleneck, drawing from `seed`'s streams for
    /// `direction`. A discipline needs a rate (without one nothing ever queues).
    pub fn new(
        cfg: &DirectionConfig,
        discipline: AqmConfig,
        seed: u64,
        direction: Direction,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        discipline.validate()?;
        let Some(rate) = cfg.rate_bps else {
            return Err(ConfigError::Needs {
                flag: "--queue-discipline",
                needs: "--rate",
                fix: "a discipline manages the queue in front of a rate limit; give the link a rate",
            });
        };
        let rng = |s| stream(seed, direction, s);
        let keep_order = !cfg.jitter.as_ref().is_some_and(|j| j.allow_reorder);
        Ok(Self {
            loss: LossElement::new(cfg.loss.as_ref(), rng(Stream::Loss)),
            duplicate: DuplicateElement::new(cfg.duplicate, rng(Stream::Duplicate)),
            server: Server::new(
                Discipline::new(&discipline, cfg.queue_limit(), Some(rate), seed, direction),
                Some(rate),
                cfg.overhead_bytes,
            ),
            reorder: ReorderElement::new(cfg.reorder.as_ref(), rng(Stream::Reorder)),
            jitter: JitterSource::new(cfg.jitter.as_ref(), rng(Stream::Jitter)),
            delay: DelayLine::new(cfg.delay_ns, keep_order),
            corrupt: CorruptElement::new(cfg.corrupt, rng(Stream::Corrupt)),
            counters: DirectionCounters::default(),
            pending: HashMap::new(),
            next_packet: 0,
            last_now: 0,
            served: Vec::new(),
            dropped: Vec::new(),
            cfg: cfg.clone(),
        })
    }

    /// A frame arrives at `now`: what was due by then is decided first, then the frame's own
    /// fate as far as it is known (a loss, a refusal, or a departure if the link was idle),
    /// all appended to `out`. True when the frame was duplicated: a decision with `copy` set
    /// will name it, so the caller keeps a copy of the frame now.
    pub fn offer(&mut self, frame: Frame, now: Nanos, out: &mut Vec<Decision>) -> bool {
        let now = now.max(self.last_now);
        self.last_now = now;
        self.advance(now, out);
        self.counters.packets_in += 1;
        self.counters.bytes_in += u64::from(frame.len);
        // Fixed draws per packet, in DirectionModel's order.
        let lost = self.loss.lose();
        let duplicated = self.duplicate.duplicate();
        let reorder_draw = self.reorder.draw();
        let offset = self.jitter.next_offset();
        let corruption = self.corrupt.draw(frame.len);
        if lost {
            self.counters.dropped_loss += 1;
            out.push(Decision::Drop {
                id: frame.id,
                copy: false,
                cause: DeferredDrop::Loss,
            });
            return false;
        }
        let copies: &[(bool, Option<Corruption>)] = if duplicated {
            &[(false, corruption[0]), (true, corruption[1])]
        } else {
            &[(false, corruption[0])]
        };
        for &(copy, corruption) in copies {
            let packet = self.next_packet;
            self.next_packet += 1;
            self.pending.insert(
                packet,
                Pending {
                    id: frame.id,
                    copy,
                    len: frame.len,
                    reorder_draw,
                    offset,
                    corruption,
                },
            );
            self.server.arrive(
                Packet::new(packet, frame.len, frame.flow, frame.ecn),
                now,
                &mut self.served,
                &mut self.dropped,
            );
        }
        self.decide(out);
        duplicated
    }

    /// Decides every departure due by `now` (append to `out`).
    pub fn advance(&mut self, now: Nanos, out: &mut Vec<Decision>) {
        self.server
            .advance(now, &mut self.served, &mut self.dropped);
        self.decide(out);
    }

    /// When the next departure is decided (call [`Self::advance`] then).
    pub fn next_due(&self) -> Option<Nanos> {
        self.server.next_due()
    }

    /// Turns what the server served and dropped into decisions, in time order of service.
    fn decide(&mut self, out: &mut Vec<Decision>) {
        for d in std::mem::take(&mut self.dropped) {
            let Some(p) = self.pending.remove(&d.packet.id) else {
                continue;
            };
            let cause = match d.why {
                AqmDrop::Overlimit => DeferredDrop::QueueFull,
                why => DeferredDrop::Aqm(why),
            };
            match (cause, p.copy) {
                (DeferredDrop::QueueFull, false) => self.counters.dropped_queue_full += 1,
                (DeferredDrop::QueueFull, true) => self.counters.duplicates_dropped += 1,
                _ => self.counters.dropped_aqm += 1,
            }
            out.push(Decision::Drop {
                id: p.id,
                copy: p.copy,
                cause,
            });
        }
        for s in std::mem::take(&mut self.served) {
            let Some(p) = self.pending.remove(&s.packet.id) else {
                continue;
            };
            let at = if self.reorder.skips(p.reorder_draw) {
                self.counters.reordered += 1;
                s.leaves
            } else {
                self.delay.depart(s.leaves, p.offset)
            };
            self.counters.packets_out += 1;
            self.counters.bytes_out += u64::from(p.len);
            self.counters.duplicated += u64::from(p.copy);
            self.counters.corrupted += u64::from(p.corruption.is_some());
            self.counters.marked_ce += u64::from(s.marked);
            out.push(Decision::Depart {
                id: p.id,
                copy: p.copy,
                departure: Departure {
                    at,
                    corrupt: p.corruption,
                },
                mark_ce: s.marked,
            });
        }
    }

    /// Applies new settings at `now` to every element; the discipline and what it holds stay
    /// (the rate and the queue's limit change for what comes next). On error nothing changes.
    pub fn reconfigure(&mut self, cfg: &DirectionConfig, now: Nanos) -> Result<(), ConfigError> {
        cfg.validate()?;
        if cfg.queue_discipline.unwrap_or_default() != self.cfg.queue_discipline.unwrap_or_default()
        {
            return Err(ConfigError::field(
                "queue_discipline",
                crate::error::ValueError::Invalid(
                    "the discipline of a running link cannot change yet (what it holds would \
                     have to drain first): bring the link down and up with the new one"
                        .into(),
                ),
            ));
        }
        let Some(rate) = cfg.rate_bps else {
            return Err(ConfigError::Needs {
                flag: "--queue-discipline",
                needs: "--rate",
                fix: "a link with a queue discipline keeps a rate; give one",
            });
        };
        self.last_now = self.last_now.max(now);
        self.loss.reconfigure(cfg.loss.as_ref());
        self.duplicate.reconfigure(cfg.duplicate);
        self.server
            .reconfigure(rate, cfg.overhead_bytes, cfg.queue_limit());
        self.reorder.reconfigure(cfg.reorder.as_ref());
        self.jitter.reconfigure(cfg.jitter.as_ref());
        let keep_order = !cfg.jitter.as_ref().is_some_and(|j| j.allow_reorder);
        self.delay.reconfigure(cfg.delay_ns, keep_order);
        self.corrupt.reconfigure(cfg.corrupt);
        self.cfg = cfg.clone();
        Ok(())
    }

    /// True if departures can come out of the order they were decided in.
    pub fn may_reorder(&self) -> bool {
        self.cfg.may_reorder()
    }

    /// What this direction did so far.
    pub fn counters(&self) -> &DirectionCounters {
        &self.counters
    }

    /// What the discipline did so far (marks, drops by cause, sojourn, flows seen).
    pub fn discipline(&self) -> &AqmCounters {
        self.server.discipline().counters()
    }

    /// The settings in force.
    pub fn config(&self) -> &DirectionConfig {
        &self.cfg
    }

    /// What this direction really did up to `now`: its bottleneck queue (occupancy and
    /// sojourn as the drop-tail model counts them) and the delay its delay line gave.
    pub fn realised(&self, now: Nanos) -> crate::Realised {
        crate::Realised {
            discipline: Some(*self.discipline()),
            ..crate::Realised::of(
                &self.cfg,
                &self.server.stats_at(now.max(self.last_now)),
                self.delay.stats(),
            )
        }
    }

    /// Copies waiting in the queue.
    pub fn queued(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
#[path = "deferred_tests.rs"]
mod tests;
