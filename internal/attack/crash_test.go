package attack

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/proctest"
)

// goneMessage is what a program says when its daemon died under it.
const goneMessage = "the vrdma daemon went away"

// startVrdma runs `vrdma args...` in d's host with d's socket.
func startVrdma(t *testing.T, d *netns.Daemon, args ...string) *proctest.Proc {
	t.Helper()
	return proctest.Start(t, d.Command(context.Background(), args...))
}

// TestKillUnderTraffic: kill -9 of a daemon under traffic — the attack
// after which `vrdma perf` spun at 100% CPU past its test time. A perf
// client on host a measuring to b's server and a `perf --loopback` on a
// both stop with the daemon's loss said, long before their 60-second
// tests end; b's daemon and its perf server keep serving.
func TestKillUnderTraffic(t *testing.T) {
	f := newScene(t, true)
	server := startVrdma(t, f.b, "perf")
	eventually(t, 30*time.Second, "b's perf server listens", func() (bool, string) {
		var c net.Conn
		err := f.ha.Do(func() error {
			var err error
			c, err = net.DialTimeout("tcp", net.JoinHostPort(f.hb.IPv4.String(), "19765"), time.Second)
			return err
		})
		if err == nil {
			c.Close()
		}
		return err == nil, "not yet"
	})
	remote := startVrdma(t, f.a, "perf", f.hb.IPv4.String(), "-t", "60", "rc_rdma_write_bw")
	loop := startVrdma(t, f.a, "perf", "--loopback", "-t", "60", "rc_bw")
	time.Sleep(2 * time.Second) // both under way
	killed := time.Now()
	f.a.Kill(t)
	for _, p := range []struct {
		name string
		p    *proctest.Proc
	}{{"perf client to b", remote}, {"perf --loopback", loop}} {
		if code := p.p.AwaitExit(t, 30*time.Second); code == 0 {
			t.Errorf("%s: exit 0, want a failure; it said:\n%s", p.name, p.p.Output())
		}
		if !strings.Contains(p.p.Output(), goneMessage) {
			t.Errorf("%s does not say %q:\n%s", p.name, goneMessage, p.p.Output())
		}
		t.Logf("%s stopped %v after the daemon was killed", p.name, time.Since(killed).Round(time.Millisecond))
	}
	if !server.Running() {
		t.Fatalf("b's perf server ended with its client's daemon:\n%s", server.Output())
	}
	if _, err := f.admin(t, f.b).Stats(); err != nil {
		t.Errorf("b's daemon after a's death: %v", err)
	}
}

// TestKilledProgramLeavesNothing: a `vrdma perf --loopback` killed with
// SIGKILL leaves no instance behind (dead runs used to leave perf-a/b-PID
// instances for ever).
func TestKilledProgramLeavesNothing(t *testing.T) {
	f := newScene(t, true)
	adm := f.admin(t, f.a)
	p := startVrdma(t, f.a, "perf", "--loopback", "-t", "60", "rc_bw")
	eventually(t, 30*time.Second, "perf made its instances", func() (bool, string) {
		insts, err := adm.Instances()
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, in := range insts {
			if strings.HasPrefix(in.Name, "perf-") {
				n++
			}
		}
		return n == 2, "instances " + names(insts)
	})
	p.Kill()
	eventually(t, 30*time.Second, "perf's instances are gone", func() (bool, string) {
		insts, err := adm.Instances()
		if err != nil {
			return false, err.Error()
		}
		return !strings.Contains(names(insts), "perf-"), "instances " + names(insts)
	})
}

// names lists instances' names.
func names(insts []vrdma.InstanceInfo) string {
	var out []string
	for _, in := range insts {
		out = append(out, in.Name)
	}
	return strings.Join(out, ",")
}
