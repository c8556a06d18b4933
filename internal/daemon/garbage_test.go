package daemon_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// objects are the handles a prepared connection holds.
type objects struct {
	pd, cq, qp uint32
}

// prepare says hello for vrdma0 and creates a PD, a CQ and an RC QP.
func prepare(c *rawClient) objects {
	c.t.Helper()
	var o objects
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "daemon-test"}, nil)
	var h proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &h)
	o.pd = h.Handle
	var cq proto.CreateCQResp
	c.ok(proto.OpCreateCQ, proto.CreateCQReq{CQE: 16}, &cq)
	o.cq = cq.Handle
	var qp proto.CreateQPResp
	c.ok(proto.OpCreateQP, proto.CreateQPReq{PD: o.pd, Type: uint8(abi.QPTypeRC), SendCQ: o.cq, RecvCQ: o.cq,
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}, &qp)
	o.qp = qp.Handle
	return o
}

func TestGarbageCommands(t *testing.T) {
	d := daemontest.StartDaemon(t)
	sock := d.SocketPath()
	checkAlive(t, sock)
	waitSessions(t, d, 0)
	fdsBefore := openFDs(t)

	type step struct {
		name string
		// setup is "" (nothing), "admin" (hello without a device) or "device"
		// (hello for vrdma0, and a PD, CQ and QP).
		setup string
		// send sends the bad request and returns the id the reply must carry
		// (0: the header was not decodable and the reply carries none).
		send     func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32)
		code     proto.Code
		msg      []string // the error message contains each
		closes   bool     // the daemon ends the connection after replying
		usableOp bool     // after the error, the connection still serves
	}
	raw := func(msg []byte) func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32) {
		return func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32) {
			c.sendRaw(msg)
			return 0, 0
		}
	}
	req := func(op proto.Op, body any, fds ...func(t *testing.T) int) func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32) {
		return func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32) {
			var b []byte
			switch v := body.(type) {
			case nil:
			case string:
				b = []byte(v)
			case func(o objects) any:
				b = mustJSON(v(o))
			default:
				b = mustJSON(v)
			}
			var fdList []int
			for _, f := range fds {
				fdList = append(fdList, f(t))
			}
			c.id++
			c.sendRaw(request(op, c.id, b), fdList...)
			return op, c.id
		}
	}
	withHeader := func(h proto.Header, body string) []byte {
		return append(proto.AppendHeader(nil, h), body...)
	}
	unsealed := func(t *testing.T) int { return memfd(t, 4096, false) }
	sealed4k := func(t *testing.T) int { return memfd(t, 4096, true) }
	regMR := func(length uint64, access abi.Access) func(o objects) any {
		return func(o objects) any {
			return proto.RegMRReq{PD: o.pd, Addr: 0x10000, Length: length, Access: uint32(access)}
		}
	}
	createQP := func(typ abi.QPType, caps proto.QPCaps) func(o objects) any {
		return func(o objects) any {
			return proto.CreateQPReq{PD: o.pd, Type: uint8(typ), SendCQ: o.cq, RecvCQ: o.cq, Caps: caps}
		}
	}
	goodCaps := proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	withCaps := func(f func(c *proto.QPCaps)) proto.QPCaps {
		c := goodCaps
		f(&c)
		return c
	}

	steps := []step{
		// Undecodable datagrams.
		{name: "bad magic", send: raw(append([]byte("Xx"), request(proto.OpHello, 1, []byte("{}"))[2:]...)),
			code: proto.CodeInvalid, msg: []string{"bad magic"}, closes: true},
		{name: "not vrdma at all", send: raw([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")),
			code: proto.CodeInvalid, msg: []string{"bad magic", "not a vrdma endpoint"}, closes: true},
		{name: "truncated header", send: raw(request(proto.OpHello, 1, nil)[:10]),
			code: proto.CodeInvalid, msg: []string{"shorter than its header"}, usableOp: true},
		{name: "empty datagram", send: raw([]byte{0}),
			code: proto.CodeInvalid, msg: []string{"shorter than its header"}, usableOp: true},
		{name: "too large", send: raw(make([]byte, proto.MaxMessage+1)),
			code: proto.CodeInvalid, msg: []string{"larger than 64 KiB"}, usableOp: true},
		{name: "unknown kind", send: raw(withHeader(proto.Header{Version: proto.Version, Kind: 9, Op: proto.OpHello}, "")),
			code: proto.CodeInvalid, msg: []string{"unknown message kind"}, usableOp: true},
		// Decodable headers: the reply carries the request's op and id.
		{name: "wrong version", send: func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32) {
			c.sendRaw(withHeader(proto.Header{Version: proto.Version + 1, Kind: proto.KindRequest, Op: proto.OpHello, ID: 77}, "{}"))
			return proto.OpHello, 77
		}, code: proto.CodeVersion, msg: []string{"version mismatch", fmt.Sprintf("peer speaks version %d", proto.Version+1), "same release"}, closes: true},
		{name: "length mismatch", send: func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32) {
			c.sendRaw(withHeader(proto.Header{Version: proto.Version, Kind: proto.KindRequest, Op: proto.OpHello, ID: 5, BodyLen: 100}, "{}"))
			return proto.OpHello, 5
		}, code: proto.CodeInvalid, msg: []string{"body length does not match"}, usableOp: true},
		{name: "reply sent to the daemon", send: func(t *testing.T, c *rawClient, o objects) (proto.Op, uint32) {
			c.sendRaw(withHeader(proto.Header{Version: proto.Version, Kind: proto.KindReply, Op: proto.OpHello, ID: 6, BodyLen: 2}, "{}"))
			return proto.OpHello, 6
		}, code: proto.CodeInvalid, msg: []string{"only requests"}, usableOp: true},

		// Requests out of order.
		{name: "request before hello", send: req(proto.OpAllocPD, nil),
			code: proto.CodeInvalid, msg: []string{"alloc_pd before hello"}, usableOp: true},
		{name: "reg_mr before hello", send: req(proto.OpRegMR, proto.RegMRReq{PD: 1, Length: 4096}, sealed4k),
			code: proto.CodeInvalid, msg: []string{"reg_mr before hello"}, usableOp: true},
		{name: "unknown op before hello", send: req(proto.Op(999), "{}"),
			code: proto.CodeInvalid, msg: []string{"before hello"}, usableOp: true},
		{name: "hello twice", setup: "device", send: req(proto.OpHello, proto.HelloReq{Device: "vrdma0"}),
			code: proto.CodeInvalid, msg: []string{"hello sent twice"}, usableOp: true},
		{name: "hello unknown device", send: req(proto.OpHello, proto.HelloReq{Device: "mlx5_0"}),
			code: proto.CodeNotFound, msg: []string{`no device "mlx5_0"`}, usableOp: true},
		{name: "hello unknown instance", send: req(proto.OpHello, proto.HelloReq{Instance: "nosuch", Device: "vrdma0"}),
			code: proto.CodeNotFound, msg: []string{`no instance "nosuch"`}, usableOp: true},
		{name: "device op without device", setup: "admin", send: req(proto.OpAllocPD, nil),
			code: proto.CodeInvalid, msg: []string{"needs an opened device"}, usableOp: true},

		// Unknown ops and malformed bodies.
		{name: "unknown op", setup: "device", send: req(proto.Op(999), "{}"),
			code: proto.CodeInvalid, msg: []string{"unknown command op(999)"}, usableOp: true},
		{name: "op zero", setup: "device", send: req(proto.Op(0), ""),
			code: proto.CodeInvalid, msg: []string{"unknown command op(0)"}, usableOp: true},
		{name: "event op", setup: "device", send: req(proto.OpEvent, "{}"),
			code: proto.CodeInvalid, msg: []string{"unknown command event"}, usableOp: true},
		{name: "malformed hello", send: req(proto.OpHello, `{"device":`),
			code: proto.CodeInvalid, msg: []string{"malformed command body"}, usableOp: true},
		{name: "hello body not an object", send: req(proto.OpHello, `[1,2,3]`),
			code: proto.CodeInvalid, msg: []string{"malformed command body"}, usableOp: true},
		{name: "empty body", setup: "device", send: req(proto.OpCreateCQ, ""),
			code: proto.CodeInvalid, msg: []string{"malformed command body"}, usableOp: true},
		{name: "wrong field type", setup: "device", send: req(proto.OpCreateCQ, `{"cqe":"many"}`),
			code: proto.CodeInvalid, msg: []string{"malformed command body", "cqe"}, usableOp: true},
		{name: "handle overflows", setup: "device", send: req(proto.OpDestroyQP, `{"handle":4294967296}`),
			code: proto.CodeInvalid, msg: []string{"malformed command body"}, usableOp: true},
		{name: "negative handle", setup: "device", send: req(proto.OpModifyQP, `{"handle":-1,"mask":1}`),
			code: proto.CodeInvalid, msg: []string{"malformed command body"}, usableOp: true},

		// reg_mr and its descriptor.
		{name: "reg_mr without a descriptor", setup: "device", send: req(proto.OpRegMR, regMR(4096, abi.AccessLocalWrite)),
			code: proto.CodeInvalid, msg: []string{"exactly one memfd, got 0"}, usableOp: true},
		{name: "reg_mr with two descriptors", setup: "device", send: req(proto.OpRegMR, regMR(4096, abi.AccessLocalWrite), sealed4k, sealed4k),
			code: proto.CodeInvalid, msg: []string{"exactly one memfd, got 2"}, usableOp: true},
		{name: "reg_mr with an unsealed memfd", setup: "device", send: req(proto.OpRegMR, regMR(4096, abi.AccessLocalWrite), unsealed),
			code: proto.CodeInvalid, msg: []string{"not a memfd sealed against shrinking and growing"}, usableOp: true},
		{name: "reg_mr with a memfd smaller than declared", setup: "device", send: req(proto.OpRegMR, regMR(8192, abi.AccessLocalWrite), sealed4k),
			code: proto.CodeInvalid, msg: []string{"holds 4096 bytes, 8192 were declared"}, usableOp: true},
		{name: "reg_mr of zero bytes", setup: "device", send: req(proto.OpRegMR, regMR(0, abi.AccessLocalWrite), sealed4k),
			code: proto.CodeInvalid, msg: []string{"length 0"}, usableOp: true},
		{name: "reg_mr of 2^64-1 bytes", setup: "device", send: req(proto.OpRegMR, regMR(^uint64(0), abi.AccessLocalWrite), sealed4k),
			code: proto.CodeInvalid, msg: []string{"length 18446744073709551615"}, usableOp: true},
		{name: "reg_mr with unknown access", setup: "device", send: req(proto.OpRegMR, regMR(4096, 0x80), sealed4k),
			code: proto.CodeInvalid, msg: []string{"unknown access flags"}, usableOp: true},
		{name: "reg_mr remote write without local write", setup: "device", send: req(proto.OpRegMR, regMR(4096, abi.AccessRemoteWrite), sealed4k),
			code: proto.CodeInvalid, msg: []string{"need LOCAL_WRITE"}, usableOp: true},
		{name: "reg_mr address wraps", setup: "device", send: req(proto.OpRegMR, func(o objects) any {
			return proto.RegMRReq{PD: o.pd, Addr: ^uint64(0) - 10, Length: 4096, Access: uint32(abi.AccessLocalWrite)}
		}, sealed4k), code: proto.CodeInvalid, msg: []string{"wraps around"}, usableOp: true},
		{name: "reg_mr offset + length wraps", setup: "device", send: req(proto.OpRegMR, func(o objects) any {
			return proto.RegMRReq{PD: o.pd, Addr: 0x10000, Length: 4096, Offset: ^uint64(0) - 10, Access: uint32(abi.AccessLocalWrite)}
		}, sealed4k), code: proto.CodeInvalid, msg: []string{"offset 18446744073709551605 + length 4096 overflows"}, usableOp: true},
		{name: "reg_mr with a memfd smaller than offset + length", setup: "device", send: req(proto.OpRegMR, func(o objects) any {
			return proto.RegMRReq{PD: o.pd, Addr: 0x10064, Length: 4096, Offset: 100, Access: uint32(abi.AccessLocalWrite)}
		}, sealed4k), code: proto.CodeInvalid, msg: []string{"holds 4096 bytes, 4196 were declared (offset 100 + length 4096)"}, usableOp: true},
		{name: "reg_mr at the memfd's end", setup: "device", send: req(proto.OpRegMR, func(o objects) any {
			return proto.RegMRReq{PD: o.pd, Addr: 0x10000, Length: 1, Offset: 4096, Access: uint32(abi.AccessLocalWrite)}
		}, sealed4k), code: proto.CodeInvalid, msg: []string{"holds 4096 bytes, 4097 were declared"}, usableOp: true},
		{name: "reg_mr offset 2^63", setup: "device", send: req(proto.OpRegMR, func(o objects) any {
			return proto.RegMRReq{PD: o.pd, Addr: 0x10000, Length: 4096, Offset: 1 << 63, Access: uint32(abi.AccessLocalWrite)}
		}, sealed4k), code: proto.CodeInvalid, msg: []string{"holds 4096 bytes"}, usableOp: true},
		{name: "reg_mr offset past the largest region", setup: "device", send: req(proto.OpRegMR, func(o objects) any {
			return proto.RegMRReq{PD: o.pd, Addr: 0x10000, Length: 4096, Offset: 1 << 40, Access: uint32(abi.AccessLocalWrite)}
		}, sealed4k), code: proto.CodeInvalid, msg: []string{"holds 4096 bytes"}, usableOp: true},
		{name: "reg_mr unknown PD", setup: "device", send: req(proto.OpRegMR, proto.RegMRReq{PD: 999, Length: 4096}, sealed4k),
			code: proto.CodeNotFound, msg: []string{"no protection domain with handle 999"}, usableOp: true},
		{name: "descriptor on a command that takes none", setup: "device", send: req(proto.OpQueryDevice, nil, sealed4k),
			code: proto.CodeOK, usableOp: true},

		// Absurd sizes.
		{name: "create_cq of 0", setup: "device", send: req(proto.OpCreateCQ, proto.CreateCQReq{CQE: 0}),
			code: proto.CodeInvalid, msg: []string{"cqe 0"}, usableOp: true},
		{name: "create_cq of 2^62", setup: "device", send: req(proto.OpCreateCQ, proto.CreateCQReq{CQE: 1 << 62}),
			code: proto.CodeInvalid, msg: []string{"cqe 4611686018427387904"}, usableOp: true},
		{name: "create_qp with 2^30 send WRs", setup: "device", send: req(proto.OpCreateQP, createQP(abi.QPTypeRC, withCaps(func(c *proto.QPCaps) { c.MaxSendWR = 1 << 30 }))),
			code: proto.CodeInvalid, msg: []string{"max_send_wr 1073741824"}, usableOp: true},
		{name: "create_qp with negative send WRs", setup: "device", send: req(proto.OpCreateQP, createQP(abi.QPTypeRC, withCaps(func(c *proto.QPCaps) { c.MaxSendWR = -1 }))),
			code: proto.CodeInvalid, msg: []string{"max_send_wr -1"}, usableOp: true},
		{name: "create_qp with negative recv WRs", setup: "device", send: req(proto.OpCreateQP, createQP(abi.QPTypeRC, withCaps(func(c *proto.QPCaps) { c.MaxRecvWR = -1 }))),
			code: proto.CodeInvalid, msg: []string{"max_recv_wr -1"}, usableOp: true},
		{name: "create_qp with 1000 SGEs", setup: "device", send: req(proto.OpCreateQP, createQP(abi.QPTypeRC, withCaps(func(c *proto.QPCaps) { c.MaxSendSGE = 1000 }))),
			code: proto.CodeInvalid, msg: []string{"max_send_sge 1000"}, usableOp: true},
		{name: "create_qp with negative SGEs", setup: "device", send: req(proto.OpCreateQP, createQP(abi.QPTypeRC, withCaps(func(c *proto.QPCaps) { c.MaxRecvSGE = -5 }))),
			code: proto.CodeInvalid, msg: []string{"max_recv_sge -5"}, usableOp: true},
		{name: "create_qp with 1 MiB inline", setup: "device", send: req(proto.OpCreateQP, createQP(abi.QPTypeRC, withCaps(func(c *proto.QPCaps) { c.MaxInlineData = 1 << 20 }))),
			code: proto.CodeInvalid, msg: []string{"max_inline_data 1048576"}, usableOp: true},
		{name: "create_qp of type 8 (raw packet)", setup: "device", send: req(proto.OpCreateQP, createQP(8, goodCaps)),
			code: proto.CodeInvalid, msg: []string{"QP type 8"}, usableOp: true},
		{name: "create_qp XRC_RECV without an XRC domain", setup: "device", send: req(proto.OpCreateQP, createQP(abi.QPTypeXRCRecv, goodCaps)),
			code: proto.CodeNotFound, msg: []string{"no XRC domain with handle 0"}, usableOp: true},
		{name: "close_xrcd of no domain", setup: "device", send: req(proto.OpCloseXRCD, func(objects) any { return proto.HandleReq{Handle: 777} }),
			code: proto.CodeNotFound, msg: []string{"no XRC domain with handle 777"}, usableOp: true},
		{name: "create_qp with unknown CQ", setup: "device", send: req(proto.OpCreateQP, func(o objects) any {
			return proto.CreateQPReq{PD: o.pd, Type: uint8(abi.QPTypeRC), SendCQ: o.cq, RecvCQ: 12345, Caps: goodCaps}
		}), code: proto.CodeNotFound, msg: []string{"no receive completion queue with handle 12345"}, usableOp: true},
		{name: "create_srq with 2^40 WRs", setup: "device", send: req(proto.OpCreateSRQ, func(o objects) any {
			return proto.CreateSRQReq{PD: o.pd, MaxWR: 1 << 40, MaxSGE: 1}
		}), code: proto.CodeInvalid, msg: []string{"max_wr 1099511627776"}, usableOp: true},
		{name: "create_ah with a bad sgid index", setup: "device", send: req(proto.OpCreateAH, func(o objects) any {
			return proto.CreateAHReq{PD: o.pd, AV: qpstate.AddressVector{SGIDIndex: 200}}
		}), code: proto.CodeInvalid, msg: []string{"sgid_index 200"}, usableOp: true},
		{name: "query_port 2", setup: "device", send: req(proto.OpQueryPort, proto.QueryPortReq{Port: 2}),
			code: proto.CodeInvalid, msg: []string{"port 2 does not exist"}, usableOp: true},

		// Unknown handles and bad transitions.
		{name: "modify_qp with an unknown handle", setup: "device", send: req(proto.OpModifyQP, proto.ModifyQPReq{Handle: 4242, Mask: uint32(qpstate.MaskState)}),
			code: proto.CodeNotFound, msg: []string{"no queue pair with handle 4242"}, usableOp: true},
		{name: "modify_qp to an impossible state", setup: "device", send: req(proto.OpModifyQP, func(o objects) any {
			return proto.ModifyQPReq{Handle: o.qp, Mask: uint32(qpstate.MaskState), Attr: qpstate.Attr{State: abi.QPStateRTS}}
		}), code: proto.CodeState, msg: []string{"RESET->RTS", "no such transition"}, usableOp: true},
		{name: "modify_qp missing attributes", setup: "device", send: req(proto.OpModifyQP, func(o objects) any {
			return proto.ModifyQPReq{Handle: o.qp, Mask: uint32(qpstate.MaskState), Attr: qpstate.Attr{State: abi.QPStateInit}}
		}), code: proto.CodeState, msg: []string{"missing required attributes", "PORT"}, usableOp: true},
		{name: "modify_qp to state 200", setup: "device", send: req(proto.OpModifyQP, func(o objects) any {
			return proto.ModifyQPReq{Handle: o.qp, Mask: uint32(qpstate.MaskState), Attr: qpstate.Attr{State: 200}}
		}), code: proto.CodeState, msg: []string{"unknown state"}, usableOp: true},
		{name: "modify_qp port 9", setup: "device", send: req(proto.OpModifyQP, func(o objects) any {
			return proto.ModifyQPReq{Handle: o.qp, Mask: uint32(qpstate.MaskState | qpstate.MaskPort | qpstate.MaskPKeyIndex | qpstate.MaskAccessFlags),
				Attr: qpstate.Attr{State: abi.QPStateInit, PortNum: 9}}
		}), code: proto.CodeAttr, msg: []string{"attribute PORT", "port 9 does not exist"}, usableOp: true},
		{name: "query_qp unknown handle", setup: "device", send: req(proto.OpQueryQP, proto.HandleReq{Handle: 0}),
			code: proto.CodeNotFound, msg: []string{"no queue pair with handle 0"}, usableOp: true},
		{name: "destroy_cq in use", setup: "device", send: req(proto.OpDestroyCQ, func(o objects) any { return proto.HandleReq{Handle: o.cq} }),
			code: proto.CodeBusy, msg: []string{"still used by queue pairs"}, usableOp: true},
		{name: "dealloc_pd in use", setup: "device", send: req(proto.OpDeallocPD, func(o objects) any { return proto.HandleReq{Handle: o.pd} }),
			code: proto.CodeBusy, msg: []string{"still has queue pairs"}, usableOp: true},
		{name: "dereg_mr unknown", setup: "device", send: req(proto.OpDeregMR, proto.HandleReq{Handle: 77}),
			code: proto.CodeNotFound, msg: []string{"no memory region with handle 77"}, usableOp: true},

		// Admin commands.
		{name: "instance name with a path", setup: "admin", send: req(proto.OpCreateInstance, proto.InstanceSpec{Name: "../../etc", Adapters: 1}),
			code: proto.CodeInvalid, msg: []string{`instance name "../../etc"`}, usableOp: true},
		{name: "instance with 11 adapters", setup: "admin", send: req(proto.OpCreateInstance, proto.InstanceSpec{Name: "big", Adapters: 11}),
			code: proto.CodeLimit, msg: []string{"asks for 11 adapters"}, usableOp: true},
		{name: "delete the default instance", setup: "admin", send: req(proto.OpDeleteInstance, proto.InstanceSpec{Name: "default"}),
			code: proto.CodeInvalid, msg: []string{"default instance cannot be deleted"}, usableOp: true},
		{name: "delete an unknown instance", setup: "admin", send: req(proto.OpDeleteInstance, proto.InstanceSpec{Name: "nosuch"}),
			code: proto.CodeNotFound, msg: []string{`no instance "nosuch"`}, usableOp: true},
	}

	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c := dial(t, sock)
			defer c.Close()
			var o objects
			switch st.setup {
			case "admin":
				c.ok(proto.OpHello, proto.HelloReq{Client: "daemon-test"}, nil)
			case "device":
				o = prepare(c)
			}
			op, id := st.send(t, c, o)
			r := c.recv()
			proto.CloseFDs(r.fds)
			if r.err != nil {
				t.Fatalf("no reply: %v", r.err)
			}
			if r.h.Kind != proto.KindReply || r.h.Version != proto.Version {
				t.Fatalf("reply header %+v", r.h)
			}
			if id != 0 && (r.h.ID != id || r.h.Op != op) {
				t.Errorf("reply op=%v id=%d, want op=%v id=%d", r.h.Op, r.h.ID, op, id)
			}
			if r.h.Code != st.code {
				t.Errorf("code %v (%q), want %v", r.h.Code, r.msg(), st.code)
			}
			msg := r.msg()
			if st.code != proto.CodeOK && msg == "" {
				t.Errorf("error reply without a message: %s", r.body)
			}
			for _, s := range st.msg {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not say %q", msg, s)
				}
			}
			if st.closes {
				if !closedByPeer(c) {
					t.Error("the daemon kept a connection it cannot talk to")
				}
			}
			if st.usableOp {
				// The connection still serves (hello if it was not said yet).
				if st.setup == "" {
					c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
				}
				c.ok(proto.OpStats, nil, nil)
			}
			checkAlive(t, sock)
		})
	}

	// Everything the bad requests carried or created is gone once their
	// connections are: no descriptor leaked into the daemon.
	// (Fewer is no leak: connections of earlier tests in this process may
	// finish closing meanwhile.)
	waitSessions(t, d, 0)
	if got := openFDs(t); got > fdsBefore {
		t.Errorf("%d descriptors open after the bad requests, %d before", got, fdsBefore)
	}
}

