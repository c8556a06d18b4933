package guest

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Debian's librspreload.so (librdmacm1), which turns a program's sockets
// into rsockets, loaded into unmodified programs beside the drop-in
// librdmacm.so.1 it calls.

// rspreload returns the path of Debian's librspreload.so, or skips the test.
func rspreload(t *testing.T) string {
	t.Helper()
	paths, _ := filepath.Glob("/usr/lib/*/rsocket/librspreload.so*")
	if len(paths) == 0 {
		t.Skip("librspreload.so is not installed: `apt-get install librdmacm1` (Debian, Ubuntu) to run this test")
	}
	return paths[0]
}

// TestToolRspreloadIperf3 runs iperf3's server and client under
// librspreload. iperf3 waits in select(), which librspreload hands to
// rpoll for every descriptor: the library's rpoll must serve ordinary
// ones (it failed with ENOSYS, and iperf3 with "select failed: Function
// not implemented"). Where rsocket() does not make a socket, librspreload
// falls back to the kernel's, so the transfer runs over TCP.
func TestToolRspreloadIperf3(t *testing.T) {
	requireTool(t, "iperf3", "iperf3")
	h := newToolHost(t)
	h.preload = rspreload(t)
	port := strconv.Itoa(freePort(t))
	srv := h.start(t, "", "iperf3", "-s", "-1", "-p", port)
	refused := func(out string) bool { return strings.Contains(out, "Connection refused") } // not listening yet
	out := h.runCMClient(t, srv, refused, "iperf3", "-c", "127.0.0.1", "-p", port, "-n", "4M")
	sout := srv.wait(t)
	// The client counts what it sent; the server's count may stop short
	// (iperf3 -n ends the test once the sender is done, also without
	// librspreload), so of the server only its report is asked for.
	if strings.Contains(out, "error") || !strings.Contains(out, "iperf Done.") || !strings.Contains(out, "4.00 MBytes") {
		t.Errorf("iperf3's client under librspreload did not send 4 MBytes; it printed:\n%s", out)
	}
	if strings.Contains(sout, "error") || !strings.Contains(sout, "receiver") {
		t.Errorf("iperf3's server under librspreload did not report the test; it printed:\n%s", sout)
	}
}
