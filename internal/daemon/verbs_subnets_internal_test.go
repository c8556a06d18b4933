package daemon

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vrdma/vrdma/internal/verbs"
)

// TestNetdevSubnets: a verbs uplink's record lists the IP prefixes of the
// netdevs its GIDs belong to, masked and each once, leaving out link-local
// ones (they name no segment) and GIDs with no netdev.
func TestNetdevSubnets(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	idx := uint32(lo.Index)
	p := verbs.PortAttr{GIDs: []verbs.GIDEntry{{Index: 0, Ifindex: idx}, {Index: 1, Ifindex: idx}, {Index: 2}}}
	got := netdevSubnets(p)
	if !slices.Contains(got, netip.MustParsePrefix("127.0.0.0/8")) {
		t.Errorf("netdevSubnets = %v, want 127.0.0.0/8 among them", got)
	}
	for i, pr := range got {
		if pr != pr.Masked() || pr.Addr().IsLinkLocalUnicast() || slices.Contains(got[:i], pr) {
			t.Errorf("netdevSubnets = %v: %v is unmasked, link-local or listed twice", got, pr)
		}
	}
	if got := netdevSubnets(verbs.PortAttr{GIDs: []verbs.GIDEntry{{Index: 0}}}); len(got) != 0 {
		t.Errorf("netdevSubnets of GIDs with no netdev = %v, want none", got)
	}
}
