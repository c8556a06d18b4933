package vrdma_test

// The connection manager on a switch of three namespace hosts: a and b
// have a Soft-RoCE link, c has none, so c's CM MADs to a ride inside the
// TCP channel's packets and a's to b go over RoCEv2, whichever path the
// switch picks for the pair. Needs root; skipped otherwise.

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/netns"
)

func TestCMSwitchHosts(t *testing.T) {
	netns.Require(t)
	top := netns.New(t, 3)
	hosts := []*switchHost{
		{name: "a", h: top.Hosts[0], prio: 3},
		{name: "b", h: top.Hosts[1], prio: 2},
		{name: "c", h: top.Hosts[2], prio: 1},
	}
	certs := map[string]netip.Addr{}
	var members []string
	for _, s := range hosts {
		certs[s.name] = s.h.IPv4
		members = append(members, s.name+"=https://"+s.h.IPv4.String()+":2380")
	}
	pkiDir := netns.SwitchPKI(t, certs)
	for _, s := range hosts {
		s.dir, s.pki = filepath.Join(t.TempDir(), "etcd"), pkiDir
		s.start(t, strings.Join(members, ","))
	}
	a, b, c := hosts[0], hosts[1], hosts[2]
	a.d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", a.h.Iface)
	b.d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", b.h.Iface)
	awaitPaths(t, 60*time.Second, hosts, func(from, to *switchHost) pathWant {
		if from != c && to != c {
			return pathWant{"rdma", ""}
		}
		return pathWant{"tcp", ""}
	})
	a1, b1, c1 := openOn(t, a, "a1"), openOn(t, b, "b1"), openOn(t, c, "c1")
	for _, x := range []struct {
		name     string
		from, to *vrdma.Device
		addr     netip.Addr
		path     string
	}{
		{"a to b over RoCEv2", a1, b1, b.h.IPv4, "rdma"},
		{"c to a over the TCP channel", c1, a1, a.h.IPv4, "tcp"},
		{"a to c over the TCP channel", a1, c1, c.h.IPv4, "tcp"},
	} {
		t.Run(x.name, func(t *testing.T) {
			p, q := newSide(t, x.from, qpSpec{}), newSide(t, x.to, qpSpec{})
			cp, cq := cmConnect(t, p, q, x.addr)
			if got, reason := cp.Path(); got != x.path {
				t.Fatalf("path %q (%s), want %s", got, reason, x.path)
			}
			rcWorkload(t, p, q, 2)
			if err := cp.Disconnect(cmCtx(t), nil); err != nil {
				t.Fatal(err)
			}
			<-cq.Done()
		})
	}
}
