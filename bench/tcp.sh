#!/usr/bin/env bash
# Benchmarks vrdma's TCP channel between two hosts — two network namespaces
# joined by a veth pair, each running a daemon on ONE switch (a holds the
# embedded etcd, b joins it) and neither with a Soft-RoCE link, so every
# connection between them takes the TCP channel — next to its anchors on the
# same veth, interleaved in one run over the topologies of bench/lib.sh
# (MTU 1500 and jumbo, loss); in each:
#   - vrdma perf (server in host b): rc_rdma_write_bw and rc_bw at 64 KiB and
#     1 MiB, rc_lat and rc_rdma_write_lat at 8 B, on the default instances
#     and on async-mode instances; rc_rdma_write_bw 1 MiB with 8 QPs at once;
#   - iperf3 TCP, one stream and 8 (-P 8); qperf tcp_lat (and udp_lat) at
#     8 B; ucx_perftest tag_lat over UCX_TLS=tcp at 8 B if ucx-utils is
#     installed (it is installed if apt can);
# and once per rep:
#   - the topology change time: from the return of B's `vrdma link add
#     rxe0` (A's link added first) until A's daemon reports the rdma path to
#     b, asked every 10 ms (`anchor topo`); and back to tcp on B's `vrdma link
#     delete rxe0`. The links are deleted again before the next rep;
# and once per run:
#   - the connection setup rate, `BenchmarkCMConnect` in the root package,
#     if the connection manager is in the tree.
# Each bandwidth row carries its CPU per GB, and the TCP segments a's
# namespace retransmitted (the channel's, under loss).
# The channel runs mutual TLS under the switch's certificates, as a
# deployment does (SECURITY.md); CHANNEL=plain runs it in plaintext
# (--insecure) instead, to see what TLS costs.
# It writes the table of medians and issue 11's targets into docs/perf.md,
# between the "tcp channel" markers. Needs root (namespaces).
# Usage: bench/tcp.sh [REPS]   (default 3; about 3 minutes per rep)
# Subsets for quick runs:
#   TOPOS="std-v4 jumbo-v4 std-v4-loss"  topologies (the channel runs over the hosts'
#     IPv4 addresses: a -v6 topology changes only the anchors' and vrdma perf's control connection)
#   MODES="vrdma-tcp vrdma-tcp-async"   SIZES="65536 1048576"   BWTESTS="rc_rdma_write_bw rc_bw"
#   QPS="1 8" (1: the one-QP bandwidth rows, 8: the 8-QP rows)   NOLAT=1   NOANCHORS=1   NOTOPO=1   NOCM=1   SECS=2   LOSS=1%   CHANNEL=plain   PROFILE=1
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
REPS=${1:-${REPS:-3}}
CHANNEL=${CHANNEL:-tls}
TOPOS=${TOPOS:-std-v4 jumbo-v4 std-v4-loss}
MODES=${MODES:-vrdma-tcp vrdma-tcp-async}
SIZES=${SIZES:-65536 1048576}
BWTESTS=${BWTESTS:-rc_rdma_write_bw rc_bw}
# shellcheck disable=SC2086 # TOPOS is a list
topo_check $TOPOS
bench_setup tcp.sh raw-tcp tcp.jsonl
# UCX's tcp transport is an anchor too (anchors.md): Debian's ucx-utils.
need_tool ucx_perftest ucx-utils || true

two_hosts vrdma-tcp-a vrdma-tcp-b 10.78.0 fd78:0:0:78
# The switch's certificates, as an operator makes them: the TCP channel,
# the CM and etcd between the hosts are mutual TLS under them.
PKI=$BIN/pki
"$BIN/vrdma" switch ca init --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert a --ip "$ADDR_A4" --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert b --ip "$ADDR_B4" --dir "$PKI" >/dev/null
SEC=(--pki "$PKI") SCHEME=https
if [ "$CHANNEL" = plain ]; then SEC=(--insecure) SCHEME=http; fi
# Host a runs the switch's etcd member, reachable from b over the veth.
start_daemon a --host-name a "${SEC[@]}" --etcd-client-url "$SCHEME://$ADDR_A4:2379" --etcd-peer-url "$SCHEME://$ADDR_A4:2380"
start_daemon b --host-name b "${SEC[@]}" --etcd-endpoints "$SCHEME://$ADDR_A4:2379"

# path_to HOST on A's daemon: the kind of path ("tcp", "rdma", ...) or "".
path_to() {
	va host show --json 2>/dev/null | python3 -c '
import json, sys
for h in json.load(sys.stdin).get("hosts", []):
    if h["name"] == sys.argv[1]:
        print((h.get("path") or "").split(":")[0]); break' "$1" || true
}
for _ in $(seq 200); do
	[ -n "$(path_to b)" ] && break
	sleep 0.1
done
va host show >"$RAW/hosts-start.txt" 2>&1 || true
[ -n "$(path_to b)" ] || fail "host b never showed up in a's \`vrdma host show\` (see $RAW/hosts-start.txt, $RAW/daemon-*.log)"
[ "$(path_to b)" = tcp ] || fail "a's path to b is $(path_to b), not tcp (see $RAW/hosts-start.txt)"
# Instance names are switch-wide: one async instance per host.
va vm create fast-a --async >/dev/null
vb vm create fast-b --async >/dev/null
perf_server vrdma-tcp default 19765 default
perf_server vrdma-tcp-async fast-b 19766 fast-a
anchor_servers
RETRANS_NS=$NS_A # the rows carry the TCP retransmissions of a's namespace

