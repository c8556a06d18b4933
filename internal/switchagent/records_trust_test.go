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
// record as an honest (older: it has a CM endpoint) daemon would write it,
// addrs its addresses.
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

// writeAs signs h with m's key (if m) for a lease of its own and puts it
// at key (h.Name's if ""), under that lease, with a's etcd client, as a
// member may: etcd checks only that a client has a certificate of the
// switch.
func writeAs(t *testing.T, a *Agent, m *pki.Member, h fabric.Host, key ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := a.fab.Store().NewSession(ctx, fabric.MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	h.Sig, h.Lease = "", sess.Lease()
	if m != nil {
		data, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if h.Sig, err = m.Sign(data); err != nil {
			t.Fatal(err)
		}
	}
	put(t, a, h, sess.Lease(), key...)
}

// put puts h as it is at key (h.Name's if "") under lease.
func put(t *testing.T, a *Agent, h fabric.Host, lease fabric.LeaseID, key ...string) {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	k := h.Name
	if len(key) > 0 {
		k = key[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.fab.Store().Put(ctx, "/vrdma/"+a.cfg.Name+"/hosts/"+k, b, lease); err != nil {
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

// A second review found that a member could still deny service through
// records the daemons refused, and replay or re-key signed ones.

// junkOf is host's record with another machine's identity, unsigned.
func junkOf(h fabric.Host) fabric.Host {
	h.Identity = fabric.Identity{MachineID: "evil", BootID: "evil"}
	h.Sig, h.Cert = "", ""
	return h
}

// TestUnsignedRecordOfAnotherIdentity: an unsigned record of another
// machine put (without a lease) under host2's name used to make every
// daemon drop host2 at once (a new incarnation) and fail its QPs, and kept
// host2 from writing its record again. Now host1 keeps host2 and fails
// nothing, and host2 writes its record over the junk.
func TestUnsignedRecordOfAnotherIdentity(t *testing.T) {
	dir := pkiFor(t, "host1", "host2")
	f1 := newFakeHost(t)
	as := pair(t, dir, f1)
	h1, h2 := as[0], as[1]
	real, _ := h1.hostNamed("host2")
	put(t, h1, junkOf(real), fabric.NoLease)
	waitUntil(t, "host2 writes its record over the junk", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := h1.fab.Host(ctx, "host2")
		return err == nil && got.Identity == real.Identity && h2.healed.Load() > 0
	})
	time.Sleep(2 * h1.cfg.Grace) // past any grace a HostGone would wait out
	if _, ok := h1.hostNamed("host2"); !ok {
		t.Error("host1 dropped host2")
	}
	if f1.failedFor(netip.MustParseAddr("127.0.0.2")) {
		t.Error("host1 failed host2's QPs")
	}
}

// TestJunkRecordFailsNobodysQPs: a record under a name of nobody's,
// listing host2's address, then rewritten as another machine (a new
// incarnation): no daemon takes it, so none fails host2's QPs.
func TestJunkRecordFailsNobodysQPs(t *testing.T) {
	dir := pkiFor(t, "host1", "host2")
	f1 := newFakeHost(t)
	as := pair(t, dir, f1)
	h1 := as[0]
	junk, _ := h1.hostNamed("host2")
	junk.Name = "junk"
	put(t, h1, junkOf(junk), fabric.NoLease)
	junk.Identity.MachineID = "evil2"
	put(t, h1, junkOf(junk), fabric.NoLease)
	waitUntil(t, "host1 refused both", func() bool { return h1.refused.Load() >= 2 })
	if f1.failedFor(netip.MustParseAddr("127.0.0.2")) {
		t.Error("host1 failed host2's QPs for a record it refused")
	}
}

// TestSignedRecordReplayed: host2's own signed record copied under another
// name, and under host2's name with another lease (one that would outlive
// host2): host1 takes neither, deleting the copy makes no one gone, and
// host2 writes its record again.
func TestSignedRecordReplayed(t *testing.T) {
	dir := pkiFor(t, "host1", "host2")
	f1 := newFakeHost(t)
	as := pair(t, dir, f1)
	h1, h2 := as[0], as[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := h1.fab.LeasedHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var signed fabric.Host
	for _, r := range recs {
		if r.Host.Name == "host2" {
			signed = r.Host
		}
	}
	before := h1.refused.Load()
	put(t, h1, signed, signed.Lease, "zzz")
	waitUntil(t, "host1 refuses host2's record under another name", func() bool { return h1.refused.Load() > before })
	if _, err := h1.fab.Store().Delete(ctx, "/vrdma/"+h1.cfg.Name+"/hosts/zzz"); err != nil {
		t.Fatal(err)
	}
	healed := h2.healed.Load()
	put(t, h1, signed, fabric.NoLease) // under host2's name, to outlive it
	waitUntil(t, "host1 refuses the copy and host2 writes its record again", func() bool {
		return h1.refused.Load() > before+1 && h2.healed.Load() > healed
	})
	time.Sleep(2 * h1.cfg.Grace)
	if _, ok := h1.hostNamed("host2"); !ok || f1.failedFor(netip.MustParseAddr("127.0.0.2")) {
		t.Errorf("host1 lost host2 (present %v) or failed its QPs", ok)
	}
}

// TestLinkLocalAddressesProveNothing: host3 signs a record of its own that
// claims a link-local IPv4 address and, on an RDMA uplink, another host's
// link-local GID. The IPv4 one is dropped; the GID routes RDMA at most,
// and neither the TCP channel's resolver nor the authorizer takes it as
// host3's.
func TestLinkLocalAddressesProveNothing(t *testing.T) {
	dir := pkiFor(t, "host1", "host2", "host3")
	as := pair(t, dir)
	h1 := as[0]
	m3, rec := member3(t, dir, "127.0.0.3", "169.254.7.7")
	rec.Uplinks = append(rec.Uplinks, fabric.Uplink{Name: "rxe0", Kind: fabric.UplinkRXE, RoCEVersion: 2, MTU: 1024,
		GIDs: []string{"fe80::2", "::ffff:127.0.0.3"}, State: fabric.UplinkUp})
	writeAs(t, h1, m3, rec)
	waitUntil(t, "host1 has host3", func() bool { _, ok := h1.hostNamed("host3"); return ok })
	h, _ := h1.hostNamed("host3")
	if contains(h.Addrs, "169.254.7.7") {
		t.Error("host1 took a link-local IPv4 address from host3's record")
	}
	ll := netip.MustParseAddr("fe80::2")
	if _, ok := h1.peerEndpoint(ll); ok {
		t.Error("the TCP channel resolves a link-local GID to host3")
	}
	if _, ok := h1.hostWithAddr(ll); ok {
		t.Error("the host lookup finds a link-local GID")
	}
	if id, err := h1.Authorize(admit.Peer{Remote: netip.MustParseAddrPort("127.0.0.3:5000"), Chain: leaf(t, dir, "host3"),
		Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.3"), ll}}); err == nil {
		t.Errorf("host1 let host3 announce a link-local GID (as %q)", id)
	}
}

// TestHealingCoalesces: a burst of alterations of host2's record costs
// fewer rewrites than alterations, and host2's own record stands after.
func TestHealingCoalesces(t *testing.T) {
	dir := pkiFor(t, "host1", "host2")
	as := pair(t, dir)
	h1, h2 := as[0], as[1]
	real, _ := h1.hostNamed("host2")
	const burst = 50
	before := h2.healed.Load()
	for i := 0; i < burst; i++ {
		junk := real
		junk.TCPEndpoint = fmt.Sprintf("127.0.0.9:%d", 1000+i)
		put(t, h1, junk, fabric.NoLease)
	}
	waitUntil(t, "host2's own record stands", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		recs, err := h1.fab.LeasedHosts(ctx)
		if err != nil {
			return false
		}
		for _, r := range recs {
			if r.Host.Name == "host2" {
				_, err := h1.trusted(r.Host, r.Lease)
				return err == nil
			}
		}
		return false
	})
	rewrites := h2.healed.Load() - before
	t.Logf("%d alterations, %d rewrites", burst, rewrites)
	if rewrites >= burst {
		t.Errorf("%d rewrites for %d alterations: healing does not coalesce", rewrites, burst)
	}
}

// TestMembersAreProven: on a switch with certificates, the member set (the
// sources RoCEv2 packets may come from) holds another host's proven
// addresses and the link-local GIDs of its RDMA uplinks that are up, not
// a link-local GID on a down uplink.
func TestMembersAreProven(t *testing.T) {
	dir := pkiFor(t, "host1", "host2", "host3")
	as := pair(t, dir)
	h1 := as[0]
	m3, rec := member3(t, dir, "127.0.0.3")
	rec.Uplinks = append(rec.Uplinks,
		fabric.Uplink{Name: "rxe0", Kind: fabric.UplinkRXE, RoCEVersion: 2, MTU: 1024,
			GIDs: []string{"fe80::3", "::ffff:127.0.0.3"}, State: fabric.UplinkUp},
		fabric.Uplink{Name: "rxe1", Kind: fabric.UplinkRXE, RoCEVersion: 2, MTU: 1024,
			GIDs: []string{"fe80::66"}, State: fabric.UplinkDown})
	writeAs(t, h1, m3, rec)
	waitUntil(t, "host1 has host3", func() bool { _, ok := h1.hostNamed("host3"); return ok })
	for _, c := range []struct {
		addr   string
		member bool
	}{
		{"127.0.0.3", true},
		{"fe80::3", true}, // an up RDMA uplink's: RoCEv2 between members uses it
		{"fe80::66", false},
		{"127.0.0.9", false},
	} {
		if got := h1.isMember(netip.MustParseAddr(c.addr).As16()); got != c.member {
			t.Errorf("%s: member %v, want %v", c.addr, got, c.member)
		}
	}
}
