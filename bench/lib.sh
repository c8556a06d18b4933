# shellcheck shell=bash
# bench/lib.sh: what the between-hosts benchmarks share, sourced by
# bench/wire.sh (RoCEv2) and bench/tcp.sh (the TCP channel); the one-host
# scripts use its section writer. Each script says only what it measures:
#
#   bench_setup wire.sh raw wire.jsonl   root, iperf3/qperf, binaries in $BIN, cleanup on exit
#   two_hosts NS_A NS_B 10.77.0 fd77:0:0:77   namespaces a and b over veth-a/veth-b, IPv4 .1/.2 and IPv6 ::1/::2
#   start_daemon a|b ARGS...            a daemon in a's or b's namespace on $SA or $SB
#   perf_server MODE INSTANCE PORT CLIENT_INSTANCE   a vrdma perf server in b for MODE's rows
#   anchor_servers                      iperf3 and qperf servers in b
#   topo_set TOPO                       MTU, address family and loss of the veth ($PEER, $LINK_MTU, ...)
#   vperf MODE QPS SIZE TEST...         vrdma perf from a, one row per test (QPS clients at once)
#   iperf_tcp STREAMS, iperf_udp, qperf_lat TEST...   the anchors from a, on the same topology
#   write_section NAME FILE [AFTER]     replace the NAME section of docs/perf.md
#
# Every row goes through `anchor measure`, which tags it with its source and
# topology and adds the CPU seconds of the processes that did the work (the
# clients' own rusage; the servers' and daemons' utime+stime from /proc over
# the run) and the bytes moved, so that the table shows CPU per GB.
#
# Topologies (TOPOS): std-v4, std-v6 (veth MTU 1500: rxe's active MTU is the
# largest IB MTU ≤ 1500 − 80, 1024), jumbo-v4, jumbo-v6 (veth MTU 9000:
# 4096); -v4 / -v6 picks the address the clients connect to, and vrdma perf
# picks the GID of its control connection's address (vrdma perf --help, -g);
# a -loss suffix drops $LOSS (default 1%) of what each end of the veth
# receives (nftables, netdev ingress), so data and acknowledgements are both lost.

# The knobs every between-hosts script takes (see its usage).
SECS=${SECS:-2}
LOSS=${LOSS:-1%}
QPS=${QPS:-1 8}

PIDS=()  # servers, stopped first
DPIDS=() # daemons
NS_A="" NS_B="" BIN=""

# fail MESSAGE: stop the run.
fail() {
	echo "bench/${BENCH:-$(basename "$0")}: $*" >&2
	exit 1
}

# need_tool COMMAND PACKAGE: install Debian's PACKAGE if COMMAND is missing.
need_tool() {
	command -v "$1" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }
}

