package daemon

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// creds are who is at the other end of a session: the kernel's
// SO_PEERCRED (pid, uid and gid of the process that connected) and the
// supplementary groups that process had, from /proc/PID/status.
type creds struct {
	pid    int32
	uid    uint32
	gid    uint32
	groups []uint32
	known  bool // SO_PEERCRED answered; without it the peer is nobody in particular
}

// unknownUID is the account of a peer whose credentials could not be read:
// no privilege, and a quota of its own.
const unknownUID = ^uint32(0)

// peerCreds reads the credentials of c's peer. The groups are read now,
// while the connecting process certainly lives: a pid read later could
// name another process.
func peerCreds(c *net.UnixConn) creds {
	cr := creds{uid: unknownUID, gid: unknownUID}
	raw, err := c.SyscallConn()
	if err != nil {
		return cr
	}
	_ = raw.Control(func(fd uintptr) {
		if u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			cr = creds{pid: u.Pid, uid: u.Uid, gid: u.Gid, known: true}
		}
	})
	if cr.known && cr.pid > 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cr.pid)); err == nil {
			cr.groups, _ = parseStatusGroups(b)
		}
	}
	return cr
}

// inGroup reports whether the peer's primary or a supplementary group is gid.
func (c creds) inGroup(gid uint32) bool {
	if !c.known {
		return false
	}
	if c.gid == gid {
		return true
	}
	for _, g := range c.groups {
		if g == gid {
			return true
		}
	}
	return false
}

func (c creds) String() string {
	if !c.known {
		return "an unknown peer"
	}
	return fmt.Sprintf("uid %d", c.uid)
}

// parseStatusGroups reads the "Groups:" line of a /proc/PID/status file:
// the supplementary group ids, separated by white space. ok is false when
// the line is missing or holds something that is not a group id.
func parseStatusGroups(status []byte) (groups []uint32, ok bool) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, found := strings.CutPrefix(line, "Groups:")
		if !found {
			continue
		}
		for _, f := range strings.Fields(rest) {
			g, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return nil, false
			}
			groups = append(groups, uint32(g))
		}
		return groups, true
	}
	return nil, false
}
