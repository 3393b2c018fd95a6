//! The link emulator's record, as plain data: its counters as a snapshot carries them
//! ([`counters`]), how late frames may leave for what a run measures ([`need`]), the
//! end-of-run report and its fidelity verdict ([`verdict`]), their one-line human forms
//! ([`summary`]), and one run's verdict and account from the counters before and after it
//! ([`run`]). Everything here is pure: the counters come in as values. `tcplab_emu_io` runs the
//! emulator and fills them; `tcplab_lab` asks a lab's emulator for them around each run.

pub mod counters;
pub mod need;
pub mod run;
pub mod summary;
pub mod verdict;

pub use counters::{DirSnapshot, Drops, LATE_LIMIT_NS, LatenessSummary, Snapshot};
pub use need::Need;
pub use run::{ModelDrops, RunAccount, RunFidelity};
pub use verdict::{Fidelity, Report, ThreadUsage, Thresholds};
