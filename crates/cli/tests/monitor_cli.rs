//! `tcplab monitor` end to end over three agents on loopback addresses (127.0.0.31-33, no lab
//! and no root needed): tests run and are recorded, `/metrics` answers a scrape with every pair,
//! and a monitor killed with SIGKILL and started again on the same database loses no recorded
//! run and counts none twice.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tcplab");

/// Agents started by this test, ended by PID when it ends (also when it fails).
struct Agents(Vec<Child>);

impl Drop for Agents {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn agents(dir: &std::path::Path) -> Agents {
    let mut hosts = String::new();
    let mut children = Vec::new();
    for (name, ip) in [
        ("a", "127.0.0.31"),
        ("b", "127.0.0.32"),
        ("c", "127.0.0.33"),
    ] {
        children.push(
            Command::new(BIN)
                .args(["serve", "--listen", &format!("{ip}:5301")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        hosts.push_str(&format!(
            "[[host]]\nname = \"{name}\"\naddress = \"{ip}\"\n"
        ));
    }
    std::fs::write(dir.join("hosts.toml"), hosts).unwrap();
    let key = Command::new(BIN)
        .args(["key", "gen", "--out"])
        .arg(dir.join("key"))
        .output()
        .unwrap();
    assert!(key.status.success(), "{key:?}");
    // Each agent is listening before the monitor starts.
    for ip in ["127.0.0.31", "127.0.0.32", "127.0.0.33"] {
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((ip, 5301)).is_err() {
            assert!(Instant::now() < until, "agent on {ip} did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Agents(children)
}

fn monitor(dir: &std::path::Path, metrics: &str, run_for: &str) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir).args([
        "monitor",
        "--hosts",
        "hosts.toml",
        "--key",
        "key",
        "--workload",
        "rr",
        "--every",
        "1s",
        "--duration",
        "0.2",
        "--db",
        "m.db",
        "--metrics",
        metrics,
        "--for",
        run_for,
    ]);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

fn scrape(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .ok()?;
    let mut page = String::new();
    s.read_to_string(&mut page).ok()?;
    Some(page)
}

/// (client, server, run index) of every run the monitor's database holds.
fn runs(dir: &std::path::Path) -> Vec<(String, String, u64)> {
    let conn = rusqlite::Connection::open(dir.join("m.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT src, dst, idx FROM monitor_run ORDER BY src, dst, idx")
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

#[test]
fn the_monitor_records_serves_metrics_and_survives_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let _agents = agents(dir.path());
    let metrics = "127.0.0.31:19464";

    // First life: scraped while it runs, then killed with SIGKILL.
    let mut first = monitor(dir.path(), metrics, "60s").spawn().unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let page = scrape(metrics).expect("the monitor serves /metrics");
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    assert!(page.ends_with("# EOF\n"), "{page}");
    let pairs = page
        .lines()
        .filter(|l| l.starts_with("tcplab_pair_latency_seconds{") && l.contains("0.99"))
        .count();
    assert_eq!(pairs, 6, "every ordered pair of three hosts: {page}");
    first.kill().unwrap();
    first.wait().unwrap();
    let before = runs(dir.path());
    assert!(before.len() >= 6, "{before:?}");

    // Second life on the same database: it resumes each pair's count.
    let second = monitor(dir.path(), metrics, "3s").output().unwrap();
    assert!(second.status.success(), "{second:?}");
    let after = runs(dir.path());
    assert!(after.len() > before.len(), "the second life ran tests");
    assert!(
        before.iter().all(|r| after.contains(r)),
        "a recorded run was lost"
    );
    // Per pair, run indices are 0..n with no gap and no repeat: none lost, none twice.
    let mut by_pair: std::collections::BTreeMap<(String, String), Vec<u64>> = Default::default();
    for (src, dst, idx) in after {
        by_pair.entry((src, dst)).or_default().push(idx);
    }
    for (pair, idx) in by_pair {
        let want: Vec<u64> = (0..idx.len() as u64).collect();
        assert_eq!(idx, want, "{pair:?}");
    }
}

/// Settings the monitor cannot use are refused before any agent is contacted, naming the flag
/// and the fix, with exit code 2 (bad usage).
#[test]
fn a_doctor_budget_too_short_or_an_https_webhook_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hosts.toml"),
        "[[host]]\nname = \"a\"\naddress = \"127.0.0.41\"\n[[host]]\nname = \"b\"\naddress = \"127.0.0.42\"\n",
    )
    .unwrap();
    for (flags, says) in [
        (["--doctor-budget", "5s"], "--doctor-budget"),
        (["--webhook", "https://hooks.example/x"], "https"),
    ] {
        let out = Command::new(BIN)
            .current_dir(dir.path())
            .args([
                "monitor",
                "--hosts",
                "hosts.toml",
                "--db",
                "m.db",
                "--for",
                "1s",
            ])
            .args(flags)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}
