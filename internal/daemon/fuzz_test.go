package daemon_test

import (
	"encoding/json"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// FuzzCommand sends a request with an arbitrary op and body on a connection
// that said hello for vrdma0 (and, if prepared, holds a PD, a CQ and an RC QP
// with handles 1, 2 and 3). The daemon must answer it, keep serving the
// connection, and keep accepting new ones.
func FuzzCommand(f *testing.F) {
	d := daemontest.StartDaemon(f)
	sock := d.SocketPath()

	js := func(v any) []byte { return mustJSON(v) }
	caps := proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}
	initAttr := qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessAll}
	initMask := uint32(qpstate.MaskState | qpstate.MaskPort | qpstate.MaskPKeyIndex | qpstate.MaskAccessFlags)
	seeds := []struct {
		op      proto.Op
		body    []byte
		prepare bool
	}{
		{proto.OpHello, js(proto.HelloReq{Device: "vrdma0"}), false},
		{proto.OpQueryDevice, nil, false},
		{proto.OpQueryPort, js(proto.QueryPortReq{Port: 1}), false},
		{proto.OpQueryPort, []byte(`{"port":-1}`), false},
		{proto.OpAllocPD, nil, false},
		{proto.OpDeallocPD, js(proto.HandleReq{Handle: 1}), true},
		{proto.OpRegMR, js(proto.RegMRReq{PD: 1, Addr: 4096, Length: 4096, Access: 1}), true},
		{proto.OpRegMR, js(proto.RegMRReq{PD: 1, Addr: 4196, Length: 1000, Offset: 100, Access: 1}), true},
		{proto.OpRegMR, []byte(`{"pd":1,"length":4096,"offset":18446744073709551615}`), true},
		{proto.OpRegMR, []byte(`{"pd":1,"length":100,"offset":10,"segments":[{"offset":0,"length":4096}]}`), true},
		{proto.OpRegMR, []byte(`{"pd":1,"length":1,"segments":[{"offset":18446744073709547520,"length":4096},{"offset":0,"length":0}]}`), true},
		{proto.OpDeregMR, js(proto.HandleReq{Handle: 1}), true},
		{proto.OpCreateCQ, js(proto.CreateCQReq{CQE: 1}), false},
		{proto.OpCreateCQ, js(proto.CreateCQReq{CQE: -7}), false},
		{proto.OpDestroyCQ, js(proto.HandleReq{Handle: 2}), true},
		{proto.OpCreateQP, js(proto.CreateQPReq{PD: 1, Type: 2, SendCQ: 2, RecvCQ: 2, Caps: caps}), true},
		{proto.OpCreateQP, js(proto.CreateQPReq{PD: 1, Type: 4, SendCQ: 2, RecvCQ: 2, SRQ: 9, Caps: caps}), true},
		{proto.OpModifyQP, js(proto.ModifyQPReq{Handle: 3, Mask: initMask, Attr: initAttr}), true},
		{proto.OpModifyQP, js(proto.ModifyQPReq{Handle: 3, Mask: 0xFFFFFFFF, Attr: qpstate.Attr{State: 255, CurState: 9}}), true},
		{proto.OpQueryQP, js(proto.HandleReq{Handle: 3}), true},
		{proto.OpDestroyQP, js(proto.HandleReq{Handle: 3}), true},
		{proto.OpCreateSRQ, js(proto.CreateSRQReq{PD: 1, MaxWR: 16, MaxSGE: 2}), true},
		{proto.OpDestroySRQ, js(proto.HandleReq{Handle: 4}), true},
		{proto.OpCreateAH, js(proto.CreateAHReq{PD: 1, AV: qpstate.AddressVector{SGIDIndex: 0}}), true},
		{proto.OpCreateAH, js(proto.CreateAHReq{PD: 1, AV: qpstate.AddressVector{DLID: 1}}), true},
		{proto.OpCreateAH, []byte(`{"pd":1,"av":{"DLID":65535,"SGIDIndex":200}}`), true},
		{proto.OpModifyQP, js(proto.ModifyQPReq{Handle: 3, Mask: uint32(qpstate.MaskState | qpstate.MaskAV), Attr: qpstate.Attr{State: abi.QPStateRTR, AV: qpstate.AddressVector{DLID: 0xBFFF}}}), true},
		{proto.OpDestroyAH, js(proto.HandleReq{Handle: 4}), true},
		{proto.OpAttachMcast, js(proto.McastReq{QP: 3, GID: [16]byte{0xff, 0x0e, 15: 1}}), true},
		{proto.OpAttachMcast, []byte(`{"qp":3,"gid":[0,0,0,0,0,0,0,0,0,0,255,255,239,1,2,3],"lid":65535}`), true},
		{proto.OpDetachMcast, []byte(`{"qp":3,"gid":[255,300]}`), true},
		{proto.OpCreateInstance, js(proto.InstanceSpec{Name: "fuzz", Adapters: 2}), false},
		{proto.OpDeleteInstance, js(proto.InstanceSpec{Name: "default"}), false},
		{proto.OpListInstances, nil, false},
		{proto.OpStats, nil, false},
		{proto.OpEvent, []byte(`{"type":1}`), false},
		{23, []byte(`{"qp":3,"rkey":1}`), true}, // map_mr, by number
		{0, nil, false},
		{0xFFFF, []byte(`{`), true},
		{proto.OpModifyQP, []byte(`{"handle":3,"mask":1,"attr":{"State":"RTS"}}`), true},
		{proto.OpCreateQP, []byte(`{"caps":{"max_send_wr":1e100}}`), true},
	}
	for _, s := range seeds {
		f.Add(uint16(s.op), s.body, s.prepare)
	}

	f.Fuzz(func(t *testing.T, op uint16, body []byte, prepared bool) {
		if len(body) > proto.MaxMessage-proto.HeaderSize {
			body = body[:proto.MaxMessage-proto.HeaderSize]
		}
		c := dial(t, sock)
		defer c.Close()
		if prepared {
			o := prepare(c)
			if o.pd != 1 || o.cq != 2 || o.qp != 3 {
				t.Fatalf("prepared handles %+v, want 1, 2, 3", o)
			}
		} else {
			c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "fuzz"}, nil)
		}

		r := c.call(proto.Op(op), body)
		proto.CloseFDs(r.fds)
		if r.h.Code != proto.CodeOK {
			if r.msg() == "" {
				t.Fatalf("%v: error reply %v without a message: %q", proto.Op(op), r.h.Code, r.body)
			}
			if r.h.Code == proto.CodeInternal {
				t.Fatalf("%v: internal error: %s", proto.Op(op), r.msg())
			}
		} else if !json.Valid(r.body) {
			t.Fatalf("%v: reply body is not JSON: %q", proto.Op(op), r.body)
		}
		if proto.Op(op) == proto.OpCreateInstance && r.h.Code == proto.CodeOK {
			// Do not let instances pile up over the run.
			var info proto.InstanceInfo
			if err := json.Unmarshal(r.body, &info); err != nil {
				t.Fatal(err)
			}
			defer func() {
				admin := dial(t, sock)
				defer admin.Close()
				admin.ok(proto.OpHello, proto.HelloReq{Client: "fuzz-cleanup"}, nil)
				admin.ok(proto.OpDeleteInstance, proto.InstanceSpec{Name: info.Name}, nil)
			}()
		}

		// The connection still serves.
		c.ok(proto.OpStats, nil, nil)
		c.Close()
		// And the daemon still accepts new ones.
		checkAlive(t, sock)
	})
}
