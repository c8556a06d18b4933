package vrdma_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// TestConformanceOpcodes runs every data-moving opcode of RC and UC between
// two instances and checks the bytes in memory and every completion field.
func TestConformanceOpcodes(t *testing.T) { inEveryMode(t, conformanceOpcodes) }

func conformanceOpcodes(t *testing.T, e *confEnv) {
	const n = 1000
	cases := []struct {
		name    string
		op      ibv.Opcode
		imm     uint32
		sendOp  ibv.WCOpcode
		recvOp  ibv.WCOpcode // with consumes: the responder's completion
		consume bool         // the responder consumes a receive request
		read    bool         // data flows from the responder to the requester
		rcOnly  bool
	}{
		{name: "SEND", op: ibv.WRSend, sendOp: ibv.WCSend, recvOp: ibv.WCRecv, consume: true},
		{name: "SEND_WITH_IMM", op: ibv.WRSendImm, imm: 0xdeadbeef, sendOp: ibv.WCSend, recvOp: ibv.WCRecv, consume: true},
		{name: "RDMA_WRITE", op: ibv.WRRDMAWrite, sendOp: ibv.WCRDMAWrite},
		{name: "RDMA_WRITE_WITH_IMM", op: ibv.WRRDMAWriteImm, imm: 0x01020304, sendOp: ibv.WCRDMAWrite, recvOp: ibv.WCRecvRDMAImm, consume: true},
		{name: "RDMA_READ", op: ibv.WRRDMARead, sendOp: ibv.WCRDMARead, read: true, rcOnly: true},
	}
	for _, typ := range []ibv.QPType{ibv.RC, ibv.UC} {
		for _, c := range cases {
			if c.rcOnly && typ != ibv.RC {
				continue
			}
			t.Run(typ.String()+"/"+c.name, func(t *testing.T) {
				a, b := e.pair(t, pairSpec{typ: typ})
				src := fill(a.mr.Bytes()[srcOff:srcOff+n], 1)
				remote := b.mr.Bytes()[rdmaOff : rdmaOff+n]
				if c.read {
					src = fill(remote, 2)
				}
				if c.consume {
					postRecv(t, b.qp, recvWR(100, b.mr.SGE(recvOff, 2*n)))
				}
				wr := vrdma.SendWR{ID: 1, Opcode: c.op, Flags: ibv.SendSignaled, Imm: c.imm,
					SGL: []ibv.SGE{a.mr.SGE(srcOff, n)}, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()}
				if c.read {
					wr.SGL = []ibv.SGE{a.mr.SGE(dstOff, n)}
				}
				post(t, a.qp, wr)
				checkWC(t, pollOne(t, a.scq), sendWC(a, 1, c.sendOp, n))
				if c.consume {
					want := recvWC(b, 100, n, a)
					want.Opcode = c.recvOp
					if c.imm != 0 {
						want = withImm(want, c.imm)
					}
					checkWC(t, pollOne(t, b.rcq), want)
				}
				expectEmpty(t, a.scq, a.rcq, b.scq, b.rcq)

				mb := b.mr.Bytes()
				switch {
				case c.read:
					expectBytes(t, "read destination", a.mr.Bytes()[dstOff:dstOff+n], src)
					expectZero(t, "past the read destination", a.mr.Bytes()[dstOff+n:recvOff])
				case c.op == ibv.WRSend || c.op == ibv.WRSendImm:
					expectBytes(t, "receive buffer", mb[recvOff:recvOff+n], src)
					expectZero(t, "past the message", mb[recvOff+n:])
				default:
					arrived(t, typ, remote, src)
					expectBytes(t, "write target", remote, src)
					expectZero(t, "before the write target", mb[:rdmaOff])
					expectZero(t, "past the write target", mb[rdmaOff+n:])
				}
			})
		}
	}
}

// TestConformanceAtomics checks both RC atomics: the remote word after the
// operation and the original value returned into the local 8-byte SGE.
func TestConformanceAtomics(t *testing.T) { inEveryMode(t, conformanceAtomics) }

