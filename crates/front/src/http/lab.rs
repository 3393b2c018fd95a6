//! HTTP runs in a lab: the built-in file server (`tcplab_load::http::serve`) or nginx started
//! in the server host, the client (`tcplab_load::http::run`) in the client host, with the
//! server host's TIME_WAIT and kernel counters (ListenOverflows, SYN cookies) recorded beside
//! the client's, and an emulated lab's verdict on itself over the run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tcplab_lab::Lab;
use tcplab_load::clock::now_ns;
use tcplab_load::crr::sample_time_wait;
use tcplab_load::error::{LoadError, Result};
use tcplab_load::http::config::HttpConfig;
use tcplab_load::http::fileset::FileSet;
use tcplab_load::http::result::{HttpInterval, HttpResult};
use tcplab_load::http::run::run_client_live;
use tcplab_load::http::serve::{HttpLimits, HttpServer};
use tcplab_load::live::OnLive;
use tcplab_load::report::Report;
use tcplab_load::sysinfo;

use tcplab_results::http::config::{LabServer, ServerKind};

/// Port the lab's web server listens on in its host.
pub const LAB_PORT: u16 = 8080;

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
            tcplab_load::http::files::write_set(&set, &root.files())?;
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
