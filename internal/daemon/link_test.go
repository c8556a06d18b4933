package daemon_test

import (
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/proto"
)

// Links are opened on lo, in this network namespace, on a free port
// rather than 4791.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a link opens raw sockets on a host interface")
	}
}

func linkConfig(t *testing.T) daemon.Config {
	dir := t.TempDir()
	return daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), StateDir: filepath.Join(dir, "state"),
		HostName: "test", LinkPort: freeUDPPort(t)}
}

// freeUDPPort returns a UDP port free on 127.0.0.1 and ::1 just now.
func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	for range 20 {
		c4, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := c4.LocalAddr().(*net.UDPAddr).Port
		c6, err := net.ListenPacket("udp6", net.JoinHostPort("::1", strconv.Itoa(port)))
		c4.Close()
		if err == nil {
			c6.Close()
			return uint16(port)
		}
	}
	t.Fatal("no UDP port free on both 127.0.0.1 and ::1")
	return 0
}

func startDaemon(t *testing.T, cfg daemon.Config) *daemon.Daemon {
	t.Helper()
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() { d.Close() })
	return d
}

// admin dials the daemon and says hello without opening a device.
func admin(t *testing.T, sock string) *rawClient {
	t.Helper()
	c := dial(t, sock)
	c.ok(proto.OpHello, proto.HelloReq{Client: "link-test"}, nil)
	return c
}

func listLinks(c *rawClient) []proto.LinkInfo {
	var r proto.ListLinksResp
	c.ok(proto.OpListLinks, nil, &r)
	return r.Links
}

// fails calls op and checks that it fails with code and a message
// containing want.
func (c *rawClient) fails(op proto.Op, v any, code proto.Code, want string) {
	c.t.Helper()
	r := c.call(op, mustJSON(v))
	proto.CloseFDs(r.fds)
	if r.h.Code != code || !strings.Contains(r.msg(), want) {
		c.t.Errorf("%v %s: %v %q, want %v and %q", op, mustJSON(v), r.h.Code, r.msg(), code, want)
	}
}

func hasGID(info proto.LinkInfo, a string) bool {
	want := netip.MustParseAddr(a).As16()
	for _, g := range info.GIDs {
		if string(g) == string(want[:]) {
			return true
		}
	}
	return false
}

func TestLinkAddShowRestartDelete(t *testing.T) {
	needRoot(t)
	cfg := linkConfig(t)
	d := startDaemon(t, cfg)
	c := admin(t, cfg.SocketPath)

	var info proto.LinkInfo
	c.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "lotest", Type: "rxe", Netdev: "lo", DSCP: 26}, &info)
	if info.Name != "lotest" || info.Netdev != "lo" || info.DSCP != 26 || info.State != "ACTIVE" || info.PhysState != "LINK_UP" ||
		info.Port != cfg.LinkPort || info.ActiveMTU != 5 || !hasGID(info, "::ffff:127.0.0.1") || !hasGID(info, "::1") {
		t.Fatalf("link add replied %+v", info)
	}
	if ls := d.Host().Links(); len(ls) != 1 || ls[0].Name() != "lotest" {
		t.Errorf("the engine has links %v, want lotest", ls)
	}
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "lotest", Type: "rxe", Netdev: "lo"}, proto.CodeBusy, "exists already")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "lo2", Type: "rxe", Netdev: "lo"}, proto.CodeBusy, "one link per interface")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "nope", Type: "rxe", Netdev: "vrdmanope0"}, proto.CodeNotFound, "the interfaces are lo")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "bad", Type: "iwarp", Netdev: "lo"}, proto.CodeInvalid, "the types are rxe")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "bad", Type: "rxe", Netdev: "lo", DSCP: 64}, proto.CodeInvalid, "0..63")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "bad name", Type: "rxe", Netdev: "lo"}, proto.CodeInvalid, "link name")
	c.fails(proto.OpListLinks, proto.LinkSpec{Name: "nope"}, proto.CodeNotFound, "no link")
	c.fails(proto.OpLinkDelete, proto.LinkSpec{Name: "nope"}, proto.CodeNotFound, "no link")
	if ls := listLinks(c); len(ls) != 1 || ls[0].Name != "lotest" {
		t.Fatalf("link show: %+v", ls)
	}
	saved, err := os.ReadFile(filepath.Join(cfg.StateDir, "links.json"))
	if err != nil || !strings.Contains(string(saved), `"netdev": "lo"`) {
		t.Fatalf("links.json: %v %s", err, saved)
	}

	c.Close()
	d.Close()
	if ls := d.Host().Links(); len(ls) != 0 {
		t.Errorf("a closed daemon's engine still has links %v", ls)
	}
	d2 := startDaemon(t, cfg)
	c2 := admin(t, cfg.SocketPath)
	ls := listLinks(c2)
	if len(ls) != 1 || ls[0].Name != "lotest" || ls[0].DSCP != 26 || ls[0].State != "ACTIVE" || !hasGID(ls[0], "::ffff:127.0.0.1") {
		t.Fatalf("after a restart, link show: %+v", ls)
	}
	if len(d2.Host().Links()) != 1 {
		t.Errorf("the restored link is not the engine's")
	}
	c2.ok(proto.OpLinkDelete, proto.LinkSpec{Name: "lotest"}, nil)
	if ls := listLinks(c2); len(ls) != 0 {
		t.Errorf("after delete, link show: %+v", ls)
	}
	if len(d2.Host().Links()) != 0 {
		t.Errorf("the deleted link is still the engine's")
	}
	if saved, _ := os.ReadFile(filepath.Join(cfg.StateDir, "links.json")); strings.TrimSpace(string(saved)) != "[]" {
		t.Errorf("links.json after delete: %s", saved)
	}
	// The port is free again.
	p, err := net.ListenPacket("udp4", "127.0.0.1:"+strconv.Itoa(int(cfg.LinkPort)))
	if err != nil {
		t.Errorf("port %d still taken after delete: %v", cfg.LinkPort, err)
	} else {
		p.Close()
	}
}

