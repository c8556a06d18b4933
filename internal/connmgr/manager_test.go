package connmgr_test

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/connmgr"
)

// New refuses a config it cannot run, saying what to change; ListenOff
// runs no listener.
func TestCMNewConfig(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	h := newHost(t)
	tests := []struct {
		name string
		cfg  connmgr.Config
		want string // "" runs
	}{
		{"off", connmgr.Config{Listen: connmgr.ListenOff, Host: h}, ""},
		{"address taken", connmgr.Config{Listen: taken.Addr().String(), Host: h},
			"connection manager: listen on " + taken.Addr().String()},
		{"no host", connmgr.Config{Listen: connmgr.ListenOff}, "Config.Host is nil"},
		{"negative limits", connmgr.Config{Listen: connmgr.ListenOff, Host: h, Limits: connmgr.Limits{PerSource: -1}},
			"negative CMLimits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := connmgr.New(tt.cfg)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Addr() != nil {
				t.Fatalf("listening on %v when off", m.Addr())
			}
		})
	}
}

func TestCMDefaultResolve(t *testing.T) {
	if _, err := connmgr.DefaultResolve(netip.MustParseAddr("fe80::1")); err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Fatalf("a link-local address resolved: %v", err)
	}
	if ep, err := connmgr.DefaultResolve(netip.MustParseAddr("192.0.2.1")); err != nil || ep != "192.0.2.1:4793" {
		t.Fatalf("192.0.2.1 resolves to %q, %v", ep, err)
	}
	ep, err := connmgr.Resolver(connmgr.DefaultResolve).Endpoints()(netip.MustParseAddr("192.0.2.1"))
	if err != nil || ep.Addr != "192.0.2.1:4793" || ep.Identity != "" {
		t.Fatalf("as a PeerResolver: %+v, %v", ep, err)
	}
}
