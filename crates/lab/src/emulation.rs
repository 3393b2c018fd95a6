//! The link emulator inside a lab: the middle host's two ports bridged by tcplab's own user-space
//! emulator (`tcplab-emu` model, `tcplab-emu-io` packet I/O) instead of the kernel bridge, and a
//! control socket through which `tcplab lab set` changes impairments on the fly and runs read the
//! emulator's counters and fidelity.
//!
//! The emulator runs as threads inside the middle host: in the process that owns the lab (a run,
//! `lab up --foreground`), or, for a persistent lab, in a companion `tcplab emu --lab NAME` process
//! recorded in the registry and ended with the lab. Without the emulator, frames do not cross the
//! middle at all — a dead emulator never lets traffic through unimpaired.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcplab_emu::LinkConfig;
use tcplab_emu_io::{Bridge, IoOptions, Report, Thresholds, Tuning, Vnet};

use crate::error::{KernelContext, LabError, Result};
use crate::host::Host;
use crate::spec::Offloads;
use crate::state::StateDir;

/// The emulated link of a lab, as its spec records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulationSpec {
    /// The host that forwards (`middle`).
    pub host: String,
    /// Its two ports: client side first (client→server is "forward").
    pub ports: [String; 2],
    /// Impairments per direction.
    pub link: LinkConfig,
    /// The workers' scheduling knobs (the lab file's `[emulator.tuning]`); a record without
    /// them takes the measured defaults.
    #[serde(default, skip_serializing_if = "is_default_tuning")]
    pub tuning: Tuning,
}

fn is_default_tuning(t: &Tuning) -> bool {
    *t == Tuning::default()
}

/// A running emulator: the bridge, its control socket, and the seed it printed.
#[derive(Debug)]
pub struct Emulator {
    shared: Arc<SharedEmu>,
    control: Option<ControlServer>,
}

/// The emulator's I/O options for a lab with these offloads and the caller's `tuning` (the lab
/// file's `[emulator.tuning]`, `tcplab emu --tuning`): with segmentation offloads on it runs in
/// GSO-aware mode (super-packets cross whole unless a per-packet element changed one of their
/// segments; then it is cut), else one wire packet per frame, with the virtio-net header
/// (`Vnet::Header`) wherever the chosen rings can carry it: TX checksum offload then stays on at
/// every link end, as in a lab without an emulator, and partial checksums cross it as they cross
/// a kernel bridge (see [`tx_checksum_stays_on`]).
/// [`IO_OPTIONS_ENV`], when set, overrides what it names with a JSON object of `IoOptions` fields
/// (for experiments and benchmarks, e.g. `{"keep_awake": false}` or `{"tuning": {"flow_turns":
/// false}}`; an explicit `"vnet": "Off"` or `"Header"` is kept on a path without segmentation
/// offloads); `tcplab facts` names it when set, since it changes what every lab measures.
pub fn io_options(offloads: Offloads, tuning: Tuning) -> Result<IoOptions> {
    options_for(offloads, tuning, io_options_override().as_deref())
}

/// The override [`IO_OPTIONS_ENV`] holds, if any.
pub fn io_options_override() -> Option<String> {
    std::env::var(IO_OPTIONS_ENV).ok()
}

/// [`io_options`] with the environment's JSON (if any) given.
fn options_for(offloads: Offloads, tuning: Tuning, env_json: Option<&str>) -> Result<IoOptions> {
    let base = IoOptions {
        tuning,
        ..IoOptions::default()
    };
    let (mut opts, names_vnet) = match env_json {
        Some(json) => (overlay_io_options(&base, json)?, names_field(json, "vnet")),
        None => (base, false),
    };
    if offloads.segments() {
        opts.vnet = Vnet::Gso;
    } else if opts.vnet == Vnet::Gso {
        return Err(invalid_io_options(
            "vnet = Gso on a lab whose segmentation offloads are off: no super-packets will \
             arrive; use \"Header\" or \"Off\", or build the lab with --offloads on"
                .to_owned(),
        ));
    } else if !names_vnet {
        opts.vnet = if opts.rings_carry_vnet() {
            Vnet::Header
        } else {
            Vnet::Off
        };
    }
    opts.validate()
        .map_err(|e| invalid_io_options(e.to_string()))?;
    Ok(opts)
}

