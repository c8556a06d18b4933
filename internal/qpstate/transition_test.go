package qpstate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
)

var (
	types  = []abi.QPType{abi.QPTypeRC, abi.QPTypeUC, abi.QPTypeUD, abi.QPTypeXRCSend, abi.QPTypeXRCRecv}
	states = []abi.QPState{abi.QPStateReset, abi.QPStateInit, abi.QPStateRTR, abi.QPStateRTS, abi.QPStateSQD, abi.QPStateSQE, abi.QPStateErr}
)

var testLimits = Limits{PKeyTableLen: 4, GIDTableLen: 2, MaxRdAtomic: 16}

// allMask is every attribute bit Check knows, except STATE and CUR_STATE.
const allMask = (MaskDestQPN<<1 - 1) &^ (MaskState | MaskCurState)

// goodAttr has an in-range value for every attribute.
func goodAttr(to, cur abi.QPState) Attr {
	return Attr{
		State: to, CurState: cur, AccessFlags: abi.AccessAll, PKeyIndex: 3, PortNum: 1, QKey: 0x11111111,
		AV:      AddressVector{DGID: [16]byte{0xfe, 0x80, 15: 1}, SGIDIndex: 1, HopLimit: 64, SL: 0, PortNum: 1},
		PathMTU: abi.MTU4096, Timeout: 31, RetryCnt: 7, RNRRetry: 7, RQPSN: 0xFFFFFF, SQPSN: 0xFFFFFF,
		MaxRdAtomic: 16, MaxDestRdAtomic: 16, MinRNRTimer: 31, DestQPN: 0xFFFFFE,
	}
}

type transition struct {
	from, to abi.QPState
	required map[abi.QPType]Mask // a type absent from both maps cannot make the transition
	optional map[abi.QPType]Mask
}

// ibta is the transition table of IBTA 10.3.1 (and Linux's qp_state_table),
// written out independently of the package's own table.
func ibta() []transition {
	all := func(m Mask) map[abi.QPType]Mask {
		return map[abi.QPType]Mask{abi.QPTypeRC: m, abi.QPTypeUC: m, abi.QPTypeUD: m, abi.QPTypeXRCSend: m, abi.QPTypeXRCRecv: m}
	}
	rc, uc, ud := abi.QPTypeRC, abi.QPTypeUC, abi.QPTypeUD
	xi, xt := abi.QPTypeXRCSend, abi.QPTypeXRCRecv // Linux's IB_QPT_XRC_INI, IB_QPT_XRC_TGT
	initAttrs := map[abi.QPType]Mask{
		rc: MaskPKeyIndex | MaskPort | MaskAccessFlags,
		uc: MaskPKeyIndex | MaskPort | MaskAccessFlags,
		ud: MaskPKeyIndex | MaskPort | MaskQKey,
		xi: MaskPKeyIndex | MaskPort | MaskAccessFlags,
		xt: MaskPKeyIndex | MaskPort | MaskAccessFlags,
	}
	rtsOpt := map[abi.QPType]Mask{
		rc: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState | MaskMinRNRTimer,
		uc: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState,
		ud: MaskCurState | MaskQKey,
		xi: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState,
		xt: MaskCurState | MaskAccessFlags | MaskAltPath | MaskPathMigState | MaskMinRNRTimer,
	}
	ts := []transition{
		{abi.QPStateReset, abi.QPStateInit, initAttrs, all(0)},
		{abi.QPStateInit, abi.QPStateInit, all(0), initAttrs},
		{abi.QPStateInit, abi.QPStateRTR,
			map[abi.QPType]Mask{
				rc: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN | MaskMaxDestRdAtomic | MaskMinRNRTimer,
				uc: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN,
				ud: 0,
				xi: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN,
				xt: MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN | MaskMaxDestRdAtomic | MaskMinRNRTimer,
			},
			map[abi.QPType]Mask{
				rc: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
				uc: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
				ud: MaskPKeyIndex | MaskQKey,
				xi: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
				xt: MaskAltPath | MaskAccessFlags | MaskPKeyIndex,
			}},
		{abi.QPStateRTR, abi.QPStateRTS,
			map[abi.QPType]Mask{
				rc: MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskSQPSN | MaskMaxQPRdAtomic,
				uc: MaskSQPSN,
				ud: MaskSQPSN,
				xi: MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskSQPSN | MaskMaxQPRdAtomic,
				xt: MaskTimeout | MaskSQPSN,
			},
			map[abi.QPType]Mask{
				rc: MaskCurState | MaskAltPath | MaskAccessFlags | MaskMinRNRTimer | MaskPathMigState,
				uc: MaskCurState | MaskAltPath | MaskAccessFlags | MaskPathMigState,
				ud: MaskCurState | MaskQKey,
				xi: MaskCurState | MaskAltPath | MaskAccessFlags | MaskPathMigState,
				xt: MaskCurState | MaskAltPath | MaskAccessFlags | MaskMinRNRTimer | MaskPathMigState,
			}},
		{abi.QPStateRTS, abi.QPStateRTS, all(0), rtsOpt},
		{abi.QPStateRTS, abi.QPStateSQD, all(0), all(MaskEnSQDAsync)},
		{abi.QPStateSQD, abi.QPStateRTS, all(0), rtsOpt},
		{abi.QPStateSQD, abi.QPStateSQD, all(0), map[abi.QPType]Mask{
			rc: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskMinRNRTimer | MaskPathMigState |
				MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic | MaskMaxDestRdAtomic,
			uc: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskPathMigState,
			ud: MaskPKeyIndex | MaskQKey,
			xi: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskPathMigState |
				MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic,
			xt: MaskAV | MaskAltPath | MaskAccessFlags | MaskPKeyIndex | MaskMinRNRTimer | MaskPathMigState |
				MaskMaxDestRdAtomic,
		}},
		// SQE->RTS exists for UC and UD only: an RC (or XRC) send-queue error goes to ERR.
		{abi.QPStateSQE, abi.QPStateRTS,
			map[abi.QPType]Mask{uc: 0, ud: 0},
			map[abi.QPType]Mask{uc: MaskCurState | MaskAccessFlags, ud: MaskCurState | MaskQKey}},
	}
	for _, s := range states {
		ts = append(ts, transition{s, abi.QPStateReset, all(0), all(0)}, transition{s, abi.QPStateErr, all(0), all(0)})
	}
	return ts
}

