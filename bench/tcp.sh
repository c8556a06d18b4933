#!/usr/bin/env bash
# Benchmarks vrdma's TCP channel between two hosts — two network namespaces
# joined by a veth pair (MTU 1500), each running a daemon on ONE switch
# (A holds the embedded etcd, B joins it) and neither with a Soft-RoCE
# link, so every connection between them takes the TCP channel — next to
# its anchors on the same veth, interleaved in one run:
#   - vrdma perf HOST (server in host B): rc_rdma_write_bw and rc_bw at
#     64 KiB and 1 MiB, rc_lat and rc_rdma_write_lat at 8 B, on the default
#     instances and on async-mode instances;
#   - iperf3 TCP, one stream; qperf tcp_lat (and udp_lat) at 8 B;
#     ucx_perftest tag_lat over UCX_TLS=tcp at 8 B if ucx-utils is installed
#     (it is not installed by this script);
#   - the topology change time: from the return of B's `vrdma link add
#     rxe0` (A's link added first) until A's daemon reports the rdma path to
#     b, asked every 10 ms (`anchor topo`); and back to tcp on B's `vrdma link
#     delete rxe0`. The links are deleted again before the next rep;
#   - the connection setup rate, `BenchmarkCMConnect` in the root package,
#     if the connection manager is in the tree.
# The channel runs mutual TLS under the switch's certificates, as a
# deployment does (SECURITY.md); CHANNEL=plain runs it in plaintext
# (--insecure) instead, to see what TLS costs.
# It writes the table of medians into docs/perf.md, between the
# "tcp channel" markers. Needs root (namespaces).
# Usage: bench/tcp.sh [REPS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-${REPS:-3}}
CHANNEL=${CHANNEL:-tls}
SECS=${SECS:-2}
OUT=bench/results
RAW=$OUT/raw-tcp
mkdir -p "$RAW"
RES=$OUT/tcp.jsonl
: >"$RES"
[ "$(id -u)" = 0 ] || { echo "bench/tcp.sh needs root (network namespaces)" >&2; exit 1; }
for p in iperf3 qperf; do
	command -v $p >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p >/dev/null; }
done
# UCX's tcp transport is an anchor too (anchors.md): Debian's ucx-utils.
command -v ucx_perftest >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ucx-utils >/dev/null; } || true
LOAD=$(cut -d' ' -f1 /proc/loadavg)

A=vrdma-tcp-a B=vrdma-tcp-b
ADDR_A=10.78.0.1 ADDR_B=10.78.0.2
BIN=$(mktemp -d)
PIDS=()
DPIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait "${PIDS[@]}" 2>/dev/null || true
	for p in "${DPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait "${DPIDS[@]}" 2>/dev/null || true
	ip netns del $A 2>/dev/null || true
	ip netns del $B 2>/dev/null || true
	rm -rf "$BIN"
}
trap cleanup EXIT
fail() { echo "bench/tcp.sh: $*" >&2; exit 1; }
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
SA=$BIN/a.sock SB=$BIN/b.sock
va() { VRDMA_SOCKET=$SA "$BIN/vrdma" "$@"; }
vb() { VRDMA_SOCKET=$SB "$BIN/vrdma" "$@"; }
# The switch's certificates, as an operator makes them: the TCP channel,
# the CM and etcd between the hosts are mutual TLS under them.
PKI=$BIN/pki
"$BIN/vrdma" switch ca init --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert a --ip $ADDR_A --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert b --ip $ADDR_B --dir "$PKI" >/dev/null
SEC=(--pki "$PKI") SCHEME=https
if [ "$CHANNEL" = plain ]; then SEC=(--insecure) SCHEME=http; fi
# Host a runs the switch's etcd member, reachable from b over the veth.
ip netns exec $A "$BIN/vrdma" daemon --socket "$SA" --state-dir "" --host-name a "${SEC[@]}" \
	--etcd-client-url $SCHEME://$ADDR_A:2379 --etcd-peer-url $SCHEME://$ADDR_A:2380 ${PROFILE:+--cpuprofile $RAW/daemon-a.pprof} >"$RAW/daemon-a.log" 2>&1 &
