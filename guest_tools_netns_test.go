package vrdma_test

// Debian's unmodified verbs programs (ibverbs-utils' pingpongs, perftest)
// through the guest library between two hosts: network namespaces joined
// by a veth pair, a daemon on one switch in each, server on a and client
// on b. Once with a Soft-RoCE link on each veth (the RoCEv2 path, over the
// IPv4-mapped GIDs and, for the pingpongs, the IPv6 link-local ones too),
// once without links (the TCP channel); the daemons' path counters show
// which path the programs' traffic took. Needs root, gcc, libibverbs-dev,
// ibverbs-utils, perftest and qperf; skipped otherwise.

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/interop"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/proctest"
)

// toolHost is one namespace host of the two, with its daemon, its default
// instance's vrdma0 opened through the Go API (for the path counters) and
// how programs run there.
type toolHost struct {
	sw   *switchHost
	dev  *vrdma.Device
	prog guesttest.Program
	gid  int // the index of the GID that is the host's IPv4 address
	// gidLL is the index of the GID that is its IPv6 link-local address
	// (with a link), or -1.
	gidLL int
}

// guestTool is one program run between the hosts.
type guestTool struct {
	name string
	args func(gid int) []string
	// check looks at what the server and the client printed; both exited 0.
	check func(t *testing.T, server, client string)
	// serverSends says whether the server posts work requests too (so its
	// path counter moves), not only the client.
	serverSends bool
}

// program is the program tool runs: its name's first word (the rest tells
// runs of one program apart).
func (tool guestTool) program() string { return strings.Fields(tool.name)[0] }

// toolIters is every program's iteration count: enough round trips to
// count, few enough to keep the run short on a loaded machine.
const toolIters = 200

func guestTools() []guestTool {
	n := fmt.Sprint(toolIters)
	pingpong := func(size int) func(t *testing.T, server, client string) {
		return func(t *testing.T, server, client string) {
			for side, out := range map[string]string{"server": server, "client": client} {
				p, err := guesttest.ParsePingpong(out)
				if err != nil {
					t.Errorf("%s: %v", side, err)
					continue
				}
				if p.Iters != toolIters || p.Bytes != int64(2*size*toolIters) || p.Mbps <= 0 {
					t.Errorf("%s: %+v: want %d iterations of %d bytes each way at a non-zero rate", side, p, toolIters, size)
				}
				t.Logf("%s: %d bytes in %.2f s = %.2f Mbit/s, %.2f µs/iter", side, p.Bytes, p.Seconds, p.Mbps, p.UsecPerIter)
			}
		}
	}
	perftest := func(size int, latency bool, sides ...string) func(t *testing.T, server, client string) {
		return func(t *testing.T, server, client string) {
			outs := map[string]string{"server": server, "client": client}
			for _, side := range sides {
				rows, err := guesttest.ParsePerftest(outs[side])
				if err != nil {
					t.Errorf("%s: %v", side, err)
					continue
				}
				r := rows[0]
				ok := r.Bytes == size && r.Iterations == toolIters && r.Latency == latency
				if latency {
					ok = ok && r.AvgUsec > 0 && r.TypicalUsec > 0
					t.Logf("%s: %d B × %d: t_typical %.2f µs, t_avg %.2f µs, 99%% %.2f µs", side, r.Bytes, r.Iterations, r.TypicalUsec, r.AvgUsec, r.P99Usec)
				} else {
					ok = ok && r.MsgRateMpps > 0
					t.Logf("%s: %d B × %d: BW average %.2f MB/s, %.6f Mpps", side, r.Bytes, r.Iterations, r.AvgMBps, r.MsgRateMpps)
				}
				if !ok {
					t.Errorf("%s: result %+v: want %d iterations of %d bytes, a latency test %v, with a non-zero result", side, r, toolIters, size, latency)
				}
			}
		}
	}
	x := func(args ...string) func(gid int) []string {
		return func(gid int) []string {
			return append([]string{"-d", "vrdma0", "-x", fmt.Sprint(gid)}, args...)
		}
	}
	return []guestTool{
		{name: "ibv_rc_pingpong", serverSends: true, check: pingpong(4096),
			args: func(gid int) []string { return []string{"-d", "vrdma0", "-g", fmt.Sprint(gid), "-s", "4096", "-n", n} }},
		{name: "ibv_rc_pingpong -e", serverSends: true, check: pingpong(4096), // completion channels
			args: func(gid int) []string {
				return []string{"-d", "vrdma0", "-g", fmt.Sprint(gid), "-s", "4096", "-n", n, "-e"}
			}},
		{name: "ibv_ud_pingpong", serverSends: true, check: pingpong(512),
			args: func(gid int) []string { return []string{"-d", "vrdma0", "-g", fmt.Sprint(gid), "-s", "512", "-n", n} }},
		{name: "ibv_uc_pingpong", serverSends: true, check: pingpong(4096),
			args: func(gid int) []string { return []string{"-d", "vrdma0", "-g", fmt.Sprint(gid), "-s", "4096", "-n", n} }},
		{name: "ibv_srq_pingpong", serverSends: true, check: pingpong(4096), // 16 QPs on one SRQ
			args: func(gid int) []string { return []string{"-d", "vrdma0", "-g", fmt.Sprint(gid), "-s", "4096", "-n", n} }},
		{name: "ib_write_bw", args: x("-s", "65536", "-n", n), check: perftest(65536, false, "server", "client")},
		{name: "ib_read_bw", args: x("-s", "65536", "-n", n), check: perftest(65536, false, "server", "client")},
		{name: "ib_send_lat", serverSends: true, args: x("-s", "64", "-n", n), check: perftest(64, true, "server", "client")},
		{name: "ib_read_lat", args: x("-s", "64", "-n", n), check: perftest(64, true, "client")},
		{name: "ib_atomic_bw", args: x("-n", n), check: perftest(8, false, "server", "client")},
	}
}

