//! The endpoints, not the network, hold the bulk flow back.
//!
//! - `receiver_limited`: the receiving application reads slower than the path delivers. Data
//!   piles up unread in its socket, the advertised window shrinks to what is left (often to
//!   zero), and the sender waits on the window: tcp_info calls that `rwnd_limited`, but a larger
//!   buffer only delays the moment it fills. Evidence: the bytes waiting unread at the receiver
//!   at each interval's end (FIONREAD) against the window it still advertised, and the kernel's
//!   zero-window counters on the receiving side.
//! - `cpu_limited`: an endpoint's data threads were busy all the time (CPU time, plus time
//!   runnable but waiting for a CPU, over wall time per flow) while the flow stayed below the
//!   path's rate: the CPU, not TCP, set the pace. Small
//!   writes or reads (one system call per few bytes) are the usual cause.

use crate::battery::{Context, Role};
use crate::finding::{Finding, Fix, Severity};
use crate::rules::stream_view::{StreamView, peer};

/// Unread bytes at least this share of (unread + window still advertised) mean the receive
/// buffer is full of data the application has not taken: the window is closed by the reader.
pub const UNREAD_SHARE: f64 = 0.5;

/// A thread at or above this CPU time / wall time was never waiting for the network.
pub const CPU_BUSY: f64 = 0.9;

pub use crate::limits::PATH_FULL_SHARE;

/// The rule for a reader slower than the path.
pub fn check_receiver(ctx: &Context<'_>) -> Vec<Finding> {
    let Some(stream) = &ctx.battery.stream else {
        return Vec::new();
    };
    let Some(view) = StreamView::of(stream) else {
        return Vec::new();
    };
    let rate = ctx.rate_bps();
    if rate.is_some_and(|r| view.throughput_bps >= PATH_FULL_SHARE * r) {
        return Vec::new();
    }
    let receiver = peer(view.sender());
    let zero_windows = ctx
        .counter(
            crate::plan::PartKind::Stream,
            receiver,
            "TcpExt.TCPToZeroWindowAdv",
        )
        .unwrap_or(0);
    let Some(unread) = view.unread_bytes else {
        return Vec::new();
    };
    let open = view.rcv_wnd.or(view.snd_wnd).unwrap_or(0.0);
    let share = unread / (unread + open).max(1.0);
    if share < UNREAD_SHARE && zero_windows == 0 {
        return Vec::new();
    }
    // Less than a segment waiting is a reader between two reads, not one falling behind.
    if unread < view.mss.unwrap_or(1448.0) {
        return Vec::new();
    }
    // Between two hosts of an unshaped lab the path is a memory copy: a reader that never
    // waited for data keeps up as fast as this machine's CPUs let it, and the sender, on the
    // same CPUs, simply writes faster. That is the machine's limit, not a slow application.
    let reader_busy = busy_share(stream, receiver);
    let cpu_bound = ctx.unshaped_lab() && reader_busy >= READER_BUSY;
    let severity = if cpu_bound {
        Severity::Info
    } else if rate.is_none_or(|r| view.throughput_bps < 0.5 * r) {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "receiver_limited",
        severity,
        format!(
            "the receiving application reads slower than the path: {:.0} kB wait unread, {:.1} Mbit/s delivered",
            unread / 1e3,
            view.throughput_bps / 1e6
        ),
    );
    f.push(
        "unread_bytes",
        unread,
        "bytes",
        "median data received but not yet read by the application (FIONREAD), at interval ends",
    );
    f.push(
        "window_open_bytes",
        open,
        "bytes",
        "median window the receiver still advertised",
    );
    f.push(
        "unread_share",
        share,
        "fraction",
        "unread / (unread + window open)",
    );
    f.push(
        "reader_busy_fraction",
        reader_busy,
        "fraction",
        if cpu_bound {
            "the receiving data threads' CPU time and time waiting for a CPU / (wall time x flows): on an unshaped lab the reader ran as fast as the machine let it, so this is reported as info"
        } else {
            "the receiving data threads' CPU time and time waiting for a CPU / (wall time x flows)"
        },
    );
    f.push(
        "zero_window_adverts",
        zero_windows as f64,
        "times",
        "the receiver advertised a zero window (TcpExt TCPToZeroWindowAdv)",
    );
    f.push(
        "throughput_bps",
        view.throughput_bps,
        "bit/s",
        "stream, after warm-up",
    );
    if let Some(r) = ctx.rate() {
        f.push("path_rate_bps", r.bps, "bit/s", r.context());
    }
    f.explanation = "Data arrives faster than the application reads it: it waits in the socket's receive buffer, the advertised window shrinks to the little room left, and the sender stalls on the window. The kernel reports this as receive-window-limited, but a larger buffer only delays the moment it fills: the reader must keep up (larger reads, a thread that only reads, less work per read, or a faster consumer behind it).".into();
    f.fixes.push(Fix::other(
        "read faster: larger reads (e.g. 128 KiB per read), a dedicated reader thread, or less processing per read; with a deliberately slow consumer, the flow's rate is the consumer's",
        &ctx.describe_host("the receiving application", receiver),
    ));
    vec![f]
}

