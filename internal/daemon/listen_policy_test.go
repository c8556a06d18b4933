package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
)

// TestListenPolicy: the TCP channel's listener beyond loopback needs the
// switch's certificates or Insecure.
func TestListenPolicy(t *testing.T) {
	dir := t.TempDir()
	d, err := New(Config{SocketPath: filepath.Join(dir, "a.sock"), HostName: "a", Switch: SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	defer d.Close()
	beyond := []Config{
		{Switch: SwitchConfig{Enable: true, TCPListen: "0.0.0.0:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}},
		{Switch: SwitchConfig{Enable: true, Endpoints: d.SwitchEndpoints(), TCPAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}},
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
