package main

// Out-of-band exchanges: what two ends say over TCP before their queue pairs
// can reach each other. pingpong speaks ibv_rc_pingpong's exchange byte for
// byte (so either end can be rdma-core's tool); ping speaks a one-line hello
// of its own.

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vrdma/vrdma"
)

// oobTimeout bounds each read and write of an exchange once the TCP
// connection is up, so that a peer that is not a pingpong (or a ping
// responder) cannot hang us. Waiting for a connection is not bounded.
var oobTimeout = 30 * time.Second

// ppIdleTimeout bounds how long a pingpong waits for a completion once its
// QP is connected (ibv_rc_pingpong waits for ever): a peer that went away,
// or an address that leads nowhere, ends the run with an error instead of
// hanging it.
var ppIdleTimeout = 30 * time.Second

// ppMsgLen is the size of ibv_rc_pingpong's address message: the text
// "LLLL:QQQQQQ:PPPPPP:GGGG…" (51 characters) and its NUL.
const ppMsgLen = len("0000:000000:000000:00000000000000000000000000000000") + 1

// ppDone is what the client writes last: "done" and its NUL.
const ppDone = "done\x00"

// encodePPMsg formats e as ibv_rc_pingpong's sprintf("%04x:%06x:%06x:%s")
// does, the GID as the 32 hex digits of its bytes in order, NUL-terminated.
func encodePPMsg(e vrdma.Endpoint) ([ppMsgLen]byte, error) {
	var b [ppMsgLen]byte
	s := e.String()
	if len(s) != ppMsgLen-1 {
		return b, fmt.Errorf("address %s does not fit ibv_rc_pingpong's message: the QPN and PSN must fit in 24 bits", s)
	}
	copy(b[:], s)
	return b, nil
}

// parsePPMsg parses a 52-byte address message. It is strict about the shape
// (every pingpong writes it with the same sprintf), so that a peer which is
// not a pingpong is told apart from one with a strange address.
func parsePPMsg(b []byte) (vrdma.Endpoint, error) {
	text, _, _ := strings.Cut(string(b), "\x00")
	bad := func() (vrdma.Endpoint, error) {
		return vrdma.Endpoint{}, fmt.Errorf("%q is not a pingpong address (LID:QPN:PSN:GID as 4, 6, 6 and 32 hex digits, then a NUL)", b)
	}
	if len(b) != ppMsgLen || len(text) != ppMsgLen-1 {
		return bad()
	}
	fields := strings.Split(text, ":")
	if len(fields) != 4 {
		return bad()
	}
	for i, f := range fields {
		if len(f) != [...]int{4, 6, 6, 32}[i] || strings.IndexFunc(f, notHex) >= 0 {
			return bad()
		}
	}
	e, err := vrdma.ParseEndpoint(text)
	if err != nil {
		return bad()
	}
	return e, nil
}

func notHex(r rune) bool {
	return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F')
}

// gidText formats g as glibc's inet_ntop(AF_INET6) does, which is how
// ibv_rc_pingpong prints GIDs: lowercase groups without leading zeros, the
// first longest run of two or more zero groups as "::", and the last 32
// bits in dotted IPv4 after 96 zero bits or ::ffff:0:0/96.
func gidText(g vrdma.GID) string {
	var w [8]uint16
	for i := range w {
		w[i] = uint16(g[2*i])<<8 | uint16(g[2*i+1])
	}
	base, n := -1, 0
	for i := 0; i < len(w); {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < len(w) && w[j] == 0 {
			j++
		}
		if j-i > n {
			base, n = i, j-i
		}
		i = j
	}
	if n < 2 {
		base, n = -1, 0
	}
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		if base >= 0 && i >= base && i < base+n {
			if i == base {
				b.WriteByte(':')
			}
			continue
		}
		if i > 0 {
			b.WriteByte(':')
		}
		if i == 6 && base == 0 && (n == 6 || n == 5 && w[5] == 0xffff) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			return b.String()
		}
		b.WriteString(strconv.FormatUint(uint64(w[i]), 16))
	}
	if base >= 0 && base+n == len(w) {
		b.WriteByte(':')
	}
	return b.String()
}

// globalGID reports whether ibv_rc_pingpong would address g with a GRH: it
// looks at the interface ID, the GID's last 8 bytes.
func globalGID(g vrdma.GID) bool {
	return g[8]|g[9]|g[10]|g[11]|g[12]|g[13]|g[14]|g[15] != 0
}

// oobRead reads exactly len(b) bytes of what (for messages) from conn.
func oobRead(conn net.Conn, b []byte, what string) error {
	_ = conn.SetReadDeadline(time.Now().Add(oobTimeout))
	n, err := io.ReadFull(conn, b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%s closed the connection after %d of the %d bytes of %s", conn.RemoteAddr(), n, len(b), what)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%s sent %d of the %d bytes of %s in %v", conn.RemoteAddr(), n, len(b), what, oobTimeout)
	}
	return fmt.Errorf("reading %s from %s: %w", what, conn.RemoteAddr(), err)
}

func oobWrite(conn net.Conn, b []byte, what string) error {
	_ = conn.SetWriteDeadline(time.Now().Add(oobTimeout))
	if _, err := conn.Write(b); err != nil {
		return fmt.Errorf("sending %s to %s: %w", what, conn.RemoteAddr(), err)
	}
	return nil
}

