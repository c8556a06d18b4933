package guest

import (
	"fmt"
	"strings"
	"testing"
)

// TestToolIbvDevinfoReportsTheLimits: ibv_devinfo -v, unmodified, reports
// the queue limits of a real device that the daemon grants (before: max_cqe
// 65536, max_qp_wr 16384, max_sge 16, gid_tbl_len the number of GIDs).
func TestToolIbvDevinfoReportsTheLimits(t *testing.T) {
	requireTool(t, "ibv_devinfo", ibverbsUtils)
	h := newToolHost(t)
	out := h.run(t, "", "ibv_devinfo", "-v")
	info := map[string]string{}
	for line := range strings.Lines(out) {
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if _, seen := info[key]; ok && !seen {
			info[key] = strings.TrimSpace(val)
		}
	}
	// The numbers, not the engine's constants, which the change moved: a
	// ConnectX's max_cqe and max_qp_wr, rdma_rxe's max_sge.
	for key, want := range map[string]int{
		"max_cqe":     4194304,
		"max_qp_wr":   32768,
		"max_sge":     32,
		"max_sge_rd":  32,
		"max_srq_wr":  32768,
		"max_srq_sge": 32,
		"gid_tbl_len": 16,
	} {
		if info[key] != fmt.Sprint(want) {
			t.Errorf("ibv_devinfo -v: %s is %q, want %d", key, info[key], want)
		}
	}
	if t.Failed() {
		t.Logf("ibv_devinfo -v printed:\n%s", out)
	}
}
