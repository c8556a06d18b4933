package stacks

import (
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
)

// linkMode is how two namespace hosts' daemons reach each other.
type linkMode struct {
	name  string
	links bool   // a Soft-RoCE link on each host's veth
	path  string // the path every message must take
}

var linkModes = []linkMode{
	{"RoCEv2", true, "rdma"},
	{"TCP channel", false, "tcp"},
}

// modes returns the link modes a test runs: both in the full matrix, the
// RoCEv2 one alone in CI's subset (the TCP channel is the same programs
// over another path).
func modes() []linkMode {
	if fullMatrix {
		return linkModes
	}
	return linkModes[:1]
}

// betweenHosts are the runs of TestStacksBetweenHosts beyond UCX's, each
// on the two hosts of a link mode. The files that need registration with
// rdma-core's semantics (Open MPI's, fio's) add theirs under the stacks
// build tag until the library has it.
var betweenHosts []struct {
	name string
	run  func(t *testing.T, a, b *host, mode linkMode)
}

// TestStacksBetweenHosts runs UCX, Open MPI and fio between two namespace
// hosts, over RoCEv2 links and over the TCP channel: servers (and rank 0)
// on a, clients on b, every message on the mode's path.
func TestStacksBetweenHosts(t *testing.T) {
	netns.Require(t)
	lib := guesttest.Library(t)
	for _, mode := range modes() {
		t.Run(mode.name, func(t *testing.T) {
			a, b := twoHosts(t, lib, mode.links, mode.path)
			t.Run("ucx_perftest", func(t *testing.T) {
				requirePrograms(t, "ucx_perftest")
				for _, c := range ucxCases(true) {
					t.Run(c.name(), func(t *testing.T) { runUCXPerftest(t, a, b, c, mode.path) })
				}
			})
			for _, x := range betweenHosts {
				t.Run(x.name, func(t *testing.T) { x.run(t, a, b, mode) })
			}
		})
	}
}