func TestGuestToolsBetweenHosts(t *testing.T) {
	netns.Require(t)
	tools := guestTools()
	names := []string{"ibv_devinfo"}
	for _, tool := range tools {
		names = append(names, tool.program())
	}
	guesttest.RequirePrograms(t, names...)
	lib := guesttest.Library(t)

	for _, mode := range []struct {
		name  string
		links bool   // a Soft-RoCE link on each host's veth
		path  string // the path every message must take
	}{
		{"RoCEv2", true, "rdma"},
		{"TCP channel", false, "tcp"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			a, b := twoToolHosts(t, lib, mode.links, mode.path)
			for _, tool := range tools {
				t.Run(tool.name, func(t *testing.T) { runTool(t, a, b, tool, a.gid, b.gid, mode.path) })
			}
			t.Run("qperf", func(t *testing.T) { runQperf(t, a, b, mode.path) })
			if !mode.links {
				return
			}
			// The links' IPv6 link-local GIDs route too (RoCEv2 over IPv6).
			for _, tool := range tools[:2] { // ibv_rc_pingpong, ibv_ud_pingpong
				t.Run(tool.name+" IPv6 link-local GID", func(t *testing.T) { runTool(t, a, b, tool, a.gidLL, b.gidLL, mode.path) })
			}
		})
	}
}

// runTool runs tool's server on a with GID index ga and its client on b
// with gb, checks what they printed, and checks that their messages took
// path (and no other) by each host's path counters.
func runTool(t *testing.T, a, b *toolHost, tool guestTool, ga, gb int, path string) {
	t.Helper()
	ba, bb := pathsOf(t, a.dev), pathsOf(t, b.dev)
	// Each side names its own GID index; the programs exchange GIDs over
	// their TCP connection.
	r := runToolPair(t, a.prog, b.prog, tool, ga, gb)
	if t.Failed() {
		return
	}
	tool.check(t, r.ServerOut, r.ClientOut)
	da, db := pathDelta(ba, pathsOf(t, a.dev)), pathDelta(bb, pathsOf(t, b.dev))
	t.Logf("path counters: server (a) %+v, client (b) %+v", da, db)
	for _, h := range []struct {
		name  string
		d     pathCount
		sends bool
	}{{"a (server)", da, tool.serverSends}, {"b (client)", db, true}} {
		took, others := h.d.by(path)
		if others != 0 || (h.sends && took < toolIters) {
			t.Errorf("host %s's path counters moved by %+v: want messages by %s only (at least %d if it sends)", h.name, h.d, path, toolIters)
		}
	}
}