// TestVersionGapReplyIsDecodable checks that the reply to a request of a
// different version names the request and is itself well formed.
func TestVersionGapReplyIsDecodable(t *testing.T) {
	sock := daemontest.Start(t)
	c := dial(t, sock)
	msg := request(proto.OpHello, 3, []byte("{}"))
	msg[2] = 0
	c.sendRaw(msg)
	r := c.recv()
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.h.Code != proto.CodeVersion || r.h.ID != 3 || r.h.Op != proto.OpHello {
		t.Fatalf("reply %+v %q", r.h, r.msg())
	}
	if binary.LittleEndian.Uint32(msg[12:]) != 2 {
		t.Fatal("bad test message")
	}
	checkAlive(t, sock)
}

// TestDaemonRefusesReplyParts: a client sending the daemon "parts of a
// reply" (the KindMore bit), each with four descriptors, and never the
// last, gets a CodeInvalid refusal for each at once; the daemon holds
// none of the descriptors, and the connection still serves.
func TestDaemonRefusesReplyParts(t *testing.T) {
	d := daemontest.StartDaemon(t)
	sock := d.SocketPath()
	c := dial(t, sock)
	_ = c.conn.Raw().SetReadDeadline(time.Now().Add(30 * time.Second)) // no refusal fails the test, not hangs it
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "parts-test"}, nil)
	fd := memfd(t, 4096, false)
	fdsBefore := openFDs(t)
	const parts = 64
	part := append(proto.AppendHeader(nil, proto.Header{Version: proto.Version, Kind: proto.KindReply, More: true,
		Op: proto.OpListInstances, ID: 77, BodyLen: 1000}), make([]byte, 1000)...)
	for range parts {
		c.sendRaw(part, fd, fd, fd, fd)
	}
	for i := range parts {
		r := c.recv()
		if r.err != nil {
			t.Fatalf("part %d: no refusal: %v", i, r.err)
		}
		proto.CloseFDs(r.fds)
		if r.h.Code != proto.CodeInvalid || r.h.ID != 77 || !strings.Contains(r.msg(), "only the daemon sends replies") {
			t.Fatalf("part %d: reply %+v %q, want a CodeInvalid refusal", i, r.h, r.msg())
		}
	}
	if got := openFDs(t); got > fdsBefore {
		t.Errorf("%d descriptors open after %d parts of 4, %d before", got, parts, fdsBefore)
	}
	c.ok(proto.OpAllocPD, nil, nil)
}

