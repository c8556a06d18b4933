package perf

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its OS thread and, on a machine
// with more than one CPU, that thread to cpu, as qperf's and UCX's ping-pong
// runs pin their two processes to two cores. The returned func gives the
// thread its CPUs back and unlocks it. A cpu below 0 pins nothing.
func pinThread(cpu int) (unpin func()) {
	if cpu < 0 {
		return func() {}
	}
	runtime.LockOSThread()
	var old unix.CPUSet
	restore := unix.SchedGetaffinity(0, &old) == nil
	if runtime.NumCPU() > 1 {
		var set unix.CPUSet
		set.Set(cpu % runtime.NumCPU())
		_ = unix.SchedSetaffinity(0, &set)
	}
	return func() {
		if restore {
			_ = unix.SchedSetaffinity(0, &old)
		}
		runtime.UnlockOSThread()
	}
}
