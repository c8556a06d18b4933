package guesttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PingpongPort is the TCP port on which ibv_*_pingpong and perftest's
// servers wait for their client (18515) unless told otherwise.
const PingpongPort = 18515

// pairTimeout bounds a whole server-client run: reaching it means a
// program hangs, not that it is slow.
const pairTimeout = 2 * time.Minute

// listenTimeout bounds the wait for a server to listen.
const listenTimeout = 30 * time.Second

// Pair is what a server and its client printed (stdout and stderr each)
// and how they ended.
type Pair struct {
	ServerOut, ClientOut string
	ServerErr, ClientErr error
}

// RunPair runs program name with args as a server under srv and, once it
// listens on TCP port, as its client under cli with the server host's
// IPv4 address appended to args; it returns when both have ended. The
// test fails (and goes on) if either exits non-zero or does not end within
// two minutes, with both outputs in the message.
func RunPair(t testing.TB, srv, cli Program, port int, name string, args ...string) Pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), pairTimeout)
	defer cancel()
	var sout, cout bytes.Buffer
	server := srv.Command(ctx, name, args...)
	server.Stdout, server.Stderr = &sout, &sout
	if err := server.Start(); err != nil {
		t.Fatalf("guesttest: starting %s on %s: %v", name, srv.Host.Name, err)
	}
	var p Pair
	if err := WaitListening(server.Process.Pid, srv.Host.NS, port, listenTimeout); err != nil {
		cancel()
		p.ServerErr = server.Wait()
		t.Errorf("guesttest: %s server on %s: %v (exit: %v)\n%s", name, srv.Host.Name, err, p.ServerErr, sout.String())
		p.ServerOut = sout.String()
		return p
	}
	client := cli.Command(ctx, name, append(append([]string(nil), args...), srv.Host.IPv4.String())...)
	client.Stdout, client.Stderr = &cout, &cout
	p.ClientErr = client.Run()
	if p.ClientErr != nil {
		cancel() // the server would wait for its client for ever
	}
	p.ServerErr = server.Wait()
	p.ServerOut, p.ClientOut = sout.String(), cout.String()
	if p.ServerErr != nil || p.ClientErr != nil {
		cmdline := strings.Join(append([]string{name}, args...), " ")
		t.Errorf("guesttest: %s: server on %s: %s; client on %s: %s\nserver's output:\n%s\nclient's output:\n%s",
			cmdline, srv.Host.Name, exitText(p.ServerErr), cli.Host.Name, exitText(p.ClientErr), p.ServerOut, p.ClientOut)
	}
	return p
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// WaitListening waits until process pid has entered network namespace ns
// (as `ip netns` names it) and a TCP socket listens on port there. Looking
// at the process's own namespace matters: before `ip netns exec` has
// switched, /proc/PID/net shows the caller's namespace, where another
// program may listen on the same port.
func WaitListening(pid int, ns string, port int, limit time.Duration) error {
	want, err := os.Stat(filepath.Join("/run/netns", ns))
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	re := listenRe(port)
	deadline := time.Now().Add(limit)
	for {
		if inNamespace(pid, want) {
			for _, f := range []string{"tcp", "tcp6"} {
				b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "net", f))
				if err != nil {
					return fmt.Errorf("not running: %v", err)
				}
				if re.Match(b) {
					return nil
				}
			}
		} else if _, err := os.Stat(filepath.Join("/proc", fmt.Sprint(pid))); err != nil {
			return fmt.Errorf("not running: %v", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on TCP %d in %s after %v", port, ns, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inNamespace reports whether process pid's network namespace is the one
// whose bind mount is ns.
func inNamespace(pid int, ns os.FileInfo) bool {
	st, err := os.Stat(filepath.Join("/proc", fmt.Sprint(pid), "ns", "net"))
	if err != nil {
		return false
	}
	a, ok1 := st.Sys().(*syscall.Stat_t)
	b, ok2 := ns.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && a.Ino == b.Ino && a.Dev == b.Dev
}

// listenRe matches a /proc/net/tcp or tcp6 line of a socket listening
// (state 0A) on port.
func listenRe(port int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`(?m)^\s*\d+: [0-9A-F]+:%04X [0-9A-F]+:0000 0A `, port))
}
