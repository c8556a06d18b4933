#!/usr/bin/env bash
# Benchmarks rsockets and libfabric's verbs provider on vrdma (issue 19's
# performance table) next to their TCP anchors, in one run on this machine,
# and writes the table of medians with its targets into docs/perf.md (its
# "rsockets and libfabric" section):
#   - iperf3 under Debian's librspreload (its TCP sockets become rsockets)
#     under `vrdma run`, same host, vs iperf3 over loopback TCP;
#   - the same between two namespace hosts over RoCEv2 (a daemon each on one
#     switch, a Soft-RoCE link on each end of a veth) vs iperf3 over TCP on
#     the same veth;
#   - rstream (rdmacm-utils) on rsockets under `vrdma run` vs the same
#     program with -T s (kernel TCP sockets): 64-byte ping-pong latency,
#     64 KiB and 1 MiB streaming rate;
#   - fi_pingpong -p verbs -e msg (and -e rdm: verbs;ofi_rxm) at 8 B and
#     64 KiB under `vrdma run` vs fi_pingpong -p tcp with the same endpoint
#     type, same host.
# Every rep runs every same-host row once, back to back; the between-hosts
# rows follow (their set-up needs the switch). Medians over the reps.
# Needs root (namespaces), iperf3, rdmacm-utils (rstream), librdmacm1
# (librspreload.so), libfabric-bin (fi_pingpong); it installs what is
# missing. About 1 minute per rep on an idle 2-core machine.
# Usage: bench/rsockets.sh [REPS]   (default 3)
#        TABLE_ONLY=1 bench/rsockets.sh [REPS]   rewrites the section from the
#        last run's bench/results/rsockets.jsonl without measuring.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
REPS=${1:-${REPS:-3}}
# SECS (iperf3 -t) is lib.sh's, 2 unless set.
need_tool rstream rdmacm-utils
need_tool fi_pingpong libfabric-bin
PRELOAD=$(dpkg -L librdmacm1 2>/dev/null | grep -m1 '/rsocket/librspreload\.so$' || true)
[ -n "$PRELOAD" ] || fail "librspreload.so not found: apt-get install librdmacm1"
if [ -n "${TABLE_ONLY:-}" ]; then
	BIN=$(mktemp -d)
	trap 'rm -rf "$BIN"' EXIT
	RAW=bench/results/raw-rsockets RES=bench/results/rsockets.jsonl
	LOAD0=$(cat "$RAW/load0")
	MISSING=$(cat "$RAW/missing" 2>/dev/null || true)
else
	bench_setup rsockets.sh raw-rsockets rsockets.jsonl
	LOAD0=$LOAD
	echo "$LOAD0" >"$RAW/load0"
fi

PORT=27000
# nextport: a fresh port in PORT for the next pair of programs.
nextport() { PORT=$((PORT + 1)); }

# emit SOURCE TEST KEY VALUE: one row (KEY is bw in bytes/s or lat_us).
emit() {
	[ -n "$4" ] || return 0
	printf '{"source":"%s","test":"%s","%s":%s}\n' "$1" "$2" "$3" "$4" >>"$RES"
}

# waitserver NS PORT LOG RSOCKET: until the server in NS (""; this one)
# listens on PORT: a kernel listener (ss), or for RSOCKET=1 the guest
# library's "listening on port" debug line in LOG, which also shows that
# the server's socket is an rsocket and not librspreload's kernel fallback.
waitserver() {
	local ns=$1 port=$2 log=$3 rs=$4
	for _ in $(seq 200); do
		if [ "$rs" = 1 ]; then
			grep -q "listening on port $port " "$log" 2>/dev/null && return 0
		else
			${ns:+ip netns exec "$ns"} ss -ltn "sport = :$port" | grep -q LISTEN && return 0
		fi
		sleep 0.05
	done
	echo "the server on port $port did not listen (see $log)" >&2
	return 1
}

# vrun NS SOCK CMD...: CMD under `vrdma run` on daemon SOCK, in NS ("" here).
vrun() {
	local ns=$1 sock=$2
	shift 2
	VRDMA_SOCKET=$sock ${ns:+ip netns exec "$ns"} timeout 120 "$BIN/vrdma" run -- "$@"
}