# Messages a's adapters sent by each path, over both instances.
counter() { { va stat 2>/dev/null; va stat --instance fast-a 2>/dev/null; } | awk -v c="$1:" '$1 == c { n += $2 } END { print n + 0 }'; }
path_tcp() { counter path_tcp; }
path_rdma() { counter path_rdma; }

UCX_NOTE=""
command -v ucx_perftest >/dev/null || UCX_NOTE="ucx_perftest is not installed here (Debian's ucx-utils), so UCX's tcp transport is not measured."
ucx_tcp_lat() {
	[ -z "$UCX_NOTE" ] || return 0
	case $TOPO in *-loss) return 0 ;; esac # its ping-pong stalls for its time-out on a lost packet
	local n=$((SECS * 20000)) line
	UCX_TLS=tcp ip netns exec "$NS_B" timeout 60 ucx_perftest -p 13337 >>"$RAW/ucx-server.log" 2>&1 &
	local spid=$!
	PIDS+=("$spid")
	sleep 0.5
	line=$(UCX_TLS=tcp inA timeout 60 ucx_perftest "$PEER" -p 13337 -t tag_lat -s 8 -n $n -w $((n / 10)) 2>>"$RAW/ucx-client.log" | awk '/^Final:/ { print; exit }') || true
	wait "$spid" 2>/dev/null || true
	[ -n "$line" ] || { echo "ucx_perftest tcp tag_lat gave no result" >&2; return 0; }
	echo "$line" | awk -v topo="$TOPO" '{ printf "{\"source\":\"ucx-tcp\",\"topo\":\"%s\",\"test\":\"tag_lat\",\"msg_size\":8,\"latency_us\":%s,\"msg_rate\":%s}\n", topo, $3, $9 }' >>"$RES"
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
VRDMA_SOCKET=$SA VRDMA_INSTANCE=default inA "$BIN/vrdma" perf "$ADDR_B4" -lp 19765 -t 0.2 -m 8 rc_lat >"$RAW/check.txt" 2>&1 ||
	fail "the check run failed (see $RAW/check.txt, $RAW/perf-server-vrdma-tcp.log)"
t1=$(path_tcp) r1=$(path_rdma)
va stat >"$RAW/stat-check.txt" 2>&1 || true
if [ "$t1" -le "$t0" ] || [ "$r1" != "$r0" ]; then
	fail "the check run did not take the TCP channel: path_tcp $t0 -> $t1, path_rdma $r0 -> $r1 (see $RAW/stat-check.txt)"
fi
echo "path a -> b: tcp (path_tcp $t0 -> $t1)"

for r in $(seq "$REPS"); do
	for topo in $TOPOS; do
		topo_set "$topo"
		echo "rep $r/$REPS: $TOPO (veth MTU $VETH_MTU, b at $PEER), $(elapsed) s"
		for mode in $MODES; do
			for size in $SIZES; do
				# shellcheck disable=SC2086 # BWTESTS is a list
				! has_qps 1 || vperf "$mode" 1 "$size" $BWTESTS
			done
			[ -n "${NOLAT:-}" ] || vperf "$mode" 1 8 rc_lat rc_rdma_write_lat
		done
		! has_qps 8 || vperf vrdma-tcp 8 1048576 rc_rdma_write_bw
		[ -z "${NOANCHORS:-}" ] || continue
		iperf_tcp 1
		! has_qps 8 || iperf_tcp 8
		qperf_lat tcp_lat udp_lat
		ucx_tcp_lat
	done
	topo_set "${TOPOS%% *}"
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
if [ -n "${NOCM:-}" ]; then
	CM_NOTE="not measured in this run (NOCM)"
elif [ -f cm.go ] && grep -qs 'func BenchmarkCMConnect' ./*_test.go; then
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
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/tcp.sh $REPS\` ($REPS runs per row, interleaved; $SECS s per test; $(elapsed) s in all): two network"
	echo "namespaces joined by a veth pair, a daemon in each on one switch (a runs the embedded etcd, b joins it)"
	echo "and no Soft-RoCE link, so every connection takes the TCP channel (port 4792, over the hosts' IPv4 addresses; the script"
	echo "checks \`vrdma stat\`'s path_tcp); \`vrdma perf\` server in b, client in a; iperf3 and qperf on the same veth."
	if [ "$CHANNEL" = plain ]; then
		echo "The channel ran in plaintext (\`--insecure\`, CHANNEL=plain), not as deployed."
	else
		echo "The channel runs mutual TLS under the switch's certificates, as deployed (\`vrdma switch ca init\`, \`vrdma host cert\`)."
	fi
	topology_notes
	echo "TCP retransmits on vrdma-tcp rows are those of a's namespace over the run (the channel's, and the little else there)."
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
	note_load
	echo
	ANCHOR_CM_NOTE="$CM_NOTE" "$BIN/anchor" tcptable "$RES"
	echo "<!-- end of tcp channel -->"
} >"$table"
write_section "tcp channel" "$table" "between hosts"
