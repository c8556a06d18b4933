package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// events records the events a QP's owner is told.
type events struct {
	mu  sync.Mutex
	got []abi.EventType
}

func (e *events) Event(t abi.EventType, _ uint32, _ uint32, _ string) {
	e.mu.Lock()
	e.got = append(e.got, t)
	e.mu.Unlock()
}

func (e *events) list() []abi.EventType {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]abi.EventType(nil), e.got...)
}

// revokeFixture is a region and an initiator QP it was shared with.
func revokeFixture(t *testing.T) (*MR, *QP, *events) {
	t.Helper()
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 7}, false)
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	ev := &events{}
	q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: ev,
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := shm.NewRegion("t", 4096)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := RegisterMR(pd, r, shm.Addr(r.Bytes()), 4096, abi.AccessLocalWrite|abi.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := mr.ShareWith(q)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(sh.FD)
	return mr, q, ev
}

// TestDeregisterRevokesMappings: deregistering a shared region bumps the
// initiator's revoke word, and a second ShareWith is refused.
func TestDeregisterRevokesMappings(t *testing.T) {
	mr, q, ev := revokeFixture(t)
	defer q.Destroy()
	before := shm.Load32(q.mem, abi.QPRevokeOff)
	mr.Deregister()
	if after := shm.Load32(q.mem, abi.QPRevokeOff); after == before {
		t.Fatalf("the revoke word stayed %d across the deregistration", before)
	}
	if _, err := mr.ShareWith(q); err == nil {
		t.Fatal("a deregistered region was shared")
	}
	if got := ev.list(); len(got) != 0 || q.State() == abi.QPStateErr {
		t.Fatalf("an initiator that was not busy got events %v, state %v", got, q.State())
	}
}

// TestDeregisterWaitIsBounded: an initiator whose busy word stays set (a
// hostile or stuck library) holds the deregistration up no longer than
// RevokeWait, and its QP is failed with QP_FATAL.
func TestDeregisterWaitIsBounded(t *testing.T) {
	mr, q, ev := revokeFixture(t)
	defer q.Destroy()
	defer func(d time.Duration) { RevokeWait = d }(RevokeWait)
	RevokeWait = 20 * time.Millisecond
	shm.Store32(q.mem, abi.QPDirectBusyOff, 1)
	done := make(chan struct{})
	go func() { mr.Deregister(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang guard, far above RevokeWait
		t.Fatal("the deregistration waited for a busy word that never clears")
	}
	if q.State() != abi.QPStateErr || shm.Load32(q.mem, abi.QPStateOff) != uint32(abi.QPStateErr) {
		t.Fatalf("the stuck initiator's QP is in %v (published %d), want ERR", q.State(), shm.Load32(q.mem, abi.QPStateOff))
	}
	if got := ev.list(); len(got) != 1 || got[0] != abi.EventQPFatal {
		t.Fatalf("events %v, want one QP_FATAL", got)
	}
}

// TestDeregisterWaitsForBusy: a deregistration returns only after the
// initiator's busy word clears.
func TestDeregisterWaitsForBusy(t *testing.T) {
	mr, q, ev := revokeFixture(t)
	defer q.Destroy()
	defer func(d time.Duration) { RevokeWait = d }(RevokeWait)
	RevokeWait = time.Hour // only the cleared busy word ends the wait
	shm.Store32(q.mem, abi.QPDirectBusyOff, 1)
	done := make(chan struct{})
	go func() { mr.Deregister(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for shm.Load32(q.mem, abi.QPRevokeOff) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the revoke word never changed")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the deregistration returned while a direct operation was marked busy")
	default:
	}
	shm.Store32(q.mem, abi.QPDirectBusyOff, 0)
	<-done
	if got := ev.list(); len(got) != 0 {
		t.Fatalf("events %v for an initiator that finished in time", got)
	}
}

// TestDeregisterSkipsDestroyedInitiators: an initiator whose QP is gone
// (its process exited with the busy word set) holds nothing up.
func TestDeregisterSkipsDestroyedInitiators(t *testing.T) {
	mr, q, _ := revokeFixture(t)
	shm.Store32(q.mem, abi.QPDirectBusyOff, 1)
	q.Destroy()
	defer func(d time.Duration) { RevokeWait = d }(RevokeWait)
	RevokeWait = time.Hour // only a skipped initiator lets the test end
	mr.Deregister()
}

// TestQPStateIsPublished: every state change reaches the shared word.
func TestQPStateIsPublished(t *testing.T) {
	_, q, _ := revokeFixture(t)
	defer q.Destroy()
	word := func() abi.QPState { return abi.QPState(shm.Load32(q.mem, abi.QPStateOff)) }
	if word() != abi.QPStateReset {
		t.Fatalf("a new QP publishes %v", word())
	}
	toInit := qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessRemoteWrite}
	if _, err := q.Modify(&toInit, qpstate.MaskState|qpstate.MaskPKeyIndex|qpstate.MaskPort|qpstate.MaskAccessFlags); err != nil {
		t.Fatal(err)
	}
	if word() != abi.QPStateInit {
		t.Fatalf("after RESET->INIT the word says %v", word())
	}
	q.Fail(abi.EventQPFatal, "test")
	if word() != abi.QPStateErr {
		t.Fatalf("after Fail the word says %v", word())
	}
	if _, err := q.Modify(&qpstate.Attr{State: abi.QPStateReset}, qpstate.MaskState); err != nil {
		t.Fatal(err)
	}
	if word() != abi.QPStateReset {
		t.Fatalf("after ERR->RESET the word says %v", word())
	}
}