// runToolPair runs tool's server on srv with GID index gs and its client on
// cli with index gc. perftest and the pingpongs take the same arguments on
// both sides, so when the indexes differ the client gets its own.
func runToolPair(t *testing.T, srv, cli guesttest.Program, tool guestTool, gs, gc int) guesttest.Pair {
	t.Helper()
	if gs != gc {
		t.Fatalf("the IPv4 GID is index %d on the server and %d on the client: RunPair gives both the same arguments", gs, gc)
	}
	return guesttest.RunPair(t, srv, cli, guesttest.PingpongPort, tool.program(), tool.args(gs)...)
}

// by returns the messages counted on path and on the other two.
func (p pathCount) by(path string) (took, others uint64) {
	switch path {
	case "memcpy":
		return p.memcpy, p.rdma + p.tcp
	case "rdma":
		return p.rdma, p.memcpy + p.tcp
	default:
		return p.tcp, p.memcpy + p.rdma
	}
}

func pathDelta(before, after pathCount) pathCount {
	return pathCount{after.memcpy - before.memcpy, after.rdma - before.rdma, after.tcp - before.tcp}
}

// twoToolHosts makes two namespace hosts, a and b, each with a daemon on
// one switch (a runs its etcd, b joins it over the veth) and, if links, a
// Soft-RoCE link rxe0 on its eth0; it waits until each daemon sees the
// other by path, and finds each host's IPv4 GID both through the guest
// library (ibv_devinfo -v) and through the Go API.
func twoToolHosts(t *testing.T, lib string, links bool, path string) (a, b *toolHost) {
	t.Helper()
	top := netns.New(t, 2)
	ha, hb := top.Hosts[0], top.Hosts[1]
	pki := netns.SwitchPKI(t, map[string]netip.Addr{"a": ha.IPv4, "b": hb.IPv4})
	sa := &switchHost{name: "a", h: ha, pki: pki}
	sb := &switchHost{name: "b", h: hb, pki: pki}
	// --lid-routing: qperf names the other host's port by LID alone.
	sa.d = ha.StartDaemon(t, "--host-name", "a", "--pki", pki, "--lid-routing",
		"--etcd-client-url", "https://"+ha.IPv4.String()+":2379", "--etcd-peer-url", "https://"+ha.IPv4.String()+":2380")
	sb.d = hb.StartDaemon(t, "--host-name", "b", "--pki", pki, "--lid-routing", "--etcd-endpoints", "https://"+ha.IPv4.String()+":2379")
	if links {
		for _, s := range []*switchHost{sa, sb} {
			s.d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", s.h.Iface)
		}
	}
	for _, p := range [][2]*switchHost{{sa, sb}, {sb, sa}} {
		eventually(t, 60*time.Second, fmt.Sprintf("%s reaches %s by %s", p[0].name, p[1].name, path), func() (bool, string) {
			paths := hostPaths(t, p[0])
			return strings.HasPrefix(paths[p[1].name], path+":"), fmt.Sprint(paths)
		})
	}
	var hosts [2]*toolHost
	for i, s := range []*switchHost{sa, sb} {
		th := &toolHost{sw: s, prog: guesttest.Program{Host: s.h, Lib: lib, Socket: s.d.Socket}}
		dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: s.d.Socket})
		if err != nil {
			t.Fatalf("opening vrdma0 on %s: %v", s.name, err)
		}
		t.Cleanup(func() { dev.Close() })
		th.dev = dev
		v4 := netip.AddrFrom16(s.h.IPv4.As16())
		out := runProgram(t, th.prog, "ibv_devinfo", "-v", "-d", "vrdma0")
		if !strings.Contains(out, "PORT_ACTIVE") {
			t.Errorf("ibv_devinfo -v on %s: vrdma0's port is not active:\n%s", s.name, out)
		}
		th.gid = interop.GIDIndex(interop.GIDs(out), v4)
		if th.gid < 0 {
			t.Fatalf("ibv_devinfo -v on %s: no GID %s:\n%s", s.name, v4, out)
		}
		if api := gidIndexOf(t, dev, vrdma.GID(v4.As16())); api != th.gid {
			t.Fatalf("on %s, GID %s is index %d for ibv_devinfo but %d for the Go API", s.name, v4, th.gid, api)
		}
		th.gidLL = interop.GIDIndex(interop.GIDs(out), s.h.IPv6LL)
		if links && th.gidLL < 0 {
			t.Fatalf("ibv_devinfo -v on %s: no GID %s, the link's IPv6 link-local address:\n%s", s.name, s.h.IPv6LL, out)
		}
		if th.gidLL >= 0 {
			t.Logf("host %s (%s): GID[%d] = %s, GID[%d] = %s", s.name, s.h.IPv4, th.gid, v4, th.gidLL, s.h.IPv6LL)
		} else {
			t.Logf("host %s (%s): GID[%d] = %s", s.name, s.h.IPv4, th.gid, v4)
		}
		hosts[i] = th
	}
	return hosts[0], hosts[1]
}

