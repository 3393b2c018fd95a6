#!/usr/bin/env bash
# The monitor over a long run, in compressed time. A star lab of HOSTS hosts (default 16: 240
# ordered pairs), an authenticated `tcplab serve` in each, and `tcplab monitor` in h1 running
# stream on every pair every EVERY (default 60s, a tenth of a usual 10m) for WALL (default
# 60m), with the doctor on. On the way:
#   - at a quarter of the run the monitor is killed with SIGKILL and started again on its
#     database (it must lose no run and count none twice);
#   - at a third, one host's agent (AGENT_VICTIM, default h5) is killed and started again two
#     intervals later;
#   - at half, SLOW (default h9) gets small receive buffers (net.ipv4.tcp_rmem 4096 16384
#     16384): every pair toward it regresses, and must be flagged within two intervals with the
#     doctor's finding rwnd_limited; the other pairs must raise none (false alarms counted).
# Samples the monitor's memory (VmRSS) and the database's size every 10 s. Writes
# benches/results/monitor.json (RESULTS_DIR=DIR to write elsewhere).
# Usage: sudo [HOSTS=16] [EVERY=60s] [WALL=60m] [TEST_S=1] benches/monitor.sh
#   KEEP=1 keeps the work directory (hosts file, logs, the database).
# Needs a quiet machine for WALL.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
hosts=${HOSTS:-16}
every=${EVERY:-60s}
wall=${WALL:-60m}
test_s=${TEST_S:-1}
victim=${AGENT_VICTIM:-h5}
slow=${SLOW:-h9}
secs() { # 90s, 2m, 1h -> seconds
  case $1 in
    *ms) echo 0 ;; *s) echo "${1%s}" ;; *m) echo $(( ${1%m} * 60 )) ;; *h) echo $(( ${1%h} * 3600 )) ;;
    *) echo "$1" ;;
  esac
}
every_s=$(secs "$every")
wall_s=$(secs "$wall")
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
export TCPLAB_STATE_DIR=$(mktemp -d)
work=$(mktemp -d)
declare -A agent_pid
monitor_pid=
cleanup() {
  [ -n "$monitor_pid" ] && kill "$monitor_pid" 2>/dev/null && wait "$monitor_pid" 2>/dev/null || true
  for p in "${agent_pid[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${agent_pid[@]}"; do wait "$p" 2>/dev/null || true; done
  "$bin" lab down monbench >/dev/null 2>&1 || true
  "$bin" lab gc --all >/dev/null 2>&1 || true
  rm -rf "$TCPLAB_STATE_DIR"
  if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

res_begin monitor "the monitor over a compressed hour: memory, database size, a SIGKILL and an agent restart, an injected regression found with the doctor's cause, false alarms on the rest" "HOSTS EVERY WALL TEST_S AGENT_VICTIM SLOW" "$@"
res_param hosts "$hosts"; res_param every "$every"; res_param wall "$wall"; res_param test_s "$test_s"
"$bin" key gen -o "$work/agent" -C bench-agent >/dev/null 2>&1
"$bin" key gen -o "$work/coord" -C bench-monitor >/dev/null 2>&1
cat "$work/coord.pub" "$work/agent.pub" > "$work/clients"
agent_key=$(cat "$work/agent.pub")
"$bin" lab up --topology star --hosts "$hosts" --name monbench >/dev/null
declare -A addr
start_agent() { # host
  "$bin" lab exec --lab monbench "$1" -- "$bin" serve --listen "${addr[$1]}:5301" \
    --keys "$work/clients" --key "$work/agent" 2>>"$work/serve-$1.log" &
  agent_pid[$1]=$!
}
: > "$work/hosts.toml"
for i in $(seq "$hosts"); do
  h=h$i
  addr[$h]=$("$bin" lab exec --lab monbench "$h" -- ip -4 -o addr show | awk '$4 ~ /^198\.1[89]\./ {sub("/.*", "", $4); print $4; exit}')
  start_agent "$h"
  printf '[[host]]\nname = "%s"\naddress = "%s"\nserver_key = "%s"\n' "$h" "${addr[$h]}" "$agent_key" >> "$work/hosts.toml"
done
sleep 1

start_monitor() {
  ip netns exec tcplab-monbench-h1 "$bin" monitor --hosts "$work/hosts.toml" --key "$work/coord" \
    --workload stream --every "$every" --duration "$test_s" --doctor-budget 20s \
    --db "$work/m.db" --metrics 127.0.0.1:9464 --for "${wall_s}s" 2>>"$work/monitor.log" &
  monitor_pid=$!
}
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $hosts hosts, stream every $every for $wall"
began=$(date +%s)
start_monitor
: > "$work/samples"
killed=0 agent_down=0 agent_up=0 injected=0
while kill -0 "$monitor_pid" 2>/dev/null; do
  now=$(( $(date +%s) - began ))
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$monitor_pid/status" 2>/dev/null || echo 0)
  db=$(( $(stat -c %s "$work/m.db" 2>/dev/null || echo 0) + $(stat -c %s "$work/m.db-wal" 2>/dev/null || echo 0) ))
  echo "$now $rss $db" >> "$work/samples"
  if [ "$killed" = 0 ] && [ "$now" -ge $(( wall_s / 4 )) ]; then
    echo "# t=${now}s: SIGKILL the monitor, start it again"
    kill -KILL "$monitor_pid"; wait "$monitor_pid" 2>/dev/null || true
    killed=$now
    # The restarted monitor runs for the rest of WALL, not the whole of it again.
    full=$wall_s
    wall_s=$(( full - now ))
    start_monitor
    wall_s=$full
  fi
  if [ "$agent_down" = 0 ] && [ "$now" -ge $(( wall_s / 3 )) ]; then
    echo "# t=${now}s: the agent of $victim killed"
    kill "${agent_pid[$victim]}"; wait "${agent_pid[$victim]}" 2>/dev/null || true
    agent_down=$now
  fi
  if [ "$agent_down" != 0 ] && [ "$agent_up" = 0 ] && [ "$now" -ge $(( agent_down + 2 * every_s )) ]; then
    echo "# t=${now}s: the agent of $victim started again"
    start_agent "$victim"
    agent_up=$now
  fi
  if [ "$injected" = 0 ] && [ "$now" -ge $(( wall_s / 2 )) ]; then
    echo "# t=${now}s: $slow's net.ipv4.tcp_rmem = 4096 16384 16384"
    ip netns exec "tcplab-monbench-$slow" sh -c 'echo "4096 16384 16384" > /proc/sys/net/ipv4/tcp_rmem'
    injected=$(date +%s%3N)
  fi
  sleep 10
done
wait "$monitor_pid" 2>/dev/null || true
monitor_pid=
"$bin" monitor alerts --db "$work/m.db" --all --json > "$work/alerts.json"
tail -3 "$work/monitor.log"
python3 - "$work" "$hosts" "$every_s" "$slow" "$injected" "$killed" "$agent_down" "$agent_up" "$TCPLAB_STATE_DIR/goals.json" <<'PY'
import json, sqlite3, sys
work, hosts, every_s, slow, injected_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
killed, agent_down, agent_up, dest = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), sys.argv[9]
samples = [tuple(map(int, l.split())) for l in open(f"{work}/samples") if l.strip()]
rss = [s[1] for s in samples if s[1] > 0]
db = [s[2] for s in samples]
half = len(samples) // 2
con = sqlite3.connect(f"{work}/m.db")
runs = con.execute("SELECT src, dst, idx, outcome FROM monitor_run").fetchall()
slots = {}
for src, dst, idx, outcome in runs:
    slots.setdefault((src, dst), []).append(idx)
