//! A real nginx in a lab host: the rendered config is exactly what we mean (pure), bad configs
//! are refused with the field named, and as root nginx serves exact bytes to the other host over
//! the lab's addresses, stops cleanly, and dies with its lab. Traffic only ever goes to lab
//! addresses (198.18.0.0/15).

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::{build, namespaces_of};
use tcplab_lab::nginx::{self, NginxConfig};
use tcplab_lab::state::ProcessId;
use tcplab_lab::{Lab, LabError, StateDir, Topology};

const GOLDEN: &str = "\
# Written by tcplab; rewritten on every start.
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 8256;
pid /srv/nginx-prefix/nginx.pid;
error_log stderr warn;
user root;

events {
    worker_connections 4096;
}

http {
    access_log off;
    log_not_found off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    client_body_temp_path /srv/nginx-prefix/tmp/client_body;
    proxy_temp_path /srv/nginx-prefix/tmp/proxy;
    fastcgi_temp_path /srv/nginx-prefix/tmp/fastcgi;
    uwsgi_temp_path /srv/nginx-prefix/tmp/uwsgi;
    scgi_temp_path /srv/nginx-prefix/tmp/scgi;
    types {
        text/html html htm;
        text/plain txt;
        text/css css;
        application/javascript js;
        application/json json;
        image/png png;
        image/jpeg jpg jpeg;
    }
    default_type application/octet-stream;

    server {
        listen 198.18.0.101:8080;
        root /srv/www;
    }
}
";

fn golden_config() -> NginxConfig {
    NginxConfig::new(
        "198.18.0.101:8080".parse().unwrap(),
        "/srv/www",
        "/srv/nginx-prefix",
    )
}

#[test]
fn render_matches_golden_text() {
    let cfg = golden_config();
    cfg.validate().unwrap();
    assert_eq!(cfg.render(), GOLDEN);
}

#[test]
fn render_brackets_ipv6_and_adds_backlog_and_reuseport() {
    let mut cfg = golden_config();
    cfg.listen = "[fd00::65]:8443".parse().unwrap();
    cfg.backlog = Some(4096);
    cfg.reuseport = true;
    cfg.workers = 2;
    cfg.validate().unwrap();
    let text = cfg.render();
    assert!(
        text.contains("\n        listen [fd00::65]:8443 backlog=4096 reuseport;\n"),
        "{text}"
    );
    assert!(text.contains("\nworker_processes 2;\n"), "{text}");
}

/// Asserts `cfg` is refused with `field` named and `hint` (part of the fix) in the message.
fn assert_invalid(cfg: &NginxConfig, field: &str, hint: &str) {
    match cfg.validate() {
        Err(e @ LabError::Invalid { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{field}: ")), "{msg}");
            assert!(msg.contains(hint), "{msg}");
        }
        other => panic!("expected {field} to be refused, got {other:?}"),
    }
}

#[test]
fn validation_names_the_field_and_the_fix() {
    let base = golden_config();
    let mut c = base.clone();
    c.listen = "198.18.0.101:0".parse().unwrap();
    assert_invalid(&c, "nginx.listen", "give a port");
    let mut c = base.clone();
    c.root = "www".into();
    assert_invalid(&c, "nginx.root", "absolute path");
    let mut c = base.clone();
    c.root = "/srv/my www".into();
    assert_invalid(&c, "nginx.root", "without whitespace");
    let mut c = base.clone();
    c.prefix = "/srv/$prefix".into();
    assert_invalid(&c, "nginx.prefix", "'$'");
    let mut c = base.clone();
    c.prefix = "/srv/prefix/".into();
    assert_invalid(&c, "nginx.prefix", "without the trailing slash");
    let mut c = base.clone();
    c.workers = 0;
    assert_invalid(&c, "nginx.workers", "give 1 to 1024");
    let mut c = base.clone();
    c.worker_connections = 8;
    assert_invalid(&c, "nginx.worker_connections", "give 16 to");
    let mut c = base.clone();
    c.backlog = Some(0);
    assert_invalid(&c, "nginx.backlog", "leave it unset");
    let mut c = base;
    c.keepalive_requests = 0;
    assert_invalid(&c, "nginx.keepalive_requests", "keepalive_timeout_s to 0");
}

/// 1000 bytes that are the same on every run and not all alike.
fn known_bytes() -> Vec<u8> {
    (0..1000u32)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 3)) as u8)
        .collect()
}

/// Sends a raw HTTP/1.1 GET over `stream` and returns the status code and the body.
fn http_get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status_line = head.lines().next().unwrap();
    let mut parts = status_line.split(' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{head}");
    let status: u16 = parts.next().unwrap().parse().unwrap();
    let body = response[split + 4..].to_vec();
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
    {
        assert_eq!(len.trim().parse::<usize>().unwrap(), body.len(), "{head}");
    }
    (status, body)
}

