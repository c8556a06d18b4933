package attack

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/netns"
)

// goneMessage is what a program says when its daemon died under it.
const goneMessage = "the vrdma daemon went away"

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// started is a vrdma command running in a host's namespace.
type started struct {
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan error
}

func startVrdma(t *testing.T, d *netns.Daemon, args ...string) *started {
	t.Helper()
	s := &started{cmd: d.Command(context.Background(), args...), done: make(chan error, 1)}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

// exited waits (up to limit, a hang guard) for the process to end and
// returns its error; the test fails if it is still running.
func (s *started) exited(t *testing.T, what string, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(limit):
		t.Fatalf("%s still running %v later; it said:\n%s", what, limit, s.out.String())
		return nil
	}
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
		s    *started
	}{{"perf client to b", remote}, {"perf --loopback", loop}} {
		err := p.s.exited(t, p.name, 30*time.Second)
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) {
			t.Errorf("%s: exit %v, want a failure; it said:\n%s", p.name, err, p.s.out.String())
		}
		if !strings.Contains(p.s.out.String(), goneMessage) {
			t.Errorf("%s does not say %q:\n%s", p.name, goneMessage, p.s.out.String())
		}
		t.Logf("%s stopped %v after the daemon was killed", p.name, time.Since(killed).Round(time.Millisecond))
	}
	select {
	case err := <-server.done:
		t.Fatalf("b's perf server ended with its client's daemon: %v\n%s", err, server.out.String())
	default:
	}
	if err := server.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("b's perf server: %v", err)
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
	_ = p.cmd.Process.Kill()
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
