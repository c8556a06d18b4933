package fabric_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pki"
)

// The embedded member's defaults expose nothing beyond the daemon's user,
// and plaintext beyond loopback is refused.

func TestEmbeddedDefaultServesOnlyItsUser(t *testing.T) {
	dir := t.TempDir()
	m, err := fabric.StartEmbedded(dir, fabric.EmbedOptions{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	eps := m.Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "unix:///") {
		t.Fatalf("endpoints %v, want one unix socket", eps)
	}
	sock := strings.TrimPrefix(eps[0], "unix://")
	st, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %04o, want 0600", st.Mode().Perm())
	}
	dst, err := os.Stat(filepath.Dir(sock))
	if err != nil {
		t.Fatal(err)
	}
	if dst.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %04o, want 0700", dst.Mode().Perm())
	}
	st2, err := m.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	f, err := fabric.New(st2, "sw")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.Init(ctx, fabric.Switch{}); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedRefusesPlaintextBeyondLoopback(t *testing.T) {
	files := &fabric.TLSFiles{CertFile: "x", KeyFile: "y", CAFile: "z"}
	tests := []struct {
		name string
		opts fabric.EmbedOptions
		want error
		text string
	}{
		{"http client URL on a host address", fabric.EmbedOptions{ClientURL: "http://10.1.2.3:2379"}, fabric.ErrInsecure, "plaintext"},
		{"http peer URL on a host address", fabric.EmbedOptions{PeerURL: "http://10.1.2.3:2380"}, fabric.ErrInsecure, "plaintext"},
		{"http on every address", fabric.EmbedOptions{ClientURL: "http://0.0.0.0:2379"}, fabric.ErrInsecure, "plaintext"},
		{"an http client URL on loopback", fabric.EmbedOptions{ClientURL: "http://127.0.0.1:2379"}, fabric.ErrInsecure, "every local user"},
		{"https without certificates", fabric.EmbedOptions{ClientURL: "https://10.1.2.3:2379"}, nil, "needs the member's certificates"},
		{"a peer on a socket", fabric.EmbedOptions{PeerURL: "unix:///tmp/p.sock", TLS: files}, nil, "members talk over TCP"},
		{"a relative socket", fabric.EmbedOptions{ClientURL: "unix://rel.sock"}, nil, "unix:///absolute/path"},
		{"no port", fabric.EmbedOptions{ClientURL: "https://10.1.2.3", TLS: files}, nil, "needs a port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := fabric.StartEmbedded(t.TempDir(), tt.opts)
			if err == nil {
				m.Close()
				t.Fatal("started")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err %q lacks %q", err, tt.text)
			}
		})
	}
	if err := fabric.CheckEndpoints([]string{"http://10.0.0.1:2379"}, false); !errors.Is(err, fabric.ErrInsecure) {
		t.Errorf("CheckEndpoints(http on a host address) = %v, want ErrInsecure", err)
	}
	for _, ok := range []string{"http://127.0.0.1:2379", "https://10.0.0.1:2379", "unix:///run/x.sock"} {
		if err := fabric.CheckEndpoints([]string{ok}, false); err != nil {
			t.Errorf("CheckEndpoints(%s) = %v", ok, err)
		}
	}
	if err := fabric.CheckEndpoints([]string{"http://10.0.0.1:2379"}, true); err != nil {
		t.Errorf("CheckEndpoints with insecure = %v", err)
	}
}

func TestEmbeddedHTTPSNeedsAMembersCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.InitCA(dir, "sw")
	if err != nil {
		t.Fatal(err)
	}
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	for _, h := range []string{"a", "b"} {
		if err := ca.IssueHost(dir, pki.HostSpec{Name: h, IPs: lo}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := pki.LoadMember(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.LoadMember(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	client, err := fabric.FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	client = strings.Replace(client, "http://", "https://", 1)
	m, err := fabric.StartEmbedded(t.TempDir(), fabric.EmbedOptions{ClientURL: client, UnsafeNoFsync: true,
		TLS: &fabric.TLSFiles{CertFile: a.CertPath, KeyFile: a.KeyPath, CAFile: a.CAPath}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if eps := m.Endpoints(); len(eps) != 1 || eps[0] != client {
		t.Fatalf("endpoints %v, want [%s]", eps, client)
	}
	st, err := fabric.Dial(m.Endpoints(), admit.ClientTLS(b.TLSConfig(), "", nil))
	if err != nil {
		t.Fatalf("a member's client: %v", err)
	}
	st.Close()
	anon := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if st, err := fabric.Dial(m.Endpoints(), anon); err == nil {
		st.Close()
		t.Fatal("a client without a certificate reached the member")
	}
	if st, err := fabric.Dial([]string{strings.Replace(client, "https://", "http://", 1)}, nil); err == nil {
		st.Close()
		t.Fatal("a plaintext client reached the member")
	}
}
