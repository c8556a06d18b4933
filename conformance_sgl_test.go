package vrdma_test

import (
	"bytes"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// span is len bytes at off of a side's region.
type span struct{ off, len int }

func sges(mr *vrdma.MR, spans []span) []ibv.SGE {
	out := make([]ibv.SGE, len(spans))
	for i, s := range spans {
		out[i] = mr.SGE(s.off, s.len)
	}
	return out
}

func gather(mr *vrdma.MR, spans []span) []byte {
	var out []byte
	for _, s := range spans {
		out = append(out, mr.Bytes()[s.off:s.off+s.len]...)
	}
	return out
}

// TestConformanceScatterGather moves data between four local and four
// remote scatter/gather elements of uneven sizes.
func TestConformanceScatterGather(t *testing.T) { inEveryMode(t, conformanceScatterGather) }

func conformanceScatterGather(t *testing.T, e *confEnv) {
	// 3121 bytes in four pieces, out of order in the region.
	local := []span{{srcOff + 5000, 1}, {srcOff + 100, 100}, {srcOff + 1000, 3003}, {srcOff + 7000, 17}}
	// Receive buffers: 3237 bytes in four pieces, the first shorter than a GRH.
	recv := []span{{recvOff + 6000, 30}, {recvOff + 100, 7}, {recvOff + 1000, 2600}, {recvOff + 4000, 600}}
	readDst := []span{{dstOff + 4000, 13}, {dstOff, 2000}, {dstOff + 2500, 1100}, {dstOff + 7000, 8}}
	const total = 1 + 100 + 3003 + 17
	cases := []struct {
		typ ibv.QPType
		op  ibv.Opcode
	}{
		{ibv.RC, ibv.WRSend},
		{ibv.RC, ibv.WRSendImm},
		{ibv.RC, ibv.WRRDMAWrite},
		{ibv.RC, ibv.WRRDMAWriteImm},
		{ibv.RC, ibv.WRRDMARead},
		{ibv.UC, ibv.WRSend},
		{ibv.UC, ibv.WRRDMAWrite},
		{ibv.UD, ibv.WRSend},
	}
	port, err := e.a.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.typ.String()+"/"+c.op.String(), func(t *testing.T) {
			if c.typ == ibv.UD && port.ActiveMTU.Bytes() < total {
				t.Skipf("a datagram of %d bytes does not fit the port's MTU of %d", total, port.ActiveMTU.Bytes())
			}
			a, b := e.pair(t, pairSpec{typ: c.typ})
			fill(a.mr.Bytes()[:dstOff], 11)
			fill(b.mr.Bytes()[rdmaOff:], 12)
			remoteBefore := append([]byte(nil), b.mr.Bytes()[rdmaOff:]...)
			wr := vrdma.SendWR{ID: 4, Opcode: c.op, Flags: ibv.SendSignaled, Imm: 44, SGL: sges(a.mr, local),
				RemoteAddr: b.mr.Addr() + rdmaOff + 10, RKey: b.mr.RKey()}
			if c.op == ibv.WRRDMARead {
				wr.SGL = sges(a.mr, readDst)
			}
			if c.typ == ibv.UD {
				wr = a.sendTo(wr, b)
			}
			consume := c.op == ibv.WRSend || c.op == ibv.WRSendImm || c.op == ibv.WRRDMAWriteImm
			if consume {
				postRecv(t, b.qp, recvWR(40, sges(b.mr, recv)...))
			}
			post(t, a.qp, wr)
			checkWC(t, pollOne(t, a.scq), sendWC(a, 4, wcOpcode(c.op), total))
			if consume {
				want := recvWC(b, 40, total, a)
				switch {
				case c.typ == ibv.UD:
					want.ByteLen += grhLen
					want.Flags = ibv.WCWithGRH
				case c.op == ibv.WRRDMAWriteImm:
					want.Opcode = ibv.WCRecvRDMAImm
				}
				if c.op != ibv.WRSend {
					want = withImm(want, 44)
				}
				checkWC(t, pollOne(t, b.rcq), want)
			}
			expectEmpty(t, a.scq, b.rcq)
			sent := gather(a.mr, local)
			switch c.op {
			case ibv.WRRDMARead:
				expectBytes(t, "read into four SGEs", gather(a.mr, readDst), remoteBefore[10:10+total])
			case ibv.WRRDMAWrite, ibv.WRRDMAWriteImm:
				got := b.mr.Bytes()[rdmaOff:]
				arrived(t, c.typ, got[10:10+total], sent)
				expectBytes(t, "written from four SGEs", got[10:10+total], sent)
				expectBytes(t, "before the write", got[:10], remoteBefore[:10])
				expectBytes(t, "after the write", got[10+total:], remoteBefore[10+total:])
				expectZero(t, "receive buffers", b.mr.Bytes()[recvOff:rdmaOff])
			default:
				got := gather(b.mr, recv)
				if c.typ == ibv.UD {
					got = got[grhLen:]
				}
				expectBytes(t, "received into four SGEs", got[:total], sent)
				expectZero(t, "past the message", got[total:])
			}
		})
	}
}

