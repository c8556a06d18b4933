package vrdma_test

import (
	"errors"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// newMR registers a region of 4 KiB with the given access in pd, released
// when the test ends.
func newMR(t *testing.T, pd *vrdma.PD, access ibv.Access) *vrdma.MR {
	t.Helper()
	mr, err := pd.AllocMR(4096, access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mr.Dereg() })
	return mr
}

func otherPD(t *testing.T, dev *vrdma.Device) *vrdma.PD {
	t.Helper()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pd.Dealloc() })
	return pd
}

// targetMR points wr at mr.
func targetMR(wr *vrdma.SendWR, mr *vrdma.MR) { wr.RemoteAddr, wr.RKey = mr.Addr(), mr.RKey() }

// TestConformanceRemoteErrors makes an RC responder refuse a request. The
// requester's request completes with the error and its later ones are
// flushed; both QPs end in ERR, the responder with an asynchronous event;
// no byte of either side's memory changes; receives posted to the
// responder once it is in ERR are flushed.
func TestConformanceRemoteErrors(t *testing.T) { inEveryMode(t, conformanceRemoteErrors) }

func conformanceRemoteErrors(t *testing.T, e *confEnv) {
	noWrite := ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	noRead := ibv.AccessRemoteWrite | ibv.AccessRemoteAtomic
	noAtomic := ibv.AccessRemoteWrite | ibv.AccessRemoteRead
	cases := []struct {
		name   string
		op     ibv.Opcode
		access ibv.Access // the responder QP's access flags; 0: all
		mod    func(t *testing.T, wr *vrdma.SendWR, b *side)
		status ibv.Status
		event  ibv.EventType
	}{
		{"WRITE/wrong rkey", ibv.WRRDMAWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RKey ^= 0x80 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE/unknown rkey", ibv.WRRDMAWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RKey = 0xffffff00 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE_WITH_IMM/wrong rkey", ibv.WRRDMAWriteImm, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RKey ^= 0x80 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"READ/wrong rkey", ibv.WRRDMARead, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RKey ^= 0x80 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"CMP_AND_SWP/wrong rkey", ibv.WRAtomicCmpAndSwp, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RKey ^= 0x80 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE/past the end", ibv.WRRDMAWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr = b.mr.Addr() + mrSize - 4 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE/before the start", ibv.WRRDMAWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr = b.mr.Addr() - 32 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"READ/past the end", ibv.WRRDMARead, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr = b.mr.Addr() + mrSize - 1 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"FETCH_AND_ADD/past the end", ibv.WRAtomicFetchAndAdd, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr = b.mr.Addr() + mrSize }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE/region without REMOTE_WRITE", ibv.WRRDMAWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, b.pd, ibv.AccessLocalWrite|noWrite))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE_WITH_IMM/region without REMOTE_WRITE", ibv.WRRDMAWriteImm, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, b.pd, ibv.AccessLocalWrite))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"READ/region without REMOTE_READ", ibv.WRRDMARead, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, b.pd, ibv.AccessLocalWrite|noRead))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"CMP_AND_SWP/region without REMOTE_ATOMIC", ibv.WRAtomicCmpAndSwp, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, b.pd, ibv.AccessLocalWrite|noAtomic))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"FETCH_AND_ADD/region without REMOTE_ATOMIC", ibv.WRAtomicFetchAndAdd, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, b.pd, ibv.AccessLocalWrite|noAtomic))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE/region of another PD", ibv.WRRDMAWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, otherPD(t, b.dev), allAccess))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"READ/region of another PD", ibv.WRRDMARead, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, otherPD(t, b.dev), allAccess))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"CMP_AND_SWP/region of another PD", ibv.WRAtomicCmpAndSwp, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, otherPD(t, b.dev), allAccess))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"WRITE/QP without REMOTE_WRITE", ibv.WRRDMAWrite, noWrite, nil, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		{"WRITE_WITH_IMM/QP without REMOTE_WRITE", ibv.WRRDMAWriteImm, noWrite, nil, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		{"READ/QP without REMOTE_READ", ibv.WRRDMARead, noRead, nil, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		{"CMP_AND_SWP/QP without REMOTE_ATOMIC", ibv.WRAtomicCmpAndSwp, noAtomic, nil, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		{"FETCH_AND_ADD/QP without REMOTE_ATOMIC", ibv.WRAtomicFetchAndAdd, noAtomic, nil, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		{"CMP_AND_SWP/misaligned", ibv.WRAtomicCmpAndSwp, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr += 4 }, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		{"FETCH_AND_ADD/misaligned", ibv.WRAtomicFetchAndAdd, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr++ }, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		// ATOMIC_WRITE checks what rxe's responder does: REMOTE_WRITE on the
		// QP and over the region's 8 bytes, an 8-byte aligned address.
		{"ATOMIC_WRITE/wrong rkey", ibv.WRAtomicWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RKey ^= 0x80 }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"ATOMIC_WRITE/past the end", ibv.WRAtomicWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr = b.mr.Addr() + mrSize }, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"ATOMIC_WRITE/region without REMOTE_WRITE", ibv.WRAtomicWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, b.pd, ibv.AccessLocalWrite|noWrite))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"ATOMIC_WRITE/region of another PD", ibv.WRAtomicWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, otherPD(t, b.dev), allAccess))
		}, ibv.WCRemAccessErr, ibv.EventQPAccessErr},
		{"ATOMIC_WRITE/QP without REMOTE_WRITE", ibv.WRAtomicWrite, noWrite, nil, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
		{"ATOMIC_WRITE/misaligned", ibv.WRAtomicWrite, 0, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr += 4 }, ibv.WCRemInvReqErr, ibv.EventQPReqErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			optsB := vrdma.DefaultConnectOptions()
			if c.access != 0 {
				optsB.Access = c.access
			}
			a, b := e.pair(t, pairSpec{typ: ibv.RC, optsB: &optsB})
			wr := vrdma.SendWR{ID: 1, Opcode: c.op, Flags: ibv.SendSignaled, Imm: 1, SGL: []ibv.SGE{a.mr.SGE(srcOff, 64)},
				RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey(), CompareAdd: 0, Swap: 0xffff}
			if c.op == ibv.WRRDMARead || c.op == ibv.WRAtomicCmpAndSwp || c.op == ibv.WRAtomicFetchAndAdd {
				wr.SGL = []ibv.SGE{a.mr.SGE(dstOff, 8)}
			}
			if c.op == ibv.WRAtomicWrite {
				wr.SGL, wr.CompareAdd = nil, 0x0102030405060708
			}
			if c.mod != nil {
				c.mod(t, &wr, b)
			}
			// Receives posted before the error are flushed with the QP.
			postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 256)))
			fill(a.mr.Bytes(), 1)
			fill(b.mr.Bytes(), 2)
			beforeA, beforeB := append([]byte(nil), a.mr.Bytes()...), append([]byte(nil), b.mr.Bytes()...)

			post(t, a.qp, wr,
				vrdma.SendWR{ID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
				vrdma.SendWR{ID: 3, Opcode: ibv.WRSend, SGL: []ibv.SGE{a.mr.SGE(srcOff, 64)}})
			checkWC(t, pollOne(t, a.scq), errWC(a, 1, c.status))
			// No event tells the requester: the error completion does, and the
			// QP is in ERR once it can be polled.
			if st := a.qp.State(); st != ibv.QPSErr {
				t.Fatalf("State() says %v when the error completion is polled, want ERR", st)
			}
			got := pollN(t, a.scq, 2)
			checkWC(t, got[0], errWC(a, 2, ibv.WCWRFlushErr))
			checkWC(t, got[1], errWC(a, 3, ibv.WCWRFlushErr))
			expectState(t, a.qp, ibv.QPSErr)

			ev := waitEvent(t, b.dev, c.event, qpEvent(b.qp))
			if ev.Reason == "" {
				t.Errorf("%v event without a reason", ev.Type)
			}
			if got := b.qp.State(); got != ibv.QPSErr {
				t.Fatalf("responder QP in %v after %v, want ERR", got, ev.Type)
			}
			expectState(t, b.qp, ibv.QPSErr)
			postRecv(t, b.qp, recvWR(71, b.mr.SGE(recvOff, 256)))
			rwcs := pollN(t, b.rcq, 2)
			checkWC(t, rwcs[0], errWC(b, 70, ibv.WCWRFlushErr))
			checkWC(t, rwcs[1], errWC(b, 71, ibv.WCWRFlushErr))

			// Requests posted once the requester is in ERR are flushed.
			post(t, a.qp, vrdma.SendWR{ID: 4, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(srcOff, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			checkWC(t, pollOne(t, a.scq), errWC(a, 4, ibv.WCWRFlushErr))
			expectEmpty(t, a.scq, a.rcq, b.scq, b.rcq)
			expectBytes(t, "responder memory", b.mr.Bytes(), beforeB)
			expectBytes(t, "requester memory", a.mr.Bytes(), beforeA)
		})
	}
}

