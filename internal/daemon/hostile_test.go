package daemon_test

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// hostileQP opens vrdma0 on a raw connection and creates an RC QP, returning
// the reply's descriptors: the rings' memfd and the doorbell eventfd.
func hostileQP(t *testing.T, c *rawClient) (proto.CreateQPResp, []int) {
	t.Helper()
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	var pd, cq proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: 16}))
	proto.CloseFDs(r.fds)
	if err := json.Unmarshal(r.body, &cq); err != nil || r.h.Code != proto.CodeOK {
		t.Fatalf("create_cq: %v %s", err, r.msg())
	}
	r = c.call(proto.OpCreateQP, mustJSON(proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeRC), SendCQ: cq.Handle, RecvCQ: cq.Handle,
		Caps: proto.QPCaps{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	var qp proto.CreateQPResp
	if err := json.Unmarshal(r.body, &qp); err != nil || r.h.Code != proto.CodeOK || len(r.fds) != 2 {
		t.Fatalf("create_qp: %v %s (%d fds)", err, r.msg(), len(r.fds))
	}
	return qp, r.fds
}

// TestDestroyDespiteStolenDoorbell: a client that makes its doorbell
// descriptor blocking and tries to read wake-ups from it must not be able to
// keep the daemon from destroying the QP. (With a shared eventfd it could:
// the flag is the open file description's, and the reads took the signal
// that woke the worker.) Its end is now its own, and write-only.
func TestDestroyDespiteStolenDoorbell(t *testing.T) {
	sock := daemontest.Start(t)
	for round := 0; round < 5; round++ {
		c := dial(t, sock)
		qp, fds := hostileQP(t, c)
		bell := fds[1]
		if err := unix.SetNonblock(bell, false); err != nil {
			t.Fatal(err)
		}
		go func() { // a thief: would read every wake-up meant for the worker
			var b [8]byte
			for {
				if _, err := unix.Read(bell, b[:]); err != nil && err != syscall.EINTR {
					return // a write-only end: nothing to steal
				}
			}
		}()
		time.Sleep(5 * time.Millisecond) // let the thief block in read
		done := make(chan reply, 1)
		go func() { done <- c.call(proto.OpDestroyQP, mustJSON(proto.HandleReq{Handle: qp.Handle})) }()
		select {
		case r := <-done:
			if r.h.Code != proto.CodeOK {
				t.Fatalf("destroy_qp: %s", r.msg())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: destroy_qp never answered while the client read the doorbell", round)
		}
		unix.Close(fds[0])
		unix.Close(bell) // ends the thief's read with an error
		c.Close()
	}
	checkAlive(t, sock)
}

// TestScribbledConsumerIndexDoesNotSpin: a client that overwrites the send
// ring's consumer word (the daemon's to write) must not make the daemon's
// worker spin: the daemon compares producer words with its own counts.
func TestScribbledConsumerIndexDoesNotSpin(t *testing.T) {
	sock := daemontest.Start(t)
	c := dial(t, sock)
	defer c.Close()
	qp, fds := hostileQP(t, c)
	defer proto.CloseFDs(fds)
	mem, err := unix.Mmap(fds[0], 0, qp.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	mem[abi.RingConsOff] = 7 // scribble
	var b [8]byte
	mem[abi.RingNotifyOff] = 0
	b[0] = 1
	_, _ = unix.Write(fds[1], b[:]) // ring the doorbell too
	var before, after unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &before)
	time.Sleep(300 * time.Millisecond)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &after)
	used := time.Duration(after.Utime.Nano()-before.Utime.Nano()) + time.Duration(after.Stime.Nano()-before.Stime.Nano())
	// A spinning worker would use about all of the 300 ms; an idle daemon
	// next to nothing. Half is a boundary no scheduler noise reaches.
	if used > 150*time.Millisecond {
		t.Fatalf("the daemon used %v of CPU in 300 ms with a scribbled index: a worker spins", used)
	}
	checkAlive(t, sock)
}
