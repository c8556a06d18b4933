package attack

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/proctest"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// What a tenant makes the daemon allocate or lock is charged to it
// (docs/design/accounting.md): the rings of its queues against the ring
// limit, and registered memory against the RLIMIT_MEMLOCK of the process
// that registers it, whichever process opened the connection.

// accountEnv makes the test binary run one of this file's tenant roles
// (accountMain) instead of tenantMain's verbs.
const accountEnv = "VRDMA_ATTACK_ACCOUNT"

// soloDaemon starts one daemon that joins no switch, on a host of its
// own, with a socket every tenant may reach; args are more flags. With
// pidNS the daemon runs in a pid namespace of its own (as in a
// container), where it cannot see its clients' processes.
func soloDaemon(t *testing.T, pidNS bool, args ...string) string {
	t.Helper()
	netns.Require(t)
	h := netns.New(t, 1).Hosts[0]
	if !pidNS {
		d := h.StartDaemon(t, append([]string{"--no-switch", "--mode", "0666"}, args...)...)
		if err := os.Chmod(filepath.Dir(d.Socket), 0o755); err != nil {
			t.Fatal(err)
		}
		return d.Socket
	}
	dir, err := os.MkdirTemp("", "vrdma-pidns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "vrdma.sock")
	cmd := h.Command(t.Context(), "unshare", append([]string{"--pid", "--fork", "--mount-proc", "--kill-child",
		netns.VRDMABinary(t), "daemon", "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--no-switch", "--mode", "0666"}, args...)...)
	var out proctest.Buffer // written by the command's copier, read here
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare --pid: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	eventually(t, 30*time.Second, "the daemon in its own pid namespace listens", func() (bool, string) {
		c, err := net.Dial("unixpacket", sock)
		if err != nil {
			return false, err.Error() + "\n" + out.String()
		}
		c.Close()
		return true, ""
	})
	return sock
}

// accountRun runs role as a tenant of uid against the daemon at sock, to
// its end (and its children's), and returns its lines by what they say.
func accountRun(t *testing.T, uid int, sock, role string) map[string]string {
	t.Helper()
	cmd := tenantCommand(t, uid, sock)
	cmd.Env = append(cmd.Env, accountEnv+"="+role)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tenant %d %s: %v\n%s", uid, role, err, out)
	}
	t.Logf("tenant %d %s:\n%s", uid, role, out)
	return lines(string(out))
}

// accountMain runs a role of this file's tenants:
//
//	queues         create a CQ of the most completions and a QP of the most
//	               requests on it, pair after pair, until refused
//	queues+hold    the same, then hold them until stdin closes
//	fork-register  lower RLIMIT_MEMLOCK to 8 MiB, connect, register 6 MiB,
//	               and pass the connection to a child process, then exit
//	               (the child, fork-child, goes on with it)
//	register       register 1 MiB on a connection of its own
//	lying-segments registrations whose segment lists lie (segments_test.go)
func accountMain(role string) int {
	switch role {
	case "queues":
		return manyQueues()
	case "queues+hold":
		if code := manyQueues(); code != 0 {
			return code
		}
		fmt.Println("holding")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "fork-register":
		return forkRegister()
	case "fork-child":
		return forkChild()
	case "lying-segments":
		return lyingSegments()
	case "register":
		c, pd, err := rawOpen(os.Getenv("VRDMA_SOCKET"))
		if err != nil {
			fmt.Println("open:", err)
			return 1
		}
		defer c.Close()
		code, msg := regMR(c, pd, 1<<20)
		sayReg("register 1M", code, msg)
		return 0
	}
	fmt.Printf("%s: unknown role\n", role)
	return 2
}

// manyQueues is the row "one uid within every quota creates 446 QPs of
// 16,384 requests": 7.1 GiB of rings (and 893 MiB of CQs) before.
func manyQueues() int {
	dev, err := vrdma.Open("vrdma0")
	if err != nil {
		fmt.Println("open:", classOf(err), err)
		return 1
	}
	defer dev.Close()
	attr, err := dev.Query()
	if err != nil {
		fmt.Println("query:", err)
		return 1
	}
	fmt.Printf("max_ring_bytes: %d\n", attr.MaxRingBytes)
	pd, err := dev.AllocPD()
	if err != nil {
		fmt.Println("pd:", err)
		return 1
	}
	var keep []any
	n := 0
	for {
		cq, err := dev.CreateCQ(attr.MaxCQE)
		if err == nil {
			keep = append(keep, cq)
			var qp *vrdma.QP
			qp, err = pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: vrdma.QPCap{
				MaxSendWR: attr.MaxQPWR, MaxRecvWR: attr.MaxQPWR, MaxSendSGE: attr.MaxSGE, MaxRecvSGE: attr.MaxSGE, MaxInlineData: attr.MaxInline}})
			keep = append(keep, qp)
		}
		if err != nil {
			fmt.Printf("queues: %s after %d: %v\n", classOf(err), n, err)
			break
		}
		n++
	}
	_ = keep
	return 0
}

