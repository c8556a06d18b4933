package tcplink

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/wire"
)

// Every wait in these tests only turns a hang into a failure: no test
// depends on how fast anything happens.
const testTimeout = 20 * time.Second

var (
	addrA = netip.MustParseAddr("127.0.0.1")
	addrB = netip.MustParseAddr("127.0.0.2")
	addrC = netip.MustParseAddr("127.0.0.3")
)

// testFrame is an RC SEND Only from src to dst carrying payload and seq
// (in the PSN), a whole IP packet as the engine builds it.
func testFrame(src, dst netip.Addr, seq uint32, payload []byte) []byte {
	p := wire.Packet{Src: src, Dst: dst, TTL: 64, IPID: uint16(seq) | 1, DF: true, SrcPort: 0xc000,
		Opcode: wire.TransportRC | wire.OpSendOnly, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: seq & 0xffffff, Payload: payload}
	if src.Is6() {
		p.FlowLabel = seq & 0xfffff
	}
	return wire.Append(nil, &p)
}

// sink collects what a link's Serve delivers.
type sink struct {
	mu     sync.Mutex
	frames [][]byte
	copy   bool // keep the frames, not only count them
	n      int
	hold   atomic.Pointer[chan struct{}] // if set, deliver waits until it is closed
}

func (s *sink) deliver(f []byte) {
	if h := s.hold.Load(); h != nil {
		<-*h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.copy {
		s.frames = append(s.frames, bytes.Clone(f))
	}
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *sink) got() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.frames...)
}

// logs records what a link logs, so tests can check the reasons it gives.
type logs struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	msg string
	err error
}

func (h *logs) Enabled(context.Context, slog.Level) bool { return true }
func (h *logs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logs) WithGroup(string) slog.Handler            { return h }
func (h *logs) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok && a.Key == "err" {
			rec.err = e
		}
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

// find returns the first logged error that matches target.
func (h *logs) find(target error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.err != nil && errors.Is(r.err, target) {
			return r.err
		}
	}
	return nil
}

// node is a link under test with its sink and logs.
type node struct {
	*Link
	sink  *sink
	logs  *logs
	serve chan error // Serve's result
}

// endpoints maps addresses to listen addresses, filled as nodes open, and
// to the identity expected there.
type endpoints struct {
	mu sync.Mutex
	m  map[netip.Addr]admit.Endpoint
}

func (e *endpoints) set(a netip.Addr, ep string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[netip.Addr]admit.Endpoint)
	}
	e.m[a] = admit.Endpoint{Addr: ep, Identity: e.m[a].Identity}
}

// setIdentity names the identity expected at a's endpoint.
func (e *endpoints) setIdentity(a netip.Addr, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[netip.Addr]admit.Endpoint)
	}
	e.m[a] = admit.Endpoint{Addr: e.m[a].Addr, Identity: id}
}

func (e *endpoints) lookup(a netip.Addr) (admit.Endpoint, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep, ok := e.m[a]
	return ep, ok && ep.Addr != ""
}

// openNode opens a link for addr listening on addr:port (0: any port),
// registers it in eps, serves it until the test ends and returns it.
// mod, if not nil, changes the config first.
func openNode(t testing.TB, eps *endpoints, addr netip.Addr, port int, mod func(*Config)) *node {
	t.Helper()
	n := &node{sink: &sink{copy: true}, logs: &logs{}, serve: make(chan error, 1)}
	cfg := Config{Name: "tcp-" + addr.String(), Addrs: []netip.Addr{addr},
		Listen: net.JoinHostPort(addr.String(), strconv.Itoa(port)), Peers: eps.lookup, Logger: slog.New(n.logs)}
	if mod != nil {
		mod(&cfg)
	}
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Link = l
	eps.set(addr, l.ListenAddr().String())
	go func() { n.serve <- l.Serve(n.sink.deliver) }()
	t.Cleanup(func() { n.stop(t) })
	return n
}

// stop closes the link and waits for Serve to return.
func (n *node) stop(t testing.TB) {
	t.Helper()
	n.Close()
	select {
	case err, ok := <-n.serve:
		if ok && err != nil {
			t.Errorf("Serve returned %v", err)
		}
		if ok {
			close(n.serve)
		}
	case <-time.After(testTimeout):
		t.Fatalf("Serve of %s did not return after Close", n.Name())
	}
}

// waitFor polls cond until it holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// send writes frames through l, checking all are queued.
func send(t testing.TB, l *Link, frames ...[]byte) {
	t.Helper()
	n, err := l.WriteBatch(frames)
	if err != nil || n != len(frames) {
		t.Fatalf("WriteBatch queued %d of %d frames: %v", n, len(frames), err)
	}
}

// checkGoroutines fails if, after waiting, more goroutines run than before.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}