# bench_setup SCRIPT RAWDIR RESULTS: checks for root, installs the anchors,
# builds vrdma and anchor into $BIN and starts an empty results file; the
# namespaces, servers and daemons are cleaned up when the script exits.
bench_setup() {
	BENCH=$1
	RAW=bench/results/$2
	RES=bench/results/$3
	mkdir -p "$RAW"
	: >"$RES"
	[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
	need_tool iperf3 iperf3
	need_tool qperf qperf
	need_tool nft nftables
	LOAD=$(cut -d' ' -f1 /proc/loadavg)
	START=$(date +%s)
	BIN=$(mktemp -d)
	trap bench_cleanup EXIT
	go build -o "$BIN/vrdma" ./cmd/vrdma
	go build -o "$BIN/anchor" ./bench/anchor
}

bench_cleanup() {
	local p
	# (wait with no PIDs would wait for every child, the daemons too.)
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ ${#PIDS[@]} = 0 ] || wait "${PIDS[@]}" 2>/dev/null || true
	for p in "${DPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ ${#DPIDS[@]} = 0 ] || wait "${DPIDS[@]}" 2>/dev/null || true # they write their profiles as they stop
	[ -z "$NS_A" ] || ip netns del "$NS_A" 2>/dev/null || true
	[ -z "$NS_B" ] || ip netns del "$NS_B" 2>/dev/null || true
	[ -z "$BIN" ] || rm -rf "$BIN"
}

# two_hosts A B NET4 NET6: network namespaces A and B joined by a veth pair
# (veth-a in A, veth-b in B) with NET4.1/24 and NET6::1/64 on A's end,
# NET4.2 and NET6::2 on B's; the daemons' sockets are $SA and $SB.
two_hosts() {
	NS_A=$1 NS_B=$2
	ADDR_A4=$3.1 ADDR_B4=$3.2 ADDR_A6=$4::1 ADDR_B6=$4::2
	SA=$BIN/a.sock SB=$BIN/b.sock
	ip netns add "$NS_A"
	ip netns add "$NS_B"
	ip link add veth-a netns "$NS_A" type veth peer name veth-b netns "$NS_B"
	ip -n "$NS_A" addr add "$ADDR_A4/24" dev veth-a
	ip -n "$NS_B" addr add "$ADDR_B4/24" dev veth-b
	ip -n "$NS_A" addr add "$ADDR_A6/64" dev veth-a nodad
	ip -n "$NS_B" addr add "$ADDR_B6/64" dev veth-b nodad
	for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
	ip -n "$NS_A" link set veth-a up
	ip -n "$NS_B" link set veth-b up
}

inA() { ip netns exec "$NS_A" "$@"; }
inB() { ip netns exec "$NS_B" "$@"; }
va() { VRDMA_SOCKET=$SA "$BIN/vrdma" "$@"; }
vb() { VRDMA_SOCKET=$SB "$BIN/vrdma" "$@"; }

# start_daemon a|b ARGS...: a daemon in that host's namespace, its log in
# $RAW/daemon-a.log (a CPU profile too with PROFILE=1); waits for its socket.
start_daemon() {
	local h=$1 ns=$NS_A sock=$SA
	shift
	[ "$h" = b ] && ns=$NS_B sock=$SB
	# (Started with ip netns exec directly, so that $! is the daemon's PID.)
	ip netns exec "$ns" "$BIN/vrdma" daemon --socket "$sock" --state-dir "" "$@" \
		${PROFILE:+--cpuprofile "$RAW/daemon-$h.pprof"} >"$RAW/daemon-$h.log" 2>&1 &
	DPIDS+=($!)
	for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.1; done
	fail "daemon $h did not start (see $RAW/daemon-$h.log)"
}

# local_daemon LOG: the one-host scripts' daemon (no switch, nothing
# persisted) on $BIN/vrdma.sock, exported as VRDMA_SOCKET, its PID in
# DAEMON_PID, its log in LOG; waits for its socket. Its ports route by LID
# (--lid-routing): guest.sh's qperf names the port by LID alone.
local_daemon() {
	export VRDMA_SOCKET=$BIN/vrdma.sock
	"$BIN/vrdma" daemon --no-switch --lid-routing --socket "$VRDMA_SOCKET" --state-dir "" >"$1" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 50); do [ -S "$VRDMA_SOCKET" ] && return 0; sleep 0.1; done
	fail "the daemon did not start (see $1)"
}

# The vrdma perf server of each mode (a row source such as vrdma-wire-async):
# its port and PID, and the instance its clients in A attach to.
declare -A MODE_PORT MODE_SRV MODE_INST

# perf_server MODE INSTANCE PORT CLIENT_INSTANCE: a vrdma perf server in B
# on INSTANCE, serving up to 8 clients at once.
perf_server() {
	VRDMA_SOCKET=$SB VRDMA_INSTANCE=$2 ip netns exec "$NS_B" "$BIN/vrdma" perf -lp "$3" --max-clients 8 >"$RAW/perf-server-$1.log" 2>&1 &
	PIDS+=($!)
	MODE_SRV[$1]=$! MODE_PORT[$1]=$3 MODE_INST[$1]=$4
}

# anchor_servers: iperf3 and qperf servers in B (both take IPv4 and IPv6).
anchor_servers() {
	ip netns exec "$NS_B" iperf3 -s -p 5201 >"$RAW/iperf3-server.log" 2>&1 &
	PIDS+=($!)
	IPERF_PID=$!
	ip netns exec "$NS_B" qperf -lp 19799 >"$RAW/qperf-server.log" 2>&1 &
	PIDS+=($!)
	QPERF_PID=$!
	sleep 1
}

# topo_set TOPO: the veth's MTU on both ends, and loss for a -loss
# topology (removed otherwise); sets TOPO, PEER (B's address of the
# topology's family), VETH_MTU, LINK_MTU (rxe's active MTU for it) and
# UDP_LEN (vrdma's UDP payload at that MTU: BTH + MTU + ICRC).
topo_set() {
	local t=$1 loss=""
	topo_check "$t"
	VETH_MTU=1500 LINK_MTU=1024
	case $t in jumbo-*) VETH_MTU=9000 LINK_MTU=4096 ;; esac
	PEER=$ADDR_B4
	case $t in *-v6*) PEER=$ADDR_B6 ;; esac
	case $t in *-loss) loss=$LOSS ;; esac
	UDP_LEN=$((12 + LINK_MTU + 4))
	local ns dev
	for ns in "$NS_A" "$NS_B"; do
		dev=veth-a
		[ "$ns" = "$NS_B" ] && dev=veth-b
		ip -n "$ns" link set dev "$dev" mtu "$VETH_MTU"
		ip netns exec "$ns" nft delete table netdev vrdma_bench_loss 2>/dev/null || true
		[ -z "$loss" ] || lose "$ns" "$dev" "$loss"
	done
	TOPO=$t
}