// runProgram runs a verbs program under p to the end and returns its output;
// the test fails if it exits non-zero.
func runProgram(t *testing.T, p guesttest.Program, name string, args ...string) string {
	t.Helper()
	out, err := p.Command(t.Context(), name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s on %s: %v\n%s", name, strings.Join(args, " "), p.Host.Name, err, out)
	}
	return string(out)
}

// qperfPort is the port of the qperf server between the hosts.
const qperfPort = 19766

// runQperf runs qperf's server on a and its client on b with a few of its
// tests. qperf exchanges LIDs and QPNs only, no GIDs: its QPs reach the
// other host by the LID the switch gave its port (docs/design/lid-addressing.md).
func runQperf(t *testing.T, a, b *toolHost, path string) {
	guesttest.RequirePrograms(t, "qperf")
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	var sout strings.Builder
	server := a.prog.Command(ctx, "env", "VRDMA_DEBUG=1", "qperf", "-lp", fmt.Sprint(qperfPort))
	server.Stdout, server.Stderr = &sout, &sout
	server.WaitDelay = 5 * time.Second
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = server.Wait()
	}()
	if err := guesttest.WaitListening(server.Process.Pid, a.sw.h.NS, qperfPort, 30*time.Second); err != nil {
		t.Fatalf("qperf server on a: %v\n%s", err, sout.String())
	}
	la, lb := awaitLIDs(t, a.dev, b.dev) // qperf's QPs name the other host's port by LID
	t.Logf("port LIDs: host %s 0x%x, host %s 0x%x", a.sw.name, la, b.sw.name, lb)
	ba, bb := pathsOf(t, a.dev), pathsOf(t, b.dev)
	tests := []string{"rc_lat", "rc_bw", "ud_lat"} // -t takes whole seconds: 0.5 would be 0, no end
	args := append([]string{"-lp", fmt.Sprint(qperfPort), a.sw.h.IPv4.String(), "-t", "1"}, tests...)
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	client := b.prog.Command(cctx, "env", append([]string{"VRDMA_DEBUG=1", "qperf"}, args...)...)
	client.WaitDelay = 5 * time.Second // a hung client's children keep its output open
	out, err := client.CombinedOutput()
	if err != nil {
		t.Logf("path counters since the start: a %+v, b %+v", pathDelta(ba, pathsOf(t, a.dev)), pathDelta(bb, pathsOf(t, b.dev)))
		t.Fatalf("qperf %s: %v\n%s\nserver:\n%s", strings.Join(args, " "), err, out, sout.String())
	}
	t.Logf("qperf between the hosts:\n%s", out)
	for _, test := range tests {
		i := strings.Index(string(out), test+":")
		if i < 0 {
			t.Errorf("qperf printed no result for %s:\n%s", test, out)
			continue
		}
		res := string(out[i:])
		if !strings.Contains(res, "latency") && !strings.Contains(res, "bw") {
			t.Errorf("qperf %s: no latency or bandwidth figure:\n%s", test, res)
		}
	}
	da, db := pathDelta(ba, pathsOf(t, a.dev)), pathDelta(bb, pathsOf(t, b.dev))
	if took, others := db.by(path); took == 0 || others != 0 {
		t.Errorf("client's path counters moved by %+v: want messages by %s only", db, path)
	}
	if _, others := da.by(path); others != 0 {
		t.Errorf("server's path counters moved by %+v: want messages by %s only", da, path)
	}
}

