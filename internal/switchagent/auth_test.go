package switchagent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/admit"
)

// TestAuthorizeByCertificate: with the switch's certificates, a peer is
// the live host its certificate names, and may announce that host's
// addresses only.
func TestAuthorizeByCertificate(t *testing.T) {
	dir := pkiFor(t, "host1", "host2", "ghost")
	as := pair(t, dir)
	a := as[0]
	h2 := netip.MustParseAddr("127.0.0.2")
	h1 := netip.MustParseAddr("127.0.0.1")
	foreign := pkiFor(t, "host2")
	from := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.9"), 40000) // any address: the certificate decides
	tests := []struct {
		name string
		peer admit.Peer
		want string // identity, or "" for a refusal
		why  string // the refusal says this
	}{
		{"host2 with its address", admit.Peer{Remote: from, Chain: leaf(t, dir, "host2"), Addrs: []netip.Addr{h2}}, "host2", ""},
		{"host2 announcing nothing (the CM)", admit.Peer{Remote: from, Chain: leaf(t, dir, "host2")}, "host2", ""},
		{"host2 announcing host1's address", admit.Peer{Remote: from, Chain: leaf(t, dir, "host2"), Addrs: []netip.Addr{h2, h1}}, "", "not one of its addresses"},
		{"a member with no live record", admit.Peer{Remote: from, Chain: leaf(t, dir, "ghost")}, "", "no live record"},
		{"this host's own certificate", admit.Peer{Remote: from, Chain: leaf(t, dir, "host1")}, "", "claims to be this host"},
		{"another switch's certificate for host2", admit.Peer{Remote: from, Chain: leaf(t, foreign, "host2"), Addrs: []netip.Addr{h2}}, "", "not a member"},
		{"no certificate", admit.Peer{Remote: from, Addrs: []netip.Addr{h2}}, "", "no certificate"},
		{"dialled for ghost, reached host2", admit.Peer{Remote: from, Outgoing: true, Endpoint: "127.0.0.2:1", Expected: "ghost", Chain: leaf(t, dir, "host2")}, "", "not ghost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authorize(tt.peer)
			switch {
			case tt.want != "" && (err != nil || id != tt.want):
				t.Fatalf("Authorize = %q, %v; want %q", id, err, tt.want)
			case tt.want == "" && err == nil:
				t.Fatalf("Authorize accepted it as %q", id)
			case tt.want == "" && !strings.Contains(err.Error(), tt.why):
				t.Fatalf("refusal %q does not say %q", err, tt.why)
			}
		})
	}
}

// TestAuthorizeByAddress: on an insecure switch a peer is the host whose
// record has the address it comes from.
func TestAuthorizeByAddress(t *testing.T) {
	as := pair(t, "")
	a := as[0]
	h2 := netip.MustParseAddr("127.0.0.2")
	if id, err := a.Authorize(admit.Peer{Remote: netip.AddrPortFrom(h2, 5000), Addrs: []netip.Addr{h2}}); err != nil || id != "host2" {
		t.Errorf("from host2's address: %q, %v; want host2", id, err)
	}
	if _, err := a.Authorize(admit.Peer{Remote: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.9"), 5000), Addrs: []netip.Addr{h2}}); !errors.Is(err, ErrNotAHost) {
		t.Errorf("from an address of no host, announcing host2's: %v, want ErrNotAHost", err)
	}
	if _, err := a.Authorize(admit.Peer{Remote: netip.AddrPortFrom(h2, 5000), Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}); !errors.Is(err, ErrNotAHost) {
		t.Errorf("host2 announcing host1's address: %v, want ErrNotAHost", err)
	}
}
