package itest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// TestClientKilledReleasesEverything kills a client process that holds a
// device, a PD, a 1 MiB region, a CQ and an RC QP connected to ours, and
// checks that the daemon releases all of it, that our QP goes to the error
// state with a QP_FATAL event, and that our posted receives are flushed.
func TestClientKilledReleasesEverything(t *testing.T) {
	sock := daemontest.Start(t)
	o := vrdma.Options{Socket: sock}
	adm, err := vrdma.DialAdmin(o)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: "victim", Adapters: 1}); err != nil {
		t.Fatal(err)
	}
	fdsBefore := openFDs(t)

	dev, err := vrdma.Open("vrdma0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	mr, err := pd.AllocMR(4096, ibv.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	cq, _ := dev.CreateCQ(64)
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := qp.PostRecv([]vrdma.RecvWR{{ID: uint64(100 + i), SGL: []ibv.SGE{mr.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	ours, _ := qp.Endpoint(0)
	baseline, err := adm.Stats()
	if err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), childEnv+"=holder", "VRDMA_SOCKET="+sock, "VRDMA_INSTANCE=victim", "PEER_EP="+ours.String())
	stdin, _ := child.StdinPipe()
	defer stdin.Close()
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		child.Process.Kill()
		t.Fatalf("child said %q: %v", line, err)
	}
	var epText string
	var raddr uint64
	var rkey uint32
	if _, err := fmt.Sscanf(line, "%s %d %d", &epText, &raddr, &rkey); err != nil {
		child.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	theirs, err := vrdma.ParseEndpoint(epText)
	if err != nil {
		child.Process.Kill()
		t.Fatal(err)
	}
	if err := qp.Connect(theirs, nil); err != nil {
		child.Process.Kill()
		t.Fatal(err)
	}
	// Prove the connection works: write into the child's region.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]vrdma.WorkCompletion, 8)
	if err := qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{mr.SGE(0, 64)}, RemoteAddr: raddr, RKey: rkey}}); err != nil {
		t.Fatal(err)
	}
	if n, err := cq.PollWait(ctx, wc, 100); err != nil || n != 1 || wc[0].Status != ibv.WCSuccess {
		t.Fatalf("write into the child: n=%d err=%v wc=%+v", n, err, wc[0])
	}
	during, _ := adm.Stats()
	if during.QPs != baseline.QPs+1 || during.MRs != baseline.MRs+1 || during.Sessions != baseline.Sessions+1 {
		t.Fatalf("while the child lives the daemon counts %+v, baseline %+v", during, baseline)
	}

	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = child.Wait()

	select {
	case ev := <-dev.Events():
		if ev.Type != ibv.EventQPFatal || ev.QP != qp {
			t.Fatalf("event %v on QP %v, want QP_FATAL on ours", ev.Type, ev.QP)
		}
	case <-ctx.Done():
		t.Fatal("no QP_FATAL event after the peer process died")
	}
	attr, _, err := qp.Query()
	if err != nil || attr.State != ibv.QPSErr {
		t.Fatalf("our QP is in %v (err %v), want ERR", attr.State, err)
	}
	flushed := 0
	for flushed < 3 {
		n, err := cq.PollWait(ctx, wc, 100)
		if err != nil {
			t.Fatalf("after %d flushed receives: %v", flushed, err)
		}
		for _, c := range wc[:n] {
			if c.Status != ibv.WCWRFlushErr || c.Opcode != ibv.WCRecv {
				t.Fatalf("completion %+v, want a flushed receive", c)
			}
			flushed++
		}
	}

	// Everything the child held is gone: the counts are back to the baseline.
	var after vrdma.DaemonStats
	for i := 0; ; i++ {
		after, _ = adm.Stats()
		if after == baseline {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the child died the daemon counts %+v, baseline %+v", after, baseline)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And our own objects release their descriptors too.
	qp.Destroy()
	cq.Destroy()
	mr.Dereg()
	pd.Dealloc()
	dev.Close()
	for {
		fds := openFDs(t)
		if fds <= fdsBefore {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d descriptors open, %d before the test: something leaked", fds, fdsBefore)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// TestMemlockLimitIsExplained registers more memory than RLIMIT_MEMLOCK
// allows from a process that cannot ignore the limit.
func TestMemlockLimitIsExplained(t *testing.T) {
	sock := publicDaemon(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=memlock", "VRDMA_SOCKET="+sock)
	if os.Geteuid() == 0 {
		// Root has CAP_IPC_LOCK and ignores the limit: run the client as nobody.
		asNobody(t, cmd)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("memlock child: %v\n%s", err, out)
	}
	t.Logf("the error a user sees: %s", strings.TrimSpace(string(out)))
}

// TestDaemonPinsOnlyWhatTheClientMay: the daemon (root here) counts the
// memory it locks for a client against the client's own RLIMIT_MEMLOCK.
func TestDaemonPinsOnlyWhatTheClientMay(t *testing.T) {
	sock := publicDaemon(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=rawpin", "VRDMA_SOCKET="+sock)
	if os.Geteuid() == 0 {
		asNobody(t, cmd) // the daemon does not limit root clients
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rawpin child: %v\n%s", err, out)
	}
	t.Logf("the daemon said: %s", strings.TrimSpace(string(out)))
}

// TestDaemonPinsPerProcess: the daemon charges the memory it locks to the
// client process, across all its sessions, as the kernel charges
// ibv_reg_mr to the process: opening more sessions buys no more.
func TestDaemonPinsPerProcess(t *testing.T) {
	sock := publicDaemon(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=rawpin-sessions", "VRDMA_SOCKET="+sock)
	if os.Geteuid() == 0 {
		asNobody(t, cmd) // the daemon does not limit root clients
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rawpin-sessions child: %v\n%s", err, out)
	}
	t.Logf("the daemon said: %s", strings.TrimSpace(string(out)))
}

// TestSocketPermissionsDecide: a user the socket's mode leaves out cannot
// open a device, and is told why.
func TestSocketPermissionsDecide(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs a client as another user (CI runs it as root)")
	}
	sock := daemontest.Start(t) // mode 0660, owned by root
	if err := os.Chmod(strings.TrimSuffix(sock, "/vrdma.sock"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=open", "VRDMA_SOCKET="+sock)
	asNobody(t, cmd)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("a user outside the socket's group: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "group") {
		t.Fatalf("the message does not say how to get access: %s", out)
	}
	// The same user with the socket opened to everyone gets in.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=open", "VRDMA_SOCKET="+sock)
	asNobody(t, cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with mode 0666: %v\n%s", err, out)
	}
}
