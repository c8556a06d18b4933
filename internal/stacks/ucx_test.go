package stacks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// perftestPort is the TCP port of ucx_perftest's server (its default).
const perftestPort = 13337

// ucxCase is one ucx_perftest run: a test of UCP (the protocol layer, the
// transports chosen by UCX_TLS) or of UCT (one transport, -x, on one
// device, -d).
type ucxCase struct {
	// tls is UCX_TLS: "rc_v", "ud_v", or "" for UCX's default selection
	// among its network transports (its shared-memory ones excluded:
	// namespace hosts are one machine to UCX, which would take them).
	tls   string
	test  string // -t
	size  int    // -s
	iters int    // -n
	uct   string // -x for a UCT test ("rc_verbs", "ud_verbs"), else ""
	// oneSided says the server's adapter sends nothing (a UCT put or
	// get: its QP only answers), so only the client's path counters move.
	oneSided bool
	extra    []string
	// subset says the case runs in the default run (CI), not only under
	// the stacks tag.
	subset bool
}

func (c ucxCase) name() string {
	tls := c.tls
	if c.uct != "" {
		tls = c.uct
	}
	if tls == "" {
		tls = "default"
	}
	return fmt.Sprintf("%s/%s/%d", tls, c.test, c.size)
}

// env is the program's UCX environment: vrdma0's port 1 the only network
// device, the transports of the case.
func (c ucxCase) env() []string {
	env := []string{"UCX_NET_DEVICES=vrdma0:1", "UCX_WARN_UNUSED_ENV_VARS=n"}
	if c.tls != "" {
		env = append(env, "UCX_TLS="+c.tls)
	} else {
		env = append(env, "UCX_TLS=^posix,sysv,cma,knem,xpmem")
	}
	return env
}

func (c ucxCase) args() []string {
	args := []string{"-p", fmt.Sprint(perftestPort), "-t", c.test, "-s", fmt.Sprint(c.size), "-n", fmt.Sprint(c.iters), "-w", "10"}
	if c.uct != "" {
		args = append(args, "-x", c.uct, "-d", "vrdma0:1")
	}
	return append(args, c.extra...)
}

const mib = 1 << 20

// ucxCases is the matrix of issue 18 (tag_lat, tag_bw, put_bw, get_bw,
// am_lat, stream over rc_verbs, ud_verbs and UCX's default selection),
// CI's subset marked. ud_verbs carries no RDMA: its put and get are UCX's
// emulation over sends, kept small.
func ucxCases(defaultTLS bool) []ucxCase {
	var cs []ucxCase
	for _, tls := range []string{"rc_v", "ud_v", ""} {
		if tls == "" && !defaultTLS {
			continue
		}
		big := mib
		if tls == "ud_v" {
			big = 64 << 10
		}
		cs = append(cs,
			ucxCase{tls: tls, test: "tag_lat", size: 8, iters: 1000, subset: tls != ""},
			ucxCase{tls: tls, test: "tag_bw", size: big, iters: 100, subset: tls == "rc_v"},
			ucxCase{tls: tls, test: "ucp_put_bw", size: big, iters: 100},
			ucxCase{tls: tls, test: "ucp_get", size: big, iters: 100, subset: tls == "rc_v"},
			ucxCase{tls: tls, test: "ucp_am_lat", size: 8, iters: 1000},
			ucxCase{tls: tls, test: "stream_bw", size: 64 << 10, iters: 100},
			ucxCase{tls: tls, test: "stream_lat", size: 8, iters: 1000},
		)
	}
	cs = append(cs,
		ucxCase{tls: "rc_v", uct: "rc_verbs", test: "put_bw", size: 64 << 10, iters: 100, oneSided: true, extra: []string{"-D", "zcopy"}},
		ucxCase{tls: "rc_v", uct: "rc_verbs", test: "get", size: 64 << 10, iters: 100, oneSided: true, extra: []string{"-D", "zcopy"}},
		ucxCase{tls: "rc_v", uct: "rc_verbs", test: "am_lat", size: 8, iters: 1000, subset: true},
		ucxCase{tls: "ud_v", uct: "ud_verbs", test: "am_lat", size: 8, iters: 1000},
	)
	if fullMatrix {
		return cs
	}
	var sub []ucxCase
	for _, c := range cs {
		if c.subset {
			sub = append(sub, c)
		}
	}
	return sub
}