// TestConformanceUCRemoteErrors checks that a UC responder drops what it
// would refuse: the requester completes successfully, nothing changes.
func TestConformanceUCRemoteErrors(t *testing.T) { inEveryMode(t, conformanceUCRemoteErrors) }

func conformanceUCRemoteErrors(t *testing.T, e *confEnv) {
	cases := []struct {
		name string
		op   ibv.Opcode
		mod  func(t *testing.T, wr *vrdma.SendWR, b *side)
	}{
		{"WRITE/wrong rkey", ibv.WRRDMAWrite, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RKey ^= 0x80 }},
		{"WRITE/past the end", ibv.WRRDMAWrite, func(t *testing.T, wr *vrdma.SendWR, b *side) { wr.RemoteAddr = b.mr.Addr() + mrSize - 4 }},
		{"WRITE_WITH_IMM/region of another PD", ibv.WRRDMAWriteImm, func(t *testing.T, wr *vrdma.SendWR, b *side) {
			targetMR(wr, newMR(t, otherPD(t, b.dev), allAccess))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: ibv.UC})
			wr := vrdma.SendWR{ID: 1, Opcode: c.op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 64)},
				RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()}
			c.mod(t, &wr, b)
			postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 256)))
			fill(a.mr.Bytes(), 1)
			beforeB := append([]byte(nil), b.mr.Bytes()...)
			post(t, a.qp, wr)
			checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCRDMAWrite, 64))
			expectEmpty(t, b.rcq)
			expectBytes(t, "responder memory", b.mr.Bytes(), beforeB)
			expectState(t, a.qp, ibv.QPSRTS)
			expectState(t, b.qp, ibv.QPSRTS)
			// The receive is still posted: the next SEND lands in it.
			post(t, a.qp, vrdma.SendWR{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 16)}})
			checkWC(t, pollOne(t, a.scq), sendWC(a, 2, ibv.WCSend, 16))
			checkWC(t, pollOne(t, b.rcq), recvWC(b, 70, 16, a))
		})
	}
}