DPIDS+=($!)
for _ in $(seq 100); do [ -S "$SA" ] && break; sleep 0.1; done
[ -S "$SA" ] || fail "daemon a did not start (see $RAW/daemon-a.log)"
ip netns exec $B "$BIN/vrdma" daemon --socket "$SB" --state-dir "" --host-name b "${SEC[@]}" \
	--etcd-endpoints $SCHEME://$ADDR_A:2379 ${PROFILE:+--cpuprofile $RAW/daemon-b.pprof} >"$RAW/daemon-b.log" 2>&1 &
DPIDS+=($!)

# path_to HOST on A's daemon: the kind of path ("tcp", "rdma", ...) or "".
path_to() {
	va host show --json 2>/dev/null | python3 -c '
import json, sys
for h in json.load(sys.stdin).get("hosts", []):
    if h["name"] == sys.argv[1]:
        print((h.get("path") or "").split(":")[0]); break' "$1" || true
}
for _ in $(seq 200); do
	[ -S "$SA" ] && [ -S "$SB" ] && [ -n "$(path_to b)" ] && break
	sleep 0.1
done
[ -S "$SB" ] || fail "daemon b did not start (see $RAW/daemon-b.log)"
va host show >"$RAW/hosts-start.txt" 2>&1 || true
[ -n "$(path_to b)" ] || fail "host b never showed up in a's \`vrdma host show\` (see $RAW/hosts-start.txt, $RAW/daemon-*.log)"
[ "$(path_to b)" = tcp ] || fail "a's path to b is $(path_to b), not tcp (see $RAW/hosts-start.txt)"
# Instance names are switch-wide: one async instance per host.
va vm create fast-a --async >/dev/null
vb vm create fast-b --async >/dev/null

# Servers in B: vrdma perf on the default instance (19765) and on the async
# one (19766), iperf3, qperf.
VRDMA_SOCKET=$SB ip netns exec $B "$BIN/vrdma" perf >"$RAW/perf-server.log" 2>&1 &
PIDS+=($!)
VRDMA_SOCKET=$SB VRDMA_INSTANCE=fast-b ip netns exec $B "$BIN/vrdma" perf -lp 19766 >"$RAW/perf-server-async.log" 2>&1 &
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
	[ "$mode" = vrdma-tcp-async ] && port=19766 inst=fast-a
	VRDMA_SOCKET=$SA VRDMA_INSTANCE=$inst inA "$BIN/vrdma" perf $ADDR_B -lp $port --json -t "$SECS" -m "$size" "$@" 2>>"$RAW/perf-client.log" | tag "$mode" >>"$RES" || echo "vrdma perf $mode $size $* failed (see $RAW/perf-client.log)" >&2
}

# Messages a's adapters sent by each path, over both instances.
counter() { { va stat 2>/dev/null; va stat --instance fast-a 2>/dev/null; } | awk -v c="$1:" '$1 == c { n += $2 } END { print n + 0 }'; }
path_tcp() { counter path_tcp; }
path_rdma() { counter path_rdma; }

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
	inA qperf $ADDR_B -lp 19799 -m 8 -t "$SECS" tcp_lat udp_lat 2>&1 | tee -a "$RAW/qperf.log" | awk '
		/^[a-z_]+:$/ { test = substr($1, 1, length($1) - 1) }
		/latency/ { v = $3; u = $4; if (u == "ns") v /= 1000; if (u == "ms") v *= 1000
			printf "{\"source\":\"qperf\",\"test\":\"%s\",\"msg_size\":8,\"latency_us\":%s}\n", test, v }' >>"$RES"
}