// TestUCXInfoSeesVrdma runs `ucx_info -d` on a host's vrdma adapters: UCX
// keeps vrdma0 (its memory domain, rc_verbs and ud_verbs on port 1) only
// if it accepts the device (its node under /dev/infiniband, its sysfs
// attributes), as it would a real adapter.
func TestUCXInfoSeesVrdma(t *testing.T) {
	requirePrograms(t, "ucx_info")
	lib := guesttest.Library(t)
	h := sameHost(t, lib)
	out, ok := h.run(t, nil, "ucx_info", "-d")
	if !ok {
		return
	}
	tls, err := ParseUCXInfo(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []Transport{{"rc_verbs", "vrdma0:1", "vrdma0"}, {"ud_verbs", "vrdma0:1", "vrdma0"}} {
		found := false
		for _, tl := range tls {
			found = found || tl == want
		}
		if !found {
			t.Errorf("ucx_info -d lists no %s on %s (memory domain %s): UCX dropped vrdma's device; it lists %v", want.Name, want.Device, want.MD, tls)
		}
	}
}

// TestUCXPerftestSameHost runs ucx_perftest's server and client on one
// host, over rc_verbs and ud_verbs on vrdma0: the adapter's memcpy path
// must carry the messages.
func TestUCXPerftestSameHost(t *testing.T) {
	requirePrograms(t, "ucx_perftest")
	lib := guesttest.Library(t)
	h := sameHost(t, lib)
	for _, c := range ucxCases(false) {
		t.Run(c.name(), func(t *testing.T) { runUCXPerftest(t, h, h, c, "memcpy") })
	}
}

// runUCXPerftest runs case c's server on srv and its client on cli,
// checks the client's result and that both adapters' messages took path.
func runUCXPerftest(t *testing.T, srv, cli *host, c ucxCase, path string) PerftestResult {
	t.Helper()
	if path == "tcp" && c.size >= mib {
		// 1 MiB RDMA READs (UCX's rendezvous, ucp_get) crawl over the TCP
		// channel today, their responses lost and sent again (about a
		// second each): fewer keep the run within its hang guard.
		c.iters = 20
	}
	bs, bc := srv.paths(t), cli.paths(t)
	server := srv.listening(t, perftestPort, c.env(), "ucx_perftest", "-p", fmt.Sprint(perftestPort))
	addr := srv.ns.IPv4.String()
	out, ok := cli.run(t, c.env(), "ucx_perftest", append([]string{addr}, c.args()...)...)
	if !ok {
		server.cmd.Cancel()
	}
	sout, sok := server.wait(t, srv.name)
	if !ok || !sok {
		return PerftestResult{}
	}
	r, err := ParseUCXPerftest(out)
	if err != nil {
		t.Fatalf("%v\nclient:\n%s\nserver:\n%s", err, out, sout)
	}
	if r.Iterations != c.iters || r.RateOverall <= 0 || r.BWOverallMBps <= 0 {
		t.Errorf("ucx_perftest %s: %+v: want %d iterations at a non-zero rate", strings.Join(c.args(), " "), r, c.iters)
	}
	t.Logf("%s: %d × %d B: %.2f µs (50%%: %.2f), %.1f MB/s, %.0f msg/s", c.name(), r.Iterations, c.size, r.OverallUsec, r.P50Usec, r.BWOverallMBps, r.RateOverall)
	tookPath(t, cli, bc, path)
	if srv != cli && !c.oneSided {
		tookPath(t, srv, bs, path)
	}
	return r
}