func lookup(from, to abi.QPState, t abi.QPType) (req, opt Mask, ok bool) {
	for _, tr := range ibta() {
		if tr.from == from && tr.to == to {
			req, ok = tr.required[t]
			opt = tr.optional[t]
			return req, opt, ok
		}
	}
	return 0, 0, false
}

func bits(m Mask) []Mask {
	var out []Mask
	for i := 0; i < 32; i++ {
		if m&(1<<i) != 0 {
			out = append(out, 1<<i)
		}
	}
	return out
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *qpstate.Error", err, err)
	}
	return e
}

func TestCheckValidTransitions(t *testing.T) {
	for _, tr := range ibta() {
		for _, typ := range types {
			req, ok := tr.required[typ]
			if !ok {
				continue
			}
			opt := tr.optional[typ]
			name := fmt.Sprintf("%v/%v->%v", typ, tr.from, tr.to)
			t.Run(name, func(t *testing.T) {
				attr := goodAttr(tr.to, tr.from)
				for _, mask := range []Mask{req, req | opt} {
					got, err := Check(typ, tr.from, &attr, MaskState|mask, testLimits)
					if err != nil {
						t.Fatalf("mask %v: %v", MaskState|mask, err)
					}
					if got != tr.to {
						t.Fatalf("mask %v: state %v, want %v", MaskState|mask, got, tr.to)
					}
				}
				// Each required attribute left out is reported missing.
				for _, b := range bits(req) {
					got, err := Check(typ, tr.from, &attr, MaskState|(req|opt)&^b, testLimits)
					if !errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrInvalidAttr) {
						t.Fatalf("without %v: err = %v, want ErrInvalidTransition", b, err)
					}
					e := asError(t, err)
					if e.Missing != b || e.Extra != 0 || e.Attr != 0 {
						t.Errorf("without %v: Missing=%v Extra=%v Attr=%v", b, e.Missing, e.Extra, e.Attr)
					}
					if e.Type != typ || e.From != tr.from || e.To != tr.to {
						t.Errorf("without %v: error names %v %v->%v", b, e.Type, e.From, e.To)
					}
					if got != tr.from {
						t.Errorf("a refused modify returned state %v, want %v", got, tr.from)
					}
					if !strings.Contains(err.Error(), "missing") || !strings.Contains(err.Error(), b.String()) {
						t.Errorf("message %q does not name the missing %v", err, b)
					}
				}
				// Each attribute the transition does not take is reported extra.
				for _, b := range bits(allMask &^ (req | opt)) {
					_, err := Check(typ, tr.from, &attr, MaskState|req|b, testLimits)
					if !errors.Is(err, ErrInvalidTransition) {
						t.Fatalf("with %v: err = %v, want ErrInvalidTransition", b, err)
					}
					e := asError(t, err)
					if e.Extra != b || e.Missing != 0 || e.Attr != 0 {
						t.Errorf("with %v: Missing=%v Extra=%v Attr=%v", b, e.Missing, e.Extra, e.Attr)
					}
					if !strings.Contains(err.Error(), "not allowed") || !strings.Contains(err.Error(), b.String()) {
						t.Errorf("message %q does not name the extra %v", err, b)
					}
				}
				// Unknown mask bits are extra too.
				if _, err := Check(typ, tr.from, &attr, MaskState|req|1<<25, testLimits); !errors.Is(err, ErrInvalidTransition) ||
					asError(t, err).Extra != 1<<25 {
					t.Errorf("unknown mask bit: %v", err)
				}
			})
		}
	}
}

