#!/usr/bin/env bash
# Can the doctor's and the demo's runs at 1 Gbit/s be trusted on this machine? Runs each N
# times and prints how many runs the emulator's verdict judged trustworthy, per workload.
#
#   doctor: the doctor's default battery (stream, msgs, msgs size sweep, latency under load, rr, crr) on a lab built
#           for it, 1 Gbit/s and 5 ms each way with large buffers (a bulk flow at the rate):
#           `tcplab doctor --topology path --delay 5ms --rate 1gbit --sysctl all:tcp_rmem/wmem
#           max 32 MiB --budget 30s --json`. Each workload's own verdict is in its result's
#           facts (`facts.emulator.fidelity`); the battery's verdict over all of them together,
#           and whether the doctor reported `untrustworthy.emulator`, are counted too.
#   demo:   `tcplab demo` (1 Gbit/s, 15 ms each way, 0.01 % loss: its doctor battery with 2008's
#           buffers, then tune's race and verification of stream runs, each a study run with its
#           verdict in the study database).
#
# Usage: sudo benches/trust.sh [RUNS] [TCPLAB]
#   RUNS    runs of each part (default 10; DEMO_RUNS=N sets the demo's apart)
#   TCPLAB  the tcplab binary to measure (default: this tree's release build, built first), e.g.
#           another build's, to measure before and after a change on the same machine.
# Environment:
#   ONLY="doctor demo"  the parts to run (default both)
#   FLAGS="--offloads off"  flags added to every doctor and demo command (builds with --offloads)
#   BUDGET=30s          the doctor's --budget;  DEMO_BUDGET=3m  the demo's
#   LOCK=FILE           hold `flock FILE` around each run (one doctor or one demo), so that other
#                       users of a shared machine who take the same lock never run labs beside it
# Each run's line also gives the load average at its start and, over the run, how much CPU other
# processes took (`top` once a second, everything but tcplab's own processes: other users'
# builds, say) and the share the hypervisor took (steal): a run beside other work, or on a host
# that stalls the VM, says so.
# Writes every run's verdicts to benches/results/trust.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
runs=${1:-10}
demo_runs=${DEMO_RUNS:-$runs}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
if [ -n "${2:-}" ]; then
  T=$2
else
  cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
  T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
