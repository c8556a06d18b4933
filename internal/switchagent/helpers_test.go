package switchagent

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/pki"
)

// fakeHost is the daemon as an agent sees it, over a real engine host: it
// attaches the TCP channel, keeps the router the agent sets, and has the
// uplinks and the CM address a test gives it.
type fakeHost struct {
	eng *engine.Host

	mu       sync.Mutex
	uplinks  []Uplink
	router   engine.Router
	failed   []string     // FailPeers' reasons
	lidsSeen int          // LIDsChanged calls
	covered  []netip.Addr // of the addresses asked about (coveredProbe), those a FailPeers call covered
}

// coveredProbe are the addresses FailPeers calls are asked about: the test
// hosts' (127.0.0.1..3) and a link-local one.
var coveredProbe = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"),
	netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("fe80::2")}

// failedFor reports whether a FailPeers call covered addr.
func (h *fakeHost) failedFor(addr netip.Addr) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.covered {
		if a == addr {
			return true
		}
	}
	return false
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	h := &fakeHost{eng: engine.NewHost()}
	t.Cleanup(func() { h.eng.Close() })
	return h
}

func (h *fakeHost) SetRouter(r engine.Router) {
	h.mu.Lock()
	h.router = r
	h.mu.Unlock()
	h.eng.SetRouter(r)
}

func (h *fakeHost) SetMembers(m engine.Members) { h.eng.SetMembers(m) }

func (h *fakeHost) FailPeers(gone func(netip.Addr) bool, reason string) int {
	h.mu.Lock()
	h.failed = append(h.failed, reason)
	for _, a := range coveredProbe {
		if gone(a) {
			h.covered = append(h.covered, a)
		}
	}
	h.mu.Unlock()
	return h.eng.FailPeers(gone, reason)
}

func (h *fakeHost) AttachLink(l engine.Link) error {
	if err := h.eng.AddLink(l); err != nil {
		return err
	}
	go func() { _ = l.Serve(func(frame []byte) { h.eng.Deliver(l, frame) }) }()
	return nil
}

func (h *fakeHost) RemoveLink(name string) error { return h.eng.RemoveLink(name) }

func (h *fakeHost) Uplinks() []Uplink {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Uplink(nil), h.uplinks...)
}

func (h *fakeHost) LIDsChanged() {
	h.mu.Lock()
	h.lidsSeen++
	h.mu.Unlock()
}

// route asks the router the agent installed (false when there is none).
func (h *fakeHost) route(sgid, dgid netip.Addr) (engine.Route, bool) {
	h.mu.Lock()
	r := h.router
	h.mu.Unlock()
	if r == nil {
		return engine.Route{}, false
	}
	return r(sgid.As16(), dgid.As16())
}

// joined makes an agent for host name on h, joins it and leaves at the
// test's end.
func joined(t *testing.T, name string, cfg Config, h *fakeHost) *Agent {
	t.Helper()
	a, err := New(cfg, Local{HostName: name, StateDir: filepath.Join(t.TempDir(), "state"), Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Join(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// loopbackConfig is a switch on loopback address ip, its etcd embedded,
// with short leases.
func loopbackConfig(ip netip.Addr) Config {
	return Config{Enable: true, TCPListen: ip.String() + ":0", TCPAddrs: []netip.Addr{ip}, HostTTL: 2 * time.Second, Grace: time.Second}
}

// pair starts the agents of two hosts on one switch (the second joins the
// first's embedded etcd), host1 on 127.0.0.1 and host2 on 127.0.0.2, with
// the switch's certificates from pkiDir, or none (insecure) if it is "";
// hosts[i] are their fake hosts, if given. It returns once each sees both.
func pair(t *testing.T, pkiDir string, hosts ...*fakeHost) [2]*Agent {
	t.Helper()
	var as [2]*Agent
	for i := range as {
		name := fmt.Sprint("host", i+1)
		cfg := loopbackConfig(netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)}))
		cfg.HostTag = name
		if pkiDir != "" {
			m, err := pki.LoadMember(pkiDir, name)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Member = m
		}
		if i > 0 {
			cfg.Endpoints = as[0].Endpoints()
		}
		h := newFakeHost(t)
		if i < len(hosts) {
			h = hosts[i]
		}
		as[i] = joined(t, name, cfg, h)
	}
	for _, a := range as {
		waitUntil(t, "both hosts are on the switch", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.hosts) == 2
		})
	}
	return as
}

// waitUntil polls cond (a hang guard, not a timing check).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pkiFor makes a switch CA and certificates for hosts in a new directory.
func pkiFor(t *testing.T, hosts ...string) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.InitCA(dir, DefaultSwitch)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		// hostN lives on 127.0.0.N (switchPair): its certificate says so.
		var ips []netip.Addr
		var n int
		if _, err := fmt.Sscanf(h, "host%d", &n); err == nil {
			ips = append(ips, netip.AddrFrom4([4]byte{127, 0, 0, byte(n)}))
		}
		if err := ca.IssueHost(dir, pki.HostSpec{Name: h, IPs: ips}); err != nil {
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

func (h *fakeHost) McastGroups() []engine.McastGroup { return h.eng.McastGroups() }

func (h *fakeHost) SetMcastNotify(f func()) { h.eng.SetMcastNotify(f) }

func (h *fakeHost) SetSwitchHosts(f engine.Members) { h.eng.SetSwitchHosts(f) }