// TestConformanceLocalErrors gives the requester a bad local buffer: the
// request completes with LOC_PROT_ERR, the QP goes to ERR and flushes the
// rest; the responder is untouched and stays in RTS.
func TestConformanceLocalErrors(t *testing.T) { inEveryMode(t, conformanceLocalErrors) }

func conformanceLocalErrors(t *testing.T, e *confEnv) {
	cases := []struct {
		name string
		typ  ibv.QPType
		op   ibv.Opcode
		sge  func(t *testing.T, a *side) ibv.SGE
	}{
		{"SEND/wrong lkey", ibv.RC, ibv.WRSend, func(t *testing.T, a *side) ibv.SGE { s := a.mr.SGE(0, 64); s.LKey ^= 0x80; return s }},
		{"SEND/unknown lkey", ibv.RC, ibv.WRSend, func(t *testing.T, a *side) ibv.SGE { s := a.mr.SGE(0, 64); s.LKey = 0xffffff00; return s }},
		{"WRITE/wrong lkey", ibv.RC, ibv.WRRDMAWrite, func(t *testing.T, a *side) ibv.SGE { s := a.mr.SGE(0, 64); s.LKey ^= 0x80; return s }},
		{"WRITE/past the end", ibv.RC, ibv.WRRDMAWrite, func(t *testing.T, a *side) ibv.SGE { return a.mr.SGE(mrSize-8, 64) }},
		{"WRITE/region of another PD", ibv.RC, ibv.WRRDMAWrite, func(t *testing.T, a *side) ibv.SGE {
			return newMR(t, otherPD(t, a.dev), allAccess).SGE(0, 64)
		}},
		{"READ/wrong lkey", ibv.RC, ibv.WRRDMARead, func(t *testing.T, a *side) ibv.SGE { s := a.mr.SGE(dstOff, 64); s.LKey ^= 0x80; return s }},
		{"READ/into a region without LOCAL_WRITE", ibv.RC, ibv.WRRDMARead, func(t *testing.T, a *side) ibv.SGE {
			return newMR(t, a.pd, ibv.AccessRemoteRead).SGE(0, 64)
		}},
		{"FETCH_AND_ADD/wrong lkey", ibv.RC, ibv.WRAtomicFetchAndAdd, func(t *testing.T, a *side) ibv.SGE { s := a.mr.SGE(dstOff, 8); s.LKey ^= 0x80; return s }},
		{"UC/SEND/wrong lkey", ibv.UC, ibv.WRSend, func(t *testing.T, a *side) ibv.SGE { s := a.mr.SGE(0, 64); s.LKey ^= 0x80; return s }},
		{"UD/SEND/wrong lkey", ibv.UD, ibv.WRSend, func(t *testing.T, a *side) ibv.SGE { s := a.mr.SGE(0, 64); s.LKey ^= 0x80; return s }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: c.typ})
			postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 256)))
			fill(b.mr.Bytes(), 2)
			beforeB := append([]byte(nil), b.mr.Bytes()...)
			wrs := []vrdma.SendWR{
				{ID: 1, Opcode: c.op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{c.sge(t, a)}, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()},
				{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 64)}},
			}
			if c.typ == ibv.UD {
				wrs[0], wrs[1] = a.sendTo(wrs[0], b), a.sendTo(wrs[1], b)
			}
			post(t, a.qp, wrs...)
			got := pollN(t, a.scq, 2)
			checkWC(t, got[0], errWC(a, 1, ibv.WCLocProtErr))
			checkWC(t, got[1], errWC(a, 2, ibv.WCWRFlushErr))
			expectState(t, a.qp, ibv.QPSErr)
			expectState(t, b.qp, ibv.QPSRTS)
			expectEmpty(t, b.rcq)
			expectBytes(t, "responder memory", b.mr.Bytes(), beforeB)
		})
	}
}

