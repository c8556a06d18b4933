package engine

import (
	"testing"
	"unsafe"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// allocated is the bytes behind a slice's capacity.
func allocated[T any](s []T) int {
	var zero T
	return cap(s) * int(unsafe.Sizeof(zero))
}

// TestDeviceFootprint: a queue of an adapter bound to a verbs uplink is
// charged for what its device side holds in the daemon, as the wire path's
// state is: a QP's footprint is what PD.QPBytes charged before it was
// made, more than the same QP's off a device, and at least what it
// allocated for the device (its batches, inline buffer and slot table);
// an SRQ's is what PD.SRQBytes charged, its slot table included, and a
// resize gives back the old footprint and takes SRQBytesFor's.
func TestDeviceFootprint(t *testing.T) {
	s := newSRQScene(t, 16)
	pd := s.qps[0].pd
	for _, tt := range []struct {
		typ  abi.QPType
		caps proto.QPCaps
		srq  bool
	}{
		{abi.QPTypeRC, proto.QPCaps{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, false},
		{abi.QPTypeRC, proto.QPCaps{MaxSendWR: 512, MaxRecvWR: 1024, MaxSendSGE: 4, MaxRecvSGE: 2, MaxInlineData: 64}, false},
		{abi.QPTypeUD, proto.QPCaps{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}, false},
		{abi.QPTypeRC, proto.QPCaps{MaxSendWR: 8, MaxSendSGE: 1}, true},
	} {
		charged, err := pd.QPBytes(tt.caps, tt.typ, tt.srq)
		if err != nil {
			t.Fatal(err)
		}
		cfg := QPConfig{PD: pd, Type: tt.typ, SendCQ: s.cq, RecvCQ: s.cq, Events: &events{}, Caps: tt.caps}
		if tt.srq {
			cfg.SRQ = s.srq
		}
		q, err := NewQP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		off, _ := QPBytes(tt.caps, tt.srq)
		d := q.dev
		held := int(unsafe.Sizeof(*d)) + allocated(d.sends) + allocated(d.recvs) + allocated(d.sges) + allocated(d.inl) + allocated(d.udSends) +
			allocated(d.slots.swrid) + allocated(d.slots.sop) + allocated(d.slots.rwrid)
		if got := q.Footprint(); got != charged || got <= off || got-off < uint64(held) {
			t.Errorf("%v QP %+v (srq %v): footprint %d, charged %d, off a device %d, the device side holds %d bytes", tt.typ, tt.caps, tt.srq, got, charged, off, held)
		}
		q.Destroy()
	}

	// The SRQ: its slot table counts.
	charged := pd.SRQBytes(16, 1, false)
	if got := s.srq.Footprint(); got != charged || got <= SRQBytes(16, 1) {
		t.Errorf("SRQ of 16: footprint %d, charged %d, off a device %d", got, charged, SRQBytes(16, 1))
	}
	if x := pd.SRQBytes(16, 1, true); x != SRQBytes(16, 1) {
		t.Errorf("an XRC SRQ (never on the device) charged %d, want %d", x, SRQBytes(16, 1))
	}
	for _, n := range []int{64, 8} { // grows; a smaller ring keeps the slots
		before, want := s.srq.Footprint(), s.srq.SRQBytesFor(n)
		old, fd, err := s.srq.Resize(n, -1)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		if old != before || s.srq.Footprint() != want {
			t.Errorf("resize to %d: gave back %d (footprint was %d), footprint now %d, SRQBytesFor said %d", n, old, before, s.srq.Footprint(), want)
		}
		if d := s.srq.dev; uint64(devSRQBytes(d.slots.len())) < uint64(allocated(d.slots.wrid)+allocated(d.slots.held)+allocated(d.slots.gen)+allocated(d.slots.free)) {
			t.Errorf("resize to %d: the slot table holds more than its footprint counts", n)
		}
	}
}
