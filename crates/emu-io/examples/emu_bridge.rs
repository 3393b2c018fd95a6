//! Runs the emulator bridge (tcplab_emu's model) between two interfaces of the current
//! namespace for a fixed time, then prints the report and verdict as JSON (for emu-io-bench.md).
//!
//! `emu_bridge IFACE_A IFACE_B [--delay 10ms] [--jitter ..] [--loss 1%] [--rate 1gbit]
//!  [--queue 1000] [--seed N] [--seconds S] [--threads single|per] [--rx v2|v3|xdp] [--busy]
//!  [--spin-ns N] [--rt PRIO|--no-rt] [--no-ring-ts] [--batch N] [--cpus 0,1]
//!  [--ring-frames N] [--tx ring|sendmmsg|xsk] [--gso]`
//! (impairment values as `tcplab emu` takes them, "A/B" for per-direction.)

use std::time::{Duration, Instant};

use tcplab_emu::ImpairmentFlags;
use tcplab_emu_io::{EmuBridge, IoOptions, RxRingKind, Threads, Thresholds, TxKind};

fn value<T: std::str::FromStr>(args: &mut impl Iterator<Item = String>, flag: &str) -> T {
    let v = args
        .next()
        .unwrap_or_else(|| fail(&format!("{flag} needs a value")));
    v.parse()
        .unwrap_or_else(|_| fail(&format!("{flag} {v}: not a valid value")))
}

fn fail(msg: &str) -> ! {
    eprintln!("emu_bridge: {msg}");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (a, b) = match (args.next(), args.next()) {
        (Some(a), Some(b)) => (a, b),
        _ => fail("usage: emu_bridge IFACE_A IFACE_B [options]"),
    };
    let (mut flags, mut seconds, mut opts) =
        (ImpairmentFlags::default(), 10.0_f64, IoOptions::default());
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--delay" => flags.delay = Some(value(&mut args, &flag)),
            "--jitter" => flags.jitter = Some(value(&mut args, &flag)),
            "--loss" => flags.loss = Some(value(&mut args, &flag)),
            "--rate" => flags.rate = Some(value(&mut args, &flag)),
            "--queue" => flags.queue = Some(value(&mut args, &flag)),
            "--seed" => flags.seed = Some(value(&mut args, &flag)),
            "--seconds" => seconds = value(&mut args, &flag),
            "--threads" => {
                opts.threads = match value::<String>(&mut args, &flag).as_str() {
                    "single" => Threads::Single,
                    "per" => Threads::PerDirection,
                    other => fail(&format!("--threads {other}: use single or per")),
                }
            }
            "--rx" => {
                opts.rings.rx = match value::<String>(&mut args, &flag).as_str() {
                    "v2" => RxRingKind::V2,
                    "v3" => RxRingKind::V3,
                    "xdp" => RxRingKind::Xdp,
                    other => fail(&format!("--rx {other}: use v2, v3 or xdp")),
                }
            }
            "--busy" => {
                opts.busy_poll = true;
                opts.rt_priority = None;
            }
            "--spin-ns" => opts.tuning.spin_ns = value(&mut args, &flag),
            "--rt" => opts.rt_priority = Some(value(&mut args, &flag)),
            "--no-rt" => opts.rt_priority = None,
            "--no-ring-ts" => opts.tuning.ring_timestamps = false,
            "--batch" => opts.tuning.batch = value(&mut args, &flag),
            "--ring-frames" => opts.rings.frames = value(&mut args, &flag),
            "--tx" => {
                opts.rings.tx = match value::<String>(&mut args, &flag).as_str() {
                    "ring" => TxKind::Ring,
                    "sendmmsg" => TxKind::Sendmmsg,
                    "xsk" => TxKind::Xsk,
                    other => fail(&format!("--tx {other}: use ring, sendmmsg or xsk")),
                }
            }
            "--gso" => opts.vnet = tcplab_emu_io::Vnet::Gso,
            "--cpus" => {
                opts.cpus = value::<String>(&mut args, &flag)
                    .split(',')
                    .map(|c| {
                        c.parse()
                            .unwrap_or_else(|_| fail(&format!("--cpus {c}: not a CPU number")))
                    })
                    .collect()
            }
            other => fail(&format!("unknown flag {other}")),
        }
    }
    let cfg = flags
        .to_link_config()
        .unwrap_or_else(|e| fail(&e.to_string()));
    let bridge = EmuBridge::start(&a, &b, &cfg, &opts).unwrap_or_else(|e| fail(&e.to_string()));
    eprintln!(
        "emu_bridge: {a} <-> {b}, seed {:?}, {cfg:?}, {opts:?}",
        bridge.seed()
    );
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end && bridge.is_running() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = bridge.stop();
    let verdict = report.verdict(&Thresholds::default());
    let out = serde_json::json!({ "report": report, "verdict": verdict });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
}