func TestCheckMissingAndExtra(t *testing.T) {
	// With both a missing and an extra attribute, the missing one is reported.
	attr := goodAttr(abi.QPStateInit, abi.QPStateReset)
	_, err := Check(abi.QPTypeRC, abi.QPStateReset, &attr, MaskState|MaskPort|MaskQKey, testLimits)
	e := asError(t, err)
	if e.Missing != MaskPKeyIndex|MaskAccessFlags || e.Extra != 0 {
		t.Fatalf("Missing=%v Extra=%v", e.Missing, e.Extra)
	}
	if !strings.Contains(e.Error(), "ACCESS_FLAGS|PKEY_INDEX") {
		t.Errorf("message %q", e)
	}
}

func TestCheckInvalidTransitions(t *testing.T) {
	for _, typ := range types {
		for _, from := range states {
			for _, to := range states {
				if _, _, ok := lookup(from, to, typ); ok {
					continue
				}
				attr := goodAttr(to, from)
				got, err := Check(typ, from, &attr, MaskState|allMask, testLimits)
				if !errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrInvalidAttr) {
					t.Errorf("%v %v->%v: err = %v, want ErrInvalidTransition", typ, from, to, err)
					continue
				}
				e := asError(t, err)
				if e.Missing != 0 || e.Extra != 0 || e.From != from || e.To != to || e.Type != typ {
					t.Errorf("%v %v->%v: error %+v", typ, from, to, e)
				}
				if got != from {
					t.Errorf("%v %v->%v: returned state %v", typ, from, to, got)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%v->%v", from, to)) {
					t.Errorf("message %q does not name the transition", err)
				}
			}
		}
	}
	// Spot checks of transitions IBTA forbids, in case the table above is wrong too.
	for _, c := range []struct {
		typ      abi.QPType
		from, to abi.QPState
	}{
		{abi.QPTypeRC, abi.QPStateReset, abi.QPStateRTS},
		{abi.QPTypeRC, abi.QPStateInit, abi.QPStateRTS},
		{abi.QPTypeUD, abi.QPStateReset, abi.QPStateRTR},
		{abi.QPTypeRC, abi.QPStateSQE, abi.QPStateRTS},
		{abi.QPTypeUC, abi.QPStateErr, abi.QPStateRTS},
		{abi.QPTypeUD, abi.QPStateRTS, abi.QPStateInit},
		{abi.QPTypeRC, abi.QPStateRTS, abi.QPStateSQE},
	} {
		attr := goodAttr(c.to, c.from)
		if _, err := Check(c.typ, c.from, &attr, MaskState, testLimits); !errors.Is(err, ErrInvalidTransition) {
			t.Errorf("%v %v->%v allowed", c.typ, c.from, c.to)
		}
	}
}

func TestCheckWithoutStateStaysPut(t *testing.T) {
	// Without MaskState the target is the current state.
	attr := goodAttr(abi.QPStateReset, abi.QPStateRTS) // State is ignored
	got, err := Check(abi.QPTypeRC, abi.QPStateRTS, &attr, MaskAccessFlags|MaskMinRNRTimer, testLimits)
	if err != nil || got != abi.QPStateRTS {
		t.Fatalf("RTS modify: %v, %v", got, err)
	}
	got, err = Check(abi.QPTypeUD, abi.QPStateReset, &attr, 0, testLimits)
	if err != nil || got != abi.QPStateReset {
		t.Fatalf("empty modify in RESET: %v, %v", got, err)
	}
	if _, err := Check(abi.QPTypeRC, abi.QPStateRTR, &attr, MaskSQPSN, testLimits); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("RTR->RTR accepted: %v", err)
	}
}