// sayReg prints what a registration came to: "WHAT: ok" or "WHAT: CODE: message".
func sayReg(what string, code proto.Code, msg string) {
	if code == proto.CodeOK {
		fmt.Printf("%s: ok\n", what)
		return
	}
	fmt.Printf("%s: %v: %s\n", what, code, msg)
}

// rawCall sends one request on c and returns the reply, skipping events.
func rawCall(c *proto.Conn, op proto.Op, v any, fds ...int) (proto.Code, []byte, error) {
	if err := c.Send(proto.Header{Kind: proto.KindRequest, Op: op, ID: 1}, v, fds...); err != nil {
		return 0, nil, err
	}
	for {
		h, body, rfds, err := c.Recv()
		proto.CloseFDs(rfds)
		if err != nil {
			return 0, nil, err
		}
		if h.Kind == proto.KindReply {
			return h.Code, append([]byte(nil), body...), nil
		}
	}
}

// rawOpen connects to the daemon at sock, opens vrdma0 and allocates a PD.
func rawOpen(sock string) (*proto.Conn, uint32, error) {
	c, err := proto.Dial(sock)
	if err != nil {
		return nil, 0, err
	}
	if code, body, err := rawCall(c, proto.OpHello, proto.HelloReq{Device: "vrdma0"}); err != nil || code != proto.CodeOK {
		c.Close()
		return nil, 0, fmt.Errorf("hello: %v %v %s", code, err, body)
	}
	code, body, err := rawCall(c, proto.OpAllocPD, nil)
	var pd proto.HandleResp
	if err != nil || code != proto.CodeOK || json.Unmarshal(body, &pd) != nil {
		c.Close()
		return nil, 0, fmt.Errorf("alloc_pd: %v %v %s", code, err, body)
	}
	return c, pd.Handle, nil
}

// regMR registers n bytes of a sealed memfd of its own in pd.
func regMR(c *proto.Conn, pd uint32, n int) (proto.Code, string) {
	fd, err := unix.MemfdCreate("attack", unix.MFD_ALLOW_SEALING)
	if err != nil {
		return proto.CodeInternal, "memfd: " + err.Error()
	}
	defer unix.Close(fd)
	_ = unix.Ftruncate(fd, int64(n))
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	code, body, err := rawCall(c, proto.OpRegMR, proto.RegMRReq{PD: pd, Addr: 0x10000, Length: uint64(n), Access: 1}, fd)
	if err != nil {
		return proto.CodeInternal, err.Error()
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return code, e.Error
}

// forkRegister is the row "a process that connected forks and exits; the
// child registers memory": 64 MiB locked against an 8 MiB RLIMIT_MEMLOCK
// before, the parent's limits being unreadable once it had exited.
func forkRegister() int {
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 8 << 20, Max: 8 << 20}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	c, pd, err := rawOpen(os.Getenv("VRDMA_SOCKET"))
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	code, msg := regMR(c, pd, 6<<20)
	sayReg("parent 6M", code, msg)
	f, err := c.Raw().File() // the child's copy of the connection
	if err != nil {
		fmt.Println("dup:", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	child := exec.Command(exe)
	child.Env = append(os.Environ(), accountEnv+"=fork-child", "VRDMA_ATTACK_PD="+strconv.Itoa(int(pd)), "VRDMA_ATTACK_PARENT="+strconv.Itoa(os.Getpid()))
	child.ExtraFiles = []*os.File{f}
	child.Stdout, child.Stderr = os.Stdout, os.Stderr
	if err := child.Start(); err != nil {
		fmt.Println("child:", err)
		return 1
	}
	fmt.Println("parent: exits")
	return 0 // without waiting: the child outlives it
}

// forkChild waits for its parent to be gone and registers on the
// connection it inherited (descriptor 3): 64 MiB (past its own 8 MiB
// limit), then 6 MiB (within it: the parent's 6 MiB are the parent's),
// then 3 MiB (past it).
func forkChild() int {
	parent, _ := strconv.Atoi(os.Getenv("VRDMA_ATTACK_PARENT"))
	pd, _ := strconv.Atoi(os.Getenv("VRDMA_ATTACK_PD"))
	deadline := time.Now().Add(20 * time.Second) // hang guard
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", parent)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("child: the parent did not exit")
			return 1
		}
		time.Sleep(10 * time.Millisecond)
	}
	fc, err := net.FileConn(os.NewFile(3, "connection"))
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	c := proto.NewClientConn(fc.(*net.UnixConn))
	defer c.Close()
	for _, r := range []struct {
		what string
		n    int
	}{{"child 64M", 64 << 20}, {"child 6M", 6 << 20}, {"child 3M", 3 << 20}} {
		code, msg := regMR(c, uint32(pd), r.n)
		sayReg(r.what, code, msg)
	}
	return 0
}

