package engine

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/wire"
)

// tenantLink is a link that carries tenants (TenantLink) or not, and
// keeps the frames it is asked to send.
type tenantLink struct {
	groupLink
	carries bool
	mu      sync.Mutex
	sent    [][]byte
}

func (l *tenantLink) Name() string { return "t0" }
func (l *tenantLink) WriteBatch(f [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range f {
		l.sent = append(l.sent, append([]byte(nil), b...))
	}
	return len(f), nil
}
func (l *tenantLink) CarriesTenants() bool { return l.carries }

// mcastDatagram is a UD SEND to group g from 10.0.0.2, as a frame.
func mcastDatagram(g string) []byte {
	p := &wire.Packet{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr(g), TTL: 64, SrcPort: 49152,
		Opcode: wire.TransportUD | wire.OpSendOnly, PKey: DefaultPKey, DestQP: MulticastQPN, PSN: 1,
		DETH: wire.DETH{QKey: 0x01234567, SrcQP: 0x11}, Payload: []byte("hello")}
	return wire.Append(nil, p)
}

// TestMcastTenantsOnTheLink: on a link that carries tenants (the TCP
// channel), a multicast datagram reaches the QPs of its tagged tenant
// only (an untagged one those of no tenant); on a link that carries none
// (RoCEv2), one from outside the switch reaches every tenant's QPs in
// the group, one from another host of the switch none (its tagged copy
// comes on the channel), and a tagged frame is malformed
// (docs/design/multicast.md, "Tenants between hosts").
func TestMcastTenantsOnTheLink(t *testing.T) {
	const group = "239.1.2.3"
	for _, tc := range []struct {
		name    string
		carries bool
		tag     string // "" untagged
		fromSw  bool   // the source, 10.0.0.2, is another host of the switch's
		got     [2]uint64
		bad     uint64
	}{
		{"tenant link, tenant 1", true, "uid 1", true, [2]uint64{1, 0}, 0},
		{"tenant link, tenant 2", true, "uid 2", true, [2]uint64{0, 1}, 0},
		{"tenant link, another tenant", true, "uid 3", true, [2]uint64{0, 0}, 0},
		{"tenant link, untagged", true, "", true, [2]uint64{0, 0}, 0},
		{"RoCEv2 link, from outside the switch", false, "", false, [2]uint64{1, 1}, 0},
		{"RoCEv2 link, from a host of the switch", false, "", true, [2]uint64{0, 0}, 0},
		{"RoCEv2 link, tagged", false, "uid 1", false, [2]uint64{0, 0}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHost()
			t.Cleanup(h.Close)
			l := &tenantLink{carries: tc.carries}
			if err := h.AddLink(l); err != nil {
				t.Fatal(err)
			}
			h.SetSwitchHosts(func(g [16]byte) bool { return tc.fromSw && g == mgid("::ffff:10.0.0.2") })
			var ads [2]*Adapter
			for i, scope := range []string{"uid 1", "uid 2"} {
				ads[i] = NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 1, byte(i)}, false)
				h.AddAdapter(ads[i])
				q := udMember(t, ads[i], scope)
				if _, err := q.AttachMcast(mgid("::ffff:" + group)); err != nil {
					t.Fatal(err)
				}
			}
			var f []byte
			if tc.tag != "" {
				f = wire.AppendGroupTag(f, tc.tag)
			}
			f = append(f, mcastDatagram(group)...)
			h.Deliver(l, f)
			for i, a := range ads {
				if n := a.Counters.RxPackets.Load(); n != tc.got[i] {
					t.Errorf("tenant uid %d's adapter received %d datagrams, want %d", i+1, n, tc.got[i])
				}
			}
			if n := h.WireStats("t0").Malformed; n != tc.bad {
				t.Errorf("%d frames malformed, want %d", n, tc.bad)
			}
		})
	}
}

// udMember is a UD QP of scope on a, ready to receive (RTR).
func udMember(t *testing.T, a *Adapter, scope string) *QP {
	t.Helper()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	q, err := NewQP(QPConfig{PD: a.NewPD(), Type: abi.QPTypeUD, SendCQ: cq, RecvCQ: cq, Events: &events{}, Scope: scope,
		Caps: proto.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	for _, s := range []struct {
		attr qpstate.Attr
		mask qpstate.Mask
	}{
		{qpstate.Attr{State: abi.QPStateInit, PortNum: 1, QKey: 0x01234567}, qpstate.MaskState | qpstate.MaskPKeyIndex | qpstate.MaskPort | qpstate.MaskQKey},
		{qpstate.Attr{State: abi.QPStateRTR}, qpstate.MaskState},
	} {
		if _, err := q.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("UD QP to %v: %v", s.attr.State, err)
		}
	}
	return q
}

// TestTenantSource: a group datagram on the channel comes from the
// channel's routable address of the group's family, or for an IPv6 group
// from an IPv4 one in its mapped form; an IPv4 group has none on a
// channel with IPv6 addresses only.
func TestTenantSource(t *testing.T) {
	g := func(s ...string) [][16]byte {
		var out [][16]byte
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x).As16())
		}
		return out
	}
	for _, tc := range []struct {
		name string
		gids [][16]byte
		v4   bool
		want string // "" none
	}{
		{"IPv4 group", g("fe80::1", "fd00::1", "10.0.0.1"), true, "10.0.0.1"},
		{"IPv6 group", g("10.0.0.1", "fe80::1", "fd00::1"), false, "fd00::1"},
		{"IPv6 group, IPv4 channel", g("fe80::1", "10.0.0.1"), false, "::ffff:10.0.0.1"},
		{"IPv4 group, IPv6 channel", g("fe80::1", "fd00::1"), true, ""},
		{"link-local only", g("fe80::1"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, ok := tenantSource(tc.gids, tc.v4)
			if tc.want == "" {
				if ok {
					t.Fatalf("got %v, want none", src)
				}
				return
			}
			if !ok || src != netip.MustParseAddr(tc.want) {
				t.Fatalf("got %v %v, want %s", src, ok, tc.want)
			}
		})
	}
}
