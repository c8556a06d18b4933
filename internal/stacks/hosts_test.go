package stacks

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/proctest"
)

// The tests run every program in a network-namespace host against that
// host's own daemon: "same host" is one namespace host (its programs meet
// on the daemon's memcpy path), "between hosts" two, joined by a veth
// pair, with a Soft-RoCE link on each veth (RoCEv2) or without (the TCP
// channel). This file holds the hosts and the running of programs there.

// runTimeout is the hang guard of one program or pair: reaching it means
// a program hangs (a lost completion, a server waiting for ever), not that
// it is slow.
const runTimeout = 90 * time.Second

// host is one namespace host with its daemon, its default instance's
// vrdma0 opened through the Go API (for the path counters) and how
// programs run there.
type host struct {
	name string
	ns   *netns.Host
	d    *netns.Daemon
	dev  *vrdma.Device
	prog guesttest.Program
}

// packages maps the programs the tests run to the Debian packages that
// ship them, for the skip message.
var packages = map[string]string{
	"ucx_info": "ucx-utils", "ucx_perftest": "ucx-utils",
	"mpirun": "openmpi-bin", "mpicc": "libopenmpi-dev",
	"fio": "fio",
}

// requirePrograms skips the test unless every named program is on the
// PATH, naming the Debian packages to install.
func requirePrograms(t *testing.T, names ...string) {
	t.Helper()
	var missing, pkgs []string
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, n)
			pkgs = append(pkgs, packages[n])
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s not installed: apt-get install %s", strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
}

// sameHost makes one namespace host with a daemon that joins no switch.
func sameHost(t *testing.T, lib string) *host {
	t.Helper()
	h := netns.New(t, 1).Hosts[0]
	d := h.StartDaemon(t, "--no-switch")
	return newHost(t, "a", h, d, lib)
}

func newHost(t *testing.T, name string, h *netns.Host, d *netns.Daemon, lib string) *host {
	t.Helper()
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: d.Socket})
	if err != nil {
		t.Fatalf("opening vrdma0 on %s: %v", name, err)
	}
	t.Cleanup(func() { dev.Close() })
	return &host{name: name, ns: h, d: d, dev: dev, prog: guesttest.Program{Host: h, Lib: lib, Socket: d.Socket}}
}

// twoHosts makes two namespace hosts, a and b, each with a daemon on one
// switch (a runs its etcd, b joins it over the veth) and, if links, a
// Soft-RoCE link on its eth0; it returns once each daemon reaches the
// other by path ("rdma" or "tcp").
func twoHosts(t *testing.T, lib string, links bool, path string) (a, b *host) {
	t.Helper()
	top := netns.New(t, 2)
	ha, hb := top.Hosts[0], top.Hosts[1]
	pki := netns.SwitchPKI(t, map[string]netip.Addr{"a": ha.IPv4, "b": hb.IPv4})
	da := ha.StartDaemon(t, "--host-name", "a", "--pki", pki,
		"--etcd-client-url", "https://"+ha.IPv4.String()+":2379", "--etcd-peer-url", "https://"+ha.IPv4.String()+":2380")
	db := hb.StartDaemon(t, "--host-name", "b", "--pki", pki, "--etcd-endpoints", "https://"+ha.IPv4.String()+":2379")
	if links {
		for _, d := range []*netns.Daemon{da, db} {
			d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", d.Host.Iface)
		}
	}
	a, b = newHost(t, "a", ha, da, lib), newHost(t, "b", hb, db, lib)
	for _, p := range [][2]*host{{a, b}, {b, a}} {
		awaitPath(t, p[0], p[1].name, path)
	}
	return a, b
}

