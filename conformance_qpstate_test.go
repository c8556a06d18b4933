package vrdma_test

import (
	"errors"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// fullAttr holds a valid value for every attribute, so that a transition's
// outcome depends only on its mask (and on the value a test then breaks).
func fullAttr(to ibv.QPState, peer vrdma.Endpoint) ibv.QPAttr {
	return ibv.QPAttr{
		State: to, AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic,
		PKeyIndex: 0, PortNum: 1, QKey: confQKey,
		AV:      ibv.AHAttr{DGID: peer.GID, HopLimit: 64, PortNum: 1},
		PathMTU: ibv.MTU1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7, RQPSN: peer.PSN, SQPSN: 0x123456,
		MaxRdAtomic: 4, MaxDestRdAtomic: 4, MinRNRTimer: 12, DestQPN: peer.QPN,
	}
}

func initMask(typ ibv.QPType) ibv.QPAttrMask {
	if typ == ibv.UD {
		return ibv.AttrState | ibv.AttrPKeyIndex | ibv.AttrPort | ibv.AttrQKey
	}
	return ibv.AttrState | ibv.AttrPKeyIndex | ibv.AttrPort | ibv.AttrAccessFlags
}

func rtrMask(typ ibv.QPType) ibv.QPAttrMask {
	switch typ {
	case ibv.UD:
		return ibv.AttrState
	case ibv.UC:
		return ibv.AttrState | ibv.AttrAV | ibv.AttrPathMTU | ibv.AttrDestQPN | ibv.AttrRQPSN
	}
	return ibv.AttrState | ibv.AttrAV | ibv.AttrPathMTU | ibv.AttrDestQPN | ibv.AttrRQPSN | ibv.AttrMaxDestRdAtomic | ibv.AttrMinRNRTimer
}

func rtsMask(typ ibv.QPType) ibv.QPAttrMask {
	if typ == ibv.RC {
		return ibv.AttrState | ibv.AttrSQPSN | ibv.AttrTimeout | ibv.AttrRetryCnt | ibv.AttrRNRRetry | ibv.AttrMaxQPRdAtomic
	}
	return ibv.AttrState | ibv.AttrSQPSN
}

func initAttr(typ ibv.QPType) *ibv.QPAttr {
	a := fullAttr(ibv.QPSInit, vrdma.Endpoint{})
	return &a
}

func rtrAttr(typ ibv.QPType, peer vrdma.Endpoint) *ibv.QPAttr {
	a := fullAttr(ibv.QPSRTR, peer)
	return &a
}

// stdMask is the mask of exactly the required attributes of a transition.
func stdMask(typ ibv.QPType, from, to ibv.QPState) ibv.QPAttrMask {
	switch {
	case from == ibv.QPSReset && to == ibv.QPSInit:
		return initMask(typ)
	case from == ibv.QPSInit && to == ibv.QPSRTR:
		return rtrMask(typ)
	case from == ibv.QPSRTR && to == ibv.QPSRTS:
		return rtsMask(typ)
	}
	return ibv.AttrState
}

// TestConformanceQPStateMachine drives QPs through Modify: the IBTA
// transitions, their required and allowed attributes, and value ranges.
func TestConformanceQPStateMachine(t *testing.T) { inEveryMode(t, conformanceQPStateMachine) }

func conformanceQPStateMachine(t *testing.T, e *confEnv) {
	const (
		reset = ibv.QPSReset
		initS = ibv.QPSInit
		rtr   = ibv.QPSRTR
		rts   = ibv.QPSRTS
		sqd   = ibv.QPSSQD
		errS  = ibv.QPSErr
	)
	rc, uc, ud := ibv.RC, ibv.UC, ibv.UD
	toRTS := []ibv.QPState{initS, rtr, rts}
	errState, errAttr := vrdma.ErrInvalidState, vrdma.ErrInvalidAttr
	cases := []struct {
		name      string
		typ       ibv.QPType
		path      []ibv.QPState // reached from RESET with the required masks
		to        ibv.QPState
		add, drop ibv.QPAttrMask
		set       func(*ibv.QPAttr)
		want      error
	}{
		// RESET -> INIT
		{name: "RESET->INIT", typ: rc, to: initS},
		{name: "RESET->INIT", typ: uc, to: initS},
		{name: "RESET->INIT", typ: ud, to: initS},
		{name: "RESET->INIT/missing ACCESS_FLAGS", typ: rc, to: initS, drop: ibv.AttrAccessFlags, want: errState},
		{name: "RESET->INIT/missing PORT", typ: uc, to: initS, drop: ibv.AttrPort, want: errState},
		{name: "RESET->INIT/missing PKEY_INDEX", typ: rc, to: initS, drop: ibv.AttrPKeyIndex, want: errState},
		{name: "RESET->INIT/missing QKEY", typ: ud, to: initS, drop: ibv.AttrQKey, want: errState},
		{name: "RESET->INIT/extra QKEY", typ: rc, to: initS, add: ibv.AttrQKey, want: errState},
		{name: "RESET->INIT/extra ACCESS_FLAGS", typ: ud, to: initS, add: ibv.AttrAccessFlags, want: errState},
		{name: "RESET->INIT/extra DEST_QPN", typ: rc, to: initS, add: ibv.AttrDestQPN, want: errState},
		{name: "RESET->INIT/extra TIMEOUT", typ: uc, to: initS, add: ibv.AttrTimeout, want: errState},
		{name: "RESET->INIT/port 2", typ: rc, to: initS, set: func(a *ibv.QPAttr) { a.PortNum = 2 }, want: errAttr},
		{name: "RESET->INIT/port 0", typ: ud, to: initS, set: func(a *ibv.QPAttr) { a.PortNum = 0 }, want: errAttr},
		{name: "RESET->INIT/pkey_index 1", typ: rc, to: initS, set: func(a *ibv.QPAttr) { a.PKeyIndex = 1 }, want: errAttr},
		{name: "RESET->INIT/unknown access flag", typ: rc, to: initS, set: func(a *ibv.QPAttr) { a.AccessFlags |= 1 << 7 }, want: errAttr},
		{name: "RESET->RESET", typ: rc, to: reset},
		{name: "RESET->RTR", typ: rc, to: rtr, add: rtrMask(rc), want: errState},
		{name: "RESET->RTS", typ: uc, to: rts, add: rtsMask(uc), want: errState},
		{name: "RESET->SQD", typ: rc, to: sqd, want: errState},
		// INIT -> INIT, RTR
		{name: "INIT->INIT", typ: rc, path: []ibv.QPState{initS}, to: initS},
		{name: "INIT->INIT/ACCESS_FLAGS", typ: rc, path: []ibv.QPState{initS}, to: initS, add: ibv.AttrAccessFlags},
		{name: "INIT->INIT/QKEY", typ: ud, path: []ibv.QPState{initS}, to: initS, add: ibv.AttrQKey},
		{name: "INIT->RTR", typ: rc, path: []ibv.QPState{initS}, to: rtr},
		{name: "INIT->RTR", typ: uc, path: []ibv.QPState{initS}, to: rtr},
		{name: "INIT->RTR", typ: ud, path: []ibv.QPState{initS}, to: rtr},
		{name: "INIT->RTR/optional ACCESS_FLAGS", typ: rc, path: []ibv.QPState{initS}, to: rtr, add: ibv.AttrAccessFlags},
		{name: "INIT->RTR/optional QKEY", typ: ud, path: []ibv.QPState{initS}, to: rtr, add: ibv.AttrQKey},
		{name: "INIT->RTR/missing DEST_QPN", typ: rc, path: []ibv.QPState{initS}, to: rtr, drop: ibv.AttrDestQPN, want: errState},
		{name: "INIT->RTR/missing AV", typ: uc, path: []ibv.QPState{initS}, to: rtr, drop: ibv.AttrAV, want: errState},
		{name: "INIT->RTR/missing PATH_MTU", typ: rc, path: []ibv.QPState{initS}, to: rtr, drop: ibv.AttrPathMTU, want: errState},
		{name: "INIT->RTR/missing RQ_PSN", typ: rc, path: []ibv.QPState{initS}, to: rtr, drop: ibv.AttrRQPSN, want: errState},
		{name: "INIT->RTR/missing MAX_DEST_RD_ATOMIC", typ: rc, path: []ibv.QPState{initS}, to: rtr, drop: ibv.AttrMaxDestRdAtomic, want: errState},
		{name: "INIT->RTR/missing MIN_RNR_TIMER", typ: rc, path: []ibv.QPState{initS}, to: rtr, drop: ibv.AttrMinRNRTimer, want: errState},
		{name: "INIT->RTR/extra MAX_DEST_RD_ATOMIC", typ: uc, path: []ibv.QPState{initS}, to: rtr, add: ibv.AttrMaxDestRdAtomic, want: errState},
		{name: "INIT->RTR/extra DEST_QPN", typ: ud, path: []ibv.QPState{initS}, to: rtr, add: ibv.AttrDestQPN, want: errState},
		{name: "INIT->RTR/extra SQ_PSN", typ: rc, path: []ibv.QPState{initS}, to: rtr, add: ibv.AttrSQPSN, want: errState},
		{name: "INIT->RTR/path MTU 6", typ: rc, path: []ibv.QPState{initS}, to: rtr, set: func(a *ibv.QPAttr) { a.PathMTU = 6 }, want: errAttr},
		{name: "INIT->RTR/path MTU 0", typ: uc, path: []ibv.QPState{initS}, to: rtr, set: func(a *ibv.QPAttr) { a.PathMTU = 0 }, want: errAttr},
		{name: "INIT->RTR/sgid_index 9", typ: rc, path: []ibv.QPState{initS}, to: rtr, set: func(a *ibv.QPAttr) { a.AV.SGIDIndex = 9 }, want: errAttr},
		{name: "INIT->RTR/dest QPN above 24 bits", typ: rc, path: []ibv.QPState{initS}, to: rtr, set: func(a *ibv.QPAttr) { a.DestQPN = 1 << 24 }, want: errAttr},
		{name: "INIT->RTR/rq_psn above 24 bits", typ: uc, path: []ibv.QPState{initS}, to: rtr, set: func(a *ibv.QPAttr) { a.RQPSN = 1 << 24 }, want: errAttr},
		{name: "INIT->RTR/max_dest_rd_atomic 129", typ: rc, path: []ibv.QPState{initS}, to: rtr, set: func(a *ibv.QPAttr) { a.MaxDestRdAtomic = 129 }, want: errAttr},
		{name: "INIT->RTR/min_rnr_timer 32", typ: rc, path: []ibv.QPState{initS}, to: rtr, set: func(a *ibv.QPAttr) { a.MinRNRTimer = 32 }, want: errAttr},
		{name: "INIT->RTS", typ: rc, path: []ibv.QPState{initS}, to: rts, add: rtsMask(rc), want: errState},
		{name: "INIT->SQD", typ: uc, path: []ibv.QPState{initS}, to: sqd, want: errState},
		// RTR -> RTS
		{name: "RTR->RTS", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts},
		{name: "RTR->RTS", typ: uc, path: []ibv.QPState{initS, rtr}, to: rts},
		{name: "RTR->RTS", typ: ud, path: []ibv.QPState{initS, rtr}, to: rts},
		{name: "RTR->RTS/optional MIN_RNR_TIMER", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, add: ibv.AttrMinRNRTimer},
		{name: "RTR->RTS/CUR_STATE", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, add: ibv.AttrCurState, set: func(a *ibv.QPAttr) { a.CurState = rtr }},
		{name: "RTR->RTS/wrong CUR_STATE", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, add: ibv.AttrCurState, set: func(a *ibv.QPAttr) { a.CurState = initS }, want: errState},
		{name: "RTR->RTS/missing TIMEOUT", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, drop: ibv.AttrTimeout, want: errState},
		{name: "RTR->RTS/missing RETRY_CNT", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, drop: ibv.AttrRetryCnt, want: errState},
		{name: "RTR->RTS/missing RNR_RETRY", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, drop: ibv.AttrRNRRetry, want: errState},
		{name: "RTR->RTS/missing MAX_QP_RD_ATOMIC", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, drop: ibv.AttrMaxQPRdAtomic, want: errState},
		{name: "RTR->RTS/missing SQ_PSN", typ: ud, path: []ibv.QPState{initS, rtr}, to: rts, drop: ibv.AttrSQPSN, want: errState},
		{name: "RTR->RTS/extra TIMEOUT", typ: uc, path: []ibv.QPState{initS, rtr}, to: rts, add: ibv.AttrTimeout, want: errState},
		{name: "RTR->RTS/extra PATH_MTU", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, add: ibv.AttrPathMTU, want: errState},
		{name: "RTR->RTS/retry_cnt 8", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, set: func(a *ibv.QPAttr) { a.RetryCnt = 8 }, want: errAttr},
		{name: "RTR->RTS/rnr_retry 8", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, set: func(a *ibv.QPAttr) { a.RNRRetry = 8 }, want: errAttr},
		{name: "RTR->RTS/timeout 32", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, set: func(a *ibv.QPAttr) { a.Timeout = 32 }, want: errAttr},
		{name: "RTR->RTS/max_rd_atomic 129", typ: rc, path: []ibv.QPState{initS, rtr}, to: rts, set: func(a *ibv.QPAttr) { a.MaxRdAtomic = 129 }, want: errAttr},
		{name: "RTR->RTS/sq_psn above 24 bits", typ: uc, path: []ibv.QPState{initS, rtr}, to: rts, set: func(a *ibv.QPAttr) { a.SQPSN = 1 << 24 }, want: errAttr},
		{name: "RTR->RTR", typ: rc, path: []ibv.QPState{initS, rtr}, to: rtr, want: errState},
		{name: "RTR->INIT", typ: rc, path: []ibv.QPState{initS, rtr}, to: initS, want: errState},
		// RTS, SQD
		{name: "RTS->RTS", typ: rc, path: toRTS, to: rts},
		{name: "RTS->RTS/MIN_RNR_TIMER", typ: rc, path: toRTS, to: rts, add: ibv.AttrMinRNRTimer},
		{name: "RTS->RTS/ACCESS_FLAGS", typ: uc, path: toRTS, to: rts, add: ibv.AttrAccessFlags},
		{name: "RTS->RTS/QKEY", typ: ud, path: toRTS, to: rts, add: ibv.AttrQKey},
		{name: "RTS->RTS/extra RETRY_CNT", typ: rc, path: toRTS, to: rts, add: ibv.AttrRetryCnt, want: errState},
		{name: "RTS->RTS/extra DEST_QPN", typ: rc, path: toRTS, to: rts, add: ibv.AttrDestQPN, want: errState},
		{name: "RTS->INIT", typ: rc, path: toRTS, to: initS, want: errState},
		{name: "RTS->RTR", typ: uc, path: toRTS, to: rtr, want: errState},
		{name: "RTS->SQD", typ: rc, path: toRTS, to: sqd},
		{name: "RTS->SQD", typ: uc, path: toRTS, to: sqd},
		{name: "RTS->SQD", typ: ud, path: toRTS, to: sqd},
		{name: "RTS->SQD->RTS", typ: rc, path: []ibv.QPState{initS, rtr, rts, sqd}, to: rts},
		{name: "RTS->SQD->RTS", typ: ud, path: []ibv.QPState{initS, rtr, rts, sqd}, to: rts},
		{name: "SQD->SQD/RETRY_CNT", typ: rc, path: []ibv.QPState{initS, rtr, rts, sqd}, to: sqd, add: ibv.AttrRetryCnt},
		{name: "SQD->SQD/retry_cnt 8", typ: rc, path: []ibv.QPState{initS, rtr, rts, sqd}, to: sqd, add: ibv.AttrRetryCnt, set: func(a *ibv.QPAttr) { a.RetryCnt = 8 }, want: errAttr},
		{name: "SQD->RTR", typ: rc, path: []ibv.QPState{initS, rtr, rts, sqd}, to: rtr, want: errState},
		// Any state -> ERR and RESET; ERR -> RESET -> INIT.
		{name: "RESET->ERR", typ: rc, to: errS},
		{name: "INIT->ERR", typ: uc, path: []ibv.QPState{initS}, to: errS},
		{name: "RTR->ERR", typ: ud, path: []ibv.QPState{initS, rtr}, to: errS},
		{name: "RTS->ERR", typ: rc, path: toRTS, to: errS},
		{name: "SQD->ERR", typ: rc, path: []ibv.QPState{initS, rtr, rts, sqd}, to: errS},
		{name: "ERR->ERR", typ: rc, path: []ibv.QPState{errS}, to: errS},
		{name: "INIT->RESET", typ: rc, path: []ibv.QPState{initS}, to: reset},
		{name: "RTS->RESET", typ: ud, path: toRTS, to: reset},
		{name: "ERR->RESET", typ: rc, path: []ibv.QPState{initS, errS}, to: reset},
		{name: "ERR->RESET->INIT", typ: rc, path: []ibv.QPState{initS, rtr, rts, errS, reset}, to: initS},
		{name: "ERR->RESET->INIT", typ: ud, path: []ibv.QPState{initS, rtr, rts, errS, reset}, to: initS},
		{name: "ERR->INIT", typ: rc, path: []ibv.QPState{errS}, to: initS, want: errState},
		{name: "ERR->RTS", typ: uc, path: []ibv.QPState{errS}, to: rts, add: rtsMask(uc), want: errState},
		{name: "ERR->ERR/extra attribute", typ: rc, path: []ibv.QPState{errS}, to: errS, add: ibv.AttrTimeout, want: errState},
	}
	for _, c := range cases {
		t.Run(c.typ.String()+"/"+c.name, func(t *testing.T) {
			x := e.newSide(t, e.a, qpSpec{typ: c.typ})
			peer := vrdma.Endpoint{GID: x.gid, QPN: 0x777, PSN: 0x654321}
			cur := ibv.QPSReset
			for _, s := range c.path {
				a := fullAttr(s, peer)
				if err := x.qp.Modify(&a, stdMask(c.typ, cur, s)); err != nil {
					t.Fatalf("reaching %v from %v: %v", s, cur, err)
				}
				cur = s
			}
			expectState(t, x.qp, cur)
			a := fullAttr(c.to, peer)
			if c.set != nil {
				c.set(&a)
			}
			mask := (stdMask(c.typ, cur, c.to) | c.add) &^ c.drop
			err := x.qp.Modify(&a, mask)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("%v->%v with %v: %v", cur, c.to, mask, err)
			case c.want == nil:
				if got := x.qp.State(); got != c.to {
					t.Fatalf("State() %v after the modify, want %v", got, c.to)
				}
				expectState(t, x.qp, c.to)
			default:
				other := errAttr
				if c.want == errAttr {
					other = errState
				}
				if !errors.Is(err, c.want) || errors.Is(err, other) {
					t.Fatalf("%v->%v with %v: got %v, want an error matching %v (and not %v)", cur, c.to, mask, err, c.want, other)
				}
				if err.Error() == "" {
					t.Fatal("empty error message")
				}
				expectState(t, x.qp, cur)
			}
		})
	}
	t.Run("Query returns the attributes set", func(t *testing.T) {
		x := e.newSide(t, e.a, qpSpec{typ: ibv.RC})
		peer := vrdma.Endpoint{GID: x.gid, QPN: 0x777, PSN: 0x654321}
		cur := ibv.QPSReset
		for _, s := range []ibv.QPState{initS, rtr, rts} {
			a := fullAttr(s, peer)
			if err := x.qp.Modify(&a, stdMask(ibv.RC, cur, s)); err != nil {
				t.Fatal(err)
			}
			cur = s
		}
		got, caps, err := x.qp.Query()
		if err != nil {
			t.Fatal(err)
		}
		want := fullAttr(rts, peer)
		want.QKey = 0 // not an RC attribute: never set
		if got.State != want.State || got.AccessFlags != want.AccessFlags || got.PortNum != want.PortNum || got.AV.DGID != want.AV.DGID ||
			got.PathMTU != want.PathMTU || got.Timeout != want.Timeout || got.RetryCnt != want.RetryCnt || got.RNRRetry != want.RNRRetry ||
			got.RQPSN != want.RQPSN || got.SQPSN != want.SQPSN || got.MaxRdAtomic != want.MaxRdAtomic ||
			got.MaxDestRdAtomic != want.MaxDestRdAtomic || got.MinRNRTimer != want.MinRNRTimer || got.DestQPN != want.DestQPN {
			t.Fatalf("query_qp\n got %+v\nwant %+v", got, want)
		}
		if caps.MaxSendWR < confCap.MaxSendWR || caps.MaxRecvWR < confCap.MaxRecvWR || caps.MaxSendSGE < confCap.MaxSendSGE ||
			caps.MaxRecvSGE < confCap.MaxRecvSGE || caps.MaxInlineData < confCap.MaxInlineData {
			t.Fatalf("caps %+v below those asked %+v", caps, confCap)
		}
	})
}
