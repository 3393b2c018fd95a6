//! The workload commands (`stream`, `msgs`, `rr`, `crr`, `rrul`, `serve`, `serve --http`), parsed
//! by tcplab's flags and run in-process against loopback servers: JSON validated against the
//! schema, NDJSON, samples files, errors and exit codes.

#[path = "../../agent/tests/common/mod.rs"]
mod common_load;

use std::process::ExitCode;

use clap::Parser;
use common_load::{LoopServer, validate_schema};
use tcplab::workload_args::{CrrArgs, MsgsArgs, RrArgs, RrulArgs, StreamArgs};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    Stream(StreamArgs),
    Msgs(MsgsArgs),
    Rr(RrArgs),
    Crr(CrrArgs),
    Rrul(RrulArgs),
}

/// Runs `tcplab <args>` in-process; returns (exit code, stdout).
fn run(args: &[&str]) -> (ExitCode, String) {
    let cli = Cli::try_parse_from(std::iter::once("tcplab").chain(args.iter().copied()))
        .expect("arguments parse");
    let mut out = Vec::new();
    let code = match &cli.cmd {
        Cmd::Stream(a) => a.run_with(&mut out),
        Cmd::Msgs(a) => a.run_with(&mut out),
        Cmd::Rr(a) => a.run_with(&mut out),
        Cmd::Crr(a) => a.run_with(&mut out),
        Cmd::Rrul(a) => a.run_with(&mut out),
    };
    (code, String::from_utf8(out).expect("utf-8 output"))
}

fn json(args: &[&str]) -> (ExitCode, serde_json::Value) {
    let (code, out) = run(args);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON document ({e}): {out}"));
    validate_schema(&v);
    (code, v)
}

