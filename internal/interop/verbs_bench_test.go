package interop

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/verbs"
)

// BenchEnv turns the guest benchmarks on: they boot guests and move
// hundreds of MiB through emulated devices, so CI does not run them.
const BenchEnv = "VRDMA_BENCH"

// VerbsBenchRow is one run of TestVerbsUplinkBench: what the daemon in
// guest A spent and counted while perftest's ib_write_bw, under vrdma's
// guest library, wrote Iters messages of Size bytes to the kernel's
// ib_write_bw on rxe0 in guest B. bench/verbs.sh reads these (JSON lines).
type VerbsBenchRow struct {
	Round int `json:"round"`
	// Switch: the daemon ran its embedded switch (etcd: the default) or
	// not (--no-switch; VRDMA_BENCH_SWITCH=off). Neither run needs it (one
	// daemon, a native peer); its timers set the daemon's idle floor.
	Switch bool   `json:"switch"`
	Path   string `json:"path"` // "verbs": a type verbs link on rxe0; "rxe": vrdma's software RoCEv2 on eth0
	Size   int    `json:"size"`
	Iters  int    `json:"iters"`
	Bytes  uint64 `json:"bytes"` // Size × Iters, what ib_write_bw reported moving
	// CPU seconds over the run (utime+stime from /proc): the daemon's, and
	// the verbs helper's (the daemon's child; 0 on the software path).
	DaemonCPU float64 `json:"daemon_cpu_s"`
	HelperCPU float64 `json:"helper_cpu_s"`
	// The daemon's CPU seconds per wall second with nothing running,
	// measured in the same guest before the round, and this run's wall time.
	IdleRate float64 `json:"idle_cpu_per_s"`
	Wall     float64 `json:"wall_s"`
	AvgMBps  float64 `json:"avg_MBps"` // ib_write_bw's (emulated: only for the record)
	// The adapter's counters over the run (`vrdma stat`).
	CopyBytes  uint64 `json:"copy_bytes"`
	CopyMsgs   uint64 `json:"copy_msgs"`
	PathVerbs  uint64 `json:"path_verbs"`
	VerbsBytes uint64 `json:"verbs_bytes"`
	PathRDMA   uint64 `json:"path_rdma"`
	Resent     uint64 `json:"resent_packets"` // packets sent again (go-back-N): copied again
	// The host's 1-minute load average as the run ended.
	Load string `json:"host_load"`
}