// TestConformanceInline sends inline data, given directly or gathered from
// the SGL at post time, and checks it is the data at post time that travels.
func TestConformanceInline(t *testing.T) { inEveryMode(t, conformanceInline) }

func conformanceInline(t *testing.T, e *confEnv) {
	cases := []struct {
		typ    ibv.QPType
		op     ibv.Opcode
		gather bool // SendInline flag with an SGL, rather than SendWR.Inline
	}{
		{ibv.RC, ibv.WRSend, false},
		{ibv.RC, ibv.WRSendImm, false},
		{ibv.RC, ibv.WRRDMAWrite, false},
		{ibv.RC, ibv.WRRDMAWriteImm, false},
		{ibv.RC, ibv.WRSend, true},
		{ibv.RC, ibv.WRRDMAWrite, true},
		{ibv.UC, ibv.WRSend, false},
		{ibv.UC, ibv.WRRDMAWrite, true},
		{ibv.UD, ibv.WRSend, false},
		{ibv.UD, ibv.WRSendImm, true},
	}
	for _, c := range cases {
		name := c.typ.String() + "/" + c.op.String()
		if c.gather {
			name += "/gathered"
		}
		t.Run(name, func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: c.typ})
			const n = 60 // within confCap.MaxInlineData
			want := pattern(n, 21)
			wr := vrdma.SendWR{ID: 3, Opcode: c.op, Flags: ibv.SendSignaled, Imm: 5, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()}
			if c.gather {
				copy(a.mr.Bytes()[srcOff:], want[:25])
				copy(a.mr.Bytes()[srcOff+500:], want[25:])
				wr.Flags |= ibv.SendInline
				wr.SGL = []ibv.SGE{a.mr.SGE(srcOff, 25), a.mr.SGE(srcOff+500, n-25)}
			} else {
				wr.Inline = append([]byte(nil), want...)
			}
			if c.typ == ibv.UD {
				wr = a.sendTo(wr, b)
			}
			consume := c.op != ibv.WRRDMAWrite
			if consume {
				postRecv(t, b.qp, recvWR(30, b.mr.SGE(recvOff, 200)))
			}
			// Inline data is copied at post time: overwriting the sources
			// right after posting must not change what travels.
			post(t, a.qp, wr)
			fill(a.mr.Bytes()[srcOff:srcOff+1000], 99)
			for i := range wr.Inline {
				wr.Inline[i] = 0
			}
			checkWC(t, pollOne(t, a.scq), sendWC(a, 3, wcOpcode(c.op), n))
			got := b.mr.Bytes()[rdmaOff : rdmaOff+n]
			if consume {
				w := recvWC(b, 30, n, a)
				if c.op != ibv.WRSend {
					w = withImm(w, 5)
				}
				switch {
				case c.typ == ibv.UD:
					w.ByteLen += grhLen
					w.Flags |= ibv.WCWithGRH
					got = b.mr.Bytes()[recvOff+grhLen : recvOff+grhLen+n]
				case c.op == ibv.WRRDMAWriteImm:
					w.Opcode = ibv.WCRecvRDMAImm
				default:
					got = b.mr.Bytes()[recvOff : recvOff+n]
				}
				checkWC(t, pollOne(t, b.rcq), w)
			}
			arrived(t, c.typ, got, want)
			expectBytes(t, "inline data", got, want)
		})
	}
	t.Run("too long", func(t *testing.T) {
		a, b := e.pair(t, pairSpec{typ: ibv.RC})
		max := a.qp.Cap().MaxInlineData
		if max < confCap.MaxInlineData {
			t.Fatalf("MaxInlineData %d granted, %d asked", max, confCap.MaxInlineData)
		}
		postRecv(t, b.qp, recvWR(1, b.mr.SGE(recvOff, 1024)))
		ok := vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, Inline: pattern(max, 1)}
		long := vrdma.SendWR{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, Inline: pattern(max+1, 1)}
		expectPostErr(t, a.qp.PostSend([]vrdma.SendWR{ok, long}), 1, vrdma.ErrInvalidArgument)
		gathered := vrdma.SendWR{ID: 3, Opcode: ibv.WRSend, Flags: ibv.SendSignaled | ibv.SendInline, SGL: []ibv.SGE{a.mr.SGE(0, max), a.mr.SGE(0, 1)}}
		expectPostErr(t, a.qp.PostSend([]vrdma.SendWR{gathered}), 0, vrdma.ErrInvalidArgument)
		outside := vrdma.SendWR{ID: 4, Opcode: ibv.WRSend, Flags: ibv.SendSignaled | ibv.SendInline, SGL: []ibv.SGE{a.mr.SGE(mrSize-4, 8)}}
		expectPostErr(t, a.qp.PostSend([]vrdma.SendWR{outside}), 0, vrdma.ErrInvalidArgument)
		checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, max))
		checkWC(t, pollOne(t, b.rcq), recvWC(b, 1, max, a))
		expectEmpty(t, a.scq, b.rcq)
	})
}