// TestGuestRdmaCMBetweenHosts runs Debian's unmodified rdma_cm programs
// through the guest libraries (librdmacm.so.1 beside libibverbs.so.1)
// between the two namespace hosts: rping's server on a, listening on a's
// IPv4 address, its client on b; then ucmatose (two connections), qperf
// -cm1 and perftest's ib_write_bw -R. Over
// Soft-RoCE links (RoCEv2) and over the TCP channel. Needs root, gcc,
// libibverbs-dev, librdmacm-dev, rdmacm-utils and perftest.
func TestGuestRdmaCMBetweenHosts(t *testing.T) {
	netns.Require(t)
	guesttest.RequirePrograms(t, "ibv_devinfo", "rping", "ucmatose", "ib_write_bw")
	lib := guesttest.Library(t)
	for _, mode := range []struct {
		name  string
		links bool
		path  string
	}{
		{"RoCEv2", true, "rdma"},
		{"TCP channel", false, "tcp"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			a, b := twoToolHosts(t, lib, mode.links, mode.path)
			addr := a.sw.h.IPv4.String()
			t.Run("rping", func(t *testing.T) {
				const count = 10
				args := []string{"-a", addr, "-p", "7471", "-v", "-C", fmt.Sprint(count)}
				ba, bb := pathsOf(t, a.dev), pathsOf(t, b.dev)
				server, client := runCMPair(t, a, b, "rping", append([]string{"-s"}, args...), append([]string{"-c"}, args...))
				da, db := pathDelta(ba, pathsOf(t, a.dev)), pathDelta(bb, pathsOf(t, b.dev))
				for _, h := range []struct {
					name string
					d    pathCount
				}{{"a (server)", da}, {"b (client)", db}} {
					if took, others := h.d.by(mode.path); took == 0 || others != 0 {
						t.Errorf("host %s's path counters moved by %+v: want messages by %s only", h.name, h.d, mode.path)
					}
				}
				for side, out := range map[string]string{"server": server, "client": client} {
					if n := strings.Count(out, "ping data: rdma-ping-"); n != count {
						t.Errorf("rping %s printed %d pings, want %d:\n%s", side, n, count, out)
					}
				}
			})
			if a.gidLL >= 0 {
				// RoCEv2 over IPv6: rping on a's link-local address (its
				// link's GID), the adapter found by that address's family.
				t.Run("rping IPv6 link-local", func(t *testing.T) {
					ll := fmt.Sprintf("%s%%%s", a.sw.h.IPv6LL, a.sw.h.Iface)
					args := []string{"-a", ll, "-p", "7472", "-v", "-C", "10"}
					server, client := runCMPairOr(t, a, b, "rping", append([]string{"-s"}, args...), append([]string{"-c"}, args...),
						"the daemon finds no connection manager at an IPv6 link-local address: the daemons' CM over TCP resolves their IPv4 addresses only; over CM MADs on QP1 (the other half of issue 12) it reaches the link's GIDs")
					for side, out := range map[string]string{"server": server, "client": client} {
						if n := strings.Count(out, "ping data: rdma-ping-"); n != 10 {
							t.Errorf("rping %s printed %d pings, want 10:\n%s", side, n, out)
						}
					}
				})
			}
			t.Run("ucmatose", func(t *testing.T) {
				server, client := runCMPair(t, a, b, "ucmatose", []string{"-b", addr, "-c", "2", "-C", "10"}, []string{"-s", addr, "-c", "2", "-C", "10"})
				for side, out := range map[string]string{"server": server, "client": client} {
					if !strings.Contains(out, "test complete") || !strings.Contains(out, "return status 0") {
						t.Errorf("ucmatose %s did not complete:\n%s", side, out)
					}
				}
			})
			t.Run("qperf -cm1", func(t *testing.T) { runQperfCM(t, a, b) })
			t.Run("ib_write_bw -R", func(t *testing.T) {
				args := []string{"-R", "-d", "vrdma0", "-x", fmt.Sprint(a.gid), "-s", "65536", "-n", fmt.Sprint(toolIters), "-F"}
				_, client := runCMPair(t, a, b, "ib_write_bw", args, append(append([]string(nil), args...), addr))
				rows, err := guesttest.ParsePerftest(client)
				if err != nil {
					t.Fatalf("client: %v", err)
				}
				if r := rows[0]; r.Iterations != toolIters || r.MsgRateMpps <= 0 {
					t.Errorf("ib_write_bw -R: %+v: want %d iterations at a non-zero rate", r, toolIters)
				}
			})
		})
	}
}

