#!/usr/bin/env bash
# Benchmarks Debian's unmodified RDMA tools on vrdma adapters through the
# guest library (internal/guest: the drop-in libibverbs.so.1), next to the
# Go library on the same path and to the anchors, interleaved in one run on
# this machine, and writes the table of medians into docs/perf.md (its
# "guest library" section):
#   - perftest ib_write_bw 1 MiB vs vrdma perf --loopback rc_rdma_write_bw 1 MiB;
#   - perftest ib_send_lat 8 B on async adapters vs vrdma perf --loopback
#     --async rc_lat 8 B, both next to UCX posix tag_lat (ucx_perftest);
#   - qperf rc_lat / rc_bw on vrdma vs qperf tcp_lat / tcp_bw on loopback.
# Usage: bench/guest.sh [REPS]   (default 3; about 40 s per rep)
# Only loopback and this machine's own processes are used.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
REPS=${1:-${REPS:-3}}
SECS=${SECS:-2}
OUT=bench/results
RAW=$OUT/raw-guest
mkdir -p "$RAW"
RES=$OUT/guest.jsonl
: >"$RES"

for p in perftest qperf ucx-utils; do
	bin=$p
	[ "$p" = ucx-utils ] && bin=ucx_perftest
	[ "$p" = perftest ] && bin=ib_write_bw
	command -v "$bin" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null; }
done
BIN=$(mktemp -d)
trap 'kill "${DAEMON_PID:-}" 2>/dev/null || true; rm -rf "$BIN"' EXIT
go build -o "$BIN/vrdma" ./cmd/vrdma
go build -o "$BIN/anchor" ./bench/anchor
LIB=$("$BIN/vrdma" guest path)

local_daemon "$RAW/daemon.log"
"$BIN/vrdma" vm create bench-async --async >/dev/null

tag() { sed -e "s/^{/{\"source\":\"$1\",/"; }
PORT=24000
nextport() { PORT=$((PORT + 1)); }
# waitport PORT: until something listens on TCP PORT.
waitport() { for _ in $(seq 100); do ss -ltn "sport = :$1" | grep -q LISTEN && return 0; sleep 0.05; done; return 1; }

# perftest INSTANCE TOOL SIZE ARGS...: server and client on the instance's vrdma0.
perftest() {
	local inst=$1 tool=$2 size=$3
	shift 3
	nextport
	env LD_LIBRARY_PATH="$LIB" VRDMA_INSTANCE="$inst" timeout 60 "$tool" -d vrdma0 -x 0 -p "$PORT" -s "$size" "$@" >>"$RAW/perftest-server.log" 2>&1 &
	local srv=$!
	waitport "$PORT" || true
	env LD_LIBRARY_PATH="$LIB" VRDMA_INSTANCE="$inst" timeout 60 "$tool" -d vrdma0 -x 0 -p "$PORT" -s "$size" "$@" 127.0.0.1 >"$RAW/perftest-client.out" 2>&1 || true
	wait "$srv" 2>/dev/null || true
	cat "$RAW/perftest-client.out" >>"$RAW/perftest-client.log"
	# The result row follows the #bytes header: bandwidth tools print Gb/s
	# average in column 4 (--report_gbits), latency tools t_typical (µs) in 5.
	awk -v src="$([ "$inst" = default ] && echo perftest || echo perftest-async)" -v t="$tool" '
		hdr && NF >= 4 && $1 ~ /^[0-9]+$/ {
			if (t ~ /_bw$/) printf "{\"source\":\"%s\",\"test\":\"%s\",\"msg_size\":%d,\"bw\":%f}\n", src, t, $1, $4 * 1e9 / 8
			else printf "{\"source\":\"%s\",\"test\":\"%s\",\"msg_size\":%d,\"latency_us\":%s}\n", src, t, $1, $5
			exit }
		/#bytes/ { hdr = 1 }' "$RAW/perftest-client.out" >>"$RES"
}