/// `tuning` with each `KEY=VALUE` of `tcplab emu --tuning` (a `Tuning` field and its value:
/// `due_batch=16`, `flow_turns=false`) set on it; a key or value it cannot take is an error
/// naming `--tuning KEY`.
pub fn tuning_with(tuning: Tuning, pairs: &[String]) -> Result<Tuning> {
    let mut value = serde_json::to_value(tuning).map_err(|e| invalid_tuning("", e.to_string()))?;
    for pair in pairs {
        let Some((key, text)) = pair.split_once('=') else {
            return Err(invalid_tuning(
                pair,
                "give KEY=VALUE, e.g. --tuning due_batch=16".to_owned(),
            ));
        };
        let (key, text) = (key.trim(), text.trim());
        // Numbers and booleans as written; anything else is a string the field refuses by name.
        let v = serde_json::from_str(text).unwrap_or(serde_json::Value::String(text.to_owned()));
        value[key] = v;
        Tuning::deserialize(&value)
            .map_err(|e| invalid_tuning(key, tcplab_emu::error::one_line(&e.to_string())))?;
    }
    Tuning::deserialize(value).map_err(|e| invalid_tuning("", e.to_string()))
}

fn invalid_tuning(key: &str, problem: String) -> LabError {
    LabError::invalid(
        format!("--tuning {key}").trim_end().to_owned(),
        format!(
            "{problem}; the keys and their defaults are in docs/lab.md (\"The emulator's tuning\")"
        ),
    )
}

/// Whether a JSON object names `field` (so its value, even the default, is the user's).
fn names_field(json: &str, field: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(json).is_ok_and(|v| v.get(field).is_some())
}

/// Whether an emulated lab with these offloads keeps TX checksum offload on at its link ends:
/// yes whenever the emulator carries the virtio-net header. Otherwise it is turned off, so
/// frames carry complete checksums through the emulator's plain packet sockets.
pub fn tx_checksum_stays_on(offloads: Offloads) -> Result<bool> {
    Ok(io_options(offloads, Tuning::default())?.carries_vnet())
}

/// The environment variable with I/O option overrides for a lab's emulator (JSON object).
pub const IO_OPTIONS_ENV: &str = "TCPLAB_EMU_IO";

/// An error in [`IO_OPTIONS_ENV`]'s options.
fn invalid_io_options(problem: String) -> LabError {
    LabError::Invalid {
        field: IO_OPTIONS_ENV.to_owned(),
        problem,
    }
}

/// `base` with [`IO_OPTIONS_ENV`]'s JSON object laid over it: the fields it names (also inside
/// `tuning` and `rings`) replace the base's, the rest stay; the caller validates once the lab's
/// own choices are applied.
fn overlay_io_options(base: &IoOptions, json: &str) -> Result<IoOptions> {
    let shape = || {
        "give a JSON object of emulator I/O options, e.g. '{\"keep_awake\": false}' or \
         '{\"rings\": {\"tx\": \"Ring\"}}'"
    };
    let top: serde_json::Value = serde_json::from_str(json).map_err(|e| {
        invalid_io_options(format!(
            "{}: {}",
            tcplab_emu::error::one_line(&e.to_string()),
            shape()
        ))
    })?;
    if !top.is_object() {
        return Err(invalid_io_options(format!(
            "{top} is not an object: {}",
            shape()
        )));
    }
    let mut merged = serde_json::to_value(base).map_err(|e| invalid_io_options(e.to_string()))?;
    lay_over(&mut merged, top);
    // serde quotes an unknown field's name as written, a newline in it too: one line.
    IoOptions::deserialize(merged).map_err(|e| {
        invalid_io_options(format!(
            "{}: {}",
            tcplab_emu::error::one_line(&e.to_string()),
            shape()
        ))
    })
}