# server NS SOCK LOG CMD...: CMD in the background in a process group of
# its own (so that stop_server ends what it started, vrdma run's child
# too), in NS (""; here), under `vrdma run` on SOCK with the guest
# library's debug lines if SOCK is set; its output in LOG, its PID in SRV.
server() {
	local ns=$1 sock=$2 log=$3
	shift 3
	if [ -n "$sock" ]; then
		VRDMA_DEBUG=1 VRDMA_SOCKET=$sock setsid ${ns:+ip netns exec "$ns"} timeout 120 "$BIN/vrdma" run -- "$@" >"$log" 2>&1 &
	else
		setsid ${ns:+ip netns exec "$ns"} timeout 120 "$@" >"$log" 2>&1 &
	fi
	SRV=$!
}

# stop_server: gives the server up to 10 s to end by itself, then ends its
# process group.
stop_server() {
	for _ in $(seq 100); do kill -0 "$SRV" 2>/dev/null || break; sleep 0.1; done
	kill -- -"$SRV" 2>/dev/null || true
	wait "$SRV" 2>/dev/null || true
}

# iperf SOURCE SNS SSOCK CNS CSOCK ADDR: an iperf3 pair, the server in SNS
# and the client in CNS; with SSOCK set both run under librspreload and
# `vrdma run` (on SSOCK and CSOCK), else on kernel TCP. The received rate.
iperf() {
	local src=$1 sns=$2 ssock=$3 cns=$4 csock=$5 addr=$6 slog=$RAW/iperf3-server.out
	nextport
	if [ -n "$ssock" ]; then
		server "$sns" "$ssock" "$slog" env LD_PRELOAD="$PRELOAD" iperf3 -s -1 -p "$PORT"
	else
		server "$sns" "" "$slog" iperf3 -s -1 -p "$PORT"
	fi
	if waitserver "$sns" "$PORT" "$slog" "${ssock:+1}"; then
		if [ -n "$ssock" ]; then
			vrun "$cns" "$csock" env LD_PRELOAD="$PRELOAD" iperf3 -c "$addr" -p "$PORT" -t "$SECS" -J >"$RAW/iperf3.json" 2>>"$RAW/iperf3-client.log" || true
		else
			${cns:+ip netns exec "$cns"} timeout 120 iperf3 -c "$addr" -p "$PORT" -t "$SECS" -J >"$RAW/iperf3.json" 2>>"$RAW/iperf3-client.log" || true
		fi
		emit "$src" iperf3 bw "$(python3 -c 'import json, sys
try: print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8)
except Exception: pass' "$RAW/iperf3.json")"
	fi
	stop_server
	cat "$slog" "$RAW/iperf3.json" >>"$RAW/iperf3-all.log"
}

# rstream_pair SOURCE TEST ARGS...: one rstream pair on localhost with
# ARGS (a custom size, count and iterations); SOURCE rstream-rs runs it on
# rsockets under `vrdma run`, rstream-tcp with -T s (kernel TCP sockets).
# TEST 64_lat gives its µs per transfer, any other its rate.
rstream_pair() {
	local src=$1 test=$2 slog=$RAW/rstream-server.out out=$RAW/rstream.out rs=1
	shift 2
	nextport
	if [ "$src" = rstream-tcp ]; then
		rs=""
		server "" "" "$slog" rstream -T s -b 127.0.0.1 -p "$PORT" "$@"
	else
		server "" "$SAME_SOCK" "$slog" rstream -b 127.0.0.1 -p "$PORT" "$@"
	fi
	if waitserver "" "$PORT" "$slog" "$rs"; then
		if [ -n "$rs" ]; then
			vrun "" "$SAME_SOCK" rstream -s 127.0.0.1 -p "$PORT" "$@" >"$out" 2>&1 || true
		else
			timeout 120 rstream -T s -s 127.0.0.1 -p "$PORT" "$@" >"$out" 2>&1 || true
		fi
		# name bytes xfers iters total time Gb/sec usec/xfer
		if [ "$test" = 64_lat ]; then
			emit "$src" "$test" lat_us "$(awk '$1 == "custom" { print $8 }' "$out")"
		else
			emit "$src" "$test" bw "$(awk '$1 == "custom" { print $7 * 1e9 / 8 }' "$out")"
		fi
	fi
	stop_server
	cat "$slog" "$out" >>"$RAW/rstream-all.log"
}