func conformanceAtomics(t *testing.T, e *confEnv) {
	cases := []struct {
		name       string
		op         ibv.Opcode
		init       uint64
		compareAdd uint64
		swap       uint64
		final      uint64
		wcOp       ibv.WCOpcode
	}{
		{"CMP_AND_SWP/equal", ibv.WRAtomicCmpAndSwp, 0x1122334455667788, 0x1122334455667788, 0xa5a5a5a5deadbeef, 0xa5a5a5a5deadbeef, ibv.WCCompSwap},
		{"CMP_AND_SWP/different", ibv.WRAtomicCmpAndSwp, 0x1122334455667788, 0x1122334455667789, 0xa5a5a5a5deadbeef, 0x1122334455667788, ibv.WCCompSwap},
		{"CMP_AND_SWP/zero", ibv.WRAtomicCmpAndSwp, 0, 0, 1, 1, ibv.WCCompSwap},
		{"FETCH_AND_ADD", ibv.WRAtomicFetchAndAdd, 0x00000000ffffffff, 1, 0, 0x0000000100000000, ibv.WCFetchAdd},
		{"FETCH_AND_ADD/wraps", ibv.WRAtomicFetchAndAdd, 0xfffffffffffffffe, 3, 0, 1, ibv.WCFetchAdd},
		{"FETCH_AND_ADD/zero", ibv.WRAtomicFetchAndAdd, 42, 0, 0, 42, ibv.WCFetchAdd},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: ibv.RC})
			const off = rdmaOff + 64
			putWord(b.mr.Bytes()[off:], c.init)
			local := a.mr.Bytes()[dstOff : dstOff+16]
			fill(local, 0xee)
			post(t, a.qp, vrdma.SendWR{ID: 9, Opcode: c.op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(dstOff, 8)},
				RemoteAddr: b.mr.Addr() + off, RKey: b.mr.RKey(), CompareAdd: c.compareAdd, Swap: c.swap})
			checkWC(t, pollOne(t, a.scq), sendWC(a, 9, c.wcOp, 8))
			expectEmpty(t, a.scq, a.rcq, b.scq, b.rcq)
			if got := word(local); got != c.init {
				t.Fatalf("original value returned: %#x, want %#x", got, c.init)
			}
			expectBytes(t, "past the local SGE", local[8:], pattern(16, 0xee)[8:])
			if got := word(b.mr.Bytes()[off:]); got != c.final {
				t.Fatalf("remote word: %#x, want %#x", got, c.final)
			}
			expectZero(t, "around the remote word", append(b.mr.Bytes()[:off:off], b.mr.Bytes()[off+8:]...))
		})
	}
	t.Run("ATOMIC_WRITE", func(t *testing.T) {
		// The request's 8 bytes land at the remote address as one store,
		// the completion is ATOMIC_WRITE of 8 bytes, nothing else changes
		// and no local memory is touched.
		a, b := e.pair(t, pairSpec{typ: ibv.RC})
		const off = rdmaOff + 64
		putWord(b.mr.Bytes()[off:], 0xffffffffffffffff)
		before := append([]byte(nil), a.mr.Bytes()...)
		for i, v := range []uint64{0x1122334455667788, 0, 0xa5a5a5a5deadbeef} {
			post(t, a.qp, vrdma.SendWR{ID: uint64(i), Opcode: ibv.WRAtomicWrite, Flags: ibv.SendSignaled,
				RemoteAddr: b.mr.Addr() + off, RKey: b.mr.RKey(), CompareAdd: v})
			checkWC(t, pollOne(t, a.scq), sendWC(a, uint64(i), ibv.WCAtomicWrite, 8))
			if got := word(b.mr.Bytes()[off:]); got != v {
				t.Fatalf("remote word after ATOMIC_WRITE %d: %#x, want %#x", i, got, v)
			}
		}
		expectEmpty(t, a.scq, a.rcq, b.scq, b.rcq)
		expectZero(t, "around the remote word", append(b.mr.Bytes()[:off:off], b.mr.Bytes()[off+8:]...))
		expectBytes(t, "requester memory", a.mr.Bytes(), before)
	})
	t.Run("sequence", func(t *testing.T) {
		// Successive atomics on one word see each other's results.
		a, b := e.pair(t, pairSpec{typ: ibv.RC})
		const k = 16
		for i := 0; i < k; i++ {
			post(t, a.qp, vrdma.SendWR{ID: uint64(i), Opcode: ibv.WRAtomicFetchAndAdd, Flags: ibv.SendSignaled,
				SGL: []ibv.SGE{a.mr.SGE(dstOff+8*i, 8)}, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey(), CompareAdd: uint64(i + 1)})
		}
		for i, wc := range pollN(t, a.scq, k) {
			checkWC(t, wc, sendWC(a, uint64(i), ibv.WCFetchAdd, 8))
			if got, want := word(a.mr.Bytes()[dstOff+8*i:]), uint64(i*(i+1)/2); got != want {
				t.Fatalf("FAA %d returned %d, want %d", i, got, want)
			}
		}
		if got := word(b.mr.Bytes()[rdmaOff:]); got != k*(k+1)/2 {
			t.Fatalf("remote word %d, want %d", got, k*(k+1)/2)
		}
	})
}

// TestConformanceOpcodeRefused checks the opcodes a QP type does not carry
// are refused when posted, with nothing executed.
func TestConformanceOpcodeRefused(t *testing.T) { inEveryMode(t, conformanceOpcodeRefused) }

