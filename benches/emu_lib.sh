# Shared by benches/emu.sh and benches/emu_delay_ab.sh (sourced, with set -euo pipefail and
# "root" set): installs the peers, builds tcplab, a private state dir removed on exit, the
# lab helpers, one delay-accuracy phase, and the results log's functions (benches/results.sh).
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
# iperf3 (the peer), ping (delay probes); both from Debian.
if ! command -v iperf3 >/dev/null || ! command -v ping >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 iputils-ping >/dev/null
fi
# TCPLAB=/path/to/tcplab measures that build instead of this tree's (an older build, side by side).
if [ -n "${TCPLAB:-}" ]; then
  T=$TCPLAB
else
  cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
  T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
fi
export TCPLAB_STATE_DIR=$(mktemp -d)
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$TCPLAB_STATE_DIR"' EXIT
SERVER=198.18.0.101

up() { "$T" lab up --topology path --name "$1" "${@:2}" >/dev/null; }
down() { "$T" lab down "$1" >/dev/null; }
ex() { local lab=$1 host=$2; shift 2; "$T" lab exec --lab "$lab" "$host" -- "$@"; }
# iperf3 server for one test, in the background; its PID is ours to end.
serve() { ex "$1" server iperf3 -s -1 -B $SERVER >/dev/null 2>&1 & sleep 0.3; }
pyjson() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

ping_stats() { # lab count interval -> "median p99" in ms
  ex "$1" client ping -n -q -c "$2" -i "$3" $SERVER >/dev/null 2>&1 || true
  ${PROBE:-} "$T" lab exec --lab "$1" client -- ping -n -c "$2" -i "$3" $SERVER | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' |
    python3 -c 'import sys,statistics as s; v=sorted(float(x) for x in sys.stdin); print(f"{s.median(v):.3f} {v[int(0.99*(len(v)-1))]:.3f} sd={s.pstdev(v):.3f} n={len(v)}")'
}

# 10 s at 20 ms RTT is about 500 transactions, so the p99 is the fifth-worst, not one hiccup.
# Also prints how long the rr threads waited for a CPU per transaction (schedstat run delay,
# client and server side): latency the host's scheduler added, not the emulator.
rr_stats() { # lab -> TCP request/response (64 B each way, NODELAY) "median p99" in ms, RR_SECS (10) s
  ${PROBE:-} "$T" rr --lab "$1" --req 64 --resp 64 --nodelay --duration "${RR_SECS:-10}" --json |
    pyjson '"rr median %.3f p99 %.3f n=%d, cpu wait per transaction client %s server %s us" % (d["summary"]["latency_us"]["p50"]/1e3, d["summary"]["latency_us"]["p99"]/1e3, d["summary"]["transactions"], *["-" if d[k] is None else "%.1f" % (d[k]*1e6/max(1, d["summary"]["transactions"])) for k in ("client_cpu_wait_s", "server_cpu_wait_s")])'
}
# All frames' lateness per direction, then the lone frames' (the probes': alone in their flow,
# `DirSnapshot::lone_lateness`), whose p99 the verdict judges on its own.
lateness() { "$T" lab status "$1" --json | pyjson '"emulator lateness p50/p99/max us (frames sent by the other worker; lone frames p99/max): " + "; ".join("%s %.1f/%.1f/%.1f (%d; lone %d: %.1f/%.1f)" % (k, c["lateness"]["p50_ns"]/1e3, c["lateness"]["p99_ns"]/1e3, c["lateness"]["max_ns"]/1e3, c.get("helped", 0), c["lone_lateness"]["count"], c["lone_lateness"]["p99_ns"]/1e3, c["lone_lateness"]["max_ns"]/1e3) for k, c in ((k, d["emulators"]["'"$1"'"]["counters"][k]) for k in ("forward","reverse")))'; }
# The share of CPU time the hypervisor took from this VM (steal, /proc/stat) between two
# `head -1 /proc/stat` lines: a host that takes a tenth of the time stalls the VM for
# milliseconds at a time, which no figure measured across it can be trusted to within 0.1 ms.
steal_pct() { python3 -c 'import sys; a=[int(x) for x in sys.argv[1].split()[1:]]; b=[int(x) for x in sys.argv[2].split()[1:]]; d=[y-x for x,y in zip(a,b)]; print(round(100*d[7]/max(sum(d),1),1))' "$1" "$2"; }

