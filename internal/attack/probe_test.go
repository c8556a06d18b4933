package attack

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/pki"
)

// What an attacker on mallory sends, written from the wire format alone
// (internal/tcplink/protocol.go documents it), as a stranger would.

// channelPort is the TCP channel's port, a daemon's one door to other
// daemons.
const channelPort = "4792"

// channelHello is a TCP-channel hello: magic "vRtc", version 1, flags 0,
// the number of GIDs, a link ID, a nonce, the GIDs.
func channelHello(linkID [16]byte, addrs ...netip.Addr) []byte {
	b := []byte("vRtc")
	b = append(b, 1, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	b = append(b, linkID[:]...)
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	b = append(b, nonce[:]...)
	for _, a := range addrs {
		g := a.As16()
		b = append(b, g[:]...)
	}
	return b
}

func randomID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return id
}

// dialFrom connects from host h to addr (TCP, or TLS with cfg), within
// limit.
func dialFrom(h *netns.Host, addr string, cfg *tls.Config, limit time.Duration) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return c, nil
	}
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(limit))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// intrude sends hello on a connection from mallory to addr (over TLS with
// cfg, if not nil) and counts the bytes that come back after the peer's own
// hello until the peer closes or wait passes: frames meant for the host the
// hello pretends to be. A connection refused in its TLS handshake counts 0.
func intrude(h *netns.Host, addr string, cfg *tls.Config, hello []byte, wait time.Duration) (int, error) {
	c, err := dialFrom(h, addr, cfg, wait)
	if err != nil {
		return 0, nil // refused at the door
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(hello); err != nil {
		return 0, nil
	}
	var fixed [32]byte
	if _, err := io.ReadFull(c, fixed[:]); err != nil {
		return 0, nil // no hello from the peer either: closed
	}
	n := int(binary.BigEndian.Uint16(fixed[6:8]))
	if _, err := io.ReadFull(c, make([]byte, 16*n)); err != nil {
		return 0, nil
	}
	got, err := io.Copy(io.Discard, c)
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, net.ErrClosed) {
		return int(got), nil // reset: what came came
	}
	return int(got), nil
}

// trap listens on mallory's TCP-channel port and counts who connects: a
// daemon fooled into dialling a stranger would.
type trap struct{ conns atomic.Int64 }

func listenTrap(t *testing.T, h *netns.Host) *trap {
	t.Helper()
	tr := &trap{}
	for _, port := range []string{channelPort} {
		var ln net.Listener
		if err := h.Do(func() error {
			var err error
			ln, err = net.Listen("tcp", ":"+port)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				tr.conns.Add(1)
				c.Close()
			}
		}()
	}
	return tr
}

// forgedMember is a TLS configuration with a certificate that names host
// as the switch's would, signed by a CA of the attacker's own making.
func forgedMember(t *testing.T, host string) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.InitCA(dir, "vrdma")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.IssueHost(dir, pki.HostSpec{Name: host}); err != nil {
		t.Fatal(err)
	}
	m, err := pki.LoadMember(dir, host)
	if err != nil {
		t.Fatal(err)
	}
	return admit.ClientTLS(m.TLSConfig(), "", nil)
}

// stranger is a TLS client with no certificate that accepts any server.
func stranger() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
}
