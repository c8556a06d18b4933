package tcplink

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a certificate for a daemon at ip, good as server and client.
func (ca *testCA) issue(t *testing.T, ip string, serial int64) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "vrdma daemon " + ip},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP(ip)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mutualTLS is the config of a daemon at ip whose certificate ca signs and
// that trusts peers whose certificates ca signs.
func mutualTLS(t *testing.T, ca *testCA, ip string, serial int64) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.issue(t, ip, serial)}, RootCAs: ca.pool, ClientCAs: ca.pool, MinVersion: tls.VersionTLS13}
}

func TestTLS(t *testing.T) {
	ca := newCA(t, "vrdma test CA")
	other := newCA(t, "another CA")
	noClientCert := func(c *tls.Config) *tls.Config {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
		return c
	}
	tests := []struct {
		name       string
		tlsA, tlsB *tls.Config // B dials A
		ok         bool
		says       string // A or B logs this when refused
	}{
		{"mutual TLS", mutualTLS(t, ca, "127.0.0.1", 2), mutualTLS(t, ca, "127.0.0.2", 3), true, ""},
		{"server-only TLS", &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "127.0.0.1", 4)}},
			&tls.Config{RootCAs: ca.pool}, true, ""},
		{"client without a certificate", mutualTLS(t, ca, "127.0.0.1", 5), noClientCert(mutualTLS(t, ca, "127.0.0.2", 6)), false, "certificate"},
		{"client certificate from another CA", mutualTLS(t, ca, "127.0.0.1", 7), mutualTLS(t, other, "127.0.0.2", 8), false, "certificate"},
		{"plain client, TLS server", mutualTLS(t, ca, "127.0.0.1", 9), nil, false, "TLS"},
		{"TLS client, plain server", nil, mutualTLS(t, ca, "127.0.0.2", 10), false, "TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eps endpoints
			a := openNode(t, &eps, addrA, 0, func(c *Config) { c.TLS = tt.tlsA })
			b := openNode(t, &eps, addrB, 0, func(c *Config) { c.TLS = tt.tlsB })
			if tt.ok {
				connectPair(t, b, a)
				checkFlow(t, a, b, 100)
				return
			}
			send(t, b.Link, testFrame(addrB, addrA, 1, nil))
			waitFor(t, "the refusal", func() bool { return a.Stats().HandshakeErrors > 0 && b.Stats().DroppedNoPeer == 1 })
			if n := a.sink.count() + int(a.Stats().Connects); n != 0 {
				t.Fatalf("A connected or delivered: %+v", a.Stats())
			}
			// The refusal is logged with a reason; at least one side says
			// what is wrong.
			var said []string
			for _, x := range []*node{a, b} {
				x.logs.mu.Lock()
				for _, r := range x.logs.recs {
					if r.err != nil {
						said = append(said, r.err.Error())
					}
				}
				x.logs.mu.Unlock()
			}
			if !strings.Contains(strings.Join(said, "\n"), tt.says) {
				t.Fatalf("logged %q, none says %q", said, tt.says)
			}
			t.Log(strings.Join(said, "\n"))
		})
	}
}
