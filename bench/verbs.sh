#!/usr/bin/env bash
# The verbs uplink's cost to the daemon (issue 20, "Performance"): in the
# interop guests (QEMU TCG, the kernel's rdma_rxe), the daemon's CPU
# seconds per GB moved by 1 MiB RDMA WRITEs through a `type verbs` link on
# rxe0, against the same through vrdma's software RoCEv2 link (`type rxe`)
# in the same guests and the same daemon, and the copies per message from
# the daemon's counters (`vrdma stat`: copy_bytes, copy_msgs, path_verbs,
# verbs_bytes). Guest A runs the daemon and perftest's ib_write_bw under
# vrdma's guest library as the client; guest B the kernel's ib_write_bw
# server on rxe0. internal/interop TestVerbsUplinkBench does the runs
# (VRDMA_BENCH=1); this script runs it and writes the table into
# docs/perf.md (its "Verbs uplink" section).
#
# Usage: bench/verbs.sh [ROUNDS [ITERS]]   (default 3 rounds of 50 × 1 MiB
# per path; a round takes a few minutes in the emulated guests). Both with
# the daemon's embedded switch off (--no-switch; neither run needs it) and
# on (the default daemon): SWITCH="off on" (the default), "off" or "on".
# Needs root and the interop guests (shared/interop; see internal/interop).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-${ROUNDS:-3}}
ITERS=${2:-${ITERS:-50}}
SWITCH=${SWITCH:-off on} # the daemon without its embedded switch (--no-switch), then with it
OUT=bench/results
RAW=$OUT/raw-verbs
mkdir -p "$RAW"
RES=$OUT/verbs.jsonl
: >"$RES"
[ "$(id -u)" = 0 ] || fail "needs root (the guests' network namespace and taps)"
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
for sw in $SWITCH; do
	echo "the daemon with its switch $sw: $ROUNDS rounds of $ITERS × 1 MiB per path"
	VRDMA_BENCH=1 VRDMA_BENCH_SWITCH=$sw VRDMA_BENCH_ROUNDS=$ROUNDS VRDMA_BENCH_ITERS=$ITERS VRDMA_BENCH_OUT=$PWD/$RAW/rows-$sw.jsonl \
		go test -count=1 -timeout 90m -run '^TestVerbsUplinkBench$' -v ./internal/interop/ >"$RAW/test-$sw.log" 2>&1 ||
		{ tail -n 80 "$RAW/test-$sw.log" >&2; fail "TestVerbsUplinkBench failed (log: $RAW/test-$sw.log)"; }
	cat "$RAW/rows-$sw.jsonl" >>"$RES"
done
[ -s "$RES" ] || fail "no rows in $RES (logs: $RAW)"
LOAD1=$(cut -d' ' -f1 /proc/loadavg)