/// Sets every field `top` names on `base`, objects field by field.
fn lay_over(base: &mut serde_json::Value, top: serde_json::Value) {
    match (base, top) {
        (serde_json::Value::Object(b), serde_json::Value::Object(t)) => {
            for (k, v) in t {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => lay_over(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, t) => *b = t,
    }
}

/// [`IO_OPTIONS_ENV`]'s JSON over the defaults.
#[cfg(test)]
fn parse_io_options(json: &str) -> Result<IoOptions> {
    overlay_io_options(&IoOptions::default(), json)
}

/// Fidelity thresholds: lateness p99 under 100 µs, worker CPU under 95% of wall time.
pub fn default_thresholds() -> Thresholds {
    Thresholds::default()
}

impl Emulator {
    /// Starts the emulator on `host`'s two ports. Sockets are opened on a thread inside the host
    /// and the worker threads inherit its namespace.
    pub fn start(host: &Host, spec: &EmulationSpec, opts: &IoOptions) -> Result<Emulator> {
        let (spec, opts) = (spec.clone(), opts.clone());
        host.run(move || {
            Emulator::start_here(
                [spec.ports[0].as_str(), spec.ports[1].as_str()],
                &spec.link,
                &opts,
            )
        })?
    }

    /// Starts the emulator between two interfaces of the calling thread's namespace
    /// (`tcplab emu --iface A --iface B`). Frames from `ports[0]` take `link.forward`.
    /// `opts` are taken as given: the caller has made them what its privileges allow
    /// (`Privileges::emulator_fallbacks`).
    pub fn start_here(ports: [&str; 2], link: &LinkConfig, opts: &IoOptions) -> Result<Emulator> {
        let bridge = Bridge::start(ports[0], ports[1], link, opts)
            .map_err(|e| LabError::invalid("--iface", e.to_string()))?;
        Ok(Emulator {
            shared: Arc::new(SharedEmu {
                seed: bridge.seed().unwrap_or_default(),
                bridge,
                link: Mutex::new(link.clone()),
            }),
            control: None,
        })
    }

    /// The seed of every random stream (print it: `--seed` replays the run).
    pub fn seed(&self) -> u64 {
        self.shared.seed
    }

    /// Changes impairments while frames flow; queued frames are kept.
    pub fn set_link(&self, link: &LinkConfig) -> Result<()> {
        self.shared
            .set_link(link)
            .map_err(|e| LabError::invalid("impairments", e))
    }

    /// Counters now, the configuration in force, and whether the workers are alive.
    pub fn status(&self) -> EmulatorStatus {
        self.shared.status()
    }

    /// Serves the control socket at `path` until the emulator stops.
    pub fn serve(mut self, path: PathBuf) -> Result<Emulator> {
        self.control = Some(ControlServer::start(path, Arc::clone(&self.shared))?);
        Ok(self)
    }

    /// Stops the workers (and the control socket) and returns the final report.
    pub fn stop(mut self) -> Report {
        // Joining the control thread drops its handle on the bridge.
        drop(self.control.take());
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => shared.bridge.stop(),
            Err(shared) => Report {
                forward: shared.bridge.stats().forward,
                reverse: shared.bridge.stats().reverse,
                errors: vec!["the bridge was still shared at stop".into()],
                ..Report::default()
            },
        }
    }
}

/// What `status` returns, locally or over the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmulatorStatus {
    /// Workers alive.
    pub running: bool,
    /// Seed of the random streams.
    pub seed: u64,
    /// Impairments in force.
    pub link: LinkConfig,
    /// Per-direction counters (packets, bytes, drops by cause, lateness).
    pub counters: serde_json::Value,
}

/// The emulator as both its owner and the control thread use it.
#[derive(Debug)]
struct SharedEmu {
    bridge: tcplab_emu_io::EmuBridge,
    seed: u64,
    link: Mutex<LinkConfig>,
}

