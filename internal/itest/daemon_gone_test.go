package itest

import (
	"errors"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// TestDaemonGoneIsDeviceFatal: when the daemon goes away an opened device
// reports DEVICE_FATAL, its QPs are in ERR, and verbs fail with
// ErrDeviceFatal instead of hanging.
func TestDaemonGoneIsDeviceFatal(t *testing.T) {
	d := daemontest.StartDaemon(t)
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: d.SocketPath()})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(8)
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: vrdma.RC, SendCQ: cq, RecvCQ: cq, Cap: vrdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	select {
	case ev := <-dev.Events():
		if ev.Type != vrdma.EventDeviceFatal {
			t.Fatalf("event %v, want DEVICE_FATAL", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no DEVICE_FATAL after the daemon closed")
	}
	if qp.State() != vrdma.QPSErr {
		t.Fatalf("QP in %v after the device was lost, want ERR", qp.State())
	}
	if _, err := dev.AllocPD(); !errors.Is(err, vrdma.ErrDeviceFatal) {
		t.Fatalf("a verb after the loss returned %v, want ErrDeviceFatal", err)
	}
}
