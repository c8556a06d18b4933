package vrdma_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/fakelink"
)

// startCMDaemonWith runs a daemon of cfg, on a socket of its own, until the
// test ends.
func startCMDaemonWith(t testing.TB, cfg daemon.Config) *daemon.Daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-cm-") // short: a socket path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	cfg.SocketPath = filepath.Join(dir, "vrdma.sock")
	d, err := daemon.New(cfg)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() {
		d.Close()
		os.RemoveAll(dir)
	})
	return d
}

// cmHosts are two daemons joined by in-process links (10.0.0.1 and
// 10.0.0.2): their connection managers speak CM MADs over them.
type cmHosts struct {
	net     *fakelink.Network
	daemons [2]*daemon.Daemon
	links   [2]*fakelink.Link
	addrs   [2]netip.Addr
}

func newCMHosts(t testing.TB, mtu ibv.MTU) *cmHosts {
	t.Helper()
	h := &cmHosts{net: fakelink.New(1)}
	for i := range h.daemons {
		d := startCMDaemonWith(t, daemon.Config{HostName: fmt.Sprintf("cm-host-%d", i)})
		h.addrs[i] = netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
		l := h.net.Link("rxe0", [6]byte{0x52, 0x54, 0, 0, 0xc, byte(i + 1)}, h.addrs[i])
		l.SetMTU(mtu)
		if err := d.AttachLink(l); err != nil {
			t.Fatal(err)
		}
		h.daemons[i], h.links[i] = d, l
	}
	return h
}

func (h *cmHosts) env(t testing.TB) *confEnv {
	return newConfEnvOn(t, [2]string{h.daemons[0].SocketPath(), h.daemons[1].SocketPath()})
}

// sameHostEnv is the conformance pair of instances on one daemon with no
// link: CM messages stay in the daemon.
func sameHostEnv(t testing.TB) *confEnv {
	d := startCMDaemonWith(t, daemon.Config{HostName: "cm-one"})
	return newConfEnvOn(t, [2]string{d.SocketPath(), d.SocketPath()})
}

func cmCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
	t.Cleanup(cancel)
	return ctx
}

func listen(t testing.TB, dev *vrdma.Device, port uint16) *vrdma.Listener {
	t.Helper()
	l, err := dev.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// accepted is what the listener's side of cmConnect got.
type accepted struct {
	req  *vrdma.ConnRequest
	conn *vrdma.Conn
	err  error
}

// acceptOne accepts the next request on l with qp and reply, on its own
// goroutine.
func acceptOne(ctx context.Context, l *vrdma.Listener, qp *vrdma.QP, reply []byte) <-chan accepted {
	out := make(chan accepted, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			out <- accepted{err: err}
			return
		}
		c, err := req.Accept(ctx, qp, reply)
		out <- accepted{req: req, conn: c, err: err}
	}()
	return out
}

// cmConnect connects a's QP to b's through the connection manager: b
// listens, a dials b's adapter at addr.
func cmConnect(t testing.TB, a, b *side, addr netip.Addr) (ca, cb *vrdma.Conn) {
	t.Helper()
	ctx := cmCtx(t)
	l := listen(t, b.dev, 0)
	got := acceptOne(ctx, l, b.qp, []byte("welcome"))
	ca, err := a.dev.Dial(ctx, a.qp, addr, l.Port(), []byte("hello"))
	if err != nil {
		t.Fatalf("dial %s port %d: %v", addr, l.Port(), err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	if !samePrivate(ca.PrivateData(), "welcome") || !samePrivate(r.conn.PrivateData(), "hello") || !samePrivate(r.req.PrivateData, "hello") {
		t.Fatalf("private data: the requester got %q, the listener %q (request %q)", ca.PrivateData(), r.conn.PrivateData(), r.req.PrivateData)
	}
	return ca, r.conn
}

// gidAddr is the address (GID) index i of dev's adapter.
func gidAddr(t testing.TB, dev *vrdma.Device, i int) netip.Addr {
	t.Helper()
	g, err := dev.GID(i)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrFrom16(g).Unmap()
}

// samePrivate reports whether private data got is want: exactly, or, as
// it arrives in a CM MAD (between hosts), zero-padded to the message's
// size, the way rdma_cm hands it up.
func samePrivate(got []byte, want string) bool {
	if !bytes.HasPrefix(got, []byte(want)) {
		return false
	}
	for _, b := range got[len(want):] {
		if b != 0 {
			return false
		}
	}
	return true
}

// madPath reports whether t runs between two hosts, where the connection
// manager speaks CM MADs: a REJ carries a reason and private data, no text.
func madPath(t testing.TB) bool { return strings.Contains(t.Name(), "/two_hosts") }
