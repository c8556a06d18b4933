#!/usr/bin/env bash
# Benchmarks the stacks software is built on (issue 18), Debian's unmodified
# UCX and Open MPI on vrdma adapters through the guest library, interleaved
# in one run, and writes the table of medians with its targets into
# docs/perf.md (its "stacks" section):
#   - Open MPI 1 MiB ping-pong (testdata mpicheck -pingpong, pml ucx over
#     rc_verbs, UCX's default thresholds) under `vrdma run -- mpirun -np 2`,
#     same host, next to ucx_perftest tag_bw 1 MiB rc_verbs on the same
#     adapters; an LD_PRELOAD counter (bench/regcount.c) counts the ranks'
#     ibv_reg_mr/ibv_dereg_mr calls, and the calls per message after
#     warm-up are the difference between a long and a short run;
#   - ucx_perftest tag_bw 1 MiB and tag_lat 8 B over rc_verbs between two
#     namespace hosts (RoCEv2: a Soft-RoCE link on each veth) next to the
#     same over UCX_TLS=tcp between the same hosts;
#   - Open MPI ping-pong (mpicheck -pingpong) of 1 MiB and 8 B between the
#     same two hosts, one rank on each, over libfabric's verbs;ofi_rxm (pml
#     cm, mtl ofi) next to Open MPI's TCP BTL (pml ob1) on the same veth.
# Needs root (namespaces), ucx-utils, openmpi-bin, libopenmpi-dev, gcc,
# libibverbs-dev. About 1 minute per rep.
# Usage: bench/stacks.sh [REPS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
REPS=${1:-${REPS:-3}}
need_tool ucx_perftest ucx-utils
need_tool mpirun openmpi-bin
need_tool mpicc libopenmpi-dev
bench_setup stacks.sh raw-stacks stacks.jsonl
export VRDMA_GUEST_CACHE=$BIN/guest-cache
mkdir -m 700 -p "$VRDMA_GUEST_CACHE"
mpicc -std=c11 -O2 -Wall -Wextra -o "$BIN/mpicheck" internal/stacks/testdata/mpicheck.c
cc -std=c11 -Wall -Wextra -O2 -shared -fPIC -o "$BIN/regcount.so" bench/regcount.c -ldl

two_hosts vrdma-stk-a vrdma-stk-b 10.81.0 fd81:0:0:81
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

# ucx NAME TLS DEVA DEVB SIZE TEST [SERVER_NS SERVER_SOCK SERVER_ADDR]: one
# ucx_perftest pair, the server in A (or the host given), the client in A
# for same-host rows, else in B; its Final line becomes a row.
ucx() {
	local name=$1 tls=$2 deva=$3 devb=$4 size=$5 test=$6 where=$7 iters=200
	[ "$size" -ge 65536 ] || iters=20000
	local cns=$NS_B csock=$SB cdev=$devb
	[ "$where" = same ] && cns=$NS_A csock=$SA cdev=$deva
	VRDMA_SOCKET=$SA UCX_TLS=$tls UCX_NET_DEVICES=$deva ip netns exec "$NS_A" timeout 60 "$BIN/vrdma" run -- ucx_perftest -p 13337 >>"$RAW/ucx-server.log" 2>&1 &
	local srv=$!
	for _ in $(seq 100); do ip netns exec "$NS_A" ss -ltn 'sport = :13337' | grep -q LISTEN && break; sleep 0.05; done
	VRDMA_SOCKET=$csock UCX_TLS=$tls UCX_NET_DEVICES=$cdev ip netns exec "$cns" timeout 60 "$BIN/vrdma" run -- \
		ucx_perftest "$ADDR_A4" -p 13337 -t "$test" -s "$size" -n "$iters" -w 20 >"$RAW/ucx.out" 2>&1 || echo "ucx_perftest $name failed (see $RAW/ucx-client.log)" >&2
	wait "$srv" 2>/dev/null || true
	cat "$RAW/ucx.out" >>"$RAW/ucx-client.log"
	awk -v n="$name" -v t="$test" -v s="$size" '/^Final:/ {
		printf "{\"source\":\"%s\",\"test\":\"%s\",\"msg_size\":%d,\"latency_us\":%s,\"bw\":%f}\n", n, t, s, $5, $7 * 1048576; exit }' "$RAW/ucx.out" >>"$RES"
}

