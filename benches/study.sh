#!/usr/bin/env bash
# A study's own cost: `tcplab sweep scenarios/sfperf.toml --race` (one lab, reset between runs)
# RUNS times, each into a fresh database, and per sweep the wall time against the workloads' own
# measured time (msgs: first write to last receive; stream, rr, crr: the client's elapsed time),
# with the overhead's split as the CLI prints it. Goal: the overhead under 5 % of the wall time.
# Usage: sudo benches/study.sh [RUNS] [SCENARIO]   (defaults 3 and scenarios/sfperf.toml: about
# 25 s a sweep on a quiet machine). Writes every sweep's figures to benches/results/study.json
# (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
runs=${1:-3}
scenario=${2:-scenarios/sfperf.toml}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
work=$(mktemp -d)
export TCPLAB_STATE_DIR="$work/state"
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
echo "# $(date -u '+%F %H:%M') $(uname -r), $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
res_begin study "a racing sweep's own cost: wall time against the workloads' own measured time" "" "$@"
res_param runs "$runs"; res_param scenario "$scenario"
res_goal sweep label="\`tcplab sweep $scenario --race\`, one lab reset between runs" unit=s better=lower \
  tcplab.name="the sweep's wall time" peer.name="the workloads' own time" target="overhead under 5 %"
for i in $(seq "$runs"); do
  "$T" sweep "$root/$scenario" --race --db "$work/sweep-$i.db" > "$work/sweep-$i.txt" 2>&1 || true
  # The summary line is wrapped to the terminal's width: join it before reading it.
  line=$(python3 - "$work/sweep-$i.txt" <<'PY'
import re, sys
t = " ".join(open(sys.argv[1]).read().split())
m = re.search(r"(\d+) runs executed .*?wall ([\d.]+) s, workloads ([\d.]+) s; overhead ([\d.]+)%: "
              r"labs ([\d.]+) s, harness ([\d.]+) s.*?sample packing ([\d.]+) s, storing ([\d.]+) s, "
              r"statistics ([\d.]+) s", t)
print(" ".join(m.groups()) if m else "")
PY
)
  if [ -z "$line" ]; then
    echo "sweep $i: no summary line; its output:" >&2; tail -5 "$work/sweep-$i.txt" >&2; exit 1
  fi
  read -r n wall wl pct labs harness packing storing stats <<< "$line"
  echo "sweep $i: $n runs, wall $wall s, workloads $wl s, overhead $pct % (labs $labs s, harness $harness s, packing $packing s, storing $storing s, statistics $stats s)"
  res_round sweep tcplab "$wall"; res_round sweep peer "$wl"
  res_round runs tcplab "$n"; res_round overhead_pct tcplab "$pct"
  res_round split_labs tcplab "$labs"; res_round split_harness tcplab "$harness"
  res_round split_packing tcplab "$packing"; res_round split_storing tcplab "$storing"; res_round split_statistics tcplab "$stats"
done
res_goal runs label="runs per sweep" unit=runs tcplab.name="runs executed"
res_goal overhead_pct label="overhead: (wall - workloads) / wall" unit=% better=lower tcplab.name="tcplab sweep" target="under 5 %"
for k in labs harness packing storing statistics; do
  res_goal "split_$k" label="overhead: $k" unit=s tcplab.name="tcplab sweep"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
res_end
