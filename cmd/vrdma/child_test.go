package main

import (
	"os"
	"testing"
)

// cliEnv makes the test binary run as the vrdma command on its arguments:
// a real vrdma process that a test can kill or let run against a daemon
// it killed.
const cliEnv = "VRDMA_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