# Open MPI across the two hosts: mpirun in A starts its daemon on B through
# a launch agent that enters B's namespace (as ssh would reach another
# machine), under vrdma run on each host.
AGENT=$BIN/mpi-agent
cat >"$AGENT" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
$ADDR_A4) exec ip netns exec $NS_A env VRDMA_SOCKET=$SA VRDMA_GUEST_CACHE=$VRDMA_GUEST_CACHE LD_LIBRARY_PATH= $BIN/vrdma run -- sh -c "\$*" ;;
$ADDR_B4) exec ip netns exec $NS_B env VRDMA_SOCKET=$SB VRDMA_GUEST_CACHE=$VRDMA_GUEST_CACHE LD_LIBRARY_PATH= $BIN/vrdma run -- sh -c "\$*" ;;
esac
echo "mpi-agent: no host \$host" >&2
exit 1
EOF
chmod 755 "$AGENT"
printf '%s slots=1\n%s slots=1\n' "$ADDR_A4" "$ADDR_B4" >"$BIN/mpi-hosts"

# mpi_between NAME SIZE ITERS MCA...: mpicheck -pingpong SIZE ITERS on 2
# ranks, one on each host, with the given transport options; its row has
# the one-way bandwidth and latency (SIZE over the bandwidth).
mpi_between() {
	local name=$1 size=$2 iters=$3
	shift 3
	VRDMA_SOCKET=$SA ip netns exec "$NS_A" timeout 120 "$BIN/vrdma" run -- \
		mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 --hostfile "$BIN/mpi-hosts" \
		--mca plm_rsh_agent "$AGENT" --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include "$MPI_NET" "$@" \
		"$BIN/mpicheck" -pingpong "$size" "$iters" >"$RAW/mpi.out" 2>&1 || echo "mpirun $name $size failed (see $RAW/mpi-between.log)" >&2
	cat "$RAW/mpi.out" >>"$RAW/mpi-between.log"
	awk -v n="$name" -v s="$size" '/^pingpong:/ && $7 > 0 {
		printf "{\"source\":\"%s\",\"test\":\"pingpong\",\"msg_size\":%d,\"bw\":%f,\"latency_us\":%f}\n", n, s, $7 * 1e6, s / $7; exit }' "$RAW/mpi.out" >>"$RES"
}
MPI_NET=${ADDR_A4%.*}.0/24 # the veth's subnet: the interfaces' names differ between the hosts
MPI_OFI=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include 'verbs;ofi_rxm' --mca btl self -x FI_LOG_LEVEL=warn)
MPI_TCP=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$MPI_NET" --mca mtl ^ofi)

# mpi_pingpong ITERS: `vrdma run -- mpirun -np 2` of mpicheck -pingpong 1 MiB
# in A; prints its bandwidth row and the ranks' registration calls.
mpi_pingpong() {
	local iters=$1 counts=$RAW/regcount.txt
	: >"$counts"
	VRDMA_SOCKET=$SA REGCOUNT_FILE=$counts ip netns exec "$NS_A" timeout 120 "$BIN/vrdma" run -- \
		mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 --mca pml ucx --mca btl self,vader \
		-x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=vrdma0:1 -x LD_PRELOAD="$BIN/regcount.so" -x REGCOUNT_FILE="$counts" \
		"$BIN/mpicheck" -pingpong 1048576 "$iters" >"$RAW/mpi.out" 2>&1 || echo "mpirun ($iters iterations) failed (see $RAW/mpi.log)" >&2
	cat "$RAW/mpi.out" >>"$RAW/mpi.log"
	local calls
	calls=$(awk '/^regcount:/ { n += $4 + $6 } END { print n + 0 }' "$counts")
	awk -v it="$iters" -v c="$calls" '/^pingpong:/ {
		printf "{\"source\":\"mpi-ucx\",\"test\":\"pingpong\",\"msg_size\":1048576,\"bw\":%f,\"iters\":%d,\"regcalls\":%d}\n", $7 * 1e6, it, c; exit }' "$RAW/mpi.out" >>"$RES"
}

