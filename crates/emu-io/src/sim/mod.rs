//! A virtual-time harness for the emulator's scheduling: two simulated CPUs, one worker per
//! direction (a->b carries a bulk flow and a sparse probe's requests, b->a the bulk flow's ACKs
//! and the probe's responses), the real link model (`tcplab_emu::DirectionModel`), the real
//! departure schedule and due queues (`sched::schedule`), the real worker decisions
//! (`sched::worker::WorkerSched`) and the real lone-send signal, with the machine's costs as
//! parameters ([`Costs`]: a `sendmmsg` runs the receiver's stack for each frame, a sleeping
//! worker wakes some microseconds late, the probe's server and client threads need a CPU that
//! a busy SCHED_FIFO worker holds). It prints a lateness table per frame class, so each
//! scheduling heuristic can be judged with it on and off, exactly and repeatably.
//!
//! Not modelled: the direct path (frames due on arrival; the harness's link has a delay),
//! the TX ring, the bulk endpoints' own CPU use, and the SCHED_OTHER class (a light worker's
//! class only changes what the kernel's scheduler does, which the harness does not simulate).

mod cpu;
mod table;
#[cfg(test)]
mod tests;
mod world;

pub(crate) use table::{Class, Table};
pub(crate) use world::{Costs, Traffic, run};
