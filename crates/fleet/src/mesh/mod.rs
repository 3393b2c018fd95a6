//! The n² mesh: every ordered pair of a fleet's hosts runs one test, the client side on one
//! agent toward the other, scheduled as a round-robin tournament so no host is in two
//! throughput tests at once.
//!
//! ```text
//! schedule (pure: tournament / concurrent steps) ─► run (one thread per pair of a step,
//!   Ask::Run on the source agent) ─► store (a row per pair as it ends; --resume)
//!   ─► outcome (pure: result JSON ─► figures) ─► grid (pure: matrix, worst pairs,
//!   all-to-all stall chance) ─► html (pure: the heatmap page)
//! ```

pub mod grid;
pub mod html;
pub mod outcome;
pub mod run;
pub mod schedule;
pub mod store;
