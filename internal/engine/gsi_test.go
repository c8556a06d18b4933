package engine_test

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fakelink"
	"github.com/vrdma/vrdma/internal/wire"
)

// gsiHosts are two hosts, each with one link on a fake network, serving.
func gsiHosts(t *testing.T) (a, b *engine.Host, la, lb *fakelink.Link) {
	t.Helper()
	net := fakelink.New(1)
	la = net.Link("rxe0", [6]byte{2, 0, 0, 0, 0, 1}, netip.MustParseAddr("10.0.0.1"))
	lb = net.Link("rxe0", [6]byte{2, 0, 0, 0, 0, 2}, netip.MustParseAddr("10.0.0.2"))
	a, b = engine.NewHost(), engine.NewHost()
	for _, x := range []struct {
		h *engine.Host
		l *fakelink.Link
	}{{a, la}, {b, lb}} {
		if err := x.h.AddLink(x.l); err != nil {
			t.Fatal(err)
		}
		h, l := x.h, x.l
		done := make(chan struct{})
		go func() { defer close(done); _ = l.Serve(func(f []byte) { h.Deliver(l, f) }) }()
		t.Cleanup(func() { l.Close(); <-done })
	}
	return a, b, la, lb
}

func gid(s string) [16]byte { return netip.MustParseAddr(s).As16() }

// A MAD sent from QP1 of one host reaches the other's GSI handler with
// its source, and the packet on the wire is a UD SEND to QP1 with the GSI
// Q_Key, as rdma_rxe sends and takes them.
func TestGSIRoundTrip(t *testing.T) {
	a, b, _, _ := gsiHosts(t)
	var (
		mu  sync.Mutex
		got []engine.GSIDatagram
	)
	arrived := make(chan struct{}, 1)
	b.SetGSIHandler(func(d *engine.GSIDatagram) {
		mu.Lock()
		c := *d
		c.MAD = bytes.Clone(d.MAD)
		got = append(got, c)
		mu.Unlock()
		arrived <- struct{}{}
	})
	mad := make([]byte, engine.MADSize)
	copy(mad, "\x01\x07\x02\x03 a CM MAD")
	if err := a.SendGSI(gid("::ffff:10.0.0.1"), gid("::ffff:10.0.0.2"), engine.GSIQPN, mad); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the MAD never reached the other host's GSI handler")
	}
	mu.Lock()
	defer mu.Unlock()
	d := got[0]
	if d.Src != gid("::ffff:10.0.0.1") || d.Dst != gid("::ffff:10.0.0.2") || d.SrcQP != engine.GSIQPN || d.PKey != 0xffff || !bytes.Equal(d.MAD, mad) {
		t.Errorf("the handler got %+v", d)
	}
	if st := b.WireStats(""); st.GSI != 1 || st.UnknownQP != 0 {
		t.Errorf("wire counters %+v, want one GSI datagram", st)
	}

	if err := a.SendGSI(gid("::ffff:10.0.0.1"), gid("::ffff:10.0.0.2"), 1, mad[:100]); err == nil {
		t.Error("a 100-byte MAD was sent")
	}
	if err := a.SendGSI(gid("::ffff:10.0.0.9"), gid("::ffff:10.0.0.2"), 1, mad); !errors.Is(err, engine.ErrNoRoute) {
		t.Errorf("a MAD from a GID no link has: %v, want ErrNoRoute", err)
	}
}

// What QP1 does not take is counted, never handed on.
func TestGSIRefuses(t *testing.T) {
	_, b, _, lb := gsiHosts(t)
	handled := 0
	b.SetGSIHandler(func(*engine.GSIDatagram) { handled++ })
	frame := func(opcode wire.Opcode, qkey uint32, n int) []byte {
		p := wire.Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), TTL: 64, DF: true, IPID: 1,
			SrcPort: 0xC000, DstPort: wire.UDPPort, Opcode: opcode, PKey: 0xffff, DestQP: engine.GSIQPN,
			DETH: wire.DETH{QKey: qkey, SrcQP: 1}}
		f := wire.AppendHeaders(nil, &p, n)
		f = append(f, make([]byte, n)...)
		return wire.AppendTrailer(f)
	}
	tests := []struct {
		name  string
		frame []byte
		count func(engine.WireStats) uint64
	}{
		{"another Q_Key", frame(wire.TransportUD|wire.OpSendOnly, 0x11111111, engine.MADSize), func(s engine.WireStats) uint64 { return s.BadKey }},
		{"not a MAD's size", frame(wire.TransportUD|wire.OpSendOnly, engine.GSIQKey, 100), func(s engine.WireStats) uint64 { return s.Malformed }},
		{"an RC SEND to QP1", frame(wire.TransportRC|wire.OpSendOnly, engine.GSIQKey, engine.MADSize), func(s engine.WireStats) uint64 { return s.UnknownQP }},
	}
	for _, tt := range tests {
		before := tt.count(b.WireStats(""))
		b.Deliver(lb, tt.frame)
		if got := tt.count(b.WireStats("")) - before; got != 1 {
			t.Errorf("%s: counted %d times, want once", tt.name, got)
		}
	}
	b.SetGSIHandler(nil)
	before := b.WireStats("").UnknownQP
	b.Deliver(lb, frame(wire.TransportUD|wire.OpSendOnly, engine.GSIQKey, engine.MADSize))
	if b.WireStats("").UnknownQP != before+1 {
		t.Error("with no handler, a MAD to QP1 was not counted as for an unknown QP")
	}
	if handled != 0 {
		t.Errorf("the handler got %d datagrams it should not have", handled)
	}
}

// GSIRoute says whether SendGSI has a link between two GIDs: from one of
// the host's link GIDs to any address of the same family, and nothing
// from a GID the host has not, or across families.
func TestGSIRoute(t *testing.T) {
	a, _, _, _ := gsiHosts(t)
	for _, tt := range []struct {
		src, dst string
		ok       bool
	}{
		{"::ffff:10.0.0.1", "::ffff:10.0.0.2", true},
		{"::ffff:10.0.0.9", "::ffff:10.0.0.2", false},
		{"::ffff:10.0.0.1", "fe80::2", false},
	} {
		err := a.GSIRoute(gid(tt.src), gid(tt.dst))
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, engine.ErrNoRoute)) {
			t.Errorf("GSIRoute(%s, %s) = %v, want a route: %v", tt.src, tt.dst, err, tt.ok)
		}
	}
}
