package admit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a certificate for host (a DNS name, no IP address), good as
// server and client.
func (ca *testCA) issue(t *testing.T, host string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, DNSNames: []string{host}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

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
	ca, other := newCA(t, "switch CA"), newCA(t, "another CA")
	srv := func(ca *testCA, host string) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{ca.issue(t, host)}, ClientCAs: ca.pool, MinVersion: tls.VersionTLS13}
	}
	cli := func(ca *testCA, host string, roots *x509.CertPool) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{ca.issue(t, host)}, RootCAs: roots, MinVersion: tls.VersionTLS13}
	}
	tests := []struct {
		name       string
		server     *tls.Config
		client     *tls.Config
		serverName string
		ok         bool
		leaf       string // the client's verified leaf; the server sees the client's
	}{
		{"chain only: a certificate without the address is fine", srv(ca, "hostb"), cli(ca, "hosta", ca.pool), "", true, "hostb"},
		{"by name", srv(ca, "hostb"), cli(ca, "hosta", ca.pool), "hostb", true, "hostb"},
		{"by name, wrong name", srv(ca, "hostb"), cli(ca, "hosta", ca.pool), "hostc", false, ""},
		{"by the dialled address: the certificate has none", srv(ca, "hostb"), cli(ca, "hosta", ca.pool), "127.0.0.1", false, ""},
		{"server from another CA", srv(other, "hostb"), cli(ca, "hosta", ca.pool), "", false, ""},
		{"client from another CA", srv(ca, "hostb"), cli(other, "hosta", ca.pool), "", false, ""},
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
