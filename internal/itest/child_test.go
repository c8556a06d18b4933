package itest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
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
	mr, err := pd.AllocMR(1<<20, vrdma.AccessLocalWrite|vrdma.AccessRemoteWrite)
	if err != nil {
		return fail(err)
	}
	cq, err := dev.CreateCQ(64)
	if err != nil {
		return fail(err)
	}
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: vrdma.RC, SendCQ: cq, RecvCQ: cq, Cap: vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
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
	_, err = pd.AllocMR(1<<20, vrdma.AccessLocalWrite)
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

// rawPin lowers RLIMIT_MEMLOCK to 64 KiB and, skipping the library (which
// would lock the memory itself first and fail), asks the daemon to register
// a 1 MiB sealed memfd: the daemon, which may lock anything, must refuse to
// pin it on behalf of a process that may not.
func rawPin() int {
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	c, err := proto.Dial(os.Getenv("VRDMA_SOCKET"))
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	call := func(op proto.Op, id uint32, v any, fds ...int) (proto.Header, string) {
		if err := c.Send(proto.Header{Kind: proto.KindRequest, Op: op, ID: id}, v, fds...); err != nil {
			return proto.Header{}, err.Error()
		}
		for {
			h, body, rfds, err := c.Recv()
			proto.CloseFDs(rfds)
			if err != nil {
				return h, err.Error()
			}
			if h.Kind == proto.KindReply {
				var r struct {
					Handle uint32 `json:"handle"`
					Error  string `json:"error"`
				}
				_ = json.Unmarshal(body, &r)
				return h, fmt.Sprintf("%d %s", r.Handle, r.Error)
			}
		}
	}
	if h, msg := call(proto.OpHello, 1, proto.HelloReq{Device: "vrdma0"}); h.Code != proto.CodeOK {
		fmt.Println("hello:", msg)
		return 1
	}
	h, msg := call(proto.OpAllocPD, 2, nil)
	if h.Code != proto.CodeOK {
		fmt.Println("alloc_pd:", msg)
		return 1
	}
	var pd uint32
	fmt.Sscanf(msg, "%d", &pd)
	fd, err := unix.MemfdCreate("pin", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		fmt.Println("memfd:", err)
		return 1
	}
	_ = unix.Ftruncate(fd, 1<<20)
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	h, msg = call(proto.OpRegMR, 3, proto.RegMRReq{PD: pd, Addr: 0x10000, Length: 1 << 20, Access: 1}, fd)
	if h.Code != proto.CodeMemlock || !strings.Contains(msg, "RLIMIT_MEMLOCK") {
		fmt.Printf("reg_mr of 1 MiB under a 64 KiB limit: code %v, %q; want a memlock refusal\n", h.Code, msg)
		return 1
	}
	fmt.Println(msg)
	return 0
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