// TestConformanceSignaling checks which requests complete: unsignaled ones
// only on error, all of them on a SigAll QP.
func TestConformanceSignaling(t *testing.T) { inEveryMode(t, conformanceSignaling) }

func conformanceSignaling(t *testing.T, e *confEnv) {
	cases := []struct {
		name    string
		typ     ibv.QPType
		op      ibv.Opcode
		sigAll  bool
		flags   [3]ibv.SendFlags
		wantIDs []uint64
	}{
		{"RC/unsignaled", ibv.RC, ibv.WRRDMAWrite, false, [3]ibv.SendFlags{0, 0, ibv.SendSignaled}, []uint64{3}},
		{"RC/unsignaled/middle", ibv.RC, ibv.WRSend, false, [3]ibv.SendFlags{ibv.SendSignaled, 0, ibv.SendSignaled}, []uint64{1, 3}},
		{"RC/none", ibv.RC, ibv.WRRDMAWrite, false, [3]ibv.SendFlags{}, nil},
		{"RC/SigAll", ibv.RC, ibv.WRRDMAWrite, true, [3]ibv.SendFlags{}, []uint64{1, 2, 3}},
		{"RC/SigAll/SEND", ibv.RC, ibv.WRSend, true, [3]ibv.SendFlags{0, ibv.SendSignaled, 0}, []uint64{1, 2, 3}},
		{"UC/unsignaled", ibv.UC, ibv.WRSend, false, [3]ibv.SendFlags{0, ibv.SendSignaled, 0}, []uint64{2}},
		{"UC/SigAll", ibv.UC, ibv.WRRDMAWrite, true, [3]ibv.SendFlags{}, []uint64{1, 2, 3}},
		{"UD/unsignaled", ibv.UD, ibv.WRSend, false, [3]ibv.SendFlags{0, 0, ibv.SendSignaled}, []uint64{3}},
		{"UD/SigAll", ibv.UD, ibv.WRSend, true, [3]ibv.SendFlags{}, []uint64{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: c.typ, sigAll: c.sigAll})
			const n = 64
			src := fill(a.mr.Bytes()[srcOff:srcOff+3*n], 31)
			send := c.op == ibv.WRSend
			var wrs []vrdma.SendWR
			for i := 0; i < 3; i++ {
				wr := vrdma.SendWR{ID: uint64(i + 1), Opcode: c.op, Flags: c.flags[i], SGL: []ibv.SGE{a.mr.SGE(srcOff+i*n, n)},
					RemoteAddr: b.mr.Addr() + rdmaOff + uint64(i*n), RKey: b.mr.RKey()}
				if c.typ == ibv.UD {
					wr = a.sendTo(wr, b)
				}
				wrs = append(wrs, wr)
				if send {
					off := recvOff + i*256
					postRecv(t, b.qp, recvWR(uint64(10+i), b.mr.SGE(off, 256)))
				}
			}
			// A signaled marker request, so that the absence of the others'
			// completions is known once it completes.
			marker := vrdma.SendWR{ID: 99, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 1)}}
			if c.typ == ibv.UD {
				marker = a.sendTo(marker, b)
			}
			postRecv(t, b.qp, recvWR(98, b.mr.SGE(recvOff+4096, 256)))
			post(t, a.qp, append(wrs, marker)...)
			got := pollN(t, a.scq, len(c.wantIDs)+1)
			for i, id := range c.wantIDs {
				checkWC(t, got[i], sendWC(a, id, wcOpcode(c.op), n))
			}
			checkWC(t, got[len(c.wantIDs)], sendWC(a, 99, ibv.WCSend, 1))
			expectEmpty(t, a.scq)
			// Every request ran, signaled or not.
			nrecv := 1
			if send {
				nrecv = 4
			}
			rwcs := pollN(t, b.rcq, nrecv)
			for i := 0; i < 3; i++ {
				var got []byte
				if send {
					off := recvOff + i*256
					w := recvWC(b, uint64(10+i), n, a)
					if c.typ == ibv.UD {
						off += grhLen
						w.ByteLen += grhLen
						w.Flags = ibv.WCWithGRH
					}
					checkWC(t, rwcs[i], w)
					got = b.mr.Bytes()[off : off+n]
				} else {
					got = b.mr.Bytes()[rdmaOff+i*n : rdmaOff+(i+1)*n]
				}
				expectBytes(t, "request data", got, src[i*n:(i+1)*n])
			}
		})
	}
	t.Run("unsignaled error completes", func(t *testing.T) {
		a, b := e.pair(t, pairSpec{typ: ibv.RC})
		post(t, a.qp,
			vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
			vrdma.SendWR{ID: 2, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x80},
			vrdma.SendWR{ID: 3, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		got := pollN(t, a.scq, 2)
		checkWC(t, got[0], errWC(a, 2, ibv.WCRemAccessErr))
		// Flushed requests complete whether signaled or not.
		checkWC(t, got[1], errWC(a, 3, ibv.WCWRFlushErr))
	})
}

// TestConformanceFence checks that a fenced request sees the results of the
// READ and atomic requests before it.
func TestConformanceFence(t *testing.T) { inEveryMode(t, conformanceFence) }

func conformanceFence(t *testing.T, e *confEnv) {
	cases := []struct {
		name  string
		first func(a, b *side) vrdma.SendWR
		want  func(b *side) []byte
	}{
		{"READ then SEND", func(a, b *side) vrdma.SendWR {
			return vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMARead, SGL: []ibv.SGE{a.mr.SGE(dstOff, 256)}, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()}
		}, func(b *side) []byte { return b.mr.Bytes()[rdmaOff : rdmaOff+256] }},
		{"FETCH_AND_ADD then SEND", func(a, b *side) vrdma.SendWR {
			return vrdma.SendWR{ID: 1, Opcode: ibv.WRAtomicFetchAndAdd, SGL: []ibv.SGE{a.mr.SGE(dstOff, 8)}, RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey(), CompareAdd: 1}
		}, func(b *side) []byte { return pattern(256, 41)[:8] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: ibv.RC})
			fill(b.mr.Bytes()[rdmaOff:rdmaOff+256], 41)
			want := append([]byte(nil), c.want(b)...)
			n := len(want)
			postRecv(t, b.qp, recvWR(7, b.mr.SGE(recvOff, 512)))
			post(t, a.qp, c.first(a, b),
				vrdma.SendWR{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled | ibv.SendFence, SGL: []ibv.SGE{a.mr.SGE(dstOff, n)}})
			checkWC(t, pollOne(t, a.scq), sendWC(a, 2, ibv.WCSend, n))
			checkWC(t, pollOne(t, b.rcq), recvWC(b, 7, n, a))
			expectBytes(t, "fenced SEND carried", b.mr.Bytes()[recvOff:recvOff+n], want)
		})
	}
}

