package main

import (
	"context"
	"fmt"
	"net/netip"

	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"github.com/vrdma/vrdma/internal/daemon"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and 127.0.0.2
// and its key.
func writeCert(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vrdma"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func TestDaemonSwitchFlags(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
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
			if !c.Enable || len(c.Endpoints) != 0 || c.TCPTLS != nil {
				t.Errorf("config %+v: want the switch on, embedded, no TLS", c)
			}
		}},
		{name: "no switch", args: []string{"--no-switch"}, check: func(t *testing.T, f *daemonSwitchFlags) {
			if c, _, _ := f.config(); c.Enable {
				t.Error("--no-switch left the switch on")
			}
		}},
		{name: "mutual TLS on the channel", args: []string{"--tcp-cert", cert, "--tcp-key", key, "--tcp-cacert", cert}, check: func(t *testing.T, f *daemonSwitchFlags) {
			c, _, _ := f.config()
			if c.TCPTLS == nil || len(c.TCPTLS.Certificates) != 1 || c.TCPTLS.ClientCAs == nil || c.TCPTLS.RootCAs == nil {
				t.Errorf("TCPTLS %+v: want a certificate and the CA both ways", c.TCPTLS)
			}
		}},
		{name: "cert without key", args: []string{"--tcp-cert", cert}, usage: true, errText: "--tcp-cert and --tcp-key go together"},
		{name: "CA without a certificate", args: []string{"--tcp-cacert", cert}, usage: true, errText: "needs them"},
		{name: "a key that is not one", args: []string{"--tcp-cert", cert, "--tcp-key", junk}, errText: "--tcp-cert/--tcp-key"},
		{name: "a CA file without certificates", args: []string{"--tcp-cert", cert, "--tcp-key", key, "--tcp-cacert", junk}, errText: "holds no PEM certificate"},
		{name: "endpoint not a URL", args: []string{"--etcd-endpoints", "10.0.0.1:2379"}, usage: true, errText: "is not a URL"},
		{name: "endpoints and an embedded member", args: []string{"--etcd-endpoints", "http://10.0.0.1:2379", "--etcd-peer-url", "http://10.0.0.2:2380"}, usage: true, errText: "one or the other"},
		{name: "priority out of range", args: []string{"--sm-priority", "16"}, usage: true, errText: "0..15"},
		{name: "bad channel address", args: []string{"--tcp-addr", "10.0.0.300"}, usage: true, errText: "not an IP address"},
		{name: "etcd TLS without endpoints", args: []string{"--etcd-cert", cert}, usage: true, errText: "are for --etcd-endpoints"},
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
// certificates the flags load: every check of the demo holds over it.
func TestTCPChannelTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	f := switchFlags(fs)
	if err := fs.Parse([]string{"--tcp-cert", cert, "--tcp-key", key, "--tcp-cacert", cert}); err != nil {
		t.Fatal(err)
	}
	sw, _, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	var hosts [2]*daemon.Daemon
	for i := range hosts {
		c := sw
		c.HostTag = fmt.Sprint("tls", i+1)
		c.TCPListen = fmt.Sprintf("127.0.0.%d:0", i+1)
		c.TCPAddrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})}
		if i > 0 {
			c.Endpoints = hosts[0].SwitchEndpoints()
		}
		d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, fmt.Sprintf("d%d.sock", i)), HostName: fmt.Sprint("tls-host", i+1),
			CMListen: daemon.CMListenOff, Switch: c})
		if err != nil {
			t.Fatal(err)
		}
		go d.Serve()
		t.Cleanup(func() { d.Close() })
		hosts[i] = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitPath(ctx, hosts[0].SocketPath(), "tls-host2", "tcp:"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runDemoPass(ctx, &out, hosts[0].SocketPath(), hosts[1].SocketPath(), 0); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "all 9 checks held") || !strings.Contains(out.String(), "path tcp:") {
		t.Fatalf("checks over the TLS channel:\n%s", out.String())
	}
}