# Delay accuracy, three ways: the default (keep-awake on), keep-awake off (TCPLAB_EMU_IO), and
# the default with the probes (ping, tcplab rr) at SCHED_FIFO 20, which takes the endpoints'
# own wake-up delays on a busy machine out of the figure and leaves the emulator's.
# Each phase gets a fresh lab, so the emulator's lateness is that phase's alone. Under load, a
# bulk TCP flow runs server -> client (opposite to the probes' requests), started before and
# lasting past the probes (checked): unpaced (window-limited: it sends each window in bursts at
# what the two CPUs can forward), and paced (SO_MAX_PACING_RATE, iperf3 --fq-rate).
# LAB_FLAGS (default "--delay 10ms") are the lab's link flags: base_phase runs the same phase on
# an unimpaired lab ("--bridge emu") to give the base RTT under the same load.
# After a phase: P_MED P_P99 (ping), R_MED R_P99 (rr) in ms, BULK_GBPS (the bulk flow's rate).
CLIENT=198.18.0.1
delay_phase() { # label, bulk ("" | "unpaced" | "paced RATE"), then env for lab up
  local label=$1 bulk=$2 bulk_secs=$((${RR_SECS:-10} + 20)); shift 2
  # shellcheck disable=SC2086 # LAB_FLAGS is a list of flags
  env "$@" "$T" lab up --topology path --name d10 ${LAB_FLAGS:---delay 10ms} >/dev/null
  local pid="" t0 t1 flags=""
  if [ -n "$bulk" ]; then
    [ "${bulk#paced }" != "$bulk" ] && flags="--fq-rate ${bulk#paced }"
    ex d10 client iperf3 -s -1 -B $CLIENT >/dev/null 2>&1 & sleep 0.3
    # shellcheck disable=SC2086 # flags is empty or one option with its value
    ex d10 server iperf3 -c $CLIENT -t "$bulk_secs" $flags -J > "$TCPLAB_STATE_DIR/bulk.json" &
    pid=$!; sleep 1.5
  fi
  t0=$(date +%s.%N); local cpu0; cpu0=$(head -1 /proc/stat)
  local p r; p=$(ping_stats d10 300 0.01); r=$(rr_stats d10)
  t1=$(date +%s.%N); STEAL=$(steal_pct "$cpu0" "$(head -1 /proc/stat)")
  read -r P_MED P_P99 _ <<< "$p"; read -r _ _ R_MED _ R_P99 _ <<< "$r"
  BULK_GBPS=0
  if [ -n "$pid" ]; then
    wait "$pid"; wait
    local gbps; gbps=$(pyjson '"%.3f Gbit/s, %d retransmits" % (d["end"]["sum_received"]["bits_per_second"]/1e9, d["end"]["sum_sent"]["retransmits"])' < "$TCPLAB_STATE_DIR/bulk.json")
    BULK_GBPS=${gbps%% *}
    # Segments the client queued out of order: with no loss configured, frames the emulator
    # reordered (or dropped).
    local ofo; ofo=$(ex d10 client nstat -az TcpExtTCPOFOQueue | awk '/TCPOFOQueue/ {print $2}')
    echo "[$label] bulk $bulk ($gbps, client out-of-order $ofo; probes took $(python3 -c "print(round($t1-$t0,1))") s of its $bulk_secs): ping $p; $r"
  else
    echo "[$label] idle: ping $p; $r"
  fi
  echo "    $(lateness d10); steal ${STEAL}% of CPU time during the probes"
  down d10
}

# The same probes and load on an unimpaired lab (the emulator with no impairment): the base RTT
# the delayed phase is judged against. The issue's target is 20 ms + the unimpaired base RTT
# "while a bulk TCP flow crosses", so under load the base is measured under load.
base_phase() { # label, bulk, then env for lab up
  local label=$1 bulk=$2; shift 2
  # shellcheck disable=SC2046 # one env assignment per line, no spaces inside
  LAB_FLAGS="--bridge emu" delay_phase "$label base" "$bulk" $(fifo_base_env "$@")
}

