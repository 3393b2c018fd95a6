#!/usr/bin/env bash
# Throughput of the emu-io bridge vs the kernel bridge on the 3-namespace path lab
# (client ─ middle ─ server, veth, offloads off, MTU 1500). Needs root, iperf3, ethtool.
#
#   crates/emu-io/bench.sh [SECONDS] [-- extra emu_bridge flags for one extra row]
#   EMU_ROWS="--rt 10;--batch 64 --rt 10" crates/emu-io/bench.sh 5   # custom rows only
#   EMU_UDP_FLAGS="--no-rt" ...   # emulator flags for the 64-byte packet-rate run
#   SKIP_GSO=1 ...                 # skip the offloads-on table (kernel bridge vs --gso)
#   SKIP_EXTRA=1 ...               # skip the packet-rate and delay tables
#   SKIP_SEGMENT=1 ...             # skip the user-space segmentation table (GSO mode + loss)
#   ONLY_SEGMENT=1 ...             # only that table (PASSES=N interleaved passes, default 2;
#                                    LOSS=1% for another loss rate, default 0.1%)
#   EMU_ALT=/path/emu_bridge ...   # segmentation table: one more --gso --loss row with this binary
#   ROUNDS=5 EMU_ROWS="...;..." ...  # interleaved: kernel bridge, then each row, 5 times, then
#                                    # a summary (mean, range, ratio to the same round's kernel)
#   IPERF_FLAGS="-A 0,1" ...          # extra iperf3 client flags for the TCP tables (here: client
#                                    # on CPU 0, server on CPU 1), kernel bridge and emulator alike
#   A row token "napi=threaded" is not an emulator flag: after the emulator started (and
#   attached XDP, which turns veth NAPI on) it writes 1 to /sys/class/net/m{0,1}/threaded.
#
# Prints one markdown row per configuration: TCP throughput (iperf3, 1 flow), and the
# emulator's lateness/verdict. Namespaces are named tlx-bench-<pid>-*, removed on exit.
set -euo pipefail
SECS=${1:-10}
shift || true
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cargo build -q --release -p tcplab-emu-io --example emu_bridge --manifest-path "$ROOT/Cargo.toml"
EMU="$ROOT/target/release/examples/emu_bridge"
P="tlx-bench-$$"; C="$P-c"; M="$P-m"; S="$P-s"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for n in "$C" "$M" "$S"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
for n in "$C" "$M" "$S"; do
  ip netns add "$n"
  ip -n "$n" link set lo up
  ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip link add c0 netns "$C" type veth peer name m0 netns "$M"
ip link add s0 netns "$S" type veth peer name m1 netns "$M"
offloads() {  # on|off on every veth end
  for nd in "$C c0" "$M m0" "$M m1" "$S s0"; do
    set -- $nd
    ip netns exec "$1" ethtool -K "$2" tso "$OFFL" gso "$OFFL" gro "$OFFL" tx "$OFFL" rx "$OFFL" >/dev/null
  done
}
OFFL=off offloads
for nd in "$C c0" "$M m0" "$M m1" "$S s0"; do
  set -- $nd
  ip -n "$1" link set "$2" up
done
ip -n "$C" addr add 198.18.0.1/24 dev c0
ip -n "$S" addr add 198.18.0.2/24 dev s0
ip netns exec "$S" iperf3 -s -p 5201 >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5

iperf() {  # prints receiver Mbit/s of a 1-flow TCP test
  ip netns exec "$C" iperf3 -c 198.18.0.2 -p 5201 -t "$SECS" -J ${IPERF_FLAGS:-} \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f" % (d["end"]["sum_received"]["bits_per_second"]/1e6))'
}

