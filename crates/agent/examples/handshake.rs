//! The cost of opening a test on an agent, for benches/agent.sh: per try, a bare TCP connect
//! (what an unauthenticated protocol pays before its first byte), the authenticated handshake
//! (connect + Noise XX, until the client holds the channel's keys) and a whole session open
//! (handshake + Hello + the agent's checks + Ready), and the handshake's cryptography alone
//! (both ends in this process). Prints each one's median and p90, µs; `--samples FILE` also
//! writes every try's figure there as JSON (`{"connect": [µs, ...], "handshake": ..., "session":
//! ..., "crypto": ...}`), for the benchmark's results file.
//!
//! `handshake --to ADDR:PORT [--tries 200] [--key FILE] [--server-key KEY|FILE] [--samples FILE]`

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use tcplab_results::spec::WorkloadSpec;

use tcplab_auth::args::ClientKeys;
use tcplab_auth::noise::Initiator;
use tcplab_load::proto::{self, Ctrl};
use tcplab_load::rr::RrConfig;
use tcplab_load::session::Session;

const USAGE: &str = "usage: handshake --to ADDR:PORT [--tries 200] [--key FILE] \
                     [--server-key KEY|FILE] [--insecure] [--samples FILE]";

struct Args {
    /// The agent.
    to: SocketAddr,
    /// Tries of each kind.
    tries: usize,
    /// This client's key and the server keys it believes.
    auth: ClientKeys,
    /// Where every try's figures are written as JSON.
    samples: Option<std::path::PathBuf>,
}

impl Args {
    /// The flags of this process (this crate parses no flags with clap; a bench tool's few are
    /// read by hand).
    fn parse() -> anyhow::Result<Self> {
        let mut to = None;
        let mut tries = 200;
        let mut auth = ClientKeys::default();
        let mut samples = None;
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| anyhow::anyhow!("{flag} needs a value\n{USAGE}"))
            };
            match flag.as_str() {
                "--to" => to = Some(value()?.parse()?),
                "--tries" => tries = value()?.parse()?,
                "--key" => auth.key = Some(value()?.into()),
                "--server-key" => auth.server_key = Some(value()?),
                "--insecure" => auth.insecure = true,
                "--samples" => samples = Some(value()?.into()),
                _ => anyhow::bail!("unknown flag {flag}\n{USAGE}"),
            }
        }
        let to = to.ok_or_else(|| anyhow::anyhow!("--to is required\n{USAGE}"))?;
        Ok(Self {
            to,
            tries,
            auth,
            samples,
        })
    }
}

fn micros(v: &[f64], what: &str) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    println!(
        "{what:<44} median {:>8.1} µs   p90 {:>8.1} µs   (n={})",
        at(0.5),
        at(0.9),
        v.len()
    );
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

fn main() -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let a = Args::parse()?;
    let auth = a.auth.credentials()?;
    let t = Duration::from_secs(5);
    let (mut connect, mut handshake, mut session) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..a.tries {
        // 1. A bare TCP connect.
        let t0 = Instant::now();
        let s = TcpStream::connect_timeout(&a.to, t)?;
        connect.push(t0.elapsed().as_secs_f64() * 1e6);
        drop(s);
        // 2. Connect + the handshake, by hand (the agent then waits for frame 3 and gives up).
        let t0 = Instant::now();
        let mut s = TcpStream::connect_timeout(&a.to, t)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(t))?;
        let (init, f1) = Initiator::start(auth.key(), proto::VERSION)?;
        s.write_all(&frame(&f1))?;
        let mut len = [0u8; 4];
        s.read_exact(&mut len)?;
        let mut f2 = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut f2)?;
        let seen = init.on_reply(&f2)?;
        auth.check_server(a.to, seen.server_key())?;
        let (f3, _keys) = seen.finish()?;
        s.write_all(&frame(&f3))?;
        handshake.push(t0.elapsed().as_secs_f64() * 1e6);
        drop(s);
        // 3. A whole session open, then the test is ended at once (not timed).
        let test = WorkloadSpec::Rr(RrConfig {
            count: Some(1),
            duration_ms: None,
            ..RrConfig::default()
        });
        let t0 = Instant::now();
        let mut sess = Session::open_with(a.to, test, t, &auth)?;
        session.push(t0.elapsed().as_secs_f64() * 1e6);
        let mut data = sess.connect_data(&Default::default())?;
        data.write_all(&[1])?;
        data.read_exact(&mut [0u8; 1])?;
        data.shutdown(std::net::Shutdown::Write)?;
        let _ = sess.report(t);
        let _ = sess.send(&Ctrl::Done);
    }
    // 4. The handshake's cryptography alone: both ends in this process, no network.
    let server = tcplab_auth::KeyPair::generate("bench")?;
    let mut crypto = Vec::new();
    for _ in 0..a.tries {
        use tcplab_auth::noise::{Intro, Responder, parse_intro};
        let t0 = Instant::now();
        let (init, f1) = Initiator::start(auth.key(), proto::VERSION)?;
        let Intro::Current(m1) = parse_intro(&f1, proto::VERSION) else {
            anyhow::bail!("intro")
        };
        let (resp, f2) = Responder::start(&server, m1)?;
        let (f3, _) = init.on_reply(&f2)?.finish()?;
        resp.finish(&f3)?;
        crypto.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    micros(&connect, "TCP connect (unauthenticated)");
    micros(&handshake, "connect + Noise XX handshake (authenticated)");
    micros(&session, "session open: handshake + Hello + Ready");
    micros(&crypto, "handshake cryptography alone, both ends");
    if let Some(path) = &a.samples {
        let round = |v: &[f64]| {
            v.iter()
                .map(|x| (x * 10.0).round() / 10.0)
                .collect::<Vec<_>>()
        };
        let doc = serde_json::json!({
            "connect": round(&connect),
            "handshake": round(&handshake),
            "session": round(&session),
            "crypto": round(&crypto),
        });
        std::fs::write(path, serde_json::to_string(&doc)?)?;
    }
    Ok(())
}