// TestConformanceReceiveErrors covers the responder's receive request not
// fitting the message.
func TestConformanceReceiveErrors(t *testing.T) { inEveryMode(t, conformanceReceiveErrors) }

func conformanceReceiveErrors(t *testing.T, e *confEnv) {
	t.Run("RC/buffer too small", func(t *testing.T) {
		a, b := e.pair(t, pairSpec{typ: ibv.RC})
		postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 16)), recvWR(71, b.mr.SGE(recvOff+1024, 256)))
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 17)}},
			vrdma.SendWR{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 1)}})
		got := pollN(t, a.scq, 2)
		checkWC(t, got[0], errWC(a, 1, ibv.WCRemInvReqErr))
		checkWC(t, got[1], errWC(a, 2, ibv.WCWRFlushErr))
		rwcs := pollN(t, b.rcq, 2)
		checkWC(t, rwcs[0], errWC(b, 70, ibv.WCLocLenErr))
		checkWC(t, rwcs[1], errWC(b, 71, ibv.WCWRFlushErr))
		expectState(t, a.qp, ibv.QPSErr)
		expectState(t, b.qp, ibv.QPSErr)
		expectZero(t, "past the receive buffer", b.mr.Bytes()[recvOff+16:])
	})
	t.Run("RC/wrong lkey in the receive", func(t *testing.T) {
		a, b := e.pair(t, pairSpec{typ: ibv.RC})
		s := b.mr.SGE(recvOff, 256)
		s.LKey ^= 0x80
		postRecv(t, b.qp, recvWR(70, s))
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 17)}})
		checkWC(t, pollOne(t, a.scq), errWC(a, 1, ibv.WCRemOpErr))
		checkWC(t, pollOne(t, b.rcq), errWC(b, 70, ibv.WCLocProtErr))
		expectState(t, a.qp, ibv.QPSErr)
		expectState(t, b.qp, ibv.QPSErr)
		expectZero(t, "responder memory", b.mr.Bytes())
	})
	t.Run("UC/buffer too small", func(t *testing.T) {
		// UC has no NAK: the requester never hears of it.
		a, b := e.pair(t, pairSpec{typ: ibv.UC})
		postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 16)))
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 17)}})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, 17))
		checkWC(t, pollOne(t, b.rcq), errWC(b, 70, ibv.WCLocLenErr))
		expectState(t, a.qp, ibv.QPSRTS)
	})
	t.Run("UD/buffer too small for the GRH and payload", func(t *testing.T) {
		a, b := e.pair(t, pairSpec{typ: ibv.UD})
		postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, grhLen+16)))
		post(t, a.qp, a.sendTo(vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 17)}}, b))
		checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, 17))
		checkWC(t, pollOne(t, b.rcq), errWC(b, 70, ibv.WCLocLenErr))
		expectState(t, a.qp, ibv.QPSRTS)
	})
}