for r in $(seq "$REPS"); do
	echo "rep $r/$REPS"
	mpi_pingpong 100
	mpi_pingpong 400
	ucx ucx-rc-same rc_v,self vrdma0:1 vrdma0:1 1048576 tag_bw same
	ucx ucx-rc rc_v vrdma0:1 vrdma0:1 1048576 tag_bw between
	ucx ucx-tcp tcp veth-a veth-b 1048576 tag_bw between
	ucx ucx-rc rc_v vrdma0:1 vrdma0:1 8 tag_lat between
	ucx ucx-tcp tcp veth-a veth-b 8 tag_lat between
	mpi_between mpi-ofi 1048576 200 "${MPI_OFI[@]}"
	mpi_between mpi-tcp 1048576 200 "${MPI_TCP[@]}"
	mpi_between mpi-ofi 8 20000 "${MPI_OFI[@]}"
	mpi_between mpi-tcp 8 20000 "${MPI_TCP[@]}"
done

table=$BIN/table.md
LOAD=$(cut -d' ' -f1 /proc/loadavg)
{
	echo "<!-- stacks: bench/stacks.sh writes this section -->"
	echo "## UCX and Open MPI on vrdma (issue 18)"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/stacks.sh $REPS\` ($REPS runs per row, interleaved; medians, range in brackets):"
	echo "Debian's UCX $(ucx_info -v | awk '/Version/ {print $3}') and Open MPI $(mpirun --version 2>/dev/null | awk 'NR==1 {print $NF}'), unmodified, under \`vrdma run\`."
	echo "Same host: both ranks (or perftest's server and client) on host a's daemon, UCX_TLS=rc_v,self (no shared memory)."
	echo "Between hosts: two namespaces on a veth, a daemon each on one switch, a Soft-RoCE link on each veth (RoCEv2); the UCX"
	echo "anchor is UCX_TLS=tcp on the same veth. ucx_perftest's latency is half its round trip (tag_lat), its bandwidth the overall MB/s."
	echo "MPI ping-pong: mpicheck -pingpong (internal/stacks/testdata), one-way bandwidth of 1 MiB messages bounced between 2 ranks;"
	echo "reg/dereg calls per message are both ranks' ibv_reg_mr and ibv_dereg_mr calls (bench/regcount.c) in a 400-iteration run"
	echo "minus those in a 100-iteration run, over the 600 messages between them. Between hosts, mpi-ofi is that ping-pong with one"
	echo "rank on each host over libfabric's verbs;ofi_rxm (pml cm, mtl ofi) and mpi-tcp the same over Open MPI's TCP BTL on the"
	echo "veth; their latency is the message size over the one-way bandwidth of 8 B messages."
	echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(uname -sr)."
	if awk -v l="$LOAD" 'BEGIN { exit !(l > 1.5) }'; then
		echo "The load average was $LOAD when the table was written (2 cores, shared with other builds and tests): the figures are noisy."
	fi
	echo
	python3 - "$RES" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def vals(src, test, size, key, iters=None):
    return [r[key] for r in rows if r["source"] == src and r["test"] == test and r["msg_size"] == size
            and (iters is None or r.get("iters") == iters)]
def med(v):
    return statistics.median(v) if v else None
def cell(v, scale=1.0, fmt="%.2f"):
    if not v:
        return "failed"
    v = [x * scale for x in v]
    return ("**" + fmt + "** (" + fmt + "–" + fmt + ")") % (statistics.median(v), min(v), max(v))
print("| source | test | size | GB/s | latency µs (one-way) | runs |")
print("|---|---|---:|---:|---:|---:|")
spec = [("mpi-ucx", "pingpong", 1 << 20, 400), ("ucx-rc-same", "tag_bw", 1 << 20, None), ("ucx-rc", "tag_bw", 1 << 20, None),
        ("ucx-tcp", "tag_bw", 1 << 20, None), ("ucx-rc", "tag_lat", 8, None), ("ucx-tcp", "tag_lat", 8, None),
        ("mpi-ofi", "pingpong", 1 << 20, None), ("mpi-tcp", "pingpong", 1 << 20, None),
        ("mpi-ofi", "pingpong", 8, None), ("mpi-tcp", "pingpong", 8, None)]
for src, test, size, iters in spec:
    bw = vals(src, test, size, "bw", iters)
    small = test == "tag_lat" or (test == "pingpong" and size == 8)
    lat = vals(src, test, size, "latency_us", iters) if small else []
    label = "1 MiB" if size == 1 << 20 else "%d B" % size
    print("| %s | %s | %s | %s | %s | %d |" % (src, test, label, cell(bw, 1e-9) if not small else "",
                                             cell(lat, 1, "%.1f") if small else "", len(bw)))
# reg/dereg calls per message after warm-up: (calls(400) - calls(100)) / 600 messages, per rep pair.
long = [r["regcalls"] for r in rows if r["source"] == "mpi-ucx" and r.get("iters") == 400]
short = [r["regcalls"] for r in rows if r["source"] == "mpi-ucx" and r.get("iters") == 100]
per = [(l - s) / 600.0 for l, s in zip(long, short)]
print()
print("### Targets (ratios of the medians above)")
print()
print("| target | measured | verdict |")
print("|---|---:|---|")
def ratio(a, b):
    return a / b if a is not None and b else None
def verdict(x, ok):
    if x is None:
        return "not measured (a run failed)", "**missed**"
    return "%.3g×" % x, ("met" if ok(x) else "**missed**")
m, v = verdict(ratio(med(vals("mpi-ucx", "pingpong", 1 << 20, "bw", 400)), med(vals("ucx-rc-same", "tag_bw", 1 << 20, "bw"))), lambda x: x >= 0.5)
print("| Open MPI 1 MiB ping-pong ≥ 0.5× ucx_perftest tag_bw 1 MiB rc_verbs, same host | %s | %s |" % (m, v))
if per:
    p = statistics.median(per)
    print("| reg/dereg calls per message after warm-up → 0 (UCX's registration cache holds) | %.2f | %s |" % (p, "met" if p < 0.01 else "**missed**"))
else:
    print("| reg/dereg calls per message after warm-up → 0 (UCX's registration cache holds) | not measured (a run failed) | **missed** |")
m, v = verdict(ratio(med(vals("ucx-rc", "tag_bw", 1 << 20, "bw")), med(vals("ucx-tcp", "tag_bw", 1 << 20, "bw"))), lambda x: x >= 1.0)
print("| ucx_perftest tag_bw 1 MiB rc_verbs between hosts (RoCEv2) ≥ 1.0× UCX over tcp | %s | %s |" % (m, v))
m, v = verdict(ratio(med(vals("ucx-rc", "tag_lat", 8, "latency_us")), med(vals("ucx-tcp", "tag_lat", 8, "latency_us"))), lambda x: x <= 1.0)
print("| ucx_perftest tag_lat 8 B rc_verbs between hosts (RoCEv2) ≤ 1.0× UCX over tcp | %s | %s |" % (m, v))
m, v = verdict(ratio(med(vals("mpi-ofi", "pingpong", 1 << 20, "bw")), med(vals("mpi-tcp", "pingpong", 1 << 20, "bw"))), lambda x: x >= 1.0)
print("| Open MPI 1 MiB ping-pong over the ofi MTL (verbs;ofi_rxm) between hosts ≥ 1.0× the TCP BTL | %s | %s |" % (m, v))
m, v = verdict(ratio(med(vals("mpi-ofi", "pingpong", 8, "latency_us")), med(vals("mpi-tcp", "pingpong", 8, "latency_us"))), lambda x: x <= 1.0)
print("| Open MPI 8 B ping-pong latency over the ofi MTL between hosts ≤ 1.0× the TCP BTL | %s | %s |" % (m, v))
PY
	echo "<!-- end of stacks -->"
} >"$table"
write_section stacks "$table" "guest library"
