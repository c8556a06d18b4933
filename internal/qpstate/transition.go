package qpstate

import (
	"errors"
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
)

// ErrInvalidTransition is matched (errors.Is) by every *Error about an
// impossible transition or a wrong attribute mask.
var ErrInvalidTransition = errors.New("invalid QP state transition")

// ErrInvalidAttr is matched by every *Error about an attribute's value.
var ErrInvalidAttr = errors.New("invalid QP attribute")

// Error explains why a modify was refused.
type Error struct {
	Type     abi.QPType
	From, To abi.QPState
	Missing  Mask // required attributes the mask lacks
	Extra    Mask // attributes the transition does not take
	Attr     Mask // the attribute whose value is out of range
	Reason   string
}

func (e *Error) Error() string {
	head := fmt.Sprintf("%v QP %v->%v", e.Type, e.From, e.To)
	switch {
	case e.Attr != 0:
		return fmt.Sprintf("%s: attribute %v: %s", head, e.Attr, e.Reason)
	case e.Missing != 0:
		return fmt.Sprintf("%s: missing required attributes %v: set them and their mask bits", head, e.Missing)
	case e.Extra != 0:
		return fmt.Sprintf("%s: attributes %v are not allowed in this transition: clear their mask bits", head, e.Extra)
	}
	return fmt.Sprintf("%s: %s", head, e.Reason)
}

// Is makes errors.Is match ErrInvalidTransition or ErrInvalidAttr.
func (e *Error) Is(target error) bool {
	if e.Attr != 0 {
		return target == ErrInvalidAttr
	}
	return target == ErrInvalidTransition
}

type rule struct {
	ok       bool
	required [11]Mask // indexed by QP type (RC=2, UC=3, UD=4, XRC_SEND=9, XRC_RECV=10)
	optional [11]Mask
}

const (
	rc = abi.QPTypeRC
	uc = abi.QPTypeUC
	ud = abi.QPTypeUD
	xi = abi.QPTypeXRCSend // initiator
	xt = abi.QPTypeXRCRecv // target
)

// table[from][to], after IBTA 10.3.1 and Linux's qp_state_table.
var table [7][7]rule