// TestConformanceRNR covers a SEND that finds no receive posted.
func TestConformanceRNR(t *testing.T) { inEveryMode(t, conformanceRNR) }

func conformanceRNR(t *testing.T, e *confEnv) {
	t.Run("rnr_retry 0", func(t *testing.T) {
		o := vrdma.DefaultConnectOptions()
		o.RNRRetry, o.MinRNRTimer = 0, 1
		a, b := e.pair(t, pairSpec{typ: ibv.RC, optsA: &o, optsB: &o})
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}},
			vrdma.SendWR{ID: 2, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		got := pollN(t, a.scq, 2)
		checkWC(t, got[0], errWC(a, 1, ibv.WCRNRRetryExcErr))
		checkWC(t, got[1], errWC(a, 2, ibv.WCWRFlushErr))
		expectState(t, a.qp, ibv.QPSErr)
		// RNR is not an error of the responder.
		expectState(t, b.qp, ibv.QPSRTS)
		expectZero(t, "responder memory", b.mr.Bytes())
	})
	t.Run("rnr_retry 0 means no retry", func(t *testing.T) {
		// With rnr_retry 0 the first RNR NAK ends the request, so a receive
		// posted after it must not be used, however soon (min_rnr_timer 31
		// would leave half a second for it).
		o := vrdma.DefaultConnectOptions()
		o.RNRRetry, o.MinRNRTimer = 0, 31
		a, b := e.pair(t, pairSpec{typ: ibv.RC, optsA: &o, optsB: &o})
		before := rnrNaks(t, a.dev)
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}})
		var wc [1]vrdma.WorkCompletion
		done := 0
		waitFor(t, "an RNR NAK or a completion", func() bool {
			n, err := a.scq.Poll(wc[:])
			if err != nil {
				t.Fatal(err)
			}
			done += n
			return done > 0 || rnrNaks(t, a.dev) > before
		})
		postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 256)))
		if done == 0 {
			wc[0] = pollOne(t, a.scq)
		}
		checkWC(t, wc[0], errWC(a, 1, ibv.WCRNRRetryExcErr))
		expectEmpty(t, b.rcq)
	})
	t.Run("infinite retry", func(t *testing.T) {
		o := vrdma.DefaultConnectOptions()
		o.RNRRetry, o.MinRNRTimer = 7, 1
		a, b := e.pair(t, pairSpec{typ: ibv.RC, optsA: &o, optsB: &o})
		fill(a.mr.Bytes()[srcOff:srcOff+100], 5)
		before := rnrNaks(t, a.dev)
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSendImm, Imm: 9, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 100)}})
		// Let the requester be refused a few times before posting.
		waitFor(t, "RNR NAKs", func() bool { return rnrNaks(t, a.dev) >= before+3 })
		expectEmpty(t, a.scq)
		postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 256)))
		checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, 100))
		checkWC(t, pollOne(t, b.rcq), withImm(recvWC(b, 70, 100, a), 9))
		expectBytes(t, "received", b.mr.Bytes()[recvOff:recvOff+100], a.mr.Bytes()[srcOff:srcOff+100])
		expectState(t, a.qp, ibv.QPSRTS)
	})
	t.Run("WRITE_WITH_IMM waits for a receive too", func(t *testing.T) {
		o := vrdma.DefaultConnectOptions()
		o.MinRNRTimer = 1
		a, b := e.pair(t, pairSpec{typ: ibv.RC, optsA: &o, optsB: &o})
		fill(a.mr.Bytes()[srcOff:srcOff+100], 5)
		before := rnrNaks(t, a.dev)
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWriteImm, Imm: 9, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 100)},
			RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
		waitFor(t, "an RNR NAK", func() bool { return rnrNaks(t, a.dev) > before })
		postRecv(t, b.qp, recvWR(70, b.mr.SGE(recvOff, 0)))
		checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCRDMAWrite, 100))
		w := withImm(recvWC(b, 70, 100, a), 9)
		w.Opcode = ibv.WCRecvRDMAImm
		checkWC(t, pollOne(t, b.rcq), w)
		expectBytes(t, "written", b.mr.Bytes()[rdmaOff:rdmaOff+100], a.mr.Bytes()[srcOff:srcOff+100])
	})
}

