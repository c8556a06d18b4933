package vrdma_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// ResolveRoute (rdma_resolve_addr and rdma_resolve_route): the source
// address and GID index a Dial would use, the port's MTU, whether the
// peer is on this host; an address no link reaches is ErrNotFound.
func TestCMResolveRoute(t *testing.T) {
	t.Run("same host", func(t *testing.T) {
		e := sameHostEnv(t)
		dst := gidAddr(t, e.b, 0)
		r, err := e.a.ResolveRoute(dst)
		if err != nil {
			t.Fatal(err)
		}
		src, err := e.a.GID(r.GIDIndex)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Local || r.SrcAddr != netip.AddrFrom16(src).Unmap() || r.SrcAddr.Is4() != dst.Is4() || r.MTU != portMTU(t, e.a) {
			t.Fatalf("route to %v on this host: %+v (GID %d is %v)", dst, r, r.GIDIndex, src)
		}
	})
	t.Run("two hosts", func(t *testing.T) {
		h := newCMHosts(t, ibv.MTU1024)
		e := h.env(t)
		r, err := e.a.ResolveRoute(h.addrs[1])
		if err != nil {
			t.Fatal(err)
		}
		if r.Local || r.SrcAddr != h.addrs[0] || r.MTU != ibv.MTU1024 {
			t.Fatalf("route to %v from host %v: %+v", h.addrs[1], h.addrs[0], r)
		}
		// What Dial then uses.
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		ca, _ := cmConnect(t, a, b, h.addrs[1])
		if ca.LocalAddr() != r.SrcAddr {
			t.Fatalf("Dial left from %v, ResolveRoute said %v", ca.LocalAddr(), r.SrcAddr)
		}
		for _, bad := range []netip.Addr{netip.MustParseAddr("2001:db8::1"), {}} {
			_, err := e.a.ResolveRoute(bad)
			if err == nil || (!errors.Is(err, vrdma.ErrNotFound) && !errors.Is(err, vrdma.ErrInvalidArgument)) {
				t.Errorf("route to %v: %v, want not found (or invalid)", bad, err)
			}
		}
	})
}
