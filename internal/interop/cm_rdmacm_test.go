package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// TestCMWithRxe connects the Go API on vrdma (a daemon with a Soft-RoCE
// link on the namespace's br0) and the guest kernel's rdma_cm over
// rdma_rxe, through unmodified ucmatose (rdmacm-utils) in guest A, both
// ways: the Go API dials the guest's listener, and the guest's client
// dials a Go API listener. Both reach ESTABLISHED and disconnect. The
// exchange is captured on br0 and checked with tshark, which decodes the
// CM MADs.
func TestCMWithRxe(t *testing.T) {
	g := sharedGuests(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	if out, rc := g.Run(t, "A", 10, "command -v ucmatose"); rc != 0 {
		t.Skipf("the interop guest has no ucmatose (rdmacm-utils): %s", out)
	}
	pcap := filepath.Join(t.TempDir(), "cm.pcap")
	stopCapture := capture(t, host.Command, pcap)

	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: d.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	guest := GuestIP("A")
	var nRC, nUD int // connections and resolutions that went through, for the capture's check

	t.Run("Go API dials ucmatose in the guest", func(t *testing.T) {
		id := g.Spawn(t, "A", 60, "ucmatose -b "+guest.String()+" -p 7471 -c 1 -C 0")
		qp := rcQP(t, dev)
		var c *vrdma.Conn
		deadline := time.Now().Add(30 * time.Second) // a hang guard: the guest's listener may not be up yet
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err = dev.Dial(ctx, qp, guest, 7471, nil)
			cancel()
			var rej *vrdma.RejectError
			if err == nil || !errors.As(err, &rej) || rej.Reason != vrdma.RejectNoListener || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			out, rc := g.Wait(t, "A", id, 70)
			t.Fatalf("dial the guest's ucmatose: %v; ucmatose (rc %d):\n%s", err, rc, out)
		}
		t.Logf("established with the guest's rdma_cm: our QP 0x%x, path %s", qp.QPN(), func() string { p, _ := c.Path(); return p }())
		// ucmatose, with no messages to send, disconnects at once.
		select {
		case <-c.Done():
		case <-time.After(30 * time.Second):
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.Disconnect(ctx, nil)
			cancel()
			t.Errorf("the guest did not disconnect; we did: %v", err)
		}
		out, rc := g.Wait(t, "A", id, 70)
		if rc != 0 || !strings.Contains(out, "disconnecting") {
			t.Fatalf("ucmatose in the guest (rc %d):\n%s", rc, out)
		}
		t.Logf("ucmatose in the guest:\n%s", out)
		nRC++
	})

	t.Run("ucmatose in the guest dials a Go API listener", func(t *testing.T) {
		l, err := dev.Listen(7472)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		id := g.Spawn(t, "A", 60, "ucmatose -s "+HostIP.String()+" -p 7472 -c 1 -C 0")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := l.Accept(ctx)
		if err != nil {
			out, rc := g.Wait(t, "A", id, 70)
			t.Fatalf("no request from the guest: %v; ucmatose (rc %d):\n%s", err, rc, out)
		}
		if req.RemoteAddr != guest {
			t.Errorf("the request comes from %v, want the guest's %v", req.RemoteAddr, guest)
		}
		c, err := req.Accept(ctx, rcQP(t, dev), nil)
		if err != nil {
			out, rc := g.Wait(t, "A", id, 70)
			t.Fatalf("accept: %v; ucmatose (rc %d):\n%s", err, rc, out)
		}
		// As ucmatose's server does: the client waits for it to
		// disconnect.
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		if err := c.Disconnect(dctx, nil); err != nil {
			t.Errorf("disconnect: %v", err)
		}
		out, rc := g.Wait(t, "A", id, 70)
		if rc != 0 || !strings.Contains(out, "test complete") {
			t.Fatalf("ucmatose in the guest (rc %d):\n%s", rc, out)
		}
		t.Logf("ucmatose in the guest:\n%s", out)
		nRC++
	})

	t.Run("Go API resolves udaddy's UD QP in the guest (SIDR)", func(t *testing.T) {
		id := g.Spawn(t, "A", 60, "udaddy -b "+guest.String()+" -c 1 -C 0")
		qp := udQP(t, dev)
		var c *vrdma.Conn
		deadline := time.Now().Add(30 * time.Second) // a hang guard: the guest's listener may not be up yet
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err = dev.Dial(ctx, qp, guest, 7174, nil) // udaddy's port
			cancel()
			var rej *vrdma.RejectError
			if err == nil || !errors.As(err, &rej) || rej.Reason != vrdma.RejectNoListener || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		out, code := g.Wait(t, "A", id, 70)
		if err != nil {
			t.Fatalf("resolve the guest's udaddy: %v; udaddy (rc %d):\n%s", err, code, out)
		}
		// rdma_cm's UD QPs use RDMA_UDP_QKEY.
		if c.RemoteQPN() == 0 || c.RemoteQKey() != 0x01234567 {
			t.Errorf("the guest's UD QP 0x%x, Q_Key %#x: want a QPN and rdma_cm's Q_Key 0x01234567", c.RemoteQPN(), c.RemoteQKey())
		}
		t.Logf("the guest's UD QP: 0x%x, Q_Key %#x; udaddy (rc %d):\n%s", c.RemoteQPN(), c.RemoteQKey(), code, out)
		nUD++
	})

	t.Run("udaddy in the guest resolves a Go API listener's UD QP (SIDR)", func(t *testing.T) {
		l, err := dev.Listen(7174) // udaddy's port
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		id := g.Spawn(t, "A", 60, "udaddy -s "+HostIP.String()+" -c 1 -C 0")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := l.Accept(ctx)
		if err != nil {
			out, rc := g.Wait(t, "A", id, 70)
			t.Fatalf("no request from the guest: %v; udaddy (rc %d):\n%s", err, rc, out)
		}
		if req.QPType != ibv.UD {
			t.Errorf("request for a %v QP, want UD", req.QPType)
		}
		if _, err := req.Accept(ctx, udQP(t, dev), nil); err != nil {
			t.Fatal(err)
		}
		out, rc := g.Wait(t, "A", id, 70)
		if rc != 0 || !strings.Contains(out, "test complete") {
			t.Fatalf("udaddy in the guest (rc %d):\n%s", rc, out)
		}
		t.Logf("udaddy in the guest:\n%s", out)
		nUD++
	})

	stopCapture()
	checkCMCapture(t, pcap, nRC, nUD)
}

