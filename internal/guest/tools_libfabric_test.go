package guest

import (
	"strconv"
	"strings"
	"testing"
)

// TestToolFiPingpong runs libfabric's fi_pingpong, unmodified, on libfabric's
// verbs provider over vrdma, with its data checks: the MSG endpoint (RC QPs
// through rdma_cm, libfabric's own use of them), the DGRAM endpoint (UD
// QPs; it failed with "max_inline_data 448 must be 0..256": the daemon
// granted more inline data than it then accepted) and the RDM endpoint
// (verbs;ofi_rxm over RC; it failed with "cqe 262144: a CQ holds 1 to 65536
// completions").
func TestToolFiPingpong(t *testing.T) {
	requireTool(t, "fi_pingpong", "libfabric-bin")
	for _, ep := range []string{"msg", "dgram", "rdm"} {
		t.Run(ep, func(t *testing.T) {
			h := newToolHost(t)
			port := freePort(t)
			srv := h.startServer(t, "", port, "fi_pingpong", "-p", "verbs", "-e", ep, "-I", "50", "-c", "-B", strconv.Itoa(port))
			out := h.run(t, "", "fi_pingpong", "-p", "verbs", "-e", ep, "-I", "50", "-c", "-P", strconv.Itoa(port), "127.0.0.1")
			srv.wait(t)
			sizes := 0
			for line := range strings.Lines(out) {
				f := strings.Fields(line)
				if len(f) == 8 && f[1] == "50" && f[2] == "=50" {
					sizes++
				}
			}
			if sizes < 4 {
				t.Errorf("fi_pingpong -e %s: %d transfer sizes with 50 sent and 50 acknowledged, want at least 4; it printed:\n%s", ep, sizes, out)
			}
		})
	}
}