// TestQueuesStoppedBeforeSocketCloses: when the daemon ends a session (here
// by closing, as on SIGTERM), the session's QPs are destroyed before its
// socket closes: the client's library, seeing the socket close, must not
// find the daemon still running its queues.
func TestQueuesStoppedBeforeSocketCloses(t *testing.T) {
	d := daemontest.StartDaemon(t)
	c := dial(t, d.SocketPath())
	_ = c.conn.Raw().SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails the test
	var hello proto.HelloResp
	c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0", Client: "teardown-test"}, &hello)
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	var cq proto.CreateCQResp
	c.ok(proto.OpCreateCQ, proto.CreateCQReq{CQE: 16}, &cq)
	var qp proto.CreateQPResp
	c.ok(proto.OpCreateQP, proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeRC), SendCQ: cq.Handle, RecvCQ: cq.Handle,
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}, &qp)
	gid := hello.Device.GIDs[0]
	if !d.QPAlive(gid, qp.QPN) {
		t.Fatalf("QP %d not found on the host", qp.QPN)
	}
	// While the session's objects cannot be destroyed (their lock held),
	// the socket must stay open. (The wait below only gives a wrong order
	// the time to show: a right one never fails it.)
	release := d.HoldSessions()
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	_ = c.conn.Raw().SetReadDeadline(time.Now().Add(2 * time.Second))
	r := c.recv()
	proto.CloseFDs(r.fds)
	var te interface{ Timeout() bool }
	if !errors.As(r.err, &te) || !te.Timeout() {
		release()
		t.Fatalf("the socket closed before the session's QPs were destroyed: %+v %v", r.h, r.err)
	}
	release()
	_ = c.conn.Raw().SetReadDeadline(time.Now().Add(30 * time.Second))
	if !closedByPeer(c) {
		t.Fatal("the daemon's close did not close the connection")
	}
	if d.QPAlive(gid, qp.QPN) {
		t.Error("the socket closed while the session's QP was still on the host")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
