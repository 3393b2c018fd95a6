#!/usr/bin/env bash
# Rootless labs against root's, side by side in one run: lab build and teardown time (path lab,
# tcplab lab up/down; cold, each cycle starting and ending the user's session, and with the
# session held by another lab) and the emulator's TCP throughput (iperf3 through an unimpaired emulated
# path), each as an unprivileged user (its labs in a user namespace it owns) and as root,
# interleaved round by round. Root's emulator runs at SCHED_FIFO 10 by default and a rootless
# one cannot (no CAP_SYS_NICE), so throughput is also compared with root's at normal priority
# (TCPLAB_EMU_IO='{"rt_priority":null}'), which isolates what the user namespace itself costs.
# Usage: sudo benches/rootless.sh [REPS] [ROUNDS]   (defaults 20 cycles, 4 throughput rounds
# of 5 s). The user is RUN_AS (default tcplab-ci1, created like .ci/run does when missing).
# Writes benches/results/rootless.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
reps=${1:-20}
rounds=${2:-4}
user=${RUN_AS:-tcplab-ci1}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
command -v iperf3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
res_begin rootless "rootless labs (an unprivileged user) against root's, side by side" "RUN_AS" "$@"
res_param reps "$reps"
res_param rounds "$rounds"
res_goal up label="path lab up, rootless vs root" unit=ms better=lower \
  tcplab.name="rootless (user namespace)" peer.name="root" target="equal"
res_goal down label="path lab down, rootless vs root" unit=ms better=lower \
  tcplab.name="rootless (user namespace)" peer.name="root" target="equal"
res_goal up_warm label="path lab up, rootless with a session already held (another lab up) vs root" unit=ms better=lower \
  tcplab.name="rootless (session held)" peer.name="root" target="equal"
res_goal down_warm label="path lab down, rootless with a session held vs root" unit=ms better=lower \
  tcplab.name="rootless (session held)" peer.name="root" target="equal"
res_goal tput label="emulator TCP throughput, rootless vs root (defaults: root at SCHED_FIFO 10)" \
  unit=Gbit/s better=higher tcplab.name="rootless" peer.name="root" target="equal"
res_goal tput_same_prio label="emulator TCP throughput, rootless vs root at normal priority" \
  unit=Gbit/s better=higher tcplab.name="rootless" peer.name="root, rt_priority null" target="equal"
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
uid=$(id -u "$user"); gid=$(id -g "$user")
root_state=$(mktemp -d)
user_dir=$(mktemp -d)
chown "$uid:$gid" "$user_dir"
as_user() {
  setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME="$user_dir" TCPLAB_STATE_DIR="$user_dir/state" \
    bash -c 'cd "$HOME" && exec "$@"' _ "$@"
}
as_root() { env TCPLAB_STATE_DIR="$root_state" "$@"; }
cleanup() {
  as_user "$bin" lab gc --all >/dev/null 2>&1 || true
  as_root "$bin" lab gc --all >/dev/null 2>&1 || true
  rm -rf "$root_state" "$user_dir"
}
trap cleanup EXIT

now_ns() { date +%s%N; }
cycle() { # runner -> "up_ms down_ms"
  local up t0 down
  up=$("$@" "$bin" lab up --topology path --name rl --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["build_ms"])')
  t0=$(now_ns)
  "$@" "$bin" lab down rl >/dev/null
  down=$(( ($(now_ns) - t0) / 1000 ))
  echo "$up $(awk -v d=$down 'BEGIN{print d/1000}')"
}
tput() { # runner [env...] -> Gbit/s through an emulated path, 5 s iperf3
  local run=$1; shift
  $run env "$@" "$bin" lab up --topology path --name rt --bridge emu >/dev/null 2>&1
  $run "$bin" lab exec --lab rt server -- iperf3 -s -1 -B 198.18.0.101 >/dev/null 2>&1 &
  sleep 0.3
  $run "$bin" lab exec --lab rt client -- iperf3 -c 198.18.0.101 -t 5 -J |
    python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'
  wait
  $run "$bin" lab down rt >/dev/null
}
stats() { sort -n | awk '{a[NR]=$1} END {printf "median %.2f  min %.2f  max %.2f  (n=%d)", a[int((NR+1)/2)], a[1], a[NR], NR}'; }

echo "# $(date -u +%F) $(uname -r), $(nproc) CPUs, user $user, reps=$reps rounds=$rounds"
user_up=() user_down=() root_up=() root_down=()
for _ in $(seq "$reps"); do
  read -r u d < <(cycle as_user); user_up+=("$u"); user_down+=("$d")
  read -r u d < <(cycle as_root); root_up+=("$u"); root_down+=("$d")
done
res_round up tcplab "${user_up[@]}"; res_round up peer "${root_up[@]}"
res_round down tcplab "${user_down[@]}"; res_round down peer "${root_down[@]}"
printf 'lab up    rootless %s ms\n          root     %s ms\n' "$(printf '%s\n' "${user_up[@]}" | stats)" "$(printf '%s\n' "${root_up[@]}" | stats)"
printf 'lab down  rootless %s ms\n          root     %s ms\n' "$(printf '%s\n' "${user_down[@]}" | stats)" "$(printf '%s\n' "${root_down[@]}" | stats)"

# The same with a session already held: another lab stays up, so no cycle starts or ends the
# session's holder (what a user with a lab up, or a sweep's second lab, pays).
as_user "$bin" lab up --name keep >/dev/null
warm_up=() warm_down=() root_up=() root_down=()
for _ in $(seq "$reps"); do
  read -r u d < <(cycle as_user); warm_up+=("$u"); warm_down+=("$d")
  read -r u d < <(cycle as_root); root_up+=("$u"); root_down+=("$d")
done
as_user "$bin" lab down keep >/dev/null
res_round up_warm tcplab "${warm_up[@]}"; res_round up_warm peer "${root_up[@]}"
res_round down_warm tcplab "${warm_down[@]}"; res_round down_warm peer "${root_down[@]}"
printf 'session held: lab up    rootless %s ms, root %s ms\n' "$(printf '%s\n' "${warm_up[@]}" | stats)" "$(printf '%s\n' "${root_up[@]}" | stats)"
printf 'session held: lab down  rootless %s ms, root %s ms\n' "$(printf '%s\n' "${warm_down[@]}" | stats)" "$(printf '%s\n' "${root_down[@]}" | stats)"

user_t=() root_t=() root_same=()
for i in $(seq "$rounds"); do
  u=$(tput as_user); r=$(tput as_root); s=$(tput as_root TCPLAB_EMU_IO='{"rt_priority":null}')
  user_t+=("$u"); root_t+=("$r"); root_same+=("$s")
  echo "round $i: rootless $u Gbit/s, root $r Gbit/s, root at normal priority $s Gbit/s"
done
res_round tput tcplab "${user_t[@]}"; res_round tput peer "${root_t[@]}"
res_round tput_same_prio tcplab "${user_t[@]}"; res_round tput_same_prio peer "${root_same[@]}"
res_note "The rootless emulator runs without real-time priority (an unprivileged user has no CAP_SYS_NICE and, by default, an RLIMIT_RTPRIO of 0)."
res_end
