package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/pki"
)

// TestSwitchHooksReachTheCM: on a switch, the connection manager's
// authorizer and resolver are the switch agent's, and with the switch's
// certificates it runs mutual TLS. (How the agent authorizes and resolves
// is tested in package switchagent; that Config's CM fields reach the
// manager, in cm_config_test.go.)
func TestSwitchHooksReachTheCM(t *testing.T) {
	pkiDir := t.TempDir()
	ca, err := pki.InitCA(pkiDir, DefaultSwitch)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range []string{"host1", "host2", "ghost"} {
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)}) // where switchPair's hosts are
		if err := ca.IssueHost(pkiDir, pki.HostSpec{Name: h, IPs: []netip.Addr{ip}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	var ds [2]*Daemon
	for i := range ds {
		name := fmt.Sprint("host", i+1)
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		m, err := pki.LoadMember(pkiDir, name)
		if err != nil {
			t.Fatal(err)
		}
		sw := SwitchConfig{Enable: true, HostTag: name, TCPListen: ip.String() + ":0", TCPAddrs: []netip.Addr{ip}, Member: m,
			HostTTL: 2 * time.Second, Grace: time.Second}
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
	cfg := ds[0].cfg
	if cfg.CMResolvePeer == nil || cfg.CMAuthorize == nil || cfg.CMTLS == nil {
		t.Fatalf("the CM's hooks: resolver %v, authorizer %v, TLS %v: want all three", cfg.CMResolvePeer != nil, cfg.CMAuthorize != nil, cfg.CMTLS != nil)
	}
	// host1 learns host2 from the switch a moment after host2 joins (a
	// hang guard, not a timing check).
	deadline := time.Now().Add(30 * time.Second)
	ep, err := cfg.CMResolvePeer(netip.MustParseAddr("127.0.0.2"))
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		ep, err = cfg.CMResolvePeer(netip.MustParseAddr("127.0.0.2"))
	}
	if want := ds[1].CMAddr().String(); err != nil || ep.Addr != want || ep.Identity != "host2" {
		t.Errorf("the CM resolves host2's address to %+v, %v; want %s at host2", ep, err, want)
	}
	chain := func(host string) []*x509.Certificate {
		m, err := pki.LoadMember(pkiDir, host)
		if err != nil {
			t.Fatal(err)
		}
		return []*x509.Certificate{m.Leaf}
	}
	from := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), 40000)
	if id, err := cfg.CMAuthorize(admit.Peer{Remote: from, Chain: chain("host2")}); err != nil || id != "host2" {
		t.Errorf("the CM's authorizer on host2's certificate: %q, %v; want host2", id, err)
	}
	if _, err := cfg.CMAuthorize(admit.Peer{Remote: from, Chain: chain("ghost")}); !errors.Is(err, ErrNotAHost) {
		t.Errorf("the CM's authorizer on a member with no live record: %v; want ErrNotAHost", err)
	}
	if cfg.CMTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("the CM's TLS asks client certificates %v; want them required and verified", cfg.CMTLS.ClientAuth)
	}
}
