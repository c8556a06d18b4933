package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// TestRstreamWithRxe runs Debian's unmodified rstream (rdmacm-utils) on
// both ends: on vrdma in the namespace, through the drop-in librdmacm's
// rsockets, and on rdma-core's rsockets over rdma_rxe in guest A, each end
// as server and as client, with rstream's data check (-T v): transfers of a
// MiB (more than half a receive buffer, so that credits and buffer updates
// cross between the two implementations) with blocking calls, many small
// ones with nonblocking calls, and 64 KiB ones waited for with rpoll: that
// one with our end as the client alone, since rdma-core's rpoll reports
// POLLHUP with the last data when the peer closes at once, and rstream
// -T a takes that for an error (ours reports it once the data is read).
func TestRstreamWithRxe(t *testing.T) {
	Require(t)
	guesttest.RequirePrograms(t, "rstream")
	lib := guesttest.Library(t)
	if _, err := os.Stat(filepath.Join(lib, "librdmacm.so.1")); err != nil {
		t.Skipf("the guest libraries in %s have no librdmacm.so.1: %v", lib, err)
	}
	g := Up(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	if out, rc := g.Run(t, "A", 30, "command -v rstream"); rc != 0 {
		t.Skipf("the interop guest lacks rstream (shared/interop/setup.sh puts rdmacm-utils' programs into its initramfs): %s", out)
	}
	prog := guesttest.Program{Host: host, Lib: lib, Socket: d.Socket}
	tests := []struct {
		name, args, want string // want: rstream's report line, "name bytes xfers "
		guestServerOnly  bool
	}{
		{"1 MiB blocking", "-T v -T b -S 1048576 -C 4", "custom    1m      4 ", false},
		{"64 B nonblocking", "-T v -T n -S 64 -C 500", "custom    64      500 ", false},
		{"64 KiB rpoll", "-T v -T a -S 65536 -C 20", "custom    64k     20 ", true},
	}
	port := 7480
	for _, tt := range tests {
		for _, guestServer := range []bool{true, false} {
			if tt.guestServerOnly && !guestServer {
				continue
			}
			port++
			t.Run(tt.name+", "+roleName(guestServer), func(t *testing.T) {
				server := GuestIP("A")
				if !guestServer {
					server = HostIP
				}
				args := fmt.Sprintf("-p %d %s", port, tt.args)
				r := runCMWithGuest(t, g, prog, guestServer, "rstream",
					strings.Fields(fmt.Sprintf("-b %s %s", server, args)), strings.Fields(fmt.Sprintf("-s %s %s", server, args)))
				for _, side := range r.sides() {
					if side.failed {
						continue
					}
					if strings.Contains(side.out, "failed") || !strings.Contains(side.out, "\n"+tt.want) {
						t.Errorf("%s: rstream did not report %q with its data checked:\n%s", side.who, tt.want, side.out)
					}
				}
			})
		}
	}
}

// TestRiostreamWithRxe runs Debian's riostream the same way: each side
// riomaps its buffer and the other riowrites into it, so the iomap slots
// offered in the connection data, the RS_OP_IOMAP_SGL writes that fill
// them and the RDMA WRITEs that follow cross between vrdma and rdma-core.
func TestRiostreamWithRxe(t *testing.T) {
	Require(t)
	guesttest.RequirePrograms(t, "riostream")
	lib := guesttest.Library(t)
	if _, err := os.Stat(filepath.Join(lib, "librdmacm.so.1")); err != nil {
		t.Skipf("the guest libraries in %s have no librdmacm.so.1: %v", lib, err)
	}
	g := Up(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	if out, rc := g.Run(t, "A", 30, "command -v riostream"); rc != 0 {
		t.Skipf("the interop guest lacks riostream (shared/interop/setup.sh puts rdmacm-utils' programs into its initramfs): %s", out)
	}
	prog := guesttest.Program{Host: host, Lib: lib, Socket: d.Socket}
	for i, guestServer := range []bool{true, false} {
		t.Run(roleName(guestServer), func(t *testing.T) {
			server := GuestIP("A")
			if !guestServer {
				server = HostIP
			}
			args := fmt.Sprintf("-p %d -T v -S 65536 -C 20", 7490+i)
			r := runCMWithGuest(t, g, prog, guestServer, "riostream",
				strings.Fields(fmt.Sprintf("-b %s %s", server, args)), strings.Fields(fmt.Sprintf("-s %s %s", server, args)))
			for _, side := range r.sides() {
				if !side.failed && (strings.Contains(side.out, "failed") || !strings.Contains(side.out, "\ncustom    64k     20 ")) {
					t.Errorf("%s: riostream did not report 20 checked 64 KiB transfers:\n%s", side.who, side.out)
				}
			}
		})
	}
}
