package stacks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// fio's rdma engine: a server job (rw=read) waits through rdma_cm for a
// client job (rw=write) that moves its blocks with the verb it names:
// write (RDMA WRITE: the client writes the server's buffers), read (RDMA
// READ: the client reads them) or send (two-sided). fio's --verify reads
// nothing back through this engine (its JSON report shows no read phase),
// so the data checks are MPI's; here every byte must be moved without an
// error, on the right path.

// fioPort is the rdma_cm port of fio's first server; each run takes the
// next (a listener's port is given back once its daemon has seen the
// process end, which may be after the next server starts).
var fioPort = 7531

// fioCase is one fio run.
type fioCase struct {
	verb   string // fio's --verb: write, read, send
	bs     string // block size
	size   string // bytes moved
	subset bool
}

func fioCases() []fioCase {
	cs := []fioCase{
		{verb: "write", bs: "64k", size: "8m", subset: true},
		{verb: "read", bs: "64k", size: "8m"},
		{verb: "send", bs: "4k", size: "4m"},
	}
	if fullMatrix {
		return cs
	}
	var sub []fioCase
	for _, c := range cs {
		if c.subset {
			sub = append(sub, c)
		}
	}
	return sub
}

// fioArgs are the options both sides share; the client adds the host
// and the verb.
func (c fioCase) args(name, rw string, port int) []string {
	return []string{"--name=" + name, "--ioengine=rdma", fmt.Sprintf("--port=%d", port), "--bs=" + c.bs, "--size=" + c.size,
		"--rw=" + rw, "--iodepth=4", "--output-format=json"}
}

// TestFioSameHost runs fio's rdma engine's server and client on one host.
func TestFioSameHost(t *testing.T) {
	requirePrograms(t, "fio")
	lib := guesttest.Library(t)
	h := sameHost(t, lib)
	for _, c := range fioCases() {
		t.Run(c.verb, func(t *testing.T) { runFio(t, h, h, c, "memcpy") })
	}
}

func init() {
	betweenHosts = append(betweenHosts, struct {
		name string
		run  func(t *testing.T, a, b *host, mode linkMode)
	}{"fio", func(t *testing.T, a, b *host, mode linkMode) {
		requirePrograms(t, "fio")
		for _, c := range fioCases() {
			t.Run(c.verb, func(t *testing.T) { runFio(t, a, b, c, mode.path) })
		}
	}})
}

// runFio runs case c's server on srv and its client on cli, checks that
// both moved every byte without an error and that the messages took path.
func runFio(t *testing.T, srv, cli *host, c fioCase, path string) {
	t.Helper()
	bs, bc := srv.paths(t), cli.paths(t)
	fioPort++
	port := fioPort
	server := srv.start(t, []string{"VRDMA_DEBUG=1"}, "fio", c.args("server", "read", port)...)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(server.out.String(), "rdma_cm: listening on port") {
		select {
		case <-server.done:
			t.Fatalf("fio's server on %s ended (%v) before listening:\n%s", srv.name, server.err, server.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("fio's server on %s does not listen:\n%s", srv.name, server.out.String())
		}
	}
	addr := srv.ns.IPv4.String()
	if srv == cli {
		// A daemon on no switch gives its adapters loopback GIDs: rdma_cm
		// resolves the host's own address to them as 127.0.0.1.
		addr = "127.0.0.1"
	}
	args := append(c.args("client", "write", port), "--hostname="+addr, "--verb="+c.verb)
	out, ok := cli.run(t, nil, "fio", args...)
	if !ok {
		server.cmd.Cancel()
	}
	sout, sok := server.wait(t, srv.name)
	if !ok || !sok {
		return
	}
	for side, o := range map[string]string{"client": out, "server": sout} {
		jobs, err := ParseFio(o)
		if err != nil {
			t.Errorf("fio's %s: %v\n%s", side, err, o)
			continue
		}
		j := jobs[0]
		moved, want := j.Write.IOBytes, fioBytes(t, c.size)
		if side == "server" {
			// One-sided verbs move the server's memory without it.
			moved = j.Read.IOBytes
			if c.verb != "send" {
				want = 0
			}
		}
		if j.Error != 0 || moved != want {
			t.Errorf("fio's %s (%s): error %d, %d bytes moved, want no error and %d", side, c.verb, j.Error, moved, want)
		}
		if side == "client" {
			t.Logf("fio %s %s blocks: %d bytes at %.1f MB/s", c.verb, c.bs, moved, float64(j.Write.BWBytes)/1e6)
		}
	}
	tookPath(t, cli, bc, path)
	if srv != cli {
		tookPath(t, srv, bs, path)
	}
}

// fioBytes is fio's size option in bytes ("8m" is 8 MiB).
func fioBytes(t *testing.T, size string) int64 {
	t.Helper()
	var n int64
	var unit string
	if _, err := fmt.Sscanf(size, "%d%s", &n, &unit); err != nil {
		t.Fatalf("size %q: %v", size, err)
	}
	switch unit {
	case "k":
		return n << 10
	case "m":
		return n << 20
	}
	t.Fatalf("size %q: unit %q", size, unit)
	return 0
}