func TestCheckCurState(t *testing.T) {
	attr := goodAttr(abi.QPStateRTS, abi.QPStateRTR)
	mask := MaskState | MaskCurState | MaskSQPSN
	if got, err := Check(abi.QPTypeUD, abi.QPStateRTR, &attr, mask, testLimits); err != nil || got != abi.QPStateRTS {
		t.Fatalf("matching cur_qp_state: %v, %v", got, err)
	}
	attr.CurState = abi.QPStateInit
	got, err := Check(abi.QPTypeUD, abi.QPStateRTR, &attr, mask, testLimits)
	if !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("mismatched cur_qp_state: %v", err)
	}
	if got != abi.QPStateRTR {
		t.Errorf("returned state %v", got)
	}
	if msg := err.Error(); !strings.Contains(msg, "cur_qp_state says INIT") || !strings.Contains(msg, "in RTR") {
		t.Errorf("message %q does not explain the mismatch", msg)
	}
	// Without the mask bit the CurState field is ignored.
	if _, err := Check(abi.QPTypeUD, abi.QPStateRTR, &attr, MaskState|MaskSQPSN, testLimits); err != nil {
		t.Fatalf("CurState without its mask bit: %v", err)
	}
}

func TestCheckBadTypeAndState(t *testing.T) {
	attr := goodAttr(abi.QPStateInit, abi.QPStateReset)
	for _, typ := range []abi.QPType{0, 1, 5, 255} {
		got, err := Check(typ, abi.QPStateReset, &attr, MaskState|MaskPKeyIndex|MaskPort|MaskAccessFlags, testLimits)
		if !errors.Is(err, ErrInvalidTransition) || !strings.Contains(err.Error(), "unknown QP type") {
			t.Errorf("type %v: %v", typ, err)
		}
		if got != abi.QPStateReset {
			t.Errorf("type %v: state %v", typ, got)
		}
	}
	for _, s := range []abi.QPState{7, 8, 255} {
		attr.State = s
		if _, err := Check(abi.QPTypeRC, abi.QPStateInit, &attr, MaskState, testLimits); !errors.Is(err, ErrInvalidTransition) ||
			!strings.Contains(err.Error(), "unknown state") {
			t.Errorf("target %v: %v", s, err)
		}
		if _, err := Check(abi.QPTypeRC, s, &attr, 0, testLimits); !errors.Is(err, ErrInvalidTransition) {
			t.Errorf("current %v: %v", s, err)
		}
	}
}

