#!/usr/bin/env bash
# The n² mesh's own cost. A star lab of N hosts (namespaces on one bridge), an authenticated
# `tcplab serve` in each, and `tcplab mesh` (the coordinator) in the first host running the msgs
# workload between every ordered pair: N·(N−1) tests in 2·(N−1) steps of N/2 disjoint pairs.
# Reports the wall time against the sum of the workloads' own times and against the sum over
# steps of each step's longest test, the harness's time per test (a test's wall time as the
# coordinator saw it, minus its workload's own time: two handshakes, the agent's setup, the
# result's way back, the database row), and the coordinator's peak memory.
# Goal: the harness adds under 20 ms per test; memory must not grow with samples.
# Usage: sudo benches/mesh.sh [HOSTS] [COUNT]      (one mesh of HOSTS hosts, COUNT messages of 1 B)
#   Without arguments, the three meshes of docs/BENCHMARKS.md (about 2 minutes): 16 hosts of
#   100000 messages as a tournament, the same one test at a time, and 64 hosts of 1000 (the
#   coordinator's memory for a large mesh). MESHES="HOSTS:COUNT:CONCURRENT ..." sets that list
#   (CONCURRENT empty for the tournament), e.g. MESHES="16:100000: 16:100000:1".
#   CONCURRENT=1 runs one test at a time instead of the tournament's N/2: each test's harness
#   time then has the machine to itself (on 2 vCPUs, 8 concurrent tests also slow each other's
#   setup and report).
#   KEEP=1 keeps the work directory (hosts file, agents' logs, the mesh's database and heatmap).
# On a shared machine hold the lab lock: flock /tmp/tcplab-lab.lock benches/mesh.sh
# Writes every mesh's figures to benches/results/mesh.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
# HOSTS:COUNT:CONCURRENT per mesh ("" for the tournament's N/2 at a time).
if [ $# -gt 0 ]; then
  meshes=("${1:-16}:${2:-100000}:${CONCURRENT:-}")
elif [ -n "${MESHES:-}" ]; then
  read -r -a meshes <<< "$MESHES"
else
  meshes=("16:100000:" "16:100000:1" "64:1000:")
fi
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
export TCPLAB_STATE_DIR=$(mktemp -d)
work=$(mktemp -d)
pids=()
stop_agents() {
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_agents
  "$bin" lab down meshbench >/dev/null 2>&1 || true
  "$bin" lab gc --all >/dev/null 2>&1 || true
  rm -rf "$TCPLAB_STATE_DIR"
  if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

res_begin mesh "the n² mesh's own cost: tcplab mesh running msgs on every ordered pair of a star lab's hosts" "CONCURRENT MESHES" "$@"
res_param meshes "${meshes[*]}"
"$bin" key gen -o "$work/agent" -C bench-agent >/dev/null 2>&1
"$bin" key gen -o "$work/coord" -C bench-coordinator >/dev/null 2>&1
# Agents accept the coordinator and each other (an agent is the client of its pair's test).
cat "$work/coord.pub" "$work/agent.pub" > "$work/clients"
agent_key=$(cat "$work/agent.pub")

one_mesh() { # hosts count concurrent
  local hosts=$1 count=$2 concurrent=$3 i ip
  "$bin" lab up --topology star --hosts "$hosts" --name meshbench >/dev/null
  : > "$work/hosts.toml"
  for i in $(seq "$hosts"); do
    ip=$("$bin" lab exec --lab meshbench "h$i" -- ip -4 -o addr show | awk '$4 ~ /^198\.1[89]\./ {sub("/.*", "", $4); print $4; exit}')
    "$bin" lab exec --lab meshbench "h$i" -- "$bin" serve --listen "$ip:5301" \
      --keys "$work/clients" --key "$work/agent" 2>"$work/serve$i.log" &
    pids+=($!)
    printf '[[host]]\nname = "h%s"\naddress = "%s"\nserver_key = "%s"\n' "$i" "$ip" "$agent_key" >> "$work/hosts.toml"
  done
  for i in $(seq "$hosts"); do
    for _ in $(seq 100); do grep -q "listening on" "$work/serve$i.log" 2>/dev/null && break; sleep 0.05; done
  done
  local tests=$((hosts * (hosts - 1)))
  echo "mesh of $hosts hosts ($tests msgs tests of $count x 1 B, ${concurrent:-tournament} at a time), $(uname -r), $(nproc) CPUs, $(date -u +%F)"
  rm -f "$work/mesh.db"
  # `ip netns exec` execs into the namespace, so time's figure is the coordinator's own.
  /usr/bin/time -f "%M" -o "$work/rss" ip netns exec tcplab-meshbench-h1 \
    "$bin" mesh --hosts "$work/hosts.toml" --workload msgs --count "$count" \
    --key "$work/coord" --db "$work/mesh.db" ${concurrent:+--concurrent "$concurrent"} \
    --json > "$work/mesh.json" 2>"$work/mesh.err" || true
  python3 - "$work/mesh.json" "$work/rss" "$hosts" "$count" "$concurrent" "$work/goals.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
hosts, count, concurrent = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
t, g = r["timing"], r["grid"]
rss_kib = int(open(sys.argv[2]).read().split()[-1])
print(f"pairs: {g['done']} done, {g['failed']} failed, {g['missing']} not run")
print(f"wall {t['wall_s']:.2f} s; workloads' own times summed {t['workload_s']:.2f} s; "
      f"longest test per step summed {t['critical_s']:.2f} s over {t['steps']} steps")
print(f"harness per test: {t['harness_per_test_ms']:.2f} ms (goal < 20 ms)")
print(f"coordinator peak RSS: {rss_kib / 1024:.1f} MiB")
reasons = {}
for row in g["cells"]:
    for cell in row:
        if cell.get("state") == "failed":
            why = cell["reason"]
            reasons[why] = reasons.get(why, 0) + 1
for why, n in sorted(reasons.items(), key=lambda x: -x[1])[:5]:
    print(f"  failed x{n}: {why}")
c = g.get("collective")
if c:
    print(f"one all-to-all meets a stall: {100*c['probability']:.3g} % "
          f"(95 % interval {100*c['low']:.3g} to {100*c['high']:.3g} %)")
mode = f"{concurrent} at a time" if concurrent else "tournament"
goal = {
    "id": f"mesh_{hosts}_{count}_{concurrent or 'tournament'}",
    "label": f"{hosts} hosts, {g['done'] + g['failed'] + g['missing']} tests of {count:,} x 1 B, {mode}",
    "unit": "s", "better": "lower", "target": "harness under 20 ms per test",
    "hosts": hosts, "count": count, "concurrent": concurrent or None, "steps": t["steps"],
    "tcplab": {"name": "the mesh's wall time", "rounds": [round(t["wall_s"], 3)]},
    "peer": {"name": "longest test per step, summed", "rounds": [round(t["critical_s"], 3)]},
    "workload_s": round(t["workload_s"], 3),
    "harness_per_test_ms": round(t["harness_per_test_ms"], 2),
    "coordinator_rss_mib": round(rss_kib / 1024, 1),
    "done": g["done"], "failed": g["failed"], "missing": g["missing"],
    "failures": [{"reason": w, "count": n} for w, n in sorted(reasons.items(), key=lambda x: -x[1])[:5]],
}
if c:
    goal["stall_chance"] = {k: c[k] for k in ("probability", "low", "high")}
json.dump([goal], open(sys.argv[6], "w"))
PY
  res_goals "$work/goals.json"
  stop_agents
  "$bin" lab down meshbench >/dev/null
}

for m in "${meshes[@]}"; do
  IFS=: read -r h c k <<< "$m"
  one_mesh "$h" "$c" "$k"
done
res_end