/// Live processes (not zombies) in process group `pgid`: nginx's master and workers.
fn live_group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        // After ")": state, ppid, pgrp.
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && !matches!(fields[0], "Z" | "X") {
            out.push(pid);
        }
    }
    out
}

/// The companions the registry records for `lab` with nginx's role.
fn nginx_companions(lab: &Lab) -> Vec<ProcessId> {
    lab.state()
        .read(lab.name())
        .unwrap()
        .map(|r| {
            r.companions
                .into_iter()
                .filter(|c| c.role == nginx::COMPANION_ROLE)
                .map(|c| c.process)
                .collect()
        })
        .unwrap_or_default()
}

/// Writes the document root with `file.bin` holding [`known_bytes`].
fn webroot(dir: &Path) {
    std::fs::write(dir.join("file.bin"), known_bytes()).unwrap();
}

fn server_listen(lab: &Lab) -> SocketAddr {
    let ip = lab.host("server").unwrap().ipv4().unwrap();
    assert!(
        ip.octets()[0] == 198 && (ip.octets()[1] & 0xfe) == 18,
        "{ip} is a lab address (198.18.0.0/15)"
    );
    SocketAddr::new(ip.into(), 8080)
}

#[test]
fn serves_exact_bytes_to_the_other_host_and_stops() {
    let state = tempfile::tempdir().unwrap();
    let www = tempfile::tempdir().unwrap();
    let prefix = tempfile::tempdir().unwrap();
    webroot(www.path());
    let lab = build(&state, "nginx_serve", Topology::Pair, 2);
    let listen = server_listen(&lab);
    let cfg = NginxConfig::new(listen, www.path(), prefix.path());
    let server = nginx::start(&lab, "server", &cfg).unwrap();
    let pid = server.pid();
    let master = ProcessId::of(pid).expect("nginx runs");
    assert_eq!(server.listen(), listen);
    assert_eq!(nginx_companions(&lab), [master], "recorded as a companion");
    assert!(
        live_group_members(pid).len() >= 2,
        "a master and a worker in their own group"
    );

    let client = lab.host("client").unwrap();
    let (found, missing) = client
        .run(move || (http_get(listen, "/file.bin"), http_get(listen, "/nope.bin")))
        .unwrap();
    assert_eq!(found.0, 200, "{}", String::from_utf8_lossy(&found.1));
    assert!(found.1 == known_bytes(), "the body is exactly the file");
    assert_eq!(missing.0, 404);

    server.stop().unwrap();
    assert!(!master.is_alive(), "the master is gone");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the master is reaped"
    );
    assert_eq!(live_group_members(pid), Vec::<u32>::new(), "no worker left");
    assert!(nginx_companions(&lab).is_empty(), "the record is removed");
    assert!(!prefix.path().join("nginx.pid").exists());
}

#[test]
fn lab_teardown_ends_a_running_nginx() {
    let state = tempfile::tempdir().unwrap();
    let www = tempfile::tempdir().unwrap();
    let prefix = tempfile::tempdir().unwrap();
    webroot(www.path());
    let lab = build(&state, "nginx_down", Topology::Pair, 2);
    let name = lab.name().to_string();
    let cfg = NginxConfig::new(server_listen(&lab), www.path(), prefix.path());
    let server = nginx::start(&lab, "server", &cfg).unwrap();
    let pid = server.pid();
    let master = ProcessId::of(pid).unwrap();
    assert!(server.is_running());

    lab.down().unwrap();
    assert!(!master.is_alive(), "teardown ended the master");
    assert_eq!(
        live_group_members(pid),
        Vec::<u32>::new(),
        "and its workers"
    );
    assert!(!server.is_running());
    assert!(namespaces_of(&name).is_empty());
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !listed.contains(&format!("tcplab-{name}-")),
        "ip netns list still shows the lab: {listed}"
    );
    assert!(StateDir::at(state.path()).read(&name).unwrap().is_none());

    // Stopping after the teardown only reaps.
    server.stop().unwrap();
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
}

#[test]
fn a_listen_address_the_host_lacks_is_refused_by_nginx_t() {
    let state = tempfile::tempdir().unwrap();
    let www = tempfile::tempdir().unwrap();
    let prefix = tempfile::tempdir().unwrap();
    let lab = build(&state, "nginx_bad", Topology::Pair, 2);
    // The client's address is not configured on the server host: bind() fails.
    let client_ip = lab.host("client").unwrap().ipv4().unwrap();
    let cfg = NginxConfig::new(
        SocketAddr::new(client_ip.into(), 8080),
        www.path(),
        prefix.path(),
    );
    let err = nginx::start(&lab, "server", &cfg).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("nginx in host server: "), "{msg}");
    // `nginx -t` binds the listen sockets itself, so it is what refuses the address.
    assert!(msg.contains("`nginx -t` rejected"), "{msg}");
    assert!(
        msg.contains("bind() to 198.18.0.1:8080 failed"),
        "nginx's words: {msg}"
    );
    assert!(nginx_companions(&lab).is_empty(), "nothing left recorded");
}
