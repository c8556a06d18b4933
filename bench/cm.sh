#!/usr/bin/env bash
# Benchmarks connection setup through vrdma's connection manager (issue 12)
# between two hosts — two network namespaces joined by a veth pair, each
# running a daemon on ONE switch (a holds the embedded etcd, b joins it) —
# next to its anchors on the same veth, in one run:
#   - the Go API (`anchor cm connect`): Dial until both QPs are in RTS, one
#     connection at a time, over the TCP channel (no links) and then over
#     RoCEv2 (both hosts given a Soft-RoCE link): the CM's MADs on QP1 ride
#     whichever path the switch chose;
#   - rdma_cm's own cmtime (rdmacm-utils) under `vrdma run`, 100 connections
#     set up at once, if the drop-in librdmacm runs it;
#   - TCP connect on the same veth (`anchor tcpconn connect`);
#   - how long a listener takes to notice a vanished peer: a connected
#     process killed with SIGKILL (its daemon disconnects for it), and for
#     TCP the same (its kernel closes the socket);
#   - the kernel's rdma_cm on rdma_rxe: cmtime between two QEMU guests of
#     ../shared/interop (TCG-emulated: slower than this host's kernel would
#     be), unless NOGUEST=1 or the guests cannot boot here.
# It writes the table into docs/perf.md between the "connection setup"
# markers. Needs root (namespaces). About 2 minutes per rep.
# Usage: bench/cm.sh [REPS]   (default 3)   SECS=2 NOGUEST=1
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
REPS=${1:-${REPS:-3}}
need_tool cmtime rdmacm-utils
bench_setup cm.sh raw-cm cm.jsonl

two_hosts vrdma-cmb-a vrdma-cmb-b 10.79.0 fd79:0:0:79
PKI=$BIN/pki
"$BIN/vrdma" switch ca init --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert a --ip "$ADDR_A4" --dir "$PKI" >/dev/null
"$BIN/vrdma" host cert b --ip "$ADDR_B4" --dir "$PKI" >/dev/null
start_daemon a --host-name a --pki "$PKI" --etcd-client-url "https://$ADDR_A4:2379" --etcd-peer-url "https://$ADDR_A4:2380"
start_daemon b --host-name b --pki "$PKI" --etcd-endpoints "https://$ADDR_A4:2379"

# path_to HOST on A's daemon: the kind of path ("tcp", "rdma", ...) or "".
path_to() {
	va host show --json 2>/dev/null | python3 -c '
import json, sys
for h in json.load(sys.stdin).get("hosts", []):
    if h["name"] == sys.argv[1]:
        print((h.get("path") or "").split(":")[0]); break' "$1" || true
}
await_path() {
	for _ in $(seq 300); do
		[ "$(path_to b)" = "$1" ] && return 0
		sleep 0.1
	done
	va host show >"$RAW/hosts.txt" 2>&1 || true
	fail "a's path to b is '$(path_to b)', not $1 (see $RAW/hosts.txt, $RAW/daemon-*.log)"
}

# The servers in B: the Go API's listener and TCP's.
VRDMA_SOCKET=$SB ip netns exec "$NS_B" "$BIN/anchor" cm serve 7471 >"$RAW/cm-server.log" 2>&1 &
PIDS+=($!)
ip netns exec "$NS_B" "$BIN/anchor" tcpconn serve 7472 >"$RAW/tcp-server.log" 2>&1 &
PIDS+=($!)
sleep 0.5

# row PATH: tags each JSON line on stdin with the path and appends it.
row() { sed "s/^{/{\"path\":\"$1\",/" >>"$RES"; }

