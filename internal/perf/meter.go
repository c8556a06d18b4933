package perf

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vrdma/vrdma"
	"golang.org/x/sys/unix"
)

// meter measures the CPU time this process and the daemon spend during a
// test, so that async mode's cost shows next to what it buys.
type meter struct {
	daemon    int // pid, 0 when the daemon runs in this process
	self0, d0 time.Duration
}

func startMeter(dev *vrdma.Device) *meter {
	m := &meter{}
	if pid := dev.DaemonPID(); pid != os.Getpid() {
		m.daemon = pid
	}
	m.self0 = selfCPU()
	m.d0 = procCPU(m.daemon)
	return m
}

// stop returns CPU seconds used per wall-clock second (2.0 = two cores busy).
func (m *meter) stop(wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	used := selfCPU() - m.self0 + procCPU(m.daemon) - m.d0
	return used.Seconds() / wall.Seconds()
}

func selfCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads utime+stime of pid from /proc (0 for pid 0 or on error).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return StatCPU(string(b))
}

// StatCPU reads utime + stime from the text of /proc/PID/stat (0 if it
// cannot): fields 14 and 15, in clock ticks of 1/100 s.
func StatCPU(s string) time.Duration {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}
