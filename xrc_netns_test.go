package vrdma_test

// XRC between two namespace hosts: Debian's unmodified ibv_xsrq_pingpong
// through the guest library, over RoCEv2 (Soft-RoCE links) and over the
// TCP channel. On RoCEv2 a capture of the veth shows the XRC opcodes and,
// after each request's BTH, the XRCETH naming the receiver's SRQ number as
// the program printed it. Needs root, ibverbs-utils, tcpdump and tshark
// (the capture check is skipped without the last two).

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
)

// xsrqRemoteSRQN matches ibv_xsrq_pingpong's line about its peer.
var xsrqRemoteSRQN = regexp.MustCompile(`remote: .* SRQN ([0-9a-f]+)`)

func TestXRCPingpongBetweenHosts(t *testing.T) {
	netns.Require(t)
	guesttest.RequirePrograms(t, "ibv_devinfo", "ibv_xsrq_pingpong")
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
			if a.gid != b.gid {
				t.Fatalf("the IPv4 GID is index %d on a and %d on b", a.gid, b.gid)
			}
			var pcapPath string
			var stop func()
			if mode.links && haveCaptureTools() {
				pcapPath = filepath.Join(t.TempDir(), "xrc.pcap")
				stop = captureRoCE(t, a.sw.h.NS, a.sw.h.Iface, pcapPath)
			}
			ba, bb := pathsOf(t, a.dev), pathsOf(t, b.dev)
			r := guesttest.RunPair(t, a.prog, b.prog, guesttest.PingpongPort, "ibv_xsrq_pingpong",
				"-d", "vrdma0", "-g", strconv.Itoa(a.gid), "-n", fmt.Sprint(toolIters), "-s", "4096")
			if t.Failed() {
				return
			}
			for side, out := range map[string]string{"server": r.ServerOut, "client": r.ClientOut} {
				if !strings.Contains(out, "success") {
					t.Errorf("%s did not succeed:\n%s", side, out)
				}
			}
			da, db := pathDelta(ba, pathsOf(t, a.dev)), pathDelta(bb, pathsOf(t, b.dev))
			for _, h := range []struct {
				name string
				d    pathCount
			}{{"a (server)", da}, {"b (client)", db}} {
				if took, others := h.d.by(mode.path); others != 0 || took < toolIters {
					t.Errorf("host %s's path counters moved by %+v: want at least %d messages by %s only", h.name, h.d, toolIters, mode.path)
				}
			}
			if stop == nil {
				return
			}
			stop()
			// Each side's sends go to its peer's SRQ: the number it printed
			// as its peer's.
			want := map[string]uint32{}
			for _, side := range []struct {
				addr, out string
			}{{a.sw.h.IPv4.String(), r.ServerOut}, {b.sw.h.IPv4.String(), r.ClientOut}} {
				m := xsrqRemoteSRQN.FindStringSubmatch(side.out)
				if m == nil {
					t.Fatalf("%s printed no remote SRQN:\n%s", side.addr, side.out)
				}
				n, _ := strconv.ParseUint(m[1], 16, 32)
				want[side.addr] = uint32(n)
			}
			checkXRCCapture(t, pcapPath, want)
		})
	}
}

func haveCaptureTools() bool {
	for _, p := range []string{"tcpdump", "tshark"} {
		if _, err := exec.LookPath(p); err != nil {
			return false
		}
	}
	return true
}

// checkXRCCapture has tshark read the capture: every packet is XRC (opcode
// 0xa0 and up); each SEND request (First 0xa0, Middle 0xa1, Last 0xa2,
// Only 0xa4) carries right after its BTH the XRCETH of the SRQ number its
// sender's peer has (srqn, by source address) — Wireshark 4.0 leaves the
// XRCETH undissected, as the start of infiniband.vendor — and the answers
// are XRC Acknowledges (0xb1). The link hands the kernel whole messages
// as UDP GSO super-frames, which the capture on the sending veth sees
// before segmentation: tshark decodes the first packet of each (a SEND
// First), so the check is on every request it sees, not on a count.
func checkXRCCapture(t *testing.T, path string, srqn map[string]uint32) {
	t.Helper()
	out, err := exec.Command("tshark", "-r", path, "-n", "--disable-protocol", "rpcordma", "-T", "fields",
		"-E", "separator=/t", "-E", "occurrence=l", "-e", "ip.src", "-e", "infiniband.bth.opcode", "-e", "infiniband.vendor").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	sends, acks := map[string]int{}, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 || f[1] == "" {
			continue
		}
		switch f[1] {
		case "160", "161", "162", "164": // XRC SEND First, Middle, Last, Only
			want := fmt.Sprintf("%08x", srqn[f[0]])
			if !strings.HasPrefix(f[2], want) {
				t.Errorf("an XRC SEND (opcode %s) from %s carries %q after its BTH: want the XRCETH %s", f[1], f[0], f[2][:min(len(f[2]), 16)], want)
			}
			sends[f[0]]++
		case "177": // XRC Acknowledge
			acks++
		default:
			t.Errorf("opcode %s from %s: want XRC SENDs and Acknowledges only", f[1], f[0])
		}
	}
	for src := range srqn {
		if sends[src] == 0 {
			t.Errorf("the capture holds no XRC SEND from %s", src)
		}
	}
	if acks == 0 {
		t.Error("the capture holds no XRC Acknowledge")
	}
	t.Logf("capture: XRC SEND frames by sender %v, each with its peer's XRCETH %v; %d XRC Acknowledges", sends, srqn, acks)
}

// captureRoCE runs tcpdump on dev in namespace ns, writing RoCEv2 packets
// to path, until the returned function is called.
func captureRoCE(t *testing.T, ns, dev, path string) (stop func()) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "tcpdump", "--immediate-mode", "-i", dev, "-s", "0", "-U", "-w", path, "udp", "port", "4791")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "listening on") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	return stop
}