func TestCheckAttrRanges(t *testing.T) {
	type tc struct {
		name     string
		typ      abi.QPType
		from, to abi.QPState
		bit      Mask
		set      func(a *Attr)
		lim      Limits
		ok       bool
	}
	reset, init, rtr, rts, sqd := abi.QPStateReset, abi.QPStateInit, abi.QPStateRTR, abi.QPStateRTS, abi.QPStateSQD
	rc, ud := abi.QPTypeRC, abi.QPTypeUD
	tests := []tc{
		{"port 0", rc, reset, init, MaskPort, func(a *Attr) { a.PortNum = 0 }, testLimits, false},
		{"port 2", ud, reset, init, MaskPort, func(a *Attr) { a.PortNum = 2 }, testLimits, false},
		{"pkey index at table end", rc, reset, init, MaskPKeyIndex, func(a *Attr) { a.PKeyIndex = 4 }, testLimits, false},
		{"pkey index max", ud, reset, init, MaskPKeyIndex, func(a *Attr) { a.PKeyIndex = 0xFFFF }, testLimits, false},
		{"pkey index last", rc, reset, init, MaskPKeyIndex, func(a *Attr) { a.PKeyIndex = 3 }, testLimits, true},
		{"unknown access flag", rc, reset, init, MaskAccessFlags, func(a *Attr) { a.AccessFlags = 0x20 }, testLimits, false},
		{"no access", rc, reset, init, MaskAccessFlags, func(a *Attr) { a.AccessFlags = 0 }, testLimits, true},
		// IBV_ACCESS_ON_DEMAND means nothing on a QP; rxe and mlx5 accept it.
		{"on demand", rc, reset, init, MaskAccessFlags, func(a *Attr) { a.AccessFlags = abi.AccessAll | abi.AccessOnDemand }, testLimits, true},
		{"mtu 0", rc, init, rtr, MaskPathMTU, func(a *Attr) { a.PathMTU = 0 }, testLimits, false},
		{"mtu 6", rc, init, rtr, MaskPathMTU, func(a *Attr) { a.PathMTU = 6 }, testLimits, false},
		// Any valid MTU, whatever the port's active one, as on rxe: the wire takes the smaller.
		{"mtu 4096", rc, init, rtr, MaskPathMTU, func(a *Attr) { a.PathMTU = abi.MTU4096 }, testLimits, true},
		{"mtu 256", rc, init, rtr, MaskPathMTU, func(a *Attr) { a.PathMTU = abi.MTU256 }, testLimits, true},
		{"sgid index at table end", rc, init, rtr, MaskAV, func(a *Attr) { a.AV.SGIDIndex = 2 }, testLimits, false},
		{"sgid index 255", rc, sqd, sqd, MaskAV, func(a *Attr) { a.AV.SGIDIndex = 255 }, testLimits, false},
		{"dest qpn 25 bits", rc, init, rtr, MaskDestQPN, func(a *Attr) { a.DestQPN = 1 << 24 }, testLimits, false},
		{"dest qpn 0 (SMI)", rc, init, rtr, MaskDestQPN, func(a *Attr) { a.DestQPN = 0 }, testLimits, false},
		{"dest qpn 1 (GSI)", rc, init, rtr, MaskDestQPN, func(a *Attr) { a.DestQPN = 1 }, testLimits, false},
		{"dest qpn multicast", rc, init, rtr, MaskDestQPN, func(a *Attr) { a.DestQPN = 0xFFFFFF }, testLimits, false},
		{"dest qpn 2", rc, init, rtr, MaskDestQPN, func(a *Attr) { a.DestQPN = 2 }, testLimits, true},
		{"multicast dgid", rc, init, rtr, MaskAV, func(a *Attr) { a.AV.DGID = [16]byte{0: 0xff, 1: 0x0e, 15: 1} }, testLimits, false},
		{"rq psn 25 bits", rc, init, rtr, MaskRQPSN, func(a *Attr) { a.RQPSN = 0xFFFFFFFF }, testLimits, false},
		{"sq psn 25 bits", ud, rtr, rts, MaskSQPSN, func(a *Attr) { a.SQPSN = 1 << 24 }, testLimits, false},
		{"timeout 32", rc, rtr, rts, MaskTimeout, func(a *Attr) { a.Timeout = 32 }, testLimits, false},
		{"timeout 0", rc, rtr, rts, MaskTimeout, func(a *Attr) { a.Timeout = 0 }, testLimits, true},
		{"retry 8", rc, rtr, rts, MaskRetryCnt, func(a *Attr) { a.RetryCnt = 8 }, testLimits, false},
		{"rnr retry 8", rc, rtr, rts, MaskRNRRetry, func(a *Attr) { a.RNRRetry = 8 }, testLimits, false},
		{"rnr retry 255", rc, sqd, sqd, MaskRNRRetry, func(a *Attr) { a.RNRRetry = 255 }, testLimits, false},
		{"min rnr timer 32", rc, init, rtr, MaskMinRNRTimer, func(a *Attr) { a.MinRNRTimer = 32 }, testLimits, false},
		{"min rnr timer 0", rc, rts, rts, MaskMinRNRTimer, func(a *Attr) { a.MinRNRTimer = 0 }, testLimits, true},
		{"max rd atomic 17", rc, rtr, rts, MaskMaxQPRdAtomic, func(a *Attr) { a.MaxRdAtomic = 17 }, testLimits, false},
		{"max dest rd atomic 17", rc, init, rtr, MaskMaxDestRdAtomic, func(a *Attr) { a.MaxDestRdAtomic = 17 }, testLimits, false},
		{"max dest rd atomic 0", rc, init, rtr, MaskMaxDestRdAtomic, func(a *Attr) { a.MaxDestRdAtomic = 0 }, testLimits, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _, ok := lookup(tt.from, tt.to, tt.typ)
			if !ok {
				t.Fatalf("bad test: %v %v->%v", tt.typ, tt.from, tt.to)
			}
			attr := goodAttr(tt.to, tt.from)
			tt.set(&attr)
			got, err := Check(tt.typ, tt.from, &attr, MaskState|req|tt.bit, tt.lim)
			if tt.ok {
				if err != nil || got != tt.to {
					t.Fatalf("got %v, %v; want %v", got, err, tt.to)
				}
				return
			}
			if !errors.Is(err, ErrInvalidAttr) || errors.Is(err, ErrInvalidTransition) {
				t.Fatalf("err = %v, want ErrInvalidAttr only", err)
			}
			e := asError(t, err)
			if e.Attr != tt.bit || e.Missing != 0 || e.Extra != 0 {
				t.Errorf("Attr=%v Missing=%v Extra=%v, want Attr=%v", e.Attr, e.Missing, e.Extra, tt.bit)
			}
			if e.Type != tt.typ || e.From != tt.from || e.To != tt.to {
				t.Errorf("error names %v %v->%v", e.Type, e.From, e.To)
			}
			if got != tt.from {
				t.Errorf("returned state %v", got)
			}
			if e.Reason == "" || !strings.Contains(err.Error(), "attribute "+tt.bit.String()) {
				t.Errorf("message %q does not name the attribute", err)
			}
			// Out-of-range values of attributes not in the mask are ignored.
			if req&tt.bit == 0 {
				if _, err := Check(tt.typ, tt.from, &attr, MaskState|req, tt.lim); err != nil {
					t.Errorf("value checked without its mask bit: %v", err)
				}
			}
		})
	}
}

