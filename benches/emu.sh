#!/usr/bin/env bash
# The emulator against the kernel bridge, side by side, on the 3-host path lab (MTU 1500, offloads
# off; and with offloads on, the emulator in its GSO-aware mode): throughput (iperf3 TCP), 64-byte packet rate (iperf3 UDP), delay accuracy (ping and TCP
# request/response, idle and under a reverse bulk flow), rate conformance, Bernoulli loss, jitter.
# Usage: sudo benches/emu.sh [SECONDS]   (default 10 s per throughput test). Installs iperf3 and ping.
# ROUNDS=N repeats the no-impairment throughput pair N times, alternating the order.
# ONLY="delay loss" runs only those sections (throughput offloads delay rate loss jitter).
# RR_SECS=N: length of each request/response probe in the delay section (default 10 s).
# Writes every figure to benches/results/emu.json (RESULTS_DIR=DIR to write elsewhere); a run
# limited by ONLY writes only its sections there, and says so in the file.
set -euo pipefail
secs=${1:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/emu_lib.sh
source "$root/benches/emu_lib.sh"
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
res_begin emu "the link emulator against the kernel bridge on the 3-host path lab: throughput, 64-byte frames, offloads, delay accuracy, rate, loss, jitter" "ROUNDS ONLY RR_SECS TCPLAB" "$@"
res_param seconds "$secs"; res_param rounds "${ROUNDS:-1}"; res_param sections "${ONLY:-throughput offloads delay rate loss jitter}"
res_param rr_seconds "${RR_SECS:-10}"; res_param iperf3 "$(iperf3 --version | head -1 | cut -d' ' -f2)"
[ -n "${TCPLAB:-}" ] && res_param tcplab_binary "$TCPLAB"

tcp_gbps() { # lab -> Gbit/s received
  serve "$1"
  ex "$1" client iperf3 -c $SERVER -t "$secs" -O 1 -J | pyjson 'round(d["end"]["sum_received"]["bits_per_second"]/1e9, 3)'
  wait
}

udp64() { # lab -> "received sent lost%": thousand packets/s with 18-byte payloads (64-byte frames with FCS)
  serve "$1"
  ex "$1" client iperf3 -c $SERVER -u -b 0 -l 18 -t 5 -J | pyjson '"%.1f %.1f %.1f" % (d["end"]["sum"]["packets"]*(1-d["end"]["sum"]["lost_percent"]/100)/d["end"]["sum"]["seconds"]/1e3, d["end"]["sum"]["packets"]/d["end"]["sum"]["seconds"]/1e3, d["end"]["sum"]["lost_percent"])'
  wait
}

# The emulator's own counters for one lab (elapsed_ns and per-direction frames/bytes/drops).
snap() { "$T" lab status "$1" --json | pyjson 'json.dumps(d["emulators"]["'"$1"'"]["counters"])'; }
# Between two snapshots: the forward direction's delivered rate and its loss-model drops.
delta() { python3 -c '
import json,sys
a,b=json.loads(sys.argv[1]),json.loads(sys.argv[2])
f=lambda k: b["forward"][k]-a["forward"][k]
dt=(b["elapsed_ns"]-a["elapsed_ns"])/1e9
drop=lambda k: b["forward"]["drops"][k]-a["forward"]["drops"][k]
print(json.dumps({"seconds":round(dt,3),"frames_in":f("frames_in"),"frames_out":f("frames_out"),
  "mbit_out":round(f("bytes_out")*8/dt/1e6,2),"lost":drop("loss"),
  "queue_full":drop("queue_full"),"ring_overflow":drop("ring_overflow")}))' "$1" "$2"; }


echo "# $(date -u +%F) $(uname -r), $(nproc) CPUs; iperf3 $(iperf3 --version | head -1 | cut -d' ' -f2)"

if want throughput; then
echo "## throughput, no impairment (${secs}s iperf3 TCP, client->server)"
up kb --bridge kernel; up eb --bridge emu
# ROUNDS=N measures both N times, alternating which goes first (whichever runs second gains a few
# per cent on this machine), and summarises the per-round ratios.
# Each round also prints the CPU time the hypervisor took from this VM (steal, from /proc/stat):
# the emulator uses both vCPUs and the kernel bridge about one, so stolen time costs it more.
cpu_line() { head -1 /proc/stat; }
ratios=()
res_goal throughput label="throughput, no impairment (iperf3 TCP, ${secs} s)" unit=Gbit/s better=higher \
  tcplab.name="emulator" peer.name="kernel bridge" target="at least 0.9x the kernel bridge"
for round in $(seq 1 "${ROUNDS:-1}"); do
  c0=$(cpu_line)
  if [ $((round % 2)) = 1 ]; then k=$(tcp_gbps kb); e=$(tcp_gbps eb); else e=$(tcp_gbps eb); k=$(tcp_gbps kb); fi
  r=$(python3 -c "print(round($e/$k,3))"); ratios+=("$r")
  res_round throughput tcplab "$e"; res_round throughput peer "$k"
  echo "round $round: kernel bridge  ${k} Gbit/s, emulator ${e} Gbit/s, ratio ${r} (load $(cut -d' ' -f1 /proc/loadavg), steal $(steal_pct "$c0" "$(cpu_line)")%)"
done
if [ "${ROUNDS:-1}" -gt 1 ]; then
  python3 -c 'import sys,statistics as s; r=sorted(float(x) for x in sys.argv[1:]); print(f"ratio over {len(r)} rounds: median {s.median(r):.3f}, geometric mean {s.geometric_mean(r):.3f}, range {r[0]:.3f}-{r[-1]:.3f}, {sum(x>=0.9 for x in r)} of {len(r)} at or above 0.9")' "${ratios[@]}"
fi
# 64-byte frames, unthrottled sender. With the kernel bridge the sender's own system call runs
# the bridge and the receiver's stack, so the sender slows to what the receiver takes. With the
# emulator the three run apart: the emulator's counters say what it forwarded, iperf3 what the
# receiving application read (the rest overflowed its socket buffer, or the emulator's ring).
read -r kr ks kl <<< "$(udp64 kb)"
a=$(snap eb); read -r er es el <<< "$(udp64 eb)"; b=$(snap eb)
fw=$(delta "$a" "$b" | pyjson '"%.1f %d" % (d["frames_out"]/5e3, d["ring_overflow"])')
read -r ef eo <<< "$fw"
echo "64-byte frames, kpps: kernel bridge received ${kr} (sent ${ks}, lost ${kl}%); emulator received ${er} (sent ${es}, lost ${el}%), forwarded ${ef} (ring overflow ${eo} frames)"
echo "  ratios to the kernel bridge's received rate: emulator received $(python3 -c "print(round($er/$kr,3))"), forwarded $(python3 -c "print(round($ef/$kr,3))")"
res_goal udp64 label="64-byte frames (iperf3 UDP, 18-byte payload, unthrottled)" unit=kpps better=higher \
  tcplab.name="emulator, frames forwarded" peer.name="kernel bridge, frames received" \
  emulator_received_kpps="$er" emulator_sent_kpps="$es" ring_overflow="$eo" peer_sent_kpps="$ks"
res_round udp64 tcplab "$ef"; res_round udp64 peer "$kr"
kb_base=$(ping_stats kb 200 0.01); eb_base=$(ping_stats eb 200 0.01)
echo "base RTT (ping median p99): kernel ${kb_base}; emulator ${eb_base}"
down kb; down eb

fi

if want offloads; then
echo "## throughput with offloads on (TSO/GSO/GRO; the emulator in its GSO-aware mode)"
up kbo --bridge kernel --offloads on; up ebo --bridge emu --offloads on
k=$(tcp_gbps kbo); e=$(tcp_gbps ebo)
echo "kernel bridge  ${k} Gbit/s"
echo "emulator (GSO) ${e} Gbit/s   ratio $(python3 -c "print(round($e/$k,3))")"
res_goal offloads label="throughput, offloads on (the emulator in its GSO-aware mode)" unit=Gbit/s better=higher \
  tcplab.name="emulator (GSO)" peer.name="kernel bridge"
res_round offloads tcplab "$e"; res_round offloads peer "$k"
down kbo; down ebo

fi

if want delay; then
echo "## delay accuracy: --delay 10ms each way (target: median and p99 within 0.1 ms of 20 ms + the base RTT,"
echo "## the base measured on an unimpaired lab (--bridge emu, both workers SCHED_FIFO) with the same probes and load)"
delay_rows "keep-awake (default)"
delay_rows "keep-awake off" TCPLAB_EMU_IO='{"keep_awake":false}'
PROBE="chrt -f 20" delay_rows "default, probes SCHED_FIFO"

fi

if want rate; then
echo "## rate conformance: delivered L2 rate from the emulator's counters over 4 s of saturation"
echo "(100 Mbit/s: iperf3 UDP offered at 200 Mbit/s; 1 Gbit/s: an iperf3 TCP flow, which keeps the 1000-packet"
echo " queue backlogged; a UDP sender cannot offer 1.3 Gbit/s of 1472-byte datagrams on these two cores)"
for rate in 100mbit 1gbit; do
  up r --rate "$rate" --queue 1000
  serve r
  if [ "$rate" = 100mbit ]; then
    ex r client iperf3 -c $SERVER -u -b 200M -l 1400 -t 10 -J > "$TCPLAB_STATE_DIR/peer.json" &
  else
    ex r client iperf3 -c $SERVER -t 10 -J > "$TCPLAB_STATE_DIR/peer.json" &
  fi
  sleep 2; a=$(snap r); sleep 4; b=$(snap r)
  wait
  dl=$(delta "$a" "$b")
  echo "$rate: emulator $dl (L2 frame bytes, overhead 0)"
  if [ "$rate" = 100mbit ]; then
    rx=$(pyjson "round(d['end']['sum']['packets']*(1-d['end']['sum']['lost_percent']/100)*1442*8/d['end']['sum']['seconds']/1e6,2)" < "$TCPLAB_STATE_DIR/peer.json")
    echo "  receiver: $rx Mbit/s of L2 frames (1442 B each)"
    rx_name="iperf3 UDP receiver, L2 frames"
  else
    rx=$(pyjson "round(d['end']['sum_received']['bits_per_second']/1e6,2)" < "$TCPLAB_STATE_DIR/peer.json")
    echo "  receiver: TCP goodput $rx Mbit/s (at most 956.4 of a 1 Gbit/s wire: 1448 of 1514 bytes)"
    rx_name="iperf3 TCP receiver, goodput (at most 956.4 of 1 Gbit/s)"
  fi
  res_goal "rate_$rate" label="rate conformance, --rate $rate" unit=Mbit/s tcplab.name="emulator, delivered L2 rate" \
    peer.name="$rx_name" configured_mbit="$([ "$rate" = 100mbit ] && echo 100 || echo 1000)" target="within 1 % of the configured rate"
  res_round "rate_$rate" tcplab "$(echo "$dl" | pyjson 'd["mbit_out"]')"; res_round "rate_$rate" peer "$rx"
  down r
done

fi

if want loss; then
echo "## loss: --loss 1% Bernoulli, 100,000 UDP packets x 5 labs (the emulator's counters, and iperf3's count)"
echo "99% binomial interval for 1% of 100000: [920, 1082] (scipy binom.ppf 0.005, 0.995): expect about 1 run in 100 outside"
res_goal loss label="loss, --loss 1% Bernoulli, 100,000 UDP packets per run" unit="packets lost" \
  tcplab.name="emulator's drops" peer.name="iperf3's lost count" interval="920-1082" target="inside the 99 % binomial interval [920, 1082]"
for i in 1 2 3 4 5; do
  up l --loss 1%
  serve l
  seed=$("$T" lab status l --json | pyjson 'd["emulators"]["l"]["seed"]')
  a=$(snap l)
  got=$(ex l client iperf3 -c $SERVER -u -b 8M -l 100 -n 10000000 -J |
    pyjson 'str(d["end"]["sum"]["lost_packets"]) + " of " + str(d["end"]["sum"]["packets"])')
  b=$(snap l)
  wait
  res_round loss tcplab "$(delta "$a" "$b" | pyjson 'd["lost"]')"; res_round loss peer "${got%% *}"
  echo "seed $seed: emulator $(delta "$a" "$b" | pyjson '"dropped " + str(d["lost"]) + " of " + str(d["frames_in"]) + " frames (" + str(round(100*d["lost"]/max(d["frames_in"],1),3)) + "%)" + (" inside" if 920 <= d["lost"] <= 1082 else " OUTSIDE")'); iperf3 lost $got"
  down l
done

fi

if want jitter; then
echo "## jitter: --delay 10ms/0 --jitter 2ms/0 --jitter-dist normal (sd 2 ms one way)"
up j --delay 10ms/0 --jitter 2ms/0 --jitter-dist normal
js=$(ping_stats j 1000 0.02)
echo "ping RTT: $js   (expect sd 2.000 ms without reordering, a little lower)"
sd=${js#*sd=}; sd=${sd%% *}
res_goal jitter label="jitter, --jitter 2ms/0 --jitter-dist normal: ping RTT standard deviation" unit=ms \
  tcplab.name="emulator (ping, 1000 probes)" target="sd 2 ms within 10 %" target_ms=2.0
res_round jitter tcplab "$sd"
down j
fi
res_end