// TestVerbsUplinkBench (VRDMA_BENCH=1; bench/verbs.sh runs it): the
// daemon's CPU per GB moved by 1 MiB RDMA WRITEs through a verbs uplink,
// against the same through vrdma's software RoCEv2 link, in the same two
// guests and the same daemon. Guest A runs the daemon and, under vrdma's
// guest library, ib_write_bw as the client; guest B the kernel's
// ib_write_bw server on rxe0. Run "verbs": instance vm1 bound to `type
// verbs dev rxe0`. Run "rxe": rxe0 deleted and rdma_rxe unloaded in guest
// A (the kernel's rxe owns UDP 4791 on eth0), vrdma's `type rxe netdev eth0` link and
// instance vm2 with native endpoints. Each round does both; rows go to
// $VRDMA_BENCH_OUT as JSON lines and to the log.
func TestVerbsUplinkBench(t *testing.T) {
	if os.Getenv(BenchEnv) != "1" {
		t.Skipf("a benchmark: %s=1 runs it (bench/verbs.sh)", BenchEnv)
	}
	Require(t)
	iters := envInt(t, "VRDMA_BENCH_ITERS", 50)
	rounds := envInt(t, "VRDMA_BENCH_ROUNDS", 1)
	const size = 1 << 20
	withSwitch, daemonArgs := true, ""
	switch v := os.Getenv("VRDMA_BENCH_SWITCH"); v {
	case "", "on":
	case "off":
		withSwitch, daemonArgs = false, " --no-switch"
	default:
		t.Fatalf("VRDMA_BENCH_SWITCH=%q: want on (the default) or off (the daemon runs with --no-switch)", v)
	}
	k := buildVerbsKit(t, true)
	g := sharedGuests(t, "A", "B")
	k.install(t, g, "A")
	v4 := func(name string) netip.Addr { return netip.AddrFrom16(GuestIP(name).As16()) }
	idxB := GIDIndex(GIDs(g.Exec(t, "B", 60, "ibv_devinfo -v -d rxe0")), v4("B"))
	if idxB < 0 {
		t.Fatalf("rxe0 in guest B has no GID for %s", GuestIP("B"))
	}

	g.Exec(t, "A", 30, "[ -s /etc/machine-id ] || echo 5e1f0a1b2c3d4e5f60718293a4b5c6d7 >/etc/machine-id")
	const sock = guestSock
	vr := "/mnt/host/vrdma "
	daemon := g.Spawn(t, "A", 3600, vr+"daemon"+daemonArgs+" --socket "+sock+" --state-dir /tmp/vrdma-state --verbs-helper /mnt/host/"+verbs.HelperName+" >/tmp/vrdma-daemon.log 2>&1")
	if out, rc := g.Run(t, "A", 120, "i=0; while [ ! -S "+sock+" ]; do pidof vrdma >/dev/null || exit 2; i=$((i+1)); [ $i -gt 500 ] && exit 1; sleep 0.2; done"); rc != 0 {
		log, _ := g.Run(t, "A", 20, "cat /tmp/vrdma-daemon.log")
		t.Fatalf("the daemon in guest A did not make its socket (%d): %s\n%s", rc, out, log)
	}
	defer func() {
		if t.Failed() {
			log, _ := g.Run(t, "A", 20, "tail -n 60 /tmp/vrdma-daemon.log")
			t.Logf("the daemon's log:\n%s", log)
		}
		g.Run(t, "A", 20, "kill $(pidof vrdma) 2>/dev/null")
		g.Wait(t, "A", daemon, 30)
	}()
	pid := strings.TrimSpace(g.Exec(t, "A", 30, "pidof vrdma"))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("more than one vrdma process in guest A, or none: %q", pid)
	}
	cpu := func() (daemon, helper float64) {
		// utime+stime of the daemon and of its children (the helper), in
		// clock ticks; fields 14 and 15 of /proc/PID/stat, 12 and 13
		// after the command name's closing parenthesis.
		out := g.Exec(t, "A", 30, `t() { set -- $(sed 's/.*) //' /proc/$1/stat); echo $((${12}+${13})); }; h=0; `+
			`for c in $(cat /proc/`+pid+`/task/*/children 2>/dev/null); do h=$((h+$(t $c))); done; `+
			`echo $(t `+pid+`) $h $(getconf CLK_TCK 2>/dev/null || echo 100)`)
		f := strings.Fields(out)
		if len(f) != 3 {
			t.Fatalf("the daemon's CPU times: %q", out)
		}
		var v [3]float64
		for i := range f {
			var err error
			if v[i], err = strconv.ParseFloat(f[i], 64); err != nil || v[2] == 0 && i == 2 {
				t.Fatalf("the daemon's CPU times: %q", out)
			}
		}
		return v[0] / v[2], v[1] / v[2]
	}
	// The daemon's cost of doing nothing, to read a round's runs against
	// (the host's load changes it: each round measures it again).
	idleRate := func() float64 {
		const secs = 15
		d0, _ := cpu()
		g.Exec(t, "A", 120, fmt.Sprintf("sleep %d", secs))
		d1, _ := cpu()
		t.Logf("the daemon idle: %.3f CPU s over %d s", d1-d0, secs)
		return (d1 - d0) / secs
	}
	var idle float64

	env := "LD_LIBRARY_PATH=/mnt/host/vrdma-lib VRDMA_SOCKET=" + sock + " VRDMA_INSTANCE="
	stat := func(inst string) map[string]uint64 {
		out := g.Exec(t, "A", 60, vr+"stat --socket "+sock+" --instance "+inst+" vrdma0")
		m := map[string]uint64{}
		for _, x := range statLineRe.FindAllStringSubmatch(out, -1) {
			m[x[1]], _ = strconv.ParseUint(x[2], 10, 64)
		}
		for _, k := range []string{"copy_bytes", "copy_msgs", "path_verbs", "verbs_bytes", "path_rdma", "resent_packets"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("vrdma stat has no %s:\n%s", k, out)
			}
		}
		return m
	}
	port := 18600
	run := func(round int, path, inst string, idxA int) VerbsBenchRow {
		port++
		args := fmt.Sprintf("-s %d -n %d -p %d -F", size, iters, port) // -F: no cycle-counter check (it gives up under load)
		srv := g.Spawn(t, "B", 1200, fmt.Sprintf("ib_write_bw -d rxe0 -x %d %s", idxB, args))
		if out, rc := g.Run(t, "B", 120, listeningScript(port)); rc != 0 {
			sout, _ := g.Wait(t, "B", srv, 30)
			t.Fatalf("ib_write_bw in guest B never listened (%d): %s\n%s", rc, out, sout)
		}
		c0, s0 := stat(inst), time.Now()
		dBefore, hBefore := cpu()
		cout, crc := g.Run(t, "A", 1200, fmt.Sprintf("%s%s ib_write_bw -d vrdma0 -x %d %s %s", env, inst, idxA, args, GuestIP("B")))
		dAfter, hAfter := cpu()
		wall := time.Since(s0).Seconds()
		c1 := stat(inst)
		sout, src := g.Wait(t, "B", srv, 120)
		if crc != 0 || src != 0 {
			t.Fatalf("%s: ib_write_bw failed: ours exit %d:\n%s\nthe kernel's (guest B) exit %d:\n%s", path, crc, cout, src, sout)
		}
		rows, err := guesttest.ParsePerftest(cout)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if rows[0].Bytes != size || rows[0].Iterations != iters {
			t.Fatalf("%s: ib_write_bw reported %+v, want %d iterations of %d bytes", path, rows[0], iters, size)
		}
		load, _ := os.ReadFile("/proc/loadavg")
		return VerbsBenchRow{Round: round, Switch: withSwitch, Path: path, Size: size, Iters: iters, Bytes: uint64(size) * uint64(iters),
			DaemonCPU: dAfter - dBefore, HelperCPU: hAfter - hBefore, IdleRate: idle, Wall: wall, AvgMBps: rows[0].AvgMBps,
			CopyBytes: c1["copy_bytes"] - c0["copy_bytes"], CopyMsgs: c1["copy_msgs"] - c0["copy_msgs"],
			PathVerbs: c1["path_verbs"] - c0["path_verbs"], VerbsBytes: c1["verbs_bytes"] - c0["verbs_bytes"],
			PathRDMA: c1["path_rdma"] - c0["path_rdma"], Resent: c1["resent_packets"] - c0["resent_packets"], Load: strings.Fields(string(load))[0]}
	}

	var out *os.File
	if p := os.Getenv("VRDMA_BENCH_OUT"); p != "" {
		var err error
		if out, err = os.Create(p); err != nil {
			t.Fatal(err)
		}
		defer out.Close()
	}
	emit := func(r VerbsBenchRow) {
		b, _ := json.Marshal(r)
		t.Logf("%s", b)
		if out != nil {
			fmt.Fprintf(out, "%s\n", b)
		}
	}
	for round := 1; round <= rounds; round++ {
		idle = idleRate()
		// The verbs uplink on the kernel's rxe0.
		if round > 1 {
			g.Exec(t, "A", 120, "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0")
		}
		idxA := GIDIndex(GIDs(g.Exec(t, "A", 60, "ibv_devinfo -v -d rxe0")), v4("A"))
		if idxA < 0 {
			t.Fatalf("rxe0 in guest A has no GID for %s", GuestIP("A"))
		}
		g.Exec(t, "A", 120, vr+"link --socket "+sock+" add hca0 type verbs dev rxe0")
		g.Exec(t, "A", 120, vr+"vm create vm1 --socket "+sock+" --uplink hca0")
		r := run(round, "verbs", "vm1", idxA)
		if r.PathVerbs < uint64(iters) || r.CopyBytes != 0 {
			t.Errorf("verbs: %d WRITEs posted to the device and %d bytes copied by the daemon; want at least %d and 0", r.PathVerbs, r.CopyBytes, iters)
		}
		emit(r)
		// The helper holds rxe0 open: it goes with the link, and then the
		// kernel lets rxe0 go.
		g.Exec(t, "A", 120, vr+"vm delete vm1 --socket "+sock)
		g.Exec(t, "A", 120, vr+"link --socket "+sock+" delete hca0")
		g.Exec(t, "A", 120, "i=0; while [ -n \"$(cat /proc/"+pid+"/task/*/children 2>/dev/null)\" ]; do i=$((i+1)); [ $i -gt 300 ] && exit 1; sleep 0.2; done")
		// Its UDP socket on 4791 stays until the module goes.
		g.Exec(t, "A", 120, "rdma link delete rxe0")
		// (busybox's modprobe -r fails on the modules under it, in use.)
		if out, rc := g.Run(t, "A", 120, "modprobe -r rdma_rxe 2>&1; ! grep -q '^rdma_rxe ' /proc/modules"); rc != 0 {
			more, _ := g.Run(t, "A", 30, "lsmod; cat /proc/net/udp")
			t.Fatalf("cannot unload rdma_rxe in guest A (exit %d): %s\n%s", rc, out, more)
		}

		// vrdma's software RoCEv2 on eth0.
		g.Exec(t, "A", 120, vr+"link --socket "+sock+" add sw0 type rxe netdev eth0")
		g.Exec(t, "A", 120, vr+"vm create vm2 --socket "+sock+" --native-endpoints")
		gidsA := GIDs(g.Exec(t, "A", 60, env+"vm2 ibv_devinfo -v -d vrdma0"))
		idxA = GIDIndex(gidsA, v4("A"))
		if idxA < 0 {
			t.Fatalf("vm2's vrdma0 has no GID for %s: %v", GuestIP("A"), gidsA)
		}
		r = run(round, "rxe", "vm2", idxA)
		if r.PathVerbs != 0 || r.CopyBytes < r.Bytes {
			t.Errorf("rxe: %d WRITEs posted to a device and %d bytes copied by the daemon; want 0 and at least %d", r.PathVerbs, r.CopyBytes, r.Bytes)
		}
		emit(r)
		g.Exec(t, "A", 120, vr+"vm delete vm2 --socket "+sock)
		g.Exec(t, "A", 120, vr+"link --socket "+sock+" delete sw0")
	}
}

// statLineRe finds the counters `vrdma stat` prints ("\t\t\tname: N").
var statLineRe = regexp.MustCompile(`(?m)^\s+([a-z_]+): (\d+)$`)

// envInt reads a positive integer knob from the environment.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}
