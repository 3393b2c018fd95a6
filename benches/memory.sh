#!/usr/bin/env bash
# Memory over long runs: a 10-minute msgs run (the largest count a run takes, paced so it lasts
# about 10 minutes, with every sample written to a file) and a sweep of 1,000 short runs. For
# each: the process's peak resident memory (the kernel's VmHWM, from `time -v`), and for the
# sweep its resident memory sampled every second while the runs go on, to show whether it grows
# with the number of runs; and a study of one long msgs run, stored with its samples and drawn
# in its report (the report reads the stored run back: the step that held every message).
# Usage: sudo benches/memory.sh [MSGS_COUNT] [GAP_US] [SWEEP_RUNS] [STUDY_COUNT]
#   (defaults 10000000 messages 55 µs apart, about 10 minutes; 1000 runs, about 30 s;
#   a study run of 10000000 messages back to back, about 30 s). A count of 0 skips its part.
# Not a timing benchmark: it may run beside other work.
set -euo pipefail
count=${1:-10000000}
gap=${2:-55}
runs=${3:-1000}
study=${4:-10000000}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
work=$(mktemp -d)
export TCPLAB_STATE_DIR="$work/state"
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

if [ "$count" -gt 0 ]; then
echo "# msgs: $count messages of 1 byte, $gap µs apart, samples to a file (client and server"
echo "# run in this one process, each in its lab host)"
"$T" lab up --name memmsgs >/dev/null
/usr/bin/time -f "msgs: peak RSS %M KB, wall %e s" \
  "$T" msgs --lab memmsgs -c "$count" --gap-us "$gap" --samples "$work/msgs.samples" --json \
  > "$work/msgs.json"
python3 - "$work/msgs.json" "$work/msgs.samples" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
run = d["runs"][0] if "runs" in d else d
print(f"msgs: {run.get('received', '?')} messages received, samples file "
      f"{os.path.getsize(sys.argv[2]) / 1e6:.0f} MB")
EOF
"$T" lab down memmsgs >/dev/null
fi

if [ "$runs" -gt 0 ]; then
echo "# sweep: $runs runs of 1,000 one-byte messages in one lab, reset between runs"
reps=$(( (runs + 1) / 2 ))
cat > "$work/mem.toml" <<EOF
name = "memory"
repetitions = $reps
seed = 7
reset = "reset"
objective = { metric = "per_message_us.mean", goal = "minimise" }

[lab]
topology = "pair"

[[workload]]
kind = "msgs"
count = 1000
size = 1

[[factor]]
name = "socket.nodelay"
values = [false, true]
EOF
/usr/bin/time -f "sweep: peak RSS %M KB, wall %e s" -o "$work/sweep.time" \
  "$T" sweep "$work/mem.toml" --db "$work/mem.db" >/dev/null 2>&1 &
pid=$!
samples=()
# The sweep's own process is /usr/bin/time's child.
while kill -0 "$pid" 2>/dev/null; do
  child=$(pgrep -P "$pid" || true)
  if [ -n "$child" ] && [ -r "/proc/$child/status" ]; then
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$child/status" 2>/dev/null || true)
    [ -n "$rss" ] && samples+=("$rss")
  fi
  sleep 1
done
wait "$pid"
cat "$work/sweep.time"
printf '%s\n' "${samples[@]}" | python3 -c '
import sys
v = [int(x) for x in sys.stdin.read().split()]
if len(v) >= 4:
    q = len(v) // 4
    first, last = v[:q], v[-q:]
    print(f"sweep: resident memory sampled {len(v)} times: first quarter max {max(first)} KB, "
          f"last quarter max {max(last)} KB, overall max {max(v)} KB")
'
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print('sweep: runs stored', c.execute('select count(*) from run').fetchone()[0])" "$work/mem.db"
fi

if [ "$study" -gt 0 ]; then
echo "# study: one run of $study one-byte messages back to back, its samples stored and drawn"
cat > "$work/long.toml" <<EOF
name = "memory-long"
repetitions = 1
seed = 7
objective = { metric = "per_message_us.mean", goal = "minimise" }

[lab]
topology = "pair"

[[workload]]
kind = "msgs"
count = $study
size = 1
EOF
/usr/bin/time -f "study: peak RSS %M KB, wall %e s" \
  "$T" sweep "$work/long.toml" --db "$work/long.db" --html "$work/long.html" >/dev/null
python3 - "$work/long.db" "$work/long.html" <<'EOF'
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n, raw, stored = c.execute("select count(*), sum(samples_raw_len), sum(length(samples)) from run").fetchone()
print(f"study: {n} run stored, samples {raw / 1e6:.0f} MB packed, {stored / 1e6:.0f} MB compressed; "
      f"report {os.path.getsize(sys.argv[2]) / 1e3:.0f} kB")
EOF
fi
