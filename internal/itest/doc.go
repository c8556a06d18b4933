// Package itest holds integration tests that need more than one process:
// a real client process killed with SIGKILL while it holds resources, a
// client without CAP_IPC_LOCK running into RLIMIT_MEMLOCK, a client the
// socket's permissions keep out, and other users playing the attacker:
// another tenant's instances, loops that take CQs, sessions or every
// descriptor a daemon has. The test binary re-executes itself as the
// client, or as a daemon (see child_test.go and tenant_child_test.go).
package itest