// ppServerExchange is the server's half of ibv_rc_pingpong's exchange: read
// the client's address, connect the QP to it, send ours, read "done".
func ppServerExchange(conn net.Conn, local vrdma.Endpoint, connect func(vrdma.Endpoint) error) (vrdma.Endpoint, error) {
	var msg [ppMsgLen]byte
	if err := oobRead(conn, msg[:], "the client's address"); err != nil {
		return vrdma.Endpoint{}, fmt.Errorf("couldn't read remote address: %w: is the client a pingpong (vrdma pingpong HOST, ibv_rc_pingpong HOST)?", err)
	}
	remote, err := parsePPMsg(msg[:])
	if err != nil {
		return remote, fmt.Errorf("the client at %s sent %w: is it a pingpong (vrdma pingpong HOST, ibv_rc_pingpong HOST)?", conn.RemoteAddr(), err)
	}
	if err := connect(remote); err != nil {
		return remote, fmt.Errorf("couldn't connect to remote QP: %w", err)
	}
	out, err := encodePPMsg(local)
	if err == nil {
		err = oobWrite(conn, out[:], "our address")
	}
	if err != nil {
		return remote, fmt.Errorf("couldn't send local address: %w", err)
	}
	var done [len(ppDone)]byte
	if err := oobRead(conn, done[:], `"done"`); err != nil {
		return remote, fmt.Errorf("couldn't recv \"done\": %w: the client could not use our address (see its output)", err)
	}
	if string(done[:]) != ppDone {
		return remote, fmt.Errorf("the client at %s sent %q where a pingpong sends %q", conn.RemoteAddr(), done[:], ppDone)
	}
	return remote, nil
}

// ppClientExchange is the client's half: send our address, read the
// server's, connect the QP to it, write "done". (ibv_rc_pingpong writes
// "done" before it connects its QP; connecting first lets a server see a
// client that could not connect instead of waiting for its first message.)
func ppClientExchange(conn net.Conn, local vrdma.Endpoint, connect func(vrdma.Endpoint) error) (vrdma.Endpoint, error) {
	out, err := encodePPMsg(local)
	if err == nil {
		err = oobWrite(conn, out[:], "our address")
	}
	if err != nil {
		return vrdma.Endpoint{}, fmt.Errorf("couldn't send local address: %w", err)
	}
	var msg [ppMsgLen]byte
	if err := oobRead(conn, msg[:], "the server's address"); err != nil {
		return vrdma.Endpoint{}, fmt.Errorf("couldn't read remote address: %w: is %s a pingpong server, and could it use our address (see its output)?", err, conn.RemoteAddr())
	}
	remote, err := parsePPMsg(msg[:])
	if err != nil {
		return remote, fmt.Errorf("the server at %s sent %w: is it a pingpong server (vrdma pingpong, ibv_rc_pingpong)?", conn.RemoteAddr(), err)
	}
	if err := connect(remote); err != nil {
		return remote, fmt.Errorf("couldn't connect to remote QP: %w", err)
	}
	if err := oobWrite(conn, []byte(ppDone), `"done"`); err != nil {
		return remote, fmt.Errorf("couldn't write \"done\": %w", err)
	}
	return remote, nil
}

// pingHelloMagic starts the line a ping responder writes to each TCP
// client; the number is the version of the exchange.
const pingHelloMagic = "VRDMA-PING/1"

// pingPeer is what a ping responder tells its clients: where its UD QP is.
type pingPeer struct {
	QPN  uint32
	QKey uint32
	GID  vrdma.GID
	Host string
}

// appendPingHello appends the responder's hello line:
// "VRDMA-PING/1 QPN QKEY GID HOST\n", numbers in hex, the GID as 32 digits.
func appendPingHello(b []byte, p pingPeer) []byte {
	host := strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, p.Host)
	if host == "" {
		host = "?hostname?"
	}
	return fmt.Appendf(b, "%s %06x %08x %s %s\n", pingHelloMagic, p.QPN, p.QKey, hex.EncodeToString(p.GID[:]), host)
}

// parsePingHello parses a hello line (without its newline).
func parsePingHello(line string) (pingPeer, error) {
	var p pingPeer
	f := strings.Fields(line)
	if len(f) > 0 && f[0] != pingHelloMagic && strings.HasPrefix(f[0], "VRDMA-PING/") {
		return p, fmt.Errorf("the responder speaks %s, this vrdma %s: run one vrdma version on both hosts", f[0], pingHelloMagic)
	}
	if len(f) == 0 || f[0] != pingHelloMagic {
		return p, fmt.Errorf("%.60q is not a vrdma ping responder's hello", line)
	}
	if len(f) != 5 {
		return p, fmt.Errorf("hello %q: want %s QPN QKEY GID HOST", line, pingHelloMagic)
	}
	qpn, err1 := strconv.ParseUint(f[1], 16, 24)
	qkey, err2 := strconv.ParseUint(f[2], 16, 32)
	gid, err3 := hex.DecodeString(f[3])
	if err := errors.Join(err1, err2, err3); err != nil || len(gid) != len(p.GID) {
		return p, fmt.Errorf("hello %q: the QPN (24 bits), Q_Key (32 bits) and GID (32 digits) must be hex", line)
	}
	p.QPN, p.QKey, p.Host = uint32(qpn), uint32(qkey), f[4]
	copy(p.GID[:], gid)
	return p, nil
}

// readPingHello reads the responder's hello from conn.
func readPingHello(conn net.Conn) (pingPeer, error) {
	_ = conn.SetReadDeadline(time.Now().Add(oobTimeout))
	line, err := bufio.NewReaderSize(io.LimitReader(conn, 512), 512).ReadString('\n')
	if err != nil && line == "" {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return pingPeer{}, fmt.Errorf("%s accepted the connection but sent no hello in %v", conn.RemoteAddr(), oobTimeout)
		}
		return pingPeer{}, fmt.Errorf("%s closed the connection without a hello", conn.RemoteAddr())
	}
	return parsePingHello(strings.TrimSuffix(line, "\n"))
}
