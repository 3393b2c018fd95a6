#!/usr/bin/env bash
# Two builds of the emulator against each other and the kernel bridge, on three 3-host path labs
# (MTU 1500, offloads off): iperf3 TCP for 5 s per lab per round, the three labs measured in all
# six orders in turn (whichever runs later in a round gains a few per cent on this machine), the
# ratio of each build to the same round's kernel bridge.
# Usage: sudo benches/emu_ab.sh OLD_TCPLAB [ROUNDS]   (default 12 rounds; installs iperf3)
# Writes every round and the summary to benches/results/emu_ab.json (RESULTS_DIR=DIR to write
# elsewhere), from which benches/render.py makes docs/BENCHMARKS.md's table; OLD_COMMIT names the
# old build there.
# OLD_TCPLAB is another build's binary, e.g. from
#   git worktree add /tmp/old HEAD~1 && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p tcplab --manifest-path /tmp/old/Cargo.toml
set -euo pipefail
OLD=${1:?usage: benches/emu_ab.sh OLD_TCPLAB [ROUNDS]}
rounds=${2:-12}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
command -v iperf3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
NEW="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
export TCPLAB_STATE_DIR=$(mktemp -d)
trap '"$NEW" lab gc --all >/dev/null 2>&1 || true; "$OLD" lab gc --all >/dev/null 2>&1 || true; rm -rf "$TCPLAB_STATE_DIR"' EXIT
SERVER=198.18.0.101
"$NEW" lab up --topology path --name kb --bridge kernel >/dev/null
"$OLD" lab up --topology path --name eo --bridge emu >/dev/null
"$NEW" lab up --topology path --name en --bridge emu >/dev/null
gbps() { # lab -> Gbit/s received
  "$NEW" lab exec --lab "$1" server -- iperf3 -s -1 -B $SERVER >/dev/null 2>&1 & sleep 0.3
  "$NEW" lab exec --lab "$1" client -- iperf3 -c $SERVER -t 5 -O 1 -J |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9,3))'
  wait
}
orders=("kb eo en" "kb en eo" "eo en kb" "en eo kb" "eo kb en" "en kb eo")
echo "# $(date -u '+%F %H:%M') old: $OLD; new: $NEW"
res_begin emu_ab "iperf3 TCP 5 s per lab per round through each build's emulator, ratio to the kernel bridge in the same round" "OLD_COMMIT" "$@"
res_param rounds "$rounds"; res_param old "${OLD_COMMIT:-$OLD}"; res_param seconds 5
res_goal throughput_ratio label="throughput / kernel bridge" unit=x better=higher \
  tcplab.name="this commit" peer.name="before (${OLD_COMMIT:-$OLD})"
results=()
for r in $(seq 1 "$rounds"); do
  order=${orders[$(( (r - 1) % 6 ))]}
  declare -A v=()
  for lab in $order; do v[$lab]=$(gbps "$lab"); done
  ro=$(python3 -c "print(round(${v[eo]}/${v[kb]},3))"); rn=$(python3 -c "print(round(${v[en]}/${v[kb]},3))")
  results+=("$ro,$rn")
  res_round throughput_ratio tcplab "$rn"; res_round throughput_ratio peer "$ro"
  res_round kernel_bridge tcplab "${v[kb]}"
  echo "round $r ($order): kernel bridge ${v[kb]}, old ${v[eo]} ($ro), new ${v[en]} ($rn) Gbit/s; load $(cut -d' ' -f1 /proc/loadavg)"
done
res_goal kernel_bridge label="kernel bridge, the same rounds" unit=Gbit/s tcplab.name="kernel bridge"
python3 - "${results[@]}" <<'PY'
import sys, statistics as s
rounds = [tuple(float(v) for v in x.split(",")) for x in sys.argv[1:]]
for name, v in (("old", [r[0] for r in rounds]), ("new", [r[1] for r in rounds])):
    print(f"{name}: ratio median {s.median(v):.3f}, geometric mean {s.geometric_mean(v):.3f}, range {min(v):.3f}-{max(v):.3f}, {sum(x >= 0.9 for x in v)} of {len(v)} at or above 0.9")
print(f"new above old in {sum(b > a for a, b in rounds)} of {len(rounds)} rounds")
PY
res_end
