package itest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
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
