#!/usr/bin/env bash
# What authentication costs when a client opens a test on an agent, on a lab link (a pair lab:
# two namespaces joined by a veth, no emulator): a keyed `tcplab serve` in the server host, and
# crates/agent/examples/handshake.rs in the client host timing, per try, a bare TCP connect (the
# unauthenticated baseline), connect + the Noise XX handshake, and a whole session open
# (handshake + Hello + Ready). Goal: the authenticated handshake under 5 ms.
# Usage: sudo benches/agent.sh [TRIES]   (default 300). On a shared machine hold the lab lock:
#   flock /tmp/tcplab-lab.lock benches/agent.sh
# Writes every try to benches/results/agent.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
tries=${1:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
cargo build --release -q -p tcplab-agent --example handshake --manifest-path "$root/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
hs="${CARGO_TARGET_DIR:-$root/target}/release/examples/handshake"
export TCPLAB_STATE_DIR=$(mktemp -d)
work=$(mktemp -d)
srv=
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null || true
  "$bin" lab down agentbench >/dev/null 2>&1 || true
  "$bin" lab gc --all >/dev/null 2>&1 || true
  rm -rf "$TCPLAB_STATE_DIR" "$work"
}
trap cleanup EXIT

res_begin agent "what authentication costs when a client opens a test on an agent, on a pair lab" "" "$@"
res_param tries "$tries"
"$bin" lab up --topology pair --name agentbench >/dev/null
ip=$("$bin" lab exec --lab agentbench server -- ip -4 -o addr show | awk '$4 ~ /^198\.1[89]\./ {sub("/.*", "", $4); print $4; exit}')
"$bin" key gen -o "$work/server" -C bench-server >/dev/null 2>&1
"$bin" key gen -o "$work/client" -C bench-client >/dev/null 2>&1
cp "$work/client.pub" "$work/clients"
"$bin" lab exec --lab agentbench server -- "$bin" serve --listen "$ip:5301" \
  --keys "$work/clients" --key "$work/server" --max-conn-rate 1000000 --max-handshakes 4096 \
  2>"$work/serve.log" &
srv=$!
for _ in $(seq 50); do grep -q "listening on" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
echo "agent at $ip:5301 in lab host 'server' ($(uname -r), $(nproc) CPUs); $tries tries of each"
"$bin" lab exec --lab agentbench client -- "$hs" --to "$ip:5301" --tries "$tries" \
  --key "$work/client" --server-key "$work/server.pub" --samples "$work/samples.json"
python3 - "$work/samples.json" "$work/goals.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
connect = {"name": "bare TCP connect (unauthenticated)", "rounds": s["connect"]}
goals = [
    {"id": "handshake", "label": "connect + Noise XX handshake (authenticated, both keys proven)",
     "unit": "µs", "better": "lower", "target": "under 5 ms on a lab link",
     "tcplab": {"name": "tcplab agent handshake", "rounds": s["handshake"]}, "peer": connect},
    {"id": "session", "label": "session open: handshake + Hello + the agent's checks + Ready",
     "unit": "µs", "better": "lower", "tcplab": {"name": "tcplab session open", "rounds": s["session"]},
     "peer": connect},
    {"id": "crypto", "label": "the handshake's cryptography alone, both ends in one process",
     "unit": "µs", "tcplab": {"name": "Noise XX, both ends", "rounds": s["crypto"]}},
]
json.dump(goals, open(sys.argv[2], "w"))
PY
res_goals "$work/goals.json"
res_end
