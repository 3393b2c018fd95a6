#!/usr/bin/env bash
# tcplab's workloads against the peers a user would otherwise pick, side by side in one run, on the
# same lab: stream vs iperf3 (pair and through the emulator), rr vs sockperf ping-pong (TCP, 64 B),
# msgs 100,000 x 1 byte with and without per-message timestamps, crr vs a minimal C loop.
# Usage: sudo benches/load.sh [SECONDS] [REPS]   (defaults 10 and 5). Installs iperf3 and sockperf
# from Debian. Throughput and ping-pong rates on 2 shared cores swing by +-30% from run to run
# (CPU placement, other work), so each pair of tools runs REPS times alternately and the medians
# are compared, with the spread (min-max) beside them; the load average is printed at both ends.
# Writes every run's figures to benches/results/load.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
secs=${1:-10}
reps=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v sockperf >/dev/null || need+=(sockperf)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
work=$(mktemp -d)
gcc -O2 -o "$work/crr_baseline" "$root/benches/crr_baseline.c"
export TCPLAB_STATE_DIR="$work/state"
trap '"$T" lab gc --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
S=198.18.0.101
ex() { local lab=$1 host=$2; shift 2; "$T" lab exec --lab "$lab" "$host" -- "$@"; }
j() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
ratio() { python3 -c "print(round($1/$2, 3))"; }

echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(date -u +%F) $(uname -r), $(nproc) CPUs; iperf3 $(iperf3 --version | head -1 | cut -d' ' -f2), sockperf $(sockperf --version 2>&1 | grep -o 'version [0-9.]*' | head -1)"
res_begin load "tcplab's workloads against the tools a user would otherwise pick, alternating on the same labs" "" "$@"
res_param seconds "$secs"; res_param reps "$reps"
res_param iperf3 "$(iperf3 --version | head -1 | cut -d' ' -f2)"; res_param sockperf "$(sockperf --version 2>&1 | grep -o 'version [0-9.]*' | head -1 | cut -d' ' -f2)"
res_goal stream_p label="stream, pair (direct veth)" unit=Gbit/s better=higher tcplab.name="tcplab stream" peer.name=iperf3 target="ratio at least 1.0"
res_goal stream_e label="stream, path through the emulator" unit=Gbit/s better=higher tcplab.name="tcplab stream" peer.name=iperf3 target="ratio at least 1.0"
res_goal rr_p50 label="rr, TCP 64 B ping-pong, p50" unit=µs better=lower tcplab.name="tcplab rr" peer.name="sockperf ping-pong" target="within 5 %"
res_goal rr_rate label="rr, transactions/s" unit=/s better=higher tcplab.name="tcplab rr" peer.name="sockperf ping-pong" target="at least sockperf's"
res_goal rr_p999 label="rr, p99.9" unit=µs better=lower tcplab.name="tcplab rr" peer.name="sockperf ping-pong" target="reported"
res_goal msgs label="msgs 100,000 x 1 B, pair, NODELAY: with per-message timestamps against without" unit=s better=lower \
  tcplab.name="with timestamps" peer.name="--no-timestamps" target="under 1 s; timestamps cost under 5 %"
res_goal crr label="crr, 1 B each way, 1 connection at a time" unit=/s better=higher tcplab.name="tcplab crr" \
  peer.name="a minimal C loop (benches/crr_baseline.c)" target="at least 0.9x"
"$T" lab up --topology pair --name p >/dev/null
"$T" lab up --topology path --name e --bridge emu >/dev/null

