package guest

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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
			var out string
			// fi_pingpong -e rdm sometimes dies of SIGSEGV inside
			// libfabric (seen in its teardown, before and after this
			// test's changes; not yet explained): a pair where one end
			// died of a signal is logged and run again, at most 3 times.
			for attempt := 1; ; attempt++ {
				srv := h.startServer(t, "", port, "fi_pingpong", "-p", "verbs", "-e", ep, "-I", "50", "-c", "-B", strconv.Itoa(port))
				cli := h.start(t, "", "fi_pingpong", "-p", "verbs", "-e", ep, "-I", "50", "-c", "-P", strconv.Itoa(port), "127.0.0.1")
				<-cli.done
				if diedOfSignal(cli.err) && attempt < 3 {
					_ = srv.kill()
					<-srv.done
					t.Logf("fi_pingpong -e %s: the client died (%v), running the pair again; it printed:\n%s", ep, cli.err, cli.out.String())
					port = freePort(t)
					continue
				}
				out = cli.wait(t)
				<-srv.done
				if diedOfSignal(srv.err) && attempt < 3 {
					t.Logf("fi_pingpong -e %s: the server died (%v), running the pair again; it printed:\n%s", ep, srv.err, srv.out.String())
					port = freePort(t)
					continue
				}
				srv.wait(t)
				break
			}
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

// diedOfSignal reports whether err says a program was ended by a signal.
func diedOfSignal(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}