# fipp SOURCE PROV EP SIZE ITERS: an fi_pingpong pair on localhost (verbs
# under `vrdma run`); its MB/s and µs per transfer (half a round trip).
fipp() {
	local src=$1 prov=$2 ep=$3 size=$4 iters=$5 slog=$RAW/fi-server.out out=$RAW/fi.out pre=()
	nextport
	pre=(timeout 120)
	[ "$prov" = verbs ] && pre=(env VRDMA_SOCKET="$SAME_SOCK" timeout 120 "$BIN/vrdma" run --)
	server "" "" "$slog" "${pre[@]}" fi_pingpong -p "$prov" -e "$ep" -S "$size" -I "$iters" -B "$PORT"
	if waitserver "" "$PORT" "$slog" ""; then
		"${pre[@]}" fi_pingpong -p "$prov" -e "$ep" -S "$size" -I "$iters" -P "$PORT" 127.0.0.1 >"$out" 2>&1 || true
		# bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
		local line
		line=$(awk 'p && NF >= 8 { print; exit } $1 == "bytes" { p = 1 }' "$out")
		emit "$src-$ep" "fi_pingpong-$size" bw "$(awk '{ print $6 * 1e6 }' <<<"$line")"
		emit "$src-$ep" "fi_pingpong-$size" lat_us "$(awk '{ print $7 }' <<<"$line")"
	fi
	stop_server
	cat "$slog" "$out" >>"$RAW/fi-all.log"
}

