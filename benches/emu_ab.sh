#!/usr/bin/env bash
# Two builds of the emulator against each other and the kernel bridge, on three 3-host path labs
# (MTU 1500, offloads off): iperf3 TCP for 5 s per lab per round, the three labs measured in all
# six orders in turn (whichever runs later in a round gains a few per cent on this machine), the
# ratio of each build to the same round's kernel bridge.
# Usage: sudo benches/emu_ab.sh OLD_TCPLAB [ROUNDS]   (default 12 rounds; installs iperf3)
# OLD_TCPLAB is another build's binary, e.g. from
#   git worktree add /tmp/old HEAD~1 && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p tcplab --manifest-path /tmp/old/Cargo.toml
set -euo pipefail
OLD=${1:?usage: benches/emu_ab.sh OLD_TCPLAB [ROUNDS]}
rounds=${2:-12}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v iperf3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
NEW="$root/target/release/tcplab"
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
results=()
for r in $(seq 1 "$rounds"); do
  order=${orders[$(( (r - 1) % 6 ))]}
  declare -A v=()
  for lab in $order; do v[$lab]=$(gbps "$lab"); done
  ro=$(python3 -c "print(round(${v[eo]}/${v[kb]},3))"); rn=$(python3 -c "print(round(${v[en]}/${v[kb]},3))")
  results+=("$ro,$rn")
  echo "round $r ($order): kernel bridge ${v[kb]}, old ${v[eo]} ($ro), new ${v[en]} ($rn) Gbit/s; load $(cut -d' ' -f1 /proc/loadavg)"
done
python3 -c '
import sys, statistics as s
o=[float(x.split(",")[0]) for x in sys.argv[1:]]; n=[float(x.split(",")[1]) for x in sys.argv[1:]]
for name, v in (("old", o), ("new", n)):
    print(f"{name}: ratio median {s.median(v):.3f}, geometric mean {s.geometric_mean(v):.3f}, range {min(v):.3f}-{max(v):.3f}, {sum(x >= 0.9 for x in v)} of {len(v)} at or above 0.9")
print(f"new above old in {sum(b > a for a, b in zip(o, n))} of {len(o)} rounds")' "${results[@]}"
