package engine

import (
	"errors"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// TestBoundPortMTU: a bound adapter's port reports its device port's
// active and largest MTU (rxe0 on a 1500-byte netdev: 1024 of 4096), so a
// program that takes the port's active MTU (perftest) connects at one the
// device's netdev carries; a path MTU over it is refused as an invalid
// attribute naming the device's, the QP stays as it was and the device is
// not asked, and one within it reaches the device.
func TestBoundPortMTU(t *testing.T) {
	h := NewHost()
	t.Cleanup(h.Close)
	f := &fakeDevice{}
	u := NewDeviceUplink("hca0", f, [][16]byte{{0: 0xfe, 1: 0x80, 15: 1}})
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 9}, false)
	h.AddAdapter(a)
	if got, max := a.PortMTU(), a.PortMaxMTU(); got != abi.MTU4096 || max != abi.MTU4096 {
		t.Fatalf("an unbound adapter's port MTU is %v of %v, want 4096 of 4096", got, max)
	}
	if err := a.Bind(u); err != nil {
		t.Fatal(err)
	}
	u.SetMTU(abi.MTU1024, abi.MTU4096)
	if got, max := a.PortMTU(), a.PortMaxMTU(); got != abi.MTU1024 || max != abi.MTU4096 {
		t.Fatalf("the bound adapter's port MTU is %v of %v, want the device's 1024 of 4096", got, max)
	}

	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	q, err := NewQP(QPConfig{PD: a.NewPD(), Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	init := qpstate.Attr{State: abi.QPStateInit, PortNum: 1}
	if _, err := q.Modify(&init, qpstate.MaskState|qpstate.MaskPKeyIndex|qpstate.MaskPort|qpstate.MaskAccessFlags); err != nil {
		t.Fatal(err)
	}
	rtr := func(m abi.MTU) (abi.QPState, error) {
		attr := qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DGID: [16]byte{15: 2}, PortNum: 1}, PathMTU: m, DestQPN: 0x99, MaxDestRdAtomic: 1, MinRNRTimer: 12}
		return q.Modify(&attr, qpstate.MaskState|qpstate.MaskAV|qpstate.MaskPathMTU|qpstate.MaskDestQPN|qpstate.MaskRQPSN|qpstate.MaskMaxDestRdAtomic|qpstate.MaskMinRNRTimer)
	}
	f.mu.Lock()
	asked := len(f.modify)
	f.mu.Unlock()
	st, err := rtr(abi.MTU4096)
	if !errors.Is(err, qpstate.ErrInvalidAttr) || st != abi.QPStateInit || q.State() != abi.QPStateInit {
		t.Fatalf("RTR at path MTU 4096 over the device's 1024: state %v, %v; want INIT and ErrInvalidAttr", st, err)
	}
	f.mu.Lock()
	if len(f.modify) != asked {
		t.Errorf("the device was asked %+v for a path MTU over its own", f.modify[asked:])
	}
	f.mu.Unlock()
	if st, err := rtr(abi.MTU1024); err != nil || st != abi.QPStateRTR {
		t.Fatalf("RTR at the device's 1024: %v, %v", st, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if last := f.modify[len(f.modify)-1]; last.PathMTU != uint32(abi.MTU1024) {
		t.Fatalf("the device QP got path MTU %d, want %d (1024)", last.PathMTU, abi.MTU1024)
	}
}