# write_table: the section, from what $RES holds so far.
write_table() {
	local table=$BIN/table.md
	if [ -n "${TABLE_ONLY:-}" ]; then
		LOAD=$(cat "$RAW/load1")
	else
		LOAD=$(cut -d' ' -f1 /proc/loadavg)
		echo "$LOAD" >"$RAW/load1"
	fi
	{
		echo "<!-- rsockets and libfabric: bench/rsockets.sh writes this section -->"
		echo "## rsockets and libfabric's verbs provider (issue 19)"
		echo
		echo "Measured $(date -u +%Y-%m-%d) with \`bench/rsockets.sh $REPS\` ($REPS runs per row; medians, range in brackets)."
		echo "Debian's programs, unmodified: iperf3 $(iperf3 --version 2>/dev/null | head -1 | cut -d' ' -f2), rstream (rdmacm-utils), fi_pingpong (libfabric $(fi_info --version 2>/dev/null | awk '/libfabric:/ { print $2 }'))."
		echo "iperf3 under librspreload: \`vrdma run -- env LD_PRELOAD=$PRELOAD iperf3 ...\`, server and client, -t $SECS, one stream;"
		echo "each server's log shows the guest library's rdma_cm listen line (rsockets, not librspreload's fallback to kernel TCP)."
		echo "Same host: one daemon (--no-switch), 127.0.0.1; the anchor is iperf3 on loopback TCP. Between hosts: two namespaces on a veth"
		echo "(MTU 1500), a daemon each on one switch, a Soft-RoCE link on each end (RoCEv2); the anchor is iperf3 over TCP on the same veth."
		echo "rstream on 127.0.0.1, on rsockets under \`vrdma run\` (\`rstream\`) vs kernel TCP (\`rstream -T s\`: -T s selects standard"
		echo "socket calls), custom sizes: 64_lat is its µs per transfer (half a round trip) with \`-S 64 -C 1 -I 2000\`, 64k_bw and 1m_bw"
		echo "the rate of \`-S 65536 -C 1000\` and \`-S 1048576 -C 100\` (transfers streamed each way). fi_pingpong: \`-p verbs\` under \`vrdma run\` vs \`-p tcp\` (libfabric's tcp provider on"
		echo "loopback), same endpoint type, -I 5000 at 8 B and -I 500 at 64 KiB; its µs per transfer (half a round trip) and MB/s."
		echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(uname -sr)."
		echo "The load average was $LOAD0 when the run started and $LOAD when the table was written ($(nproc) cores shared with"
		echo "other builds and tests running at the same time): the figures are noisy, the ratios between neighbours less so."
		echo
		python3 - "$RES" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def vals(src, test, key):
    return [r[key] for r in rows if r["source"] == src and r["test"] == test and key in r]
def med(v):
    return statistics.median(v) if v else None
def cell(v, scale=1.0, fmt="%.2f"):
    if not v:
        return "not measured"
    v = [x * scale for x in v]
    return ("**" + fmt + "** (" + fmt + "–" + fmt + ")") % (statistics.median(v), min(v), max(v))
# Gb/s to 3 significant figures (fi_pingpong's 8-byte rates are a few Mb/s).
spec = [
    ("iperf3-rspreload-same", "iperf3", "iperf3 under librspreload on vrdma, same host"),
    ("iperf3-tcp-loopback", "iperf3", "iperf3 on loopback TCP"),
    ("iperf3-rspreload-roce", "iperf3", "iperf3 under librspreload, between hosts (RoCEv2)"),
    ("iperf3-tcp-veth", "iperf3", "iperf3 over TCP on the same veth"),
    ("rstream-rs", "64_lat", "rstream on rsockets, 64_lat"),
    ("rstream-tcp", "64_lat", "rstream -T s (TCP), 64_lat"),
    ("rstream-rs", "64k_bw", "rstream on rsockets, 64k_bw"),
    ("rstream-tcp", "64k_bw", "rstream -T s (TCP), 64k_bw"),
    ("rstream-rs", "1m_bw", "rstream on rsockets, 1m_bw"),
    ("rstream-tcp", "1m_bw", "rstream -T s (TCP), 1m_bw"),
]
for ep in ("msg", "rdm"):
    for size, label in ((8, "8 B"), (65536, "64 KiB")):
        spec.append(("fi-verbs-" + ep, "fi_pingpong-%d" % size, "fi_pingpong -p verbs -e %s, %s" % (ep, label)))
        spec.append(("fi-tcp-" + ep, "fi_pingpong-%d" % size, "fi_pingpong -p tcp -e %s, %s" % (ep, label)))
print("| measurement | Gb/s | latency µs | runs |")
print("|---|---:|---:|---:|")
for src, test, label in spec:
    bw, lat = vals(src, test, "bw"), vals(src, test, "lat_us")
    print("| %s | %s | %s | %d |" % (label, cell(bw, 8e-9, "%.3g") if bw or not lat else "", cell(lat, 1, "%.1f") if lat else "", max(len(bw), len(lat))))
print()
print("### Targets (ratios of the medians above)")
print()
print("| target | measured | verdict |")
print("|---|---:|---|")
def line(label, av, bv, ok):
    a, b = med(av), med(bv)
    x = a / b if a is not None and b else None
    if x is None:
        print("| %s | not measured (a run failed) | **missed** |" % label)
        return
    # The ratios within each rep (the two rows ran back to back), when every rep gave both.
    per = ""
    if len(av) == len(bv) and len(av) > 1:
        r = [p / q for p, q in zip(av, bv) if q]
        per = " (per run %.2g–%.2g, %d of %d on target)" % (min(r), max(r), sum(1 for y in r if ok(y)), len(r))
    print("| %s | %.3g×%s | %s |" % (label, x, per, "met" if ok(x) else "**missed**"))
ge = lambda x: x >= 1.0
le = lambda x: x <= 1.0
line("iperf3 under librspreload over vrdma, same host ≥ 1.0× loopback TCP",
     vals("iperf3-rspreload-same", "iperf3", "bw"), vals("iperf3-tcp-loopback", "iperf3", "bw"), ge)
line("iperf3 under librspreload between hosts (RoCEv2) ≥ 1.0× TCP on the same veth",
     vals("iperf3-rspreload-roce", "iperf3", "bw"), vals("iperf3-tcp-veth", "iperf3", "bw"), ge)
line("rstream 64_lat on rsockets ≤ 1.0× rstream -T s (TCP)",
     vals("rstream-rs", "64_lat", "lat_us"), vals("rstream-tcp", "64_lat", "lat_us"), le)
for ep in ("msg", "rdm"):
    for size, label in ((8, "8 B"), (65536, "64 KiB")):
        t = "fi_pingpong-%d" % size
        line("fi_pingpong -e %s %s latency ≤ 1.0× -p tcp" % (ep, label),
             vals("fi-verbs-" + ep, t, "lat_us"), vals("fi-tcp-" + ep, t, "lat_us"), le)
        line("fi_pingpong -e %s %s bandwidth ≥ 1.0× -p tcp" % (ep, label),
             vals("fi-verbs-" + ep, t, "bw"), vals("fi-tcp-" + ep, t, "bw"), ge)
PY
		echo
		echo "Notes: iperf3's client under librspreload reports \"getsockopt - Operation not supported\" in its JSON (TCP_INFO, which"
		echo "rsockets do not have, as with rdma-core) and its rates regardless. Libfabric's tcp provider (the fi_pingpong anchor) is"
		echo "slow on this loaded machine at 64 KiB with -e msg (milliseconds per transfer); its -e rdm rows (verbs;ofi_rxm vs tcp;ofi_rxm) are"
		echo "the closer comparison there. fi_pingpong prints its MB/s with two decimals, so its 8-byte rates are coarse. With the"
		echo "machine loaded, single latency runs range widely (see the brackets): the per-run ratios say how often a target was met."
		echo "Raw outputs: bench/results/raw-rsockets (not committed)."
		if [ -n "${MISSING:-}" ]; then
			echo
			echo "$MISSING"
		fi
		echo "<!-- end of rsockets and libfabric -->"
	} >"$table"
	write_section "rsockets and libfabric" "$table" "connection setup"
}

