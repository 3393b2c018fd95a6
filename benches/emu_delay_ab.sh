#!/usr/bin/env bash
# Delay accuracy under a bulk flow, two emulator I/O settings side by side (A, B, A, B, ...).
# Usage: sudo benches/emu_delay_ab.sh OPTS_A OPTS_B [ROUNDS] [idle|paced|unpaced]
#   OPTS_*: TCPLAB_EMU_IO JSON, e.g. '{}' (the defaults) and '{"flow_turns":false,"due_batch":64}'.
# Each phase: a fresh `lab up --topology path --delay 10ms`, a bulk iperf3 flow server -> client
# for 25 s (paced: --fq-rate 1G; none when idle) started 1.5 s before the probes, then 300
# pings at 10 ms and `tcplab rr` (64 B each way, NODELAY, RR_SECS=10 s), both at SCHED_FIFO 20.
# Prints per phase: bulk Gbit/s, ping and rr median / p99 (ms), the emulator's lateness
# p50 / p99 (µs) per direction. Installs iperf3 and ping from Debian if missing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OPTS_A OPTS_B [ROUNDS] [idle|paced|unpaced]" >&2; exit 2; }
A=$1 B=$2 rounds=${3:-2} bulk=${4:-paced}
case "$bulk" in idle|paced|unpaced) ;; *) echo "bulk must be idle, paced or unpaced, not '$bulk'" >&2; exit 2;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v iperf3 >/dev/null || ! command -v ping >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 iputils-ping >/dev/null
fi
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
T="$root/target/release/tcplab"
export TCPLAB_STATE_DIR=$(mktemp -d)
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$TCPLAB_STATE_DIR"' EXIT
SERVER=198.18.0.101 CLIENT=198.18.0.1
ex() { local lab=$1 host=$2; shift 2; "$T" lab exec --lab "$lab" "$host" -- "$@"; }
pyjson() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
ping_stats() {
  chrt -f 20 "$T" lab exec --lab d10 client -- ping -n -c 300 -i 0.01 $SERVER | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' |
    python3 -c 'import sys,statistics as s; v=sorted(float(x) for x in sys.stdin); print(f"{s.median(v):.3f} / {v[int(0.99*(len(v)-1))]:.3f}")'
}
rr_stats() {
  chrt -f 20 "$T" rr --lab d10 --req 64 --resp 64 --nodelay --duration "${RR_SECS:-10}" --json |
    pyjson '"%.3f / %.3f (n=%d)" % (d["summary"]["latency_us"]["p50"]/1e3, d["summary"]["latency_us"]["p99"]/1e3, d["summary"]["transactions"])'
}
lateness() {
  "$T" lab status d10 --json | pyjson '"; ".join("%s %.1f / %.1f" % (k, c["lateness"]["p50_ns"]/1e3, c["lateness"]["p99_ns"]/1e3) for k, c in ((k, d["emulators"]["d10"]["counters"][k]) for k in ("forward","reverse")))'
}
phase() { # opts
  TCPLAB_EMU_IO="$1" "$T" lab up --topology path --name d10 --delay 10ms >/dev/null
  local pid="" flags="" gbps="-"
  if [ "$bulk" != idle ]; then
    [ "$bulk" = paced ] && flags="--fq-rate 1G"
    ex d10 client iperf3 -s -1 -B $CLIENT >/dev/null 2>&1 & sleep 0.3
    ex d10 server iperf3 -c $CLIENT -t 25 $flags -J > "$TCPLAB_STATE_DIR/bulk.json" &
    pid=$!; sleep 1.5
  fi
  local p r l; p=$(ping_stats); r=$(rr_stats); l=$(lateness)
  if [ -n "$pid" ]; then
    wait "$pid"; wait
    gbps=$(pyjson 'round(d["end"]["sum_received"]["bits_per_second"]/1e9, 3)' < "$TCPLAB_STATE_DIR/bulk.json")
  fi
  echo "[$1] $bulk: bulk $gbps Gbit/s; ping $p; rr $r; lateness µs $l"
  "$T" lab down d10 >/dev/null
}
echo "# $(date -u '+%F %H:%M') UTC, $(git -C "$root" rev-parse --short HEAD), bulk $bulk, $rounds rounds"
for _ in $(seq 1 "$rounds"); do phase "$A"; phase "$B"; done