func TestMaskString(t *testing.T) {
	tests := []struct {
		m    Mask
		want string
	}{
		{0, "none"},
		{MaskState, "STATE"},
		{MaskState | MaskCurState, "STATE|CUR_STATE"},
		{MaskPKeyIndex | MaskPort | MaskAccessFlags, "ACCESS_FLAGS|PKEY_INDEX|PORT"},
		{MaskDestQPN, "DEST_QPN"},
		{MaskEnSQDAsync | MaskAltPath | MaskPathMigState | MaskCap, "EN_SQD_ASYNC_NOTIFY|ALT_PATH|PATH_MIG_STATE|CAP"},
		{1 << 21, "unknown"},
		{MaskQKey | 1<<31, "QKEY|unknown"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("Mask(%#x).String() = %q, want %q", uint32(tt.m), got, tt.want)
		}
	}
	for i := 0; MaskDestQPN>>i != 0; i++ { // every bit up to DEST_QPN, the last
		if s := Mask(1 << i).String(); s == "" || strings.Contains(s, "|") || s == "unknown" {
			t.Errorf("bit %d: %q", i, s)
		}
	}
}

func TestApply(t *testing.T) {
	src := goodAttr(abi.QPStateRTS, abi.QPStateRTR)
	for _, b := range bits(allMask | MaskState | MaskCurState) {
		var dst Attr
		Apply(&dst, &src, b)
		var want Attr
		switch b {
		case MaskState:
			want.State = src.State
		case MaskAccessFlags:
			want.AccessFlags = src.AccessFlags
		case MaskPKeyIndex:
			want.PKeyIndex = src.PKeyIndex
		case MaskPort:
			want.PortNum = src.PortNum
		case MaskQKey:
			want.QKey = src.QKey
		case MaskAV:
			want.AV = src.AV
		case MaskPathMTU:
			want.PathMTU = src.PathMTU
		case MaskTimeout:
			want.Timeout = src.Timeout
		case MaskRetryCnt:
			want.RetryCnt = src.RetryCnt
		case MaskRNRRetry:
			want.RNRRetry = src.RNRRetry
		case MaskRQPSN:
			want.RQPSN = src.RQPSN
		case MaskSQPSN:
			want.SQPSN = src.SQPSN
		case MaskMaxQPRdAtomic:
			want.MaxRdAtomic = src.MaxRdAtomic
		case MaskMaxDestRdAtomic:
			want.MaxDestRdAtomic = src.MaxDestRdAtomic
		case MaskMinRNRTimer:
			want.MinRNRTimer = src.MinRNRTimer
		case MaskDestQPN:
			want.DestQPN = src.DestQPN
		}
		if dst != want {
			t.Errorf("Apply(%v) = %+v, want %+v", b, dst, want)
		}
	}
	var dst Attr
	Apply(&dst, &src, allMask|MaskState)
	src.CurState = 0 // CUR_STATE is checked, never stored
	if dst != src {
		t.Errorf("Apply(all) = %+v, want %+v", dst, src)
	}
}

