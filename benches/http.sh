#!/usr/bin/env bash
# `tcplab http` against wrk (Debian's 4.1.0) on the same nginx (Debian's), alternating, in one
# run: keep-alive and connection per request (wrk with `Connection: close`), a 1 KB file,
# 64 connections, 2 client threads each; then tcplab's built-in server against nginx with the
# same client. Each measurement gets a fresh pair lab, so no run inherits the TIME_WAIT sockets
# of the one before (with a connection per request they fill the port range within seconds).
# With keep-alive, a packet capture on the client's interface times every request on the wire
# (request segment out to response segment in, per connection): each tool's p50 is shown beside
# the wire's p50 of the same run, so a tool's own client-side time can be seen.
# Usage: sudo benches/http.sh [SECONDS] [REPS]   (defaults 10 and 3). Writes every run's figures
# to benches/results/http.json (RESULTS_DIR=DIR to write elsewhere).
set -euo pipefail
secs=${1:-10}
reps=${2:-3}
conns=64
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/results.sh
source "$root/benches/results.sh"
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v tcpdump >/dev/null || need+=(tcpdump)
[ -x /usr/sbin/nginx ] || need+=(nginx)
if [ ${#need[@]} -gt 0 ]; then
  # Debian's nginx package starts a server on 0.0.0.0:80 unless policy-rc.d says no.
  made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
fi
cargo build --release -q -p tcplab --manifest-path "$root/Cargo.toml"
T="${CARGO_TARGET_DIR:-$root/target}/release/tcplab"
work=$(mktemp -d)
export TCPLAB_STATE_DIR="$work/state"
nginx_pid=
cap_pid=
cleanup() {
  [ -n "$nginx_pid" ] && kill -TERM "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null
  "$T" lab gc --all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
S=198.18.0.101
PORT=8080
mkdir -p "$work/files" "$work/prefix/tmp"
head -c 1024 /dev/urandom > "$work/files/1k"
# The directives tcplab's own nginx launcher writes (crates/lab/src/nginx.rs), 2 workers.
cat > "$work/prefix/nginx.conf" <<EOF
daemon off; master_process on; worker_processes 2; worker_rlimit_nofile 8256;
pid $work/prefix/nginx.pid; error_log stderr warn; user root;
events { worker_connections 4096; }
http {
  access_log off; log_not_found off; sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_timeout 65s; keepalive_requests 1000000;
  client_body_temp_path $work/prefix/tmp/body; proxy_temp_path $work/prefix/tmp/proxy;
  fastcgi_temp_path $work/prefix/tmp/fastcgi; uwsgi_temp_path $work/prefix/tmp/uwsgi;
  scgi_temp_path $work/prefix/tmp/scgi;
  default_type application/octet-stream;
  server { listen $S:$PORT; root $work/files; }
}
EOF

# A fresh lab with nginx in its server host (lab exec becomes nginx: $! is nginx's master).
lab_with_nginx() {
  "$T" lab up --topology pair --name hb >/dev/null
  "$T" lab exec --lab hb server -- /usr/sbin/nginx -p "$work/prefix" -c "$work/prefix/nginx.conf" -e stderr 2>>"$work/nginx.log" &
  nginx_pid=$!
  for _ in $(seq 50); do
    "$T" lab exec --lab hb client -- bash -c "exec 3<>/dev/tcp/$S/$PORT" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nginx did not start: $(tail -3 "$work/nginx.log")" >&2
  exit 1
}
lab_down() {
  [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null || true
  nginx_pid=
  "$T" lab down hb >/dev/null
}
# wrk's figures: requests/s and the p50 latency in µs (from --latency's distribution).
wrk_run() {
  "$T" lab exec --lab hb client -- wrk -t2 -c$conns -d"${secs}s" --latency "$@" "http://$S:$PORT/1k" |
    python3 -c '
import re,sys
t=sys.stdin.read()
rps=float(re.search(r"Requests/sec:\s+([\d.]+)",t).group(1))
m=re.search(r"^\s+50%\s+([\d.]+)(us|ms|s)",t,re.M)
p50=float(m.group(1))*{"us":1,"ms":1e3,"s":1e6}[m.group(2)]
print(round(rps,1), round(p50,1))'
}
tcplab_run() {
  "$T" lab exec --lab hb client -- "$T" http --to "$S:$PORT" -c $conns --threads 2 -t "$secs" --url /1k --json "$@" |
    python3 -c '
import json,sys
d=json.load(sys.stdin); s=d["summary"]
print(round(s["ops_per_s"],1), round(s["response_us"]["p50"],1), s["errors"])'
}
# The wire's p50 (µs) of the capture in $work/cap.pcap.
wire_p50() {
  tcpdump -nn -tt -r "$work/cap.pcap" 2>/dev/null | python3 -c '
import re,sys,statistics
pat=re.compile(r"^(\d+\.\d+) IP \S+\.(\d+) > \S+\.(\d+): .* length (\d+)")
pending={}; last={}; lat=[]
for line in sys.stdin:
    m=pat.match(line)
    if not m or m[4]=="0": continue
    t,sp,dp=float(m[1]),m[2],m[3]
    if dp=="'$PORT'":
        if sp in last and sp in pending: lat.append(last.pop(sp)-pending.pop(sp))
        pending[sp]=t
    elif sp=="'$PORT'": last[dp]=t
print(round(statistics.median(lat)*1e6,1) if lat else 0)'
}
capture() {
  "$T" lab exec --lab hb client -- timeout $((secs + 3)) tcpdump -i eth0 -nn -s 96 -w "$work/cap.pcap" "tcp port $PORT" 2>/dev/null &
  cap_pid=$!
  sleep 0.5
}
median() { python3 -c "import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
spread() { python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(f'{min(v):g}-{max(v):g}')" "$@"; }
ratio() { python3 -c "print(round($1/$2, 3))"; }

echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
res_begin http "tcplab http against wrk on the same nginx, then tcplab's built-in server against nginx; a fresh pair lab per measurement" "" "$@"
res_param seconds "$secs"; res_param reps "$reps"; res_param connections "$conns"; res_param threads 2; res_param file "1 KB"
res_param wrk "$(wrk -v 2>&1 | head -1 | cut -d' ' -f2)"; res_param nginx "$(/usr/sbin/nginx -v 2>&1 | cut -d' ' -f3)"
for mode in keepalive close; do
  res_goal "${mode}_rps" label="$mode, requests/s" unit=/s better=higher tcplab.name="tcplab http" peer.name=wrk target="at least 0.95x"
  res_goal "${mode}_p50" label="$mode, p50 latency" unit=µs better=lower tcplab.name="tcplab http" peer.name=wrk
done
res_goal keepalive_p50 target="within 10 %"
res_goal close_p50 note="tcplab counts from the connect, wrk from the write after it"
res_goal keepalive_wire_p50 label="keep-alive, p50 on the wire in the same runs" unit=µs \
  tcplab.name="the wire, in tcplab's runs" peer.name="the wire, in wrk's runs"
echo "# $(date -u +%F) $(uname -r), $(nproc) CPUs; $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2), $(/usr/sbin/nginx -v 2>&1 | cut -d' ' -f3)"
for mode in keepalive close; do
  wrk_args=(); tcplab_args=()
  if [ $mode = close ]; then wrk_args=(-H "Connection: close"); tcplab_args=(--close); fi
  w_rps=(); w_p50=(); t_rps=(); t_p50=(); t_err=0; w_wire=(); t_wire=()
  for _ in $(seq "$reps"); do
    lab_with_nginx
    [ $mode = keepalive ] && capture
    read -r r p < <(wrk_run "${wrk_args[@]}")
    w_rps+=("$r"); w_p50+=("$p")
    if [ $mode = keepalive ]; then wait "$cap_pid" 2>/dev/null || true; w_wire+=("$(wire_p50)"); fi
    lab_down
    lab_with_nginx
    [ $mode = keepalive ] && capture
    read -r r p e < <(tcplab_run "${tcplab_args[@]}")
    t_rps+=("$r"); t_p50+=("$p"); t_err=$((t_err + e))
    if [ $mode = keepalive ]; then wait "$cap_pid" 2>/dev/null || true; t_wire+=("$(wire_p50)"); fi
    lab_down
  done
  wr=$(median "${w_rps[@]}"); tr=$(median "${t_rps[@]}")
  wp=$(median "${w_p50[@]}"); tp=$(median "${t_p50[@]}")
  res_round "${mode}_rps" tcplab "${t_rps[@]}"; res_round "${mode}_rps" peer "${w_rps[@]}"
  res_round "${mode}_p50" tcplab "${t_p50[@]}"; res_round "${mode}_p50" peer "${w_p50[@]}"
  res_goal "${mode}_rps" tcplab_errors="$t_err"
  echo "$mode, $conns connections, 1 KB from nginx (median of $reps alternating runs [spread]):"
  echo "  requests/s: tcplab $tr [$(spread "${t_rps[@]}")], wrk $wr [$(spread "${w_rps[@]}")], ratio $(ratio "$tr" "$wr")"
  echo "  p50 latency µs: tcplab $tp [$(spread "${t_p50[@]}")], wrk $wp [$(spread "${w_p50[@]}")], ratio $(ratio "$tp" "$wp"); tcplab errors: $t_err"
  if [ $mode = keepalive ]; then
    res_round keepalive_wire_p50 tcplab "${t_wire[@]}"; res_round keepalive_wire_p50 peer "${w_wire[@]}"
    res_goal keepalive_wire_p50 tcplab_tool_over_wire="$(ratio "$tp" "$(median "${t_wire[@]}")")" \
      wrk_tool_over_wire="$(ratio "$wp" "$(median "${w_wire[@]}")")"
    echo "  p50 on the wire in the same runs µs: tcplab's runs $(median "${t_wire[@]}") [$(spread "${t_wire[@]}")] (tool/wire $(ratio "$tp" "$(median "${t_wire[@]}")")), wrk's runs $(median "${w_wire[@]}") [$(spread "${w_wire[@]}")] (tool/wire $(ratio "$wp" "$(median "${w_wire[@]}")"))"
  fi
done

# The built-in server against nginx, tcplab's client on both, tcplab starting each server.
for mode in keepalive close; do
  extra=(); [ $mode = close ] && extra=(--close)
  b=(); n=()
  for _ in $(seq "$reps"); do
    for kind in builtin nginx; do
      "$T" lab up --topology pair --name hs >/dev/null
      v=$("$T" http --lab hs --server-kind $kind --nginx-workers 2 --dirs 1 -c $conns --threads 2 -t "$secs" \
        --url /dir00000/class1_1 --json "${extra[@]}" 2>/dev/null | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["summary"]["ops_per_s"],1))' || echo 0)
      "$T" lab down hs >/dev/null
      if [ $kind = builtin ]; then b+=("$v"); else n+=("$v"); fi
    done
  done
  bm=$(median "${b[@]}"); nm=$(median "${n[@]}")
  res_goal "server_$mode" label="built-in server against nginx, $mode, tcplab's client, requests/s" unit=/s better=higher \
    tcplab.name="tcplab's built-in server" peer.name=nginx target=report
  res_round "server_$mode" tcplab "${b[@]}"; res_round "server_$mode" peer "${n[@]}"
  echo "built-in server vs nginx, $mode, $conns connections, 1 KB, tcplab client (requests/s, median of $reps [spread]): built-in $bm [$(spread "${b[@]}")], nginx $nm [$(spread "${n[@]}")], ratio $(ratio "$bm" "$nm")"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
res_end
