package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
)

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

// TestNoCMListenerWithoutASwitch: a daemon on no switch has nobody to
// check a CM peer against, so its connection manager listens nowhere
// unless told (an outside review held 3,000 idle loopback connections on
// one): connections between this host's adapters still work.
func TestNoCMListenerWithoutASwitch(t *testing.T) {
	dir := t.TempDir()
	d, err := New(Config{SocketPath: filepath.Join(dir, "a.sock"), HostName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	defer d.Close()
	if a := d.CMAddr(); a != nil {
		t.Errorf("a daemon on no switch listens for CM connections on %s", a)
	}
}
