package daemon_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestVerbsHelperKilledWithBoundInstance: the helper of a verbs link dies
// (killed) while an instance bound to the link has a QP on the device: the
// instance's client gets IBV_EVENT_DEVICE_FATAL, the link shows DOWN with
// the reason and the fix, the daemon goes on serving, a new QP on the
// instance is refused naming the link and how to re-add it, and once the
// link is added again and the old QP destroyed, a new QP goes on the new
// device.
func TestVerbsHelperKilledWithBoundInstance(t *testing.T) {
	cfg := linkConfig(t)
	cfg.VerbsHelper = fakeVerbsHelper(t, "datapath")
	d := startDaemon(t, cfg)
	adm := admin(t, cfg.SocketPath)
	spec := proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}
	adm.ok(proto.OpLinkAdd, spec, nil)
	adm.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm1", Adapters: 1, Uplink: "hca0"}, nil)

	c := dial(t, cfg.SocketPath)
	c.ok(proto.OpHello, proto.HelloReq{Instance: "vm1", Device: "vrdma0", Client: "bound"}, nil)
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	var cq proto.CreateCQResp
	r := c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: 16}))
	proto.CloseFDs(r.fds)
	if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &cq) != nil {
		t.Fatalf("create CQ: %v %s", r.h.Code, r.msg())
	}
	caps := proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	createQP := func() reply {
		r := c.call(proto.OpCreateQP, mustJSON(proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeRC), SendCQ: cq.Handle, RecvCQ: cq.Handle, Caps: caps}))
		proto.CloseFDs(r.fds)
		return r
	}
	r = createQP()
	var qp proto.CreateQPResp
	if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &qp) != nil {
		t.Fatalf("create QP on the device: %v %s", r.h.Code, r.msg())
	}
	if qp.QPN != 0x1101 {
		t.Fatalf("QPN %#x, want the device's 0x1101", qp.QPN)
	}

	pid := d.VerbsHelperPID("hca0")
	if pid == 0 {
		t.Fatal("the link has no helper")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// The client is told, unasked.
	if err := c.conn.Raw().SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	h, body, fds, err := c.conn.Recv()
	proto.CloseFDs(fds)
	var ev proto.Event
	if err != nil || h.Kind != proto.KindEvent || json.Unmarshal(body, &ev) != nil || abi.EventType(ev.Type) != abi.EventDeviceFatal ||
		!strings.Contains(ev.Reason, "verbs link hca0") || !strings.Contains(ev.Reason, "the verbs helper is gone") {
		t.Fatalf("after the helper was killed the client got %+v %s (%v), want DEVICE_FATAL naming hca0 and the helper", h, body, err)
	}
	_ = c.conn.Raw().SetReadDeadline(time.Time{})

	ls := listLinks(adm)
	if len(ls) != 1 || ls[0].State == "ACTIVE" || !strings.Contains(ls[0].Problem, "the verbs helper is gone") || !strings.Contains(ls[0].Problem, "vrdma link add hca0 type verbs dev rxe0") {
		t.Fatalf("link show after the helper died: %+v", ls)
	}
	r = createQP()
	if r.h.Code == proto.CodeOK || !strings.Contains(r.msg(), "verbs link hca0 is down") || !strings.Contains(r.msg(), "vrdma link add hca0 type verbs dev rxe0") {
		t.Fatalf("a new QP on the instance: %v %s, want refused naming hca0 and the fix", r.h.Code, r.msg())
	}
	checkAlive(t, cfg.SocketPath)

	// The link added again: the instance moves to the new device once its
	// old QP is gone.
	adm.ok(proto.OpLinkDelete, proto.LinkSpec{Name: "hca0"}, nil)
	adm.ok(proto.OpLinkAdd, spec, nil)
	if ls := listLinks(adm); len(ls) != 1 || ls[0].State != "ACTIVE" {
		t.Fatalf("link show after re-adding: %+v", ls)
	}
	if r := createQP(); r.h.Code == proto.CodeOK || !strings.Contains(r.msg(), "still holds 1 QPs") {
		t.Fatalf("a new QP while the old one lives: %v %s", r.h.Code, r.msg())
	}
	c.ok(proto.OpDestroyQP, proto.HandleReq{Handle: qp.Handle}, nil)
	r = createQP()
	if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &qp) != nil || qp.QPN != 0x1101 {
		t.Fatalf("a new QP after the link came back: %v %s (QPN %#x, want the new helper's first, 0x1101)", r.h.Code, r.msg(), qp.QPN)
	}
	if links, _ := d.InstanceUplinks("vm1"); len(links) != 1 || links[0] != "hca0" {
		t.Fatalf("vm1 is bound to %q", links)
	}
}
