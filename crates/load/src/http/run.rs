//! Running HTTP load against a web server from the calling thread's namespace: the client's
//! epoll loops (closed or open loop), the live intervals, the result. Runs in a lab, with the
//! built-in file server or nginx in the server host, are `tcplab_front::http::lab`'s.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tcplab_results::facts::Facts;

use super::client::{MAX_SAMPLES, Plan, run_loop};
use super::config::HttpConfig;
use super::result::{HttpInterval, HttpResult, assemble};
use crate::clock::now_ns;
use crate::crr::sample_time_wait;
use crate::error::Result;
use crate::live::{OnLive, Span, with_reporter};
use crate::session::FoldIn;
use crate::sysinfo;

/// Runs `cfg` against `target` from the calling thread's namespace (the client's). Figures
/// of the server side are the caller's to add.
pub fn run_client_live(
    cfg: &HttpConfig,
    target: SocketAddr,
    facts: Option<Facts>,
    interval_ms: u64,
    on_interval: OnLive<'_, HttpInterval>,
) -> Result<HttpResult> {
    cfg.validate()?;
    let threads =
        cfg.thread_count(std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    let t0 = now_ns() + 1_000_000;
    let expected = cfg
        .count
        .unwrap_or(u64::MAX)
        .min(cfg.duration_ms.map_or(u64::MAX, |d| d.saturating_mul(200)))
        .min(MAX_SAMPLES);
    let plan = Plan {
        cfg,
        target,
        host: cfg.host.clone().unwrap_or_else(|| host_header(target)),
        t0,
        deadline: cfg
            .duration_ms
            .map_or(t0 + cfg.deadline_s() * 1_000_000_000, |d| {
                t0 + d * 1_000_000
            }),
        claimed: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        // Loops share the work unevenly: each may keep the whole run's samples (the memory is
        // reserved, not touched, until used), the run at most MAX_SAMPLES in all.
        samples_per_loop: expected.min(MAX_SAMPLES / u64::from(threads)) as usize,
    };
    let time_wait_now = AtomicU64::new(0);
    let syn0 = sysinfo::netstat_counter("TcpExt", "TCPSynRetrans");
    let reporter = on_interval.map(|cb| reporter(&plan, &time_wait_now, syn0, cb));
    let (loops, time_wait, t_end) = with_reporter(interval_ms, reporter, || {
        std::thread::scope(|s| {
            let sampler =
                s.spawn(|| sample_time_wait(&plan.stop, cfg.sample_ms, t0, &time_wait_now));
            let per = cfg.connections / threads;
            let extra = cfg.connections % threads;
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let n = per + u32::from(i < extra);
                    let plan = &plan;
                    std::thread::Builder::new()
                        .name(format!("tcplab-http-{i}"))
                        .spawn_scoped(s, move || run_loop(plan, i, n))
                })
                .collect();
            let loops: Vec<_> = handles
                .into_iter()
                .filter_map(|h| h.ok()?.join().ok())
                .collect();
            let t_end = now_ns();
            plan.stop.store(true, Ordering::Release);
            let tw = sampler.join().unwrap_or_default();
            (loops, tw, t_end)
        })
    });
    let syn1 = sysinfo::netstat_counter("TcpExt", "TCPSynRetrans");
    let mut meta = crate::session::new_meta(target, facts);
    let mut records = Vec::with_capacity(loops.len());
    for (rec, times) in loops {
        meta.add_thread_times(times);
        records.push(rec);
    }
    if records.len() < threads as usize {
        meta.cut("an event loop thread could not start or panicked");
    }
    let elapsed_s = t_end.saturating_sub(t0) as f64 / 1e9;
    let mut result = assemble(
        cfg,
        meta,
        records,
        elapsed_s,
        time_wait,
        syn0.zip(syn1).map(|(a, b)| b.saturating_sub(a)),
    );
    if let Some(why) = result.error_examples.get("loop").cloned() {
        result.meta.cut(why);
    }
    Ok(result)
}

/// The Host header for a target without a name: `ADDR:PORT` (brackets for IPv6).
fn host_header(target: SocketAddr) -> String {
    target.to_string()
}

fn reporter<'a>(
    plan: &'a Plan<'a>,
    time_wait: &'a AtomicU64,
    syn0: Option<u64>,
    cb: &'a (dyn Fn(&HttpInterval) + Sync),
) -> impl FnMut(Span) + Send + 'a {
    let (mut last_done, mut last_failed, mut last_syn) = (0u64, 0u64, syn0);
    move |span: Span| {
        let done = plan.completed.load(Ordering::Relaxed);
        let failed = plan.failed.load(Ordering::Relaxed);
        let syn = sysinfo::netstat_counter("TcpExt", "TCPSynRetrans");
        let n = done.saturating_sub(last_done);
        cb(&HttpInterval {
            index: span.index,
            start_s: span.start_s,
            end_s: span.end_s,
            ops: n,
            ops_per_s: span.rate(n),
            errors: failed.saturating_sub(last_failed),
            time_wait: time_wait.load(Ordering::Relaxed),
            kernel_syn_retrans: syn.zip(last_syn).map(|(a, b)| a.saturating_sub(b)),
        });
        (last_done, last_failed, last_syn) = (done, failed, syn);
    }
}