if [ -n "${TABLE_ONLY:-}" ]; then
	write_table
	exit 0
fi
local_daemon "$RAW/daemon.log"
DPIDS+=("$DAEMON_PID")
SAME_SOCK=$VRDMA_SOCKET
unset VRDMA_SOCKET

# Same host: every row once per rep, back to back.
MISSING="Not measured in this run: the between-hosts rows (the run stopped before their set-up finished; see bench/results/raw-rsockets)."
echo "$MISSING" >"$RAW/missing"
for r in $(seq "$REPS"); do
	echo "rep $r/$REPS (same host), $(elapsed) s"
	iperf iperf3-rspreload-same "" "$SAME_SOCK" "" "$SAME_SOCK" 127.0.0.1
	iperf iperf3-tcp-loopback "" "" "" "" 127.0.0.1
	for src in rstream-rs rstream-tcp; do
		rstream_pair "$src" 64_lat -S 64 -C 1 -I 2000
		rstream_pair "$src" 64k_bw -S 65536 -C 1000
		rstream_pair "$src" 1m_bw -S 1048576 -C 100
	done
	for ep in msg rdm; do
		fipp fi-verbs verbs "$ep" 8 5000
		fipp fi-tcp tcp "$ep" 8 5000
		fipp fi-verbs verbs "$ep" 65536 500
		fipp fi-tcp tcp "$ep" 65536 500
	done
done
write_table

# Between hosts over RoCEv2.
two_hosts vrdma-rs-a vrdma-rs-b 10.83.0 fd83:0:0:83
PKI=$BIN/pki
"$BIN/vrdma" switch ca init --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert a --ip "$ADDR_A4" --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert b --ip "$ADDR_B4" --dir "$PKI" >/dev/null
start_daemon a --host-name a --pki "$PKI" --etcd-client-url "https://$ADDR_A4:2379" --etcd-peer-url "https://$ADDR_A4:2380"
start_daemon b --host-name b --pki "$PKI" --etcd-endpoints "https://$ADDR_A4:2379"
va link add rxe0 type rxe netdev veth-a >/dev/null
vb link add rxe0 type rxe netdev veth-b >/dev/null
for _ in $(seq 300); do
	va host show --json 2>/dev/null | grep -q '"path": *"rdma' && break
	sleep 0.1
done
for r in $(seq "$REPS"); do
	echo "rep $r/$REPS (between hosts), $(elapsed) s"
	iperf iperf3-rspreload-roce "$NS_B" "$SB" "$NS_A" "$SA" "$ADDR_B4"
	iperf iperf3-tcp-veth "$NS_B" "" "$NS_A" "" "$ADDR_B4"
done
MISSING=""
rm -f "$RAW/missing"
write_table