// runQperfCM runs qperf's server on a and its client on b with -cm1: the
// RC connections through rdma_cm (the address, the port the server's
// rdma_bind_addr got), not qperf's own exchange of LIDs and QPNs.
func runQperfCM(t *testing.T, a, b *toolHost) {
	guesttest.RequirePrograms(t, "qperf")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var sout proctest.Buffer
	server := a.prog.Command(ctx, "qperf", "-lp", fmt.Sprint(qperfPort))
	server.Stdout, server.Stderr = &sout, &sout
	server.WaitDelay = 5 * time.Second
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = server.Wait()
	}()
	if err := guesttest.WaitListening(server.Process.Pid, a.sw.h.NS, qperfPort, 30*time.Second); err != nil {
		t.Fatalf("qperf server on a: %v\n%s", err, sout.String())
	}
	// qperf's server sends the client the port rdma_bind_addr gave it,
	// then listens: a client quicker than that listen is rejected (no
	// listener), as it would be by a kernel's rdma_cm; run it again.
	var out []byte
	var err error
	for attempt := 1; ; attempt++ {
		client := b.prog.Command(ctx, "qperf", "-lp", fmt.Sprint(qperfPort), "-cm1", "-t", "1", a.sw.h.IPv4.String(), "rc_bw", "rc_lat")
		client.WaitDelay = 5 * time.Second
		out, err = client.CombinedOutput()
		if err == nil || attempt == 4 || !strings.Contains(string(out), "Event rejected") {
			break
		}
		t.Logf("qperf -cm1, attempt %d: %v\n%s: again (qperf's bind-then-listen race)", attempt, err, out)
	}
	if err != nil {
		t.Fatalf("qperf -cm1: %v\n%s\nserver:\n%s", err, out, sout.String())
	}
	for _, test := range []string{"rc_bw:", "rc_lat:"} {
		if i := strings.Index(string(out), test); i < 0 || (!strings.Contains(string(out[i:]), "bw") && !strings.Contains(string(out[i:]), "latency")) {
			t.Errorf("qperf -cm1 printed no result for %s\n%s", test, out)
		}
	}
	t.Logf("qperf -cm1 between the hosts:\n%s", out)
}

// runCMPair runs an rdma_cm program's server on a and its client on b. The
// server listens through its daemon, not on a TCP port of its own: the
// client starts once the library has said (VRDMA_DEBUG) that the server
// listens, and is run again while it is refused for want of a listener.
// Both must exit 0; it returns what each printed.
func runCMPair(t *testing.T, a, b *toolHost, name string, serverArgs, clientArgs []string) (server, client string) {
	t.Helper()
	return runCMPairOr(t, a, b, name, serverArgs, clientArgs, "")
}