# noticed SERVERLOG KIND HOLDCMD...: start a holder, kill it once it is
# connected, and print how long the listener took to notice (from the
# kill to the server's line), as a row.
noticed() {
	local log=$1 kind=$2 path=$3
	shift 3
	local before held out pid t0 t1
	before=$(grep -c "\"test\":\"${kind}_noticed\"" "$log" || true)
	out=$(mktemp)
	"$@" >"$out" 2>>"$RAW/hold.log" &
	pid=$!
	for _ in $(seq 100); do grep -q _held "$out" && break; sleep 0.1; done
	held=$(grep -c _held "$out" || true)
	if [ "$held" = 0 ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		echo "$kind holder did not connect (see $RAW/hold.log)" >&2
		return 0
	fi
	t0=$(date +%s%N)
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	t1=""
	for _ in $(seq 300); do
		if [ "$(grep -c "\"test\":\"${kind}_noticed\"" "$log" || true)" -gt "$before" ]; then
			t1=$(grep "\"test\":\"${kind}_noticed\"" "$log" | tail -1 | sed 's/.*"unix_ns":\([0-9]*\).*/\1/')
			break
		fi
		sleep 0.01
	done
	rm -f "$out"
	if [ -z "$t1" ]; then
		echo "{\"path\":\"$path\",\"source\":\"$kind\",\"test\":\"notice_vanished\",\"msg_size\":0,\"latency_us\":null,\"note\":\"not within 3 s\"}" >>"$RES"
	else
		echo "{\"path\":\"$path\",\"source\":\"$kind\",\"test\":\"notice_vanished\",\"msg_size\":0,\"latency_us\":$(((t1 - t0) / 1000))}" >>"$RES"
	fi
}

# cmtime_vrdma PATH: rdma_cm's cmtime under vrdma run, if the drop-in
# librdmacm carries it; its "connect" step's µs per connection.
cmtime_vrdma() {
	VRDMA_SOCKET=$SB ip netns exec "$NS_B" timeout 60 "$BIN/vrdma" run -- cmtime -p 7473 >"$RAW/cmtime-server-$1.log" 2>&1 &
	local spid=$!
	sleep 1
	if VRDMA_SOCKET=$SA inA timeout 60 "$BIN/vrdma" run -- cmtime -s "$ADDR_B4" -p 7473 -c 100 >"$RAW/cmtime-client-$1.log" 2>&1; then
		cmtime_rows "vrdma-cmtime" "$1" <"$RAW/cmtime-client-$1.log"
	else
		echo "cmtime under vrdma run on $1 failed (see $RAW/cmtime-client-$1.log)" >&2
	fi
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
}

# cmtime_rows SOURCE PATH: cmtime's table (step, total ms, max ms, min us,
# us/conn) on stdin as rows, the connect step's µs per connection.
cmtime_rows() {
	awk -v src="$1" -v path="$2" '$1 == "connect" && $2 == ":" {
		printf "{\"path\":\"%s\",\"source\":\"%s\",\"test\":\"connect_100_at_once\",\"msg_size\":0,\"latency_us\":%s,\"total_ms\":%s}\n", path, src, $6, $3 }' >>"$RES"
}

measure_path() {
	local path=$1
	VRDMA_SOCKET=$SA inA "$BIN/anchor" cm connect "$ADDR_B4" 7471 "$SECS" 2>>"$RAW/cm-client.log" | row "$path" ||
		echo "anchor cm connect on $path failed (see $RAW/cm-client.log)" >&2
	noticed "$RAW/cm-server.log" cm "$path" env VRDMA_SOCKET="$SA" ip netns exec "$NS_A" "$BIN/anchor" cm hold "$ADDR_B4" 7471
	cmtime_vrdma "$path"
}

await_path tcp
for r in $(seq "$REPS"); do
	echo "rep $r/$REPS: tcp channel, $(elapsed) s"
	measure_path tcp
	inA "$BIN/anchor" tcpconn connect "$ADDR_B4" 7472 "$SECS" 2>>"$RAW/tcp-client.log" | row veth ||
		echo "anchor tcpconn connect failed (see $RAW/tcp-client.log)" >&2
	noticed "$RAW/tcp-server.log" tcp veth ip netns exec "$NS_A" "$BIN/anchor" tcpconn hold "$ADDR_B4" 7472
	echo "rep $r/$REPS: rdma, $(elapsed) s"
	va link add rxe0 type rxe netdev veth-a >/dev/null
	vb link add rxe0 type rxe netdev veth-b >/dev/null
	await_path rdma
	measure_path rdma
	vb link delete rxe0 >/dev/null
	va link delete rxe0 >/dev/null
	await_path tcp
done

# The kernel's rdma_cm on rdma_rxe, in two TCG guests.
GUEST_NOTE=""
IDIR=$(cd .. && pwd)/shared/interop
if [ -n "${NOGUEST:-}" ]; then
	GUEST_NOTE="The kernel rows were not measured in this run (NOGUEST=1)."