# lose NS DEV PERCENT: drop PERCENT of what DEV receives, at random (an
# nftables rule on the netdev ingress hook: this kernel may lack netem). On
# the receiving side, as a lossy wire: a drop on the sender's egress hook
# is a local send failure to TCP, which sends again without counting a
# retransmission.
lose() {
	local per10k
	per10k=$(awk -v p="${3%\%}" 'BEGIN { printf "%d", p * 100 + 0.5 }')
	ip netns exec "$1" nft -f - <<EOF
table netdev vrdma_bench_loss {
	chain ingress {
		type filter hook ingress device "$2" priority 0; policy accept;
		numgen random mod 10000 < $per10k counter drop
	}
}
EOF
}

# topo_check TOPO...: fail unless each is a topology topo_set knows.
topo_check() {
	local t
	for t in "$@"; do
		case $t in
		std-v4 | std-v6 | jumbo-v4 | jumbo-v6 | std-v4-loss | std-v6-loss | jumbo-v4-loss | jumbo-v6-loss) ;;
		*) fail "topology $t: std-v4, std-v6, jumbo-v4 or jumbo-v6, -loss added for $LOSS loss" ;;
		esac
	done
}

# wait_link_mtu: until both daemons' links report $LINK_MTU as their
# active MTU (they follow the interface's MTU).
wait_link_mtu() {
	for _ in $(seq 50); do
		va link show | grep -q "active_mtu $LINK_MTU " && vb link show | grep -q "active_mtu $LINK_MTU " && return 0
		sleep 0.1
	done
	fail "the links did not take MTU $LINK_MTU (veth MTU $VETH_MTU): $(va link show | grep active_mtu)"
}

# pidlist PID...: the PIDs comma-separated, for anchor measure.
pidlist() { local IFS=,; echo "$*"; }

# vperf MODE QPS SIZE TEST...: vrdma perf clients in A against MODE's server
# in B on $PEER, one run per test so that its CPU is its own; QPS clients
# at once (one QP each) make one row. LINKS (two sockets) adds the links'
# packet counters, RETRANS_NS the TCP retransmissions of that namespace.
vperf() {
	local mode=$1 qps=$2 size=$3 t
	shift 3
	[ -n "${MODE_PORT[$mode]:-}" ] || fail "mode $mode: this script measures $(printf '%s ' "${!MODE_PORT[@]}")"
	for t in "$@"; do
		VRDMA_SOCKET=$SA VRDMA_INSTANCE=${MODE_INST[$mode]} "$BIN/anchor" measure -source "$mode" -topo "$TOPO" -n "$qps" \
			-pids "${MODE_SRV[$mode]}" -daemons "$(pidlist "${DPIDS[@]}")" ${LINKS:+-links "$LINKS"} ${RETRANS_NS:+-netns "$RETRANS_NS"} \
			-- ip netns exec "$NS_A" "$BIN/vrdma" perf "$PEER" -lp "${MODE_PORT[$mode]}" --json -t "$SECS" -m "$size" "$t" \
			>>"$RES" 2>>"$RAW/perf-client.log" || echo "vrdma perf $mode $TOPO ${qps}×$t $size failed (see $RAW/perf-client.log)" >&2
	done
}

# iperf_tcp STREAMS: iperf3 TCP from A to B, received rate.
iperf_tcp() {
	"$BIN/anchor" measure -format iperf3 -source iperf3-tcp -topo "$TOPO" -pids "$IPERF_PID" \
		-- ip netns exec "$NS_A" iperf3 -c "$PEER" -p 5201 -t "$SECS" -P "$1" -J >>"$RES" 2>>"$RAW/iperf3.log" ||
		echo "iperf3 TCP -P $1 on $TOPO failed (see $RAW/iperf3.log)" >&2
}

