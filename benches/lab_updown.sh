#!/usr/bin/env bash
# Lab build and teardown time: tcplab (netlink, in-process) against the same topology built with
# iproute2 commands (`ip netns add`, `ip link add ... netns`, `ip addr`, a bridge), side by side.
# Usage: sudo benches/lab_updown.sh [REPS]   (default 20). Prints medians and p90 in ms, and
# writes every cycle to benches/results/lab_updown.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
reps=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
res_begin lab_updown "lab build and teardown time, tcplab against the same lab built with ip(8) commands" "" "$@"
res_param reps "$reps"
res_goal path_up label="path lab (3 namespaces, 2 veth, 1 bridge), up" unit=ms better=lower \
  tcplab.name="tcplab lab up (build_ms)" peer.name="ip(8) commands" target="well under 100 ms"
res_goal path_down label="path lab, down" unit=ms better=lower \
  tcplab.name="tcplab lab down (process wall time)" peer.name="ip netns del"
res_goal star16_up label="star:16 lab (17 namespaces, 16 veth, 1 bridge), up" unit=ms tcplab.name="tcplab lab up (build_ms)"
res_goal star16_down label="star:16 lab, down" unit=ms tcplab.name="tcplab lab down (process wall time)"
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
export TCPLAB_STATE_DIR=$(mktemp -d)
trap '"$bin" lab gc --all >/dev/null 2>&1 || true; rm -rf "$TCPLAB_STATE_DIR"' EXIT

stats() { sort -n | awk '{a[NR]=$1} END {printf "median %.1f ms  p90 %.1f ms  (n=%d)", a[int((NR+1)/2)], a[int(NR*0.9+0.5)], NR}'; }
now_ns() { date +%s%N; }

tcplab_cycle() { # topology hosts -> "up_ms down_ms"
  local up down
  up=$("$bin" lab up --topology "$1" --hosts "$2" --name bench --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["build_ms"])')
  local t0=$(now_ns)
  "$bin" lab down bench >/dev/null
  down=$(( ($(now_ns) - t0) / 1000 ))
  echo "$up $(awk -v d=$down 'BEGIN{print d/1000}')"
}

iproute_path_cycle() { # the same path lab with ip(8): 3 namespaces, 2 veth pairs, a bridge
  local t0=$(now_ns) p=tcplabbench
  for h in client middle server; do ip netns add $p-$h; done
  ip link add eth0 netns $p-client type veth peer client netns $p-middle
  ip link add eth0 netns $p-server type veth peer server netns $p-middle
  ip -n $p-middle link add br0 type bridge
  for h in client server; do
    ip -n $p-middle link set $h master br0 up
  done
  ip -n $p-middle link set br0 up
  ip -n $p-client addr add 198.18.0.1/16 dev eth0; ip -n $p-client link set eth0 up; ip -n $p-client link set lo up
  ip -n $p-server addr add 198.18.0.101/16 dev eth0; ip -n $p-server link set eth0 up; ip -n $p-server link set lo up
  ip -n $p-middle link set lo up
  local t1=$(now_ns)
  for h in client middle server; do ip netns del $p-$h; done
  local t2=$(now_ns)
  awk -v a=$(( (t1-t0)/1000 )) -v b=$(( (t2-t1)/1000 )) 'BEGIN{print a/1000, b/1000}'
}

run() { # label goal side command...: goal_up and goal_down get the side's figures
  local label=$1 goal=$2 side=$3; shift 3
  local ups=() downs=()
  for _ in $(seq "$reps"); do
    read -r u d < <("$@")
    ups+=("$u"); downs+=("$d")
  done
  res_round "${goal}_up" "$side" "${ups[@]}"
  res_round "${goal}_down" "$side" "${downs[@]}"
  printf '%-28s up:   %s\n' "$label" "$(printf '%s\n' "${ups[@]}" | stats)"
  printf '%-28s down: %s\n' "$label" "$(printf '%s\n' "${downs[@]}" | stats)"
}

echo "# $(date -u +%F) $(uname -r), $(nproc) CPUs, reps=$reps"
run "tcplab path (3 hosts)" path tcplab tcplab_cycle path 2
run "ip(8) path (3 hosts)" path peer iproute_path_cycle
run "tcplab star:16 (17 ns)" star16 tcplab tcplab_cycle star 16
res_end