elif [ ! -x "$IDIR/guest.sh" ] || ! command -v qemu-system-x86_64 >/dev/null; then
	GUEST_NOTE="The kernel rows were not measured: no ../shared/interop or qemu here."
else
	export INTEROP_BUILD=${VRDMA_INTEROP_CACHE:-/var/tmp/vrdma-interop} INTEROP_NETNS=vrdmacmb INTEROP_SUBNET=10.47.93
	if (cd "$IDIR" && SKIP_APT=1 ./setup.sh >"$OLDPWD/$RAW/guest-setup.log" 2>&1 && ./guest.sh up A 10.47.93.1/24 B 10.47.93.2/24 >"$OLDPWD/$RAW/guest-up.log" 2>&1); then
		for r in $(seq "$REPS"); do
			id=$("$IDIR/guest.sh" spawn B 120 cmtime -p 7473)
			sleep 1
			"$IDIR/guest.sh" exec A 120 cmtime -s 10.47.93.2 -p 7473 -c 100 >"$RAW/cmtime-guest-$r.log" 2>&1 || true
			"$IDIR/guest.sh" wait B "$id" 30 >>"$RAW/cmtime-guest-server.log" 2>&1 || true
			cmtime_rows kernel-rxe guest-bridge <"$RAW/cmtime-guest-$r.log"
		done
	else
		GUEST_NOTE="The kernel rows were not measured: the guests did not boot (bench/results/raw-cm/guest-*.log)."
	fi
	"$IDIR/guest.sh" down >/dev/null 2>&1 || true
fi

table=$(mktemp)
python3 - "$RES" "$REPS" "$(nproc)" "$LOAD" "$GUEST_NOTE" >"$table" <<'PY'
import json, statistics, sys
res, reps, cores, load, gnote = sys.argv[1:6]
rows = {}
for line in open(res):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    k = (r["test"], r["source"], r["path"])
    rows.setdefault(k, []).append(r)
def med(rs, f):
    v = [r[f] for r in rs if r.get(f) is not None]
    return (statistics.median(v), min(v), max(v)) if v else None
def fmt(m, unit=""):
    if m is None:
        return "not noticed"
    return f"{m[0]:.0f}{unit} ({m[1]:.0f}–{m[2]:.0f})" if len({m[1], m[2]}) > 1 else f"{m[0]:.0f}{unit}"
names = {
    "connect": "connect, one at a time: median µs (range of run medians); cycles/s",
    "connect_100_at_once": "cmtime -c 100: connect step, µs per connection",
    "notice_vanished": "listener notices a SIGKILLed peer, µs",
}
print("<!-- connection setup: written by bench/cm.sh; edit the script, not this section -->")
print("## Connection setup (issue 12), between two namespace hosts\n")
print(f"`bench/cm.sh {reps}` on {cores} cores, load average {load} at the start; medians over reps (range).\n")
print("| measurement | source | path | value | cycles/s |")
print("|---|---|---|---|---|")
for k in sorted(rows):
    test, src, path = k
    rs = rows[k]
    cyc = med(rs, "cycles_per_sec")
    print(f"| {names.get(test, test)} | {src} | {path} | {fmt(med(rs, 'latency_us'))} | {fmt(cyc) if cyc else ''} |")
print()
print("Sources: vrdma-cm is the Go API (Dial to RTS on a QP created before the clock; cycles/s include the QP's creation, the")
print("disconnection and the QP's destruction); vrdma-cmtime is rdma_cm's cmtime, unmodified, under `vrdma run`; tcp is TCP")
print("connect on the same veth (cycles: connect + close, closed with a reset so that TIME_WAIT does not exhaust the ports); kernel-rxe is cmtime between two QEMU guests (TCG) on rdma_rxe,")
print("whose CPU is emulated: a ceiling on the kernel's cost here, not its speed on this host. The vanished peer is a")
print("connected process killed with SIGKILL: its daemon (or, for TCP, its kernel) ends the connection for it.")
if gnote:
    print(gnote)
print("<!-- end of connection setup -->")
PY
write_section "connection setup" "$table"
rm -f "$table"