func conformanceOpcodeRefused(t *testing.T, e *confEnv) {
	cases := []struct {
		typ ibv.QPType
		op  ibv.Opcode
	}{
		{ibv.UC, ibv.WRRDMARead},
		{ibv.UC, ibv.WRAtomicCmpAndSwp},
		{ibv.UC, ibv.WRAtomicFetchAndAdd},
		{ibv.UD, ibv.WRRDMAWrite},
		{ibv.UD, ibv.WRRDMAWriteImm},
		{ibv.UD, ibv.WRRDMARead},
		{ibv.UD, ibv.WRAtomicCmpAndSwp},
		{ibv.UD, ibv.WRAtomicFetchAndAdd},
	}
	for _, c := range cases {
		t.Run(c.typ.String()+"/"+c.op.String(), func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: c.typ})
			putWord(b.mr.Bytes()[rdmaOff:], 5)
			ok := vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}}
			bad := vrdma.SendWR{ID: 2, Opcode: c.op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(dstOff, 8)},
				RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey(), CompareAdd: 5, Swap: 6}
			if c.typ == ibv.UD {
				ok, bad = a.sendTo(ok, b), a.sendTo(bad, b)
			}
			err := a.qp.PostSend([]vrdma.SendWR{ok, bad, ok})
			expectPostErr(t, err, 1, vrdma.ErrInvalidArgument)
			if errors.Is(err, vrdma.ErrInvalidState) {
				t.Fatalf("%v also matches ErrInvalidState", err)
			}
			// The request before the refused one was posted and runs; the
			// QP is unaffected.
			checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, 8))
			expectEmpty(t, a.scq)
			if got := word(b.mr.Bytes()[rdmaOff:]); got != 5 {
				t.Fatalf("remote word changed to %d", got)
			}
			expectState(t, a.qp, ibv.QPSRTS)
		})
	}
}

// TestConformanceUD sends datagrams through address handles: GRH in front
// of the payload, byte_len counting it, the sender's QPN, Q_Key filtering
// and the MTU limit.
func TestConformanceUD(t *testing.T) { inEveryMode(t, conformanceUD) }

