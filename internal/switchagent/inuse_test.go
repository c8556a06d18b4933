package switchagent

import (
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A daemon whose TCP channel's or embedded etcd member's port another
// program holds fails to join with an error that says so and names the
// flag that picks another address.
func TestPortInUseNamesTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	for _, tt := range []struct {
		name string
		edit func(*Config)
		flag string
	}{
		{"TCP channel", func(c *Config) { c.TCPListen = taken }, "--tcp-listen"},
		{"etcd client URL", func(c *Config) { c.Insecure, c.Embed.ClientURL = true, "http://"+taken }, "--etcd-client-url"},
		{"etcd peer URL", func(c *Config) { c.Embed.PeerURL = "http://" + taken }, "--etcd-peer-url"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loopbackConfig(netip.MustParseAddr("127.0.0.1"))
			tt.edit(&cfg)
			a, err := New(cfg, Local{HostName: "h1", StateDir: filepath.Join(t.TempDir(), "state"), Host: newFakeHost(t)})
			if err != nil {
				t.Fatal(err)
			}
			err = a.Join()
			a.Close()
			if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "another program uses the port; choose another with "+tt.flag) {
				t.Fatalf("joining with %s taken: %v; want address in use, naming %s", taken, err, tt.flag)
			}
		})
	}
}
