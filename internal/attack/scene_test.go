package attack

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/switchview"
)

// scene is the stage: hosts a and b on one switch (a runs the etcd
// member, b joins it), neither with an RDMA uplink, so that their traffic
// crosses the TCP channel; and mallory, a third host on the same segment
// that belongs to nobody.
type scene struct {
	top        *netns.Topology
	ha, hb, hm *netns.Host
	a, b       *netns.Daemon
	pki        string // the switch's certificates ("" on an insecure switch)
	secure     bool
}

// newScene starts the scene: the switch on its certificates (secure), or
// on plaintext with --insecure.
func newScene(t *testing.T, secure bool) *scene {
	t.Helper()
	netns.Require(t)
	top := netns.New(t, 3)
	f := &scene{top: top, ha: top.Hosts[0], hb: top.Hosts[1], hm: top.Hosts[2], secure: secure}
	ipA := f.ha.IPv4.String()
	scheme := "http"
	common := []string{"--mode", "0666", "-v"}
	if secure {
		scheme = "https"
		f.pki = netns.SwitchPKI(t, map[string]netip.Addr{"a": f.ha.IPv4, "b": f.hb.IPv4})
		common = append(common, "--pki", f.pki)
	} else {
		common = append(common, "--insecure")
	}
	f.a = f.ha.StartDaemon(t, append([]string{"--host-name", "a",
		"--etcd-client-url", scheme + "://" + ipA + ":2379", "--etcd-peer-url", scheme + "://" + ipA + ":2380"}, common...)...)
	f.b = f.hb.StartDaemon(t, append([]string{"--host-name", "b", "--etcd-endpoints", scheme + "://" + ipA + ":2379"}, common...)...)
	for _, d := range []*netns.Daemon{f.a, f.b} {
		// Other tenants reach the socket (its mode is 0666 by --mode).
		if err := os.Chmod(filepath.Dir(d.Socket), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each daemon learns the other from the switch a moment after it
	// joins: the scene starts once both views hold.
	for _, v := range []struct {
		from *netns.Daemon
		seer string
		sees string
	}{{f.a, "a", "b"}, {f.b, "b", "a"}} {
		adm := f.admin(t, v.from)
		eventually(t, 30*time.Second, fmt.Sprintf("%s sees %s on the switch with a tcp path", v.seer, v.sees), func() (bool, string) {
			hs, err := adm.Hosts()
			if err != nil {
				return false, err.Error()
			}
			for _, h := range hs {
				if h.Name == v.sees && strings.HasPrefix(h.Path, "tcp") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("hosts %+v", hs)
		})
	}
	return f
}

// admin connects to d's daemon for administration; closed when the test
// ends.
func (f *scene) admin(t *testing.T, d *netns.Daemon) *vrdma.Admin {
	t.Helper()
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: d.Socket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

// guard returns what d's listeners between daemons accepted and refused.
func (f *scene) guard(t *testing.T, d *netns.Daemon) switchview.Switch {
	t.Helper()
	info, err := f.admin(t, d).Switch()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// procStatus reads a number from /proc/PID/status ("VmRSS", "Threads").
func procStatus(t *testing.T, pid int, key string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, err := strconv.Atoi(strings.Fields(v)[0])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, key)
	return 0
}

// eventually retries cond until it holds, failing after limit (a hang
// guard, not a timing assertion).
func eventually(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %v: %s", what, limit, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testCtx is a context that ends with the test or after limit.
func testCtx(t *testing.T, limit time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	t.Cleanup(cancel)
	return ctx
}
