#!/usr/bin/env bash
# Installs, as root, what the multi-host tests need, then builds the interop
# guest once:
#   internal/netns    iproute2 (ip), nftables (nft, for SetLoss), util-linux
#                     (unshare, for the daemons' own hostnames)
#   internal/interop  ../shared/interop/setup.sh installs its own packages
#                     (qemu-system-x86, busybox-static, rdma-core, ibverbs-utils,
#                     perftest, tcpdump, ...) and builds the guest's kernel and
#                     initramfs into the cache below, where the Go tests find it.
#   internal/pyverbs  python3-pyverbs, and rdma-core's pyverbs tests for it,
#                     fetched from Debian by .ci/pyverbs-tests.sh into
#                     /var/tmp/vrdma-pyverbs (never kept in the repository).
# Not root: does nothing (those tests skip). Idempotent; a second run takes a
# few seconds (setup.sh rebuilds the initramfs, about 3 s).
#
# Environment: VRDMA_INTEROP_CACHE (default /var/tmp/vrdma-interop: outside the
# work tree, kept between CI steps and runs on one machine; the Go tests read
# the same variable).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: not root: nothing installed (the namespace and interop tests will skip)"
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive

missing=""
for p in iproute2 nftables util-linux python3-pyverbs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "deps.sh: apt-get install$missing"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# Fails if Debian serves the suite neither way (the network, most likely).
./.ci/pyverbs-tests.sh

interop=../shared/interop
cache=${VRDMA_INTEROP_CACHE:-/var/tmp/vrdma-interop}
if [ ! -x "$interop/setup.sh" ]; then
	echo "deps.sh: no $interop/setup.sh: the interop tests will skip"
	exit 0
fi
mkdir -p "$cache"
start=$(date +%s.%N)
# The Go tests take the same lock before they would run setup.sh themselves.
if ! flock "$cache/.lock" env INTEROP_BUILD="$cache" "$interop/setup.sh" >"$cache/setup.log" 2>&1; then
	tail -n 60 "$cache/setup.log"
	echo "deps.sh: $interop/setup.sh failed (whole log: $cache/setup.log)" >&2
	exit 1
fi
echo "deps.sh: interop guest built in $cache by setup.sh in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