// TestConformanceOrdering posts many requests at once and checks that they
// complete, and take effect, in order.
func TestConformanceOrdering(t *testing.T) { inEveryMode(t, conformanceOrdering) }

func conformanceOrdering(t *testing.T, e *confEnv) {
	for _, typ := range []ibv.QPType{ibv.RC, ibv.UC} {
		t.Run(typ.String()+"/WRITEs then SEND", func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: typ})
			const k, n = 48, 128
			fill(a.mr.Bytes()[srcOff:srcOff+k*n], 51)
			var wrs []vrdma.SendWR
			for i := 0; i < k; i++ {
				wrs = append(wrs, vrdma.SendWR{ID: uint64(i), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
					SGL: []ibv.SGE{a.mr.SGE(srcOff+i*n, n)}, RemoteAddr: b.mr.Addr() + rdmaOff + uint64(i*n), RKey: b.mr.RKey()})
			}
			// Overlapping writes: the last one wins.
			wrs = append(wrs, vrdma.SendWR{ID: k, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGL: []ibv.SGE{a.mr.SGE(srcOff, n)}, RemoteAddr: b.mr.Addr() + rdmaOff + n, RKey: b.mr.RKey()})
			wrs = append(wrs, vrdma.SendWR{ID: k + 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 4)}})
			postRecv(t, b.qp, recvWR(1, b.mr.SGE(recvOff, 64)))
			post(t, a.qp, wrs...)
			// When the SEND's receive completes, every earlier WRITE is visible.
			checkWC(t, pollOne(t, b.rcq), recvWC(b, 1, 4, a))
			want := append([]byte(nil), a.mr.Bytes()[srcOff:srcOff+k*n]...)
			copy(want[n:], a.mr.Bytes()[srcOff:srcOff+n])
			expectBytes(t, "written", b.mr.Bytes()[rdmaOff:rdmaOff+k*n], want)
			for i, wc := range pollN(t, a.scq, k+2) {
				op, l := ibv.WCRDMAWrite, n
				if i == k+1 {
					op, l = ibv.WCSend, 4
				}
				checkWC(t, wc, sendWC(a, uint64(i), op, l))
			}
		})
	}
	for _, typ := range []ibv.QPType{ibv.RC, ibv.UC, ibv.UD} {
		t.Run(typ.String()+"/SENDs", func(t *testing.T) {
			a, b := e.pair(t, pairSpec{typ: typ})
			const k, n = 40, 100
			fill(a.mr.Bytes()[srcOff:srcOff+k*n], 61)
			var wrs []vrdma.SendWR
			for i := 0; i < k; i++ {
				postRecv(t, b.qp, recvWR(uint64(1000+i), b.mr.SGE(recvOff+i*192, 192)))
				wr := vrdma.SendWR{ID: uint64(i), Opcode: ibv.WRSendImm, Imm: uint32(i), SGL: []ibv.SGE{a.mr.SGE(srcOff+i*n, n)}}
				if i%5 == 4 {
					wr.Flags = ibv.SendSignaled
				}
				if typ == ibv.UD {
					wr = a.sendTo(wr, b)
				}
				wrs = append(wrs, wr)
			}
			post(t, a.qp, wrs...)
			for i, wc := range pollN(t, b.rcq, k) {
				w, off := withImm(recvWC(b, uint64(1000+i), n, a), uint32(i)), recvOff+i*192
				if typ == ibv.UD {
					w.ByteLen += grhLen
					w.Flags |= ibv.WCWithGRH
					off += grhLen
				}
				checkWC(t, wc, w)
				if !bytes.Equal(b.mr.Bytes()[off:off+n], a.mr.Bytes()[srcOff+i*n:srcOff+(i+1)*n]) {
					t.Fatalf("receive %d does not hold message %d", 1000+i, i)
				}
			}
			for i, wc := range pollN(t, a.scq, k/5) {
				checkWC(t, wc, sendWC(a, uint64(5*i+4), ibv.WCSend, n))
			}
		})
	}
}

// TestConformanceTinyQueues runs a pair whose queues hold one request each:
// the rings of such a QP still lie where the library expects them.
func TestConformanceTinyQueues(t *testing.T) { inEveryMode(t, conformanceTinyQueues) }

func conformanceTinyQueues(t *testing.T, e *confEnv) {
	a, b := e.pair(t, pairSpec{typ: ibv.RC, cap: vrdma.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	for i := uint64(1); i <= 3; i++ {
		src := fill(a.mr.Bytes()[srcOff:srcOff+64], byte(i))
		postRecv(t, b.qp, recvWR(i, b.mr.SGE(recvOff, 64)))
		post(t, a.qp, vrdma.SendWR{ID: i, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 64)}})
		checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCSend, 64))
		checkWC(t, pollOne(t, b.rcq), recvWC(b, i, 64, a))
		expectBytes(t, "received", b.mr.Bytes()[recvOff:recvOff+64], src)
	}
}