# iperf_udp: iperf3 UDP at vrdma's datagram size for the topology's MTU,
# unlimited rate, the rate of what arrived.
iperf_udp() {
	"$BIN/anchor" measure -format iperf3 -source iperf3-udp -topo "$TOPO" -pids "$IPERF_PID" \
		-- ip netns exec "$NS_A" iperf3 -c "$PEER" -p 5201 -u -b 0 -l "$UDP_LEN" -t "$SECS" -J >>"$RES" 2>>"$RAW/iperf3.log" ||
		echo "iperf3 UDP on $TOPO failed (see $RAW/iperf3.log)" >&2
}

# qperf_lat TEST...: qperf's latency tests at 8 bytes.
qperf_lat() {
	"$BIN/anchor" measure -format qperf -size 8 -source qperf -topo "$TOPO" -pids "$QPERF_PID" \
		-- ip netns exec "$NS_A" qperf "$PEER" -lp 19799 -m 8 -t "$SECS" "$@" >>"$RES" 2>>"$RAW/qperf.log" ||
		echo "qperf $* on $TOPO failed (see $RAW/qperf.log)" >&2
}

# has_qps N: whether QPS asks for N QPs at once.
has_qps() { case " $QPS " in *" $1 "*) return 0 ;; esac; return 1; }

# elapsed: seconds since bench_setup.
elapsed() { echo $(($(date +%s) - START)); }

# topology_notes: the lines of a section's notes that say how the
# topologies, the 8-QP rows and the CPU figures were measured.
topology_notes() {
	cat <<EOF
Topologies: std-v4 / std-v6 are the veth at MTU 1500 (rxe's active MTU: the largest IB MTU ≤ MTU − 80, 1024), jumbo-v4 /
jumbo-v6 at MTU 9000 (4096); -v4 / -v6 is the address family the clients connect to, and so the GIDs vrdma perf picks (those
of its control connection's address); -loss drops $LOSS of what each end of the veth receives, at random (an nftables rule on the
netdev ingress hook, \`numgen random\`: this kernel has no netem), so data and acknowledgements are both lost; a veth passes
GSO/TSO buffers whole, so a TCP buffer of up to 64 KiB is lost as one (the same share of bytes, in bursts). 8-QP rows are 8 \`vrdma perf\` clients
started at once against one server (\`--max-clients 8\`), one QP each, their bandwidths summed (each over its own window;
they start within tens of ms); the anchor is \`iperf3 -P 8\` ($(iperf3 --version 2>/dev/null | head -1 | cut -d' ' -f1,2): $(iperf3 --version 2>/dev/null | head -1 | awk '{ split($2, v, "."); print (v[1] > 3 || v[1] == 3 && v[2] >= 16) ? "one thread per stream" : "one thread for all streams" }')).
CPU s/GB is CPU seconds per GB moved: "all processes" adds the clients' own CPU time (rusage), the servers' and, for vrdma,
both daemons' (utime+stime from /proc over the run, set-up included); "daemons" is the daemons' part. vrdma perf busy-polls
its completion queues, so its clients' share is mostly spinning. The bytes are those of the test's tally: rc_rdma_write_bw
counts the writes still in flight at its end too, rc_bw only what arrived in its window (its s/GB is a little high). Kernel work charged to no measured process — softirq
processing in ksoftirqd or on another process's time slice — is not counted: on a veth most of the receiver's softirq runs
inline in the sender's system time, so it is mostly counted, but not all of it.
EOF
}

# note_load: a line saying the figures are noisy when the machine was busy.
note_load() {
	if awk -v l="$LOAD" 'BEGIN { exit !(l > 1.5) }'; then
		echo "The load average was $LOAD when the run started ($(nproc) cores, shared with other builds and tests): the figures are noisy."
	fi
}

# write_section NAME FILE [AFTER]: put FILE, which runs from
# "<!-- NAME: ..." to "<!-- end of NAME -->", in docs/perf.md in place of
# that section, or after the AFTER section, or at the end.
write_section() {
	python3 - "$1" "$2" "${3:-}" <<'PY'
import re, sys
name, path, after = sys.argv[1], sys.argv[2], sys.argv[3]
new = open(path).read()
doc = open("docs/perf.md").read()
pat = re.compile(r"<!-- " + re.escape(name) + r": .*?<!-- end of " + re.escape(name) + r" -->\n", re.S)
end = "<!-- end of " + after + " -->\n"
if pat.search(doc):
    doc = pat.sub(lambda m: new, doc)
elif after and end in doc:
    doc = doc.replace(end, end + "\n" + new, 1)
else:
    doc = doc.rstrip("\n") + "\n\n" + new
open("docs/perf.md", "w").write(doc)
PY
	echo "wrote the $1 section of docs/perf.md"
}
