package admit

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/pki/pkitest"
)

// handshake runs a TLS handshake over a pipe and returns what each side
// saw: the client's verified chain, the server's view of the client.
func handshake(t *testing.T, server, client *tls.Config, serverName string) (clientChain, serverChain []*x509.Certificate, cerr, serr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := tls.Server(a, ServerTLS(server))
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		if serr = s.Handshake(); serr == nil {
			serverChain = PeerChain(s.ConnectionState())
			_, serr = s.Write([]byte{1}) // the client learns the server's verdict on its certificate
		}
		s.Close()
	}()
	c := tls.Client(b, ClientTLS(client, serverName, &clientChain))
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if cerr = c.Handshake(); cerr == nil {
		_, cerr = c.Read(make([]byte, 1))
	}
	c.Close()
	<-done
	return
}

func TestClientTLS(t *testing.T) {
	ca, other := pkitest.NewCA(t, "switch CA"), pkitest.NewCA(t, "another CA")
	srv := func(ca *pkitest.CA, host string) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, host, host)}, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS13}
	}
	cli := func(ca *pkitest.CA, host string, roots *x509.CertPool) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, host, host)}, RootCAs: roots, MinVersion: tls.VersionTLS13}
	}
	tests := []struct {
		name       string
		server     *tls.Config
		client     *tls.Config
		serverName string
		ok         bool
		leaf       string // the client's verified leaf; the server sees the client's
	}{
		{"chain only: a certificate without the address is fine", srv(ca, "hostb"), cli(ca, "hosta", ca.Pool), "", true, "hostb"},
		{"by name", srv(ca, "hostb"), cli(ca, "hosta", ca.Pool), "hostb", true, "hostb"},
		{"by name, wrong name", srv(ca, "hostb"), cli(ca, "hosta", ca.Pool), "hostc", false, ""},
		{"by the dialled address: the certificate has none", srv(ca, "hostb"), cli(ca, "hosta", ca.Pool), "127.0.0.1", false, ""},
		{"server from another CA", srv(other, "hostb"), cli(ca, "hosta", ca.Pool), "", false, ""},
		{"client from another CA", srv(ca, "hostb"), cli(other, "hosta", ca.Pool), "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, sc, cerr, serr := handshake(t, tt.server, tt.client, tt.serverName)
			if !tt.ok {
				if cerr == nil && serr == nil {
					t.Fatal("the handshake succeeded")
				}
				t.Logf("client: %v; server: %v", cerr, serr)
				return
			}
			if cerr != nil || serr != nil {
				t.Fatalf("client: %v; server: %v", cerr, serr)
			}
			if len(cc) != 2 || cc[0].Subject.CommonName != tt.leaf || len(sc) != 2 || sc[0].Subject.CommonName != "hosta" {
				t.Fatalf("chains: client verified %v, server %v", names(cc), names(sc))
			}
		})
	}
}

func names(chain []*x509.Certificate) []string {
	var out []string
	for _, c := range chain {
		out = append(out, c.Subject.CommonName)
	}
	return out
}

func TestVerifyChainNone(t *testing.T) {
	if _, err := VerifyChain(nil, nil, x509.ExtKeyUsageServerAuth); err == nil {
		t.Fatal("no certificates verified")
	}
}