// TestConformanceRetryExceeded connects an RC QP to a QP that does not
// exist: its request fails after retry_cnt retries, never hangs.
func TestConformanceRetryExceeded(t *testing.T) { inEveryMode(t, conformanceRetryExceeded) }

func conformanceRetryExceeded(t *testing.T, e *confEnv) {
	cases := []struct {
		name string
		qpn  func(b *side) uint32
	}{
		{"no such QPN", func(b *side) uint32 { return 0xabcde }},
		{"QP not connected back", func(b *side) uint32 { return b.qp.QPN() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := e.newSide(t, e.a, qpSpec{typ: ibv.RC})
			b := e.newSide(t, e.b, qpSpec{typ: ibv.RC})
			// b is connected elsewhere: it would drop a's packets.
			if err := b.qp.Connect(vrdma.Endpoint{GID: a.gid, QPN: 0xabcde}, a.connectOptions(nil)); err != nil {
				t.Fatal(err)
			}
			o := vrdma.DefaultConnectOptions()
			o.Timeout, o.RetryCnt = 8, 1
			ep := b.endpoint(t)
			ep.QPN = c.qpn(b)
			if err := a.qp.Connect(ep, a.connectOptions(&o)); err != nil {
				t.Fatal(err)
			}
			post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
				vrdma.SendWR{ID: 2, Opcode: ibv.WRSend, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}})
			got := pollN(t, a.scq, 2)
			checkWC(t, got[0], errWC(a, 1, ibv.WCRetryExcErr))
			checkWC(t, got[1], errWC(a, 2, ibv.WCWRFlushErr))
			expectState(t, a.qp, ibv.QPSErr)
			expectZero(t, "unreached memory", b.mr.Bytes())
		})
	}
}

