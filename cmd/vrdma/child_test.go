package main

import (
	"os"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// cliEnv makes the test binary run as the vrdma command on its arguments:
// a real vrdma process that a test can kill or let run against a daemon
// it killed.
const cliEnv = "VRDMA_TEST_RUN_CLI"

// guestLibEnv, in such a process, names the directory vrdma run and vrdma
// guest take for the built guest library instead of building it.
const guestLibEnv = "VRDMA_TEST_GUEST_LIB"

// defaultSocketEnv, in such a process, names the socket vrdma run looks
// for a daemon at when told of none (instead of /run/vrdma/vrdma.sock).
const defaultSocketEnv = "VRDMA_TEST_DEFAULT_SOCKET"

// userDaemonIdleEnv, in such a process, is how long the user's daemon
// that vrdma run starts stays idle (instead of 5 s).
const userDaemonIdleEnv = "VRDMA_TEST_USER_DAEMON_IDLE"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		if dir := os.Getenv(guestLibEnv); dir != "" {
			buildGuest = func() (string, error) { return dir, nil }
		}
		if s := os.Getenv(defaultSocketEnv); s != "" {
			defaultSocket = s
		}
		if d, err := time.ParseDuration(os.Getenv(userDaemonIdleEnv)); err == nil {
			userDaemonIdle = d
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	guesttest.RemoveLibrary()
	os.Exit(code)
}
