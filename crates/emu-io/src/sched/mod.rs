//! When frames leave, pure: the preallocated frame storage ([`slab`]), the departure schedule
//! ([`schedule`]), frames once due served flow by flow ([`due`]), the pauses after a lone frame
//! leaves ([`lone`]), when a light worker gives up SCHED_FIFO ([`policy`]), and what a worker
//! does between its turns ([`worker`]). Time comes in as
//! an argument; the worker in `run` reads the clock and carries the decisions out.

pub(crate) mod due;
pub(crate) mod lone;
pub(crate) mod policy;
pub(crate) mod schedule;
pub(crate) mod slab;
pub(crate) mod worker;