impl SharedEmu {
    fn status(&self) -> EmulatorStatus {
        EmulatorStatus {
            running: self.bridge.is_running(),
            seed: self.seed,
            link: self.link.lock().map(|l| l.clone()).unwrap_or_default(),
            // An encoding failure is carried, not turned into `null`, so the verdict says why.
            counters: serde_json::to_value(self.bridge.stats()).unwrap_or_else(|e| {
                serde_json::json!({ "error": format!("the counters could not be encoded: {e}") })
            }),
        }
    }

    fn set_link(&self, link: &LinkConfig) -> std::result::Result<(), String> {
        self.bridge
            .reconfigure_link(link)
            .map_err(|e| e.to_string())?;
        if let Ok(mut l) = self.link.lock() {
            // The models keep their random streams, so the seed in force stays the first one.
            *l = LinkConfig {
                seed: l.seed,
                ..link.clone()
            };
        }
        Ok(())
    }
}

/// One control request, one JSON line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
enum Request {
    Status,
    Set { link: Box<LinkConfig> },
}

/// The control socket server thread.
#[derive(Debug)]
struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    fn start(path: PathBuf, emu: Arc<SharedEmu>) -> Result<ControlServer> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .kernel_context(|| format!("creating {}", dir.display()))?;
        }
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)
            .kernel_context(|| format!("listening on {}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("emu-control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop_flag.load(Ordering::Acquire) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        let _ = serve_one(conn, &emu);
                    }
                }
            })
            .kernel_context(|| "spawning the emulator control thread".to_string())?;
        Ok(ControlServer {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ControlServer {
    /// Ends the control thread and removes the socket file, however the emulator goes.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(conn: UnixStream, emu: &SharedEmu) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let reply = match read_line_within(&conn, MAX_LINE).and_then(|l| parse_request(&l)) {
        Ok(Request::Status) => serde_json::json!({ "ok": true, "status": emu.status() }),
        Ok(Request::Set { link }) => match emu.set_link(&link) {
            Ok(()) => serde_json::json!({ "ok": true }),
            Err(e) => serde_json::json!({ "ok": false, "error": e }),
        },
        Err(e) => serde_json::json!({ "ok": false, "error": e }),
    };
    let mut conn = conn;
    writeln!(conn, "{reply}")
}

/// Longest control line either side reads: a link with a full jitter table and a loss
/// pattern of two million drops fits; a peer that never sends a newline does not make the
/// reader grow without bound.
const MAX_LINE: u64 = 64 << 20;

/// One line of at most `max` bytes (the newline included), or why there is none.
fn read_line_within(r: impl std::io::Read, max: u64) -> std::result::Result<String, String> {
    let mut line = String::new();
    BufReader::new(r.take(max))
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the control line: {e}; send one JSON line"))?;
    if !line.ends_with('\n') && line.len() as u64 >= max {
        return Err(format!(
            "a control line longer than {max} bytes: send one JSON line, e.g. {{\"cmd\":\"status\"}}"
        ));
    }
    Ok(line)
}

/// A control request from its JSON line; the error says what a request looks like.
fn parse_request(line: &str) -> std::result::Result<Request, String> {
    serde_json::from_str::<Request>(line).map_err(|e| {
        format!(
            "bad request: {}: send {{\"cmd\":\"status\"}} or {{\"cmd\":\"set\",\"link\":{{...}}}}",
            tcplab_emu::error::one_line(&e.to_string())
        )
    })
}

/// The emulator's JSON reply: its `status` when `ok`, else its error as one line.
fn parse_reply(line: &str) -> Result<serde_json::Value> {
    let reply: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        LabError::invalid(
            "emulator",
            format!(
                "bad reply: {}; is the emulator the same tcplab build? `tcplab lab down` and rebuild",
                tcplab_emu::error::one_line(&e.to_string())
            ),
        )
    })?;
    if reply["ok"] == true {
        Ok(reply)
    } else {
        match reply["error"].as_str() {
            Some(error) => Err(LabError::invalid(
                "impairments",
                tcplab_emu::error::one_line(error),
            )),
            None => Err(LabError::invalid(
                "emulator",
                "a reply without `ok` or a reason; is the emulator the same tcplab build? \
                 `tcplab lab down` and rebuild",
            )),
        }
    }
}

