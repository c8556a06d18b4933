package vrdma

import (
	"encoding/hex"
	"fmt"

	"github.com/vrdma/vrdma/ibv"
)

// Endpoint is what two sides exchange to connect a queue pair: the LID,
// GID, QPN and first PSN of each (what ibv_rc_pingpong sends over TCP).
// An endpoint with a zero GID is reached by its LID (AHAttr.DLID).
type Endpoint struct {
	LID uint16
	GID GID
	QPN uint32
	PSN uint32
}

// String formats e as ibv_rc_pingpong's 52-byte message: LID:QPN:PSN:GID.
func (e Endpoint) String() string {
	return fmt.Sprintf("%04x:%06x:%06x:%s", e.LID, e.QPN, e.PSN, hex.EncodeToString(e.GID[:]))
}

// ParseEndpoint parses the form String writes.
func ParseEndpoint(s string) (Endpoint, error) {
	var e Endpoint
	var gid string
	if n, err := fmt.Sscanf(s, "%x:%x:%x:%s", &e.LID, &e.QPN, &e.PSN, &gid); n != 4 || err != nil {
		return e, fmt.Errorf("vrdma: endpoint %q: want LID:QPN:PSN:GID in hex (0000:000011:abcdef:fe80...): %w", s, ErrInvalidArgument)
	}
	b, err := hex.DecodeString(gid)
	if err != nil || len(b) != 16 {
		return e, fmt.Errorf("vrdma: endpoint %q: the GID must be 32 hex digits: %w", s, ErrInvalidArgument)
	}
	copy(e.GID[:], b)
	return e, nil
}

// Endpoint returns this QP's side of a connection, with GID index gidIndex
// and the port's LID.
func (q *QP) Endpoint(gidIndex int) (Endpoint, error) {
	p, err := q.d.QueryPort(1)
	if err != nil {
		return Endpoint{}, err
	}
	if gidIndex < 0 || gidIndex >= len(p.GIDs) {
		return Endpoint{}, errorf("query_gid", ErrInvalidArgument, "GID index %d is outside the table of %d entries", gidIndex, len(p.GIDs))
	}
	return Endpoint{LID: p.LID, GID: p.GIDs[gidIndex], QPN: q.qpn, PSN: q.psn}, nil
}

// ConnectOptions are the attributes Connect sets; DefaultConnectOptions
// gives values that suit most programs, and a nil *ConnectOptions means
// them. The zero value is not the default: its Access lets the peer do
// nothing (its RDMA WRITEs, READs and atomics complete with
// WCRemInvReqErr), its Timeout waits for ever and it never retries. Start
// from DefaultConnectOptions and change what differs.
type ConnectOptions struct {
	Access      ibv.Access // what the remote side may do (RC/UC); 0 allows no RDMA WRITE, READ or atomic
	PathMTU     ibv.MTU    // 0: the port's active MTU
	GIDIndex    uint8
	Timeout     uint8 // 4.096 µs × 2^Timeout; 0 = wait for ever
	RetryCnt    uint8
	RNRRetry    uint8 // 7 = retry for ever
	MinRNRTimer uint8
	MaxRdAtomic uint8
	QKey        uint32 // UD
}

// DefaultConnectOptions: all remote access, timeout 14 (~67 ms), seven
// retries, infinite RNR retries, min_rnr_timer 12 (0.64 ms), 16 reads or
// atomics in flight, Q_Key 0x11111111.
func DefaultConnectOptions() ConnectOptions {
	return ConnectOptions{
		Access: ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic, Timeout: 14, RetryCnt: 7,
		RNRRetry: 7, MinRNRTimer: 12, MaxRdAtomic: 16, QKey: 0x11111111,
	}
}

// Connect takes the QP from RESET to RTS: for RC and UC, connected to
// remote (at its GID, or by its LID if its GID is zero); for UD, ready to
// send anywhere with Q_Key o.QKey (remote is ignored). A nil o means
// DefaultConnectOptions.
func (q *QP) Connect(remote Endpoint, o *ConnectOptions) error {
	return q.connect(remote, remote.PSN, q.psn, o)
}

// connect is Connect with the first PSN this QP expects (rqPSN) and the
// first it sends (sqPSN) given: Connect's are the peer's and this QP's
// own, as programs that exchange endpoints by hand use them; the
// connection manager's are the other way round (cmConnect).
func (q *QP) connect(remote Endpoint, rqPSN, sqPSN uint32, o *ConnectOptions) error {
	if o == nil {
		d := DefaultConnectOptions()
		o = &d
	}
	mtu := o.PathMTU
	if mtu == 0 {
		p, err := q.d.QueryPort(1)
		if err != nil {
			return err
		}
		mtu = p.ActiveMTU
	}
	init := ibv.QPAttr{State: ibv.QPSInit, PKeyIndex: 0, PortNum: 1, AccessFlags: o.Access, QKey: o.QKey}
	mask := ibv.AttrState | ibv.AttrPKeyIndex | ibv.AttrPort
	if q.typ == ibv.UD {
		mask |= ibv.AttrQKey
	} else {
		mask |= ibv.AttrAccessFlags
	}
	if err := q.Modify(&init, mask); err != nil {
		return err
	}
	rtr := ibv.QPAttr{State: ibv.QPSRTR}
	mask = ibv.AttrState
	if q.typ != ibv.UD {
		rtr.PathMTU, rtr.DestQPN, rtr.RQPSN = mtu, remote.QPN, rqPSN
		rtr.AV = ibv.AHAttr{DGID: remote.GID, DLID: remote.LID, SGIDIndex: o.GIDIndex, HopLimit: 64, PortNum: 1}
		mask |= ibv.AttrAV | ibv.AttrPathMTU | ibv.AttrDestQPN | ibv.AttrRQPSN
		if q.typ == ibv.RC {
			rtr.MaxDestRdAtomic, rtr.MinRNRTimer = o.MaxRdAtomic, o.MinRNRTimer
			mask |= ibv.AttrMaxDestRdAtomic | ibv.AttrMinRNRTimer
		}
	}
	if err := q.Modify(&rtr, mask); err != nil {
		return err
	}
	rts := ibv.QPAttr{State: ibv.QPSRTS, SQPSN: sqPSN}
	mask = ibv.AttrState | ibv.AttrSQPSN
	if q.typ == ibv.RC {
		rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = o.Timeout, o.RetryCnt, o.RNRRetry, o.MaxRdAtomic
		mask |= ibv.AttrTimeout | ibv.AttrRetryCnt | ibv.AttrRNRRetry | ibv.AttrMaxQPRdAtomic
	}
	return q.Modify(&rts, mask)
}

// cmConnect connects q to the peer a connection manager exchange named,
// with the PSNs as IBTA's CM carries them (and Linux's rdma_cm sets
// them): the Starting PSN each side sends in its REQ or REP is the first
// PSN it expects to receive, so this QP expects its own (q.psn, which the
// daemon sent) and sends from the peer's.
func (q *QP) cmConnect(remote Endpoint, o *ConnectOptions) error {
	return q.connect(remote, q.psn, remote.PSN, o)
}
