package vrdma_test

// SEND_WITH_INV between two namespace hosts (testdata/send_inv_pingpong.c
// through the guest library): the IETH goes on the wire, the receiving
// host invalidates its type 2 window and completes the receive WITH_INV;
// a second SEND_WITH_INV of the invalidated rkey is an invalid request at
// both ends. Over RoCEv2 (Soft-RoCE links) and over the TCP channel. Needs
// root, gcc and libibverbs-dev; skipped otherwise.

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
)

func TestSendWithInvalidateBetweenHosts(t *testing.T) {
	netns.Require(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	bin := filepath.Join(t.TempDir(), "send_inv_pingpong")
	if out, err := exec.Command("gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", bin,
		filepath.Join("testdata", "send_inv_pingpong.c"), "-libverbs").CombinedOutput(); err != nil {
		t.Skipf("building send_inv_pingpong.c (libibverbs-dev?): %v\n%s", err, out)
	}
	lib := guesttest.Library(t)
	for _, mode := range []struct {
		name  string
		links bool
		path  string
	}{
		{"RoCEv2", true, "rdma"},
		{"TCP channel", false, "tcp"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			a, b := twoToolHosts(t, lib, mode.links, mode.path)
			if a.gid != b.gid {
				t.Fatalf("the IPv4 GID is index %d on a and %d on b", a.gid, b.gid)
			}
			ba, bb := pathsOf(t, a.dev), pathsOf(t, b.dev)
			r := guesttest.RunPair(t, a.prog, b.prog, guesttest.PingpongPort, bin, "-d", "vrdma0", "-g", strconv.Itoa(a.gid))
			if t.Failed() {
				return
			}
			for _, want := range []string{"receive 1: WITH_INV", "receive 2: remote invalid request error", "PASSED"} {
				if !strings.Contains(r.ServerOut, want) {
					t.Errorf("the server (window owner) printed no %q:\n%s", want, r.ServerOut)
				}
			}
			for _, want := range []string{"send 1: success", "send 2: remote invalid request error", "PASSED"} {
				if !strings.Contains(r.ClientOut, want) {
					t.Errorf("the client printed no %q:\n%s", want, r.ClientOut)
				}
			}
			da, db := pathDelta(ba, pathsOf(t, a.dev)), pathDelta(bb, pathsOf(t, b.dev))
			if took, others := db.by(mode.path); took == 0 || others != 0 {
				t.Errorf("the client's path counters moved by %+v (server %+v): want messages by %s only", db, da, mode.path)
			}
		})
	}
}
