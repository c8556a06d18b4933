package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
)

// switchDir makes a CA and certificates for hosts in a new directory.
func switchDir(t *testing.T, hosts ...string) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := InitCA(dir, "sw")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if err := ca.IssueHost(dir, HostSpec{Name: h, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestInitCARefusesToReplaceACA(t *testing.T) {
	dir := switchDir(t)
	if _, err := InitCA(dir, "sw"); !errors.Is(err, ErrExists) {
		t.Fatalf("second InitCA: %v, want ErrExists", err)
	}
	st, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode %04o, want 0600", st.Mode().Perm())
	}
}

func TestIssuedCertificateNamesItsHost(t *testing.T) {
	dir := switchDir(t, "a", "b")
	m, err := LoadMember(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := HostName(m.Leaf); got != "a" {
		t.Errorf("HostName = %q, want a", got)
	}
	if len(m.Leaf.IPAddresses) != 1 || m.Leaf.IPAddresses[0].String() != "10.0.0.1" {
		t.Errorf("IP SANs %v, want [10.0.0.1]", m.Leaf.IPAddresses)
	}
	b, err := LoadMember(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	if name, err := m.VerifyPeer([]*x509.Certificate{b.Leaf}); err != nil || name != "b" {
		t.Errorf("VerifyPeer(b) = %q, %v; want b", name, err)
	}
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.IssueHost(dir, HostSpec{Name: "a"}); !errors.Is(err, ErrExists) {
		t.Errorf("issuing a again: %v, want ErrExists", err)
	}
	if err := ca.IssueHost(dir, HostSpec{Name: "a", Overwrite: true}); err != nil {
		t.Errorf("issuing a again with Overwrite: %v", err)
	}
}

func TestLoadMemberRefuses(t *testing.T) {
	dir := switchDir(t, "a")
	other := switchDir(t, "a") // another switch's CA
	tests := []struct {
		name  string
		setup func(t *testing.T) (dir, host string)
		want  string
	}{
		{"no certificate", func(*testing.T) (string, string) { return dir, "zz" }, "vrdma host cert zz"},
		{"another CA's certificate", func(t *testing.T) (string, string) {
			d := t.TempDir()
			copyFile(t, filepath.Join(dir, CACertFile), filepath.Join(d, CACertFile))
			copyFile(t, CertFile(other, "a"), CertFile(d, "a"))
			copyFile(t, KeyFile(other, "a"), KeyFile(d, "a"))
			return d, "a"
		}, "not a member"},
		{"a key others may read", func(t *testing.T) (string, string) {
			d := t.TempDir()
			copyFile(t, filepath.Join(dir, CACertFile), filepath.Join(d, CACertFile))
			copyFile(t, CertFile(dir, "a"), CertFile(d, "a"))
			copyFile(t, KeyFile(dir, "a"), KeyFile(d, "a"))
			if err := os.Chmod(KeyFile(d, "a"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d, "a"
		}, "chmod 600"},
		{"a certificate for another host", func(t *testing.T) (string, string) {
			d := t.TempDir()
			copyFile(t, filepath.Join(dir, CACertFile), filepath.Join(d, CACertFile))
			copyFile(t, CertFile(dir, "a"), CertFile(d, "b"))
			copyFile(t, KeyFile(dir, "a"), KeyFile(d, "b"))
			return d, "b"
		}, `names host "a", not "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, h := tt.setup(t)
			_, err := LoadMember(d, h)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadMember: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestVerifyPeerRefusesExpiredAndForeign(t *testing.T) {
	dir := switchDir(t, "a", "b")
	m, err := LoadMember(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadMember(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.verify([]*x509.Certificate{b.Leaf}, b.Leaf.NotAfter.Add(time.Hour)); !errors.Is(err, ErrNotMember) {
		t.Errorf("expired certificate: %v, want ErrNotMember", err)
	}
	foreign, err := LoadMember(switchDir(t, "b"), "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.VerifyPeer([]*x509.Certificate{foreign.Leaf}); !errors.Is(err, ErrNotMember) {
		t.Errorf("another switch's host: %v, want ErrNotMember", err)
	}
	if _, err := m.VerifyPeer(nil); !errors.Is(err, ErrNotMember) {
		t.Errorf("no certificate: %v, want ErrNotMember", err)
	}
}

// handshake runs a TLS handshake between a client and a server config over
// a pipe and returns both sides' errors.
func handshake(t *testing.T, client, server *tls.Config) (cerr, serr error) {
	t.Helper()
	// A real socket: TLS 1.3 servers write session tickets after the
	// handshake, which a synchronous net.Pipe would block on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		ts := tls.Server(s, server)
		err := ts.Handshake()
		if err != nil {
			s.Close()
		}
		done <- err
	}()
	tc := tls.Client(c, client)
	cerr = tc.Handshake()
	if cerr != nil {
		c.Close()
	}
	select {
	case serr = <-done:
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("server handshake did not end")
	}
	return cerr, serr
}

// TestTLSBetweenMembers: members reach each other with mutual TLS from
// TLSConfig (as the daemon's listeners and dialers specialise it), learn
// which member is at the other end, and nobody else gets through.
func TestTLSBetweenMembers(t *testing.T) {
	dir := switchDir(t, "a", "b")
	a, _ := LoadMember(dir, "a")
	b, _ := LoadMember(dir, "b")
	foreign, err := LoadMember(switchDir(t, "x"), "x")
	if err != nil {
		t.Fatal(err)
	}
	var chain []*x509.Certificate
	if cerr, serr := handshake(t, admit.ClientTLS(a.TLSConfig(), "", &chain), admit.ServerTLS(b.TLSConfig())); cerr != nil || serr != nil {
		t.Fatalf("a dialling b: client %v, server %v", cerr, serr)
	}
	if name, err := a.VerifyPeer(chain); err != nil || name != "b" {
		t.Errorf("a found %q at b's end (%v), want b", name, err)
	}
	if _, serr := handshake(t, admit.ClientTLS(foreign.TLSConfig(), "", nil), admit.ServerTLS(b.TLSConfig())); serr == nil {
		t.Error("a host of another switch got through b's server")
	}
	if cerr, _ := handshake(t, admit.ClientTLS(a.TLSConfig(), "", nil), admit.ServerTLS(foreign.TLSConfig())); cerr == nil {
		t.Error("a accepted a server of another switch")
	}
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	if _, serr := handshake(t, noCert, admit.ServerTLS(b.TLSConfig())); serr == nil {
		t.Error("a client without a certificate got through")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(from)
	if err := os.WriteFile(to, b, st.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

// TestSignedRecords: a record signed by a member verifies as that member's;
// another member's signature, an altered record, another CA's certificate
// and a missing certificate do not.
func TestSignedRecords(t *testing.T) {
	dir := switchDir(t, "a", "b")
	a, _ := LoadMember(dir, "a")
	b, _ := LoadMember(dir, "b")
	rec := []byte(`{"name":"a","addrs":["10.0.0.1"]}`)
	sig, err := a.Sign(rec)
	if err != nil {
		t.Fatal(err)
	}
	leaf, name, err := b.VerifySigned(a.CertPEM(), rec, sig)
	if err != nil || name != "a" {
		t.Fatalf("a's record as b reads it: %q, %v", name, err)
	}
	if !Covers(leaf, netip.MustParseAddr("10.0.0.1")) || !Covers(leaf, netip.MustParseAddr("::ffff:10.0.0.1")) || Covers(leaf, netip.MustParseAddr("10.0.0.2")) {
		t.Error("Covers does not follow the certificate's IP addresses")
	}
	bsig, _ := b.Sign(rec)
	foreign, err := LoadMember(switchDir(t, "a"), "a")
	if err != nil {
		t.Fatal(err)
	}
	fsig, _ := foreign.Sign(rec)
	tests := []struct {
		name      string
		cert, sig string
		data      []byte
		want      error
	}{
		{"b's signature under a's certificate", a.CertPEM(), bsig, rec, ErrBadSignature},
		{"an altered record", a.CertPEM(), sig, []byte(`{"name":"a","addrs":["10.0.0.2"]}`), ErrBadSignature},
		{"another switch's certificate", foreign.CertPEM(), fsig, rec, ErrNotMember},
		{"no certificate", "", sig, rec, ErrNotMember},
		{"a signature that is not base64", a.CertPEM(), "!!", rec, ErrBadSignature},
	}
	for _, tt := range tests {
		if _, _, err := b.VerifySigned(tt.cert, tt.data, tt.sig); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}