func init() {
	set := func(from, to abi.QPState, req, opt map[abi.QPType]Mask) {
		r := rule{ok: true}
		for t, m := range req {
			r.required[t] = m
		}
		for t, m := range opt {
			r.optional[t] = m
		}
		table[from][to] = r
	}
	all := func(m Mask) map[abi.QPType]Mask { return map[abi.QPType]Mask{rc: m, uc: m, ud: m, xi: m, xt: m} }
	none := all(0)
	states := []abi.QPState{abi.QPStateReset, abi.QPStateInit, abi.QPStateRTR, abi.QPStateRTS, abi.QPStateSQD, abi.QPStateSQE, abi.QPStateErr}
	for _, s := range states {
		set(s, abi.QPStateReset, none, none)
		set(s, abi.QPStateErr, none, none)
	}
	set(abi.QPStateReset, abi.QPStateInit,
		map[abi.QPType]Mask{rc: MaskPKeyIndex | MaskPort | MaskAccessFlags, uc: MaskPKeyIndex | MaskPort | MaskAccessFlags, ud: MaskPKeyIndex | MaskPort | MaskQKey,
			xi: MaskPKeyIndex | MaskPort | MaskAccessFlags, xt: MaskPKeyIndex | MaskPort | MaskAccessFlags}, none)
	set(abi.QPStateInit, abi.QPStateInit, none,
		map[abi.QPType]Mask{rc: MaskPKeyIndex | MaskPort | MaskAccessFlags, uc: MaskPKeyIndex | MaskPort | MaskAccessFlags, ud: MaskPKeyIndex | MaskPort | MaskQKey,
			xi: MaskPKeyIndex | MaskPort | MaskAccessFlags, xt: MaskPKeyIndex | MaskPort | MaskAccessFlags})
	set(abi.QPStateInit, abi.QPStateRTR,
		map[abi.QPType]Mask{
			rc: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN | MaskMaxDestRdAtomic | MaskMinRNRTimer,
			uc: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN,
			// Linux's qp_state_table: the initiator never responds, so it
			// needs neither responder attribute.
			xi: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN,
			xt: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN | MaskMaxDestRdAtomic | MaskMinRNRTimer,
		},
		map[abi.QPType]Mask{
			rc: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
			uc: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
			ud: MaskPKeyIndex | MaskQKey,
			xi: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
			xt: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
		})
	set(abi.QPStateRTR, abi.QPStateRTS,
		map[abi.QPType]Mask{
			rc: MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskSQPSN | MaskMaxQPRdAtomic,
			uc: MaskSQPSN,
			ud: MaskSQPSN,
			// The target never requests: no retries, no outstanding READs.
			xi: MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskSQPSN | MaskMaxQPRdAtomic,
			xt: MaskTimeout | MaskSQPSN,
		},
		map[abi.QPType]Mask{
			rc: MaskCurState | MaskAltPath | MaskAccessFlags | MaskMinRNRTimer | MaskPathMigState,
			uc: MaskCurState | MaskAltPath | MaskAccessFlags | MaskPathMigState,
			ud: MaskCurState | MaskQKey,
			xi: MaskCurState | MaskAltPath | MaskAccessFlags | MaskPathMigState,
			xt: MaskCurState | MaskAltPath | MaskAccessFlags | MaskMinRNRTimer | MaskPathMigState,
		})
	rtsOpt := map[abi.QPType]Mask{
		rc: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState | MaskMinRNRTimer,
		uc: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState,
		ud: MaskCurState | MaskQKey,
		xi: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState,
		xt: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState | MaskMinRNRTimer,
	}
	set(abi.QPStateRTS, abi.QPStateRTS, none, rtsOpt)
	set(abi.QPStateRTS, abi.QPStateSQD, none, all(MaskEnSQDAsync))
	set(abi.QPStateSQD, abi.QPStateRTS, none, rtsOpt)
	set(abi.QPStateSQD, abi.QPStateSQD, none, map[abi.QPType]Mask{
		rc: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskMinRNRTimer | MaskPathMigState | MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic | MaskMaxDestRdAtomic,
		uc: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskPathMigState,
		ud: MaskPKeyIndex | MaskQKey,
		xi: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskPathMigState | MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic,
		xt: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskMinRNRTimer | MaskPathMigState | MaskMaxDestRdAtomic,
	})
	set(abi.QPStateSQE, abi.QPStateRTS, map[abi.QPType]Mask{}, map[abi.QPType]Mask{
		uc: MaskCurState | MaskAccessFlags,
		ud: MaskCurState | MaskQKey,
	})
	// RC has no SQE->RTS: an RC send-queue error takes the QP to ERR.
	table[abi.QPStateSQE][abi.QPStateRTS].ok = true
}

// Check validates a modify of a QP of type t from state cur with attr/mask.
// It returns the target state.
func Check(t abi.QPType, cur abi.QPState, attr *Attr, mask Mask, lim Limits) (abi.QPState, error) {
	if !t.Valid() && !t.IsXRC() {
		return cur, &Error{Type: t, From: cur, To: cur, Reason: "unknown QP type"}
	}
	to := cur
	if mask&MaskState != 0 {
		to = attr.State
	}
	if mask&MaskCurState != 0 && attr.CurState != cur {
		return cur, &Error{Type: t, From: cur, To: to, Reason: fmt.Sprintf("cur_qp_state says %v but the QP is in %v", attr.CurState, cur)}
	}
	if int(cur) >= len(table) || int(to) >= len(table) {
		return cur, &Error{Type: t, From: cur, To: to, Reason: "unknown state"}
	}
	r := table[cur][to]
	if !r.ok || (cur == abi.QPStateSQE && to == abi.QPStateRTS && (t == rc || t.IsXRC())) {
		return cur, &Error{Type: t, From: cur, To: to, Reason: "the standard defines no such transition"}
	}
	req, opt := r.required[t], r.optional[t]
	given := mask &^ (MaskState | MaskCurState)
	if miss := req &^ given; miss != 0 {
		return cur, &Error{Type: t, From: cur, To: to, Missing: miss}
	}
	if extra := given &^ (req | opt | MaskCurState); extra != 0 {
		return cur, &Error{Type: t, From: cur, To: to, Extra: extra}
	}
	if err := checkValues(t, attr, given, lim); err != nil {
		err.Type, err.From, err.To = t, cur, to
		return cur, err
	}
	return to, nil
}

