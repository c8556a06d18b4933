#!/usr/bin/env bash
# Benchmarks vrdma between two hosts — two network namespaces joined by a
# veth pair (MTU 1500), each running a daemon with a Soft-RoCE link on its
# end — next to its anchors on the same veth, interleaved in one run:
#   - vrdma perf HOST (server in host B): rc_rdma_write_bw and rc_bw at
#     64 KiB and 1 MiB, rc_lat and rc_rdma_write_lat at 8 B, on the default
#     instances and on async-mode instances;
#   - iperf3 UDP at vrdma's datagram size (1040 bytes: BTH + 1024-byte MTU
#     + ICRC), received rate; iperf3 TCP, one stream;
#   - qperf udp_lat and tcp_lat at 8 B.
# It writes the table of medians into docs/perf.md, between the
# "between hosts" markers. Needs root (namespaces, raw sockets).
# Usage: bench/wire.sh [REPS]   (default 3; about 40 s per rep)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-${REPS:-3}}
SECS=${SECS:-2}
OUT=bench/results
RAW=$OUT/raw
mkdir -p "$RAW"
RES=$OUT/wire.jsonl
: >"$RES"
[ "$(id -u)" = 0 ] || { echo "bench/wire.sh needs root (network namespaces)" >&2; exit 1; }
for p in iperf3 qperf; do
	command -v $p >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p >/dev/null; }
done

A=vrdma-bench-a B=vrdma-bench-b
ADDR_A=10.77.0.1 ADDR_B=10.77.0.2
BIN=$(mktemp -d)
PIDS=()
DPIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait "${PIDS[@]}" 2>/dev/null || true
	for p in "${DPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait "${DPIDS[@]}" 2>/dev/null || true # they write their profiles as they stop
	ip netns del $A 2>/dev/null || true
	ip netns del $B 2>/dev/null || true
	rm -rf "$BIN"
}
trap cleanup EXIT
go build -o "$BIN/vrdma" ./cmd/vrdma
go build -o "$BIN/anchor" ./bench/anchor

ip netns add $A
ip netns add $B
ip link add veth-a netns $A type veth peer name veth-b netns $B
ip -n $A addr add $ADDR_A/24 dev veth-a
ip -n $B addr add $ADDR_B/24 dev veth-b
for ns in $A $B; do ip -n $ns link set lo up; done
ip -n $A link set veth-a up
ip -n $B link set veth-b up

# (Background processes are started with ip netns exec directly, not through
# these functions, so that $! is their own PID and cleanup can stop them.)
inA() { ip netns exec $A "$@"; }
inB() { ip netns exec $B "$@"; }
SA=$BIN/a.sock SB=$BIN/b.sock
ip netns exec $A "$BIN/vrdma" daemon --socket "$SA" --state-dir "" ${PROFILE:+--cpuprofile $RAW/daemon-a.pprof} >"$RAW/daemon-a.log" 2>&1 &
DPIDS+=($!)
ip netns exec $B "$BIN/vrdma" daemon --socket "$SB" --state-dir "" ${PROFILE:+--cpuprofile $RAW/daemon-b.pprof} >"$RAW/daemon-b.log" 2>&1 &
DPIDS+=($!)
for _ in $(seq 50); do [ -S "$SA" ] && [ -S "$SB" ] && break; sleep 0.1; done
VRDMA_SOCKET=$SA "$BIN/vrdma" link add rxe0 type rxe netdev veth-a >/dev/null
VRDMA_SOCKET=$SB "$BIN/vrdma" link add rxe0 type rxe netdev veth-b >/dev/null
VRDMA_SOCKET=$SA "$BIN/vrdma" vm create fast --async >/dev/null
VRDMA_SOCKET=$SB "$BIN/vrdma" vm create fast --async >/dev/null

# Servers in B: vrdma perf on the default instance (19765) and on the async
# one (19766), iperf3, qperf.
VRDMA_SOCKET=$SB ip netns exec $B "$BIN/vrdma" perf >"$RAW/perf-server.log" 2>&1 &
PIDS+=($!)
VRDMA_SOCKET=$SB VRDMA_INSTANCE=fast ip netns exec $B "$BIN/vrdma" perf -lp 19766 >"$RAW/perf-server-async.log" 2>&1 &
PIDS+=($!)
ip netns exec $B iperf3 -s -p 5201 >"$RAW/iperf3-server.log" 2>&1 &
PIDS+=($!)
ip netns exec $B qperf -lp 19799 >"$RAW/qperf-server.log" 2>&1 &
PIDS+=($!)
sleep 1

tag() { sed -e "s/^{/{\"source\":\"$1\",/"; }

