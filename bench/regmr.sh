#!/usr/bin/env bash
# Measures ibv_reg_mr + ibv_dereg_mr of 4 KiB, 1 MiB and 64 MiB (bench/regmr.c)
# on a vrdma adapter through the guest library, and the same program on the
# kernel's rdma_rxe in an interop guest when one can be booted (root, the
# guest built in the interop cache; see ../shared/interop), and writes the
# table into docs/perf.md (its "memory registration" section).
# Usage: bench/regmr.sh [ROUNDS]   (default 21; medians of ROUNDS each)
# The guest runs under QEMU's TCG (no KVM here): its numbers are an
# emulated CPU's and so an upper bound for rdma_rxe on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-21}
BIN=$(mktemp -d)
GUEST_BUILD=""
cleanup() {
	kill "${DAEMON_PID:-}" 2>/dev/null || true
	if [ -n "$GUEST_BUILD" ]; then
		(cd ../shared/interop && INTEROP_BUILD=$GUEST_BUILD INTEROP_NETNS=vrdma-regmr ./guest.sh down >/dev/null 2>&1) || true
		rm -rf "$GUEST_BUILD"
	fi
	rm -rf "$BIN"
}
trap cleanup EXIT
cc -O2 -Wall -Wextra -o "$BIN/regmr" bench/regmr.c -libverbs
go build -o "$BIN/vrdma" ./cmd/vrdma
LIB=$("$BIN/vrdma" guest path)
export VRDMA_SOCKET=$BIN/vrdma.sock
"$BIN/vrdma" daemon --no-switch --socket "$VRDMA_SOCKET" --state-dir "" >"$BIN/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 50); do [ -S "$VRDMA_SOCKET" ] && break; sleep 0.1; done

declare -A vr rxe
while read -r _ _ size _ med _ _ _ _; do vr[$size]=$med; done < <(LD_LIBRARY_PATH=$LIB "$BIN/regmr" vrdma0 "$ROUNDS")

CACHE=${VRDMA_INTEROP_CACHE:-/var/tmp/vrdma-interop}
if [ "$(id -u)" = 0 ] && [ -f "$CACHE/vmlinux" ] && [ -f "$CACHE/initramfs.cpio" ]; then
	GUEST_BUILD=$(mktemp -d)
	ln -s "$CACHE/vmlinux" "$CACHE/initramfs.cpio" "$GUEST_BUILD/"
	g() { (cd ../shared/interop && INTEROP_BUILD=$GUEST_BUILD INTEROP_NETNS=vrdma-regmr INTEROP_SUBNET=10.47.93 \
		INTEROP_APPEND="interop.maxlife=600" ./guest.sh "$@"); }
	if g up A 10.47.93.1/24 >/dev/null 2>&1; then
		cp "$BIN/regmr" "$GUEST_BUILD/run/A/regmr"
		while read -r _ _ size _ med _ _ _ _; do rxe[$size]=$med; done < <(g exec A 300 "cp /mnt/host/regmr /tmp/regmr && /tmp/regmr rxe0 $ROUNDS" | grep '^regmr ')
	fi
fi

SEC=$BIN/section.md
{
	echo "<!-- memory registration: bench/regmr.sh writes this section -->"
	echo "## Memory registration: ibv_reg_mr + ibv_dereg_mr"
	echo
	echo "One registration and its deregistration of a page-aligned, touched buffer, median of $ROUNDS"
	echo "(bench/regmr.c, the same program on both). rdma_rxe runs in the interop guest under QEMU's TCG"
	echo "(no KVM here), so its column is an emulated CPU's. $(date -u +%Y-%m-%d), $(nproc) cores."
	echo
	echo "| size | vrdma (guest library) µs | rdma_rxe (interop guest, TCG) µs |"
	echo "|---|---|---|"
	for s in 4096 1048576 67108864; do
		echo "| $((s / 1024)) KiB | ${vr[$s]:-n/a} | ${rxe[$s]:-not run} |"
	done
	echo
	echo "<!-- end of memory registration -->"
} >"$SEC"
cat "$SEC"
write_section "memory registration" "$SEC" "guest library"
