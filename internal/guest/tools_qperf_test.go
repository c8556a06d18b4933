package guest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
)

// Debian's qperf, unmodified, on vrdma adapters through the guest library.
// Its server forks a child per client, which opens the device and runs the
// test: every test here runs the library in a forked process.
//
// qperf exchanges LIDs, not GIDs, so its RC, UC and UD tests need vrdma's
// switch to address adapters by LID, on ports configured for LID routing:
// a RoCE port otherwise needs a GRH, as on rdma_rxe.

func TestToolQperf(t *testing.T) {
	requireTool(t, "qperf", "qperf")
	tests := []struct {
		test   string
		result string // the number that must be positive
	}{
		{"rc_bw", "bw"},
		{"rc_bi_bw", "bw"},
		{"rc_lat", "latency"},
		{"rc_rdma_write_bw", "bw"},
		{"rc_rdma_write_lat", "latency"},
		{"rc_rdma_read_bw", "bw"},
		{"rc_rdma_read_lat", "latency"},
		{"rc_compare_swap_mr", "msg_rate"},
		{"rc_fetch_add_mr", "msg_rate"},
		{"uc_bw", "recv_bw"}, // the sender's count says nothing of arrival
		{"uc_lat", "latency"},
		{"ud_bw", "recv_bw"},
		{"ud_lat", "latency"},
		{"ver_rc_compare_swap", "msg_rate"}, // checks every value it reads back
		{"ver_rc_fetch_add", "msg_rate"},
	}
	h := newToolHost(t)
	const inst = "lids"
	h.createInstance(t, vrdma.InstanceSpec{Name: inst, Adapters: 1, LIDRouting: true})
	for _, tt := range tests {
		t.Run(tt.test, func(t *testing.T) {
			port := freePort(t)
			lp := strconv.Itoa(port)
			h.startServer(t, inst, port, "qperf", "-lp", lp)
			// -t takes whole seconds; 1 is the shortest timed run.
			out := h.run(t, inst, "qperf", "-lp", lp, "-t", "1", "127.0.0.1", tt.test)
			results := qperfResults(out)
			v, ok := results[tt.result]
			if !ok {
				t.Fatalf("qperf %s reports no %s; it printed:\n%s", tt.test, tt.result, out)
			}
			if n := number(t, tt.test+" "+tt.result, v); n <= 0 {
				t.Errorf("qperf %s: %s = %s, want a positive number; it printed:\n%s", tt.test, tt.result, v, out)
			}
		})
	}
}

// qperfResults parses qperf's "    name  =  value unit" lines: name to
// value.
func qperfResults(out string) map[string]string {
	results := map[string]string{}
	for line := range strings.Lines(out) {
		name, rest, ok := strings.Cut(line, "=")
		if f := strings.Fields(rest); ok && len(f) > 0 && len(strings.Fields(name)) == 1 {
			results[strings.TrimSpace(name)] = f[0]
		}
	}
	return results
}