median() { python3 -c "import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
spread() { python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(f'{min(v):g}-{max(v):g}')" "$@"; }
for lab in p e; do
  label=$([ $lab = p ] && echo "pair (direct veth)" || echo "path through the emulator")
  ip3s=(); tls=()
  for _ in $(seq "$reps"); do
    ex $lab server iperf3 -s -1 -B $S >/dev/null 2>&1 & sleep 0.3
    ip3s+=("$(ex $lab client iperf3 -c $S -t "$secs" -O 1 -J | j 'round(d["end"]["sum_received"]["bits_per_second"]/1e9, 3)')")
    wait
    tls+=("$("$T" stream --lab $lab -t "$secs" --omit 1 --json | j 'round(d["summary"]["throughput_bps"]/1e9, 3)')")
  done
  ip3=$(median "${ip3s[@]}"); tl=$(median "${tls[@]}")
  res_round "stream_$lab" tcplab "${tls[@]}"; res_round "stream_$lab" peer "${ip3s[@]}"
  echo "stream vs iperf3, $label (Gbit/s, median of $reps alternating runs [spread]): tcplab $tl [$(spread "${tls[@]}")], iperf3 $ip3 [$(spread "${ip3s[@]}")], ratio $(ratio "$tl" "$ip3")"
done

# rr vs sockperf ping-pong, alternately. The sockperf server is started directly (not through
# the `ex` function, whose subshell would be $!): `lab exec` becomes sockperf, so $! is the
# server itself and the kill below ends it. sockperf's rate is its valid-duration rate (after
# its 400 ms warm-up); tcplab's counts the whole run.
sp_p50s=(); sp_p999s=(); sp_tpss=(); rr_p50s=(); rr_p999s=(); rr_tpss=()
for _ in $(seq "$reps"); do
  "$T" lab exec --lab p server -- sockperf sr --tcp -i $S -p 11111 >/dev/null 2>&1 &
  sp_pid=$!
  sleep 0.5
  sp=$(ex p client sockperf pp --tcp -i $S -p 11111 -m 64 -t "$secs" --full-rtt 2>&1 || true)
  kill $sp_pid 2>/dev/null || true; wait $sp_pid 2>/dev/null || true
  sp_p50s+=("$(echo "$sp" | sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' | tail -1)")
  sp_p999s+=("$(echo "$sp" | sed -n 's/.*percentile 99.900 = *\([0-9.]*\).*/\1/p' | tail -1)")
  sp_obs=$(echo "$sp" | sed -n 's/.*Valid Duration.*SentMessages=\([0-9]*\).*/\1/p' | tail -1)
  sp_dur=$(echo "$sp" | sed -n 's/.*Valid Duration\] RunTime=\([0-9.]*\) sec.*/\1/p' | tail -1)
  sp_tpss+=("$(python3 -c "print(round(${sp_obs:-0}/${sp_dur:-1}))")")
  rr=$("$T" rr --lab p --req 64 --resp 64 --nodelay -t "$secs" --json)
  rr_p50s+=("$(echo "$rr" | j 'd["summary"]["latency_us"]["p50"]')")
  rr_p999s+=("$(echo "$rr" | j 'd["summary"]["latency_us"]["p999"]')")
  rr_tpss+=("$(echo "$rr" | j 'round(d["summary"]["transactions_per_s"])')")
done
rr_p50=$(median "${rr_p50s[@]}"); sp_p50=$(median "${sp_p50s[@]}")
rr_p999=$(median "${rr_p999s[@]}"); sp_p999=$(median "${sp_p999s[@]}")
rr_tps=$(median "${rr_tpss[@]}"); sp_tps=$(median "${sp_tpss[@]}")
res_round rr_p50 tcplab "${rr_p50s[@]}"; res_round rr_p50 peer "${sp_p50s[@]}"
res_round rr_p999 tcplab "${rr_p999s[@]}"; res_round rr_p999 peer "${sp_p999s[@]}"
res_round rr_rate tcplab "${rr_tpss[@]}"; res_round rr_rate peer "${sp_tpss[@]}"
echo "rr vs sockperf ping-pong (TCP, 64 B, full RTT; medians of $reps alternating runs [spread]):"
echo "  tcplab   p50 ${rr_p50} us [$(spread "${rr_p50s[@]}")]  p99.9 ${rr_p999} us [$(spread "${rr_p999s[@]}")]  ${rr_tps}/s [$(spread "${rr_tpss[@]}")]"
echo "  sockperf p50 ${sp_p50} us [$(spread "${sp_p50s[@]}")]  p99.9 ${sp_p999} us [$(spread "${sp_p999s[@]}")]  ${sp_tps}/s [$(spread "${sp_tpss[@]}")]"
echo "  p50 ratio $(ratio "$rr_p50" "$sp_p50"), p99.9 ratio $(ratio "$rr_p999" "$sp_p999"), rate ratio $(ratio "$rr_tps" "$sp_tps")"

# Alternating, REPS of each: one run of each swung from -8 % to +43 % between whole runs.
ons=() offs=()
for _ in $(seq "$reps"); do
  ons+=("$("$T" msgs --lab p --nodelay --json | j 'd["summary"]["total_s"]')")
  offs+=("$("$T" msgs --lab p --nodelay --no-timestamps --json | j 'd["summary"]["total_s"]')")
done
res_round msgs tcplab "${ons[@]}"; res_round msgs peer "${offs[@]}"
on=$(printf '%s\n' "${ons[@]}" | sort -n | sed -n "$(( (reps + 1) / 2 ))p")
off=$(printf '%s\n' "${offs[@]}" | sort -n | sed -n "$(( (reps + 1) / 2 ))p")
echo "msgs 100,000 x 1 B (pair, NODELAY), medians of $reps alternating runs: ${on} s with per-message timestamps [$(spread "${ons[@]}")], ${off} s without [$(spread "${offs[@]}")] ($(python3 -c "print(round(100*($on-$off)/$off, 1))")% cost)"

ex p server "$work/crr_baseline" server $S 12000 "$secs" & sleep 0.3
cb=$(ex p client "$work/crr_baseline" client $S 12000 "$secs")
wait
tc=$("$T" crr --lab p -C 1 -t "$secs" --json | j 'd["summary"]["connections_per_s"]')
echo "crr vs minimal C loop (1 B each way, 1 connection at a time): tcplab ${tc}/s, C ${cb}/s, ratio $(ratio "$tc" "$cb")"
res_round crr tcplab "$tc"; res_round crr peer "$cb"
"$T" lab down p >/dev/null; "$T" lab down e >/dev/null
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
res_end
