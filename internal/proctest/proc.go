package proctest

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that a process writes while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Proc is a process a test started; it is SIGKILLed when the test ends if
// it still runs.
type Proc struct {
	Cmd         *exec.Cmd
	Out, Err    Buffer // its standard output and error
	done        chan struct{}
	description string
}

// Start starts cmd, its output going to the Proc's buffers.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, done: make(chan struct{}), description: strings.Join(cmd.Args, " ")}
	cmd.Stdout, cmd.Stderr = &p.Out, &p.Err
	if err := cmd.Start(); err != nil {
		t.Fatalf("proctest: start %s: %v", p.description, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	return p
}

// Kill SIGKILLs the process (the test's own child, by its pid) and reaps
// it; it does nothing to one that has ended.
func (p *Proc) Kill() {
	select {
	case <-p.done:
	default:
		_ = p.Cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// Running reports whether the process still runs.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Output is what the process printed so far, both streams.
func (p *Proc) Output() string { return p.Out.String() + p.Err.String() }

// AwaitOutput waits until the standard output holds want; the test fails
// if the process ends first or limit (a hang guard) passes.
func (p *Proc) AwaitOutput(t testing.TB, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(p.Out.String(), want) {
		if !p.Running() {
			t.Fatalf("%s ended before it printed %q: %s", p.description, want, p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q in %v: %s", p.description, want, limit, p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AwaitExit waits for the process to end and returns its exit code; the
// test fails if it still runs after limit (a hang guard).
func (p *Proc) AwaitExit(t testing.TB, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("%s still runs %v later: %s", p.description, limit, p.Output())
		return 0
	}
}