table=$(mktemp)
trap 'rm -f "$table"' EXIT
{
	echo "<!-- Verbs uplink: bench/verbs.sh writes this section -->"
	echo "## Verbs uplink: the daemon's CPU per GB, device against software RoCEv2 (issue 20)"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/verbs.sh $ROUNDS $ITERS\`: $ROUNDS rounds, each one run per path of"
	echo "perftest's \`ib_write_bw -s 1048576 -n $ITERS\` (1 MiB RDMA WRITEs) under vrdma's guest library in interop guest A,"
	echo "against the kernel's \`ib_write_bw -d rxe0\` server in guest B (QEMU TCG guests, Debian's kernel with rdma_rxe, one"
	echo "daemon in guest A for both paths). **verbs**: instance bound to \`vrdma link add hca0 type verbs dev rxe0\`."
	echo "**rxe**: rxe0 deleted and rdma_rxe unloaded in guest A (the kernel's rxe holds UDP 4791 on eth0 until
the module goes), then \`vrdma link add sw0 type rxe"
	echo "netdev eth0\` and an instance with native endpoints: vrdma's software RoCEv2 to the same kernel peer."
	echo "Each configuration boots its guests and runs its rounds: the daemon with \`--no-switch\` (no embedded switch:"
	echo "neither run needs one), and the default daemon, whose embedded switch (etcd) wakes it every few ms."
	echo "CPU: the daemon's utime+stime from /proc over the client's run, and the verbs helper's (the daemon's"
	echo "child process that drives the device; none on the software path); idle: the daemon's CPU over 15 s with"
	echo "nothing running, in the same guest before each round, times the run's wall time (\"above idle\" subtracts it). Copies per message: the adapter's copy_bytes over the bytes moved"
	echo "(\`vrdma stat\`; the software path copies each payload byte as it builds a packet, again for each packet"
	echo "it resends)."
	echo "Emulated guests: only ratios inside one run mean anything, not the absolute numbers."
	echo "The host's load average was $LOAD0 when the run started and $LOAD1 when it ended (2 cores shared"
	echo "with other builds and tests)."
	echo
	python3 - "$RES" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def gb(r): return r["bytes"] / 1e9
def per_gb(r, helper=True, net=False):
    c = r["daemon_cpu_s"] + (r["helper_cpu_s"] if helper else 0)
    if net:
        # Less what the daemon spends doing nothing over the same time; a
        # run under its idle floor (the floor is noisy) counts as 0.
        c = max(0.0, c - r["idle_cpu_per_s"] * r["wall_s"])
    return c / gb(r)
def fmt(x):
    return f"{x:.3g}"
def cell(v):
    v = sorted(v)
    if not v:
        return "—"
    m = statistics.median(v)
    return f"**{fmt(m)}**" + (f" ({fmt(v[0])}–{fmt(v[-1])})" if len(v) > 1 else "")
print("| daemon | path | rounds | GB per run | wall s | daemon CPU s | helper CPU s | idle CPU s over the run | CPU s per GB (daemon + helper) | the same above idle | copies per message (copy_bytes / bytes) | copy_msgs per message | path_verbs per message | packets resent | ib_write_bw MB/s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
def mode(r): return "default (switch)" if r.get("switch", True) else "--no-switch"
by = {}
for r in rows:
    by.setdefault((mode(r), r["path"]), []).append(r)
for (m, p), rs in by.items():
    print(f"| {m} | {p} | {len(rs)} | {fmt(gb(rs[0]))} | {cell([r['wall_s'] for r in rs])} | {cell([r['daemon_cpu_s'] for r in rs])} | {cell([r['helper_cpu_s'] for r in rs])} | "
          f"{cell([r['idle_cpu_per_s'] * r['wall_s'] for r in rs])} | {cell([per_gb(r) for r in rs])} | {cell([per_gb(r, net=True) for r in rs])} | "
          f"{cell([r['copy_bytes'] / r['bytes'] for r in rs])} | {cell([r['copy_msgs'] / r['iters'] for r in rs])} | "
          f"{cell([r['path_verbs'] / r['iters'] for r in rs])} | {cell([r['resent_packets'] for r in rs])} | {cell([r['avg_MBps'] for r in rs])} |")
print()
print("### Targets (median of the per-round ratios)")
print()
print("| target | measured | verdict |")
print("|---|---:|---|")
rounds = {}
for r in rows:
    rounds.setdefault((mode(r), r["round"]), {})[r["path"]] = r
def ratios(m, helper, net):
    out = []
    for (mm, _), d in rounds.items():
        if mm == m and "verbs" in d and "rxe" in d and per_gb(d["rxe"], helper, net) > 0:
            out.append(per_gb(d["verbs"], helper, net) / per_gb(d["rxe"], helper, net))
    return out
for m in sorted({mode(r) for r in rows}):
    for helper, net, what in ((True, False, "daemon + verbs helper"), (False, False, "daemon alone"), (True, True, "daemon + verbs helper, above idle")):
        rs = ratios(m, helper, net)
        what = f"{m}, {what}: CPU s per GB on the verbs uplink ≤ 0.1× software RoCEv2"
        if rs:
            med = statistics.median(rs)
            print(f"| {what} | {med:.3f}× (per round {min(rs):.3f}–{max(rs):.3f}, {len(rs)} rounds) | {'met' if med <= 0.1 else '**missed**'} |")
        else:
            print(f"| {what} | not measured | **missed** |")
cv = [r["copy_bytes"] / r["bytes"] for r in rows if r["path"] == "verbs"]
if cv:
    print(f"| copies per message on the verbs uplink = 0 (copy_bytes) | {max(cv):g} | {'met' if max(cv) == 0 else '**missed**'} |")
PY
	echo
	echo "Notes: \"above idle\" takes the round's idle rate off each run (a run under it counts as 0). The idle"
	echo "floor is the embedded switch's (etcd's) timers: the default daemon wakes some 120 times a second on this host (300 before the idle work, docs/design/idle-daemon.md)"
	echo "(about 0.003 CPU s per second here), one with --no-switch not at all; in a TCG guest those wake-ups cost far"
	echo "more. The helper's CPU is the relay's other half (it posts the batches and pushes the completions), so the"
	echo "target is read with it. The daemon's CPU is measured at clock-tick resolution (10 ms), which the"
	echo "verbs rows come close to. Raw log: bench/results/raw-verbs (not committed)."
	echo "<!-- end of Verbs uplink -->"
} >"$table"
write_section "Verbs uplink" "$table" "rsockets and libfabric"
cat "$table"