// TestConformancePostErrors covers requests refused at post time.
func TestConformancePostErrors(t *testing.T) { inEveryMode(t, conformancePostErrors) }

func conformancePostErrors(t *testing.T, e *confEnv) {
	steps := map[ibv.QPState]func(t *testing.T, x, y *side){
		ibv.QPSReset: func(t *testing.T, x, y *side) {},
		ibv.QPSInit: func(t *testing.T, x, y *side) {
			if err := x.qp.Modify(initAttr(x.qp.Type()), initMask(x.qp.Type())); err != nil {
				t.Fatal(err)
			}
		},
		ibv.QPSRTR: func(t *testing.T, x, y *side) {
			if err := x.qp.Modify(initAttr(x.qp.Type()), initMask(x.qp.Type())); err != nil {
				t.Fatal(err)
			}
			if err := x.qp.Modify(rtrAttr(x.qp.Type(), y.endpoint(t)), rtrMask(x.qp.Type())); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, typ := range []ibv.QPType{ibv.RC, ibv.UC, ibv.UD} {
		for _, st := range []ibv.QPState{ibv.QPSReset, ibv.QPSInit, ibv.QPSRTR} {
			t.Run(typ.String()+"/post_send in "+st.String(), func(t *testing.T) {
				x := e.newSide(t, e.a, qpSpec{typ: typ})
				y := e.newSide(t, e.b, qpSpec{typ: typ})
				steps[st](t, x, y)
				wr := vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{x.mr.SGE(0, 8)}}
				if typ == ibv.UD {
					x.ah = newAH(t, x, y.gid)
					wr = x.sendTo(wr, y)
				}
				err := x.qp.PostSend([]vrdma.SendWR{wr})
				if !errors.Is(err, vrdma.ErrInvalidState) {
					t.Fatalf("post_send in %v: %v, want ErrInvalidState", st, err)
				}
				expectEmpty(t, x.scq)
			})
		}
	}
	t.Run("send queue full", func(t *testing.T) {
		// The peer never posts a receive and the requester retries RNR for
		// ever: the first SEND holds the send queue.
		o := vrdma.DefaultConnectOptions()
		o.MinRNRTimer = 1
		a, _ := e.pair(t, pairSpec{typ: ibv.RC, cap: vrdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}, optsA: &o, optsB: &o})
		depth := a.qp.Cap().MaxSendWR
		wrs := make([]vrdma.SendWR, depth+2)
		for i := range wrs {
			wrs[i] = vrdma.SendWR{ID: uint64(i), Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 8)}}
		}
		expectPostErr(t, a.qp.PostSend(wrs), depth, vrdma.ErrQueueFull)
		expectPostErr(t, a.qp.PostSend(wrs[:1]), 0, vrdma.ErrQueueFull)
		expectEmpty(t, a.scq)
	})
	t.Run("receive queue full", func(t *testing.T) {
		a, _ := e.pair(t, pairSpec{typ: ibv.RC, cap: vrdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		depth := a.qp.Cap().MaxRecvWR
		wrs := make([]vrdma.RecvWR, depth+1)
		for i := range wrs {
			wrs[i] = recvWR(uint64(i), a.mr.SGE(recvOff, 8))
		}
		expectPostErr(t, a.qp.PostRecv(wrs), depth, vrdma.ErrQueueFull)
	})
	t.Run("too many SGEs", func(t *testing.T) {
		a, _ := e.pair(t, pairSpec{typ: ibv.RC})
		sgl := make([]ibv.SGE, a.qp.Cap().MaxSendSGE+1)
		for i := range sgl {
			sgl[i] = a.mr.SGE(i*8, 8)
		}
		expectPostErr(t, a.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRSend, SGL: sgl}}), 0, vrdma.ErrInvalidArgument)
		rsgl := make([]ibv.SGE, a.qp.Cap().MaxRecvSGE+1)
		for i := range rsgl {
			rsgl[i] = a.mr.SGE(i*8, 8)
		}
		expectPostErr(t, a.qp.PostRecv([]vrdma.RecvWR{recvWR(1, rsgl...)}), 0, vrdma.ErrInvalidArgument)
	})
	t.Run("UD without an address handle", func(t *testing.T) {
		a, _ := e.pair(t, pairSpec{typ: ibv.UD})
		expectPostErr(t, a.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRSend, SGL: []ibv.SGE{a.mr.SGE(0, 8)}}}), 0, vrdma.ErrInvalidArgument)
	})
}