// awaitPath waits until from's daemon reaches host to by path.
func awaitPath(t *testing.T, from *host, to, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		adm, err := vrdma.DialAdmin(vrdma.Options{Socket: from.d.Socket})
		if err != nil {
			t.Fatal(err)
		}
		hosts, err := adm.Hosts()
		adm.Close()
		last = fmt.Sprint(hosts, err)
		for _, h := range hosts {
			if h.Name == to && strings.HasPrefix(h.Path, path+":") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not reach %s by %s: %s", from.name, to, path, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pathCount is how many messages an adapter's port sent by each path.
type pathCount struct{ memcpy, rdma, tcp uint64 }

func (h *host) paths(t *testing.T) pathCount {
	t.Helper()
	p, err := h.dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return pathCount{p.Counters.PathMemcpy, p.Counters.PathRDMA, p.Counters.PathTCP}
}

func (p pathCount) minus(q pathCount) pathCount {
	return pathCount{p.memcpy - q.memcpy, p.rdma - q.rdma, p.tcp - q.tcp}
}

// by returns the messages counted on path and on the other two.
func (p pathCount) by(path string) (took, others uint64) {
	switch path {
	case "memcpy":
		return p.memcpy, p.rdma + p.tcp
	case "rdma":
		return p.rdma, p.memcpy + p.tcp
	default:
		return p.tcp, p.memcpy + p.rdma
	}
}

// tookPath checks that host h's adapter sent messages (at least one) by
// path and by no other since before.
func tookPath(t *testing.T, h *host, before pathCount, path string) {
	t.Helper()
	d := h.paths(t).minus(before)
	if took, others := d.by(path); took == 0 || others != 0 {
		t.Errorf("host %s's path counters moved by %+v: want messages by %s, and only by it (did the program use vrdma0?)", h.name, d, path)
	}
}

// tookPathAndMemcpy is tookPath for jobs with ranks on both hosts and
// several on each: ranks of one host reach each other by memcpy, ranks of
// two hosts by path, and nothing goes by the third path.
func tookPathAndMemcpy(t *testing.T, h *host, before pathCount, path string) {
	t.Helper()
	d := h.paths(t).minus(before)
	if took, others := d.by(path); took == 0 || d.memcpy == 0 || others != d.memcpy {
		t.Errorf("host %s's path counters moved by %+v: want messages by %s between the hosts and by memcpy within one, and none by the third path", h.name, d, path)
	}
}

// proc is a program started in a host's namespace.
type proc struct {
	cmd  *exec.Cmd
	out  proctest.Buffer
	done chan struct{}
	err  error
}

// start starts name with args in h's namespace with the guest library on
// the loader's path and env added, killed after runTimeout and when the
// test ends.
func (h *host) start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	p := &proc{done: make(chan struct{})}
	prog := h.prog
	prog.Env = append(append([]string{"LC_ALL=C"}, prog.Env...), env...)
	p.cmd = prog.Command(ctx, name, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.WaitDelay = 5 * time.Second // a forked child may hold the output open
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s on %s: %v", name, h.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

// wait waits for the program's end and returns its output; the test fails
// (and goes on) unless it exited 0.
func (p *proc) wait(t *testing.T, where string) (string, bool) {
	t.Helper()
	<-p.done
	out := p.out.String()
	if p.err != nil {
		t.Errorf("%s on %s: %v; it printed:\n%s", strings.Join(p.cmd.Args, " "), where, p.err, out)
		return out, false
	}
	return out, true
}

// run runs name to its end on h; ok is false (and the test failed) unless
// it exited 0.
func (h *host) run(t *testing.T, env []string, name string, args ...string) (string, bool) {
	t.Helper()
	return h.start(t, env, name, args...).wait(t, h.name)
}

// listening starts a server on srv and waits until it listens on TCP port.
func (srv *host) listening(t *testing.T, port int, env []string, name string, args ...string) *proc {
	t.Helper()
	p := srv.start(t, env, name, args...)
	if err := guesttest.WaitListening(p.cmd.Process.Pid, srv.ns.NS, port, 30*time.Second); err != nil {
		p.cmd.Cancel()
		<-p.done
		t.Fatalf("%s on %s: %v (exit: %v); it printed:\n%s", name, srv.name, err, p.err, p.out.String())
	}
	return p
}
