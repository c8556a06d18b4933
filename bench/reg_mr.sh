#!/usr/bin/env bash
# Measures ibv_reg_mr + ibv_dereg_mr of 4 KiB, 1 MiB and 64 MiB of malloc'd
# memory through the guest library (bench/reg_mr.c; medians of REPS pairs),
# as JSON lines: docs/design/guest-memory.md has the numbers.
# Usage: bench/reg_mr.sh [REPS]   (default 21). Only this machine's own
# processes are used.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-21}
BIN=$(mktemp -d)
trap 'kill "${DAEMON_PID:-}" 2>/dev/null || true; rm -rf "$BIN"' EXIT
go build -o "$BIN/vrdma" ./cmd/vrdma
cc -O2 -Wall -o "$BIN/reg_mr" bench/reg_mr.c -libverbs
LIB=$("$BIN/vrdma" guest path)
export VRDMA_SOCKET=$BIN/vrdma.sock
"$BIN/vrdma" daemon --no-switch --socket "$VRDMA_SOCKET" --state-dir "" >"$BIN/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 50); do [ -S "$VRDMA_SOCKET" ] && break; sleep 0.1; done
ulimit -l unlimited 2>/dev/null || true
env LD_LIBRARY_PATH="$LIB" "$BIN/reg_mr" "$REPS" "${LABEL:-vrdma}"
