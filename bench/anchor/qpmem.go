package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// qpmem creates N RC QPs (64 send and receive slots, 4 SGEs each: a
// typical QP) and reports how much the daemon's resident memory grew, per QP.
func qpmem(args []string) error {
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	dev, err := vrdma.Open("vrdma0")
	if err != nil {
		return err
	}
	defer dev.Close()
	pid := dev.DaemonPID()
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	cq, err := dev.CreateCQ(1024)
	if err != nil {
		return err
	}
	before, err := rss(pid)
	if err != nil {
		return err
	}
	qps := make([]*vrdma.QP, 0, n)
	for i := 0; i < n; i++ {
		qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq,
			Cap: vrdma.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4}})
		if err != nil {
			return fmt.Errorf("QP %d: %w", i, err)
		}
		qps = append(qps, qp)
	}
	after, err := rss(pid)
	if err != nil {
		return err
	}
	ring := 0
	if len(qps) > 0 {
		c := qps[0].Cap()
		ring = 256 + c.MaxSendWR*128 + 256 + c.MaxRecvWR*128
	}
	for _, q := range qps {
		q.Destroy()
	}
	emit(map[string]any{"source": "vrdma", "test": "qp_memory", "msg_size": 0, "qps": n,
		"daemon_bytes_per_qp": float64(after-before) / float64(n), "ring_bytes_per_qp": ring})
	return nil
}

// rss reads a process's resident set size in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
