#!/usr/bin/env bash
# Benchmarks vrdma's same-host path next to its anchors, interleaved in one
# run on this machine, and writes the table of medians to docs/perf.md:
#   - vrdma perf --loopback against a real daemon process, without and with
#     --async: rc_rdma_write_bw, rc_rdma_read_bw, rc_bw at 1 MiB and 64 KiB,
#     rc_lat and rc_rdma_write_lat at 8 B, 8-byte RDMA WRITE message rate;
#     and with --trusted (the direct path) for the one-sided tests;
#   - single-thread Go copy() at the same sizes (bench/anchor copy);
#   - UCX's ucx_perftest over shared memory (UCX_TLS=posix): tag_lat,
#     ucp_put_lat at 8 B, tag_bw, ucp_put_bw at 1 MiB (Debian's ucx-utils);
#   - an eventfd ping-pong between two cores: the cost of a wake-up;
#   - the daemon's memory per QP for 1,000 QPs.
# Usage: bench/run.sh [REPS]   (default 5; about 45 s per rep)
# Only loopback and this machine's own processes are used.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-${REPS:-5}}
SECS=${SECS:-1.5}
OUT=bench/results
RAW=$OUT/raw
mkdir -p "$RAW"
RES=$OUT/results.jsonl
: >"$RES"

if ! command -v ucx_perftest >/dev/null; then
	echo "installing ucx-utils (ucx_perftest)"
	apt-get update -qq && apt-get install -y -qq ucx-utils >/dev/null
fi
BIN=$(mktemp -d)
trap 'kill "${DAEMON_PID:-}" 2>/dev/null || true; rm -rf "$BIN"' EXIT
go build -o "$BIN/vrdma" ./cmd/vrdma
go build -o "$BIN/anchor" ./bench/anchor

export VRDMA_SOCKET=$BIN/vrdma.sock
"$BIN/vrdma" daemon --socket "$VRDMA_SOCKET" --state-dir "" >"$RAW/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 50); do [ -S "$VRDMA_SOCKET" ] && break; sleep 0.1; done

# tag: prefix each JSON line of a vrdma/anchor command with its source.
tag() { sed -e "s/^{/{\"source\":\"$1\",/"; }

vperf() { # MODE SIZE TESTS...
	local mode=$1 size=$2
	shift 2
	local flags=""
	case $mode in
	vrdma-async) flags=--async ;;
	vrdma-trusted) flags=--trusted ;;
	esac
	"$BIN/vrdma" perf --loopback $flags --json -t "$SECS" -m "$size" "$@" | tag "$mode" >>"$RES"
}

PORT=23000
ucx() { # TEST SIZE ITERS KIND
	local test=$1 size=$2 n=$3 kind=$4
	PORT=$((PORT + 1))
	UCX_TLS=posix timeout 60 taskset -c 1 ucx_perftest -p "$PORT" >>"$RAW/ucx-server.log" 2>&1 &
	local srv=$!
	local line=""
	for _ in $(seq 50); do
		sleep 0.1
		line=$(UCX_TLS=posix timeout 60 taskset -c 0 ucx_perftest 127.0.0.1 -p "$PORT" -t "$test" -s "$size" -n "$n" -w $((n / 10)) 2>>"$RAW/ucx-client.log" | awk '/^Final:/{print; exit}') && [ -n "$line" ] && break
	done
	wait "$srv" 2>/dev/null || true
	[ -n "$line" ] || { echo "ucx_perftest $test gave no result" >&2; return 0; }
	echo "$line" >>"$RAW/ucx-final.log"
	# Final: iters  lat-typical lat-avg lat-overall  bw-avg bw-overall (MB/s = MiB/s)  rate-avg rate-overall
	if [ "$kind" = lat ]; then
		echo "$line" | awk -v t="$test" -v s="$size" '{printf "{\"source\":\"ucx-posix\",\"test\":\"%s\",\"msg_size\":%d,\"latency_us\":%s,\"msg_rate\":%s}\n", t, s, $3, $9}' >>"$RES"
	else
		echo "$line" | awk -v t="$test" -v s="$size" '{printf "{\"source\":\"ucx-posix\",\"test\":\"%s\",\"msg_size\":%d,\"bw\":%f,\"msg_rate\":%s}\n", t, s, $7*1048576, $9}' >>"$RES"
	fi
}

for r in $(seq "$REPS"); do
	echo "rep $r/$REPS"
	for size in 1048576 65536; do
		"$BIN/anchor" copy "$size" "$SECS" >>"$RES"
		vperf vrdma "$size" rc_rdma_write_bw rc_rdma_read_bw rc_bw
		vperf vrdma-async "$size" rc_rdma_write_bw rc_rdma_read_bw rc_bw
		vperf vrdma-trusted "$size" rc_rdma_write_bw rc_rdma_read_bw
	done
	vperf vrdma 8 rc_lat rc_rdma_write_lat rc_rdma_write_bw
	vperf vrdma-async 8 rc_lat rc_rdma_write_lat rc_rdma_write_bw
	vperf vrdma-trusted 8 rc_rdma_write_lat rc_rdma_write_bw rc_compare_swap_mr
	ucx tag_lat 8 1000000 lat
	ucx ucp_put_lat 8 1000000 lat
	ucx tag_bw 1048576 10000 bw
	ucx ucp_put_bw 1048576 10000 bw
	"$BIN/anchor" wake 20000 >>"$RES"
done
"$BIN/anchor" qpmem 1000 >>"$RES"

{
	cat bench/perf-header.md
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/run.sh $REPS\` ($REPS runs per row, interleaved; $SECS s per vrdma test);"
	echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(uname -sr); $(go version | cut -d' ' -f3)."
	echo
	"$BIN/anchor" table "$RES"
	echo
	cat bench/perf-footer.md
} >docs/perf.md.new
mv docs/perf.md.new docs/perf.md
echo "wrote docs/perf.md"
