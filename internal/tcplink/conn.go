package tcplink

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/wire"
)

// conn is one TCP connection to a peer.
type conn struct {
	l        *Link
	raw      net.Conn // the TCP connection: Close closes it
	nc       net.Conn // raw, or TLS over it; used by the connection's goroutines
	remote   string
	remoteAP netip.AddrPort // remote, unmapped
	outgoing bool
	dialFor  *peer  // outgoing: the peer it was dialled for
	endpoint string // outgoing: the endpoint dialled
	expect   string // outgoing: the identity expected there ("" none)
	nonce    uint64 // the one our hello carried
	hello    hello  // the peer's
	addrs    []netip.Addr
	chain    []*x509.Certificate // the peer's verified certificate chain, leaf first; nil without
	ident    string              // the peer's identity, once the handshake named it
	slot     *admit.Slot         // incoming: its place in the handshake gate
	p        *peer               // the peer it serves, once attached (set under l.mu)
	sc       syscall.RawConn     // the TCP connection's descriptor, for direct writes (direct.go)
	dw       directWrite         // direct.go
	sl       *sealConn           // under TLS: its sealed records (seal.go); nil on a plain connection

	closeOnce sync.Once
}

func (l *Link) newConn(nc net.Conn, outgoing bool, dialFor *peer) *conn {
	var n [8]byte
	_, _ = rand.Read(n[:])
	c := &conn{l: l, raw: nc, nc: nc, remote: nc.RemoteAddr().String(), remoteAP: admit.AddrPortOf(nc.RemoteAddr()),
		outgoing: outgoing, dialFor: dialFor, nonce: binary.BigEndian.Uint64(n[:]), sc: rawConnOf(nc)}
	c.dw.fn = c.dw.write
	return c
}