func conformanceUD(t *testing.T, e *confEnv) {
	port, err := e.a.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	mtu := port.ActiveMTU.Bytes() // a datagram's largest payload
	cases := []struct {
		name   string
		op     ibv.Opcode
		imm    uint32
		n      int
		qkey   uint32                // the Q_Key in the work request
		optsA  *vrdma.ConnectOptions // the sender's attributes
		status ibv.Status            // of the send
		drop   bool                  // no receive completion
		inline bool
	}{
		{name: "SEND", op: ibv.WRSend, n: 100, qkey: confQKey},
		{name: "SEND/empty", op: ibv.WRSend, n: 0, qkey: confQKey},
		{name: "SEND/MTU", op: ibv.WRSend, n: mtu, qkey: confQKey},
		{name: "SEND_WITH_IMM", op: ibv.WRSendImm, imm: 0xcafef00d, n: 333, qkey: confQKey},
		{name: "SEND/inline", op: ibv.WRSend, n: 50, qkey: confQKey, inline: true},
		{name: "SEND_WITH_IMM/inline", op: ibv.WRSendImm, imm: 7, n: 50, qkey: confQKey, inline: true},
		{name: "wrong Q_Key", op: ibv.WRSend, n: 100, qkey: 0x22222222, drop: true},
		{name: "wrong Q_Key/imm", op: ibv.WRSendImm, imm: 1, n: 100, qkey: confQKey + 1, drop: true},
		{name: "QP Q_Key", op: ibv.WRSend, n: 100, qkey: 0x80000000},
		{name: "QP Q_Key/wrong", op: ibv.WRSend, n: 100, qkey: 0x80000000, optsA: &vrdma.ConnectOptions{QKey: 0x12345678}, drop: true},
		{name: "above MTU", op: ibv.WRSend, n: mtu + 1, qkey: confQKey, status: ibv.WCLocLenErr, drop: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: ibv.UD, optsA: c.optsA})
			src := fill(a.mr.Bytes()[srcOff:srcOff+c.n], 3)
			postRecv(t, b.qp, recvWR(50, b.mr.SGE(recvOff, grhLen+4096)), recvWR(51, b.mr.SGE(recvOff+8192-grhLen, grhLen+8)))
			wr := a.sendTo(vrdma.SendWR{ID: 1, Opcode: c.op, Flags: ibv.SendSignaled, Imm: c.imm, SGL: []ibv.SGE{a.mr.SGE(srcOff, c.n)}}, b)
			if c.inline {
				wr.SGL, wr.Inline = nil, append([]byte(nil), src...)
			}
			wr.RemoteQKey = c.qkey
			post(t, a.qp, wr)
			if c.status != ibv.WCSuccess {
				checkWC(t, pollOne(t, a.scq), errWC(a, 1, c.status))
			} else {
				checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, c.n))
			}
			// The sender's completion comes after the datagram was delivered
			// or dropped: the receive CQ is final now.
			mb := b.mr.Bytes()
			if c.drop {
				expectEmpty(t, b.rcq)
				expectZero(t, "receive buffer of a dropped datagram", mb)
				if c.status != ibv.WCSuccess {
					return
				}
				// The receive request is still there for the next datagram.
				post(t, a.qp, a.sendTo(vrdma.SendWR{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 8)}}, b))
				checkWC(t, pollOne(t, a.scq), sendWC(a, 2, ibv.WCSend, 8))
				w := recvWC(b, 50, grhLen+8, a)
				w.Flags = ibv.WCWithGRH
				checkWC(t, pollOne(t, b.rcq), w)
				return
			}
			want := recvWC(b, 50, grhLen+c.n, a)
			want.Flags = ibv.WCWithGRH
			if c.op == ibv.WRSendImm {
				want = withImm(want, c.imm)
			}
			checkWC(t, pollOne(t, b.rcq), want)
			expectEmpty(t, a.scq, a.rcq, b.scq, b.rcq)
			checkGRH(t, mb[recvOff:recvOff+grhLen], a.gid, b.gid)
			expectBytes(t, "payload", mb[recvOff+grhLen:recvOff+grhLen+c.n], src)
			expectZero(t, "past the payload", mb[recvOff+grhLen+c.n:])
		})
	}
	t.Run("source QPN", func(t *testing.T) {
		// Two senders into one receiver: each receive names its sender.
		a, b := e.pair(t, pairSpec{typ: ibv.UD})
		c := e.newSide(t, e.a, qpSpec{typ: ibv.UD})
		if err := c.qp.Connect(vrdma.Endpoint{}, nil); err != nil {
			t.Fatal(err)
		}
		c.ah = newAH(t, c, b.gid)
		postRecv(t, b.qp, recvWR(1, b.mr.SGE(recvOff, 100)), recvWR(2, b.mr.SGE(recvOff+100, 100)))
		post(t, a.qp, a.sendTo(vrdma.SendWR{ID: 10, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 10)}}, b))
		checkWC(t, pollOne(t, a.scq), sendWC(a, 10, ibv.WCSend, 10))
		post(t, c.qp, c.sendTo(vrdma.SendWR{ID: 20, Opcode: ibv.WRSendImm, Imm: 3, Flags: ibv.SendSignaled, SGL: []ibv.SGE{c.mr.SGE(srcOff, 20)}}, b))
		checkWC(t, pollOne(t, c.scq), sendWC(c, 20, ibv.WCSend, 20))
		wcs := pollN(t, b.rcq, 2)
		w1, w2 := recvWC(b, 1, grhLen+10, a), withImm(recvWC(b, 2, grhLen+20, c), 3)
		w1.Flags |= ibv.WCWithGRH
		w2.Flags |= ibv.WCWithGRH
		checkWC(t, wcs[0], w1)
		checkWC(t, wcs[1], w2)
	})
}

// checkGRH checks the 40-byte GRH area of a UD receive from src to dst: an
// IPv6 header (next header 0x1b on the memcpy path, UDP on the wire), or,
// between IPv4-mapped GIDs, 20 zero bytes and the IPv4 header, as rxe
// writes them.
func checkGRH(t *testing.T, grh []byte, src, dst vrdma.GID) {
	t.Helper()
	v4 := func(g vrdma.GID) bool { return bytes.Equal(g[:12], []byte{10: 0xff, 11: 0xff}) }
	if v4(src) && v4(dst) {
		expectZero(t, "GRH area before the IPv4 header", grh[:20])
		if grh[20]>>4 != 4 || grh[29] != 17 {
			t.Fatalf("GRH area holds % x: want an IPv4 header of a UDP packet at byte 20", grh[20:])
		}
		expectBytes(t, "IPv4 source address", grh[32:36], src[12:])
		expectBytes(t, "IPv4 destination address", grh[36:40], dst[12:])
		return
	}
	if grh[0]>>4 != 6 || grh[6] != 0x1b && grh[6] != 17 {
		t.Fatalf("GRH starts % x: want IP version 6 and next header 0x1b (or UDP, from the wire)", grh[:8])
	}
	expectBytes(t, "GRH source GID", grh[8:24], src[:])
	expectBytes(t, "GRH destination GID", grh[24:40], dst[:])
}
