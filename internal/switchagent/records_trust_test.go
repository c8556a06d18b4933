package switchagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pki"
)

// A member of the switch — a host with a valid certificate, its daemon
// modified or its key stolen — against another host's record: the
// attacks an outside review found (a member claimed host2's address in its
// own record and got host2's frames; deleted host2's record and host1
// forgot host2). The member writes through host1's etcd client: etcd lets
// any member's client write any key, so whose client it is does not
// matter.

// member3 is host3: a member of the switch (its certificate is valid)
// whose daemon is modified — it writes what records it likes through its
// etcd client, which etcd lets it do for any key. record is host3's own
// record as an honest daemon would write it, addrs its addresses.
func member3(t *testing.T, dir string, addrs ...string) (*pki.Member, fabric.Host) {
	t.Helper()
	m, err := pki.LoadMember(dir, "host3")
	if err != nil {
		t.Fatal(err)
	}
	return m, fabric.Host{Name: "host3", Identity: fabric.Identity{MachineID: "m3", BootID: "b3"}, Addrs: addrs,
		Uplinks:     []fabric.Uplink{{Name: TCPLinkName, Kind: fabric.UplinkTCP, State: fabric.UplinkUp}},
		TCPEndpoint: "127.0.0.3:4792", CMEndpoint: "127.0.0.3:4793", Cert: m.CertPEM()}
}

// hostNamed is the record of a host as a's table has it.
func (a *Agent) hostNamed(name string) (fabric.Host, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.hosts[name]
	return h, ok
}

// writeAs signs h with m's key (if m) and puts it at host h.Name's key
// with a's etcd client, as a member may: etcd checks only that a client
// has a certificate of the switch.
func writeAs(t *testing.T, a *Agent, m *pki.Member, h fabric.Host) {
	t.Helper()
	h.Sig = ""
	if m != nil {
		data, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if h.Sig, err = m.Sign(data); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.fab.Store().Put(ctx, "/vrdma/"+a.cfg.Name+"/hosts/"+h.Name, b, fabric.NoLease); err != nil {
		t.Fatal(err)
	}
}

// TestMemberCannotClaimAnotherHostsAddress: host3 signs a record of its
// own that lists host2's address. host1 takes only the addresses host3's
// certificate lists: host2's address stays host2's in the route table, in
// the CM's resolver and in the authorizer, which refuses host3 announcing
// it.
func TestMemberCannotClaimAnotherHostsAddress(t *testing.T) {
	dir := pkiFor(t, "host1", "host2", "host3")
	as := pair(t, dir)
	h1 := as[0]
	h2addr := netip.MustParseAddr("127.0.0.2")
	m3, rec := member3(t, dir, "127.0.0.3", h2addr.String())
	writeAs(t, h1, m3, rec)
	waitUntil(t, "host1 has host3's record", func() bool {
		_, ok := h1.hostNamed("host3")
		return ok
	})
	h, _ := h1.hostNamed("host3")
	if contains(h.Addrs, h2addr.String()) || !contains(h.Addrs, "127.0.0.3") {
		t.Errorf("host1 took addresses %v from host3's record, want only 127.0.0.3", h.Addrs)
	}
	if ep, ok := h1.peerEndpoint(h2addr); !ok || ep.Identity != "host2" {
		t.Errorf("host2's address routes to %+v, want host2", ep)
	}
	if got, ok := h1.hostWithAddr(h2addr); !ok || got.Name != "host2" {
		t.Errorf("the CM's resolver finds host2's address at %q, want host2", got.Name)
	}
	if id, err := h1.Authorize(admit.Peer{Remote: netip.MustParseAddrPort("127.0.0.3:5000"), Chain: leaf(t, dir, "host3"),
		Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.3"), h2addr}}); err == nil {
		t.Errorf("host1 let host3 announce host2's address (as %q)", id)
	}
}

// TestAddressOfTwoCertificatesRoutesToNeither: a CA that issued host3 a
// certificate listing host2's address too (a mistake) makes that address
// contested: it routes to neither host.
func TestAddressOfTwoCertificatesRoutesToNeither(t *testing.T) {
	dir := pkiFor(t, "host1", "host2")
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	h2addr := netip.MustParseAddr("127.0.0.2")
	if err := ca.IssueHost(dir, pki.HostSpec{Name: "host3", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.3"), h2addr}}); err != nil {
		t.Fatal(err)
	}
	as := pair(t, dir)
	h1 := as[0]
	m3, rec := member3(t, dir, "127.0.0.3", h2addr.String())
	writeAs(t, h1, m3, rec)
	waitUntil(t, "host2's address routes to nobody", func() bool {
		_, ok := h1.peerEndpoint(h2addr)
		return !ok
	})
	if _, ok := h1.hostWithAddr(h2addr); ok {
		t.Error("the CM's resolver finds a contested address")
	}
	if ep, ok := h1.peerEndpoint(netip.MustParseAddr("127.0.0.3")); !ok || ep.Identity != "host3" {
		t.Errorf("host3's own address routes to %+v, want host3", ep)
	}
}

// TestForgedRecordIsRefused: host3 writes host2's record, pointing its
// endpoints at itself — unsigned, signed with host3's key under host2's
// certificate, and under its own certificate. host1 refuses each and keeps
// host2's own record; host2 writes its record again.
func TestForgedRecordIsRefused(t *testing.T) {
	dir := pkiFor(t, "host1", "host2", "host3")
	as := pair(t, dir)
	h1, h2 := as[0], as[1]
	real, _ := h1.hostNamed("host2")
	m3, _ := member3(t, dir)
	m2, err := pki.LoadMember(dir, "host2")
	if err != nil {
		t.Fatal(err)
	}
	forgeries := []struct {
		name string
		cert string
		key  *pki.Member
	}{
		{"unsigned", "", nil},
		{"host2's certificate, host3's key", m2.CertPEM(), m3},
		{"host3's certificate", m3.CertPEM(), m3},
	}
	for _, f := range forgeries {
		before := h1.refused.Load()
		healed := h2.healed.Load()
		forged := real
		forged.TCPEndpoint, forged.CMEndpoint = "127.0.0.3:4792", "127.0.0.3:4793"
		forged.Cert = f.cert
		writeAs(t, h1, f.key, forged)
		waitUntil(t, fmt.Sprintf("%s: host1 refuses the forgery", f.name), func() bool { return h1.refused.Load() > before })
		if h, _ := h1.hostNamed("host2"); h.TCPEndpoint != real.TCPEndpoint {
			t.Errorf("%s: host1 takes host2's channel at %s, want %s", f.name, h.TCPEndpoint, real.TCPEndpoint)
		}
		waitUntil(t, fmt.Sprintf("%s: host2 writes its record again", f.name), func() bool { return h2.healed.Load() > healed })
	}
}

// TestDeletedRecordIsWrittenAgain: host3 deletes host2's record; host2
// writes it again, and host1 still has host2.
func TestDeletedRecordIsWrittenAgain(t *testing.T) {
	dir := pkiFor(t, "host1", "host2")
	as := pair(t, dir)
	h1, h2 := as[0], as[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h1.fab.DeregisterHost(ctx, "host2"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "host2 writes its record again", func() bool {
		_, err := h1.fab.Host(ctx, "host2")
		return err == nil && h2.healed.Load() > 0
	})
	if _, ok := h1.hostNamed("host2"); !ok {
		t.Error("host1 forgot host2")
	}
}