vperf() { # MODE SIZE TESTS...
	local mode=$1 size=$2 port=19765 inst=default
	shift 2
	[ "$mode" = vrdma-wire-async ] && port=19766 inst=fast
	VRDMA_SOCKET=$SA VRDMA_INSTANCE=$inst inA "$BIN/vrdma" perf $ADDR_B -lp $port --json -t "$SECS" -m "$size" "$@" 2>>"$RAW/perf-client.log" | tag "$mode" >>"$RES" || echo "vrdma perf $mode $size $* failed (see $RAW/perf-client.log)" >&2
}

iperf_udp() { # LEN
	inA iperf3 -c $ADDR_B -p 5201 -u -b 0 -l "$1" -t "$SECS" -J >"$RAW/iperf3-udp.json" 2>&1 || return 0
	python3 - "$1" "$RAW/iperf3-udp.json" <<'PY' >>"$RES"
import json, sys
n = int(sys.argv[1]); j = json.load(open(sys.argv[2]))
s = j["end"]["sum"]
got = (s["packets"] - s["lost_packets"]) * n / s["seconds"]
print(json.dumps({"source": "iperf3-udp", "test": "udp_bw", "msg_size": n, "bw": got, "msg_rate": got / n,
                  "cpu": j["end"]["cpu_utilization_percent"]["host_total"] / 100}))
PY
}

iperf_tcp() {
	inA iperf3 -c $ADDR_B -p 5201 -t "$SECS" -J >"$RAW/iperf3-tcp.json" 2>&1 || return 0
	python3 - "$RAW/iperf3-tcp.json" <<'PY' >>"$RES"
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"source": "iperf3-tcp", "test": "tcp_bw", "msg_size": 131072,
                  "bw": j["end"]["sum_received"]["bits_per_second"] / 8,
                  "cpu": j["end"]["cpu_utilization_percent"]["host_total"] / 100}))
PY
}

qperf_lat() {
	inA qperf $ADDR_B -lp 19799 -m 8 -t "$SECS" udp_lat tcp_lat 2>&1 | tee -a "$RAW/qperf.log" | awk '
		/^[a-z_]+:$/ { test = substr($1, 1, length($1) - 1) }
		/latency/ { v = $3; u = $4; if (u == "ns") v /= 1000; if (u == "ms") v *= 1000
			printf "{\"source\":\"qperf\",\"test\":\"%s\",\"msg_size\":8,\"latency_us\":%s}\n", test, v }' >>"$RES"
}

for r in $(seq "$REPS"); do
	echo "rep $r/$REPS"
	for mode in ${MODES:-vrdma-wire vrdma-wire-async}; do
		for size in ${SIZES:-65536 1048576}; do
			vperf $mode $size rc_rdma_write_bw rc_bw
		done
		[ -n "${NOLAT:-}" ] || vperf $mode 8 rc_lat rc_rdma_write_lat
	done
	[ -n "${NOANCHORS:-}" ] && continue
	iperf_udp 1040
	iperf_tcp
	qperf_lat
done

# The links' counters after the run: retransmissions and drops show here.
VRDMA_SOCKET=$SA "$BIN/vrdma" link show >"$RAW/link-a.txt"
VRDMA_SOCKET=$SB "$BIN/vrdma" link show >"$RAW/link-b.txt"
VRDMA_SOCKET=$SA "$BIN/vrdma" stat >"$RAW/stat-a.txt"
VRDMA_SOCKET=$SB "$BIN/vrdma" stat >"$RAW/stat-b.txt"

table=$BIN/table.md
{
	echo "<!-- between hosts: bench/wire.sh writes this section -->"
	echo "## Between two hosts: network namespaces over veth"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/wire.sh $REPS\` ($REPS runs per row, interleaved; $SECS s per test): two network"
	echo "namespaces joined by a veth pair (MTU 1500, so a link MTU of 1024), a daemon with a Soft-RoCE link in each;"
	echo "\`vrdma perf\` server in one, client in the other; iperf3 and qperf on the same veth."
	echo
	"$BIN/anchor" wiretable "$RES"
	echo "<!-- end of between hosts -->"
} >"$table"
# Replace the section in docs/perf.md, or append it.
python3 - "$table" <<'PY'
import re, sys
new = open(sys.argv[1]).read()
doc = open("docs/perf.md").read()
pat = re.compile(r"<!-- between hosts: .*?<!-- end of between hosts -->\n", re.S)
doc = pat.sub(lambda m: new, doc) if pat.search(doc) else doc.rstrip("\n") + "\n\n" + new
open("docs/perf.md", "w").write(doc)
PY
echo "wrote the between-hosts section of docs/perf.md"
