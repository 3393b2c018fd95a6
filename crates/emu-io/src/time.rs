//! Time as the packet path sees it, pure: [`Nanos`]. Nothing here reads a clock: `wire/`,
//! `sched/` and the model take their time from here as an argument, and `io::sys::clock`
//! reads the machine's clocks in it.

/// Nanoseconds on CLOCK_MONOTONIC (the machine's, shared by all its namespaces, or the
/// harness's virtual one).
pub type Nanos = u64;
