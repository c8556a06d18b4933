// Package itest holds integration tests that need more than one process:
// a real client process killed with SIGKILL while it holds resources, a
// client without CAP_IPC_LOCK running into RLIMIT_MEMLOCK, a client the
// socket's permissions keep out. The test binary re-executes itself as the
// client (see child_test.go).
package itest