UCX_NOTE=""
command -v ucx_perftest >/dev/null || UCX_NOTE="ucx_perftest is not installed here (Debian's ucx-utils), so UCX's tcp transport is not measured."
ucx_tcp_lat() {
	[ -z "$UCX_NOTE" ] || return 0
	local n=$((SECS * 20000)) line
	UCX_TLS=tcp ip netns exec $B timeout 60 ucx_perftest -p 13337 >>"$RAW/ucx-server.log" 2>&1 &
	local spid=$!
	PIDS+=($spid)
	sleep 0.5
	line=$(UCX_TLS=tcp inA timeout 60 ucx_perftest $ADDR_B -p 13337 -t tag_lat -s 8 -n $n -w $((n / 10)) 2>>"$RAW/ucx-client.log" | awk '/^Final:/ { print; exit }') || true
	wait "$spid" 2>/dev/null || true
	[ -n "$line" ] || { echo "ucx_perftest tcp tag_lat gave no result" >&2; return 0; }
	echo "$line" | awk '{ printf "{\"source\":\"ucx-tcp\",\"test\":\"tag_lat\",\"msg_size\":8,\"latency_us\":%s,\"msg_rate\":%s}\n", $3, $9 }' >>"$RES"
}

# topology: add A's link, time B's link add until A says rdma to b; then
# time B's link delete until A says tcp again, and delete A's link.
topology() {
	va link add rxe0 type rxe netdev veth-a >/dev/null
	VRDMA_SOCKET=$SB "$BIN/anchor" topo "$SA" b rdma -- "$BIN/vrdma" link add rxe0 type rxe netdev veth-b >>"$RES" ||
		echo "topology change to rdma: not measured (see above)" >&2
	VRDMA_SOCKET=$SB "$BIN/anchor" topo "$SA" b tcp -- "$BIN/vrdma" link delete rxe0 >>"$RES" ||
		echo "topology change back to tcp: not measured (see above)" >&2
	vb link delete rxe0 >/dev/null 2>&1 || true
	va link delete rxe0 >/dev/null
	[ "$(path_to b)" = tcp ] || fail "after deleting the links a's path to b is $(path_to b), not tcp"
}

# Confirm the TCP channel before measuring: one short run must count on
# path_tcp, none on path_rdma.
t0=$(path_tcp) r0=$(path_rdma)
VRDMA_SOCKET=$SA VRDMA_INSTANCE=default inA "$BIN/vrdma" perf $ADDR_B -lp 19765 -t 0.2 -m 8 rc_lat >"$RAW/check.txt" 2>&1 ||
	fail "the check run failed (see $RAW/check.txt, $RAW/perf-server.log)"
t1=$(path_tcp) r1=$(path_rdma)
va stat >"$RAW/stat-check.txt" 2>&1 || true
[ "$t1" -gt "$t0" ] && [ "$r1" = "$r0" ] ||
	fail "the check run did not take the TCP channel: path_tcp $t0 -> $t1, path_rdma $r0 -> $r1 (see $RAW/stat-check.txt)"
echo "path a -> b: tcp (path_tcp $t0 -> $t1)"

for r in $(seq "$REPS"); do
	echo "rep $r/$REPS"
	for mode in ${MODES:-vrdma-tcp vrdma-tcp-async}; do
		for size in ${SIZES:-65536 1048576}; do
			vperf $mode $size rc_rdma_write_bw rc_bw
		done
		[ -n "${NOLAT:-}" ] || vperf $mode 8 rc_lat rc_rdma_write_lat
	done
	if [ -z "${NOANCHORS:-}" ]; then
		iperf_tcp
		qperf_lat
		ucx_tcp_lat
	fi
	[ -n "${NOTOPO:-}" ] || topology
done

va stat >"$RAW/stat-a.txt"
vb stat >"$RAW/stat-b.txt"
va host show >"$RAW/hosts-end.txt"
[ "$(path_tcp)" -gt "$t1" ] || fail "path_tcp did not grow during the run (see $RAW/stat-a.txt)"
[ "$(path_rdma)" = "$r1" ] || fail "some connections took the rdma path during the run (see $RAW/stat-a.txt)"

