package engine

// QP1, the general services interface: management datagrams — the IBTA
// CM's MADs rdma_cm peers exchange (package ibcm, docs/design/cm-mads.md) —
// arrive on it and leave from it. The engine only carries them: a handler
// the daemon sets gets each one, and SendGSI sends one.

import (
	"errors"
	"fmt"

	"github.com/vrdma/vrdma/internal/wire"
)

// GSIQPN is QP1's number.
const GSIQPN = 1

// GSIQKey is QP1's Q_Key (IBTA 10.2.4.1): every GSI datagram carries it.
const GSIQKey = 0x80010000

// MADSize is the size of a management datagram.
const MADSize = 256

// GSIDatagram is a management datagram that reached QP1 through a link.
type GSIDatagram struct {
	Link     Link
	Src, Dst [16]byte // the GIDs it came from and to (IPv4 as ::ffff:a.b.c.d)
	SrcQP    uint32   // the sender's QP (1 for a peer's CM)
	PKey     uint16
	MAD      []byte // MADSize bytes, valid only during the handler's call
}

// gsiHandler is what SetGSIHandler set.
type gsiHandler struct{ f func(*GSIDatagram) }

// SetGSIHandler sets the function each datagram to QP1 goes to; nil drops
// them (counted as for an unknown QP). It runs on the link's receive
// goroutine, so it must not block: it copies what it keeps.
func (h *Host) SetGSIHandler(f func(*GSIDatagram)) {
	if f == nil {
		h.gsi.Store(nil)
		return
	}
	h.gsi.Store(&gsiHandler{f})
}

// deliverGSI hands a packet to QP1 to the handler, after the checks a GSI
// makes: a UD SEND-only with the GSI Q_Key and one MAD of payload.
func (r *receiver) deliverGSI(p *wire.Packet) {
	ctr := &r.wire
	gh := r.h.gsi.Load()
	switch {
	case gh == nil || p.Opcode != wire.TransportUD|wire.OpSendOnly:
		ctr.UnknownQP.Add(1)
		return
	case p.DETH.QKey != GSIQKey:
		ctr.BadKey.Add(1)
		return
	case len(p.Payload) != MADSize:
		ctr.Malformed.Add(1)
		return
	}
	ctr.GSI.Add(1)
	d := &r.gsiDatagram
	*d = GSIDatagram{Link: r.link, Src: addrGID(p.Src), Dst: addrGID(p.Dst), SrcQP: p.DETH.SrcQP, PKey: p.PKey, MAD: p.Payload}
	gh.f(d)
}

// ErrNoRoute is matched by SendGSI's error when no link reaches the
// destination from the source GID.
var ErrNoRoute = errors.New("no link between the GIDs")

// GSIRoute returns nil if SendGSI from sgid to dgid has a link to go on,
// else an error matching ErrNoRoute.
func (h *Host) GSIRoute(sgid, dgid [16]byte) error {
	l, _ := h.route(sgid, dgid)
	if src, dst := gidAddr(sgid), gidAddr(dgid); l == nil || src.Is4() != dst.Is4() {
		return fmt.Errorf("engine: QP1 from %v to %v: %w", src, dst, ErrNoRoute)
	}
	return nil
}

// SendGSI sends mad (MADSize bytes) from QP1 at sgid, one of the links'
// GIDs, to QP dqp (1 for a peer's CM) at dgid, on the link the host routes
// between them.
func (h *Host) SendGSI(sgid, dgid [16]byte, dqp uint32, mad []byte) error {
	if len(mad) != MADSize {
		return fmt.Errorf("engine: a MAD of %d bytes, want %d", len(mad), MADSize)
	}
	l, _ := h.route(sgid, dgid)
	src, dst := gidAddr(sgid), gidAddr(dgid)
	if l == nil || src.Is4() != dst.Is4() {
		return fmt.Errorf("engine: QP1 from %v to %v: %w", src, dst, ErrNoRoute)
	}
	p := wire.Packet{
		Src: src, Dst: dst, TOS: h.tos(l), TTL: 64, DF: true,
		SrcPort: rxeUDSourcePort(GSIQPN), DstPort: wire.UDPPort,
		Opcode: wire.TransportUD | wire.OpSendOnly, PKey: DefaultPKey, DestQP: dqp, AckReq: true,
		PSN:  (h.gsiPSN.Add(1) - 1) & 0xffffff,
		DETH: wire.DETH{QKey: GSIQKey, SrcQP: GSIQPN},
	}
	if src.Is4() {
		p.IPID = nextIPID()
	}
	frame := wire.AppendHeaders(make([]byte, 0, 128+MADSize), &p, MADSize)
	frame = append(frame, mad...)
	frame = wire.AppendTrailer(frame)
	if _, err := l.WriteBatch([][]byte{frame}); err != nil {
		return fmt.Errorf("engine: sending a MAD on %s: %w", l.Name(), err)
	}
	return nil
}
