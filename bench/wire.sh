#!/usr/bin/env bash
# Benchmarks vrdma between two hosts over RoCEv2 — two network namespaces
# joined by a veth pair, each running a daemon with a Soft-RoCE link on its
# end — next to its anchors on the same veth, interleaved in one run over
# the topologies of bench/lib.sh (MTU 1500 and jumbo, IPv4 and IPv6 GIDs,
# loss); in each:
#   - vrdma perf (server in host b): rc_rdma_write_bw and rc_bw at 64 KiB and
#     1 MiB, rc_lat and rc_rdma_write_lat at 8 B, on the default instances
#     and on async-mode instances; rc_rdma_write_bw 1 MiB with 8 QPs at once;
#   - iperf3 UDP at vrdma's datagram size (BTH + link MTU + ICRC), received
#     rate; iperf3 TCP, one stream and 8 (-P 8); qperf udp_lat and tcp_lat.
# Each bandwidth row carries its CPU per GB; the loss rows the links' packet
# counters (iperf3's its TCP retransmissions). It writes the table of medians
# and issue 11's targets into docs/perf.md, between the "between hosts"
# markers. Needs root (namespaces, raw sockets).
# Usage: bench/wire.sh [REPS]   (default 3; about 4 minutes per rep)
# Subsets for quick runs:
#   TOPOS="std-v4 std-v6 jumbo-v4 jumbo-v6 std-v4-loss"  topologies, in this order each rep
#   MODES="vrdma-wire vrdma-wire-async"   SIZES="65536 1048576"   BWTESTS="rc_rdma_write_bw rc_bw"
#   QPS="1 8" (1: the one-QP bandwidth rows, 8: the 8-QP rows)   NOLAT=1   NOANCHORS=1   SECS=2 (per test)   LOSS=1%   PROFILE=1
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
REPS=${1:-${REPS:-3}}
TOPOS=${TOPOS:-std-v4 std-v6 jumbo-v4 jumbo-v6 std-v4-loss}
MODES=${MODES:-vrdma-wire vrdma-wire-async}
SIZES=${SIZES:-65536 1048576}
BWTESTS=${BWTESTS:-rc_rdma_write_bw rc_bw}
# shellcheck disable=SC2086 # TOPOS is a list
topo_check $TOPOS
bench_setup wire.sh raw wire.jsonl

two_hosts vrdma-bench-a vrdma-bench-b 10.77.0 fd77:0:0:77
start_daemon a
start_daemon b
va link add rxe0 type rxe netdev veth-a >/dev/null
vb link add rxe0 type rxe netdev veth-b >/dev/null
va vm create fast --async >/dev/null
vb vm create fast --async >/dev/null
perf_server vrdma-wire default 19765 default
perf_server vrdma-wire-async fast 19766 fast
anchor_servers
LINKS=$SA,$SB # the rows carry both links' packet counters

for r in $(seq "$REPS"); do
	for topo in $TOPOS; do
		topo_set "$topo"
		wait_link_mtu
		echo "rep $r/$REPS: $TOPO (link MTU $LINK_MTU, b at $PEER), $(elapsed) s"
		for mode in $MODES; do
			for size in $SIZES; do
				# shellcheck disable=SC2086 # BWTESTS is a list
				! has_qps 1 || vperf "$mode" 1 "$size" $BWTESTS
			done
			[ -n "${NOLAT:-}" ] || vperf "$mode" 1 8 rc_lat rc_rdma_write_lat
		done
		! has_qps 8 || vperf vrdma-wire 8 1048576 rc_rdma_write_bw
		[ -z "${NOANCHORS:-}" ] || continue
		iperf_udp
		iperf_tcp 1
		! has_qps 8 || iperf_tcp 8
		qperf_lat udp_lat tcp_lat
	done
done
topo_set "${TOPOS%% *}"

# The links' counters after the run.
va link show >"$RAW/link-a.txt"
vb link show >"$RAW/link-b.txt"
va stat >"$RAW/stat-a.txt"
vb stat >"$RAW/stat-b.txt"

table=$BIN/table.md
{
	echo "<!-- between hosts: bench/wire.sh writes this section -->"
	echo "## Between two hosts: RoCEv2 between network namespaces over veth"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/wire.sh $REPS\` ($REPS runs per row, interleaved; $SECS s per test; $(elapsed) s in all):"
	echo "two network namespaces joined by a veth pair, a daemon with a Soft-RoCE link in each; \`vrdma perf\` server in b"
	echo "(default adapters, and an instance of async adapters for vrdma-wire-async), client in a; iperf3 and qperf on the same veth."
	echo "iperf3 UDP sends vrdma's datagram size for the link MTU (BTH + MTU + ICRC: 1040 or 4112 bytes) at full speed and counts"
	echo "what arrived."
	topology_notes
	echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(uname -sr)."
	note_load
	echo
	"$BIN/anchor" wiretable "$RES"
	echo "<!-- end of between hosts -->"
} >"$table"
write_section "between hosts" "$table"
