package uplink

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The send sockets carry the DSCP's class selector as their priority, for
// a VLAN's egress-qos-map to turn into the PCP.
func TestSenderPriorityFromDSCP(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("raw sockets need root (CAP_NET_RAW); CI runs this as root")
	}
	for _, c := range []struct{ dscp, prio uint8 }{{0, 0}, {26, 3}, {46, 5}, {63, 7}} {
		s, err := newSender(c.dscp)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []interface{ Fd() uintptr }{s.f4, s.f6} {
			got, err := unix.GetsockoptInt(int(f.Fd()), unix.SOL_SOCKET, unix.SO_PRIORITY)
			if err != nil {
				t.Fatal(err)
			}
			if got != int(c.prio) {
				t.Errorf("DSCP %d: socket priority %d, want %d", c.dscp, got, c.prio)
			}
		}
		s.f4.Close()
		s.f6.Close()
	}
}
