//! Time as the packet path sees it, pure: [`Nanos`], and [`Clock`], where a turn of the
//! emulator reads the time. The real worker's clock reads the machine's clocks
//! (`io::sys::clock::SysClock`); the scheduling harness's (`sim`) is virtual time that moves
//! only by the costs it charges. Nothing here reads a clock: `wire/`, `sched/` and the model
//! take their time from here as an argument.

/// Nanoseconds on CLOCK_MONOTONIC (the machine's, shared by all its namespaces, or the
/// harness's virtual one).
pub type Nanos = u64;

/// Where a turn reads the time, and the CPU it runs on. Generic, not a trait object: the real
/// worker's is a zero-sized type whose calls inline to the vDSO reads they were before.
pub trait Clock {
    /// CLOCK_MONOTONIC now: departures, lateness, the worker's decisions.
    fn now(&self) -> Nanos;
    /// CLOCK_REALTIME now: the clock of the kernel's receive stamps, read with [`Clock::now`]
    /// to convert them (`run::direction`, on receive).
    fn realtime(&self) -> Nanos;
    /// The CPU the caller runs on: the lone signal counts sends by the CPU they were made on
    /// (`sched::lone`).
    fn cpu(&self) -> usize;
    /// Called where a turn's fixed work (the locks, the reconfiguration check, bookkeeping)
    /// is done. A real clock has moved on by itself; a simulated machine's clock moves on by
    /// that work's cost here, so the time a turn reads afterwards includes it.
    fn fixed_work_done(&self) {}
}
