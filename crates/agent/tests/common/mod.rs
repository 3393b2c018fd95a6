//! Test support: a tcplab server on loopback, stopped and joined by Drop even when a test fails,
//! and the result schema. Also used by crates/cli's workload tests (paths work from both crates).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use tcplab_agent::Server;

/// A running loopback server; dropping it stops it.
pub struct LoopServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LoopServer {
    pub fn start() -> Self {
        let server = Server::bind("127.0.0.1:0".parse().expect("addr")).expect("bind loopback");
        let addr = server.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let _ = server.serve(&s2, None);
        });
        Self {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for LoopServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where the kernel counts it (schedstat), each side's CPU wait is reported, and no thread can
/// have waited longer than the run (plus the server's set-up) lasted.
pub fn assert_cpu_waits(meta: &tcplab_load::session::RunMeta, wall_s: f64, threads: f64) {
    if !std::path::Path::new("/proc/thread-self/schedstat").exists() {
        return;
    }
    for (side, w) in [
        ("client", meta.client_cpu_wait_s),
        ("server", meta.server_cpu_wait_s),
    ] {
        let w = w.unwrap_or_else(|| panic!("{side} CPU wait not reported"));
        assert!(
            (0.0..=(wall_s + 1.0) * threads).contains(&w),
            "{side} CPU wait {w} s in a {wall_s} s run of {threads} threads"
        );
    }
}

/// Validates `doc` against crates/load/schema/result.schema.json.
pub fn validate_schema(doc: &serde_json::Value) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../load/schema/result.schema.json"
    ))
    .expect("schema file");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "schema violations: {errors:#?}");
}
