#!/usr/bin/env bash
# What authentication costs when a client opens a test on an agent, on a lab link (a pair lab:
# two namespaces joined by a veth, no emulator): a keyed `tcplab serve` in the server host, and
# crates/load/examples/handshake.rs in the client host timing, per try, a bare TCP connect (the
# unauthenticated baseline), connect + the Noise XX handshake, and a whole session open
# (handshake + Hello + Ready). Goal: the authenticated handshake under 5 ms.
# Usage: sudo benches/agent.sh [TRIES]   (default 300). On a shared machine hold the lab lock:
#   flock /tmp/tcplab-lab.lock benches/agent.sh
set -euo pipefail
tries=${1:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
cargo build --release -q -p tcplab-load --example handshake --manifest-path "$root/Cargo.toml"
bin="$root/target/release/tcplab"
hs="$root/target/release/examples/handshake"
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
  --key "$work/client" --server-key "$work/server.pub"