# qperf SOURCE SIZE TEST: qperf's server and client; vrdma's through the library.
qperf_run() {
	local src=$1 size=$2 test=$3 env=()
	[ "$src" = qperf-vrdma ] && env=(LD_LIBRARY_PATH="$LIB")
	nextport
	env "${env[@]}" timeout 60 qperf -lp "$PORT" >>"$RAW/qperf-server.log" 2>&1 &
	local srv=$!
	waitport "$PORT" || true
	env "${env[@]}" timeout 60 qperf -lp "$PORT" 127.0.0.1 -t "$SECS" -m "$size" "$test" >"$RAW/qperf.out" 2>&1 || true
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	cat "$RAW/qperf.out" >>"$RAW/qperf-client.log"
	awk -v src="$src" -v t="$test" -v s="$size" '
		function scale(u) { return u == "ns" ? 0.001 : u == "us" ? 1 : u == "ms" ? 1000 : u == "sec" ? 1e6 : 0 }
		function bscale(u) { return u == "KB/sec" ? 1e3 : u == "MB/sec" ? 1e6 : u == "GB/sec" ? 1e9 : u == "bytes/sec" ? 1 : 0 }
		$1 == "latency" && $2 == "=" { printf "{\"source\":\"%s\",\"test\":\"%s\",\"msg_size\":%d,\"latency_us\":%f}\n", src, t, s, $3 * scale($4) }
		$1 == "bw" && $2 == "=" { printf "{\"source\":\"%s\",\"test\":\"%s\",\"msg_size\":%d,\"bw\":%f}\n", src, t, s, $3 * bscale($4) }' "$RAW/qperf.out" >>"$RES"
}

ucx_lat() {
	nextport
	UCX_TLS=posix timeout 60 taskset -c 1 ucx_perftest -p "$PORT" >>"$RAW/ucx-server.log" 2>&1 &
	local srv=$! line=""
	for _ in $(seq 50); do
		sleep 0.1
		line=$(UCX_TLS=posix timeout 60 taskset -c 0 ucx_perftest 127.0.0.1 -p "$PORT" -t tag_lat -s 8 -n 1000000 -w 100000 2>>"$RAW/ucx-client.log" | awk '/^Final:/{print; exit}') && [ -n "$line" ] && break
	done
	wait "$srv" 2>/dev/null || true
	[ -n "$line" ] && echo "$line" | awk '{printf "{\"source\":\"ucx-posix\",\"test\":\"tag_lat\",\"msg_size\":8,\"latency_us\":%s}\n", $3}' >>"$RES"
}

for r in $(seq "$REPS"); do
	echo "rep $r/$REPS"
	perftest default ib_write_bw 1048576 -n 5000 --report_gbits
	"$BIN/vrdma" perf --loopback --json -t "$SECS" -m 1M rc_rdma_write_bw | tag vrdma >>"$RES"
	perftest bench-async ib_send_lat 8 -n 20000
	"$BIN/vrdma" perf --loopback --async --json -t "$SECS" -m 8 rc_lat | tag vrdma-async >>"$RES"
	ucx_lat
	qperf_run qperf-vrdma 8 rc_lat
	qperf_run qperf-tcp 8 tcp_lat
	qperf_run qperf-vrdma 65536 rc_bw
	qperf_run qperf-tcp 65536 tcp_bw
done

table=$BIN/table.md
LOAD=$(cut -d' ' -f1 /proc/loadavg)
{
	echo "<!-- guest library: bench/guest.sh writes this section -->"
	echo "## Unmodified tools on the guest library (one host)"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/guest.sh $REPS\` ($REPS runs per row, interleaved; $SECS s per vrdma perf and qperf test):"
	echo "Debian's perftest and qperf, unmodified, on vrdma adapters through the drop-in libibverbs.so.1 (\`vrdma guest path\`),"
	echo "server and client on one daemon (\`--no-switch\`); perftest with \`-d vrdma0 -x 0\` (ib_write_bw -n 5000, ib_send_lat -n 20000"
	echo "on an instance of async adapters); \`vrdma perf --loopback\` is the Go library on the same path; qperf tcp_lat/tcp_bw on loopback;"
	echo "UCX posix tag_lat pinned to two cores. perftest's latency is its t_typical, one-way (half a round trip), as vrdma perf's."
	echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(uname -sr)."
	if awk -v l="$LOAD" 'BEGIN { exit !(l > 1.5) }'; then
		echo "The load average was $LOAD when the table was written (2 cores, shared with other builds and tests): the figures are noisy."
	fi
	echo
	"$BIN/anchor" guesttable "$RES"
	echo "<!-- end of guest library -->"
} >"$table"
write_section "guest library" "$table"