// registerLocked adds c to the connections Close closes; false if the
// link is closed. l.mu is held.
func (l *Link) registerLocked(c *conn) bool {
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// handshake runs TLS, if configured, the hello exchange and the
// identification of the peer (identity.go), all within HandshakeTimeout.
func (c *conn) handshake() error {
	l := c.l
	_ = c.nc.SetDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
	if c.slot != nil {
		// The handshake's first bytes tell the gate this is a peer at
		// work, not an idle connection (cut those first). A plain
		// connection reads raw again after the hello.
		c.nc = admit.WatchConn(c.nc, c.slot)
		defer func() {
			if l.cfg.TLS == nil {
				c.nc = c.raw
			}
		}()
	}
	if l.cfg.TLS != nil {
		var tc *tls.Conn
		c.sl = &sealConn{Conn: c.nc}
		if c.outgoing {
			// Without an Authorizer the certificate must be the endpoint
			// host's; with one, the chain alone is verified here and the
			// Authorizer judges whose it is.
			name := ""
			if l.cfg.Authorize == nil {
				name = hostOf(c.endpoint)
			}
			tc = tls.Client(c.sl, admit.ClientTLS(l.cliTLS, name, &c.chain))
		} else {
			tc = tls.Server(c.sl, l.srvTLS)
		}
		c.nc = tc
		if err := tc.HandshakeContext(l.ctx); err != nil {
			return fmt.Errorf("tcplink: TLS handshake with %s failed: %w (do both ends use TLS, with certificates the other's CAs sign?)", c.remote, err)
		}
		if !c.outgoing {
			c.chain = admit.PeerChain(tc.ConnectionState())
		}
	}
	h := hello{id: l.id, nonce: c.nonce, gids: l.gids}
	if _, err := c.nc.Write(appendHello(make([]byte, 0, helloFixedLen+16*len(l.gids)), &h)); err != nil {
		return fmt.Errorf("tcplink: sending the hello to %s: %w", c.remote, err)
	}
	var fixed [helloFixedLen]byte
	if k, err := io.ReadFull(c.nc, fixed[:]); err != nil {
		return c.helloErr(err, fixed[:k])
	}
	n, err := parseHelloFixed(fixed[:], &c.hello)
	if err != nil {
		return c.withRemote(err)
	}
	gids := make([]byte, 16*n)
	if _, err := io.ReadFull(c.nc, gids); err != nil {
		return c.helloErr(err, nil)
	}
	parseHelloGIDs(gids, &c.hello)
	if c.hello.id == l.id {
		return fmt.Errorf("%w: %s is this link's own listener: a Peers entry points back at this host", ErrSelf, c.remote)
	}
	c.addrs = make([]netip.Addr, len(c.hello.gids))
	for i, g := range c.hello.gids {
		c.addrs[i] = netip.AddrFrom16(g).Unmap()
	}
	if err := l.identify(c); err != nil {
		return err
	}
	_ = c.nc.SetDeadline(time.Time{})
	if c.sl != nil {
		c.sl.startCapture(c.sealedLate)
	}
	return nil
}

// sealedLate wakes the writer of c's peer: TLS sealed a record outside
// the writers' seal (an alert, an answer to a key update), which waits in
// c's sealed records.
func (c *conn) sealedLate() {
	c.l.mu.RLock()
	p := c.p
	c.l.mu.RUnlock()
	if p != nil {
		p.signal()
	}
}

// helloErr explains a failure to read a hello; got is what came of its
// fixed part (nil: it came whole).
func (c *conn) helloErr(err error, got []byte) error {
	if perr := helloPrefixErr(got); perr != nil {
		return c.withRemote(perr) // enough came to tell it is no hello we take
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &ProtocolError{Remote: c.remote, Stage: "hello", Reason: fmt.Sprintf("no complete hello within %v", c.l.cfg.HandshakeTimeout)}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &ProtocolError{Remote: c.remote, Stage: "hello", Reason: "connection closed before the hello was complete"}
	}
	return fmt.Errorf("tcplink: reading the hello from %s: %w", c.remote, err)
}

func (c *conn) withRemote(err error) error {
	var pe *ProtocolError
	var ve *VersionError
	switch {
	case errors.As(err, &pe):
		pe.Remote = c.remote
	case errors.As(err, &ve):
		ve.Remote = c.remote
	}
	return err
}

// run is the goroutine of a connection: the handshake for an incoming
// one, then reading frames until the connection ends.
func (c *conn) run() {
	l := c.l
	if !c.outgoing {
		err := c.handshake()
		c.slot.Leave()
		if cut := c.slot.Err(); cut != nil {
			err = cut // the gate closed it to make room, maybe just after its handshake
		}
		if err == nil {
			err = l.attach(c)
		}
		if err != nil {
			c.handshakeFailed(err)
			return
		}
	}
	c.close(c.readLoop())
}

// handshakeFailed counts and closes a connection refused in its
// handshake or by attach, and logs why if it was incoming (the writer
// that dialled an outgoing one logs the failure with the frames it
// dropped).
func (c *conn) handshakeFailed(err error) {
	l := c.l
	if !l.isClosed.Load() && !errors.Is(err, ErrClosed) {
		switch {
		case errors.Is(err, admit.ErrCut): // counted by the gate
		case errors.Is(err, ErrUnauthorized):
			l.stats.unauthorized.Add(1)
		case errors.Is(err, ErrWrongPeer):
			l.stats.wrongPeer.Add(1)
		case errors.Is(err, ErrPeerLimit):
			l.stats.peerLimit.Add(1)
		default:
			l.stats.handshakeErrors.Add(1)
		}
		if !c.outgoing {
			l.refuseLog.Log(l.log, slog.LevelWarn, "tcplink: connection refused in its handshake", "remote", c.remote, "err", err)
		}
	}
	c.close(nil)
}

// readLoop delivers the connection's frames until it ends, and returns
// why it did.
func (c *conn) readLoop() error {
	l := c.l
	select {
	case <-l.serving:
	case <-l.done:
		return ErrClosed
	}
	fr := newFrameReader(&idleReader{c: c.nc, idle: DeadAfter * l.cfg.KeepAlive})
	for {
		f, err := fr.next()
		switch {
		case err != nil:
			return c.readErr(err)
		case len(f) == 0:
			l.stats.pings.Add(1)
		case !c.announced(f):
			l.stats.spoofed.Add(1)
			l.refuseLog.Log(l.log, slog.LevelWarn, "tcplink: dropped a frame whose source the peer does not own",
				"remote", c.remote, "identity", c.ident, "source", frameSource(f))
		case !l.deliverFrame(f):
			return ErrClosed
		default:
			l.stats.framesIn.Add(1)
			l.stats.bytesIn.Add(uint64(len(f)))
		}
	}
}

// readErr explains why reading stopped.
func (c *conn) readErr(err error) error {
	switch {
	case c.l.isClosed.Load():
		return ErrClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &SilentError{Remote: c.remote, Silence: (DeadAfter * c.l.cfg.KeepAlive).String()}
	}
	return c.withRemote(err)
}

// idleReader reads with a deadline that each read pushes back: a peer that
// sends nothing, not even a keepalive, for idle is dead.
type idleReader struct {
	c    net.Conn
	idle time.Duration
}

func (r *idleReader) Read(b []byte) (int, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(r.idle))
	return r.c.Read(b)
}

