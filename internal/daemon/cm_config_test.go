package daemon_test

// Each of Config's CM fields reaches the connection manager: a daemon
// built with it behaves as the field says, and Daemon.CMStats counts it.
// How the manager behaves under each is tested in package connmgr.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/cm/cmtest"
	"github.com/vrdma/vrdma/internal/daemon"
)

func TestCMConfigReachesTheManager(t *testing.T) {
	otherGID := [16]byte{10: 0xff, 11: 0xff, 198, 51, 100, 7} // no adapter's
	t.Run("CMLimits", func(t *testing.T) {
		d := cmDaemonWith(t, func(c *daemon.Config) { c.CMLimits.IdleTimeout = 50 * time.Millisecond })
		p := dialCM(t, d)
		if !p.Closed() {
			t.Fatal("an idle connection is open")
		}
		waitCM(t, "the idle close to be counted", func() bool { return d.CMStats().IdleClosed == 1 })
	})
	t.Run("CMAuthorize", func(t *testing.T) {
		d := cmDaemonWith(t, func(c *daemon.Config) {
			c.CMAuthorize = func(admit.Peer) (string, error) { return "", errors.New("no member") }
		})
		p := dialCM(t, d)
		p.Send(req(61, 7, otherGID))
		if !p.Closed() {
			t.Fatal("a refused connection is open")
		}
		waitCM(t, "the refusal to be counted", func() bool { return d.CMStats().Unauthorized == 1 })
	})
	t.Run("CMPeerOwns", func(t *testing.T) {
		var asked atomic.Int64
		d := cmDaemonWith(t, func(c *daemon.Config) {
			c.CMAuthorize = func(admit.Peer) (string, error) { return "hostb", nil }
			c.CMPeerOwns = func(identity string, gid [16]byte) bool {
				asked.Add(1)
				return identity == "hostb" && gid == [16]byte{10: 0xff, 11: 0xff, 192, 0, 2, 2}
			}
		})
		s := listenSession(t, d, 7000, 4)
		p := dialCM(t, d)
		p.Send(req(81, 7000, s.gid)) // from 192.0.2.1, which is not hostb's
		p.ExpectREJ(81, cm.RejectInvalidGID, "source 192.0.2.1 is not an address of host hostb")
		if st := d.CMStats(); st.WrongSource != 1 || asked.Load() != 1 {
			t.Fatalf("stats %+v, PeerOwns asked %d times; want one request refused for its source", st, asked.Load())
		}
	})
	t.Run("CMTLS", func(t *testing.T) {
		d := cmDaemonWith(t, func(c *daemon.Config) { c.CMTLS = selfSigned(t) })
		c, err := tls.Dial("tcp", d.CMAddr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("no TLS on the CM port: %v", err)
		}
		c.Close()
		p := dialCM(t, d)
		p.Send(req(71, 7, otherGID))
		if !p.Closed() {
			t.Fatal("a plain connection is open")
		}
		waitCM(t, "the failed handshake to be counted", func() bool { return d.CMStats().HandshakeErrors == 1 })
	})
}

func waitCM(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(cmtest.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// selfSigned is a server TLS config with a self-signed certificate.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cm-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"cm-test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13}
}