// udQP is a UD QP of dev's in RTS with rdma_cm's Q_Key, until the test
// ends.
func udQP(t *testing.T, dev *vrdma.Device) *vrdma.QP {
	t.Helper()
	qp := newQP(t, dev, ibv.UD)
	o := vrdma.DefaultConnectOptions()
	o.QKey = 0x01234567
	if err := qp.Connect(vrdma.Endpoint{}, &o); err != nil {
		t.Fatal(err)
	}
	return qp
}

// rcQP is an RC QP of dev's, with its CQs, until the test ends.
func rcQP(t *testing.T, dev *vrdma.Device) *vrdma.QP { return newQP(t, dev, ibv.RC) }

// newQP is a QP of dev's of type typ in RESET, with its PD and CQ, until
// the test ends.
func newQP(t *testing.T, dev *vrdma.Device, typ ibv.QPType) *vrdma.QP {
	t.Helper()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pd.Dealloc() })
	cq, err := dev.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cq.Destroy() })
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qp.Destroy() })
	return qp
}

// capture runs tcpdump on br0 in the namespace into file until the
// returned function stops it.
//
// Each packet is cut at captureSnap bytes, and the kernel's buffer is
// captureBufferKiB: in immediate mode libpcap's ring holds buffer/frame
// packets, and with -s 0 a frame on an interface with offloads is 64 KiB,
// so a 2 MiB ring held 32 packets; a tcpdump starved of CPU for one rping
// (about 125 packets) lost the last ones, the DREQ and DREP among them,
// and the check below reported them missing ("packets dropped by kernel"
// in tcpdump's summary). The stop function logs what tcpdump lost.
func capture(t *testing.T, command func(context.Context, string, ...string) *exec.Cmd, file string) func() {
	t.Helper()
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Log("no tcpdump: the exchange is not captured")
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := command(ctx, "tcpdump", "-i", HostIface, "--immediate-mode", "-U", "-s", fmt.Sprint(captureSnap),
		"-B", fmt.Sprint(captureBufferKiB), "-w", file, "udp", "port", "4791")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	var summary bytes.Buffer // read once tcpdump has ended
	cmd.Stderr = &summary
	if err := cmd.Start(); err != nil {
		cancel()
		t.Logf("tcpdump: %v: the exchange is not captured", err)
		return func() {}
	}
	time.Sleep(500 * time.Millisecond) // tcpdump opens the interface; a missed first packet only weakens the check below
	return func() {
		t.Helper()
		time.Sleep(200 * time.Millisecond)
		cancel()
		_ = cmd.Wait()
		if lost := tcpdumpLost(summary.String()); lost != "" {
			t.Logf("tcpdump %s: the capture may lack MADs that were sent", lost)
		}
	}
}

