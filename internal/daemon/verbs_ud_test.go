package daemon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// TestControlledQKeyOnVerbsUplink: on an instance bound to a verbs uplink
// (whose device takes any Q_Key from the daemon), a user who is neither
// root nor the daemon's user cannot give a UD QP a controlled Q_Key (high
// bit set, IBTA 3.5.3), as the kernel refuses it to such a user with
// EPERM; an ordinary Q_Key is taken, and the instance's address handle is
// made on the device.
func TestControlledQKeyOnVerbsUplink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the client must be a user other than root and the daemon's (CI runs it as root)")
	}
	cfg := linkConfig(t)
	cfg.VerbsHelper = fakeVerbsHelper(t, "datapath")
	cfg.SocketMode = 0o666
	d := startDaemon(t, cfg)
	for _, dir := range []string{filepath.Dir(d.SocketPath()), filepath.Dir(filepath.Dir(d.SocketPath()))} {
		if err := os.Chmod(dir, 0o755); err != nil { // nobody reaches the socket
			t.Fatal(err)
		}
	}
	c := admin(t, cfg.SocketPath)
	c.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, nil)
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm1", Adapters: 1, Uplink: "hca0", Owner: &proto.Owner{UID: 65534, GID: 65534}}, nil)

	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm0", Adapters: 1, Uplink: "hca0"}, nil)

	// Root may.
	if code := udQKey(t, d.SocketPath(), "vm0", 0x80000001); code != proto.CodeOK {
		t.Fatalf("root's controlled Q_Key: code %v, want taken", code)
	}

	dir, err := os.MkdirTemp("", "vrdma-qkey-")
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
	cmd := exec.Command(bin, "-test.run=^TestQKeyHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "VRDMA_QKEY_HELPER_SOCKET="+d.SocketPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestQKeyHelperProcess") {
		t.Fatalf("the client run as nobody failed: %v\n%s", err, out)
	}
}

// TestQKeyHelperProcess is the client TestControlledQKeyOnVerbsUplink runs
// as nobody; on its own it does nothing.
func TestQKeyHelperProcess(t *testing.T) {
	sock := os.Getenv("VRDMA_QKEY_HELPER_SOCKET")
	if sock == "" {
		return
	}
	if os.Geteuid() == 0 {
		t.Fatal("the helper runs as root")
	}
	if code := udQKey(t, sock, "vm1", 0x80000001); code != proto.CodePermission {
		t.Fatalf("nobody's controlled Q_Key: code %v, want CodePermission", code)
	}
	if code := udQKey(t, sock, "vm1", 0x11111111); code != proto.CodeOK {
		t.Fatalf("nobody's ordinary Q_Key: code %v, want taken", code)
	}
}

// udQKey opens instance inst's adapter, makes an address handle and a UD QP and moves
// it to INIT with qkey: the modify's reply code.
func udQKey(t *testing.T, sock, inst string, qkey uint32) proto.Code {
	t.Helper()
	c := dial(t, sock)
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Instance: inst, Device: "vrdma0", Client: "qkey-test"}, nil)
	var pd, cq, qp proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	c.ok(proto.OpCreateAH, proto.CreateAHReq{PD: pd.Handle, AV: qpstate.AddressVector{DGID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 2}, SGIDIndex: 1, PortNum: 1}}, nil)
	c.ok(proto.OpCreateCQ, proto.CreateCQReq{CQE: 16}, &cq)
	c.ok(proto.OpCreateQP, proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeUD), SendCQ: cq.Handle, RecvCQ: cq.Handle,
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}, &qp)
	r := c.call(proto.OpModifyQP, mustJSON(proto.ModifyQPReq{Handle: qp.Handle, Mask: uint32(qpstate.MaskState | qpstate.MaskPort | qpstate.MaskPKeyIndex | qpstate.MaskQKey),
		Attr: qpstate.Attr{State: abi.QPStateInit, PortNum: 1, QKey: qkey}}))
	if r.h.Code == proto.CodePermission && !strings.Contains(r.msg(), "controlled Q_Key") {
		t.Errorf("the refusal says %q, not why", r.msg())
	}
	return r.h.Code
}
