//! The figures the battery's plan and the rules share. A part of the battery is sized so the
//! rules that read it can judge it, and a rule calls a part too small by the same figure: the
//! two cannot drift apart (a plan that sizes the message sweep at 200 while a rule asks 1,000
//! would call every battery its own failure).

/// Interval of the bulk stream's reports and tcp_info samples, ms: what the stream rules read.
/// The labelled corpus was scored at 1 s; at 100 ms a slow lossy flow's retransmissions fell
/// under the loss rule's minimum where at 1 s they did not.
pub const STREAM_INTERVAL_MS: u64 = 1_000;

/// Fewest measured stream intervals: fewer cannot show a trend or a steady state.
pub const MIN_STREAM_INTERVALS: usize = 3;

/// Fewest messages of the plain msgs run to trust its latency figures and tails (p99 needs
/// 100 per percentile step; 1,000 gives ten samples above it).
pub const MIN_MESSAGES: u64 = 1_000;

/// Fewest messages per size of the size sweep: what the periodic-stall rule needs to see a
/// period (the sweep looks for the size at which stalls start, not for tails).
pub const MIN_SWEEP_MESSAGES: u64 = 200;

/// Fewest messages of a write-write-read run (one round trip each) to judge its stalls.
pub const MIN_TRAP_MESSAGES: u64 = 50;

/// Fewest rr transactions or crr connections (p99 needs at least 100).
pub const MIN_TRANSACTIONS: u64 = 100;

/// Most messages of the plain msgs run (sfperf's 100,000).
pub const MSGS_MAX_COUNT: u64 = 100_000;

/// Most messages per size of the sweep.
pub const SWEEP_MAX_COUNT: u64 = 2_000;

/// Message sizes of the sweep: sub-MSS sizes, where timers and small-segment effects live,
/// and one full segment.
pub const SWEEP_SIZES: [u32; 6] = [1, 16, 64, 256, 1024, 1448];

/// The messages of the msgs runs are sent at most at this share of the path's rate, so they
/// never queue: a stall then stands out against a flat baseline (seed 004), where back-to-back
/// tiny segments would be held by the congestion window and the peer's delayed ACKs, a stall
/// of the workload's own making. It also makes the paced runs a probe of the path's own loss:
/// packets that never queue are lost only by the path.
pub const MSGS_PATH_SHARE: f64 = 0.5;

/// Smallest message spacing, µs: 20,000 messages a second. Each message with Nagle off is a
/// frame of its own, and an emulated path holds every frame in flight for its one-way delay:
/// at 50 ms that is 1,000 frames, well inside the emulator's slots in its GSO mode (4,096), and
/// a frame rate it keeps its schedule at.
pub const MSGS_MIN_GAP_US: u64 = 50;

/// Bytes of each message of the packet train: one full segment of a 1500-byte path.
pub const TRAIN_MESSAGE: u32 = 1_448;

/// Fewest messages of the train: enough for a loss-based sender's slow start to reach a window
/// of hundreds of segments and build a queue at the bottleneck.
pub const TRAIN_MIN_COUNT: u64 = 1_000;

/// Most messages of the train (29 MB; a quarter second at 1 Gbit/s).
pub const TRAIN_MAX_COUNT: u64 = 20_000;

/// The train's congestion control: one that does not pace (reno is built into every Linux
/// kernel), so a window leaves the sender back to back and only the bottleneck spaces it.
pub const TRAIN_CONGESTION: &str = "reno";

/// Shortest idle phase of the latency-under-load run, ms: enough probes (one per 10 ms) for a
/// median that one late probe does not move.
pub const RRUL_IDLE_MIN_MS: u64 = 1_000;

/// Unsent bytes the latency-under-load flows may hold in their socket.
pub const RRUL_NOTSENT_LOWAT: u32 = 128 << 10;

/// Least time the probes run past the load's end for a queue to drain, ms.
pub const RRUL_DRAIN_MIN_MS: u64 = 2_000;

/// Interval of the latency-under-load flows' reports, ms: the time resolution of that run's
/// throughput in the report's plot (the rules read its probes and totals).
pub const RRUL_INTERVAL_MS: u64 = 100;

/// Concurrent connection loops of the battery's crr: two keep a connection always opening
/// while another closes, without loading two vCPUs.
pub const CRR_CONCURRENCY: u32 = 2;

/// Concurrent connections of the battery's HTTP run (as crr's loops).
pub const HTTP_CONNECTIONS: u32 = CRR_CONCURRENCY;

/// Directories of the SPECweb96 file set the battery's HTTP server serves: one (36 files,
/// about 5 MB) is the mix's shape without a file set to write for long.
pub const HTTP_DIRS: u32 = 1;

/// Interval of the HTTP run's live reports, ms (the rules read the run's totals).
pub const HTTP_INTERVAL_MS: u64 = 1_000;

/// Throughput at or above this share of the path's rate is a full path: a limit seen in
/// tcp_info, or drops, that leave a flow there cost nothing worth a finding. A full path
/// delivers about 95 % of its rate in payload, so 90 % leaves room for the estimate's error.
pub const PATH_FULL_SHARE: f64 = 0.9;

/// A limit that leaves a flow under this share of the path's rate costs more than half the
/// path: an error rather than a warning.
pub const COSTLY_SHARE: f64 = 0.5;

/// The smallest effect the rules read from latency under load, ns: bufferbloat from 30 ms
/// added.
pub const BLOAT_SCALE_NS: u64 = 30_000_000;

/// The smallest effect the rules read from message and connection timings, ns: a jiffy at
/// HZ=250 (stalls of whole ticks; the delayed-ACK window is 40 ms and a jiffy wide).
pub const TICK_SCALE_NS: u64 = 4_000_000;

/// The smallest effect the rules read from the connection parts (crr, http), ns: connects that
/// waited for the SYN timer (0.8 s and longer), and counts and rates of connections, errors
/// and TIME_WAIT sockets; never a connect's own time, which a late emulator would move.
pub const CONNECT_SCALE_NS: u64 = 800_000_000;

/// Slack on the parts whose length follows the path's RTT (rr, crr): they run for this many
/// times the time their minimum needs at the idle RTT, so a path that queues a little more
/// still yields the minimum.
pub const RTT_SIZING_SLACK: f64 = 1.5;
