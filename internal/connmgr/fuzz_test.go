package connmgr_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/cm"
)

// FuzzCMWire writes arbitrary bytes to the listener of a manager with a
// listening session, then ends the stream. The manager must answer or
// close, never crash or hang, and keep serving new connections.
func FuzzCMWire(f *testing.F) {
	m, h := newManager(f, nil)
	listenSession(f, m, h, 7000, 0).discardEvents()
	frames := func(ms ...cm.Message) []byte {
		var b []byte
		for _, m := range ms {
			var err error
			if b, err = m.Append(b); err != nil {
				f.Fatal(err)
			}
		}
		return b
	}
	gid := h.gid()
	f.Add(frames(req(1, 7000, gid)))
	f.Add(frames(req(1, 7000, gid), &cm.REJ{LocalID: 1, Reason: cm.RejectTimeout}))
	f.Add(frames(req(2, 9, gid), &cm.RTU{LocalID: 2, RemoteID: 3}, &cm.DREQ{LocalID: 2, RemoteID: 3}))
	f.Add(frames(&cm.REP{LocalID: 4, RemoteID: 5, MTU: 3}, &cm.DREP{LocalID: 4, RemoteID: 5}))
	f.Add([]byte{'v', 'C', 1, 1, 0xFF, 0xFF})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := net.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(b); err != nil {
			return // the manager closed it already
		}
		_ = c.(*net.TCPConn).CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.Copy(io.Discard, c); isTimeout(err) {
			t.Fatalf("the manager neither answered nor closed: %v", err)
		}
	})
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
