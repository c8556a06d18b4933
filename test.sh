#!/usr/bin/env bash
# Runs every check and test of vrdma: formatting, vet, staticcheck, the unit,
# conformance and integration tests under the race detector, each fuzz
# target briefly, and the demo. Tests that need root (RLIMIT_MEMLOCK without
# CAP_IPC_LOCK, network namespaces) skip with a message when not root.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:$(go env GOPATH)/bin"
FUZZTIME=${FUZZTIME:-4s}
STATICCHECK_VERSION=2026.2.2 # what `staticcheck -version` prints; its module version is:
STATICCHECK_MODULE=v0.8.2

step() { printf '\n== %s\n' "$*"; }

step gofmt
bad=$(gofmt -l .)
if [ -n "$bad" ]; then
	echo "gofmt would change these files; run gofmt -w on them:"
	echo "$bad"
	exit 1
fi

step go vet
go vet ./...

step staticcheck
if ! staticcheck -version 2>/dev/null | grep -q "$STATICCHECK_VERSION"; then
	go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_MODULE"
fi
staticcheck ./...

step "fuzz targets, $FUZZTIME each"
# Every Fuzz function in the tree, found by name so none is forgotten.
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	pkg=./$(dirname "${f#./}")
	for fn in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | cut -d' ' -f2); do
		echo "$pkg $fn"
		fuzz() { go test -run='^$' -fuzz="^${fn}\$" -fuzztime="$FUZZTIME" "$pkg" >/tmp/vrdma-fuzz.log 2>&1; }
		if ! fuzz; then
			# Go's fuzzer sometimes fails its own shutdown on a loaded machine
			# ("context deadline exceeded" with no failing input): run again.
			if grep -q 'context deadline exceeded' /tmp/vrdma-fuzz.log && ! grep -q 'Failing input' /tmp/vrdma-fuzz.log && fuzz; then
				continue
			fi
			cat /tmp/vrdma-fuzz.log
			exit 1
		fi
	done
done

step demo
go run ./cmd/vrdma demo -t 0.2

# The conformance suite runs each test in every mode (sleeping workers,
# async poller, trusted instances on the direct path, two hosts over RoCEv2
# with IPv6 and IPv4 GIDs) as subtests: TestConformanceX/async and so on.
step "go test -race"
go test -race -count=1 -timeout 20m ./...

