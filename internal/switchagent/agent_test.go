package switchagent

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/fabric"
)

// TestNewRefuses: New says what is wrong with a Config before anything is
// started.
func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		local Local
		why   string
	}{
		{"priority too high", Config{SMPriority: fabric.MaxPriority + 1}, Local{HostName: "h", Host: &fakeHost{}}, "give one between 0 and 15"},
		{"priority negative", Config{SMPriority: -1}, Local{HostName: "h", Host: &fakeHost{}}, "give one between 0 and 15"},
		{"no host", Config{}, Local{HostName: "h"}, "Local.Host is nil"},
	}
	for _, tt := range tests {
		a, err := New(tt.cfg, tt.local)
		if err == nil || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%s: New = %v, %v; want an error saying %q", tt.name, a, err, tt.why)
		}
	}
}

// TestNewDefaults: the switch's name and the lease's TTL have defaults.
func TestNewDefaults(t *testing.T) {
	a, err := New(Config{TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, Local{HostName: "h", Host: &fakeHost{}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != DefaultSwitch || a.cfg.HostTTL != fabric.DefaultHostTTL {
		t.Errorf("name %q, TTL %v; want %q, %v", a.Name(), a.cfg.HostTTL, DefaultSwitch, fabric.DefaultHostTTL)
	}
}

// TestNotJoined: an agent that has not joined yet authorizes nobody and
// resolves nothing (the daemon gives its connection manager these hooks
// before the agent joins).
func TestNotJoined(t *testing.T) {
	a, err := New(loopbackConfig(netip.MustParseAddr("127.0.0.1")), Local{HostName: "h", Host: newFakeHost(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h2 := netip.MustParseAddr("127.0.0.2")
	if _, err := a.Authorize(admit.Peer{Remote: netip.AddrPortFrom(h2, 5000)}); !errors.Is(err, ErrNotAHost) || !strings.Contains(err.Error(), "not joined") {
		t.Errorf("Authorize before Join: %v, want ErrNotAHost saying it has not joined", err)
	}
}
