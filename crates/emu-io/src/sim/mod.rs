//! A virtual-time harness for the emulator's scheduling: two simulated CPUs, one worker per
//! direction (a->b carries a bulk flow and a sparse probe's requests, b->a the bulk flow's ACKs
//! and the probe's responses), each taking the real turn (`run::turn`) over the real direction
//! code (`run::direction`: receive through the real link model, store in the slab, the real
//! schedule and due queues, release and send) on simulated ports in virtual time
//! ([`ports`]), with the real worker decisions (`sched::worker::WorkerSched`) and the real
//! lone-send signal. The machine's costs are parameters ([`Costs`]: a `sendmmsg` runs the
//! receiver's stack for each frame, a sleeping worker wakes some microseconds late, the probe's
//! server and client threads need a CPU that a busy SCHED_FIFO worker holds). It prints a
//! lateness table per frame class, so each scheduling heuristic can be judged with it on and
//! off, exactly and repeatably.
//!
//! What the world keeps is the machine only ([`world`]): the CPUs, the clock, the traffic
//! sources, the endpoints, the costs, and how a worker's sleep, spin or pause plays out.
//!
//! Not exercised: the direct path (frames due on arrival; the harness's link has a delay),
//! the TX ring (the simulated send port sends in batches), the bulk endpoints' own CPU use, and
//! the SCHED_OTHER class (a light worker's class only changes what the kernel's scheduler
//! does, which the harness does not simulate).

mod costs;
mod cpu;
mod frames;
mod ports;
mod table;
#[cfg(test)]
mod tests;
mod world;

pub(crate) use costs::Costs;
pub(crate) use table::{Class, Table};
pub(crate) use world::{Traffic, run};