# The base lab's env: the delayed phase's, with both workers kept SCHED_FIFO
# (`tuning.light_other_after_ns` 0) unless it sets that itself. An unimpaired direction's worker would
# otherwise run SCHED_OTHER under the load (crates/emu-io/src/sched/policy.rs) and its frames wait for
# a CPU, which raises the base and so lowers the excess: the stricter base is the honest one.
fifo_base_env() {
  python3 - "$@" <<'PY'
import json, sys
env = [a for a in sys.argv[1:] if a]
io = {}
for a in env:
    if a.startswith("TCPLAB_EMU_IO="):
        io = json.loads(a.split("=", 1)[1])
io.setdefault("tuning", {}).setdefault("light_other_after_ns", 0)
rest = [a for a in env if not a.startswith("TCPLAB_EMU_IO=")]
print("\n".join(rest + ["TCPLAB_EMU_IO=" + json.dumps(io, separators=(",", ":"))]))
PY
}

# Prints how far the delayed phase (ping and rr median, p99) is above 20 ms + the base, and
# whether each is within 0.1 ms. Arguments: the row's label, its load (idle, unpaced, paced) and
# the bulk flow's rate (Gbit/s, "" when idle), the delayed phase's four figures, then the base's. With a results log open (benches/results.sh) the row is also a goal
# there: the delayed lab's figures as tcplab's side, 20 ms + the base as the target's.
# ping prints RTTs of 10 ms or more rounded to 0.1 ms, so its excess is good to ±0.05 ms; rr's
# histogram steps are 16 µs at 20 ms.
excess() {
  python3 - "${RES_LOG:-}" "${RES_ROUND:-}" "$@" <<'PY'
import json, re, sys
log, rnd, label, load, bulk = sys.argv[1:6]
d = [float(x) for x in sys.argv[6:10]]
b = [float(x) for x in sys.argv[10:14]]
names = ["ping median", "ping p99", "rr median", "rr p99"]
over = [di - 20.0 - bi for di, bi in zip(d, b)]
cells = ", ".join(f"{n} {o:+.3f}" for n, o in zip(names, over))
within = all(o <= 0.1 for o in over)
print(f"    excess over 20 ms + base under the same load: {cells} -> {'within' if within else 'NOT within'} 0.1 ms")
if log:
    keys = ["ping_median", "ping_p99", "rr_median", "rr_p99"]
    slug = lambda t: re.sub(r"[^a-z0-9]+", "_", t.lower()).strip("_")
    # RES_ROUND keeps a repeated row set's rounds apart (benches/emu_delay_ab.sh rows).
    goal = {"id": f"delay.{slug(label)}.{load}" + (f".round{rnd}" if rnd else ""),
            "label": f"delay, {label}, {load}" + (f", round {rnd}" if rnd else ""), "load": load,
            "bulk_gbit": float(bulk) if bulk else None,
            "unit": "ms", "kind": "delay", "target": "median and p99 within 0.1 ms of 20 ms + base",
            "tcplab": {"name": "emulator, --delay 10ms each way", **dict(zip(keys, d))},
            "peer": {"name": "20 ms + the unimpaired base under the same load",
                     **{k: round(20.0 + v, 3) for k, v in zip(keys, b)}},
            "excess_ms": {k: round(o, 3) for k, o in zip(keys, over)}, "within": within}
    with open(log, "a") as f:
        f.write(json.dumps({"event": "goals", "goals": [goal]}) + "\n")
PY
}

# One row set: idle, unpaced and paced at 1 Gbit/s, each delayed phase followed by its base
# phase under the same load (for the unpaced flow, the base flow is paced at the rate the
# delayed one reached: its bursts make it the harsher load, so this base errs low, not high).
delay_rows() { # label, then env for lab up
  local label=$1 d; shift
  delay_phase "$label" "" "$@"; d="$P_MED $P_P99 $R_MED $R_P99"
  base_phase "$label" "" "$@"
  excess "$label" idle "" $d "$P_MED" "$P_P99" "$R_MED" "$R_P99"
  delay_phase "$label" unpaced "$@"; d="$P_MED $P_P99 $R_MED $R_P99"
  local rate bulk=$BULK_GBPS; rate=$(python3 -c "print(max(1, round($BULK_GBPS * 1000)))")M
  base_phase "$label" "paced $rate" "$@"
  excess "$label" unpaced "$bulk" $d "$P_MED" "$P_P99" "$R_MED" "$R_P99"
  delay_phase "$label" "paced 1G" "$@"; d="$P_MED $P_P99 $R_MED $R_P99"; bulk=$BULK_GBPS
  base_phase "$label" "paced 1G" "$@"
  excess "$label" paced "$bulk" $d "$P_MED" "$P_P99" "$R_MED" "$R_P99"
}
