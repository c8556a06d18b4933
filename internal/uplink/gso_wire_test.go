package uplink

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vrdma/vrdma/internal/pcap"
	"github.com/vrdma/vrdma/internal/wire"
)

// What GSO runs look like on a wire: with segmentation off on the sender's
// veth (what a NIC without USO gets: the stack cuts the buffer), a capture
// on the receiver's end holds every packet as a NIC would send it. Each is
// at most the interface's MTU, carries a valid UDP checksum, an ICRC that
// verifies (so the IPv4 IDs are the ones the ICRCs were written for) and,
// when tshark is installed, decodes as InfiniBand without a malformed-packet
// mark. (Without segmentation off a capture on a veth shows GSO buffers
// whole: capture tests that check the wire run links without GSO, the
// default, or turn segmentation off like this one.)
func TestLinkGSOOnTheWire(t *testing.T) {
	for _, tool := range []string{"ethtool", "tcpdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	n := newTestNet(t)
	// Segmentation and checksumming off: the stack cuts the buffers
	// and fills in the UDP checksums, as for a NIC without offloads
	// (over a veth a segment's checksum is otherwise left to hardware).
	if out, err := exec.Command("ip", "netns", "exec", n.a.ns, "ethtool", "-K", n.a.dev, "tx-udp-segmentation", "off", "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	path := filepath.Join(t.TempDir(), "gso.pcap")
	stop := capture(t, n.b.ns, n.b.dev, path)
	la := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev, GSO: true})
	lb := openIn(t, n.b.ns, Config{Name: "b", Netdev: n.b.dev})
	cb := serve(t, lb)
	total := 0
	for _, pair := range [][2]netip.Addr{{n.a.v4, n.b.v4}, {n.a.v6, n.b.v6}} {
		send(t, la, rcFrame(pair[0], pair[1], 1, 0xC009, 0x11, 1, 1, nil)) // the neighbour cache
		cb.next(t)
		frames, _ := mixedBatch(pair[0], pair[1])
		send(t, la, frames...)
		for range frames {
			cb.next(t)
		}
		total += 1 + len(frames)
	}
	if la.Stats().TxGSO == 0 {
		t.Fatal("no GSO send")
	}
	// tcpdump writes each packet as it reads it (-U); on SIGINT it drops
	// what it has not read yet.
	waitFor(t, "the capture", func() bool { return countPackets(path) >= total })
	stop()

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		data, lt, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p, ok := pcap.IPPayloadOfFrame(lt, data)
		if !ok {
			continue
		}
		got++
		if len(p) > 1500 {
			t.Errorf("packet %d: %d bytes on the wire, more than the MTU", got, len(p))
		}
		if err := wire.VerifyICRC(p); err != nil {
			t.Errorf("packet %d: %v: %x", got, err, p)
		}
		if !udpChecksumOK(p) {
			t.Errorf("packet %d: bad UDP checksum: %x", got, p)
		}
	}
	if got != total {
		t.Errorf("captured %d packets, sent %d", got, total)
	}
	if tshark, err := exec.LookPath("tshark"); err == nil {
		// RPC-over-RDMA's heuristic dissector takes a SEND's payload
		// for its own header.
		out, err := exec.Command(tshark, "-r", path, "--disable-protocol", "rpcordma",
			"-T", "fields", "-e", "frame.number", "-e", "infiniband.bth.opcode", "-e", "_ws.malformed").Output()
		if err != nil {
			t.Fatalf("tshark: %v", err)
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) != total {
			t.Errorf("tshark decoded %d packets, want %d", len(lines), total)
		}
		for _, l := range lines {
			fs := strings.Split(l, "\t")
			if len(fs) < 3 || fs[1] == "" || fs[2] != "" {
				t.Errorf("tshark: %q: want an InfiniBand opcode and no malformed mark", l)
			}
		}
	}
}

// capture runs tcpdump on dev in namespace ns, writing RoCEv2 packets to
// path, until the returned function is called.
func capture(t *testing.T, ns, dev, path string) (stop func()) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "tcpdump", "-i", dev, "-s", "0", "-U", "-w", path, "udp", "port", "4791")
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

// countPackets returns how many packets the capture file holds so far.
func countPackets(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		return 0
	}
	n := 0
	for {
		if _, _, err := r.Next(); err != nil {
			return n
		}
		n++
	}
}

// udpChecksumOK reports whether an IP packet's UDP checksum is 0 (none, as
// rxe sends) or right.
func udpChecksumOK(p []byte) bool {
	hl := 40
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	if p[0]>>4 == 4 {
		hl = int(p[0]&0xf) * 4
		add(p[12:20])
	} else {
		add(p[8:40])
	}
	u := p[hl:]
	if binary.BigEndian.Uint16(u[6:]) == 0 {
		return true
	}
	sum += 17 + uint32(len(u))
	add(u)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}
