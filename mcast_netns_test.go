package vrdma_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
)

// mcastGroup is the group the multicast tests join.
const mcastGroup = "239.1.2.3"

// TestMckeyBetweenHosts runs Debian's mckey between two namespace hosts
// over their Soft-RoCE links: the receiver on b joins 239.1.2.3, the
// sender on a sends it ten datagrams, which the network copies to b. A
// capture on b's interface must hold the IGMP report b's kernel sends for
// the group (the daemon joined it on the link, as rdma_rxe's netdev does)
// and the RoCEv2 datagrams sent to the group's address with DQPN 0xFFFFFF
// (docs/design/multicast.md).
func TestMckeyBetweenHosts(t *testing.T) {
	netns.Require(t)
	guesttest.RequirePrograms(t, "mckey", "ibv_devinfo")
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed: apt-get install tshark")
	}
	lib := guesttest.Library(t)
	a, b := twoToolHosts(t, lib, true, "rdma")
	pcap := filepath.Join(t.TempDir(), "mcast.pcap")
	stop := tsharkCapture(t, b.sw.h, pcap, "igmp or udp port 4791")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	rcv := startOutput(t, b.prog.Command(ctx, "env", "VRDMA_DEBUG=1", "mckey", "-m", mcastGroup, "-b", b.sw.h.IPv4.String(), "-C", "10"))
	rcv.waitFor(t, "rdma_cm: joined multicast group")
	snd, err := a.prog.Command(ctx, "mckey", "-m", mcastGroup, "-b", a.sw.h.IPv4.String(), "-C", "10", "-s").CombinedOutput()
	if err != nil {
		t.Fatalf("the sender on a failed (%v):\n%s", err, snd)
	}
	out := rcv.wait(t)
	if !strings.Contains(out, "test complete") || !strings.Contains(out, "return status 0") {
		t.Errorf("the receiver on b did not complete; it printed:\n%s\nthe sender printed:\n%s", out, snd)
	}
	stop()
	if t.Failed() {
		o, _ := exec.Command("tshark", "-r", pcap).CombinedOutput()
		t.Logf("the capture on b:\n%s", o)
		t.Logf("b's link:\n%s\nb's device:\n%s", b.sw.d.Vrdma(t, "link", "show"), b.sw.d.Vrdma(t, "stat"))
	}

	fields := func(filter string, f ...string) []string {
		args := []string{"-r", pcap, "-Y", filter, "-T", "fields"}
		for _, x := range f {
			args = append(args, "-e", x)
		}
		o, err := exec.Command("tshark", args...).Output()
		if err != nil {
			t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, o)
		}
		return strings.Fields(string(o))
	}
	if joins := fields("igmp && igmp.maddr == "+mcastGroup, "ip.src"); len(joins) == 0 || !contains(joins, b.sw.h.IPv4.String()) {
		t.Errorf("no IGMP report from b (%s) for %s in the capture: %v", b.sw.h.IPv4, mcastGroup, joins)
	}
	dqpns := fields("udp.dstport == 4791 && ip.dst == "+mcastGroup, "infiniband.bth.destqp")
	if len(dqpns) < 10 {
		t.Errorf("%d RoCEv2 datagrams to %s in the capture, want 10", len(dqpns), mcastGroup)
	}
	for _, q := range dqpns {
		if v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(q), "0x"), 16, 32); err != nil || v != 0xFFFFFF {
			t.Errorf("a datagram to the group has DQPN %s, want 0xFFFFFF", q)
			break
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// outputProc is a program whose combined output is read while it runs.
type outputProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *outputProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *outputProc) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startOutput(t *testing.T, cmd *exec.Cmd) *outputProc {
	t.Helper()
	p := &outputProc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", strings.Join(cmd.Args, " "), err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitFor waits until the program printed want; the test fails if it ends
// first, or after 30 s.
func (p *outputProc) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(p.text(), want) {
		select {
		case <-p.done:
			t.Fatalf("%s ended (%v) before printing %q:\n%s", strings.Join(p.cmd.Args, " "), p.err, want, p.text())
		case <-deadline:
			t.Fatalf("%s did not print %q in 30 s:\n%s", strings.Join(p.cmd.Args, " "), want, p.text())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *outputProc) wait(t *testing.T) string {
	t.Helper()
	<-p.done
	if p.err != nil {
		t.Errorf("%s failed (%v)", strings.Join(p.cmd.Args, " "), p.err)
	}
	return p.text()
}

// tsharkCapture captures filter on h's interface into file until the
// returned function is called.
func tsharkCapture(t *testing.T, h *netns.Host, file, filter string) func() {
	t.Helper()
	cmd := h.Command(context.Background(), "tshark", "-i", h.Iface, "-f", filter, "-w", file)
	p := startOutput(t, cmd)
	p.waitFor(t, "Capturing on")
	var once sync.Once
	return func() {
		once.Do(func() {
			time.Sleep(500 * time.Millisecond) // the last packets reach the file
			_ = cmd.Process.Signal(syscall.SIGINT)
			<-p.done
		})
	}
}

// TestMckeyOverTCPChannel runs Debian's mckey between two namespace hosts
// with no RDMA uplink: the sender's daemon sends a copy of each datagram
// to the group over the TCP channel to the switch's other hosts, and the
// receiver on b gets all ten.
func TestMckeyOverTCPChannel(t *testing.T) {
	netns.Require(t)
	guesttest.RequirePrograms(t, "mckey", "ibv_devinfo")
	lib := guesttest.Library(t)
	a, b := twoToolHosts(t, lib, false, "tcp")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	rcv := startOutput(t, b.prog.Command(ctx, "env", "VRDMA_DEBUG=1", "mckey", "-m", mcastGroup, "-b", b.sw.h.IPv4.String(), "-C", "10"))
	rcv.waitFor(t, "rdma_cm: joined multicast group")
	snd, err := a.prog.Command(ctx, "mckey", "-m", mcastGroup, "-b", a.sw.h.IPv4.String(), "-C", "10", "-s").CombinedOutput()
	if err != nil {
		t.Fatalf("the sender on a failed (%v):\n%s", err, snd)
	}
	out := rcv.wait(t)
	if !strings.Contains(out, "test complete") || !strings.Contains(out, "return status 0") {
		t.Errorf("the receiver on b did not complete; it printed:\n%s\nthe sender printed:\n%s", out, snd)
	}
}

// TestMcastShowBetweenHosts: the switch knows the groups. While mckey's
// receiver on b is in 239.1.2.3, `vrdma mcast show` on a lists the group
// with b's host and the receiver's tenant (root: uid 0) and one QP; when
// the receiver ends, the group leaves the list (docs/design/multicast.md,
// "The switch's record").
func TestMcastShowBetweenHosts(t *testing.T) {
	netns.Require(t)
	guesttest.RequirePrograms(t, "mckey", "ibv_devinfo")
	lib := guesttest.Library(t)
	a, b := twoToolHosts(t, lib, false, "tcp")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	rcv := startOutput(t, b.prog.Command(ctx, "env", "VRDMA_DEBUG=1", "mckey", "-m", mcastGroup, "-b", b.sw.h.IPv4.String(), "-C", "10"))
	rcv.waitFor(t, "rdma_cm: joined multicast group")
	want := "GROUP      TENANT  HOST  QPS\n" + mcastGroup + "  uid 0   b     1\n"
	eventually(t, 30*time.Second, "a lists b's group", func() (bool, string) {
		out := a.sw.d.Vrdma(t, "mcast", "show")
		return out == want, out
	})
	if out := a.sw.d.Vrdma(t, "mcast", "show", "239.1.2.4"); out != "no multicast groups\n" {
		t.Errorf("`vrdma mcast show 239.1.2.4` printed %q, want none", out)
	}
	_ = rcv.cmd.Process.Kill()
	<-rcv.done
	eventually(t, 30*time.Second, "the group leaves a's list with the receiver", func() (bool, string) {
		out := a.sw.d.Vrdma(t, "mcast", "show", mcastGroup)
		return out == "no multicast groups\n", out
	})
}