// TestConformanceFlush moves QPs to ERR with Modify: outstanding and later
// requests of both queues complete with WR_FLUSH_ERR, in order.
func TestConformanceFlush(t *testing.T) { inEveryMode(t, conformanceFlush) }

func conformanceFlush(t *testing.T, e *confEnv) {
	for _, typ := range []ibv.QPType{ibv.RC, ibv.UC, ibv.UD} {
		t.Run(typ.String(), func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: typ})
			postRecv(t, b.qp, recvWR(1, b.mr.SGE(recvOff, 64)), recvWR(2, b.mr.SGE(recvOff, 64)))
			if err := b.qp.Modify(&ibv.QPAttr{State: ibv.QPSErr}, ibv.AttrState); err != nil {
				t.Fatal(err)
			}
			if got := b.qp.State(); got != ibv.QPSErr {
				t.Fatalf("State() %v after modify to ERR", got)
			}
			postRecv(t, b.qp, recvWR(3, b.mr.SGE(recvOff, 64)))
			got := pollN(t, b.rcq, 3)
			for i := range got {
				checkWC(t, got[i], errWC(b, uint64(i+1), ibv.WCWRFlushErr))
			}
			wr := vrdma.SendWR{ID: 4, Opcode: ibv.WRSend, Flags: 0, SGL: []ibv.SGE{b.mr.SGE(srcOff, 8)}}
			if typ == ibv.UD {
				wr = b.sendTo(wr, a)
			}
			post(t, b.qp, wr, wr)
			sgot := pollN(t, b.scq, 2)
			checkWC(t, sgot[0], errWC(b, 4, ibv.WCWRFlushErr))
			checkWC(t, sgot[1], errWC(b, 4, ibv.WCWRFlushErr))
			expectEmpty(t, b.scq, b.rcq)
			// ERR -> RESET -> a working QP again.
			if err := b.qp.Modify(&ibv.QPAttr{State: ibv.QPSReset}, ibv.AttrState); err != nil {
				t.Fatal(err)
			}
			if err := b.qp.Connect(a.endpoint(t), a.connectOptions(nil)); err != nil {
				t.Fatal(err)
			}
			postRecv(t, b.qp, recvWR(5, b.mr.SGE(recvOff, 64)))
			wr = vrdma.SendWR{ID: 6, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}}
			if typ == ibv.UD {
				wr = a.sendTo(wr, b)
			}
			post(t, a.qp, wr)
			checkWC(t, pollOne(t, a.scq), sendWC(a, 6, ibv.WCSend, 8))
			w := recvWC(b, 5, 8, a)
			if typ == ibv.UD {
				w.ByteLen += grhLen
				w.Flags = ibv.WCWithGRH
			}
			checkWC(t, pollOne(t, b.rcq), w)
		})
	}
}
