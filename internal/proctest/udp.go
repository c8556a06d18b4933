package proctest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WaitUDPBound waits until process pid holds a UDP socket bound to port,
// as its own /proc/PID/net shows it, and reports whether it did before ctx
// ended or the process went away. A datagram server (udpong) must be bound
// before its client's first datagram, which nothing sends again.
func WaitUDPBound(ctx context.Context, pid, port int) bool {
	suffix := fmt.Sprintf(":%04X", port)
	for {
		inodes := map[string]bool{}
		for _, f := range []string{"udp", "udp6"} {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				fl := strings.Fields(line)
				if len(fl) > 9 && strings.HasSuffix(fl[1], suffix) {
					inodes["socket:["+fl[9]+"]"] = true
				}
			}
		}
		if len(inodes) > 0 {
			fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
			for _, fd := range fds {
				if l, err := os.Readlink(fd); err == nil && inodes[l] {
					return true
				}
			}
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}