# No run lost or counted twice: each slot's indices are 0..n-1 exactly.
gaps = sum(1 for idx in slots.values() if sorted(idx) != list(range(len(idx))))
failed = sum(1 for r in runs if r[3] == "failed")
alerts = json.load(open(f"{work}/alerts.json"))
toward = [a for a in alerts if a["dst"] == slow]
other = [a for a in alerts if a["dst"] != slow]
affected = hosts - 1
delays = sorted((a["opened_ms"] - injected_ms) / 1e3 / every_s for a in toward if a["opened_ms"] >= injected_ms)
causes = {}
for a in toward:
    c = (a.get("evidence") or {}).get("cause", {"state": "pending"})
    key = c.get("id", c["state"])
    causes[key] = causes.get(key, 0) + 1
print(f"runs: {len(runs)} over {len(slots)} pairs, {failed} without a result; slots with a gap or a double: {gaps}")
print(f"monitor RSS: first half max {max(rss[:half] or [0]) / 1024:.1f} MiB, second half max {max(rss[half:] or [0]) / 1024:.1f} MiB")
print(f"database: {db[-1] / 1e6:.2f} MB at the end ({len(runs)} runs)")
print(f"pairs toward {slow}: {len(toward)} alerts of {affected} pairs; flagged after {', '.join(f'{d:.1f}' for d in delays)} intervals")
print(f"their causes: {causes}")
print(f"alerts on the other {hosts * (hosts - 1) - affected} pairs (false alarms): {len(other)}")
for a in other:
    print(f"  false alarm: {a['src']} -> {a['dst']} {a['figure']} at {(a['opened_ms'] - injected_ms) / 1e3:.0f} s from the injection")
