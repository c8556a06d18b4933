package daemon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/proto"
)

// A port another tenant's instance listens on is refused without naming
// the instance (which `vm show` hides from other uids); root, and the
// owner, are told. The other tenant is a client run as nobody in a child
// process (the test binary again).
func TestCMPortInUseNamesNoStranger(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the client must be another user than the instance's owner (CI runs it as root)")
	}
	d := cmDaemonWith(t, func(c *daemon.Config) { c.SocketMode = 0o666 })
	if err := os.Chmod(filepath.Dir(d.SocketPath()), 0o755); err != nil {
		t.Fatal(err)
	}
	adm := dial(t, d.SocketPath())
	adm.ok(proto.OpHello, proto.HelloReq{Client: "cm-test"}, nil)
	adm.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "secret-vm", Adapters: 1}, nil)
	holder := dial(t, d.SocketPath())
	holder.ok(proto.OpHello, proto.HelloReq{Instance: "secret-vm", Device: "vrdma0", Client: "cm-test"}, nil)
	holder.ok(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 18515}, nil)
	root := dial(t, d.SocketPath())
	root.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "cm-test"}, nil)
	root.fails(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 18515}, proto.CodeBusy, "port 18515 is in use: instance secret-vm's listener has it")

	dir, err := os.MkdirTemp("", "vrdma-cmport-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "daemon.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestCMPortHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "VRDMA_CM_HELPER_SOCKET="+d.SocketPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestCMPortHelperProcess") {
		t.Fatalf("the client run as nobody failed: %v\n%s", err, out)
	}
}

// TestCMPortHelperProcess is the client TestCMPortInUseNamesNoStranger
// runs as nobody; on its own it does nothing.
func TestCMPortHelperProcess(t *testing.T) {
	sock := os.Getenv("VRDMA_CM_HELPER_SOCKET")
	if sock == "" {
		return
	}
	if os.Geteuid() == 0 {
		t.Fatal("the helper runs as root")
	}
	c := dial(t, sock)
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "cm-helper"}, nil)
	r := c.call(proto.OpCMListen, mustJSON(proto.CMListenReq{ID: 1, Port: 18515}))
	if r.h.Code != proto.CodeBusy || !strings.Contains(r.msg(), "port 18515 is in use: another listener has it") || strings.Contains(r.msg(), "secret-vm") {
		t.Fatalf("another tenant's port: %v %q, want it in use, and no instance named", r.h.Code, r.msg())
	}
	// Its own instance is named to it.
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "nobodys-vm", Adapters: 1}, nil)
	own := dial(t, sock)
	own.ok(proto.OpHello, proto.HelloReq{Instance: "nobodys-vm", Device: "vrdma0", Client: "cm-helper"}, nil)
	own.ok(proto.OpCMListen, proto.CMListenReq{ID: 1, Port: 18516}, nil)
	c.fails(proto.OpCMListen, proto.CMListenReq{ID: 2, Port: 18516}, proto.CodeBusy, "port 18516 is in use: instance nobodys-vm's listener has it")
}
