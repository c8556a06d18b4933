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

# step starts a step, after printing how long the one before took.
step_name=""
step_start=$SECONDS
step() {
	if [ -n "$step_name" ]; then
		printf '(%s: %ds)\n' "$step_name" $((SECONDS - step_start))
	fi
	step_name="$*"
	step_start=$SECONDS
	[ $# -eq 0 ] || printf '\n== %s\n' "$*"
}

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
# Every Fuzz function in the tree, found by name so none is forgotten. Each
# package's test binary is built once for all its targets, with the fuzzing
# instrumentation (go test -c -fuzz), and run as go test -fuzz runs it: in
# the package's directory, with the go command's corpus cache.
fuzzbin=$(mktemp -d)
trap 'rm -rf "$fuzzbin"' EXIT
fuzzcache="$(go env GOCACHE)/fuzz"
grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | while read -r dir; do
	pkg=./${dir#./}
	bin="$fuzzbin/$(echo "${dir#./}" | tr / _).test"
	go test -c -fuzz=. -o "$bin" "$pkg"
	importpath=$(go list "$pkg")
	for fn in $(cat "$dir"/*_test.go | grep -o '^func Fuzz[A-Za-z0-9_]*' | cut -d' ' -f2 | sort); do
		echo "$pkg $fn"
		fuzz() {
			(cd "$dir" && "$bin" -test.paniconexit0 -test.timeout=10m0s -test.run='^$' -test.fuzz="^${fn}\$" \
				-test.fuzztime="$FUZZTIME" -test.fuzzcachedir="$fuzzcache/$importpath") >"$fuzzbin/fuzz.log" 2>&1
		}
		if ! fuzz; then
			# Go's fuzzer sometimes fails its own shutdown on a loaded machine
			# ("context deadline exceeded" with no failing input): run again.
			if grep -q 'context deadline exceeded' "$fuzzbin/fuzz.log" && ! grep -q 'Failing input' "$fuzzbin/fuzz.log" && fuzz; then
				continue
			fi
			cat "$fuzzbin/fuzz.log"
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
# go test starts the packages' tests in the order it is given them, two at
# a time (-p, the number of CPUs): the longest go first, so that the short
# ones fill in beside them instead of one long package running alone at
# the end. Every package of go list ./... runs, once.
slow=""
for dir in internal/guest internal/interop internal/attack internal/stacks; do
	[ ! -d "$dir" ] || slow="$slow $(go list "./$dir")"
done
# The vrdma binary the namespace tests' daemons run (netns.VRDMABinary) is
# built once here for every package, instead of linked again by each.
# (In a directory of its own, mode 0755 as the tree's tmp/ it was built
# into: other users may run it.)
if [ -z "${VRDMA_BINARY:-}" ]; then
	vrdmabin=$(mktemp -d)
	trap 'rm -rf "$fuzzbin" "$vrdmabin"' EXIT
	chmod 755 "$vrdmabin"
	go build -o "$vrdmabin/vrdma" ./cmd/vrdma
	export VRDMA_BINARY="$vrdmabin/vrdma"
fi
go test -race -count=1 -timeout 20m $slow $(go list ./... | grep -v -x -F "$(printf '%s\n' $slow)")
step
echo "== test.sh passed in $((SECONDS))s"

