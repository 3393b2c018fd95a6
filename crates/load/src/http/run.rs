//! Running HTTP load: against any server (`--to`), or inside a lab (`--lab`) against the
//! built-in file server or nginx started in the server host, with the server host's TIME_WAIT
//! and kernel counters (ListenOverflows, SYN cookies) recorded beside the client's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tcplab_results::facts::Facts;

use tcplab_lab::Lab;

use super::client::{MAX_SAMPLES, Plan, run_loop};
use super::config::HttpConfig;
use super::fileset::FileSet;
use super::result::{HttpInterval, HttpResult, assemble};
use super::serve::{HttpLimits, HttpServer};
use crate::clock::now_ns;
use crate::crr::sample_time_wait;
use crate::error::{LoadError, Result};
use crate::live::{OnLive, Span, with_reporter};
use crate::report::Report;
use crate::session::FoldIn;
use crate::sysinfo;

pub use tcplab_results::http::config::{LabServer, ServerKind};

/// Port the lab's web server listens on in its host.
pub const LAB_PORT: u16 = 8080;

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

fn lab_err(e: tcplab_lab::LabError) -> LoadError {
    LoadError::Lab(e.to_string())
}

/// Runs `cfg` in lab `lab`: `server` started in `server_host`, the client in `client_host`.
pub fn run_in_lab(
    lab: &Lab,
    client_host: &str,
    server_host: &str,
    server: &LabServer,
    cfg: &HttpConfig,
    interval_ms: u64,
    on_interval: OnLive<'_, HttpInterval>,
) -> Result<Report> {
    let chost = lab.host(client_host).map_err(lab_err)?;
    let shost = lab.host(server_host).map_err(lab_err)?;
    let ip = crate::lab::host_ip(shost, server_host)?;
    let set = FileSet::new(server.dirs).map_err(|e| LoadError::config("dirs", e))?;
    let facts = Some(tcplab_lab::facts::collect(lab).map_err(lab_err)?);
    let emulator_before = lab.emulator_status().ok();
    let listen = SocketAddr::new(ip, LAB_PORT);
    let stop = AtomicBool::new(false);
    let counters0 = shost.run(sysinfo::all_counters).map_err(lab_err)?;
    // The built-in server runs on a thread of this run; nginx as a process of the lab's.
    let (builtin, nginx, _files) = match server.kind {
        ServerKind::Builtin => {
            let http = shost
                .run(|| HttpServer::bind(listen, set, cfg.opts.clone(), HttpLimits::default()))
                .map_err(lab_err)??;
            (Some(http), None, None)
        }
        ServerKind::Nginx => {
            let root = NginxDir::new(lab.name())?;
            super::files::write_set(&set, &root.files())?;
            let mut ncfg = tcplab_lab::nginx::NginxConfig::new(listen, root.files(), root.prefix());
            ncfg.workers = server.workers.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
            });
            ncfg.worker_connections = (cfg.connections + 1024).max(4096);
            let nginx = tcplab_lab::nginx::start(lab, server_host, &ncfg).map_err(lab_err)?;
            (None, Some(nginx), Some(root))
        }
    };
    let run = std::thread::scope(|s| -> Result<HttpResult> {
        let serving = builtin
            .as_ref()
            .map(|http| shost.spawn_scoped(s, "tcplab-http-serve", || http.serve(&stop)))
            .transpose()
            .map_err(lab_err)?;
        let watcher = shost
            .spawn_scoped(s, "tcplab-http-tw", || {
                sample_time_wait(&stop, cfg.sample_ms, now_ns(), &AtomicU64::new(0))
            })
            .map_err(lab_err)?;
        let run = chost
            .run(|| run_client_live(cfg, listen, facts, interval_ms, on_interval))
            .map_err(lab_err);
        stop.store(true, Ordering::Release);
        let served = serving.is_none_or(|h| matches!(h.join(), Ok(Ok(()))));
        let tw = watcher.join().ok();
        let mut r = run??;
        if !served {
            r.meta.cut("the built-in HTTP server failed");
        }
        r.server_time_wait = tw;
        Ok(r)
    });
    let stopped = nginx.map(|n| n.stop().map_err(lab_err));
    let mut result = run?;
    if let Some(Err(e)) = stopped {
        result.meta.cut(format!("stopping nginx: {e}"));
    }
    let counters1 = shost.run(sysinfo::all_counters).map_err(lab_err)?;
    result.server_counters = counters1
        .iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(counters0.get(k).copied().unwrap_or(0));
            (d > 0).then(|| (k.clone(), d))
        })
        .collect();
    result.server = server.kind.name().into();
    let mut report = Report::Http(result);
    if let Some(before) = emulator_before {
        crate::lab::attach_emulator(lab, &before, &mut report);
    }
    Ok(report)
}

/// A directory for nginx's prefix and the file set, removed when the run ends.
#[derive(Debug)]
struct NginxDir(PathBuf);

impl NginxDir {
    fn new(lab: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "tcplab-nginx-{lab}-{}-{}",
            std::process::id(),
            now_ns()
        ));
        std::fs::create_dir_all(dir.join("files")).map_err(|e| {
            LoadError::Lab(format!("creating {}: {e}", dir.join("files").display()))
        })?;
        Ok(Self(dir))
    }

    fn files(&self) -> PathBuf {
        self.0.join("files")
    }

    fn prefix(&self) -> PathBuf {
        self.0.join("prefix")
    }
}

impl Drop for NginxDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
