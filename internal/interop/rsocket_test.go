package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// TestRsocketToolsWithRxe runs Debian's unmodified rstream and riostream
// (rdmacm-utils) on both ends: on vrdma in the namespace, through the
// drop-in librdmacm's rsockets, and on rdma-core's rsockets over rdma_rxe
// in guest A, each end as server and as client, with the programs' data
// check (-T v).
//
// rstream: transfers of a MiB (more than half a receive buffer, so that
// credits and buffer updates cross between the two implementations) with
// blocking calls, many small ones with nonblocking calls, and 64 KiB ones
// waited for with rpoll: that one with our end as the client alone, since
// rdma-core's rpoll reports POLLHUP with the last data when the peer closes
// at once, and rstream -T a takes that for an error (ours reports it once
// the data is read). riostream: each side riomaps its buffer and the other
// riowrites into it, so the iomap slots offered in the connection data,
// the RS_OP_IOMAP_SGL writes that fill them and the RDMA WRITEs that follow
// cross too.
func TestRsocketToolsWithRxe(t *testing.T) {
	Require(t)
	guesttest.RequirePrograms(t, "rstream", "riostream")
	lib := guesttest.Library(t)
	if _, err := os.Stat(filepath.Join(lib, "librdmacm.so.1")); err != nil {
		t.Skipf("the guest libraries in %s have no librdmacm.so.1: %v", lib, err)
	}
	g := Up(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	if out, rc := g.Run(t, "A", 30, "command -v rstream && command -v riostream"); rc != 0 {
		t.Skipf("the interop guest lacks rstream or riostream (shared/interop/setup.sh puts rdmacm-utils' programs into its initramfs): %s", out)
	}
	prog := guesttest.Program{Host: host, Lib: lib, Socket: d.Socket}
	tests := []struct {
		program, name, args string
		want                string // the report line: "name bytes xfers "
		guestServerOnly     bool
	}{
		{"rstream", "1 MiB blocking", "-T v -T b -S 1048576 -C 4", "custom    1m      4 ", false},
		{"rstream", "64 B nonblocking", "-T v -T n -S 64 -C 500", "custom    64      500 ", false},
		{"rstream", "64 KiB rpoll", "-T v -T a -S 65536 -C 20", "custom    64k     20 ", true},
		{"riostream", "64 KiB", "-T v -S 65536 -C 20", "custom    64k     20 ", false},
	}
	port := 7480
	for _, tt := range tests {
		for _, guestServer := range []bool{true, false} {
			if tt.guestServerOnly && !guestServer {
				continue
			}
			port++
			t.Run(tt.program+" "+tt.name+", "+roleName(guestServer), func(t *testing.T) {
				server := GuestIP("A")
				if !guestServer {
					server = HostIP
				}
				args := fmt.Sprintf("-p %d %s", port, tt.args)
				r := runCMWithGuest(t, g, prog, guestServer, tt.program,
					strings.Fields(fmt.Sprintf("-b %s %s", server, args)), strings.Fields(fmt.Sprintf("-s %s %s", server, args)))
				for _, side := range r.sides() {
					if side.failed {
						continue
					}
					if strings.Contains(side.out, "failed") || !strings.Contains(side.out, "\n"+tt.want) {
						t.Errorf("%s: %s did not report %q with its data checked:\n%s", side.who, tt.program, tt.want, side.out)
					}
				}
			})
		}
	}
}
