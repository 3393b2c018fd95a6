//! What the emulator tells its users: the live per-direction counters (`counters`) and lateness
//! histograms ([`lateness`]) the workers write. What they read as — snapshots, how late frames
//! may leave for what a run measures ([`need`]), the end-of-run report and its fidelity verdict
//! (`verdict`) and their one-line human forms ([`summary`]) — are plain types and pure
//! functions of `tcplab_results::emulator`, re-exported here from their old paths.

pub(crate) mod counters;
pub mod lateness;
pub(crate) use tcplab_results::emulator::verdict;
pub use tcplab_results::emulator::{need, summary};
