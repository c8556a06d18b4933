package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
)

func TestLinkCommandLineErrors(t *testing.T) {
	sock := daemontest.Start(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"link", "add", "rxe0", "type", "rxe"}, 2, "netdev is missing"},
		{[]string{"link", "add", "rxe0", "netdev", "lo"}, 2, "type is missing"},
		{[]string{"link", "add", "rxe0", "type", "siw", "netdev", "lo"}, 2, `link type "siw": the types are rxe`},
		{[]string{"link", "add", "rxe0", "type", "rxe", "netdev", "lo", "dscp", "64"}, 2, `dscp "64"`},
		{[]string{"link", "add", "rxe0", "type", "rxe", "netdev", "lo", "dscp", "ef"}, 2, `dscp "ef"`},
		{[]string{"link", "add", "rxe0", "type", "rxe", "netdev"}, 2, "netdev needs a value"},
		{[]string{"link", "add", "rxe0", "type", "rxe", "netdev", "lo", "mtu", "9000"}, 2, `unknown argument "mtu"`},
		{[]string{"link", "add", "hca0", "type", "verbs"}, 2, "dev is missing: add `dev IBDEV`"},
		{[]string{"link", "add", "hca0", "type", "verbs", "dev", "mlx5_0", "port", "0"}, 2, `port "0": give the device's port number`},
		{[]string{"link", "add", "hca0", "type", "verbs", "dev", "mlx5_0", "netdev", "eth0"}, 2, "netdev and dscp are for rxe links"},
		{[]string{"link", "add", "hca0", "type", "rxe", "netdev", "eth0", "dev", "mlx5_0"}, 2, "dev and port are for verbs links"},
		{[]string{"link", "add", "rxe0", "type", "rxe", "type", "rxe", "netdev", "lo"}, 2, "type given twice"},
		{[]string{"link", "add", "type", "rxe", "netdev", "lo"}, 2, "needs a name"},
		{[]string{"link", "add"}, 2, "needs a name"},
		{[]string{"link", "delete"}, 2, "name the link to delete"},
		{[]string{"link", "show", "a", "b"}, 2, "one name at most"},
		{[]string{"link", "frob"}, 2, `unknown link command "frob"`},
		{[]string{"link", "show", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"link", "show", "--socket", sock, "nope"}, 1, `no link "nope"`},
		{[]string{"link", "delete", "nope", "--socket", sock}, 1, `no link "nope"`},
		{[]string{"link", "--socket", "/nonexistent/vrdma.sock"}, 1, "start it with `vrdma daemon`"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := vrdmaCmd(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errs, tt.want)
			}
		})
	}
}

func TestLinkShowWithoutLinks(t *testing.T) {
	sock := daemontest.Start(t)
	for _, args := range [][]string{{"link", "--socket", sock}, {"link", "show", "--socket", sock}, {"link", "list", "--socket=" + sock}} {
		code, out, errs := vrdmaCmd(t, args...)
		if code != 0 || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and nothing", args, code, out, errs)
		}
	}
}

// As root: a link on lo, on a free port, through the command line.
func TestLinkAddShowDelete(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a link opens raw sockets on a host interface")
	}
	p, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := p.LocalAddr().(*net.UDPAddr).Port
	p.Close()
	dir := t.TempDir()
	d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), HostName: "test", LinkPort: uint16(port)})
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	defer d.Close()
	sock := d.SocketPath()

	code, out, errs := vrdmaCmd(t, "link", "add", "lotest", "type", "rxe", "netdev", "lo", "dscp", "46", "--socket", sock)
	if code != 0 {
		t.Fatalf("link add: exit %d: %s", code, errs)
	}
	want := []string{
		`(?m)^link lotest/1 state ACTIVE physical_state LINK_UP netdev lo$`,
		`(?m)^    gid 0 fe80::200:ff:fe00:0 RoCE v2$`,
		`(?m)^    gid \d+ ::ffff:127\.0\.0\.1 RoCE v2$`,
		`(?m)^    gid \d+ ::1 RoCE v2$`,
		`(?m)^    type rxe active_mtu 4096 dscp 46 port \d+$`,
		`(?m)^    rx_packets 0 rx_bytes 0 tx_packets 0 tx_bytes 0 `,
	}
	check := func(what, out string) {
		t.Helper()
		for _, w := range want {
			if !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("%s output lacks %q:\n%s", what, w, out)
			}
		}
	}
	check("link add", out)
	for _, args := range [][]string{{"link", "--socket", sock}, {"link", "show", "lotest/1", "--socket", sock}} {
		code, out, errs := vrdmaCmd(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		check(strings.Join(args, " "), out)
	}
	if code, _, errs := vrdmaCmd(t, "link", "add", "lotest", "type", "rxe", "netdev", "lo", "--socket", sock); code != 1 || !strings.Contains(errs, "exists already") {
		t.Errorf("adding it again: exit %d, %s", code, errs)
	}
	if code, _, errs := vrdmaCmd(t, "link", "delete", "lotest", "--socket", sock); code != 0 {
		t.Fatalf("link delete: exit %d: %s", code, errs)
	}
	if code, out, _ := vrdmaCmd(t, "link", "--socket", sock); code != 0 || out != "" {
		t.Errorf("after delete: exit %d, %q", code, out)
	}
}
