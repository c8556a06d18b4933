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
	sock := filepath.Join(t.TempDir(), "mute.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // reads nothing, answers nothing
		}
	}()
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