# The connection manager's setup rate, if it is in the tree (outside the
# namespaces, once: its benchmark runs its own daemons).
CM_NOTE=""
if [ -f cm.go ] && grep -qs 'func BenchmarkCMConnect' ./*_test.go; then
	echo "BenchmarkCMConnect"
	if go test -run '^$' -bench CMConnect -benchtime 2s . >"$RAW/cm-bench.txt" 2>&1; then
		awk '/^BenchmarkCMConnect\// { sub(/^BenchmarkCMConnect\//, "", $1); sub(/-[0-9]+$/, "", $1)
			for (i = 3; i < NF; i++) if ($(i + 1) == "conn/s")
				printf "{\"source\":\"vrdma-cm\",\"test\":\"cm_connect_%s\",\"msg_size\":0,\"msg_rate\":%s}\n", $1, $i }' \
			"$RAW/cm-bench.txt" >>"$RES"
	else
		CM_NOTE="not measured: BenchmarkCMConnect failed (see bench/results/raw-tcp/cm-bench.txt)"
		echo "$CM_NOTE" >&2
	fi
else
	CM_NOTE="not measured: no connection manager yet"
fi

table=$BIN/table.md
{
	echo "<!-- tcp channel: bench/tcp.sh writes this section -->"
	echo "## Between two hosts over the TCP channel"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/tcp.sh $REPS\` ($REPS runs per row, interleaved; $SECS s per test): two network"
	echo "namespaces joined by a veth pair (MTU 1500), a daemon in each on one switch (a runs the embedded etcd, b joins it)"
	echo "and no Soft-RoCE link, so every connection takes the TCP channel (port 4792; the script checks \`vrdma stat\`'s"
	echo "path_tcp); \`vrdma perf\` server in b, client in a; iperf3 and qperf on the same veth."
	if [ "$CHANNEL" = plain ]; then
		echo "The channel ran in plaintext (\`--insecure\`, CHANNEL=plain), not as deployed."
	else
		echo "The channel runs mutual TLS under the switch's certificates, as deployed (\`vrdma switch ca init\`, \`vrdma host cert\`)."
	fi
	echo "The topology change is timed from the return of b's \`vrdma link add rxe0\` (a's link added first) until a's"
	echo "daemon reports the rdma path to b, asked every 10 ms; \"back to tcp\" from b's \`vrdma link delete rxe0\`."
	polls=$(python3 -c '
import json, sys
print(max([json.loads(l).get("polls", 0) for l in open(sys.argv[1]) if "\"polls\"" in l] or [0]))' "$RES")
	if [ "$polls" = 1 ]; then
		echo "In every rep the first ask already saw the change: the link's uplink is in the switch (etcd) before"
		echo "\`vrdma link add\` returns, and \`vrdma host show\` reads it from there, so that figure is one host-list"
		echo "round trip; topology_cmd_* rows are how long the \`vrdma link add\` / \`link delete\` command itself took."
	fi
	echo "The connection setup rate is \`BenchmarkCMConnect\` (root package; its own in-process daemons, not the namespaces)."
	[ -z "$UCX_NOTE" ] || echo "$UCX_NOTE"
	if awk -v l="$LOAD" 'BEGIN { exit !(l > 1.5) }'; then
		echo "The load average was $LOAD when the run started (2 cores, shared with other builds and tests): the figures are noisy."
	fi
	echo
	ANCHOR_CM_NOTE="$CM_NOTE" "$BIN/anchor" tcptable "$RES"
	echo "<!-- end of tcp channel -->"
} >"$table"
# Replace the section in docs/perf.md, or put it after the between-hosts one.
python3 - "$table" <<'PY'
import re, sys
new = open(sys.argv[1]).read()
doc = open("docs/perf.md").read()
pat = re.compile(r"<!-- tcp channel: .*?<!-- end of tcp channel -->\n", re.S)
if pat.search(doc):
    doc = pat.sub(lambda m: new, doc)
elif "<!-- end of between hosts -->\n" in doc:
    doc = doc.replace("<!-- end of between hosts -->\n", "<!-- end of between hosts -->\n\n" + new, 1)
else:
    doc = doc.rstrip("\n") + "\n\n" + new
open("docs/perf.md", "w").write(doc)
PY
echo "wrote the tcp-channel section of docs/perf.md"