/// The control socket of a lab's emulator.
pub fn control_path(state: &StateDir, lab: &str) -> PathBuf {
    state.root().join("emu").join(format!("{lab}.sock"))
}

/// Sends one request to a lab's emulator and returns its `status` or an error naming the fix.
fn call(state: &StateDir, lab: &str, request: &Request) -> Result<serde_json::Value> {
    let path = control_path(state, lab);
    let unreachable = |e: std::io::Error| {
        LabError::invalid(
            "emulator",
            format!(
                "lab '{lab}' has no running emulator ({}: {e}); was it built with impairments or \
                 --bridge emu? If it was, the emulator died: `tcplab lab down {lab}` and rebuild",
                path.display()
            ),
        )
    };
    let mut conn = UnixStream::connect(&path).map_err(unreachable)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(unreachable)?;
    let text =
        serde_json::to_string(request).map_err(|e| LabError::invalid("emulator", e.to_string()))?;
    writeln!(conn, "{text}").map_err(unreachable)?;
    let line = read_line_within(&conn, MAX_LINE).map_err(|e| LabError::invalid("emulator", e))?;
    parse_reply(&line)
}

/// Asks a lab's emulator (in any process) for its status.
pub fn query_status(state: &StateDir, lab: &str) -> Result<EmulatorStatus> {
    let reply = call(state, lab, &Request::Status)?;
    serde_json::from_value(reply["status"].clone())
        .map_err(|e| LabError::invalid("emulator", format!("bad status: {e}")))
}

/// Changes a lab's impairments (in any process) without dropping the connections crossing it.
pub fn set_link(state: &StateDir, lab: &str, link: &LinkConfig) -> Result<()> {
    call(
        state,
        lab,
        &Request::Set {
            link: Box::new(link.clone()),
        },
    )
    .map(|_| ())
}

/// The program a persistent lab starts as its emulator companion (`tcplab emu --lab NAME`).
static COMPANION_PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Tells the library where the `tcplab` binary is, so persistent emulated labs can start their
/// emulator as a separate process. The CLI calls it at start-up.
pub fn set_companion_program(path: PathBuf) {
    let _ = COMPANION_PROGRAM.set(path);
}

pub(crate) fn companion_program() -> Option<&'static PathBuf> {
    COMPANION_PROGRAM.get()
}

