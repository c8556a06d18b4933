package daemon_test

import (
	"encoding/json"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// importedConn sends one end of a new socketpair on c in an import_device
// request whose reply is to carry id, and returns the other end as a
// client connection, with the reply read from it.
func importedConn(t *testing.T, c *rawClient, id uint32) (*rawClient, reply) {
	t.Helper()
	sv, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.sendRaw(request(proto.OpImportDevice, 0, mustJSON(proto.ImportDeviceReq{ID: id})), sv[1])
	unix.Close(sv[1])
	f := os.NewFile(uintptr(sv[0]), "import")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pc := proto.NewClientConn(nc.(*net.UnixConn))
	t.Cleanup(func() { pc.Close() })
	// A hang guard, not a timing assertion: the reply comes at once.
	_ = pc.Raw().SetReadDeadline(time.Now().Add(20 * time.Second))
	ic := &rawClient{t: t, conn: pc, id: id}
	r := ic.recv()
	if r.err != nil {
		t.Fatalf("import_device: no reply on the imported socket: %v", r.err)
	}
	if r.h.Kind != proto.KindReply || r.h.Op != proto.OpImportDevice || r.h.ID != id {
		t.Fatalf("import_device: reply header %+v, want a reply to request %d", r.h, id)
	}
	_ = pc.Raw().SetReadDeadline(time.Time{})
	return ic, r
}

// An imported connection is another connection to the same session: the
// reply goes on it (none on the exporter's), it has the device, and both
// see one set of objects under one set of handles.
func TestImportDeviceSharesTheSession(t *testing.T) {
	sock := daemontest.Start(t)
	a := dial(t, sock)
	a.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	var pd proto.HandleResp
	a.ok(proto.OpAllocPD, nil, &pd)

	b, r := importedConn(t, a, 7)
	var hello proto.HelloResp
	if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &hello) != nil || hello.Device == nil || hello.Attr == nil || hello.Device.Name != "vrdma0" {
		t.Fatalf("import_device: %v %s, want the device vrdma0 and its attributes", r.h.Code, r.body)
	}
	// The exporter's next reply is its next request's: nothing was sent to it.
	a.ok(proto.OpQueryDevice, nil, nil)

	var got proto.ImportObjectResp
	b.ok(proto.OpImportObject, proto.ImportObjectReq{Kind: "pd", Handle: pd.Handle}, &got)
	if got.Handle != pd.Handle {
		t.Fatalf("import_object pd %d: handle %d", pd.Handle, got.Handle)
	}
	var pd2 proto.HandleResp
	b.ok(proto.OpAllocPD, nil, &pd2)
	a.ok(proto.OpImportObject, proto.ImportObjectReq{Kind: "pd", Handle: pd2.Handle}, nil)
	b.ok(proto.OpDeallocPD, proto.HandleReq(pd), nil)
	if r := a.call(proto.OpImportObject, mustJSON(proto.ImportObjectReq{Kind: "pd", Handle: pd.Handle})); r.h.Code != proto.CodeNotFound {
		t.Fatalf("a PD the imported connection freed: %v %s, want not found", r.h.Code, r.msg())
	}
	if r := b.call(proto.OpHello, mustJSON(proto.HelloReq{Device: "vrdma0"})); r.h.Code != proto.CodeInvalid {
		t.Fatalf("hello on an imported connection: %v, want invalid (it has its device)", r.h.Code)
	}

	// The session ends with the exporter's socket, and the imported one with it.
	a.Close()
	_ = b.conn.Raw().SetReadDeadline(time.Now().Add(20 * time.Second)) // a hang guard
	if r := b.recv(); r.err == nil || os.IsTimeout(r.err) {
		t.Fatalf("the imported connection outlived its session: %+v", r)
	}
}

// What import_device and import_object refuse, and where the refusal goes.
func TestImportRefusals(t *testing.T) {
	sock := daemontest.Start(t)
	a := dial(t, sock)
	a.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	var pd proto.HandleResp
	a.ok(proto.OpAllocPD, nil, &pd)

	pipe := make([]int, 2)
	if err := unix.Pipe2(pipe, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	stream, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(stream[0])
	// Without a usable socket the refusal goes where the request came from.
	for _, c := range []struct {
		name string
		fds  []int
	}{
		{"no descriptor", nil},
		{"a pipe", []int{pipe[1]}},
		{"a stream socket", []int{stream[1]}},
	} {
		r := a.call(proto.OpImportDevice, mustJSON(proto.ImportDeviceReq{ID: 1}), c.fds...)
		if r.h.Code != proto.CodeInvalid || r.msg() == "" {
			t.Errorf("import_device with %s: %v %q, want invalid with a reason", c.name, r.h.Code, r.msg())
		}
	}
	unix.Close(pipe[1])
	unix.Close(stream[1])

	// A client's connection to this daemon (another session of its own):
	// served as an import, the daemon would answer its own replies.
	other := dial(t, sock)
	other.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	raw, err := other.conn.Raw().File()
	if err != nil {
		t.Fatal(err)
	}
	_ = a.conn.Raw().SetReadDeadline(time.Now().Add(20 * time.Second)) // a hang guard: taken, it would answer nothing here
	r := a.call(proto.OpImportDevice, mustJSON(proto.ImportDeviceReq{ID: 1}), int(raw.Fd()))
	_ = a.conn.Raw().SetReadDeadline(time.Time{})
	raw.Close()
	if r.h.Code != proto.CodeInvalid || r.msg() == "" {
		t.Errorf("import_device of a connection to the daemon: %v %q, want invalid with a reason", r.h.Code, r.msg())
	}
	other.ok(proto.OpQueryDevice, nil, nil) // that session goes on, unaffected

	b, _ := importedConn(t, a, 3)
	for _, c := range []struct {
		name string
		req  proto.ImportObjectReq
		code proto.Code
	}{
		{"an unknown PD", proto.ImportObjectReq{Kind: "pd", Handle: 999}, proto.CodeNotFound},
		{"an unknown MR", proto.ImportObjectReq{Kind: "mr", Handle: 999, PD: pd.Handle}, proto.CodeNotFound},
		{"an MR of an unknown PD", proto.ImportObjectReq{Kind: "mr", Handle: 1, PD: 999}, proto.CodeNotFound},
		{"another kind", proto.ImportObjectReq{Kind: "qp", Handle: 1}, proto.CodeInvalid},
	} {
		if r := b.call(proto.OpImportObject, mustJSON(c.req)); r.h.Code != c.code || r.msg() == "" {
			t.Errorf("import_object of %s: %v %q, want %v with a reason", c.name, r.h.Code, r.msg(), c.code)
		}
	}

	// 16 imports of one session, and the 17th is refused on its own socket.
	for i := 2; i <= 16; i++ {
		if _, r := importedConn(t, a, uint32(100+i)); r.h.Code != proto.CodeOK {
			t.Fatalf("import %d: %v %s", i, r.h.Code, r.msg())
		}
	}
	if _, r := importedConn(t, a, 200); r.h.Code != proto.CodeLimit || r.msg() == "" {
		t.Fatalf("the 17th import: %v %q, want a limit with a reason", r.h.Code, r.msg())
	}
	a.ok(proto.OpQueryDevice, nil, nil) // and the exporter's connection goes on
}
