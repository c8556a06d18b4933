package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dieBy ends vrdma by sig, the signal that ended the command it ran. The
// default action is set at the kernel, past the Go runtime: after
// signal.Reset the runtime still turns a SIGSEGV, SIGABRT, SIGQUIT or
// SIGBUS sent to itself into a goroutine dump and exit status 2, and
// ignores a SIGPIPE or SIGUSR1 from kill. It returns only if sig's default
// action does not end a process.
func dieBy(sig syscall.Signal) {
	// The command dumped core if it was to; vrdma's own core would be a
	// second one, of no use (coreutils' timeout does the same).
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	signal.Reset(sig)
	// A struct sigaction of SIG_DFL, no flags and an empty mask is zeros on
	// every architecture; the kernel reads as much of it as its own is.
	var dfl [4]uint64
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	_ = syscall.Kill(os.Getpid(), sig)
	// Delivery may go to another thread and take a moment on a busy
	// machine: wait for it rather than exit first with a status.
	for i := 0; i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}
