package guest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Debian's rdma_cm programs (rdmacm-utils), unmodified, on vrdma adapters
// through the drop-in librdmacm.so.1 and libibverbs.so.1, on one host: the
// address 127.0.0.1 is the first adapter, as rdma_cm binds loopback.

// rdmacmPackage provides rping, ucmatose, udaddy, rdma_server and rdma_client.
const rdmacmPackage = "rdmacm-utils"

// startCMServer starts an rdma_cm server; it listens through the daemon,
// not on a TCP port, so its client retries while it is rejected for want
// of a listener (runCMClient).
func (h *toolHost) startCMServer(t *testing.T, program string, args ...string) *toolProc {
	t.Helper()
	return h.start(t, "", program, args...)
}

// runCMClient runs an rdma_cm client against srv until it is not refused
// for want of a listener (rejected reports that from its output): the
// server may not be listening yet. The test fails if the client fails
// otherwise, or if the server ends first.
func (h *toolHost) runCMClient(t *testing.T, srv *toolProc, rejected func(out string) bool, program string, args ...string) string {
	t.Helper()
	for {
		p := h.start(t, "", program, args...)
		<-p.done
		out := p.out.String()
		if p.err == nil {
			return out
		}
		if !rejected(out) {
			t.Fatalf("%s failed (%v); it printed:\n%s", strings.Join(p.cmd.Args, " "), p.err, out)
		}
		select {
		case <-srv.done:
			t.Fatalf("%s ended (%v) before its client connected; it printed:\n%s", strings.Join(srv.cmd.Args, " "), srv.err, srv.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// refusedNoListener reports whether an rdma_cm client's output says the
// connection was rejected (nobody listens yet).
func refusedNoListener(out string) bool {
	return strings.Contains(out, "RDMA_CM_EVENT_REJECTED") || strings.Contains(out, "Connection refused")
}

// checkRpingData checks rping -v's lines: count pings, each the rotating
// pattern rping writes ("rdma-ping-N: ", then the characters 'A' to 'z'
// over and over, starting N characters in), as the server read it by RDMA
// READ and the client by RDMA WRITE.
func checkRpingData(t *testing.T, who, out string, count int) {
	t.Helper()
	var got []string
	for line := range strings.Lines(out) {
		line = strings.TrimPrefix(strings.TrimSpace(line), "server ") // the server's lines say whose they are
		if s, ok := strings.CutPrefix(line, "ping data: "); ok {
			got = append(got, s)
		}
	}
	if len(got) != count {
		t.Fatalf("%s printed %d pings, want %d:\n%s", who, len(got), count, out)
	}
	var alphabet []byte
	for c := byte('A'); c <= 'z'; c++ {
		alphabet = append(alphabet, c)
	}
	for i, s := range got {
		prefix := fmt.Sprintf("rdma-ping-%d: ", i)
		body, ok := strings.CutPrefix(s, prefix)
		if !ok || len(body) == 0 {
			t.Fatalf("%s: ping %d is %q, want it to start with %q", who, i, s, prefix)
		}
		for j := 0; j < len(body); j++ {
			if want := alphabet[(i+j)%len(alphabet)]; body[j] != want {
				t.Fatalf("%s: ping %d is %q: byte %d is %q, want %q (the data did not arrive intact)", who, i, s, j, body[j], want)
			}
		}
	}
}

func TestToolRping(t *testing.T) {
	requireTool(t, "rping", rdmacmPackage)
	h := newToolHost(t)
	const count = 10
	port := strconv.Itoa(freePort(t))
	srv := h.startCMServer(t, "rping", "-s", "-a", "127.0.0.1", "-p", port, "-v", "-C", strconv.Itoa(count))
	out := h.runCMClient(t, srv, refusedNoListener, "rping", "-c", "-a", "127.0.0.1", "-p", port, "-v", "-C", strconv.Itoa(count))
	checkRpingData(t, "rping client", out, count)
	checkRpingData(t, "rping server", srv.wait(t), count)
}
