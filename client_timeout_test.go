package vrdma_test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
)

// TestCallTimesOut: a daemon that accepts a connection and never answers
// makes a command fail with ErrTimeout, saying the daemon did not answer,
// instead of waiting for ever.
func TestCallTimesOut(t *testing.T) {
	sock := muteDaemon(t)
	done := make(chan error, 1)
	go func() {
		_, err := vrdma.DialAdmin(vrdma.Options{Socket: sock, Timeout: 200 * time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, vrdma.ErrTimeout) || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("DialAdmin against a mute daemon: %v, want ErrTimeout saying the daemon did not answer", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("DialAdmin against a mute daemon still waits after 20 s")
	}
}

// TestTimeoutFromEnvironment: VRDMA_TIMEOUT sets the reply timeout of the
// Go library as it does the guest libraries', and a value that is not a
// number of seconds is refused with a message naming the variable.
func TestTimeoutFromEnvironment(t *testing.T) {
	sock := muteDaemon(t)
	t.Setenv(vrdma.TimeoutEnv, "0.2")
	start := time.Now()
	_, err := vrdma.Devices(vrdma.Options{Socket: sock})
	if !errors.Is(err, vrdma.ErrTimeout) {
		t.Fatalf("Devices from a daemon that never answers, %s=0.2: %v; want ErrTimeout", vrdma.TimeoutEnv, err)
	}
	if waited := time.Since(start); waited > vrdma.DefaultTimeout/2 {
		t.Errorf("gave up after %v: %s=0.2 was not read (the default is %v)", waited, vrdma.TimeoutEnv, vrdma.DefaultTimeout)
	}
	for _, bad := range []string{"soon", "-1", "0", "1e300"} {
		t.Setenv(vrdma.TimeoutEnv, bad)
		_, err := vrdma.Devices(vrdma.Options{Socket: sock})
		if !errors.Is(err, vrdma.ErrInvalidArgument) || !strings.Contains(err.Error(), vrdma.TimeoutEnv) {
			t.Errorf("%s=%q: %v; want ErrInvalidArgument naming %s", vrdma.TimeoutEnv, bad, err, vrdma.TimeoutEnv)
		}
	}
}

// muteDaemon listens on a daemon socket of its own, accepts connections,
// reads nothing and answers nothing; it returns the socket's path.
func muteDaemon(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "mute.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // reads nothing, answers nothing
		}
	}()
	return sock
}
