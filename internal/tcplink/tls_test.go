package tcplink

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/pki/pkitest"
)

// mutualTLS is the config of a daemon at ip whose certificate ca signs and
// that trusts peers whose certificates ca signs.
func mutualTLS(t *testing.T, ca *pkitest.CA, ip string) *tls.Config {
	return ca.Mutual(t, "vrdma daemon "+ip, ip)
}

func TestTLS(t *testing.T) {
	ca := pkitest.NewCA(t, "vrdma test CA")
	other := pkitest.NewCA(t, "another CA")
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
		{"mutual TLS", mutualTLS(t, ca, "127.0.0.1"), mutualTLS(t, ca, "127.0.0.2"), true, ""},
		{"server-only TLS", &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "vrdma daemon "+"127.0.0.1", "127.0.0.1")}},
			&tls.Config{RootCAs: ca.Pool}, true, ""},
		{"client without a certificate", mutualTLS(t, ca, "127.0.0.1"), noClientCert(mutualTLS(t, ca, "127.0.0.2")), false, "certificate"},
		{"client certificate from another CA", mutualTLS(t, ca, "127.0.0.1"), mutualTLS(t, other, "127.0.0.2"), false, "certificate"},
		{"plain client, TLS server", mutualTLS(t, ca, "127.0.0.1"), nil, false, "TLS"},
		{"TLS client, plain server", nil, mutualTLS(t, ca, "127.0.0.2"), false, "TLS"},
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
