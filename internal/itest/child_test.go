package itest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// childEnv names the role the re-executed test binary plays.
const childEnv = "VRDMA_ITEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "holder":
		os.Exit(holder())
	case "memlock":
		os.Exit(memlock())
	case "rawpin":
		os.Exit(rawPin())
	case "rawpin-sessions":
		os.Exit(rawPinSessions())
	case "owner":
		os.Exit(ownerChild())
	case "attacker":
		os.Exit(attackerChild())
	case "admin":
		os.Exit(adminChild())
	case "cqhog":
		os.Exit(cqHog())
	case "sessionhog":
		os.Exit(sessionHog())
	case "fdhog":
		os.Exit(fdHog())
	case "lowfd-daemon":
		os.Exit(lowFDDaemon())
	case "daemon":
		os.Exit(serveDaemon())
	case "open":
		if _, err := vrdma.Open("vrdma0"); err != nil {
			fmt.Println(err)
			if errors.Is(err, vrdma.ErrPermission) {
				os.Exit(3)
			}
			os.Exit(1)
		}
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "unknown child role")
		os.Exit(2)
	}
}

// holder connects an RC QP to the endpoint in PEER_EP, prints its own
// endpoint and its region's address and rkey, and waits to be killed.
func holder() int {
	fail := func(err error) int { fmt.Println("error:", err); return 1 }
	dev, err := vrdma.Open("vrdma0")
	if err != nil {
		return fail(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return fail(err)
	}
	mr, err := pd.AllocMR(1<<20, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
	if err != nil {
		return fail(err)
	}
	cq, err := dev.CreateCQ(64)
	if err != nil {
		return fail(err)
	}
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return fail(err)
	}
	peer, err := vrdma.ParseEndpoint(os.Getenv("PEER_EP"))
	if err != nil {
		return fail(err)
	}
	if err := qp.Connect(peer, nil); err != nil {
		return fail(err)
	}
	ep, _ := qp.Endpoint(0)
	fmt.Printf("%s %d %d\n", ep, mr.Addr(), mr.RKey())
	// Wait for the parent's SIGKILL; end by ourselves if the parent is gone.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// memlock lowers RLIMIT_MEMLOCK to 64 KiB and registers 1 MiB: the
// registration must fail with a *MemlockError that says how to raise it.
func memlock() int {
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	dev, err := vrdma.Open("vrdma0")
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		fmt.Println("alloc_pd:", err)
		return 1
	}
	_, err = pd.AllocMR(1<<20, ibv.AccessLocalWrite)
	var me *vrdma.MemlockError
	switch {
	case err == nil:
		fmt.Println("registration of 1 MiB succeeded under a 64 KiB RLIMIT_MEMLOCK")
		return 1
	case !errors.As(err, &me) || !errors.Is(err, vrdma.ErrMemlock):
		fmt.Println("wrong error:", err)
		return 1
	case me.Asked != 1<<20 || me.Limit != 64<<10:
		fmt.Printf("error reports asked=%d limit=%d, want %d and %d\n", me.Asked, me.Limit, 1<<20, 64<<10)
		return 1
	case !strings.Contains(err.Error(), "ulimit -l") || !strings.Contains(err.Error(), "limits.conf"):
		fmt.Println("the message does not say how to raise the limit:", err)
		return 1
	}
	fmt.Println(err)
	return 0
}

// rawSession is a session on the daemon's socket that skips the library:
// what a client that does not lock its own memory can ask.
type rawSession struct {
	c  *proto.Conn
	id uint32
}

// dialRaw connects to VRDMA_SOCKET and opens vrdma0.
func dialRaw() (*rawSession, error) {
	c, err := proto.Dial(os.Getenv("VRDMA_SOCKET"))
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	r := &rawSession{c: c}
	if h, msg := r.call(proto.OpHello, proto.HelloReq{Device: "vrdma0"}); h.Code != proto.CodeOK {
		c.Close()
		return nil, fmt.Errorf("hello: %s", msg)
	}
	return r, nil
}

// call sends a request and returns the reply's header and "HANDLE ERROR".
func (r *rawSession) call(op proto.Op, v any, fds ...int) (proto.Header, string) {
	r.id++
	if err := r.c.Send(proto.Header{Kind: proto.KindRequest, Op: op, ID: r.id}, v, fds...); err != nil {
		return proto.Header{}, err.Error()
	}
	for {
		h, body, rfds, err := r.c.Recv()
		proto.CloseFDs(rfds)
		if err != nil {
			return h, err.Error()
		}
		if h.Kind == proto.KindReply {
			var resp struct {
				Handle uint32 `json:"handle"`
				Error  string `json:"error"`
			}
			_ = json.Unmarshal(body, &resp)
			return h, fmt.Sprintf("%d %s", resp.Handle, resp.Error)
		}
	}
}

// regMR allocates a PD and registers a sealed memfd of n bytes, which this
// process never touches, let alone locks.
func (r *rawSession) regMR(n int) (proto.Header, string) {
	h, msg := r.call(proto.OpAllocPD, nil)
	if h.Code != proto.CodeOK {
		return h, "alloc_pd: " + msg
	}
	var pd uint32
	fmt.Sscanf(msg, "%d", &pd)
	fd, err := unix.MemfdCreate("pin", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		return proto.Header{Code: proto.CodeInternal}, "memfd: " + err.Error()
	}
	_ = unix.Ftruncate(fd, int64(n))
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	return r.call(proto.OpRegMR, proto.RegMRReq{PD: pd, Addr: 0x10000, Length: uint64(n), Access: 1}, fd)
}

// rawPin lowers RLIMIT_MEMLOCK to 64 KiB and, skipping the library (which
// would lock the memory itself first and fail), asks the daemon to register
// a 1 MiB sealed memfd: the daemon, which may lock anything, must refuse to
// pin it on behalf of a process that may not.
func rawPin() int {
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	r, err := dialRaw()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer r.c.Close()
	h, msg := r.regMR(1 << 20)
	if h.Code != proto.CodeMemlock || !strings.Contains(msg, "RLIMIT_MEMLOCK") {
		fmt.Printf("reg_mr of 1 MiB under a 64 KiB limit: code %v, %q; want a memlock refusal\n", h.Code, msg)
		return 1
	}
	fmt.Println(msg)
	return 0
}

// rawPinSessions lowers RLIMIT_MEMLOCK to 64 KiB and registers 48 KiB on
// each of several sessions: the kernel charges locked memory to the
// process, so the daemon must too, and refuse the second.
func rawPinSessions() int {
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	var sessions []*rawSession
	defer func() {
		for _, r := range sessions {
			r.c.Close()
		}
	}()
	for i := 0; i < 4; i++ {
		r, err := dialRaw()
		if err != nil {
			fmt.Println(err)
			return 1
		}
		sessions = append(sessions, r)
		h, msg := r.regMR(48 << 10)
		switch {
		case i == 0 && h.Code != proto.CodeOK:
			fmt.Printf("the first 48 KiB under a 64 KiB limit: code %v, %q\n", h.Code, msg)
			return 1
		case i > 0 && h.Code == proto.CodeOK:
			fmt.Printf("session %d locked 48 KiB more: %d KiB in all for one process under a 64 KiB RLIMIT_MEMLOCK\n", i+1, 48*(i+1))
			return 1
		case i > 0 && (h.Code != proto.CodeMemlock || !strings.Contains(msg, "RLIMIT_MEMLOCK") || !strings.Contains(msg, "this process")):
			fmt.Printf("session %d: code %v, %q; want a memlock refusal for the process\n", i+1, h.Code, msg)
			return 1
		case i == 1:
			fmt.Println(msg)
		}
	}
	// Giving the first session's region back frees the process's room.
	sessions[0].c.Close()
	sessions = sessions[1:]
	deadline := time.Now().Add(10 * time.Second) // the daemon cleans up closed sessions asynchronously
	for {
		h, msg := sessions[0].regMR(48 << 10)
		if h.Code == proto.CodeOK {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Printf("after the first session ended: code %v, %q; want room for 48 KiB again\n", h.Code, msg)
			return 1
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveDaemon runs a daemon on VRDMA_SOCKET, says "ready" once it listens
// and serves until it is killed (the tests that start it SIGKILL it).
func serveDaemon() int {
	d, err := daemon.New(daemon.Config{SocketPath: os.Getenv("VRDMA_SOCKET"), HostName: "itest"})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	if err := d.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
