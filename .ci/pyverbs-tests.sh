#!/usr/bin/env bash
# Fetches rdma-core's pyverbs test suite (its tests/ directory) for the
# installed python3-pyverbs, from Debian, into a cache outside the work tree
# where internal/pyverbs finds it:
#
#   $VRDMA_PYVERBS_CACHE/<version>/tests     (default /var/tmp/vrdma-pyverbs)
#
# <version> is python3-pyverbs's Debian version (44.0-2 on Debian 12), so the
# tests always match the bindings they exercise. The suite is never kept in
# the repository. Two Debian sources, both verified by apt against the
# archive's signed Release file:
#   1. the source package (apt-get source rdma-core=<version>, through a
#      deb-src list private to the cache: the system's apt configuration is
#      left alone), whose tests/ is the suite;
#   2. when the source package cannot be fetched (a mirror without the
#      upstream tarball), python3-pyverbs itself, which installs the same
#      tests/ as documentation (/usr/share/doc/rdma-core/tests, most files
#      gzipped; debian/python3-pyverbs.install): taken from the installed
#      files, or with apt-get download if dpkg's path-exclude dropped them.
# Not root, or python3-pyverbs not installed: does nothing (the test skips,
# saying why). Idempotent: a second run finds the cache and returns.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "pyverbs-tests.sh: not root: nothing fetched (the pyverbs suite will skip)"
	exit 0
fi
version=$(dpkg-query -W -f='${Version}' python3-pyverbs 2>/dev/null || true)
if [ -z "$version" ] || ! dpkg-query -W -f='${Status}' python3-pyverbs 2>/dev/null | grep -q "install ok installed"; then
	echo "pyverbs-tests.sh: python3-pyverbs is not installed: nothing fetched (apt-get install python3-pyverbs)"
	exit 0
fi
cache=${VRDMA_PYVERBS_CACHE:-/var/tmp/vrdma-pyverbs}
dest=$cache/$version/tests
if [ -f "$dest/run_tests.py" ]; then
	echo "pyverbs-tests.sh: rdma-core $version's tests already in $dest"
	exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
# apt's downloads run as the _apt user, which must be able to write there.
chmod 0755 "$work"

from_source() {
	local apt=$work/apt
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
	chown -R _apt "$apt/src" 2>/dev/null || true
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" >"$apt/sources.list"
	local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache")
	apt-get "${opts[@]}" -qq update &&
		(cd "$apt/src" && apt-get "${opts[@]}" -qq source --download-only "rdma-core=$version") &&
		(cd "$apt/src" && dpkg-source --no-check -x ./*.dsc rdma-core >/dev/null) &&
		[ -f "$apt/src/rdma-core/tests/run_tests.py" ] &&
		mv "$apt/src/rdma-core/tests" "$work/tests"
}

from_binary() {
	local doc=/usr/share/doc/rdma-core/tests
	if [ ! -f "$doc/run_tests.py" ]; then
		(cd "$work" && apt-get -qq download "python3-pyverbs=$version") || return 1
		dpkg-deb -x "$work"/python3-pyverbs_*.deb "$work/deb" || return 1
		doc=$work/deb/usr/share/doc/rdma-core/tests
	fi
	mkdir -p "$work/tests"
	cp -a "$doc/." "$work/tests/"
	find "$work/tests" -name '*.gz' -exec gunzip -f {} +
	[ -f "$work/tests/run_tests.py" ]
}

# apt-get source checks the .dsc against the signed Sources index and the
# tarballs against the .dsc, so --no-check above skips only the .dsc's own
# signature by the maintainer, whose key apt does not hold.
if from_source 2>"$work/source.err"; then
	how="the source package rdma-core $version"
else
	echo "pyverbs-tests.sh: the source package rdma-core $version could not be fetched; taking the suite from python3-pyverbs $version:"
	sed 's/^/  /' "$work/source.err" | tail -n 5
	rm -rf "$work/tests"
	if ! from_binary; then
		echo "pyverbs-tests.sh: no rdma-core $version tests from Debian either way: the pyverbs suite will skip" >&2
		exit 1
	fi
	how="python3-pyverbs $version"
fi
mkdir -p "$cache/$version"
rm -rf "$dest"
mv "$work/tests" "$dest"
echo "pyverbs-tests.sh: rdma-core $version's tests from $how in $dest ($(find "$dest" -name 'test_*.py' | wc -l) test modules)"