kernel_bridge() {  # prints the kernel bridge's TCP Mbit/s
  ip -n "$M" link add br0 type bridge
  ip -n "$M" link set m0 master br0
  ip -n "$M" link set m1 master br0
  ip -n "$M" link set br0 up
  sleep 1
  iperf
  ip -n "$M" link del br0
  sleep 0.5
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

emu_row() {  # $1 = label, rest = emu_bridge flags (and "napi=threaded")
  local label=$1; shift
  local out; out=$(mktemp)
  local flags=() threaded=
  for f in "$@"; do
    if [ "$f" = napi=threaded ]; then threaded=1; else flags+=("$f"); fi
  done
  ip netns exec "$M" "${EMU_BIN:-$EMU}" m0 m1 --seconds "$((SECS + 3))" "${flags[@]}" >"$out" 2>/dev/null &
  local pid=$!
  PIDS+=($pid)
  sleep 1
  if [ -n "$threaded" ]; then
    ip netns exec "$M" sh -c 'echo 1 > /sys/class/net/m0/threaded && echo 1 > /sys/class/net/m1/threaded'
  fi
  local mbps; mbps=$(iperf)
  LAST_MBPS=$mbps
  wait "$pid" || true
  local notes; notes=$(python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r, v = d["report"], d["verdict"]
f = r["forward"]
cpu = ", ".join("%s %.0f%%" % (t["name"], 100 * t["cpu_ns"] / max(t["wall_ns"], 1)) for t in r["threads"])
cut = ""
if f.get("segmented", 0) or f["drops"]["loss"]:
    cut = "%d super-packets kept whole, %d cut into %d segments (%d uncuttable), lost %d of %d segments (%.3f %%), " % (
        f.get("kept_whole", 0), f.get("segmented", 0), f.get("segments_made", 0), f.get("unsegmented", 0),
        f["drops"]["loss"], f["segments_in"], 100 * f["drops"]["loss"] / max(f["segments_in"], 1))
print("a->b %d frames (%d segments, %d direct), %slateness p50/p99/max %d/%d/%d us, ring overflow %d, CPU %s, %s" % (
    f["frames_out"], f["segments_in"], f["direct"], cut, f["lateness"]["p50_ns"] // 1000,
    f["lateness"]["p99_ns"] // 1000, f["lateness"]["max_ns"] // 1000,
    f["drops"]["ring_overflow"], cpu, "trustworthy" if v["trustworthy"] else "untrustworthy"))
PY
)
  rm -f "$out"
  echo "| emu $label | $mbps | $(python3 -c "print('%.2f' % ($mbps / max($KERNEL, 1)))") | $notes |"
}

segment_table() {  # GSO mode cutting super-packets (--loss) vs offloads off, kernel bridge between
  echo
  echo "User-space segmentation: loss ${LOSS:-0.1%} each way, 1 TCP flow (BBR), ratios to the kernel bridge with offloads on of the same pass:"
  echo
  echo "| path | TCP Mbit/s (1 flow, ${SECS}s) | ratio | emulator notes |"
  echo "|---|---|---|---|"
  for pass in $(seq "${PASSES:-2}"); do
    OFFL=on offloads
    KERNEL=$(kernel_bridge)
    echo "| kernel bridge, offloads on, pass $pass | $KERNEL | 1.00 | |"
    emu_row "--gso --loss ${LOSS:-0.1%}, offloads on (segmenting), pass $pass" --gso --loss "${LOSS:-0.1%}"
    if [ -n "${EMU_ALT:-}" ]; then
      EMU_BIN=$EMU_ALT emu_row "--gso --loss ${LOSS:-0.1%}, offloads on, $(basename "$EMU_ALT"), pass $pass" --gso --loss "${LOSS:-0.1%}"
    fi
    emu_row "--gso, offloads on, no loss (whole frames), pass $pass" --gso
    OFFL=off offloads
    emu_row "--loss ${LOSS:-0.1%}, offloads off, pass $pass" --loss "${LOSS:-0.1%}"
    local k; k=$(kernel_bridge)
    echo "| kernel bridge, offloads off, pass $pass | $k | $(python3 -c "print('%.2f' % ($k / max($KERNEL, 1)))") | |"
  done
  echo
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}
if [ -n "${ONLY_SEGMENT:-}" ]; then segment_table; exit 0; fi

echo
echo "| path | TCP Mbit/s (1 flow, ${SECS}s) | ratio | emulator notes |"
echo "|---|---|---|---|"
KERNEL=$(kernel_bridge)
echo "| kernel bridge | $KERNEL | 1.00 | |"

if [ -n "${EMU_ROWS:-}" ]; then
  # EMU_ROWS="flags;flags;..." replaces the standard rows (each row labelled by its flags).
  # ROUNDS=N repeats kernel bridge + rows N times (interleaved) and summarises.
  IFS=';' read -ra rows <<<"$EMU_ROWS"
  SUMMARY=$(mktemp)
  for round in $(seq 1 "${ROUNDS:-1}"); do
    [ "$round" -gt 1 ] && { KERNEL=$(kernel_bridge); echo "| kernel bridge, round $round | $KERNEL | 1.00 | load $(cut -d' ' -f1 /proc/loadavg) |"; }
    echo "kernel bridge	$KERNEL	$KERNEL" >>"$SUMMARY"
    for r in "${rows[@]}"; do
      emu_row "$r" $r
      echo "emu ${r:-default}	$LAST_MBPS	$KERNEL" >>"$SUMMARY"
    done
  done
  if [ "${ROUNDS:-1}" -gt 1 ]; then
    echo
    echo "Summary over ${ROUNDS} interleaved rounds (load average at end: $(cut -d' ' -f1-3 /proc/loadavg)):"
    echo
    echo "| path | mean Mbit/s | min-max | mean ratio to the same round's kernel bridge | ratios |"
    echo "|---|---|---|---|---|"
    python3 - "$SUMMARY" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    name, mbps, kern = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append((float(mbps), float(kern)))
for name, v in rows.items():
    m = [a for a, _ in v]
    r = [a / max(k, 1) for a, k in v]
    print("| %s | %.0f | %.0f-%.0f | %.2f | %s |" % (name, sum(m) / len(m), min(m), max(m),
          sum(r) / len(r), ", ".join("%.2f" % x for x in r)))
PY
  fi
  rm -f "$SUMMARY"
else
  # Interleaved twice: the default egress (sendmmsg + direct from the RX ring) and the TX ring.
  for pass in 1 2; do
    emu_row "default (sendmmsg, V2 RX, thread per direction, SCHED_FIFO 10), pass $pass"
    emu_row "TX ring (--tx ring), pass $pass" --tx ring
  done
  KERNEL2=$(kernel_bridge)
  echo "| kernel bridge (again) | $KERNEL2 | $(python3 -c "print('%.2f' % ($KERNEL2 / max($KERNEL, 1)))") | |"
fi
if [ ${#EXTRA[@]} -gt 0 ]; then emu_row "${EXTRA[*]}" "${EXTRA[@]}"; fi

if [ -z "${SKIP_GSO:-}" ]; then
  # --- Offloads ON (TSO/GSO/GRO/checksum) on every veth end: kernel bridge vs GSO mode ---
  OFFL=on offloads
  echo
  echo "Offloads on (tso gso gro tx rx on every veth end):"
  echo
  echo "| path | TCP Mbit/s (1 flow, ${SECS}s) | ratio | emulator notes |"
  echo "|---|---|---|---|"
  KERNEL_OFF=$KERNEL
  KERNEL=$(kernel_bridge)
  echo "| kernel bridge, offloads on | $KERNEL | 1.00 | |"
  emu_row "--gso, offloads on" --gso
  emu_row "--gso --rate 1gbit, offloads on" --gso --rate 1gbit
  emu_row "--gso, offloads on, pass 2" --gso
  echo "| (kernel bridge offloads off, from the first table) | $KERNEL_OFF | $(python3 -c "print('%.2f' % ($KERNEL_OFF / max($KERNEL, 1)))") | |"
  OFFL=off offloads
  KERNEL=$KERNEL_OFF
fi

if [ -z "${SKIP_SEGMENT:-}" ]; then
  KERNEL_OFF=$KERNEL
  segment_table
  KERNEL=$KERNEL_OFF
fi

[ -n "${SKIP_EXTRA:-}" ] && exit 0

# --- Packet rate with 64-byte frames (UDP, 18-byte payload), unlimited offered load --------
udp_pps() {  # receiver packets/s
  ip netns exec "$C" iperf3 -c 198.18.0.2 -p 5201 -u -b 0 -l 18 -t "$SECS" -J \
    | python3 -c 'import json,sys; s=json.load(sys.stdin)["end"]["sum"]; print("%.0f %.1f" % ((s["packets"]-s["lost_packets"])/s["seconds"], s["lost_percent"]))'
}
echo
echo "| path | 64-byte frames received/s | loss % | notes |"
echo "|---|---|---|---|"
ip -n "$M" link add br0 type bridge
ip -n "$M" link set m0 master br0
ip -n "$M" link set m1 master br0
ip -n "$M" link set br0 up
sleep 1
read -r pps loss <<<"$(udp_pps)"
echo "| kernel bridge | $pps | $loss | |"
ip -n "$M" link del br0
sleep 0.5
UOUT=$(mktemp)
ip netns exec "$M" "$EMU" m0 m1 --seconds "$((SECS + 3))" ${EMU_UDP_FLAGS:-} >"$UOUT" 2>/dev/null &
EPID=$!; PIDS+=($EPID); sleep 1
read -r pps loss <<<"$(udp_pps)"
wait "$EPID" || true
NOTE=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["report"]; f=r["forward"]; print("emulator a->b: %d frames in, %d out, %d RX ring overflow; CPU %s" % (f["frames_in"], f["frames_out"], f["drops"]["ring_overflow"], ", ".join("%s %.0f%%" % (t["name"], 100*t["cpu_ns"]/max(t["wall_ns"],1)) for t in r["threads"])))' "$UOUT")
rm -f "$UOUT"
echo "| emu ${EMU_UDP_FLAGS:-default} | $pps | $loss | $NOTE |"

# --- Delay accuracy: 10 ms each way, ping RTT vs 20 ms + base, idle and under a bulk flow ---
ping_stats() {  # avg (µs resolution, from ping's summary), median, p99, max of 200 pings at
  # 10 ms intervals (ms; ping prints single RTTs >= 10 ms with 0.1 ms resolution), replies
  ip netns exec "$C" ping -n -c 200 -i 0.01 198.18.0.2 \
    | python3 -c 'import sys
t = sys.stdin.read().splitlines()
r = sorted(float(l.split("time=")[1].split()[0]) for l in t if "time=" in l)
avg = [l.split(" = ")[1].split("/")[1] for l in t if l.startswith("rtt ")]
n = len(r)
print("%s %.3f %.3f %.3f %d" % (avg[0], r[n // 2], r[min(n - 1, int(n * 0.99))], r[-1], n) if n else "- - - - 0")'
}
ping_row() {  # $1 = label, $2 = bulk|idle, rest = emu_bridge flags
  local label=$1 mode=$2; shift 2
  local out; out=$(mktemp)
  ip netns exec "$M" "$EMU" m0 m1 --seconds 10 "$@" >"$out" 2>/dev/null &
  local epid=$!; PIDS+=($epid); sleep 1
  local ipid=
  if [ "$mode" = bulk ]; then
    ip netns exec "$C" iperf3 -c 198.18.0.2 -p 5201 -R -t 6 >/dev/null 2>&1 &
    ipid=$!; PIDS+=($ipid); sleep 1
  fi
  read -r avg med p99 mx n <<<"$(ping_stats)"
  [ -n "$ipid" ] && { wait "$ipid" || true; }
  wait "$epid" || true
  local late; late=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["report"]["reverse"]; l=r["lateness"]; print("%d/%d/%d us, %d frames" % (l["p50_ns"]//1000, l["p99_ns"]//1000, l["max_ns"]//1000, r["frames_out"]))' "$out")
  rm -f "$out"
  echo "| $label | $avg | $med | $p99 | $mx | $n | $late |"
  LAST_MED=$avg
}
echo
echo "| emu, ping client->server (200 x 10 ms) | avg ms | median ms | p99 ms | max ms | replies | b->a lateness p50/p99/max |"
echo "|---|---|---|---|---|---|---|"
ping_row "0 ms (base)" idle
BASE=$LAST_MED
ping_row "10 ms/10 ms, idle" idle --delay 10ms
ping_row "10 ms/10 ms, bulk TCP server->client" bulk --delay 10ms
ping_row "10 ms/10 ms + 1 Gbit/s, bulk TCP server->client" bulk --delay 10ms --rate 1gbit
ping_row "10 ms/10 ms, bulk, TX ring" bulk --delay 10ms --tx ring
echo "(target: 20 ms + base $BASE ms, within 0.1 ms; load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
