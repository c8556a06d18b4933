package interop

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// TestGuestLibraryWithRxe runs Debian's unmodified verbs programs on
// both ends: on vrdma in the namespace, through the guest library, and on
// the kernel's rdma_rxe in guest A, each end as server and as client.
// ibv_rc_pingpong over the IPv4-mapped and the IPv6 link-local GIDs with
// multi-packet (4 KiB) messages; perftest's ib_write_bw, ib_send_lat,
// ib_read_lat and ib_atomic_bw over the IPv4-mapped GID.
func TestGuestLibraryWithRxe(t *testing.T) {
	Require(t)
	guesttest.RequirePrograms(t, "ibv_devinfo", "ibv_rc_pingpong")
	lib := guesttest.Library(t)
	g := sharedGuests(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	// What the guest has: setup.sh puts ibverbs-utils' and perftest's
	// programs into its initramfs.
	inGuest := map[string]bool{}
	for _, p := range strings.Fields(g.Exec(t, "A", 30, "for p in "+strings.Join(guestPrograms, " ")+"; do command -v $p >/dev/null && echo $p; done; true")) {
		inGuest[p] = true
	}
	if !inGuest["ibv_rc_pingpong"] {
		t.Skip("the interop guest has no ibv_rc_pingpong: shared/interop/setup.sh puts ibverbs-utils' programs into its initramfs")
	}
	prog := guesttest.Program{Host: host, Lib: lib, Socket: d.Socket}

	// Both ends' GID tables as the programs see them: ours through the
	// guest library's ibv_devinfo.
	info, err := prog.Command(t.Context(), "ibv_devinfo", "-v", "-d", hostDev).CombinedOutput()
	if err != nil {
		t.Fatalf("ibv_devinfo -v through the guest library: %v\n%s", err, info)
	}
	ours := GIDs(string(info))
	gids := pairGIDs(t, g, host, ours)

	const size, iters = 4096, 5
	for _, guestServer := range []bool{false, true} {
		for _, p := range gids {
			t.Run("ibv_rc_pingpong, "+roleName(guestServer)+", "+p.name, func(t *testing.T) {
				ourArgs := []string{"-d", hostDev, "-g", fmt.Sprint(p.oursI), "-s", fmt.Sprint(size), "-n", fmt.Sprint(iters)}
				guestArgs := fmt.Sprintf("-d rxe0 -g %d -s %d -n %d", p.theirI, size, iters)
				r := runWithGuest(t, g, prog, guestServer, "ibv_rc_pingpong", ourArgs, guestArgs)
				for _, side := range r.sides() {
					if side.failed {
						continue // runWithGuest has said so
					}
					pp, err := guesttest.ParsePingpong(side.out)
					switch {
					case err != nil:
						t.Errorf("%s: %v", side.who, err)
					case pp.Iters != iters || pp.Bytes != 2*size*iters:
						t.Errorf("%s: %+v: want %d iterations of %d bytes each way", side.who, pp, iters, size)
					default:
						t.Logf("%s: %d bytes in %.2f s = %.2f Mbit/s, %.2f µs/iter", side.who, pp.Bytes, pp.Seconds, pp.Mbps, pp.UsecPerIter)
					}
				}
			})
		}
	}

	// perftest, over the IPv4-mapped GID (its exchange carries the GID).
	// For READ and atomics each side sets its QP's max_rd_atomic to the
	// outstanding reads the other side announced (by default its device's
	// max_qp_rd_atom): vrdma announces 128, as rxe does, so the tools'
	// defaults work between the two; it must say so.
	if m := maxQPRdAtomRe.FindStringSubmatch(string(info)); m == nil || m[1] != "128" {
		t.Fatalf("ibv_devinfo -v through the guest library: max_qp_rd_atom %v, want rxe's 128:\n%s", m, info)
	}
	v4 := gids[0]
	var guestReads []string
	const perfIters = 20
	for _, tool := range []struct {
		name         string
		args         []string
		guestArgs    []string // more arguments for the guest's side
		size         int
		latency      bool
		serverPrints bool // the server prints a result table too
	}{
		{"ib_write_bw", []string{"-s", "4096"}, nil, 4096, false, true},
		{"ib_send_lat", []string{"-s", "64"}, nil, 64, true, true},
		{"ib_read_lat", []string{"-s", "64"}, guestReads, 64, true, false},
		{"ib_atomic_bw", nil, guestReads, 8, false, true},
	} {
		for _, guestServer := range []bool{false, true} {
			t.Run(tool.name+", "+roleName(guestServer), func(t *testing.T) {
				if _, err := exec.LookPath(tool.name); err != nil {
					t.Skipf("%s is not installed: apt-get install perftest", tool.name)
				}
				if !inGuest[tool.name] {
					t.Skipf("the interop guest has no %s (shared/interop/setup.sh puts perftest's programs into its initramfs)", tool.name)
				}
				// -F: perftest times with the CPU's cycle counter and, without
				// it, exits with no report ("Can't produce a report") when its
				// frequency estimate is noisy (r² < 0.9), as it is on a loaded
				// machine or in TCG; with it, it reports a zero rate (below).
				n := []string{"-n", fmt.Sprint(perfIters), "-F"}
				ourArgs := append(append([]string{"-d", hostDev, "-x", fmt.Sprint(v4.oursI)}, tool.args...), n...)
				guestArgs := []string{"-d", "rxe0", "-x", fmt.Sprint(v4.theirI)}
				guestArgs = append(append(append(guestArgs, tool.args...), tool.guestArgs...), n...)
				// A run whose every iteration completed but that perftest
				// could not time (a zero rate: its cycle-counter estimate
				// failed, on a loaded host or in the TCG guest; the server
				// of a bandwidth test prints the client's numbers) says
				// nothing about vrdma: the pair runs again, three times at
				// most.
				for attempt := 1; ; attempt++ {
					r := runWithGuest(t, g, prog, guestServer, tool.name, ourArgs, strings.Join(guestArgs, " "))
					untimed := false
					for _, side := range r.sides() {
						if side.failed || (side.server && !tool.serverPrints) {
							continue
						}
						rows, err := guesttest.ParsePerftest(side.out)
						if err != nil {
							t.Errorf("%s: %v", side.who, err)
							continue
						}
						x := rows[0]
						switch {
						case x.Bytes != tool.size || x.Iterations != perfIters || x.Latency != tool.latency:
							t.Errorf("%s: result %+v: want %d iterations of %d bytes", side.who, x, perfIters, tool.size)
						case (x.Latency && x.AvgUsec <= 0) || (!x.Latency && x.MsgRateMpps <= 0):
							untimed = true
							t.Logf("%s: %d iterations of %d bytes done, but perftest timed them at zero: %+v", side.who, x.Iterations, x.Bytes, x)
						case x.Latency:
							t.Logf("%s: %d B × %d: t_typical %.2f µs, t_avg %.2f µs", side.who, x.Bytes, x.Iterations, x.TypicalUsec, x.AvgUsec)
						default:
							t.Logf("%s: %d B × %d: BW average %.2f MB/s, %.6f Mpps", side.who, x.Bytes, x.Iterations, x.AvgMBps, x.MsgRateMpps)
						}
					}
					if !untimed || t.Failed() {
						break
					}
					if attempt == 3 {
						t.Errorf("perftest could not time %s in %d runs (a zero rate each time)", tool.name, attempt)
						break
					}
				}
			})
		}
	}
}

// guestPrograms are the programs TestGuestLibraryWithRxe runs in the guest.
var guestPrograms = []string{"ibv_rc_pingpong", "ib_write_bw", "ib_send_lat", "ib_read_lat", "ib_atomic_bw"}

// maxQPRdAtomRe finds the device's max_qp_rd_atom in ibv_devinfo -v.
var maxQPRdAtomRe = regexp.MustCompile(`(?m)^\s*max_qp_rd_atom:\s*(\d+)$`)

func roleName(guestServer bool) string {
	if guestServer {
		return "guest server, host client"
	}
	return "host server, guest client"
}

// guestRun is how a program on our side and its peer in the guest ended.
type guestRun struct {
	guestServer bool
	ourOut      string
	ourErr      error
	guestOut    string
	guestRC     int
}

// runSide is one end of a run: who it is, what it printed, whether it
// failed.
type runSide struct {
	who, out string
	failed   bool
	server   bool
}

func (r guestRun) sides() []runSide {
	return []runSide{
		{"ours (guest library on vrdma)", r.ourOut, r.ourErr != nil, !r.guestServer},
		{"the guest's (rdma_rxe)", r.guestOut, r.guestRC != 0, r.guestServer},
	}
}

// runWithGuest runs program name on our side (ourArgs, through the guest
// library) and in guest A (guestArgs, a shell word list), one as the
// server and the other as its client, and returns when both have ended;
// the test fails (and goes on) if either does.
func runWithGuest(t *testing.T, g *Guests, prog guesttest.Program, guestServer bool, name string, ourArgs []string, guestArgs string) guestRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	guestCmd := name + " " + guestArgs
	r := guestRun{guestServer: guestServer}
	var ourOut bytes.Buffer
	if guestServer {
		id := g.Spawn(t, "A", 60, guestCmd)
		// Connecting before it listens would fail, and a probe connection
		// would be taken for the client: look instead.
		if out, rc := g.Run(t, "A", 30, listeningScript(pingpongPort)); rc != 0 {
			t.Fatalf("%s in the guest is not listening on %d: %s", name, pingpongPort, out)
		}
		cmd := prog.Command(ctx, name, append(append([]string(nil), ourArgs...), GuestIP("A").String())...)
		cmd.Stdout, cmd.Stderr = &ourOut, &ourOut
		r.ourErr = cmd.Run()
		r.guestOut, r.guestRC = g.Wait(t, "A", id, 70)
	} else {
		cmd := prog.Command(ctx, name, ourArgs...)
		cmd.Stdout, cmd.Stderr = &ourOut, &ourOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := guesttest.WaitListening(cmd.Process.Pid, prog.Host.NS, pingpongPort, 30*time.Second); err != nil {
			cancel()
			cmd.Wait()
			t.Fatalf("%s through the guest library: %v\n%s", name, err, ourOut.String())
		}
		r.guestOut, r.guestRC = g.Run(t, "A", 60, guestCmd+" "+HostIP.String())
		if r.guestRC != 0 {
			cancel() // our server would wait for a client for ever
		}
		r.ourErr = cmd.Wait()
	}
	r.ourOut = ourOut.String()
	if r.ourErr != nil || r.guestRC != 0 {
		t.Errorf("%s, %s: ours (%s %s): %v; the guest's (%s): exit %d\nours:\n%s\nthe guest's:\n%s",
			name, roleName(guestServer), name, strings.Join(ourArgs, " "), r.ourErr, guestCmd, r.guestRC, r.ourOut, r.guestOut)
	}
	return r
}