// A saved link that cannot be opened now does not stop the daemon: it is
// shown DOWN with the reason, waits for a missing interface, and can be
// deleted.
func TestLinkRestoreKeepsBrokenLinksDown(t *testing.T) {
	needRoot(t)
	cfg := linkConfig(t)
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	saved := `[{"name":"gone","type":"rxe","netdev":"vrdmanope0","dscp":0},{"name":"busy","type":"rxe","netdev":"lo","dscp":0}]`
	if err := os.WriteFile(filepath.Join(cfg.StateDir, "links.json"), []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	// Something else holds the port on 127.0.0.1, as the kernel's rxe would.
	holder, err := net.ListenPacket("udp4", "127.0.0.1:"+strconv.Itoa(int(cfg.LinkPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	startDaemon(t, cfg)
	c := admin(t, cfg.SocketPath)
	ls := listLinks(c)
	if len(ls) != 2 {
		t.Fatalf("link show: %+v", ls)
	}
	busy, gone := ls[0], ls[1]
	if gone.Name != "gone" || gone.State != "DOWN" || gone.PhysState != "DISABLED" || !strings.Contains(gone.Problem, "vrdmanope0") || len(gone.GIDs) != 0 {
		t.Errorf("link on a missing interface: %+v", gone)
	}
	if busy.Name != "busy" || busy.State != "DOWN" || !strings.Contains(busy.Problem, "rdma_rxe") {
		t.Errorf("link on a taken port: %+v", busy)
	}
	c.ok(proto.OpLinkDelete, proto.LinkSpec{Name: "busy"}, nil)
	c.ok(proto.OpLinkDelete, proto.LinkSpec{Name: "gone"}, nil)
	if ls := listLinks(c); len(ls) != 0 {
		t.Errorf("after delete: %+v", ls)
	}
}

func TestBadLinksFileStopsTheDaemon(t *testing.T) {
	cfg := linkConfig(t)
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.StateDir, "links.json"), []byte(`[{"name":`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(cfg)
	if err == nil {
		d.Close()
		t.Fatal("the daemon started with a links.json that does not parse")
	}
	if !strings.Contains(err.Error(), "links.json") {
		t.Errorf("error %q does not name links.json", err)
	}
}

// Only root (or the daemon's user, or its admin group) may add or delete
// links; anyone may look. The test runs a client as nobody in a child
// process (the test binary again).
func TestLinkAddNeedsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the client must be another user than the daemon's (CI runs it as root)")
	}
	dir, err := os.MkdirTemp("", "vrdma-linkperm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), SocketMode: 0o666, HostName: "test", LinkPort: freeUDPPort(t)}
	startDaemon(t, cfg)
	bin := filepath.Join(dir, "daemon.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestLinkHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "VRDMA_LINK_HELPER_SOCKET="+cfg.SocketPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestLinkHelperProcess") {
		t.Fatalf("the client run as nobody failed: %v\n%s", err, out)
	}
}

// TestLinkHelperProcess is the client TestLinkAddNeedsRoot runs as nobody;
// on its own it does nothing.
func TestLinkHelperProcess(t *testing.T) {
	sock := os.Getenv("VRDMA_LINK_HELPER_SOCKET")
	if sock == "" {
		return
	}
	if os.Geteuid() == 0 {
		t.Fatal("the helper runs as root")
	}
	checkNotRoot(t, sock)
}

func checkNotRoot(t *testing.T, sock string) {
	c := admin(t, sock)
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "x", Type: "rxe", Netdev: "lo"}, proto.CodePermission, "link_add is switch-wide administration, for root")
	c.fails(proto.OpLinkDelete, proto.LinkSpec{Name: "x"}, proto.CodePermission, "link_delete is switch-wide administration, for root")
	if ls := listLinks(c); len(ls) != 0 {
		t.Errorf("link show: %+v", ls)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
