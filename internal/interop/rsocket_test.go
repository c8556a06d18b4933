package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	g := sharedGuests(t)
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

// TestRsocketUdpongWithRxe runs Debian's unmodified udpong (rdmacm-utils)
// on both ends: on vrdma in the namespace, through the drop-in librdmacm's
// datagram rsockets, and on rdma-core's over rdma_rxe in guest A, each end
// as server and as client, in udpong's echo test (every datagram comes
// back, or the client sends it again). The client's first datagram goes
// over UDP with rdma-core's ds_udp_header naming its UD QP, the server's
// answer names its own, and the echoes go between the UD QPs with
// rdma-core's ds_header. The sizes stay within rxe's path MTU (1024 on a
// 1500-byte link): rdma-core sends every datagram as one UD message.
// udpong's server serves for ever; it is killed once its client is done.
func TestRsocketUdpongWithRxe(t *testing.T) {
	Require(t)
	guesttest.RequirePrograms(t, "udpong")
	lib := guesttest.Library(t)
	if _, err := os.Stat(filepath.Join(lib, "librdmacm.so.1")); err != nil {
		t.Skipf("the guest libraries in %s have no librdmacm.so.1: %v", lib, err)
	}
	g := sharedGuests(t)
	host := g.Host(t)
	d := host.StartDaemon(t)
	d.Vrdma(t, "link", "add", "rxe0", "type", "rxe", "netdev", HostIface)
	if out, rc := g.Run(t, "A", 30, "command -v udpong"); rc != 0 {
		t.Skipf("the interop guest lacks udpong (shared/interop/setup.sh puts rdmacm-utils' programs into its initramfs): %s", out)
	}
	// rdma-core's datagram rsockets on rxe alone, both ends in the guest.
	// With Debian 12's rdma-core on rdma_rxe, udpong's rconnect fails with
	// ENOENT before anything is sent. (Reading rdma-core: rconnect makes the
	// UD QP and an address handle to its own port without a GRH, dlid the
	// port's LID, in ds_add_qp_dest; a RoCE port needs a GRH.) Where that is
	// so, nothing of ours can be tried against it.
	if out, rc := g.Run(t, "A", 60, fmt.Sprintf("udpong -b %[1]s -p 7579 -T e & sleep 1; timeout 20 udpong -s %[1]s -p 7579 -T e -S 64 -C 5; rc=$?; kill %%1; exit $rc", GuestIP("A"))); rc != 0 {
		t.Skipf("rdma-core's udpong does not run on rdma_rxe by itself, both ends in the guest (exit %d; its datagram rsockets make a GRH-less address handle to their own port, which a RoCE port needs a GRH for):\n%s", rc, out)
	}
	prog := guesttest.Program{Host: host, Lib: lib, Socket: d.Socket}
	tests := []struct {
		name, args string
		want       string // the client's report line: "name bytes xfers "
	}{
		{"echo 64 B", "-T e -S 64 -C 50", "custom    64      100 "},
		{"echo 900 B", "-T e -S 900 -C 50", "custom    900     100 "},
	}
	port := 7580
	for _, tt := range tests {
		for _, guestServer := range []bool{true, false} {
			port++
			t.Run(tt.name+", "+roleName(guestServer), func(t *testing.T) {
				server := GuestIP("A")
				if !guestServer {
					server = HostIP
				}
				args := fmt.Sprintf("-p %d %s", port, tt.args)
				srvArgs, cliArgs := fmt.Sprintf("-b %s %s", server, args), fmt.Sprintf("-s %s %s", server, args)
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // a hang guard
				defer cancel()
				var ours bytes.Buffer
				var client, theirs string
				var clientErr error
				if guestServer {
					id, pidFile := spawnServer(t, g, "udpong "+srvArgs)
					cmd := prog.Command(ctx, "udpong", strings.Fields(cliArgs)...)
					cmd.Stdout, cmd.Stderr = &ours, &ours
					clientErr = cmd.Run()
					client = ours.String()
					_, _ = g.Run(t, "A", 20, "kill $(cat "+pidFile+")")
					theirs, _ = g.Wait(t, "A", id, 30)
				} else {
					cmd := prog.Command(ctx, "udpong", strings.Fields(srvArgs)...)
					cmd.Stdout, cmd.Stderr = &ours, &ours
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					out, rc := g.Run(t, "A", 150, "timeout 120 udpong "+cliArgs)
					client, theirs = out, out
					if rc != 0 {
						clientErr = fmt.Errorf("exit %d", rc)
					}
					cancel()
					_ = cmd.Wait()
				}
				if clientErr != nil || !strings.Contains(client, "\n"+tt.want) {
					t.Errorf("udpong's client (%s) did not report %q (%v)\nours:\n%s\nthe guest's:\n%s",
						roleName(guestServer), tt.want, clientErr, ours.String(), theirs)
				}
			})
		}
	}
}
