package daemon

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/pki"
)

// switchPair starts two daemons on one switch (the second joins the first's
// embedded etcd), host1 on 127.0.0.1 and host2 on 127.0.0.2, with the
// switch's certificates from pkiDir, or none (insecure) if it is "".
func switchPair(t *testing.T, pkiDir string) [2]*Daemon {
	t.Helper()
	dir := t.TempDir()
	var ds [2]*Daemon
	for i := range ds {
		name := fmt.Sprint("host", i+1)
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		sw := SwitchConfig{Enable: true, HostTag: name, TCPListen: ip.String() + ":0", TCPAddrs: []netip.Addr{ip},
			HostTTL: 2 * time.Second, Grace: time.Second}
		if pkiDir != "" {
			m, err := pki.LoadMember(pkiDir, name)
			if err != nil {
				t.Fatal(err)
			}
			sw.Member = m
		}
		if i > 0 {
			sw.Endpoints = ds[0].SwitchEndpoints()
		}
		d, err := New(Config{SocketPath: filepath.Join(dir, name+".sock"), HostName: name, CMListen: ip.String() + ":0", Switch: sw})
		if err != nil {
			t.Fatal(err)
		}
		go d.Serve()
		t.Cleanup(func() { d.Close() })
		ds[i] = d
	}
	for _, d := range ds {
		waitUntil(t, "both hosts are on the switch", func() bool {
			d.sw.mu.Lock()
			defer d.sw.mu.Unlock()
			return len(d.sw.hosts) == 2
		})
	}
	return ds
}

// pkiFor makes a switch CA and certificates for hosts in a new directory.
func pkiFor(t *testing.T, hosts ...string) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.InitCA(dir, "vrdma")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if err := ca.IssueHost(dir, pki.HostSpec{Name: h}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func leaf(t *testing.T, dir, host string) []*x509.Certificate {
	t.Helper()
	m, err := pki.LoadMember(dir, host)
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{m.Leaf}
}

// TestAuthorizePeerByCertificate: with the switch's certificates, a peer
// is the live host its certificate names, and may announce that host's
// addresses only.
func TestAuthorizePeerByCertificate(t *testing.T) {
	dir := pkiFor(t, "host1", "host2", "ghost")
	ds := switchPair(t, dir)
	d := ds[0]
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
			id, err := d.authorizePeer(tt.peer)
			switch {
			case tt.want != "" && (err != nil || id != tt.want):
				t.Fatalf("authorizePeer = %q, %v; want %q", id, err, tt.want)
			case tt.want == "" && err == nil:
				t.Fatalf("authorizePeer accepted it as %q", id)
			case tt.want == "" && !strings.Contains(err.Error(), tt.why):
				t.Fatalf("refusal %q does not say %q", err, tt.why)
			}
		})
	}
}

// TestAuthorizePeerByAddress: on an insecure switch a peer is the host
// whose record has the address it comes from.
func TestAuthorizePeerByAddress(t *testing.T) {
	ds := switchPair(t, "")
	d := ds[0]
	h2 := netip.MustParseAddr("127.0.0.2")
	if id, err := d.authorizePeer(admit.Peer{Remote: netip.AddrPortFrom(h2, 5000), Addrs: []netip.Addr{h2}}); err != nil || id != "host2" {
		t.Errorf("from host2's address: %q, %v; want host2", id, err)
	}
	if _, err := d.authorizePeer(admit.Peer{Remote: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.9"), 5000), Addrs: []netip.Addr{h2}}); !errors.Is(err, ErrNotAHost) {
		t.Errorf("from an address of no host, announcing host2's: %v, want ErrNotAHost", err)
	}
	if _, err := d.authorizePeer(admit.Peer{Remote: netip.AddrPortFrom(h2, 5000), Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}); !errors.Is(err, ErrNotAHost) {
		t.Errorf("host2 announcing host1's address: %v, want ErrNotAHost", err)
	}
}

// TestResolveCMPeer: the CM finds a host's connection manager, and the
// host's name, by any of its addresses.
func TestResolveCMPeer(t *testing.T) {
	ds := switchPair(t, "")
	ep, err := ds[0].resolveCMPeer(netip.MustParseAddr("127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if want := ds[1].CMAddr().String(); ep.Addr != want || ep.Identity != "host2" {
		t.Errorf("resolved %+v, want %s at host2", ep, want)
	}
	if _, err := ds[0].resolveCMPeer(netip.MustParseAddr("192.0.2.77")); err == nil || !strings.Contains(err.Error(), "no host of switch") {
		t.Errorf("an address of no host: %v", err)
	}
}

// TestListenPolicy: listeners beyond loopback need the switch's
// certificates or Insecure; the defaults stay on loopback on a switch of
// one host.
func TestListenPolicy(t *testing.T) {
	dir := t.TempDir()
	d, err := New(Config{SocketPath: filepath.Join(dir, "a.sock"), HostName: "a", Switch: SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	defer d.Close()
	switch a := d.CMAddr(); {
	case a == nil:
		t.Logf("the CM's default port is taken here (%s): only its address is checked", d.cfg.CMListen)
		if host, _, _ := net.SplitHostPort(d.cfg.CMListen); host != "127.0.0.1" {
			t.Errorf("a switch of one host: CM to listen on %s, want loopback", d.cfg.CMListen)
		}
	case !netip.MustParseAddrPort(a.String()).Addr().IsLoopback():
		t.Errorf("a switch of one host: CM listens on %s, want loopback", a)
	}
	beyond := []Config{
		{Switch: SwitchConfig{Enable: true, TCPListen: "0.0.0.0:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, CMListen: "off"},
		{Switch: SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, CMListen: "192.0.2.1:4793"},
		{CMListen: "[::]:0"},
		{Switch: SwitchConfig{Enable: true, Endpoints: d.SwitchEndpoints(), TCPAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}, CMListen: "off"},
	}
	for i, c := range beyond {
		c.SocketPath, c.HostName = filepath.Join(dir, fmt.Sprint(i, ".sock")), fmt.Sprint("b", i)
		d2, err := New(c)
		if err == nil {
			d2.Close()
			t.Errorf("case %d: a daemon listening beyond loopback without certificates started", i)
			continue
		}
		if !errors.Is(err, ErrInsecureListener) {
			t.Errorf("case %d: %v, want ErrInsecureListener", i, err)
		}
	}
}