// close ends the connection once, for reason (nil: already reported),
// which it counts and logs, and detaches it from its peer.
func (c *conn) close(reason error) {
	c.closeOnce.Do(func() {
		c.raw.Close()
		l := c.l
		l.detach(c, reason)
		if reason == nil || l.isClosed.Load() || errors.Is(reason, ErrClosed) {
			return
		}
		var se *SilentError
		switch {
		case errors.As(reason, &se):
			l.stats.timeouts.Add(1)
			l.refuseLog.Log(l.log, slog.LevelWarn, "tcplink: peer declared dead", "remote", c.remote, "err", reason)
		case errors.Is(reason, ErrProtocol):
			l.stats.protocolErrors.Add(1)
			l.refuseLog.Log(l.log, slog.LevelWarn, "tcplink: connection closed: the peer broke the protocol", "remote", c.remote, "err", reason)
		case errors.Is(reason, io.EOF):
			l.churnLog.Log(l.log, slog.LevelInfo, "tcplink: peer closed the connection", "remote", c.remote)
		default:
			l.churnLog.Log(l.log, slog.LevelInfo, "tcplink: connection ended", "remote", c.remote, "err", reason)
		}
	})
}

// closeWrite ends our side of a connection the tie-break gave up: the peer
// reads what we sent, then EOF, and closes its side.
func (c *conn) closeWrite() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		err := cw.CloseWrite()
		if err == nil && c.sl != nil {
			// The close_notify is sealed behind what the connection has
			// not written yet: write it all.
			_ = c.raw.SetWriteDeadline(time.Now().Add(DeadAfter * c.l.cfg.KeepAlive))
			err = c.drainSealed()
		}
		if err == nil {
			return
		}
	}
	c.close(nil)
}

// announced reports whether frame f comes from one of the addresses c's
// peer announced in its hello (and Authorize accepted): a peer speaks
// only for its own host's addresses, as the IBTA packets it carries say
// where they come from and the engine answers there.
func (c *conn) announced(f []byte) bool {
	src := frameSource(f)
	return src.IsValid() && slices.Contains(c.addrs, src)
}

// frameSource is the source address of the IP packet f (IPv4 unmapped),
// the one after its group tag if it has one, or the zero Addr if f is too
// short to say.
func frameSource(f []byte) netip.Addr {
	if wire.IsGroupTagged(f) {
		if _, d, err := wire.SplitGroupTag(f); err == nil {
			f = d
		} else {
			return netip.Addr{}
		}
	}
	switch {
	case len(f) >= 20 && f[0]>>4 == 4:
		return netip.AddrFrom4([4]byte(f[12:16]))
	case len(f) >= 40 && f[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(f[8:24])).Unmap()
	}
	return netip.Addr{}
}
