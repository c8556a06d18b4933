package shm

import "golang.org/x/sys/unix"

// Yield gives the CPU to another runnable thread on this core, if any
// (sched_yield). Spin loops call it now and then: with every core busy, a
// spinner that never yields costs whoever shares its core a whole scheduler
// slice (~4 ms here) per hand-off, while a yield with nobody waiting costs
// well under a microsecond.
func Yield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
