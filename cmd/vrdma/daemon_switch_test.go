package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/pki"
)

// switchPKI makes a CA and certificates for hosts in a new directory, as
// `vrdma switch ca init` and `vrdma host cert` do: the Nth host's lists
// 127.0.0.N, where the tests put it.
func switchPKI(t testing.TB, hosts ...string) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.InitCA(dir, daemon.DefaultSwitch)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts {
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		if err := ca.IssueHost(dir, pki.HostSpec{Name: h, IPs: []netip.Addr{ip}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDaemonSwitchFlags(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		usage   bool   // a usage error
		errText string // the error says this ("" = no error)
		check   func(t *testing.T, f *daemonSwitchFlags)
	}{
		{name: "defaults: an embedded switch", check: func(t *testing.T, f *daemonSwitchFlags) {
			c, _, _ := f.config()
			if !c.Enable || len(c.Endpoints) != 0 || c.Member != nil || c.Insecure {
				t.Errorf("config %+v: want the switch on, embedded, no certificates, not insecure", c)
			}
		}},
		{name: "no switch", args: []string{"--no-switch"}, check: func(t *testing.T, f *daemonSwitchFlags) {
			if c, _, _ := f.config(); c.Enable {
				t.Error("--no-switch left the switch on")
			}
		}},
		{name: "insecure", args: []string{"--insecure"}, check: func(t *testing.T, f *daemonSwitchFlags) {
			if c, _, _ := f.config(); !c.Insecure {
				t.Error("--insecure did not make it insecure")
			}
		}},
		{name: "endpoint not a URL", args: []string{"--etcd-endpoints", "10.0.0.1:2379"}, usage: true, errText: "is not a URL"},
		{name: "endpoints and an embedded member", args: []string{"--etcd-endpoints", "http://10.0.0.1:2379", "--etcd-peer-url", "http://10.0.0.2:2380"}, usage: true, errText: "one or the other"},
		{name: "priority out of range", args: []string{"--sm-priority", "16"}, usage: true, errText: "0..15"},
		{name: "bad channel address", args: []string{"--tcp-addr", "10.0.0.300"}, usage: true, errText: "not an IP address"},
		{name: "etcd TLS without endpoints", args: []string{"--etcd-cert", junk}, usage: true, errText: "are for --etcd-endpoints"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := switchFlags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			_, _, err := f.config()
			switch {
			case c.errText == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case c.errText != "" && (err == nil || !strings.Contains(err.Error(), c.errText)):
				t.Fatalf("error %v, want one saying %q", err, c.errText)
			case c.errText != "" && errors.Is(err, errUsage) != c.usage:
				t.Fatalf("error %v: usage error %v, want %v", err, errors.Is(err, errUsage), c.usage)
			}
			if c.check != nil {
				c.check(t, f)
			}
		})
	}
}

// Two daemons on one switch whose TCP channel runs mutual TLS with the
// certificates --pki loads: every check of the demo holds over it.
func TestTCPChannelTLS(t *testing.T) {
	dir := t.TempDir()
	pkiDir := switchPKI(t, "tls-host1", "tls-host2")
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	f := switchFlags(fs)
	if err := fs.Parse([]string{"--pki", pkiDir}); err != nil {
		t.Fatal(err)
	}
	sw, _, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	var hosts [2]*daemon.Daemon
	for i := range hosts {
		c := sw
		if c.Member, err = f.member("", fmt.Sprint("tls-host", i+1)); err != nil {
			t.Fatal(err)
		}
		c.HostTag = fmt.Sprint("tls", i+1)
		c.TCPListen = fmt.Sprintf("127.0.0.%d:0", i+1)
		c.TCPAddrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})}
		if i > 0 {
			c.Endpoints = hosts[0].SwitchEndpoints()
		}
		d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, fmt.Sprintf("d%d.sock", i)), HostName: fmt.Sprint("tls-host", i+1), Switch: c})
		if err != nil {
			t.Fatal(err)
		}
		go d.Serve()
		t.Cleanup(func() { d.Close() })
		hosts[i] = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, other := range []string{"tls-host2", "tls-host1"} { // each host's view of the other
		if err := waitPath(ctx, hosts[i].SocketPath(), other, "tcp:"); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	if err := runDemoPass(ctx, &out, hosts[0].SocketPath(), hosts[1].SocketPath(), 0); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "all 9 checks held") || !strings.Contains(out.String(), "path tcp:") {
		t.Fatalf("checks over the TLS channel:\n%s", out.String())
	}
}
