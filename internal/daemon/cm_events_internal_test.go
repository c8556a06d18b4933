package daemon

import (
	"errors"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

// TestCMOutboxHoldsBackCharges: a connection that ends is given back once
// the events queued before its end are delivered, at once if none waits;
// an outbox of cmLagEvents events is lagging until it drains; past its
// bound, events are dropped and counted.
func TestCMOutboxHoldsBackCharges(t *testing.T) {
	o := newCMOutbox()
	var given uint64
	give := func(n uint64) { given += n }
	o.uncharge(give)
	if given != 1 {
		t.Fatalf("an empty outbox: %d given back, want 1 at once", given)
	}
	o.push(proto.CMEvent{ID: 1})
	o.push(proto.CMEvent{ID: 2})
	o.uncharge(give) // after event 2
	o.uncharge(give)
	o.push(proto.CMEvent{ID: 3})
	o.uncharge(give) // after event 3
	if given != 1 {
		t.Fatalf("with events waiting: %d given back, want still 1", given)
	}
	want := map[uint32]uint64{1: 1, 2: 1, 3: 3} // given back when each is sent
	var sent []uint32
	err := o.drain(func(ev proto.CMEvent) error {
		if given != want[ev.ID] {
			t.Errorf("sending event %d: %d given back, want %d", ev.ID, given, want[ev.ID])
		}
		sent = append(sent, ev.ID)
		return nil
	}, give)
	if err != nil || len(sent) != 3 || given != 4 {
		t.Fatalf("drained %v, %v; %d given back, want 3 events and 4", sent, err, given)
	}

	for i := range cmLagEvents {
		if o.lagging() {
			t.Fatalf("lagging with %d events", i)
		}
		o.push(proto.CMEvent{ID: uint32(i)})
	}
	if !o.lagging() {
		t.Fatalf("not lagging with %d events", cmLagEvents)
	}
	gone := errors.New("client gone")
	if err := o.drain(func(proto.CMEvent) error { return gone }, give); err != gone {
		t.Fatalf("drain to a client that is gone: %v", err)
	}
	_ = o.drain(func(proto.CMEvent) error { return nil }, give)
	if o.lagging() {
		t.Fatal("lagging once drained")
	}

	for i := range cmOutboxMaxEvents + 5 {
		o.push(proto.CMEvent{ID: uint32(i)})
	}
	if len(o.q) != cmOutboxMaxEvents || o.dropped != 5 {
		t.Fatalf("%d events queued, %d dropped; want %d and 5", len(o.q), o.dropped, cmOutboxMaxEvents)
	}
}

// TestReleaseAfterEnd: what a session gives back after its end (which gave
// back everything) takes nothing from the uid's other sessions.
func TestReleaseAfterEnd(t *testing.T) {
	l := testLedger()
	u := l.join(1000)
	var a, b limitSet
	for _, held := range []*limitSet{&a, &b} {
		if err := l.charge(held, CMConns, 2, u); err != nil {
			t.Fatal(err)
		}
	}
	l.releaseAll(&a, u)
	l.release(&a, CMConns, 1, u) // a's outbox, late
	if got := l.usedBy(1000)[CMConns]; got != 2 {
		t.Fatalf("uid holds %d connections, want b's 2", got)
	}
}