func checkValues(t abi.QPType, a *Attr, m Mask, lim Limits) *Error {
	bad := func(which Mask, why string) *Error { return &Error{Attr: which, Reason: why} }
	if m&MaskPort != 0 && a.PortNum != 1 {
		return bad(MaskPort, fmt.Sprintf("port %d does not exist: vrdma adapters have one port, number 1", a.PortNum))
	}
	if m&MaskPKeyIndex != 0 && int(a.PKeyIndex) >= lim.PKeyTableLen {
		return bad(MaskPKeyIndex, fmt.Sprintf("index %d is outside the P_Key table of %d entries", a.PKeyIndex, lim.PKeyTableLen))
	}
	// IBV_ACCESS_ON_DEMAND among a QP's access flags is accepted and
	// means nothing, as on rdma_rxe and mlx5 (pyverbs' ODP tests set it).
	if m&MaskAccessFlags != 0 && a.AccessFlags&^(abi.AccessAll|abi.AccessOnDemand) != 0 {
		return bad(MaskAccessFlags, fmt.Sprintf("unknown access flags %v", a.AccessFlags))
	}
	// A path MTU above the port's active MTU is accepted, as rdma_rxe
	// accepts anything up to its port's max_mtu (4096): packets carry the
	// smaller of the two (qperf asks for 2048 whatever the port's MTU).
	if m&MaskPathMTU != 0 && !a.PathMTU.Valid() {
		return bad(MaskPathMTU, fmt.Sprintf("path MTU %v must be one of 256..4096 (IBV_MTU_256..IBV_MTU_4096)", a.PathMTU))
	}
	if m&MaskAV != 0 && int(a.AV.SGIDIndex) >= lim.GIDTableLen {
		return bad(MaskAV, fmt.Sprintf("sgid_index %d is outside the GID table of %d entries", a.AV.SGIDIndex, lim.GIDTableLen))
	}
	if m&MaskDestQPN != 0 && a.DestQPN > 0xFFFFFF {
		return bad(MaskDestQPN, fmt.Sprintf("QPN 0x%x does not fit in 24 bits", a.DestQPN))
	}
	connected := t == abi.QPTypeRC || t == abi.QPTypeUC || t.IsXRC()
	if connected && m&MaskDestQPN != 0 && (a.DestQPN <= 1 || a.DestQPN == 0xFFFFFF) {
		return bad(MaskDestQPN, fmt.Sprintf("QPN 0x%x cannot be a connected QP's peer: 0 and 1 are the subnet management and general services QPs, 0xffffff is multicast", a.DestQPN))
	}
	if connected && m&MaskAV != 0 && a.AV.DGID[0] == 0xff {
		return bad(MaskAV, "a multicast destination GID (ff00::/8) is for UD QPs only: give the peer's unicast GID")
	}
	if m&MaskRQPSN != 0 && a.RQPSN > 0xFFFFFF {
		return bad(MaskRQPSN, fmt.Sprintf("PSN 0x%x does not fit in 24 bits", a.RQPSN))
	}
	if m&MaskSQPSN != 0 && a.SQPSN > 0xFFFFFF {
		return bad(MaskSQPSN, fmt.Sprintf("PSN 0x%x does not fit in 24 bits", a.SQPSN))
	}
	if m&MaskTimeout != 0 && a.Timeout > 31 {
		return bad(MaskTimeout, fmt.Sprintf("timeout %d must be 0..31 (4.096 µs × 2^timeout; 0 = infinite)", a.Timeout))
	}
	if m&MaskRetryCnt != 0 && a.RetryCnt > 7 {
		return bad(MaskRetryCnt, fmt.Sprintf("retry_cnt %d must be 0..7", a.RetryCnt))
	}
	if m&MaskRNRRetry != 0 && a.RNRRetry > 7 {
		return bad(MaskRNRRetry, fmt.Sprintf("rnr_retry %d must be 0..7 (7 = infinite)", a.RNRRetry))
	}
	if m&MaskMinRNRTimer != 0 && a.MinRNRTimer > 31 {
		return bad(MaskMinRNRTimer, fmt.Sprintf("min_rnr_timer %d must be 0..31", a.MinRNRTimer))
	}
	if m&MaskMaxQPRdAtomic != 0 && int(a.MaxRdAtomic) > lim.MaxRdAtomic {
		return bad(MaskMaxQPRdAtomic, fmt.Sprintf("max_rd_atomic %d is above the device's max_qp_rd_atom %d", a.MaxRdAtomic, lim.MaxRdAtomic))
	}
	if m&MaskMaxDestRdAtomic != 0 && int(a.MaxDestRdAtomic) > lim.MaxRdAtomic {
		return bad(MaskMaxDestRdAtomic, fmt.Sprintf("max_dest_rd_atomic %d is above the device's max_qp_init_rd_atom %d", a.MaxDestRdAtomic, lim.MaxRdAtomic))
	}
	return nil
}