const (
	// captureSnap holds a CM MAD's packet whole (Ethernet, IP, UDP, BTH,
	// DETH, the 256-byte MAD, ICRC: 322 bytes over IPv4, 342 over IPv6).
	captureSnap = 512
	// captureBufferKiB is tcpdump's -B: 8 MiB, thousands of packets.
	captureBufferKiB = 8192
)

// tcpdumpStat finds a count of tcpdump's summary: "N packets captured",
// "N packets received by filter", "N packets dropped by kernel".
var tcpdumpStat = regexp.MustCompile(`(\d+) packets? (captured|received by filter|dropped by kernel)`)

// tcpdumpLost says what tcpdump's summary shows it lost: packets the
// kernel dropped (its buffer full), and packets that passed the filter
// but were neither written nor dropped (still in the buffer when tcpdump
// was stopped); "" when none.
func tcpdumpLost(summary string) string {
	n := map[string]int{}
	for _, m := range tcpdumpStat.FindAllStringSubmatch(summary, -1) {
		n[m[2]], _ = strconv.Atoi(m[1])
	}
	var lost []string
	if d := n["dropped by kernel"]; d > 0 {
		lost = append(lost, fmt.Sprintf("dropped %d packets (its buffer was full)", d))
	}
	if u := n["received by filter"] - n["captured"] - n["dropped by kernel"]; u > 0 {
		lost = append(lost, fmt.Sprintf("did not write %d packets it received (it was stopped before it read them)", u))
	}
	return strings.Join(lost, " and ")
}

// checkCMCapture checks with tshark that the capture holds the CM
// exchange of rc connections (REQ, REP, RTU, DREQ, DREP) and ud
// resolutions (SIDR_REQ, SIDR_REP), each MAD a CM Send to QP1.
func checkCMCapture(t *testing.T, file string, rc, ud int) {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Log("no tshark: the capture is not checked")
		return
	}
	if _, err := os.Stat(file); err != nil {
		return
	}
	out, err := exec.Command("tshark", "-r", file, "-Y", "infiniband.mad.mgmtclass == 0x07", "-T", "fields",
		"-e", "ip.src", "-e", "infiniband.bth.destqp", "-e", "infiniband.mad.attributeid").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	t.Logf("CM MADs on the wire (source, dest QP, attribute):\n%s", out)
	count := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		if f[1] != "0x000001" && f[1] != "1" {
			t.Errorf("a CM MAD to QP %s: %s", f[1], line)
		}
		count[f[2]]++
	}
	// REQ 0x0010, REP 0x0013, RTU 0x0014, DREQ 0x0015, DREP 0x0016:
	// at least one of each per connection; SIDR_REQ 0x0017 and SIDR_REP
	// 0x0018 one per resolution.
	want := map[string]int{"0x0010": rc, "0x0013": rc, "0x0014": rc, "0x0015": rc, "0x0016": rc, "0x0017": ud, "0x0018": ud}
	for attr, n := range want {
		if count[attr] < n {
			t.Errorf("tshark decoded %d MADs of attribute %s, want %d at least: %v", count[attr], attr, n, count)
		}
	}
}