/// One run's verdict and account from the emulator's counters before and after it (pure, in
/// `tcplab_results::emulator::run`).
pub use tcplab_results::emulator::run::{
    LATENESS_P99_LIMIT_NS, ModelDrops, Need, RunAccount, RunFidelity, Snapshot, account,
    configured_rtt_ns, diagnosis_over, judge, judge_for, judge_snapshots, judge_snapshots_for,
    throughput_over,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_virtio_net_header_is_on_wherever_the_rings_carry_it_unless_named() {
        let off = Offloads::default();
        let o = options_for(off, Tuning::default(), None).unwrap();
        assert_eq!(o.vnet, Vnet::Header);
        let o = options_for(Offloads::ALL_ON, Tuning::default(), None).unwrap();
        assert_eq!(o.vnet, Vnet::Gso, "GSO mode carries it anyway");
        let o = options_for(off, Tuning::default(), Some(r#"{"rings": {"tx": "Ring"}}"#)).unwrap();
        assert!(!o.carries_vnet(), "the TX ring cannot carry it");
        let o = options_for(off, Tuning::default(), Some(r#"{"rings": {"rx": "Xdp"}}"#)).unwrap();
        assert!(!o.carries_vnet(), "AF_XDP cannot carry it");
        let o = options_for(
            off,
            Tuning::default(),
            Some(r#"{"vnet": "Off", "tuning": {"batch": 32}}"#),
        )
        .unwrap();
        assert!(
            o.vnet == Vnet::Off && o.tuning.batch == 32,
            "an explicit Off is kept"
        );
        let e = options_for(off, Tuning::default(), Some(r#"{"vnet": "Gso"}"#)).unwrap_err();
        assert!(e.to_string().contains("--offloads on"), "{e}");
        let e = options_for(
            Offloads::ALL_ON,
            Tuning::default(),
            Some(r#"{"rings": {"rx": "Xdp"}}"#),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("IoOptions.vnet = Gso with rings.rx Xdp"),
            "{e}"
        );
        let e = options_for(off, Tuning::default(), Some(r#"{"rx_ring": "Xdp"}"#)).unwrap_err();
        assert!(e.to_string().contains("unknown field `rx_ring`"), "{e}");
    }

    /// Found by `benches/fuzz.sh`: an unknown field whose name holds a newline made the error
    /// two lines (serde quotes the name as written).
    #[test]
    fn an_unknown_io_option_with_a_newline_is_named_on_one_line() {
        let e = parse_io_options("{\"t\\ning\": 1}")
            .unwrap_err()
            .to_string();
        assert!(
            !e.contains('\n') && e.contains("unknown field `t\\ning`"),
            "{e}"
        );
    }

    #[test]
    fn io_option_overrides_parse_validate_and_name_the_variable() {
        let o = parse_io_options(r#"{"keep_awake": false, "tuning": {"batch": 32}}"#).unwrap();
        assert!(!o.keep_awake);
        assert_eq!(o.tuning.batch, 32);
        assert_eq!(o.rings, IoOptions::default().rings);
        let e = parse_io_options(r#"{"keep_awak": false}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("TCPLAB_EMU_IO: unknown field `keep_awak`"),
            "{e}"
        );
        let e = options_for(
            Offloads::default(),
            Tuning::default(),
            Some(r#"{"tuning": {"batch": 0}}"#),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("TCPLAB_EMU_IO: IoOptions.tuning.batch = 0"),
            "{e}"
        );
    }

    #[test]
    fn the_callers_tuning_stands_and_the_override_changes_only_what_it_names() {
        let mine = Tuning {
            due_batch: 16,
            flow_turns: false,
            ..Tuning::default()
        };
        let o = options_for(Offloads::default(), mine, None).unwrap();
        assert_eq!(o.tuning, mine);
        let o = options_for(
            Offloads::default(),
            mine,
            Some(r#"{"keep_awake": false, "tuning": {"flow_turns": true}}"#),
        )
        .unwrap();
        assert!(!o.keep_awake);
        assert_eq!(
            o.tuning.due_batch, 16,
            "a field the override leaves stays the caller's"
        );
        assert!(o.tuning.flow_turns, "a field the override names is its");
        let e = options_for(Offloads::default(), mine, Some("[1]")).unwrap_err();
        assert!(e.to_string().contains("is not an object"), "{e}");
    }

    #[test]
    fn tuning_flags_set_fields_and_name_the_key_they_cannot_take() {
        let pairs = ["due_batch=16".to_string(), "flow_turns=false".to_string()];
        let t = tuning_with(Tuning::default(), &pairs).unwrap();
        assert_eq!((t.due_batch, t.flow_turns), (16, false));
        assert_eq!(t.batch, Tuning::default().batch);
        let e = tuning_with(Tuning::default(), &["due_batc=16".into()]).unwrap_err();
        let e = e.to_string();
        assert!(
            e.starts_with("--tuning due_batc: unknown field `due_batc`"),
            "{e}"
        );
        assert!(e.contains("docs/lab.md"), "{e}");
        let e = tuning_with(Tuning::default(), &["flow_turns=maybe".into()]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--tuning flow_turns: invalid type"),
            "{e}"
        );
        let e = tuning_with(Tuning::default(), &["due_batch".into()]).unwrap_err();
        assert!(e.to_string().contains("give KEY=VALUE"), "{e}");
    }

    /// An error as the control protocol and `TCPLAB_EMU_IO` give it: one line that says what
    /// to send or write. (The crate's tests/props.rs holds the same rule for the public parsers.)
    fn one_line_with_fix(e: &str) -> std::result::Result<(), proptest::test_runner::TestCaseError> {
        proptest::prop_assert!(!e.trim().is_empty() && !e.contains(['\n', '\r']), "{:?}", e);
        proptest::prop_assert!(e.chars().count() <= 600, "too long: {:?}", e);
        let fix = [
            "send ", "use ", "give ", "write ", "must ", "expected", "rebuild",
        ];
        proptest::prop_assert!(fix.iter().any(|w| e.contains(w)), "no fix: {:?}", e);
        Ok(())
    }

    /// A request or reply line: a valid one with a byte changed, or any text.
    fn control_line(valid: &'static str) -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            (any::<prop::sample::Index>(), any::<u8>()).prop_map(move |(at, b)| {
                let mut bytes = valid.as_bytes().to_vec();
                let i = at.index(bytes.len());
                bytes[i] = b;
                String::from_utf8_lossy(&bytes).into_owned()
            }),
            ".{0,80}",
            Just(format!(
                "{{\"cmd\":\"set\",\"link\":{{\"forward\":{{\"delay_ns\":{}}}}}}}",
                u128::MAX
            )),
        ]
    }

    const SET: &str = r#"{"cmd":"set","link":{"forward":{"delay_ns":1000000,"loss":{"model":"bernoulli","probability":0.01}},"reverse":{},"seed":3}}"#;
    const REPLY: &str =
        r#"{"ok":false,"error":"forward.loss.probability: loss must be between 0% and 100%"}"#;

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]

        #[test]
        fn control_requests(line in control_line(SET)) {
            if let Err(e) = parse_request(&line) {
                one_line_with_fix(&e)?;
            }
        }

        /// A reply's `error` is the emulator's own message, passed on as it came: one line,
        /// whatever it says.
        #[test]
        fn control_replies(line in control_line(REPLY)) {
            if let Err(e) = parse_reply(&line) {
                let e = e.to_string();
                proptest::prop_assert!(!e.trim().is_empty() && !e.contains(['\n', '\r']), "{:?}", e);
                proptest::prop_assert!(e.chars().count() <= 600, "too long: {:?}", e);
            }
        }

        /// Lines of any length, with or without their newline, are read within the limit.
        #[test]
        fn control_lines_are_bounded(len in 0usize..300, newline in proptest::prelude::any::<bool>()) {
            let mut bytes = vec![b'x'; len];
            if newline {
                bytes.push(b'\n');
            }
            match read_line_within(&bytes[..], 100) {
                Ok(line) => proptest::prop_assert!(line.len() <= 100),
                Err(e) => {
                    proptest::prop_assert!(len >= 100, "{}", e);
                    one_line_with_fix(&e)?;
                }
            }
        }

        #[test]
        fn io_option_overrides(json in control_line(r#"{"keep_awake": false, "tuning": {"batch": 32}, "rings": {"tx": "Ring"}, "vnet": "Header"}"#), on in proptest::prelude::any::<bool>()) {
            let offloads = if on { Offloads::ALL_ON } else { Offloads::default() };
            if let Err(e) = options_for(offloads, Tuning::default(), Some(&json)) {
                let e = e.to_string();
                one_line_with_fix(&e)?;
                proptest::prop_assert!(e.starts_with("TCPLAB_EMU_IO: "), "{}", e);
            }
        }
    }

    /// A peer that never ends its line is cut off at the limit, not read into memory whole.
    #[test]
    fn an_endless_line_is_refused() {
        let e = read_line_within(std::io::repeat(b'x'), 1 << 16).unwrap_err();
        assert!(e.contains("longer than 65536 bytes"), "{e}");
    }
}
