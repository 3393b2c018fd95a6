//! What the emulator tells its users: per-direction counters (`counters`), how late frames
//! left ([`lateness`]), how late they may leave for what a run measures ([`need`]), the
//! end-of-run report and its fidelity verdict (`verdict`) and their one-line human forms
//! ([`summary`]). Pure but for the atomics the worker writes.

pub(crate) mod counters;
pub mod lateness;
pub mod need;
pub mod summary;
pub(crate) mod verdict;
