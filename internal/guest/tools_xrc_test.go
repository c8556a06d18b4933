package guest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
)

// Debian's unmodified ibv_xsrq_pingpong over `vrdma run`: XRC domains
// shared by file (/tmp/xrc_domain), an XRC SRQ, XRC_SEND and XRC_RECV QPs,
// each send naming the peer's SRQ number. Both sides print "success" only
// when every message arrived and the domain, SRQ and QPs closed cleanly.
func TestToolXSRQPingpong(t *testing.T) {
	requireTool(t, "ibv_xsrq_pingpong", ibverbsUtils)
	h := newToolHost(t)
	h.createInstance(t, vrdma.InstanceSpec{Name: "xping", Adapters: 1})
	h.createInstance(t, vrdma.InstanceSpec{Name: "xpong", Adapters: 1})
	places := []struct {
		name           string
		server, client string
	}{
		{"one instance", "", ""},
		{"two instances", "xping", "xpong"},
	}
	for _, pl := range places {
		for _, events := range []bool{false, true} {
			name := pl.name
			if events {
				name += "/events"
			}
			t.Run(name, func(t *testing.T) {
				port := freePort(t)
				args := []string{"-d", "vrdma0", "-g", "0", "-p", strconv.Itoa(port), "-n", "20", "-s", "4096"}
				if events {
					args = append(args, "-e")
				}
				srv := h.startServer(t, pl.server, port, "ibv_xsrq_pingpong", args...)
				cli := h.run(t, pl.client, "ibv_xsrq_pingpong", append(args, "127.0.0.1")...)
				checkXSRQ(t, "client", cli)
				checkXSRQ(t, "server", srv.wait(t))
			})
		}
	}
}

// checkXSRQ checks that a side of ibv_xsrq_pingpong got through: it
// prints its and its peer's SRQ numbers, then "success".
func checkXSRQ(t *testing.T, side, out string) {
	t.Helper()
	if !strings.Contains(out, "success") {
		t.Errorf("%s did not succeed; it printed:\n%s", side, out)
	}
	if !strings.Contains(out, "SRQN") {
		t.Errorf("%s printed no SRQ numbers:\n%s", side, out)
	}
}
