package itest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// hangGuard turns a verb that never returns into a failure. No test
// depends on how fast anything happens.
const hangGuard = 20 * time.Second

// daemonProcess is a daemon running in a process of its own, which the
// test can SIGKILL.
type daemonProcess struct {
	sock string
	cmd  *exec.Cmd
}

// startDaemonProcess runs the test binary as a daemon (child role
// "daemon") on a socket of its own and waits until it listens. The
// process is killed at the end of the test if it still runs.
func startDaemonProcess(t *testing.T) *daemonProcess {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-itest-daemon-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &daemonProcess{sock: filepath.Join(dir, "vrdma.sock")}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), childEnv+"=daemon", "VRDMA_SOCKET="+p.sock)
	p.cmd.Stderr = os.Stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("the daemon process said %q (%v)", line, err)
	}
	return p
}

// kill SIGKILLs the daemon process (this test's own child, by its pid) and
// reaps it.
func (p *daemonProcess) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// lostFixture is what a program holds when its daemon dies: a connected
// RC pair on one device, an SRQ, completions waiting in a CQ, and a CQ
// with none.
type lostFixture struct {
	dev   *vrdma.Device
	pd    *vrdma.PD
	mr    *vrdma.MR
	full  *vrdma.CQ // two send completions wait here, unpolled
	empty *vrdma.CQ // nothing will ever complete here
	idle  *vrdma.CQ // nor here
	qp    *vrdma.QP
	srq   *vrdma.SRQ
}

func newLostFixture(t *testing.T, sock string) *lostFixture {
	t.Helper()
	f := &lostFixture{}
	var err error
	if f.dev, err = vrdma.Open("vrdma0", vrdma.Options{Socket: sock}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.dev.Close() })
	pd, err := f.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	f.pd = pd
	if f.mr, err = pd.AllocMR(1<<16, ibv.AccessLocalWrite|ibv.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	if f.full, err = f.dev.CreateCQ(16); err != nil {
		t.Fatal(err)
	}
	if f.empty, err = f.dev.CreateCQ(16); err != nil {
		t.Fatal(err)
	}
	if f.idle, err = f.dev.CreateCQ(16); err != nil {
		t.Fatal(err)
	}
	if f.srq, err = pd.CreateSRQ(16, 1); err != nil {
		t.Fatal(err)
	}
	caps := vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	if f.qp, err = pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: f.full, RecvCQ: f.empty, Cap: caps}); err != nil {
		t.Fatal(err)
	}
	peer, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: f.empty, RecvCQ: f.empty, Cap: caps})
	if err != nil {
		t.Fatal(err)
	}
	ea, _ := f.qp.Endpoint(0)
	eb, _ := peer.Endpoint(0)
	if err := f.qp.Connect(eb, nil); err != nil {
		t.Fatal(err)
	}
	if err := peer.Connect(ea, nil); err != nil {
		t.Fatal(err)
	}
	// Two WRITEs whose completions stay in the ring until the test polls.
	for i := uint64(1); i <= 2; i++ {
		wr := vrdma.SendWR{ID: i, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{f.mr.SGE(0, 64)}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()}
		if err := f.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := f.full.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

// isLost checks that err reports the lost device the way the tools show it.
func isLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, vrdma.ErrDeviceFatal) {
		t.Fatalf("%s returned %v, want an error matching ErrDeviceFatal", what, err)
	}
	if !strings.Contains(err.Error(), "the vrdma daemon went away") {
		t.Fatalf("%s: the message %q does not say the daemon went away", what, err)
	}
}

// TestDaemonKilledFailsTheDataPath: SIGKILL the daemon under a program
// that holds queues. Waits asleep on a CQ return at once with
// ErrDeviceFatal (their doorbell will never ring); Poll returns the
// completions still in the ring and then ErrDeviceFatal; every post and
// every verb that calls the daemon fails with it.
func TestDaemonKilledFailsTheDataPath(t *testing.T) {
	p := startDaemonProcess(t)
	f := newLostFixture(t, p.sock)

	// Waiters asleep when the daemon dies, one per CQ.
	waits := make(chan error, 2)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		waits <- f.empty.Wait(ctx)
	}()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := f.idle.PollWait(ctx, make([]vrdma.WorkCompletion, 1), 10)
		waits <- err
	}()
	time.Sleep(50 * time.Millisecond) // let them fall asleep; they return either way

	p.kill()
	select {
	case ev := <-f.dev.Events():
		if ev.Type != ibv.EventDeviceFatal {
			t.Fatalf("event %v, want DEVICE_FATAL", ev.Type)
		}
	case <-time.After(hangGuard):
		t.Fatal("no DEVICE_FATAL after the daemon was killed")
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-waits:
			isLost(t, "a wait asleep when the daemon died", err)
		case <-time.After(hangGuard):
			t.Fatal("a wait asleep on a CQ did not return after the daemon died")
		}
	}

	wc := make([]vrdma.WorkCompletion, 4)
	n, err := f.full.Poll(wc)
	if err != nil || n != 2 || wc[0].ID != 1 || wc[1].ID != 2 {
		t.Fatalf("Poll after the loss: %d completions %+v, %v; want the 2 still in the ring", n, wc[:n], err)
	}
	n, err = f.full.Poll(wc)
	if n != 0 {
		t.Fatalf("Poll of a drained CQ after the loss returned %d completions", n)
	}
	isLost(t, "Poll of a drained CQ", err)

	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	tests := []struct {
		name string
		call func() error
	}{
		{"PostSend", func() error {
			return f.qp.PostSend([]vrdma.SendWR{{Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{f.mr.SGE(0, 8)}, RemoteAddr: f.mr.Addr(), RKey: f.mr.RKey()}})
		}},
		{"PostRecv", func() error { return f.qp.PostRecv([]vrdma.RecvWR{{SGL: []ibv.SGE{f.mr.SGE(0, 8)}}}) }},
		{"SRQ.PostRecv", func() error { return f.srq.PostRecv([]vrdma.RecvWR{{SGL: []ibv.SGE{f.mr.SGE(0, 8)}}}) }},
		{"Wait", func() error { return f.empty.Wait(ctx) }},
		{"PollWait", func() error { _, err := f.empty.PollWait(ctx, wc, 10); return err }},
		{"AllocPD", func() error { _, err := f.dev.AllocPD(); return err }},
		{"CreateCQ", func() error { _, err := f.dev.CreateCQ(4); return err }},
		{"Query", func() error { _, _, err := f.qp.Query(); return err }},
		{"Modify", func() error { return f.qp.Modify(&ibv.QPAttr{State: ibv.QPSErr}, ibv.AttrState) }},
		{"QueryPort", func() error { _, err := f.dev.QueryPort(1); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { done <- tt.call() }()
			select {
			case err := <-done:
				isLost(t, tt.name, err)
			case <-time.After(hangGuard):
				t.Fatalf("%s did not return after the daemon died", tt.name)
			}
		})
	}
	if st := f.qp.State(); st != ibv.QPSErr {
		t.Fatalf("QP in %v after the device was lost, want ERR", st)
	}
	// Cleaning up after the loss succeeds, as ibv_destroy_* do after
	// DEVICE_FATAL: the daemon's side is gone already.
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"QP.Destroy", f.qp.Destroy}, {"SRQ.Destroy", f.srq.Destroy}, {"CQ.Destroy", f.full.Destroy},
		{"MR.Dereg", f.mr.Dereg}, {"PD.Dealloc", f.pd.Dealloc}, {"Device.Close", f.dev.Close},
	} {
		if err := c.call(); err != nil {
			t.Errorf("%s after the loss: %v", c.name, err)
		}
	}
}
