package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Everyday clients under Debian's librspreload.so over vrdma: their TCP
// sockets become stream rsockets, and so do their server's. The servers
// are small Perl programs: Debian 12's librspreload (rdma-core v44) wraps
// accept but not accept4, and `nc -l` and Python's http.server accept with
// accept4, which then reaches the kernel on librspreload's placeholder
// descriptor and fails with ENOTSOCK (rdma-core's preload has had accept4
// since 2026); so do Perl's. The server here is testdata/accept_server.c.

// acceptServer builds testdata/accept_server.c (a one-connection server
// that accepts with accept(2)) and returns its path.
func acceptServer(t *testing.T) string {
	t.Helper()
	cc := requireToolchain(t)
	bin := filepath.Join(t.TempDir(), "accept_server")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", bin, "testdata/accept_server.c").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/accept_server.c: %v\n%s", err, out)
	}
	return bin
}

// TestToolRspreloadNc runs OpenBSD netcat (netcat-openbsd) as a client
// under librspreload against a server under it too: nc connects
// nonblocking and waits in poll (librspreload's rpoll), sends its line over
// a stream rsocket and prints the answer. nc -N shuts its writing side
// after its line, and the server answers and closes, often before it has
// seen nc's shutdown: the two shutdowns cross, which once lost the answer
// now and then (csrc/tests/rsocket_shutdown_test.c makes them cross).
func TestToolRspreloadNc(t *testing.T) {
	requireTool(t, "nc", "netcat-openbsd")
	server := acceptServer(t)
	h := newToolHost(t)
	h.preload = rspreload(t)
	dir := t.TempDir()
	reply, line := filepath.Join(dir, "reply"), filepath.Join(dir, "line")
	if err := os.WriteFile(reply, []byte("the answer over rsockets\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(line, []byte("hello over rsockets\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freePort(t))
	srv := h.startCMServer(t, server, port, "line", reply)
	out := h.runCMClient(t, srv, refusedNoListener, "sh", "-c", "nc -N 127.0.0.1 "+port+" <"+line)
	sout := srv.wait(t)
	if !strings.Contains(sout, "got: hello over rsockets") {
		t.Errorf("the server did not get nc's line; it printed:\n%s", sout)
	}
	if !strings.Contains(out, "the answer over rsockets") {
		t.Errorf("nc under librspreload did not print the server's answer; it printed:\n%s", out)
	}
}

// TestToolRspreloadCurl runs curl under librspreload against an HTTP
// server under it too: a page of 100 KiB (more than half an rsocket's
// receive buffer, so credits and buffer updates go round) over a stream
// rsocket.
func TestToolRspreloadCurl(t *testing.T) {
	requireTool(t, "curl", "curl")
	server := acceptServer(t)
	h := newToolHost(t)
	h.preload = rspreload(t)
	page := filepath.Join(t.TempDir(), "page.txt")
	body := strings.Repeat("rsockets carry this page.\n", 4000)
	if err := os.WriteFile(page, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freePort(t))
	srv := h.startCMServer(t, server, port, "http", page)
	got := filepath.Join(t.TempDir(), "got.txt")
	out := h.runCMClient(t, srv, refusedNoListener, "curl", "-sS", "--max-time", "60", "-o", got, "http://127.0.0.1:"+port+"/page.txt")
	sout := srv.wait(t)
	if !strings.Contains(sout, "got: GET /page.txt HTTP/1.1") {
		t.Errorf("the server did not get curl's request; it printed:\n%s", sout)
	}
	if b, err := os.ReadFile(got); err != nil || string(b) != body {
		t.Errorf("curl under librspreload did not get the page (%d bytes): %d bytes, %v; it printed:\n%s", len(body), len(b), err, out)
	}
}