// runCMPairOr is runCMPair that skips the test, saying skipUnreachable, when
// the client's connection is UNREACHABLE (if skipUnreachable is not "").
//
// perftest's -R client connects its data QP as soon as its first
// connection is up, racing the server's second listen: a request that
// arrives first is rejected, and the client then hangs or crashes (as
// between two kernels, only less often: their listen is quicker). So a
// perftest pair whose client did not complete is run again, a few times.
func runCMPairOr(t *testing.T, a, b *toolHost, name string, serverArgs, clientArgs []string, skipUnreachable string) (server, client string) {
	t.Helper()
	attempts := 1
	if strings.HasPrefix(name, "ib_") {
		attempts = 4
	}
	for i := 1; ; i++ {
		server, client, err := runCMPairOnce(t, a, b, name, serverArgs, clientArgs, skipUnreachable)
		if err == nil {
			return server, client
		}
		if i >= attempts {
			t.Fatalf("%v (attempt %d of %d)", err, i, attempts)
		}
		t.Logf("%v: running the pair again (perftest -R's race)", err)
	}
}

// runCMPairOnce runs the pair once; an error says why it failed.
func runCMPairOnce(t *testing.T, a, b *toolHost, name string, serverArgs, clientArgs []string, skipUnreachable string) (server, client string, _ error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sout, done, err := startListener(ctx, t, a, name, serverArgs)
	if err != nil {
		return "", "", err
	}
	for {
		out, err := b.prog.Command(ctx, name, clientArgs...).CombinedOutput()
		if err == nil {
			client = string(out)
			break
		}
		refused := strings.Contains(string(out), "REJECTED") || strings.Contains(string(out), "Unable to perform rdma_client function") ||
			strings.Contains(string(out), "failure connecting") // ucmatose: the listener is not there yet
		select {
		case serr := <-done:
			// Not necessarily before the client connected: rping's
			// server ends after the last ping while a client that
			// hangs in its teardown fails only when it is killed.
			return "", "", fmt.Errorf("%s client on b failed (%v), and its server on a has ended (%v):\nserver:\n%s\nclient:\n%s", name, err, serr, sout.String(), out)
		default:
		}
		if skipUnreachable != "" && strings.Contains(string(out), "RDMA_CM_EVENT_UNREACHABLE") {
			cancel()
			<-done
			t.Skipf("%s: %s\n%s", name, skipUnreachable, out)
		}
		if !refused || ctx.Err() != nil {
			cancel()
			<-done
			return "", "", fmt.Errorf("%s client on b: %v\n%s\nserver:\n%s", name, err, out, sout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := <-done; err != nil {
		return "", "", fmt.Errorf("%s server on a: %v\n%s\nclient:\n%s", name, err, sout.String(), client)
	}
	return sout.String(), client, nil
}

// startListener starts the rdma_cm server program name on a and returns
// once it listens (the library says so on stderr: VRDMA_DEBUG), with its
// output and a channel its exit status arrives on; an error if it ended
// first or ctx ended (the server is then waited for).
func startListener(ctx context.Context, t *testing.T, a *toolHost, name string, args []string) (*proctest.Buffer, <-chan error, error) {
	t.Helper()
	sout := new(proctest.Buffer)
	sp := a.prog
	sp.Env = append(append([]string(nil), sp.Env...), "VRDMA_DEBUG=1")
	srv := sp.Command(ctx, name, args...)
	srv.Stdout, srv.Stderr = sout, sout
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	for !strings.Contains(sout.String(), "rdma_cm: listening on port") {
		select {
		case err := <-done:
			return nil, nil, fmt.Errorf("%s server on a ended (%v) before listening:\n%s", name, err, sout.String())
		case <-ctx.Done():
			<-done
			return nil, nil, fmt.Errorf("%s server on a does not listen:\n%s", name, sout.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return sout, done, nil
}