/// A reader busy at least this share of the run (on a CPU or waiting for one) never waited
/// for data: a reader slowed on purpose (a paced consumer) sleeps most of the time instead.
pub const READER_BUSY: f64 = 0.5;

/// `role`'s data threads' CPU time plus time runnable but waiting for a CPU, over wall time
/// per flow: either way never waiting for the network. 0 without a wall time.
fn busy_share(stream: &tcplab_results::stream::StreamResult, role: Role) -> f64 {
    let wall = stream.elapsed_s * f64::from(stream.config.flows.max(1));
    if wall <= 0.0 {
        return 0.0;
    }
    let m = &stream.meta;
    match role {
        Role::Client => (m.client_cpu_s + m.client_cpu_wait_s.unwrap_or(0.0)) / wall,
        Role::Server => (m.server_cpu_s + m.server_cpu_wait_s.unwrap_or(0.0)) / wall,
    }
}

/// The rule for an endpoint whose CPU set the pace.
pub fn check_cpu(ctx: &Context<'_>) -> Vec<Finding> {
    let Some(stream) = &ctx.battery.stream else {
        return Vec::new();
    };
    let Some(view) = StreamView::of(stream) else {
        return Vec::new();
    };
    let rate = ctx.rate_bps();
    // Between two hosts of an unshaped lab the CPUs are the path: a flow bound by them runs as
    // fast as the path can.
    if rate.is_some_and(|r| view.throughput_bps >= PATH_FULL_SHARE * r) || ctx.unshaped_lab() {
        return Vec::new();
    }
    if stream.elapsed_s <= 0.0 {
        return Vec::new();
    }
    let sender = view.sender();
    let (side, share) = [sender, peer(sender)]
        .into_iter()
        .map(|r| (r, busy_share(stream, r)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((sender, 0.0));
    if share < CPU_BUSY {
        return Vec::new();
    }
    let what = if side == sender {
        "sending"
    } else {
        "receiving"
    };
    let severity = if rate.is_none_or(|r| view.throughput_bps < 0.5 * r) {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(
        "cpu_limited",
        severity,
        format!(
            "the {what} endpoint's CPU set the pace: {:.0}% busy at {:.1} Mbit/s",
            share * 100.0,
            view.throughput_bps / 1e6
        ),
    );
    f.push(
        "cpu_busy_fraction",
        share,
        "fraction",
        format!("{what} data threads' CPU time and time waiting for a CPU / (wall time x flows)"),
    );
    f.push(
        "write_size_bytes",
        f64::from(stream.config.write_size),
        "bytes",
        "bytes per write of the sender",
    );
    f.push(
        "app_limited_share",
        view.app_limited_share,
        "fraction",
        "sending samples whose delivery rate was application-limited (tcp_info)",
    );
    f.push(
        "throughput_bps",
        view.throughput_bps,
        "bit/s",
        "stream, after warm-up",
    );
    if let Some(r) = ctx.rate() {
        f.push("path_rate_bps", r.bps, "bit/s", r.context());
    }
    f.explanation = format!(
        "The {what} application used its CPU all the time and still moved less than the path carries: TCP was waiting for it, not the other way round. Each system call moves {} bytes here; fewer, larger writes and reads (tens of kB), segmentation offloads (TSO/GSO/GRO) and more flows on more cores raise what one CPU can push.",
        stream.config.write_size
    );
    f.fixes.push(Fix::other(
        "write and read in large chunks (64-256 KiB per call; writev or a user-space buffer for small messages), keep TSO/GSO/GRO on, or spread the transfer over flows on several cores",
        &ctx.describe_host(&format!("the {what} application"), side),
    ));
    vec![f]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::{Battery, PathInfo};
    use crate::synth::{self, StreamSim};

    fn with_reader(unread: u32, rcv_wnd: u32, bps: f64) -> Battery {
        let mut s = StreamSim::healthy(bps, 10_000).run();
        let mut server = s.intervals.clone();
        for i in server.iter_mut() {
            i.sending = false;
            i.unread_bytes = Some(unread);
            if let Some(t) = i.tcp_info.as_mut() {
                t.rcv_wnd = rcv_wnd;
            }
        }
        s.server_intervals = server;
        Battery {
            stream: Some(s),
            facts: Some(synth::facts(250)),
            path: PathInfo {
                rate_bps: Some(1e9),
                ..PathInfo::default()
            },
            ..Battery::default()
        }
    }

    #[test]
    fn a_full_buffer_of_unread_data_is_the_reader() {
        let f = check_receiver(&Context::new(&with_reader(3_000_000, 200_000, 100e6)));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(f[0].figure("unread_bytes"), Some(3e6));
        assert!((f[0].figure("unread_share").unwrap() - 3.0 / 3.2).abs() < 1e-9);
    }

    #[test]
    fn a_prompt_reader_or_a_full_path_is_not() {
        assert!(check_receiver(&Context::new(&with_reader(0, 65_536, 30e6))).is_empty());
        assert!(check_receiver(&Context::new(&with_reader(3_000_000, 1, 950e6))).is_empty());
    }

    #[test]
    fn a_reader_at_full_cpu_on_an_unshaped_lab_is_the_machine_not_the_application() {
        let mut b = with_reader(3_000_000, 200_000, 3e9);
        b.path.rate_bps = None;
        let busy = |b: &mut Battery, share: f64| {
            if let Some(s) = b.stream.as_mut() {
                s.meta.server_cpu_s = s.elapsed_s * share * 0.4;
                s.meta.server_cpu_wait_s = Some(s.elapsed_s * share * 0.6);
            }
        };
        busy(&mut b, 0.95);
        let f = check_receiver(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Info);
        assert!((f[0].figure("reader_busy_fraction").unwrap() - 0.95).abs() < 1e-9);
        // A reader that sleeps most of the time (a paced consumer) is the application.
        busy(&mut b, 0.1);
        assert_eq!(
            check_receiver(&Context::new(&b))[0].severity,
            Severity::Error
        );
        // A shaped path: the reader falls behind the path, busy or not.
        busy(&mut b, 0.95);
        b.path.rate_bps = Some(10e9);
        assert_eq!(
            check_receiver(&Context::new(&b))[0].severity,
            Severity::Error
        );
    }

    #[test]
    fn a_busy_sender_below_the_rate_is_cpu_limited() {
        let mut b = with_reader(0, 1 << 20, 200e6);
        if let Some(s) = b.stream.as_mut() {
            s.meta.client_cpu_s = s.elapsed_s * 0.98;
            s.config.write_size = 16;
        }
        let f = check_cpu(&Context::new(&b));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].title.contains("sending endpoint"), "{}", f[0].title);
        assert_eq!(f[0].figure("write_size_bytes"), Some(16.0));
        // The same CPU at the path's rate: nothing to find.
        if let Some(s) = b.stream.as_mut() {
            s.summary.throughput_bps = Some(950e6);
        }
        assert!(check_cpu(&Context::new(&b)).is_empty());
    }

    #[test]
    fn a_busy_sender_between_two_hosts_of_an_unshaped_lab_is_the_path_at_full_speed() {
        let mut b = with_reader(0, 1 << 20, 200e6);
        if let Some(s) = b.stream.as_mut() {
            s.meta.client_cpu_s = s.elapsed_s * 0.98;
        }
        assert_eq!(check_cpu(&Context::new(&b)).len(), 1);
        b.path.rate_bps = None;
        assert!(check_cpu(&Context::new(&b)).is_empty());
    }
}