// TestRingQuota: one uid creates CQs of the most completions and QPs of
// the most requests until refused. It is refused with ErrLimit naming the
// ring limit and its flag, having had the daemon allocate no more than the
// advertised limit, a sixteenth of the host's memory by default; another
// uid still creates the same queues meanwhile.
func TestRingQuota(t *testing.T) {
	sock := soloDaemon(t, false)
	a := tenantHoldAccount(t, tenantA, sock, "queues")
	t.Logf("tenant A: %s; max_ring_bytes %s", a.lines["queues"], a.lines["max_ring_bytes"])
	if got := a.lines["queues"]; !strings.HasPrefix(got, "ErrLimit after ") || !strings.Contains(got, "ring=") || !strings.Contains(got, "--limit ring=BYTES") {
		t.Errorf("tenant A's queues: %q, want ErrLimit naming the ring limit and --limit ring=BYTES", got)
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	ram := uint64(si.Totalram) * uint64(si.Unit)
	if limit, err := strconv.ParseUint(a.lines["max_ring_bytes"], 10, 64); err != nil || limit > ram/16 {
		t.Errorf("advertised max_ring_bytes %q; want at most a sixteenth of the host's %d bytes", a.lines["max_ring_bytes"], ram)
	}
	b := accountRun(t, tenantB, sock, "queues")
	if got := b["queues"]; !strings.HasPrefix(got, "ErrLimit after ") || strings.HasPrefix(got, "ErrLimit after 0:") {
		t.Errorf("tenant B while A holds its ring quota: %q, want queues of its own until its own limit", got)
	}
	if err := a.release(); err != nil {
		t.Errorf("tenant A: %v", err)
	}
}

// tenantHoldAccount runs role+hold as a tenant of uid: it holds what it
// made until released.
func tenantHoldAccount(t *testing.T, uid int, sock, role string) *heldTenant {
	t.Helper()
	cmd := tenantCommand(t, uid, sock)
	cmd.Env = append(cmd.Env, accountEnv+"="+role+"+hold")
	return holdCommand(t, cmd)
}

// TestForkedChildMemlock: a process with an 8 MiB RLIMIT_MEMLOCK connects,
// registers 6 MiB, passes its connection to a child and exits; the child
// registers 64 MiB on it. The daemon charges each registration to the
// process that sent it: the child's 64 MiB are refused against its own
// limit, 6 MiB of its own pass (the parent's are the parent's), 3 MiB more
// do not.
func TestForkedChildMemlock(t *testing.T) {
	sock := soloDaemon(t, false)
	out := accountRun(t, tenantA, sock, "fork-register")
	if out["parent 6M"] != "ok" || out["child 6M"] != "ok" {
		t.Errorf("6 MiB each under 8 MiB limits: parent %q, child %q; want ok", out["parent 6M"], out["child 6M"])
	}
	for _, k := range []string{"child 64M", "child 3M"} {
		if got := out[k]; !strings.HasPrefix(got, proto.CodeMemlock.String()) || !strings.Contains(got, "RLIMIT_MEMLOCK of 8388608 bytes") {
			t.Errorf("%s past the child's 8 MiB limit: %q; want a memlock refusal naming its limit", k, got)
		}
	}
}

// TestUnreadableLimitsRefused: a daemon that cannot see its clients'
// processes (it runs in a pid namespace of its own) cannot read their
// RLIMIT_MEMLOCK; a tenant's registration is refused with why, not taken
// as unlimited. Root's still passes (CAP_IPC_LOCK).
func TestUnreadableLimitsRefused(t *testing.T) {
	sock := soloDaemon(t, true)
	out := accountRun(t, tenantA, sock, "register")
	if got := out["register 1M"]; !strings.HasPrefix(got, proto.CodeMemlock.String()) || !strings.Contains(got, "cannot tell which process") {
		t.Errorf("a tenant the daemon cannot see registers 1 MiB: %q; want a memlock refusal saying why", got)
	}
	c, pd, err := rawOpen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if code, msg := regMR(c, pd, 1<<20); code != proto.CodeOK {
		t.Errorf("root registers 1 MiB: %v %s", code, msg)
	}
}
