//! # tcplab-battery: the doctor's battery carried out
//!
//! - [`run`]: the doctor's plan (`tcplab_doctor::plan`) run part by part against a lab
//!   (client and server threads entered into its hosts) or a remote `tcplab serve`, one
//!   generic step for every part: the workload, the kernel counters that moved on the client,
//!   the server's own view from its report, and on an emulated lab the emulator's verdict.
//! - [`corpus`]: the labelled corpus that scores the doctor: its file, the runner (each case's
//!   lab built, the battery run through the lab or, `--remote`, as a user meets a real path:
//!   an agent in the far host and nothing of the lab given to the doctor), the kept records
//!   and their rescoring, and seeded draws of cases at random points (`corpus::draw`, pure).
//! - [`evidence`]: the battery's raw samples as report series (pure).

pub mod corpus;
pub mod error;
pub mod evidence;
pub mod run;

pub use error::{BatteryError, Result};
pub use run::{AgentAt, Target, run};