func FuzzCheck(f *testing.F) {
	add := func(typ abi.QPType, cur, to abi.QPState, mask Mask, a Attr) {
		f.Add(uint8(typ), uint8(cur), uint8(to), uint8(a.CurState), uint32(mask), uint32(a.AccessFlags), a.PKeyIndex,
			a.PortNum, a.QKey, a.AV.SGIDIndex, uint8(a.PathMTU), a.Timeout, a.RetryCnt, a.RNRRetry, a.RQPSN, a.SQPSN,
			a.MaxRdAtomic, a.MaxDestRdAtomic, a.MinRNRTimer, a.DestQPN, uint8(3))
	}
	for _, tr := range ibta() {
		for _, typ := range types {
			if req, ok := tr.required[typ]; ok {
				add(typ, tr.from, tr.to, MaskState|req|tr.optional[typ], goodAttr(tr.to, tr.from))
			}
		}
	}
	bad := goodAttr(abi.QPStateRTS, abi.QPStateInit)
	bad.Timeout, bad.PathMTU, bad.DestQPN = 200, 9, 0xFFFFFFFF
	add(abi.QPTypeRC, abi.QPStateRTR, abi.QPStateRTS, 0xFFFFFFFF, bad)
	add(0, 200, 200, 0, Attr{})
	f.Fuzz(func(t *testing.T, typ, cur, to, curField uint8, mask, access uint32, pkey uint16, port uint8, qkey uint32,
		sgid, mtu, timeout, retry, rnrRetry uint8, rqpsn, sqpsn uint32, maxRd, maxDestRd, minRNR uint8, destQPN uint32,
		mtuLimit uint8) {
		attr := Attr{
			State: abi.QPState(to), CurState: abi.QPState(curField), AccessFlags: abi.Access(access), PKeyIndex: pkey,
			PortNum: port, QKey: qkey, AV: AddressVector{SGIDIndex: sgid}, PathMTU: abi.MTU(mtu), Timeout: timeout,
			RetryCnt: retry, RNRRetry: rnrRetry, RQPSN: rqpsn, SQPSN: sqpsn, MaxRdAtomic: maxRd,
			MaxDestRdAtomic: maxDestRd, MinRNRTimer: minRNR, DestQPN: destQPN,
		}
		lim := testLimits
		_ = mtuLimit // the port's MTU no longer bounds the path MTU; kept for the corpus
		before := attr
		got, err := Check(abi.QPType(typ), abi.QPState(cur), &attr, Mask(mask), lim)
		if attr != before {
			t.Fatal("Check modified the attributes")
		}
		if err != nil {
			e := asError(t, err)
			if errors.Is(err, ErrInvalidAttr) == errors.Is(err, ErrInvalidTransition) {
				t.Fatalf("error %v matches both or neither sentinel", err)
			}
			if e.Error() == "" {
				t.Fatal("empty message")
			}
			if got != abi.QPState(cur) {
				t.Fatalf("refused modify returned %v, not the current state %v", got, abi.QPState(cur))
			}
			return
		}
		want := abi.QPState(cur)
		if Mask(mask)&MaskState != 0 {
			want = abi.QPState(to)
		}
		if got != want {
			t.Fatalf("accepted modify went to %v, want %v", got, want)
		}
		req, opt, ok := lookup(abi.QPState(cur), got, abi.QPType(typ))
		if !ok {
			t.Fatalf("accepted %v %v->%v, which IBTA does not define", abi.QPType(typ), abi.QPState(cur), got)
		}
		given := Mask(mask) &^ (MaskState | MaskCurState)
		if given&req != req || given&^(req|opt) != 0 {
			t.Fatalf("accepted mask %v for %v %v->%v (required %v, optional %v)", Mask(mask), abi.QPType(typ), abi.QPState(cur), got, req, opt)
		}
		if given&MaskTimeout != 0 && timeout > 31 || given&MaskDestQPN != 0 && destQPN > 0xFFFFFF ||
			given&MaskPort != 0 && port != 1 || given&MaskPathMTU != 0 && !abi.MTU(mtu).Valid() {
			t.Fatalf("accepted out-of-range values: %+v", attr)
		}
	})
}