#[test]
fn every_workload_prints_schema_valid_json() {
    let srv = LoopServer::start();
    let to = srv.addr.to_string();
    let (code, v) = json(&[
        "msgs",
        "--to",
        &to,
        "--json",
        "--count",
        "2000",
        "--nodelay",
        "--link-rate",
        "100M",
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(v["workload"], "msgs");
    assert!(v["summary"]["total_s"].as_f64().expect("total_s") > 0.0);
    for k in ["mean", "sd", "min", "max"] {
        assert!(
            v["summary"]["per_message_us"][k].is_number(),
            "per_message_us.{k}"
        );
    }
    assert_eq!(v["options"]["nodelay"], true);

    let (code, v) = json(&[
        "rr",
        "--to",
        &to,
        "--json",
        "--count",
        "500",
        "--nodelay",
        "--req",
        "64",
        "--resp",
        "64",
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(v["summary"]["transactions"], 500);
    for k in ["p50", "p99", "p999", "max"] {
        assert!(v["summary"]["latency_us"][k].as_f64().expect(k) > 0.0);
    }
    assert!(v["summary"]["transactions_per_s"].as_f64().expect("tps") > 0.0);

    let (code, v) = json(&["crr", "--to", &to, "--json", "--count", "100", "-C", "2"]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(v["summary"]["transactions"], 100);
    assert!(v["summary"]["connections_per_s"].as_f64().expect("cps") > 0.0);
    for k in ["p50", "p99", "max"] {
        assert!(v["summary"]["connect_us"][k].as_f64().expect(k) > 0.0);
    }

    let (code, v) = json(&[
        "stream", "--to", &to, "--json", "-t", "0.3", "-i", "0.1", "--cc", "cubic",
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(v["summary"]["throughput_bps"].as_f64().expect("bps") > 1e8);
    assert_eq!(v["options"]["congestion"], "cubic");
    assert_eq!(v["server_options"]["congestion"], "cubic");
}

#[test]
fn ndjson_streams_intervals_then_the_result() {
    let srv = LoopServer::start();
    let (code, out) = run(&[
        "stream",
        "--to",
        &srv.addr.to_string(),
        "--ndjson",
        "-t",
        "0.35",
        "-i",
        "0.1",
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert!(lines.len() >= 4, "{} lines", lines.len());
    let (last, intervals) = lines.split_last().expect("lines");
    assert!(intervals.iter().all(|l| l["type"] == "interval"));
    assert_eq!(intervals[0]["interval"]["index"], 0);
    assert_eq!(last["type"], "result");
    validate_schema(last);
}

/// A writer that notes when each line arrived, to tell streamed lines from a dump at the end.
struct Stamped {
    t0: std::time::Instant,
    buf: Vec<u8>,
    at: Vec<f64>,
}

impl std::io::Write for Stamped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let lines = b.iter().filter(|&&c| c == b'\n').count();
        let t = self.t0.elapsed().as_secs_f64();
        self.at.extend(std::iter::repeat_n(t, lines));
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `tcplab <args>` in-process; returns every stdout line (parsed) with its arrival time, s.
fn run_stamped(args: &[&str]) -> (ExitCode, Vec<(f64, serde_json::Value)>) {
    let cli = Cli::try_parse_from(std::iter::once("tcplab").chain(args.iter().copied()))
        .expect("arguments parse");
    let mut out = Stamped {
        t0: std::time::Instant::now(),
        buf: Vec::new(),
        at: Vec::new(),
    };
    let code = match &cli.cmd {
        Cmd::Stream(a) => a.run_with(&mut out),
        Cmd::Msgs(a) => a.run_with(&mut out),
        Cmd::Rr(a) => a.run_with(&mut out),
        Cmd::Crr(a) => a.run_with(&mut out),
        Cmd::Rrul(a) => a.run_with(&mut out),
    };
    let text = String::from_utf8(out.buf).expect("utf-8");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), out.at.len());
    (code, out.at.into_iter().zip(lines).collect())
}

/// msgs, rr and crr stream one line per interval while they run (the first well before the
/// result), and the intervals add up to the result's totals.
#[test]
fn ndjson_is_live_for_msgs_rr_and_crr() {
    let srv = LoopServer::start();
    let to = srv.addr.to_string();
    // (arguments, interval field that counts, result field with the total)
    let cases: [(&[&str], &str, &str); 3] = [
        (
            &["msgs", "--count", "4000", "--gap-us", "100", "--nodelay"],
            "messages",
            "/runs/0/sent",
        ),
        (
            &["rr", "-t", "0.45", "--nodelay"],
            "transactions",
            "/summary/transactions",
        ),
        (
            &["crr", "-t", "0.45"],
            "connections",
            "/summary/transactions",
        ),
    ];
    for (args, field, total) in cases {
        let mut full = vec![args[0], "--to", &to, "--ndjson", "-i", "0.1"];
        full.extend_from_slice(&args[1..]);
        let (code, lines) = run_stamped(&full);
        assert_eq!(code, ExitCode::SUCCESS, "{args:?}");
        let ((t_result, result), rest) = lines.split_last().expect("lines");
        assert_eq!(result["type"], "result", "{args:?}");
        // Interval lines first, then the msgs run / rr point lines, then the result.
        let n_live = rest
            .iter()
            .take_while(|(_, l)| l["type"] == "interval")
            .count();
        let (intervals, after) = rest.split_at(n_live);
        assert!(
            after
                .iter()
                .all(|(_, l)| l["type"] == "run" || l["type"] == "point"),
            "{args:?}"
        );
        validate_schema(result);
        assert!(
            (4..=8).contains(&intervals.len()),
            "{args:?}: ~0.4-0.45 s at 0.1 s is 4 full intervals and a partial one (more when a \
             loaded machine stretches the run), got {}: {intervals:?}",
            intervals.len()
        );
        let mut sum = 0;
        for (k, (_, l)) in intervals.iter().enumerate() {
            assert_eq!(l["type"], "interval", "{args:?}");
            let iv = &l["interval"];
            assert_eq!(iv["index"], k as u64, "{args:?}");
            assert!(iv["end_s"].as_f64() > iv["start_s"].as_f64(), "{iv}");
            sum += iv[field].as_u64().expect(field);
        }
        let want = result.pointer(total).and_then(|v| v.as_u64()).expect(total);
        assert_eq!(sum, want, "{args:?}: intervals add up to the result");
        let first_at = intervals[0].0;
        assert!(
            t_result - first_at > 0.2,
            "{args:?}: first interval line at {first_at:.3} s, result at {t_result:.3} s: not streamed"
        );
    }
}

#[test]
fn ndjson_gives_one_line_per_sweep_point() {
    let srv = LoopServer::start();
    let (code, out) = run(&[
        "rr",
        "--to",
        &srv.addr.to_string(),
        "--ndjson",
        "--count",
        "50",
        "--sizes",
        "16",
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["type"].as_str().expect("type"))
        .collect();
    assert_eq!(kinds, ["point", "point", "point", "result"]);
    let reqs: Vec<u64> = lines[..3]
        .iter()
        .map(|l| l["point"]["req"].as_u64().expect("req"))
        .collect();
    assert_eq!(reqs, [13, 16, 19]);
}

#[test]
fn samples_file_reads_back() {
    let srv = LoopServer::start();
    let dir = std::env::temp_dir().join(format!("tcplab-load-samples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("msgs.csv");
    let p = path.to_str().expect("utf-8 path");
    let (code, _) = run(&[
        "msgs",
        "--to",
        &srv.addr.to_string(),
        "--count",
        "300",
        "--sizes",
        "1,8",
        "--nodelay",
        "--samples",
        p,
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    let text = std::fs::read_to_string(&path).expect("samples written");
    let _ = std::fs::remove_dir_all(&dir);
    let (workload, sections) = tcplab_load::samples::parse(&text).expect("parses");
    assert_eq!(workload, "msgs");
    assert_eq!(sections.len(), 2);
    assert_eq!(sections[1].attrs["size"], "8");
    assert_eq!(sections[0].columns, ["seq", "send_ns", "recv_ns"]);
    assert_eq!(sections[0].rows.len(), 300);
    assert!(
        sections[0]
            .rows
            .iter()
            .all(|r| r[2].expect("recv") >= r[1].expect("send"))
    );
}

#[test]
fn bad_input_gives_one_line_errors_and_exit_codes() {
    let (code, v) = json(&["msgs", "--to", "127.0.0.1:9", "--json", "--size", "0"]);
    assert_eq!(code, ExitCode::from(2));
    assert_eq!(v["error"]["kind"], "usage");
    assert_eq!(
        v["error"]["message"],
        "invalid --size: 0 bytes is outside 1..=16777216"
    );

    let (code, v) = json(&["rr", "--to", "127.0.0.1:9", "--json", "--duration", "0"]);
    assert_eq!(code, ExitCode::from(2));
    assert_eq!(
        v["error"]["message"],
        "invalid --duration: must be above 0 s"
    );

    let (code, v) = json(&["stream", "--to", "127.0.0.1:9", "--json", "--flows", "1000"]);
    assert_eq!(code, ExitCode::from(2));
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("msg")
            .starts_with("invalid --flows")
    );

    // Nothing listens on a port we just closed: unreachable, a run error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let (code, v) = json(&["crr", "--to", &closed.to_string(), "--json", "--count", "5"]);
    assert_eq!(code, ExitCode::from(1));
    let msg = v["error"]["message"].as_str().expect("msg");
    assert!(
        msg.starts_with("cannot reach the tcplab server at"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));

    // The server refuses a congestion control the kernel lacks, naming the flag: the user's
    // flag to fix (the refusal's cause is `invalid`), so exit code 2.
    let srv = LoopServer::start();
    let (code, v) = json(&[
        "rr",
        "--to",
        &srv.addr.to_string(),
        "--json",
        "--count",
        "5",
        "--cc",
        "nosuchcc",
    ]);
    assert_eq!(code, ExitCode::from(2));
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("--cc"),
        "{v}"
    );
}

#[test]
fn terminal_summaries_are_readable() {
    let srv = LoopServer::start();
    let to = srv.addr.to_string();
    let (code, out) = run(&["stream", "--to", &to, "-t", "0.3", "-i", "0.1"]);
    eprintln!("{out}");
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(out.starts_with(&format!("stream to {to}\n")), "{out}");
    assert!(out.contains("[  0.00-  0.10 s] sent "), "{out}");
    assert!(out.contains("  throughput    "), "{out}");

    let (_, out) = run(&[
        "msgs",
        "--to",
        &to,
        "--count",
        "1000",
        "--nodelay",
        "--link-rate",
        "100M",
    ]);
    eprintln!("{out}");
    assert!(
        out.contains("size 1 B x 1000: 1000 sent, 1000 received"),
        "{out}"
    );
    assert!(out.contains("line rate     7.280 µs/message"), "{out}");

    let (_, out) = run(&["rr", "--to", &to, "--count", "300", "--nodelay"]);
    eprintln!("{out}");
    assert!(
        out.contains("mode          closed  transactions 300"),
        "{out}"
    );
    if std::path::Path::new("/proc/thread-self/schedstat").exists() {
        assert!(out.contains("  cpu wait      client "), "{out}");
    }

    let (_, out) = run(&["crr", "--to", &to, "--count", "50"]);
    eprintln!("{out}");
    assert!(out.contains("connections   50 in"), "{out}");
    assert!(!out.contains("NaN"));
}

#[test]
fn serve_runs_tests_and_refuses_a_busy_port() {
    use tcplab_front::ServeOptions;
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    // As root the server also runs at SCHED_FIFO 3 (`--rt-priority`), on its own thread.
    let root = rustix::process::geteuid().is_root();
    let serve = ServeOptions {
        listen: free,
        max_tests: Some(1),
        rt_priority: root.then_some(3),
        agent: Default::default(),
        http: Default::default(),
    };
    std::thread::scope(|s| {
        let h = s.spawn(|| serve.run().expect("serve"));
        // Retry until the server thread is listening.
        let mut outcome = None;
        for _ in 0..100 {
            let (code, out) = run(&["msgs", "--to", &free.to_string(), "--count", "10", "--json"]);
            if code == ExitCode::SUCCESS {
                outcome = Some(out);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(outcome.is_some(), "msgs against `tcplab serve` succeeded");
        assert_eq!(
            h.join().expect("serve thread"),
            ExitCode::SUCCESS,
            "serve exits after --max-tests 1"
        );
    });
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let serve = ServeOptions {
        listen: busy.local_addr().expect("addr"),
        max_tests: Some(1),
        rt_priority: None,
        agent: Default::default(),
        http: Default::default(),
    };
    assert_eq!(serve.run().expect("run"), ExitCode::from(2));
}

#[test]
fn json_reads_back_into_a_report() {
    let srv = LoopServer::start();
    let to = srv.addr.to_string();
    for args in [
        vec!["msgs", "--count", "100"],
        vec!["rr", "--count", "100"],
        vec!["crr", "--count", "20"],
        vec!["stream", "-t", "0.2", "-i", "0.1"],
    ] {
        let mut full = args.clone();
        full.extend(["--to", &to, "--json"]);
        let (_, out) = run(&full);
        let report: tcplab_load::Report =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(report.meta().complete);
        assert_eq!(
            serde_json::to_value(&report).expect("json"),
            serde_json::from_str::<serde_json::Value>(&out).expect("json")
        );
    }
}

/// `--rt-priority`: recorded in the facts, applied only for the run (the calling thread gets
/// its policy back), refused with exit 2 where it cannot be had.
#[test]
fn a_real_time_priority_is_recorded_and_given_back() {
    let srv = LoopServer::start();
    let to = srv.addr.to_string();
    let before = tcplab_load::sched::current();
    let args = [
        "rr",
        "--to",
        &to,
        "--json",
        "--count",
        "200",
        "--rt-priority",
        "5",
    ];
    if !rustix::process::geteuid().is_root() {
        let (code, out) = run(&args);
        assert_eq!(code, ExitCode::from(2), "{out}");
        assert!(out.contains("rt-priority"), "{out}");
        return;
    }
    let (code, v) = json(&args);
    assert_eq!(code, ExitCode::SUCCESS, "{v}");
    assert_eq!(
        v["facts"]["sched"],
        serde_json::json!({"policy": "fifo", "priority": 5})
    );
    assert_eq!(
        tcplab_load::sched::current(),
        before,
        "the policy is given back"
    );
    let (code, v) = json(&["rr", "--to", &to, "--json", "--count", "50"]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(
        v["facts"].get("sched").is_none(),
        "not recorded unless asked for"
    );
}

/// `tcplab rrul --ndjson`: one line per phase, then the result, whose config is the flags'.
#[test]
fn rrul_prints_phases_as_ndjson_then_the_result() {
    let srv = LoopServer::start();
    let to = srv.addr.to_string();
    let (code, out) = run(&[
        "rrul",
        "--to",
        &to,
        "--dir",
        "up",
        "--before",
        "300ms",
        "--during",
        "0.5",
        "--after",
        "300ms",
        "--drain",
        "200ms",
        "--spacing",
        "10ms",
        "--interval",
        "0.25",
        "--req",
        "32",
        "--resp",
        "100",
        "--ndjson",
    ]);
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    assert_eq!(types, ["phase", "phase", "phase", "result"]);
    let names: Vec<&str> = lines[..3]
        .iter()
        .filter_map(|l| l["phase"]["name"].as_str())
        .collect();
    assert_eq!(names, ["before", "during", "after"]);
    let result = &lines[3];
    validate_schema(result);
    assert_eq!(result["config"]["direction"], "up");
    assert_eq!(result["config"]["req"], 32);
    assert_eq!(result["config"]["resp"], 100);
    assert!(result["summary"]["down_bps"].is_null(), "up only");
    assert_eq!(result["probes"]["config"]["socket"]["nodelay"], true);
}

/// An rrul phase too short to hold its probes is a usage error (exit code 2).
#[test]
fn a_bad_rrul_phase_length_is_a_usage_error() {
    let srv = LoopServer::start();
    let (code, _) = run(&[
        "rrul",
        "--to",
        &srv.addr.to_string(),
        "--before",
        "50ms",
        "--json",
    ]);
    assert_eq!(
        code,
        ExitCode::from(2),
        "a bad phase length is a usage error"
    );
}

/// `tcplab serve --http PORT`: the file server runs beside the agent and stops with it;
/// `--http-dirs` needs `--http`; a file set over 1 GiB is refused at once (exit code 2).
#[test]
fn serve_runs_http_beside_the_agent_and_stops_with_it() {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::{Duration, Instant};

    use tcplab::workload_args::ServeArgs;
    use tcplab_load::http::fileset::FileId;
    use tcplab_load::http::serve::HttpServeOptions;

    /// Longest any single wait of the test.
    const WAIT: Duration = Duration::from_secs(20);

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// One GET on a fresh connection: the status and the body.
    fn get(s: &mut TcpStream, path: &str) -> (u16, Vec<u8>) {
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .expect("send");
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = s.read(&mut chunk).expect("read");
            assert!(n > 0, "EOF before the response's head");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status");
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .expect("Content-Length");
        let mut body = buf.split_off(head_end);
        while body.len() < len {
            let n = s.read(&mut chunk).expect("read");
            assert!(n > 0, "EOF before the body's end");
            body.extend_from_slice(&chunk[..n]);
        }
        body.truncate(len);
        (status, body)
    }

    // Two free ports (both held while the second is chosen, so they differ).
    let free = || std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let (a, h) = (free(), free());
    let port = |l: &std::net::TcpListener| l.local_addr().expect("addr").port();
    let (agent_port, http_port) = (port(&a), port(&h));
    drop((a, h));
    let listen = format!("127.0.0.1:{agent_port}");
    let http = http_port.to_string();
    let argv = [
        "serve",
        "--listen",
        &listen,
        "--max-tests",
        "1",
        "--http",
        &http,
    ];
    let cmd = Cmd::try_parse_from(argv.iter().chain(&["--http-dirs", "1"])).expect("flags");
    assert_eq!(cmd.serve.http.port, Some(http_port));
    assert_eq!(cmd.serve.http.http_dirs, 1);
    assert!(
        Cmd::try_parse_from(["serve", "--http-dirs", "2"]).is_err(),
        "needs --http"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let serve = cmd.serve.clone();
    std::thread::spawn(move || {
        let _ = tx.send(serve.run().expect("run"));
    });
    let addr = SocketAddr::from(([127, 0, 0, 1], http_port));
    let end = Instant::now() + WAIT;
    let path = FileId::new(0, 3, 1).expect("file").path();
    let r = loop {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            s.set_read_timeout(Some(WAIT)).expect("timeout");
            break get(&mut s, &path);
        }
        assert!(Instant::now() < end, "serve --http never listened");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!((r.0, r.1.len()), (200, 102_400));
    // One connection to the agent is its --max-tests 1; the HTTP server stops with it.
    drop(TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], agent_port))).expect("agent"));
    let code = rx.recv_timeout(WAIT).expect("serve returned");
    assert_eq!(code, ExitCode::SUCCESS);
    // A set over 1 GiB is refused at once, naming the flag (exit code 2).
    let mut big = cmd.serve.options();
    big.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    big.http = HttpServeOptions {
        port: Some(0),
        http_dirs: 500,
        ..HttpServeOptions::default()
    };
    assert_eq!(big.run().expect("run"), ExitCode::from(2));
}
