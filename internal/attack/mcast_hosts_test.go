package attack

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/switchview"
)

// TestMulticastTenantsBetweenHosts: tenant B joins, on host b, the group
// tenant A uses between hosts a and b (239.9.9.9, over the switch's TCP
// channel, and with Soft-RoCE links on both hosts over RoCEv2 too) and
// must neither get A's datagrams nor learn A's groups
// (docs/design/multicast.md, "Tenants between hosts"). A's receiver on b,
// in the same group, gets all ten datagrams A's sender on a sends, which
// proves they crossed to b before B is checked; B's receiver waits for one
// (mckey -C 1) and must still be waiting. B's `vrdma mcast show` lists its
// own group only, root's both tenants'.
func TestMulticastTenantsBetweenHosts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links bool
	}{{"tcp", false}, {"rdma", true}} {
		t.Run(tc.name, func(t *testing.T) { multicastTenantsBetweenHosts(t, tc.links) })
	}
}

func multicastTenantsBetweenHosts(t *testing.T, links bool) {
	guesttest.RequirePrograms(t, "mckey", "stdbuf", "setpriv")
	f := newScene(t, true)
	if links {
		for _, x := range []struct {
			d *netns.Daemon
			h *netns.Host
		}{{f.a, f.ha}, {f.b, f.hb}} {
			x.d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", x.h.Iface)
		}
	}
	lib := readableLibrary(t)
	const group = "239.9.9.9"
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ipA, ipB := f.ha.IPv4.String(), f.hb.IPv4.String()
	spy := startTenantProgramOn(t, ctx, f.hb, tenantB, f.b.Socket, lib, "mckey", "-m", group, "-b", ipB, "-C", "1")
	spy.waitFor(t, "rdma_cm: joined multicast group")
	rcv := startTenantProgramOn(t, ctx, f.hb, tenantA, f.b.Socket, lib, "mckey", "-m", group, "-b", ipB, "-C", "10")
	rcv.waitFor(t, "rdma_cm: joined multicast group")

	// The switch knows both tenants' groups on b; root on a sees them.
	tenants := func(gs []switchview.McastGroup) []string {
		var out []string
		for _, g := range gs {
			if g.Group == group && g.Host == "b" {
				out = append(out, g.Tenant)
			}
		}
		slices.Sort(out)
		return out
	}
	both := []string{"uid " + strconv.Itoa(tenantA), "uid " + strconv.Itoa(tenantB)}
	adm := f.admin(t, f.a)
	eventually(t, 30*time.Second, "root on a sees both tenants' groups on b", func() (bool, string) {
		gs, err := adm.McastGroups()
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(tenants(gs), both), ""
	})
	// B, asking a's daemon, sees its own group and not A's.
	if got := tenants(tenantMcastShow(t, ctx, f.a, tenantB)); !slices.Equal(got, both[1:]) {
		t.Errorf("tenant B's `vrdma mcast show` lists the tenants %v of %s on b, want only its own %v", got, group, both[1:])
	}

	snd := startTenantProgramOn(t, ctx, f.ha, tenantA, f.a.Socket, lib, "mckey", "-m", group, "-b", ipA, "-C", "10", "-s")
	for _, p := range []*tenantProgram{snd, rcv} {
		<-p.done
		if out := p.text(); p.err != nil || !strings.Contains(out, "test complete") {
			t.Fatalf("tenant A's %s failed (%v):\n%s", strings.Join(p.cmd.Args, " "), p.err, out)
		}
	}
	// A's receiver on b had its ten: B's copy, had there been one, came
	// in the same frames. Give B's program the time to notice.
	select {
	case <-spy.done:
		t.Errorf("tenant B's receiver on b in A's group ended (%v): it got A's datagram from a:\n%s", spy.err, spy.text())
	case <-time.After(2 * time.Second):
	}
	if strings.Contains(spy.text(), "data transfers complete") {
		t.Errorf("tenant B on b received tenant A's multicast from a:\n%s", spy.text())
	}
}

// startTenantProgramOn is startTenantProgram in host h's namespace: the
// program runs as uid through setpriv under `ip netns exec`.
func startTenantProgramOn(t *testing.T, ctx context.Context, h *netns.Host, uid int, sock, lib, name string, args ...string) *tenantProgram {
	t.Helper()
	runtime, err := os.MkdirTemp("", "vrdma-attack-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runtime) })
	if err := os.Chown(runtime, uid, uid); err != nil {
		t.Fatal(err)
	}
	id := strconv.Itoa(uid)
	cmd := h.Command(ctx, "setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "stdbuf", "-oL", name}, args...)...)
	cmd.Dir = runtime
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LD_LIBRARY_PATH=" + lib, "VRDMA_SOCKET=" + sock, "VRDMA_DEBUG=1",
		"XDG_RUNTIME_DIR=" + runtime, "HOME=" + runtime, "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &tenantProgram{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s as uid %d on %s: %v", name, uid, h.NS, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// tenantMcastShow runs `vrdma mcast show --json` as uid against d.
func tenantMcastShow(t *testing.T, ctx context.Context, d *netns.Daemon, uid int) []switchview.McastGroup {
	t.Helper()
	cmd := d.Command(ctx, "mcast", "show", "--json")
	id := strconv.Itoa(uid)
	// ip netns exec NS BIN ARGS → ip netns exec NS setpriv ... BIN ARGS
	cmd.Args = slices.Insert(cmd.Args, 4, "setpriv", "--reuid="+id, "--regid="+id, "--clear-groups")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	var resp struct {
		Groups []switchview.McastGroup `json:"groups"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%s printed what is not its JSON (%v):\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return resp.Groups
}