goals = [
    {"id": "monitor_flagged", "label": f"pairs toward the slowed host flagged within two intervals, of {affected}",
     "kind": "count", "target": "all",
     "tcplab": {"name": "flagged in time", "rounds": [int(d <= 2.0) for d in delays] + [0] * (affected - len(delays)),
                "count": sum(d <= 2.0 for d in delays), "of": affected}},
    {"id": "monitor_cause", "label": "of those alerts, the doctor's cause is rwnd_limited", "kind": "count",
     "target": "all", "tcplab": {"name": "right cause", "rounds": [int(causes.get("rwnd_limited", 0) > i) for i in range(len(toward))],
                                 "count": causes.get("rwnd_limited", 0), "of": len(toward)}},
    {"id": "monitor_false_alarms", "label": f"alerts on the {hosts * (hosts - 1) - affected} untouched pairs", "kind": "count",
     "target": "none", "tcplab": {"name": "false alarms", "rounds": [1] * len(other), "count": len(other),
                                  "of": hosts * (hosts - 1) - affected}},
    {"id": "monitor_rss", "label": "the monitor's peak memory (MiB), first half and second half", "unit": "MiB",
     "better": "lower", "target": "no growth",
     "tcplab": {"name": "second half", "rounds": [round(max(rss[half:] or [0]) / 1024, 1)]},
     "peer": {"name": "first half", "rounds": [round(max(rss[:half] or [0]) / 1024, 1)]}},
    {"id": "monitor_db", "label": f"database size at the end (MB), {len(runs)} runs", "unit": "MB", "better": "lower",
     "target": "bounded by --keep and --max-runs",
     "tcplab": {"name": "database", "rounds": [round(db[-1] / 1e6, 2)]}},
    {"id": "monitor_lost", "label": "slots with a lost or doubled run across a SIGKILL and an agent restart", "kind": "count",
     "target": "none", "tcplab": {"name": "gaps or doubles", "rounds": [1] * gaps, "count": gaps, "of": len(slots)}},
]
json.dump(goals, open(dest, "w"))
PY
res_param events "monitor SIGKILLed at ${killed}s; agent of $victim down at ${agent_down}s, up at ${agent_up}s; $slow slowed at half"
res_goals "$TCPLAB_STATE_DIR/goals.json"
res_end