fi
export TCPLAB_STATE_DIR=$(mktemp -d)
work=$(mktemp -d)
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$TCPLAB_STATE_DIR" "$work"' EXIT
# shellcheck disable=SC2206 # FLAGS is a list of flags
flags=(${FLAGS:-})
# "steal N %" between two `head -1 /proc/stat` lines.
steal_share() { python3 -c 'import sys; a=[int(x) for x in sys.argv[1].split()[1:]]; b=[int(x) for x in sys.argv[2].split()[1:]]; d=[y-x for x,y in zip(a,b)]; print(f"steal {100*d[7]/max(sum(d),1):.1f} %")' "$1" "$2"; }
# "others N % of a CPU (max M %)" from a `top -b` log: the %CPU of every process but tcplab's
# own (its binary, its keep-awake spinners), top and the kernel threads that serve the lab's
# traffic (ksoftirqd, kworker), per sample after the first, averaged.
others() { python3 -c '
import sys
frames, cur = [], None
for line in open(sys.argv[1]):
    if line.startswith("top -"):
        cur = 0.0; frames.append(cur); continue
    f = line.split()
    if len(f) >= 12 and f[0].isdigit() and not f[11].startswith(("tcplab", "top", "ksoftirqd", "kworker", "rcu_", "migration")):
        try: frames[-1] += float(f[8])
        except ValueError: pass
frames = frames[1:]
print(f"others {sum(frames)/len(frames):.0f} % of a CPU (max {max(frames):.0f} %)" if frames else "others -")' "$1"; }
# measured FILE CMD...: runs CMD (its failure is the result's to say) and writes the load
# average before it and what else ran during it to FILE.
measured() {
  local f=$1 s0 l0 mon; shift
  s0=$(head -1 /proc/stat); l0=$(cut -d' ' -f1 /proc/loadavg)
  top -b -d 1 -w 200 >"$f.top" 2>/dev/null &
  mon=$!
  "$@" || true
  kill "$mon" 2>/dev/null || true
  wait "$mon" 2>/dev/null || true
  echo "load $l0, $(others "$f.top"), $(steal_share "$s0" "$(head -1 /proc/stat)")" >"$f"
}
export -f measured steal_share others
# locked FILE CMD...: `measured` under `flock $LOCK` when LOCK is set (the wait is not measured).
locked() {
  if [ -n "${LOCK:-}" ]; then flock "$LOCK" bash -c 'measured "$@"' _ "$@"; else measured "$@"; fi
}
echo "# $(date -u '+%F %H:%M') tcplab: $T ($("$T" --version 2>/dev/null || echo '?')); flags: ${FLAGS:-none}; $(nproc) CPUs"
res_begin trust "whether the doctor's and the demo's runs at 1 Gbit/s keep their schedule on this machine: the emulator's verdicts, run by run" "ONLY FLAGS BUDGET DEMO_BUDGET DEMO_RUNS" "$@"
res_param runs "$runs"; res_param demo_runs "$demo_runs"; res_param parts "${ONLY:-doctor demo}"
res_param flags "${FLAGS:-none}"; res_param budget "${BUDGET:-30s}"; res_param demo_budget "${DEMO_BUDGET:-3m}"
[ -n "${2:-}" ] && res_param tcplab_binary "$2"

doctor_part() {
  local i out
  for i in $(seq 1 "$runs"); do
    out="$work/doctor-$i.json"
    locked "$work/doctor-$i.shares" "$T" doctor --topology path --delay 5ms --rate 1gbit \
      --sysctl all:net.ipv4.tcp_rmem="4096 131072 33554432" \
      --sysctl all:net.ipv4.tcp_wmem="4096 16384 33554432" \
      --budget "${BUDGET:-30s}" --json "${flags[@]}" >"$out" 2>"$work/doctor-$i.err"
    python3 - "$out" "$i" "$(cat "$work/doctor-$i.shares")" <<'EOF'
import json, sys
path, i, shares = sys.argv[1:]
try:
    d = json.load(open(path))
    b = d["battery"]
except Exception as e:
    print(f"doctor {i}: no result ({e})"); sys.exit(0)
parts = []
for w in ("stream", "msgs", "msgs_sweep", "rrul", "rr", "crr"):
    f = ((b.get(w) or {}).get("facts", {}).get("emulator") or {}).get("fidelity")
    parts.append(f"{w} {'-' if f is None else ('ok' if f['trustworthy'] else 'UNTRUSTWORTHY')}")
s = (b.get("stream") or {})
mbps = (s.get("summary", {}).get("throughput_bps") or 0) / 1e6
cpu = s.get("server_cpu_s_per_gb")
whole = b.get("fidelity")
finding = any(f.get("id") == "untrustworthy.emulator" for f in d.get("findings", []))
print(f"doctor {i}: " + ", ".join(parts)
      + f"; battery as a whole {'-' if whole is None else ('ok' if whole['trustworthy'] else 'UNTRUSTWORTHY')}"
      + f"; finding untrustworthy.emulator {'yes' if finding else 'no'}"
      + f"; stream {mbps:.0f} Mbit/s, server CPU {'-' if cpu is None else f'{cpu:.2f}'} s/GB"
      + f"; {shares}")
for w in ("stream", "msgs", "msgs_sweep", "rrul", "rr", "crr"):
    f = ((b.get(w) or {}).get("facts", {}).get("emulator") or {}).get("fidelity")
    if f and not f["trustworthy"]:
        print(f"  {w}: " + "; ".join(f["reasons"]))
EOF
  done
  python3 - "$work" "$runs" <<'EOF'
import json, sys, os
work, runs = sys.argv[1], int(sys.argv[2])
ws = ("stream", "msgs", "msgs_sweep", "rrul", "rr", "crr")
ok = {w: [] for w in ws}; every, whole, finding = [], [], []
for i in range(1, runs + 1):
    try:
        d = json.load(open(os.path.join(work, f"doctor-{i}.json"))); b = d["battery"]
    except Exception:
        continue
    all_ok = True
    for w in ws:
        f = ((b.get(w) or {}).get("facts", {}).get("emulator") or {}).get("fidelity")
        if f is None:
            continue
        ok[w].append(int(f["trustworthy"])); all_ok &= f["trustworthy"]
    every.append(int(all_ok))
    whole.append(int(bool((b.get("fidelity") or {}).get("trustworthy"))))
    finding.append(int(any(f.get("id") == "untrustworthy.emulator" for f in d.get("findings", []))))
done = len(every)
print("doctor, trustworthy runs per workload: " + ", ".join(f"{w} {sum(ok[w])} of {len(ok[w])}" for w in ws))
print(f"doctor, runs whose every workload was trustworthy: {sum(every)} of {done}; the battery judged as a whole: {sum(whole)} of {done}; untrustworthy.emulator reported in {sum(finding)} of {done}")
goal = lambda gid, label, rounds, **kw: {"id": gid, "kind": "count", "label": label,
                                         "tcplab": {"name": "tcplab doctor at 1 Gbit/s", "rounds": rounds}, **kw}
goals = [goal("doctor_battery", "doctor: the battery as a whole, judged for what the doctor reads", whole,
              target="at least 9 of 10 keep their schedule"),
         goal("doctor_no_finding", "doctor: no untrustworthy.emulator reported", [1 - x for x in finding]),
         goal("doctor_every_workload", "doctor: every workload's own verdict trustworthy", every)]
goals += [goal(f"doctor_{w}", f"doctor: {w}'s own verdict", ok[w]) for w in ws]
json.dump(goals, open(os.path.join(work, "doctor-goals.json"), "w"))
EOF
  res_goals "$work/doctor-goals.json"
}

demo_part() {
  local i dir
  for i in $(seq 1 "$demo_runs"); do
    dir="$work/demo-$i"
    locked "$work/demo-$i.shares" "$T" demo --dir "$dir" --budget "${DEMO_BUDGET:-3m}" \
      "${flags[@]}" >"$work/demo-$i.out" 2>"$work/demo-$i.err"
    python3 - "$dir" "$work/demo-$i.err" "$i" "$(cat "$work/demo-$i.shares")" <<'EOF'
import sqlite3, sys, os
dir, err, i, shares = sys.argv[1:]
finding = "untrustworthy.emulator" in open(err).read()
line, reasons = [], []
tot_ok = tot = 0
for db in ("tune.db", "tune-verify.db"):
    p = os.path.join(dir, db)
    if not os.path.exists(p):
        continue
    rows = sqlite3.connect(p).execute("SELECT trustworthy, fidelity_reasons FROM run WHERE status = 'ok'").fetchall()
    n_ok = sum(r[0] for r in rows)
    tot_ok += n_ok; tot += len(rows)
    line.append(f"{db} {n_ok} of {len(rows)} stream runs trustworthy")
    reasons += [r[1] for r in rows if not r[0]]
print(f"demo {i}: " + ("; ".join(line) or "no study") + f"; doctor's untrustworthy.emulator {'yes' if finding else 'no'}; {shares}")
for r in reasons[:3]:
    print(f"  {r}")
open(os.path.join(os.path.dirname(dir), f"demo-{i}.sum"), "w").write(f"{tot_ok} {tot} {int(finding)}\n")
EOF
  done
  python3 - "$work" "$demo_runs" <<'EOF'
import json, sys, os
work, runs = sys.argv[1], int(sys.argv[2])
ok = tot = finding = 0; clean, streams = [], []
for i in range(1, runs + 1):
    p = os.path.join(work, f"demo-{i}.sum")
    if not os.path.exists(p):
        continue
    a, b, f = map(int, open(p).read().split())
    ok += a; tot += b; finding += f; clean.append(int(a == b and b > 0 and not f)); streams += [1] * a + [0] * (b - a)
print(f"demo, stream study runs trustworthy: {ok} of {tot}; demos with every study run trustworthy and no untrustworthy.emulator finding: {sum(clean)} of {len(clean)}; untrustworthy.emulator reported in {finding} of {len(clean)}")
name = {"name": "tcplab demo"}
goals = [{"id": "demo_clean", "kind": "count", "target": "at least 9 of 10 keep their schedule",
          "label": "demos whose every study run was trustworthy and whose doctor reported no untrustworthy.emulator",
          "tcplab": {**name, "rounds": clean}},
         {"id": "demo_stream_runs", "kind": "count", "label": "the demos' stream study runs trustworthy (tune's race and verification)",
          "tcplab": {**name, "rounds": streams}}]
json.dump(goals, open(os.path.join(work, "demo-goals.json"), "w"))
EOF
  res_goals "$work/demo-goals.json"
}

for part in ${ONLY:-doctor demo}; do
  "${part}_part"
done
res_end
