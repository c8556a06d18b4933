package attack

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestCMNoTCPPort: the connection manager has no door of its own. Nothing
// of host b answers mallory on the port its TCP compatibility listener had
// (4793), on a secure switch or an insecure one: CM MADs on QP1, inside
// the TCP channel or over RoCEv2, are its only wire between hosts, so
// there is nothing there to hold idle, flood or hand forged frames to.
func TestCMNoTCPPort(t *testing.T) {
	for _, secure := range []bool{true, false} {
		t.Run(map[bool]string{true: "secure", false: "insecure"}[secure], func(t *testing.T) {
			f := newScene(t, secure)
			f.guard(t, f.b) // b serves its socket: it is up, and stops cleanly when the test ends
			dial := func(port string) error {
				return f.hm.Do(func() error {
					c, err := net.DialTimeout("tcp", net.JoinHostPort(f.hb.IPv4.String(), port), 10*time.Second)
					if err == nil {
						c.Close()
					}
					return err
				})
			}
			if err := dial(channelPort); err != nil {
				t.Fatalf("mallory dialling b's TCP channel: %v, want it reached (the door that stays)", err)
			}
			if err := dial("4793"); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("mallory dialling b's port 4793: %v, want the connection refused: nothing listens there", err)
			}
		})
	}
}
