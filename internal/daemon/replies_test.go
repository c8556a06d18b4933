package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/switchview"
)

// TestLargeListIsWhole: 40 instances of 10 adapters make a `vm show`
// reply of more than 64 KiB; it arrives whole (in parts), not dropped.
func TestLargeListIsWhole(t *testing.T) {
	d := daemontest.StartDaemon(t)
	c := dial(t, d.SocketPath())
	_ = c.conn.Raw().SetDeadline(time.Now().Add(60 * time.Second)) // a hang fails the test
	c.ok(proto.OpHello, proto.HelloReq{}, nil)
	for i := range 40 {
		c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: fmt.Sprintf("vm%02d", i), Adapters: 10}, nil)
	}
	r := c.call(proto.OpListInstances, nil)
	if r.h.Code != proto.CodeOK {
		t.Fatalf("vm show: %v: %s", r.h.Code, r.msg())
	}
	if len(r.body) <= proto.MaxMessage {
		t.Fatalf("the reply is %d bytes: the test needs one larger than a message", len(r.body))
	}
	var l proto.ListInstancesResp
	if err := proto.Decode(r.body, &l); err != nil {
		t.Fatal(err)
	}
	adapters := 0
	for _, i := range l.Instances {
		adapters += len(i.Adapters)
	}
	if len(l.Instances) != 41 || adapters != 401 {
		t.Fatalf("vm show lists %d instances with %d adapters, want 41 with 401", len(l.Instances), adapters)
	}
	t.Logf("a %d-byte reply, whole", len(r.body))
}

// TestLongNameRefused: a hello naming a 60,000-character instance, and a
// create and a delete of one, are answered with a short refusal that says
// what is wrong.
func TestLongNameRefused(t *testing.T) {
	d := daemontest.StartDaemon(t)
	c := dial(t, d.SocketPath())
	_ = c.conn.Raw().SetDeadline(time.Now().Add(30 * time.Second))
	long := strings.Repeat("a", 60000)
	r := c.call(proto.OpHello, mustJSON(proto.HelloReq{Instance: long, Device: "vrdma0"}))
	if r.h.Code != proto.CodeInvalid || !strings.Contains(r.msg(), "instance name") || !strings.Contains(r.msg(), "(60000 bytes)") || len(r.body) > 1024 {
		t.Fatalf("hello naming a 60,000-character instance: %v, %d bytes: %.300s", r.h.Code, len(r.body), r.msg())
	}
	c.ok(proto.OpHello, proto.HelloReq{}, nil)
	for _, op := range []proto.Op{proto.OpCreateInstance, proto.OpDeleteInstance} {
		r := c.call(op, mustJSON(proto.InstanceSpec{Name: long, Adapters: 1}))
		if r.h.Code != proto.CodeInvalid || !strings.Contains(r.msg(), "(60000 bytes)") || len(r.body) > 1024 {
			t.Errorf("%v of a 60,000-character instance: %v, %d bytes: %.300s", op, r.h.Code, len(r.body), r.msg())
		}
	}
	for _, tc := range []struct {
		op   proto.Op
		body any
	}{
		{proto.OpCreateInstance, proto.InstanceSpec{Name: "ok", Adapters: 1, TrustGroup: long}},
		{proto.OpCreateInstance, proto.InstanceSpec{Name: "ok", Adapters: 1, PortGroup: long}},
		{proto.OpPortGroupDelete, switchview.PortGroup{Name: long}},
		{proto.OpLinkDelete, proto.LinkSpec{Name: long}},
		{proto.OpListLinks, proto.LinkSpec{Name: long}},
	} {
		r := c.call(tc.op, mustJSON(tc.body))
		if r.h.Code != proto.CodeInvalid || len(r.body) > 1024 {
			t.Errorf("%v naming 60,000 characters: %v, %d bytes: %.300s", tc.op, r.h.Code, len(r.body), r.msg())
		}
	}
}

// TestStateFileMode: instances.json is the daemon's user's alone (0600),
// however it was before.
func TestStateFileMode(t *testing.T) {
	d := daemontest.StartDaemon(t)
	c := dial(t, d.SocketPath())
	c.ok(proto.OpHello, proto.HelloReq{}, nil)
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm1", Adapters: 1}, nil)
	path := filepath.Join(filepath.Dir(d.SocketPath()), "state", "instances.json")
	// A stale temporary file, world-readable, as a crash would leave it.
	if err := os.WriteFile(path+".tmp", []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm2", Adapters: 1}, nil)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("instances.json is %v, want -rw-------", fi.Mode().Perm())
	}
}
