package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/netns"
)

// TestCaptureKeepsABurst checks that capture records a burst of RoCEv2
// datagrams that arrives while tcpdump gets no CPU (stopped here, starved
// on a loaded machine): the kernel's buffer must hold them all. With
// tcpdump's -s 0 it held 32, and an rping's DREQ and DREP, the last of
// about 125 packets, went missing from the capture.
func TestCaptureKeepsABurst(t *testing.T) {
	netns.Require(t)
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skip("tcpdump is not installed: apt-get install tcpdump")
	}
	ns := fmt.Sprintf("vrdma-capture-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	// A veth pair (with offloads, as the bridge of the interop tests has)
	// whose capturing end is named as capture expects.
	ip("-n", ns, "link", "add", HostIface, "type", "veth", "peer", "name", "peer0")
	ip("-n", ns, "addr", "add", "10.99.0.1/24", "dev", HostIface)
	ip("-n", ns, "link", "set", HostIface, "up")
	ip("-n", ns, "link", "set", "peer0", "up")
	ip("-n", ns, "neigh", "replace", "10.99.0.2", "lladdr", "02:00:00:00:00:02", "dev", HostIface, "nud", "permanent")

	var tcpdump *exec.Cmd
	command := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		tcpdump = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
		return tcpdump
	}
	path := filepath.Join(t.TempDir(), "burst.pcap")
	stop := capture(t, command, path)
	if tcpdump == nil || tcpdump.Process == nil {
		t.Fatal("capture started no tcpdump")
	}
	if err := tcpdump.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const burst = 300
	err := (&netns.Host{NS: ns}).Do(func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 99, 0, 2), Port: 4791})
		if err != nil {
			return err
		}
		defer c.Close()
		msg := make([]byte, 300) // about a CM MAD's datagram
		for range burst {
			if _, err := c.Write(msg); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := tcpdump.Process.Signal(syscall.SIGCONT); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		stop()
		t.Fatalf("sending the burst: %v", err)
	}
	// tcpdump writes what its buffer kept once it runs again; 20 s is a
	// hang guard.
	n := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n = pcapPackets(t, path); n >= burst {
			break
		}
	}
	stop()
	if n = pcapPackets(t, path); n != burst {
		t.Errorf("the capture holds %d of the %d datagrams sent while tcpdump was stopped", n, burst)
	}
}

// pcapPackets counts the packets of the pcap file at path (as far as it
// is written).
func pcapPackets(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	const fileHeader, recordHeader = 24, 16
	if len(b) < fileHeader {
		return 0
	}
	order := binary.ByteOrder(binary.LittleEndian)
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
	case 0xd4c3b2a1, 0x4d3cb2a1:
		order = binary.BigEndian
	default:
		t.Fatalf("%s is not a pcap file", path)
	}
	n := 0
	for off := fileHeader; off+recordHeader <= len(b); n++ {
		off += recordHeader + int(order.Uint32(b[off+8:]))
		if off > len(b) {
			return n // a record still being written
		}
	}
	return n
}

// TestTCPDumpLost reads what tcpdump lost from its summaries.
func TestTCPDumpLost(t *testing.T) {
	for _, tc := range []struct{ summary, want string }{
		{"125 packets captured\n125 packets received by filter\n0 packets dropped by kernel\n", ""},
		{"126 packets captured\n129 packets received by filter\n3 packets dropped by kernel\n", "dropped 3 packets (its buffer was full)"},
		{"120 packets captured\n125 packets received by filter\n0 packets dropped by kernel\n", "did not write 5 packets it received (it was stopped before it read them)"},
		{"1 packet captured\n4 packets received by filter\n1 packet dropped by kernel\n", "dropped 1 packets (its buffer was full) and did not write 2 packets it received (it was stopped before it read them)"},
		{"tcpdump: listening on br0\n", ""},
	} {
		if got := tcpdumpLost(tc.summary); got != tc.want {
			t.Errorf("tcpdumpLost(%q) = %q, want %q", tc.summary, got, tc.want)
		}
	}
}
